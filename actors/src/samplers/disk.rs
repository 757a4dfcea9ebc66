//! The disk sampler: process I/O totals and throughput from `/proc/PID/io`, and the
//! capacity of each configured filesystem path.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use super::per_process::{PerProcess, read_per_process};
use super::{ReadProblems, SampleRequest, SamplerOutput, SeriesBaselines};
use crate::platform::os::filesystem::statvfs;
use crate::platform::os::process_io::{ProcessIo, read_process_io};
use crate::readings::FieldCoverage;
use crate::scope::ProcessIdentity;
use wattline_model::snapshot::{DiskReading, FilesystemReading};

/// Canonical coverage keys of the disk sums.
pub const READ_DATA_FIELD: &str = "disk.read_data";
/// See [`READ_DATA_FIELD`].
pub const WRITE_DATA_FIELD: &str = "disk.write_data";
/// See [`READ_DATA_FIELD`].
pub const READ_OPERATIONS_FIELD: &str = "disk.read_operations";
/// See [`READ_DATA_FIELD`].
pub const WRITE_OPERATIONS_FIELD: &str = "disk.write_operations";
/// See [`READ_DATA_FIELD`].
pub const READ_THROUGHPUT_FIELD: &str = "disk.read_throughput";
/// See [`READ_DATA_FIELD`].
pub const WRITE_THROUGHPUT_FIELD: &str = "disk.write_throughput";

#[derive(Debug, Clone)]
struct DiskBaseline {
    at: Instant,
    counters: HashMap<ProcessIdentity, (u64, u64)>,
}

/// The disk sampler's state.
#[derive(Debug)]
pub struct DiskSampler {
    root: PathBuf,
    process_io: bool,
    filesystem_paths: Vec<String>,
    buffer: Vec<u8>,
    baselines: SeriesBaselines<DiskBaseline>,
}

impl DiskSampler {
    /// A sampler reading the OS under `root`; `process_io` turns the process counters
    /// on, `filesystem_paths` lists the capacity paths.
    pub fn new(root: PathBuf, process_io: bool, filesystem_paths: Vec<String>) -> Self {
        DiskSampler {
            root,
            process_io,
            filesystem_paths,
            buffer: Vec::with_capacity(512),
            baselines: SeriesBaselines::default(),
        }
    }

    /// Samples the disk category for one tick.
    pub fn sample(&mut self, request: &SampleRequest) -> SamplerOutput<DiskReading> {
        let mut problems = ReadProblems::default();
        let mut reading = DiskReading {
            filesystems: read_filesystems(&self.filesystem_paths, &mut problems),
            ..DiskReading::default()
        };
        let scope = &request.scope;
        let mut coverage = FieldCoverage::new();
        if self.process_io && !scope.is_unavailable() {
            let root = &self.root;
            let buffer = &mut self.buffer;
            let io = read_per_process(scope, &mut problems, |process| {
                read_process_io(root, process.pid, buffer)
            });
            let (read_bytes, read_supplied) = io.sum(|io| Some(io.read_bytes));
            let (write_bytes, write_supplied) = io.sum(|io| Some(io.write_bytes));
            let (read_operations, read_ops_supplied) = io.sum(|io| Some(io.syscr));
            let (write_operations, write_ops_supplied) = io.sum(|io| Some(io.syscw));
            let previous = self.baselines.take(scope.target, request.series);
            let rates = throughput(previous.as_ref(), &io, request.taken_at);
            self.baselines.store(
                request.series,
                DiskBaseline {
                    at: request.taken_at,
                    counters: io
                        .values
                        .iter()
                        .map(|(identity, io)| (*identity, (io.read_bytes, io.write_bytes)))
                        .collect(),
                },
            );
            reading.read_bytes = read_bytes;
            reading.write_bytes = write_bytes;
            reading.read_operations = read_operations;
            reading.write_operations = write_operations;
            reading.read_bytes_per_second = rates.read;
            reading.write_bytes_per_second = rates.write;
            coverage.extend([
                (READ_DATA_FIELD, read_supplied),
                (WRITE_DATA_FIELD, write_supplied),
                (READ_OPERATIONS_FIELD, read_ops_supplied),
                (WRITE_OPERATIONS_FIELD, write_ops_supplied),
                (READ_THROUGHPUT_FIELD, rates.supplied),
                (WRITE_THROUGHPUT_FIELD, rates.supplied),
            ]);
        }
        SamplerOutput {
            reading,
            coverage,
            problems,
        }
    }
}

/// Throughput of one interval.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
struct Throughput {
    read: Option<f64>,
    write: Option<f64>,
    supplied: u64,
}

