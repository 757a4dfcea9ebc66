//! The process sampler: process, descendant, thread and open-descriptor counts, and
//! the exclusive cgroup's process-limit events.

use std::path::PathBuf;

use super::per_process::{from_stats, read_per_process};
use super::{ReadProblems, SampleRequest, SamplerOutput};
use crate::platform::os::fd_count::{FdCountSource, fd_count_source, read_fd_count};
use crate::readings::FieldCoverage;
use crate::scope::ScopeTarget;
use wattline_model::snapshot::{LimitEventKind, LimitResource};
use wattline_model::snapshot::{LimitEventReading, ProcessReading};

/// Canonical coverage key of the thread sum.
pub const THREAD_COUNT_FIELD: &str = "process.thread_count";
/// Canonical coverage key of the descriptor sum.
pub const OPEN_FILE_DESCRIPTOR_FIELD: &str = "process.open_file_descriptor_count";
/// Windows only; always zero processes here.
pub const WINDOWS_HANDLE_FIELD: &str = "process.windows_handle_count";

/// The process sampler's state.
#[derive(Debug)]
pub struct ProcessSampler {
    root: PathBuf,
    /// How `root`'s `/proc` tells descriptor counts, asked once.
    fd_counts: FdCountSource,
}

impl ProcessSampler {
    /// A sampler reading the OS under `root`.
    pub fn new(root: PathBuf) -> Self {
        let fd_counts = fd_count_source(&root);
        ProcessSampler { root, fd_counts }
    }

    /// Samples the process category for one tick.
    pub fn sample(&mut self, request: &SampleRequest) -> SamplerOutput<ProcessReading> {
        let scope = &request.scope;
        let mut problems = ReadProblems::default();
        if scope.is_unavailable() {
            return SamplerOutput::default();
        }
        let threads = from_stats(scope, |p| p.thread_count);
        let (thread_count, thread_supplied) = threads.sum(|count| Some(*count));
        let (root, source) = (&self.root, self.fd_counts);
        let descriptors = read_per_process(scope, &mut problems, |process| {
            read_fd_count(root, process.pid, source)
        });
        let (descriptor_count, descriptor_supplied) = descriptors.sum(|count| Some(*count));
        let descendant_count = match scope.target {
            ScopeTarget::Global => None,
            ScopeTarget::ApplicationProcess(_) => Some(0),
            // Live descendants: the root is first in the list.
            ScopeTarget::ProcessTree(_) => Some(scope.processes.len().saturating_sub(1) as u64),
        };
        let limit_events = request
            .environment
            .cgroup
            .as_ref()
            .and_then(|group| group.pids_max_events)
            .map(|count| LimitEventReading {
                resource: LimitResource::Processes,
                event: LimitEventKind::Maximum,
                count: Some(count),
            })
            .into_iter()
            .collect();
        SamplerOutput {
            reading: ProcessReading {
                active_count: Some(scope.visible_processes),
                descendant_count,
                thread_count,
                open_file_descriptor_count: descriptor_count,
                limit_events,
            },
            coverage: FieldCoverage::from([
                (THREAD_COUNT_FIELD, thread_supplied),
                (OPEN_FILE_DESCRIPTOR_FIELD, descriptor_supplied),
                (WINDOWS_HANDLE_FIELD, 0),
            ]),
            problems,
        }
    }
}
