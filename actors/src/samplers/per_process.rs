//! Reading one per-process source for every process of a tick and summing its fields
//! with the spec's coverage rules: global adds what each process supplies; application
//! and tree scopes are all-or-nothing; a process that exited after listing is skipped,
//! but a zombie listed as one is a sampled process without the counter.

use crate::platform::os::process_stat::ProcessStat;
use crate::platform::{ReadError, ReadErrorClass};
use crate::scope::{ProcessIdentity, ResolvedScope, ScopeTarget};

use super::ReadProblems;

/// One source read for every process of the scope.
#[derive(Debug, Clone, PartialEq)]
pub struct PerProcess<T> {
    /// Values of the processes that supplied the source.
    pub values: Vec<(ProcessIdentity, T)>,
    /// Processes that are alive but did not supply it (denied, unparsable, absent).
    pub missing: u64,
    /// Whether every process must supply a field for its total to exist.
    pub all_or_nothing: bool,
    /// Processes the scope could not read at all (they make totals unavailable in
    /// all-or-nothing scopes).
    pub unreadable_in_scope: u64,
}

/// Calls `read` for each process of `scope` (given its `stat`), skipping those that
/// exited.
pub fn read_per_process<T>(
    scope: &ResolvedScope,
    problems: &mut ReadProblems,
    mut read: impl FnMut(&ProcessStat) -> Result<Option<T>, ReadError>,
) -> PerProcess<T> {
    let mut values = Vec::with_capacity(scope.processes.len());
    let mut missing = 0;
    for process in &scope.processes {
        match read(process) {
            Ok(Some(value)) => values.push((ProcessIdentity::of(process), value)),
            Ok(None) => missing += 1,
            // A zombie answers ESRCH for what it no longer has (an address space): it
            // is listed and sampled, and lacks the counter, which no read failure is.
            Err(error) if error.class() == ReadErrorClass::TargetGone && process.is_zombie() => {
                missing += 1
            }
            Err(error) if error.class() == ReadErrorClass::TargetGone => {}
            Err(error) => {
                problems.add(&error);
                missing += 1;
            }
        }
    }
    PerProcess {
        values,
        missing,
        all_or_nothing: !matches!(scope.target, ScopeTarget::Global),
        unreadable_in_scope: scope.unreadable_processes,
    }
}

/// Derives a value from each process's `stat`, already read by scope resolution.
pub fn from_stats<T>(scope: &ResolvedScope, value: impl Fn(&ProcessStat) -> T) -> PerProcess<T> {
    PerProcess {
        values: scope
            .processes
            .iter()
            .map(|process| (ProcessIdentity::of(process), value(process)))
            .collect(),
        missing: 0,
        all_or_nothing: !matches!(scope.target, ScopeTarget::Global),
        unreadable_in_scope: scope.unreadable_processes,
    }
}

impl<T> PerProcess<T> {
    /// The total of one field and how many processes supplied it. `None` when no
    /// process supplied it, the sum overflows, or (application and tree scopes) any
    /// live process lacks it.
    pub fn sum(&self, field: impl Fn(&T) -> Option<u64>) -> (Option<u64>, u64) {
        let mut supplied = 0;
        let mut total: Option<u64> = None;
        let mut overflow = false;
        for (_, value) in &self.values {
            if let Some(amount) = field(value) {
                supplied += 1;
                match total.unwrap_or(0).checked_add(amount) {
                    Some(sum) => total = Some(sum),
                    None => overflow = true,
                }
            }
        }
        let complete = self.missing == 0
            && self.unreadable_in_scope == 0
            && supplied == self.values.len() as u64;
        if overflow || (self.all_or_nothing && !complete) {
            return (None, supplied);
        }
        (total, supplied)
    }
}
