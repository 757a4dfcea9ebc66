//! What a new Agent scope is, as the pipeline's callers describe it.

use uuid::Uuid;

/// What a new Agent scope is: its name, where it sits, whose it is and how it weighs
/// against the scopes live beside it.
#[derive(Debug, Clone, Copy)]
pub struct ScopeStart<'a> {
    /// Its name.
    pub name: &'a str,
    /// The live scope it is opened inside, if any.
    pub parent: Option<Uuid>,
    /// ATOF scope flags for its start and end events.
    pub attributes: &'a [&'static str],
    /// The process that opened it: where a device reports process shares, the scope
    /// is attributed from that process's share.
    pub process_id: Option<u32>,
    /// Its weight among the innermost scopes live beside it (tokens, batch size); 1
    /// when `None`.
    pub weight: Option<f64>,
    /// The caller's W3C `traceparent` (checked by the caller): the scope's span is a
    /// child of that span.
    pub traceparent: Option<&'a str>,
}

impl<'a> ScopeStart<'a> {
    /// A top-level scope named `name`, opened by this process, of weight 1.
    pub fn local(name: &'a str) -> Self {
        ScopeStart {
            name,
            parent: None,
            attributes: &[],
            process_id: Some(std::process::id()),
            weight: None,
            traceparent: None,
        }
    }
}
