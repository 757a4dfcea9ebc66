//! The ATOF file exporter: each pipeline event as one JSON line in a file created 0600,
//! fsynced at flush and shutdown, that keeps going after a write error.
//!
//! Envelope order: `kind, atof_version, uuid, parent_uuid, timestamp, name, data,
//! data_schema, metadata`, then `scope_category, attributes, category,
//! category_profile` for scopes and `category, category_profile` (both `null`) for marks.
//! Absent fields are written as `null`. A [`PipelineEvent::Metrics`] batch is written as
//! a mark named [`METRICS_MARK_NAME`] with the same schema, under the live root scope
//! (the last scope started without a parent) or with no parent; so is the energy
//! stage's telemetry ([`PipelineEvent::GpuTelemetry`], [`PipelineEvent::RaplIntervals`])
//! under the specification's names ([`crate::energy_names`]), unless it names no series.
//! A step's final energy
//! ([`PipelineEvent::ScopeEnergy`]) is a mark named
//! [`wattline_model::scope_energy::SCOPE_ENERGY_MARK_NAME`] under that scope, stamped
//! with its end, carrying its histogram observations.
//!
//! After a failed write the partial line is cut off, the file is closed, and the line
//! waits in a bounded backlog ([`MAX_PENDING_LINES`]); the next event (or flush) re-opens
//! the file in append mode and writes the backlog first, so nothing already written is
//! lost and a transient failure loses nothing at all.
//!
//! Compressed (`compression = "zstd"`), lines gather in an open frame that is closed,
//! compressed and written as one independent zstd frame at every flush and when it holds
//! [`FRAME_BYTES`] of lines; a failed write cuts the partial frame off and the frame
//! waits in a backlog of [`MAX_PENDING_FRAMES`]. With `max_file_bytes`, a line or frame
//! that would take the file past it goes to the next part of the set instead
//! ([`crate::atof_files`]); a line or frame is never split between files.

use std::collections::{HashMap, VecDeque};
use std::fmt::Write as _;
use std::fs::{File, OpenOptions};
use std::io::Write;
#[cfg(unix)]
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use uuid::Uuid;
use wattline_config::{AtofCompression, AtofConfig, AtofWriteMode};
use wattline_model::events::{
    Mark, MarkCopies, PipelineEvent, ScopeCategory, ScopeEvent, ScopeKind, new_uuid,
};
use wattline_model::metric_measurements::{MetricMeasurement, MetricMeasurements};

use wattline_model::scope_energy::SCOPE_ENERGY_MARK_NAME;

use crate::atof_files::{list_parts, part_file_name};
use crate::atof_frames::{FrameCompressor, cut_unfinished_frame};
use crate::energy_names;
use crate::exporter::{BuildError, ExportError, Exporter, ExporterKind};

pub use crate::atof_lines::{
    ATOF_VERSION, ENERGY_MARK_NAME, ENERGY_RECORD_SCHEMA, METRICS_MARK_NAME, MarkCopyLines,
    ROOT_SCOPE_SUBTYPE, format_timestamp, render_energy_record, render_mark, render_mark_copies,
    render_scope,
};
/// Lines kept for retry after a write error; past this the oldest is dropped and counted.
pub const MAX_PENDING_LINES: usize = 256;
/// Compressed frames kept for retry after a write error; past this the oldest is
/// dropped and its lines counted lost.
pub const MAX_PENDING_FRAMES: usize = 8;

/// A poll's copies are written once this many lines (plain) or frames (zstd) wait:
/// well under either backlog's bound, so none is dropped while the file takes them.
const WRITE_AHEAD_CHUNKS: usize = MAX_PENDING_FRAMES / 2;
/// Uncompressed bytes of lines at which an open frame is closed and written (or
/// `max_file_bytes`, when smaller).
pub const FRAME_BYTES: usize = 1024 * 1024;

/// A compressed file's open frame is closed at the first line that finds it this old,
/// even short of [`FRAME_BYTES`], so a killed run loses little more than the lines of
/// this long (where nothing flushed the exporter for minutes, as at one scope and slow
/// polling, it would otherwise lose up to [`FRAME_BYTES`] of them).
pub const FRAME_MAX_AGE: Duration = Duration::from_secs(5);
/// Permission bits of a file the exporter creates.
pub const FILE_MODE: u32 = 0o600;

