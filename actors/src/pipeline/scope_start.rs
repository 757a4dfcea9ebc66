//! What a new Agent scope is, as the pipeline's callers describe it, and this
//! process's id, which every scope opened here names.

use std::sync::atomic::{AtomicU32, Ordering};

use uuid::Uuid;

/// This process's id, once read; 0 until then and again in a forked child.
static PROCESS_ID: AtomicU32 = AtomicU32::new(0);

/// This process's id without a system call each time (it is asked on every scope's
/// start): read once, and read again in a forked child, whose fork handler forgets it.
pub fn current_process_id() -> u32 {
    let cached = PROCESS_ID.load(Ordering::Relaxed);
    if cached != 0 {
        return cached;
    }
    let id = std::process::id();
    if forgotten_in_forked_children() {
        PROCESS_ID.store(id, Ordering::Relaxed);
    }
    id
}

/// Registers, once, the fork handler that clears the cached id in a child; whether it
/// is registered (else the id is not cached).
#[cfg(unix)]
fn forgotten_in_forked_children() -> bool {
    static REGISTERED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    extern "C" fn forget() {
        PROCESS_ID.store(0, Ordering::Relaxed);
    }
    *REGISTERED.get_or_init(|| {
        // SAFETY: registers a handler that only stores to an atomic, which is safe in
        // a child right after fork.
        let status = unsafe { libc::pthread_atfork(None, None, Some(forget)) };
        if status != 0 {
            tracing::debug!(
                status,
                "pthread_atfork failed; the process id is not cached"
            );
        }
        status == 0
    })
}

/// Without fork, the id never changes.
#[cfg(not(unix))]
fn forgotten_in_forked_children() -> bool {
    true
}

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
            process_id: Some(current_process_id()),
            weight: None,
            traceparent: None,
        }
    }
}
