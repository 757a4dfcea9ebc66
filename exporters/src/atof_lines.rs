//! How pipeline events become ATOF lines (JSON, no trailing newline): the envelope in
//! its field order, scopes, marks, a poll's copies rendered from one shared tail, and
//! energy records. Pure: the file, its frames and its failures are `crate::atof`'s.

use chrono::{DateTime, SecondsFormat, Utc};
use serde::Serialize;
use uuid::Uuid;
use wattline_model::energy::EnergyRecord;
use wattline_model::events::{
    Mark, MarkCopies, MarkCopy, ScopeCategory, ScopeEvent, ScopeKind, new_uuid,
};
use wattline_model::metric_measurements::{
    METRIC_MEASUREMENTS_SCHEMA, METRIC_MEASUREMENTS_SCHEMA_VERSION,
};

use crate::exporter::ExportError;
use crate::metric_schema::validate_metric_measurements;

/// The ATOF version written in every line.
pub const ATOF_VERSION: &str = "0.1";
/// The mark name a [`wattline_model::events::PipelineEvent::Metrics`] batch is written under.
pub const METRICS_MARK_NAME: &str = "wattline.metrics";
/// The mark name an energy record is written under.
pub const ENERGY_MARK_NAME: &str = "wattline.energy";
/// The data schema of an energy record (`wattline_model::energy::EnergyRecord`).
pub const ENERGY_RECORD_SCHEMA: &str = "wattline.energy_record";
/// The subtype of a custom scope without a parent.
pub const ROOT_SCOPE_SUBTYPE: &str = "root";

#[derive(Serialize)]
struct DataSchema {
    name: &'static str,
    version: &'static str,
}

const MEASUREMENTS_SCHEMA: DataSchema = DataSchema {
    name: METRIC_MEASUREMENTS_SCHEMA,
    version: METRIC_MEASUREMENTS_SCHEMA_VERSION,
};

const ENERGY_SCHEMA: DataSchema = DataSchema {
    name: ENERGY_RECORD_SCHEMA,
    version: "1",
};

/// The common head of every line, then the kind-specific tail, in order.
#[derive(Serialize)]
struct Envelope<'a, Data: Serialize, Tail: Serialize> {
    kind: &'static str,
    atof_version: &'static str,
    uuid: Uuid,
    parent_uuid: Option<Uuid>,
    propagation_root_uuid: Option<Uuid>,
    timestamp: String,
    name: &'a str,
    data: Option<&'a Data>,
    data_schema: Option<DataSchema>,
    metadata: Option<()>,
    #[serde(flatten)]
    tail: Tail,
}

#[derive(Serialize)]
struct ScopeTail<'a> {
    scope_category: ScopeCategory,
    attributes: &'a [&'static str],
    category: &'static str,
    category_profile: Option<CategoryProfile>,
}

#[derive(Serialize)]
struct CategoryProfile {
    subtype: String,
}

/// The first fields of an [`Envelope`], exactly as it writes them: what differs
/// between the copies of one mark.
#[derive(Serialize)]
struct EnvelopeHead {
    kind: &'static str,
    atof_version: &'static str,
    uuid: Uuid,
    parent_uuid: Option<Uuid>,
    propagation_root_uuid: Option<Uuid>,
}

#[derive(Serialize)]
struct MarkTail {
    category: Option<()>,
    category_profile: Option<()>,
}

/// The timestamp as the reference writes it: RFC 3339, `+00:00`, nanoseconds.
pub fn format_timestamp(timestamp: DateTime<Utc>) -> String {
    timestamp.to_rfc3339_opts(SecondsFormat::Nanos, false)
}

/// One scope event as an ATOF line (no trailing newline). Agent scopes have category
/// `agent`; other scopes `custom` with subtype `root` when they have no parent, else
/// their name.
pub fn render_scope(
    scope: &ScopeEvent,
    propagation_root: Option<Uuid>,
) -> Result<String, ExportError> {
    let (category, category_profile) = match scope.kind {
        ScopeKind::Agent => ("agent", None),
        ScopeKind::Custom => {
            let subtype = match scope.parent_uuid {
                None => ROOT_SCOPE_SUBTYPE.to_string(),
                Some(_) => scope.name.to_string(),
            };
            ("custom", Some(CategoryProfile { subtype }))
        }
    };
    let line = Envelope::<(), _> {
        kind: "scope",
        atof_version: ATOF_VERSION,
        uuid: scope.uuid,
        parent_uuid: scope.parent_uuid,
        propagation_root_uuid: propagation_root,
        timestamp: format_timestamp(scope.timestamp),
        name: &scope.name,
        data: None,
        data_schema: None,
        metadata: None,
        tail: ScopeTail {
            scope_category: scope.scope_category,
            attributes: &scope.attributes,
            category,
            category_profile,
        },
    };
    Ok(serde_json::to_string(&line)?)
}