/// Bytes written to the file in one `write`: a line (plain) or a frame (zstd), and
/// how many lines it holds.
#[derive(Debug)]
struct Chunk {
    bytes: Vec<u8>,
    lines: u64,
}

/// The lines of a compressed file not yet in a frame.
#[derive(Debug)]
struct OpenFrame {
    compressor: FrameCompressor,
    lines: Vec<u8>,
    line_count: u64,
    /// Uncompressed bytes at which the frame is closed.
    bound: usize,
    /// When its first line came: a frame older than `max_age` is closed at the next
    /// line, so a killed run loses at most that much beside the last frame's lines.
    opened: Option<Instant>,
    max_age: Duration,
}

/// Where the parts of a rotated file go.
#[derive(Debug)]
struct Rotation {
    max_file_bytes: u64,
    directory: PathBuf,
    /// The set's name (unrotated); part `part` is named from it.
    name: String,
    part: u32,
}

/// Writes pipeline events to one ATOF JSON-lines file (or a rotated set of them).
#[derive(Debug)]
pub struct AtofExporter {
    path: PathBuf,
    file: Option<File>,
    /// Length of the file up to the end of the last complete line or frame we wrote.
    good_len: u64,
    /// A failed write left bytes past `good_len` that could not be cut off yet.
    cut_pending: bool,
    pending: VecDeque<Chunk>,
    /// `None` for plain lines.
    open_frame: Option<OpenFrame>,
    rotation: Option<Rotation>,
    lines_written: u64,
    lines_lost: u64,
    /// Lines written to the file now open: lost with it if it is removed.
    lines_in_file: u64,
    root_scope: Option<Uuid>,
    /// The propagation root of each live Agent scope: its own under no other Agent
    /// scope, its outermost Agent ancestor's when nested. Every other scope is its own.
    propagation_roots: HashMap<Uuid, Uuid>,
    shut_down: bool,
}

impl AtofExporter {
    /// Sets how old a compressed file's open frame may grow before the next line
    /// closes it ([`FRAME_MAX_AGE`] by default): what a killed run can lose beyond the
    /// last frame. No effect on a plain file, whose lines are written at once.
    pub fn set_frame_max_age(&mut self, max_age: Duration) {
        if let Some(frame) = self.open_frame.as_mut() {
            frame.max_age = max_age;
        }
    }

    /// Opens the file for `config`, its name rendered from the current time.
    pub fn build(config: &AtofConfig) -> Result<Self, BuildError> {
        Self::build_at(config, Utc::now())
    }

    /// Opens the file for `config`, its name rendered (in UTC) from `opened_at`.
    /// Creates `output_directory` if missing; an error names the path that failed.
    ///
    /// Rotated, appending goes on in the set's last part; overwriting removes every
    /// part of the set first and starts at part 1.
    pub fn build_at(config: &AtofConfig, opened_at: DateTime<Utc>) -> Result<Self, BuildError> {
        config.validate()?;
        let file_name = config.file_name(opened_at)?;
        let directory = PathBuf::from(&config.output_directory);
        let directory_error = |source| BuildError::OutputDirectory {
            path: directory.clone(),
            source,
        };
        std::fs::create_dir_all(&directory).map_err(directory_error)?;
        let truncate = config.mode == AtofWriteMode::Overwrite;
        let rotation = match config.max_file_bytes {
            None => None,
            Some(max_file_bytes) => {
                let parts = list_parts(&directory, &file_name).map_err(directory_error)?;
                let part = if truncate {
                    for (_, path) in &parts {
                        std::fs::remove_file(path).map_err(|source| BuildError::OpenFile {
                            path: path.clone(),
                            source,
                        })?;
                    }
                    1
                } else {
                    parts.last().map_or(1, |(part, _)| *part)
                };
                Some(Rotation {
                    max_file_bytes,
                    directory: directory.clone(),
                    name: file_name.clone(),
                    part,
                })
            }
        };
        let path = match &rotation {
            Some(rotation) => directory.join(part_file_name(&rotation.name, rotation.part)),
            None => directory.join(&file_name),
        };
        let file = open_file(&path, truncate).map_err(|source| BuildError::OpenFile {
            path: path.clone(),
            source,
        })?;
        let open_error = |source| BuildError::OpenFile {
            path: path.clone(),
            source,
        };
        // A file appended to may end in a line (or frame) a killed writer left half
        // written: cut it off, so what is written now stays whole.
        let (good_len, cut_tail) = match config.compression {
            AtofCompression::None => cut_unfinished_line(&path),
            AtofCompression::Zstd => cut_unfinished_frame(&path),
        }
        .map_err(open_error)?;
        if cut_tail {
            tracing::warn!(path = %path.display(), "an unfinished last line or frame was cut off before appending");
        }
        let open_frame = match config.compression {
            AtofCompression::None => None,
            AtofCompression::Zstd => Some(OpenFrame {
                compressor: FrameCompressor::new().map_err(open_error)?,
                lines: Vec::new(),
                line_count: 0,
                bound: config.max_file_bytes.map_or(FRAME_BYTES, |max| {
                    usize::try_from(max).unwrap_or(FRAME_BYTES).min(FRAME_BYTES)
                }),
                opened: None,
                max_age: FRAME_MAX_AGE,
            }),
        };
        Ok(AtofExporter {
            path,
            file: Some(file),
            good_len,
            cut_pending: false,
            pending: VecDeque::new(),
            open_frame,
            rotation,
            lines_written: 0,
            lines_lost: u64::from(cut_tail),
            lines_in_file: 0,
            root_scope: None,
            propagation_roots: HashMap::new(),
            shut_down: false,
        })
    }