/// Bytes per second since the previous sample of the series: each process's change (a
/// newly seen one counts its lifetime counters). `None` on the first sample, when any
/// readable counter decreased, when no process supplied a change, or (application and
/// tree scopes) when any live process lacks its counters.
fn throughput(
    previous: Option<&DiskBaseline>,
    io: &PerProcess<ProcessIo>,
    now: Instant,
) -> Throughput {
    let Some(previous) = previous else {
        return Throughput::default();
    };
    let elapsed = now.saturating_duration_since(previous.at).as_secs_f64();
    let mut read_delta: u64 = 0;
    let mut write_delta: u64 = 0;
    let mut supplied = 0;
    for (identity, counters) in &io.values {
        let (read_before, write_before) =
            previous.counters.get(identity).copied().unwrap_or((0, 0));
        let (Some(read), Some(write)) = (
            counters.read_bytes.checked_sub(read_before),
            counters.write_bytes.checked_sub(write_before),
        ) else {
            return Throughput::default();
        };
        let (Some(read_sum), Some(write_sum)) =
            (read_delta.checked_add(read), write_delta.checked_add(write))
        else {
            return Throughput::default();
        };
        read_delta = read_sum;
        write_delta = write_sum;
        supplied += 1;
    }
    let complete = io.missing == 0 && io.unreadable_in_scope == 0;
    if elapsed <= 0.0 || supplied == 0 || (io.all_or_nothing && !complete) {
        return Throughput {
            supplied,
            ..Throughput::default()
        };
    }
    let rate = |delta: u64| Some(delta as f64 / elapsed).filter(|rate| rate.is_finite());
    Throughput {
        read: rate(read_delta),
        write: rate(write_delta),
        supplied,
    }
}

/// Capacity of each configured path; a failing path keeps its entry with `null`s.
fn read_filesystems(paths: &[String], problems: &mut ReadProblems) -> Vec<FilesystemReading> {
    paths
        .iter()
        .map(|path| match statvfs(Path::new(path)) {
            Ok(capacity) => FilesystemReading {
                path: path.clone(),
                total_bytes: Some(capacity.total_bytes),
                available_bytes: Some(capacity.available_bytes),
                free_bytes: Some(capacity.free_bytes),
            },
            Err(error) => {
                problems.add(&error);
                FilesystemReading {
                    path: path.clone(),
                    ..FilesystemReading::default()
                }
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn io(read_bytes: u64, write_bytes: u64) -> ProcessIo {
        ProcessIo {
            read_bytes,
            write_bytes,
            syscr: 0,
            syscw: 0,
        }
    }

    fn id(pid: u32) -> ProcessIdentity {
        ProcessIdentity {
            pid,
            start_ticks: 100,
        }
    }

    fn per_process(
        values: Vec<(ProcessIdentity, ProcessIo)>,
        missing: u64,
        all_or_nothing: bool,
    ) -> PerProcess<ProcessIo> {
        PerProcess {
            values,
            missing,
            all_or_nothing,
            unreadable_in_scope: 0,
        }
    }

    #[test]
    fn first_sample_has_no_throughput() {
        let io = per_process(vec![(id(1), io(10, 10))], 0, true);
        assert_eq!(throughput(None, &io, Instant::now()), Throughput::default());
    }

    #[test]
    fn change_over_elapsed_time_and_new_processes_count_their_lifetime() {
        let start = Instant::now();
        let previous = DiskBaseline {
            at: start,
            counters: HashMap::from([(id(1), (100, 1000))]),
        };
        let io = per_process(vec![(id(1), io(300, 1000)), (id(2), io(100, 500))], 0, true);
        let rates = throughput(Some(&previous), &io, start + Duration::from_secs(2));
        assert_eq!(rates.read, Some(150.0));
        assert_eq!(rates.write, Some(250.0));
        assert_eq!(rates.supplied, 2);
    }

    #[test]
    fn a_counter_reset_makes_the_interval_unavailable() {
        let start = Instant::now();
        let previous = DiskBaseline {
            at: start,
            counters: HashMap::from([(id(1), (100, 1000))]),
        };
        let io = per_process(vec![(id(1), io(50, 1000))], 0, false);
        assert_eq!(
            throughput(Some(&previous), &io, start + Duration::from_secs(1)),
            Throughput::default()
        );
    }

    #[test]
    fn a_process_scope_needs_every_process() {
        let start = Instant::now();
        let previous = DiskBaseline {
            at: start,
            counters: HashMap::from([(id(1), (0, 0))]),
        };
        let incomplete = per_process(vec![(id(1), io(10, 10))], 1, true);
        let rates = throughput(Some(&previous), &incomplete, start + Duration::from_secs(1));
        assert_eq!((rates.read, rates.write), (None, None));
        // Global scope adds what it could read.
        let global = per_process(vec![(id(1), io(10, 10))], 1, false);
        assert_eq!(
            throughput(Some(&previous), &global, start + Duration::from_secs(1)).read,
            Some(10.0)
        );
    }
}
