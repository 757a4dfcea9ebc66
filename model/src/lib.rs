//! wattline's data, with no runtime and no OS in it: what the pipeline produces and
//! what the exporters, the report and the language packages read. The events that flow
//! ([`events`]), the energy stage's records ([`energy`]) and the figures it passes the
//! exporters ([`energy_telemetry`]) with the naming table they are sent by
//! ([`telemetry_names`]), the GPU selection a run
//! counts ([`gpu_selection`]), the metric names on the wire ([`metric_names`]), the
//! samplers' base-unit readings and the snapshot records converted from them
//! ([`snapshot`]) and the marks made from those ([`marks`]), with each gauge's
//! semantic-convention equivalent ([`semconv`]), the sampling series a reading belongs
//! to ([`series`]), and the energy/cost report a run ends with ([`report`]), and a
//! step's final energy ([`scope_energy`]).

#![warn(missing_docs)]

pub mod category;
pub mod energy;
pub mod energy_telemetry;
pub mod events;
pub mod gpu_selection;
pub mod marks;
pub mod measurement;
pub mod metric_measurements;
pub mod metric_names;
pub mod receipt;
pub mod remote_call;
pub mod report;
pub mod scope_energy;
pub mod semconv;
pub mod series;
pub mod snapshot;
pub mod telemetry_names;
pub mod trace_context;