    /// The file being written (the current part of a rotated set).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Lines written to the open frame and not yet compressed into the file (zstd).
    pub fn lines_in_open_frame(&self) -> u64 {
        self.open_frame.as_ref().map_or(0, |frame| frame.line_count)
    }

    /// Lines written completely since the exporter was built.
    pub fn lines_written(&self) -> u64 {
        self.lines_written
    }

    /// Lines waiting to be written after a write error (in frames, when compressed).
    pub fn pending_lines(&self) -> usize {
        self.pending
            .iter()
            .map(|chunk| usize::try_from(chunk.lines).unwrap_or(usize::MAX))
            .sum()
    }

    /// Lines given up because the backlog was full.
    pub fn lines_lost(&self) -> u64 {
        self.lines_lost
    }

    /// A metrics batch as a mark under the live root scope.
    fn metrics_line(
        &self,
        timestamp: DateTime<Utc>,
        measurements: Vec<MetricMeasurement>,
    ) -> Result<String, ExportError> {
        render_mark(
            &Mark {
                uuid: new_uuid(),
                parent_uuid: self.root_scope,
                timestamp,
                name: METRICS_MARK_NAME.into(),
                data: MetricMeasurements { measurements },
            },
            self.root_scope,
        )
    }

    /// The energy stage's telemetry as a metrics batch ([`Self::metrics_line`]); `None`
    /// when it names no series (a device that answered nothing, RAPL zones that did not
    /// advance).
    fn telemetry_line(
        &self,
        timestamp: DateTime<Utc>,
        measurements: Vec<MetricMeasurement>,
    ) -> Result<Option<String>, ExportError> {
        if measurements.is_empty() {
            return Ok(None);
        }
        self.metrics_line(timestamp, measurements).map(Some)
    }