/// One mark as an ATOF line (no trailing newline), after validating its data against
/// `nemo.relay.metric_measurements` v1.
pub fn render_mark(mark: &Mark, propagation_root: Option<Uuid>) -> Result<String, ExportError> {
    validate_metric_measurements(&mark.data).map_err(|reason| ExportError::InvalidMark {
        name: mark.name.clone(),
        reason,
    })?;
    let line = Envelope {
        kind: "mark",
        atof_version: ATOF_VERSION,
        uuid: mark.uuid,
        parent_uuid: mark.parent_uuid,
        propagation_root_uuid: propagation_root,
        timestamp: format_timestamp(mark.timestamp),
        name: &mark.name,
        data: Some(&mark.data),
        data_schema: Some(MEASUREMENTS_SCHEMA),
        metadata: None,
        tail: MarkTail {
            category: None,
            category_profile: None,
        },
    };
    Ok(serde_json::to_string(&line)?)
}

/// The lines of a mark's copies (no trailing newlines), the same bytes as
/// [`render_mark`] of each copy: the shared part (time, name, data) is serialised once
/// and each copy's head (its UUID, parent, and the propagation root `root_of` gives
/// for that parent) put before it.
pub fn render_mark_copies(
    copies: &MarkCopies,
    root_of: impl Fn(Option<Uuid>) -> Option<Uuid>,
) -> Result<Vec<String>, ExportError> {
    let lines = MarkCopyLines::new(copies)?;
    copies
        .copies
        .iter()
        .map(|copy| lines.line(copy, root_of(copy.parent_uuid)))
        .collect()
}

/// A mark's copies, rendered one line at a time: the part every copy shares is
/// serialised once, so a poll copied under thousands of scopes never holds all its
/// lines at once.
pub struct MarkCopyLines {
    /// From the timestamp key to the end of the line.
    shared: String,
}

impl MarkCopyLines {
    /// Validates the data and serialises the shared part.
    pub fn new(copies: &MarkCopies) -> Result<Self, ExportError> {
        let invalid = |reason: String| ExportError::InvalidMark {
            name: copies.name.clone(),
            reason,
        };
        validate_metric_measurements(&copies.data).map_err(invalid)?;
        let template = serde_json::to_string(&Envelope {
            kind: "mark",
            atof_version: ATOF_VERSION,
            uuid: Uuid::nil(),
            parent_uuid: None,
            propagation_root_uuid: None,
            timestamp: format_timestamp(copies.timestamp),
            name: &copies.name,
            data: Some(&*copies.data),
            data_schema: Some(MEASUREMENTS_SCHEMA),
            metadata: None,
            tail: MarkTail {
                category: None,
                category_profile: None,
            },
        })?;
        // The head's fields come before the timestamp: the rest is every copy's.
        let at = template
            .find(",\"timestamp\":")
            .ok_or_else(|| invalid("the rendered mark has no timestamp".into()))?;
        Ok(MarkCopyLines {
            shared: template[at..].to_owned(),
        })
    }

    /// The line of `copy`, whose propagation root is `root`.
    pub fn line(&self, copy: &MarkCopy, root: Option<Uuid>) -> Result<String, ExportError> {
        let head = serde_json::to_string(&EnvelopeHead {
            kind: "mark",
            atof_version: ATOF_VERSION,
            uuid: copy.uuid,
            parent_uuid: copy.parent_uuid,
            propagation_root_uuid: root,
        })?;
        let open = head.strip_suffix('}').unwrap_or(&head);
        let mut line = String::with_capacity(open.len() + self.shared.len());
        line.push_str(open);
        line.push_str(&self.shared);
        Ok(line)
    }
}

/// One energy record as an ATOF mark line (no trailing newline), under `parent`.
pub fn render_energy_record(
    timestamp: DateTime<Utc>,
    parent: Option<Uuid>,
    record: &EnergyRecord,
) -> Result<String, ExportError> {
    let line = Envelope {
        kind: "mark",
        atof_version: ATOF_VERSION,
        uuid: new_uuid(),
        parent_uuid: parent,
        propagation_root_uuid: parent,
        timestamp: format_timestamp(timestamp),
        name: ENERGY_MARK_NAME,
        data: Some(record),
        data_schema: Some(ENERGY_SCHEMA),
        metadata: None,
        tail: MarkTail {
            category: None,
            category_profile: None,
        },
    };
    Ok(serde_json::to_string(&line)?)
}
