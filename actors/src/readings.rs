//! What travels beside the samplers' base-unit readings: how many processes each
//! summed field covered. The readings themselves, one record per category, are data
//! beside the records they convert to (`wattline_model::snapshot`), and the series a
//! request is for is the model's (`wattline_model::series`).

use std::collections::BTreeMap;

/// Coverage of each process-summed field, keyed by canonical path.
pub type FieldCoverage = BTreeMap<&'static str, u64>;