    /// The line of `event`; `None` when it has nothing to write.
    fn render(&mut self, event: &PipelineEvent) -> Result<Option<String>, ExportError> {
        let line = match event {
            PipelineEvent::Scope(scope) => {
                if scope.parent_uuid.is_none() {
                    match scope.scope_category {
                        ScopeCategory::Start => self.root_scope = Some(scope.uuid),
                        ScopeCategory::End if self.root_scope == Some(scope.uuid) => {
                            self.root_scope = None;
                        }
                        ScopeCategory::End => {}
                    }
                }
                let root = self.propagation_root_of_scope(scope);
                if scope.scope_category == ScopeCategory::End {
                    self.propagation_roots.remove(&scope.uuid);
                }
                render_scope(scope, Some(root))
            }
            PipelineEvent::Mark(mark) => {
                render_mark(mark, self.propagation_root_under(mark.parent_uuid))
            }
            // Not one line: `export` queues each copy's line as it renders it.
            PipelineEvent::MarkCopies(copies) => Err(ExportError::InvalidMark {
                name: copies.name.clone(),
                reason: "a poll's copies are one line each, queued by `export`".into(),
            }),
            PipelineEvent::Metrics {
                timestamp,
                measurements,
            } => self.metrics_line(*timestamp, measurements.clone()),
            PipelineEvent::GpuTelemetry {
                timestamp,
                telemetry,
            } => return self.telemetry_line(*timestamp, energy_names::gpu_measurements(telemetry)),
            PipelineEvent::RaplIntervals {
                timestamp,
                intervals,
            } => {
                return self.telemetry_line(*timestamp, energy_names::rapl_measurements(intervals));
            }
            PipelineEvent::Energy { timestamp, record } => {
                render_energy_record(*timestamp, self.root_scope, record)
            }
            PipelineEvent::ScopeEnergy {
                settled,
                name_folded,
            } => {
                let energy = &settled.energy;
                let scope = Some(energy.uuid);
                let parent = energy.parent_uuid;
                render_mark(
                    &Mark {
                        uuid: new_uuid(),
                        parent_uuid: scope,
                        // The figures are the scope's as of its end.
                        timestamp: energy.ended_at.unwrap_or(energy.started_at),
                        name: SCOPE_ENERGY_MARK_NAME.into(),
                        data: MetricMeasurements {
                            measurements: settled.measurements(settled.metric_name(*name_folded)),
                        },
                    },
                    // Its parent's root while that is live; a scope of its own root.
                    self.propagation_root_under(parent.or(scope)),
                )
            }
        };
        line.map(Some)
    }

    /// A scope's propagation root; an Agent scope's is remembered while it is live.
    fn propagation_root_of_scope(&mut self, scope: &ScopeEvent) -> Uuid {
        if scope.kind != ScopeKind::Agent {
            return scope.uuid;
        }
        if let Some(root) = self.propagation_roots.get(&scope.uuid) {
            return *root;
        }
        // Inside a live Agent scope: that scope's root; otherwise its own.
        let root = scope
            .parent_uuid
            .and_then(|parent| self.propagation_roots.get(&parent).copied())
            .unwrap_or(scope.uuid);
        self.propagation_roots.insert(scope.uuid, root);
        root
    }

    /// The propagation root of an event under `parent`: the parent's own root (an
    /// Agent scope's, or the root scope itself).
    fn propagation_root_under(&self, parent: Option<Uuid>) -> Option<Uuid> {
        let parent = parent?;
        Some(
            self.propagation_roots
                .get(&parent)
                .copied()
                .unwrap_or(parent),
        )
    }

    /// Writes every pending line, re-opening the file first when a previous error
    /// closed it.
    fn write_pending(&mut self) -> Result<(), ExportError> {
        if self.pending.is_empty() {
            return Ok(());
        }
        if self.file.is_none() {
            let file = self
                .reopen()
                .map_err(|source| self.io_error("open", source))?;
            self.file = Some(file);
        }
        if self.file.as_ref().is_some_and(was_removed) {
            // Removed (the file, or its folder) while open: what it held is gone, and
            // writing on would lose every line silently. A new file takes the rest.
            let gone = std::mem::take(&mut self.lines_in_file);
            self.lines_lost += gone;
            self.file = None;
            return Err(self.io_error(
                "write",
                std::io::Error::other(format!(
                    "the file was removed while open; the {gone} line(s) it held are lost"
                )),
            ));
        }
        while let Some(length) = self.pending.front().map(|chunk| chunk.bytes.len() as u64) {
            if self.file_is_full_before(length) {
                self.rotate()
                    .map_err(|source| self.io_error("rotate", source))?;
            }
            let Some(file) = self.file.as_mut() else {
                return Ok(());
            };
            let Some(chunk) = self.pending.front() else {
                return Ok(());
            };
            match file.write_all(&chunk.bytes) {
                Ok(()) => {
                    self.good_len += length;
                    self.lines_written += chunk.lines;
                    self.lines_in_file += chunk.lines;
                    self.pending.pop_front();
                }
                Err(source) => {
                    // Cut off a partial line (or frame) so the next one starts whole.
                    self.cut_pending = file.set_len(self.good_len).is_err();
                    self.file = None;
                    return Err(self.io_error("write", source));
                }
            }
        }
        Ok(())
    }

    /// Whether writing `length` more bytes would take a rotated file past its bound (a
    /// file holds at least one line or frame, however long).
    fn file_is_full_before(&self, length: u64) -> bool {
        self.rotation.as_ref().is_some_and(|rotation| {
            self.good_len > 0 && self.good_len.saturating_add(length) > rotation.max_file_bytes
        })
    }

    /// Closes the current part (fsynced) and opens the next one of the set.
    fn rotate(&mut self) -> std::io::Result<()> {
        let Some(rotation) = self.rotation.as_mut() else {
            return Ok(());
        };
        if let Some(file) = self.file.take()
            && let Err(error) = file.sync_all()
        {
            tracing::warn!(path = %self.path.display(), %error, "could not fsync a rotated-out ATOF file");
        }
        rotation.part = rotation.part.saturating_add(1);
        self.path = rotation
            .directory
            .join(part_file_name(&rotation.name, rotation.part));
        self.good_len = 0;
        self.lines_in_file = 0;
        self.cut_pending = false;
        tracing::debug!(path = %self.path.display(), "ATOF file rotated");
        let file = self.reopen()?;
        self.file = Some(file);
        Ok(())
    }

    fn reopen(&mut self) -> std::io::Result<File> {
        // The folder was made at start; one removed since is made again.
        if let Some(directory) = self.path.parent() {
            std::fs::create_dir_all(directory)?;
        }
        let file = open_file(&self.path, false)?;
        let length = file.metadata()?.len();
        if self.cut_pending && length > self.good_len {
            file.set_len(self.good_len)?;
        } else {
            if length < self.good_len {
                // A new file: none of the lines counted so far are in it.
                self.lines_in_file = 0;
            }
            self.good_len = length;
        }
        self.cut_pending = false;
        Ok(file)
    }

    fn io_error(&self, operation: &'static str, source: std::io::Error) -> ExportError {
        ExportError::Io {
            operation,
            path: self.path.clone(),
            source,
            pending: self.pending_lines(),
        }
    }

    /// Adds a line: to the backlog (plain), or to the open frame, which is closed when
    /// it reaches its bound (zstd).
    fn queue(&mut self, line: String) -> Result<(), ExportError> {
        match self.open_frame.as_mut() {
            None => {
                let mut bytes = line.into_bytes();
                bytes.push(b'\n');
                self.queue_chunk(Chunk { bytes, lines: 1 }, MAX_PENDING_LINES);
                Ok(())
            }
            Some(frame) => {
                frame.lines.extend_from_slice(line.as_bytes());
                frame.lines.push(b'\n');
                frame.line_count += 1;
                let opened = *frame.opened.get_or_insert_with(Instant::now);
                if frame.lines.len() >= frame.bound || opened.elapsed() >= frame.max_age {
                    self.close_frame()?;
                }
                Ok(())
            }
        }
    }

    /// Compresses the open frame (when it holds lines) into the backlog.
    fn close_frame(&mut self) -> Result<(), ExportError> {
        let Some(frame) = self.open_frame.as_mut() else {
            return Ok(());
        };
        if frame.line_count == 0 {
            return Ok(());
        }
        let lines = std::mem::take(&mut frame.line_count);
        frame.opened = None;
        let compressed = frame.compressor.compress(&frame.lines);
        frame.lines.clear();
        match compressed {
            Ok(bytes) => {
                self.queue_chunk(Chunk { bytes, lines }, MAX_PENDING_FRAMES);
                Ok(())
            }
            Err(source) => {
                self.lines_lost += lines;
                let mut message = source.to_string();
                let _ = write!(message, "; the frame's {lines} line(s) are lost");
                Err(self.io_error("compress", std::io::Error::other(message)))
            }
        }
    }

    /// Queues a poll's copies, rendered one line at a time and written as they go: they
    /// can outnumber the backlog, which only holds what a failed write left behind.
    /// Every copy is queued even when a write or a frame's close fails on the way.
    fn queue_copies(&mut self, copies: &MarkCopies) -> Result<(), ExportError> {
        let lines = MarkCopyLines::new(copies)?;
        let roots: Vec<Option<Uuid>> = copies
            .copies
            .iter()
            .map(|copy| self.propagation_root_under(copy.parent_uuid))
            .collect();
        let mut first_error = None;
        for (copy, root) in copies.copies.iter().zip(roots) {
            if let Err(error) = self.queue(lines.line(copy, root)?) {
                first_error.get_or_insert(error);
            }
            if first_error.is_none()
                && self.pending.len() >= WRITE_AHEAD_CHUNKS
                && let Err(error) = self.write_pending()
            {
                first_error.get_or_insert(error);
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    fn queue_chunk(&mut self, chunk: Chunk, bound: usize) {
        if self.pending.len() >= bound
            && let Some(dropped) = self.pending.pop_front()
        {
            self.lines_lost += dropped.lines;
        }
        self.pending.push_back(chunk);
    }

    fn sync(&mut self) -> Result<(), ExportError> {
        self.close_frame()?;
        self.write_pending()?;
        match self.file.as_ref() {
            Some(file) => file
                .sync_all()
                .map_err(|source| self.io_error("sync", source)),
            None => Ok(()),
        }
    }
}

impl Exporter for AtofExporter {
    fn kind(&self) -> ExporterKind {
        ExporterKind::Atof
    }

    fn export(&mut self, event: &PipelineEvent) -> Result<(), ExportError> {
        if self.shut_down {
            return Err(ExportError::ShutDown("atof"));
        }
        match event {
            PipelineEvent::MarkCopies(copies) => self.queue_copies(copies)?,
            event => {
                if let Some(line) = self.render(event)? {
                    self.queue(line)?;
                }
            }
        }
        self.write_pending()
    }

    fn flush(&mut self) -> Result<(), ExportError> {
        if self.shut_down {
            return Err(ExportError::ShutDown("atof"));
        }
        self.sync()
    }

    fn lost(&self) -> u64 {
        // After shutdown nothing pending will ever be written.
        let unwritten = if self.shut_down {
            self.pending_lines() as u64 + self.lines_in_open_frame()
        } else {
            0
        };
        self.lines_lost + unwritten
    }

    fn shutdown(&mut self) -> Result<(), ExportError> {
        if self.shut_down {
            return Ok(());
        }
        let result = self.sync();
        self.shut_down = true;
        self.file = None;
        result
    }
}

/// Cuts `path` back to its last newline when it does not end with one; returns the
/// length kept and whether anything was cut.
fn cut_unfinished_line(path: &Path) -> std::io::Result<(u64, bool)> {
    use std::io::{Read, Seek, SeekFrom};
    let mut file = OpenOptions::new().read(true).write(true).open(path)?;
    let length = file.metadata()?.len();
    if length == 0 {
        return Ok((0, false));
    }
    // Read backwards in blocks until a newline (or the start) is found.
    let mut end = length;
    let mut block = vec![0u8; 8192];
    loop {
        let start = end.saturating_sub(block.len() as u64);
        let size = usize::try_from(end - start).unwrap_or(block.len());
        file.seek(SeekFrom::Start(start))?;
        file.read_exact(&mut block[..size])?;
        if end == length && block[size - 1] == b'\n' {
            return Ok((length, false));
        }
        if let Some(position) = block[..size].iter().rposition(|byte| *byte == b'\n') {
            let keep = start + position as u64 + 1;
            file.set_len(keep)?;
            return Ok((keep, true));
        }
        if start == 0 {
            file.set_len(0)?;
            return Ok((0, true));
        }
        end = start;
    }
}

/// Whether the open file has no name left (removed, or its folder removed).
#[cfg(unix)]
fn was_removed(file: &File) -> bool {
    use std::os::unix::fs::MetadataExt;
    file.metadata().is_ok_and(|metadata| metadata.nlink() == 0)
}

/// Elsewhere an open file cannot be removed.
#[cfg(not(unix))]
fn was_removed(_file: &File) -> bool {
    false
}

fn open_file(path: &Path, truncate: bool) -> std::io::Result<File> {
    let mut options = OpenOptions::new();
    options.create(true);
    // Owner and group only, where the OS has modes.
    #[cfg(unix)]
    options.mode(FILE_MODE);
    if truncate {
        options.write(true).truncate(true);
    } else {
        options.append(true);
    }
    options.open(path)
}
