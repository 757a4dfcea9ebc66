//! What a worker plugin prints. Its stdout and stderr never reach wattline's stdout,
//! which may carry a report (`run --report json`): each line goes to wattline's
//! stderr, or to the worker's `log_file`, prefixed with the plugin's id.

use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use tokio::task::JoinHandle;

/// How long a stopped worker's last lines may take to be written.
const DRAIN_LIMIT: Duration = Duration::from_secs(2);

/// Where a worker's lines go.
#[derive(Debug)]
pub enum WorkerOutputSink {
    /// wattline's standard error.
    Stderr,
    /// A file, appended to.
    File {
        /// The file's path, for messages.
        path: PathBuf,
        /// The open file.
        file: File,
    },
}

impl WorkerOutputSink {
    /// `log_file` opened for appending (created when missing), or stderr when `None`.
    pub fn open(log_file: Option<&Path>) -> io::Result<WorkerOutputSink> {
        match log_file {
            None => Ok(WorkerOutputSink::Stderr),
            Some(path) => Ok(WorkerOutputSink::File {
                path: path.to_path_buf(),
                file: File::options().create(true).append(true).open(path)?,
            }),
        }
    }

    fn try_clone(&self) -> io::Result<WorkerOutputSink> {
        match self {
            WorkerOutputSink::Stderr => Ok(WorkerOutputSink::Stderr),
            WorkerOutputSink::File { path, file } => Ok(WorkerOutputSink::File {
                path: path.clone(),
                file: file.try_clone()?,
            }),
        }
    }

    /// Writes one prefixed line whole (one `write_all`, so lines of the two streams
    /// and of several workers do not interleave within a line).
    fn write_line(&mut self, line: &[u8]) -> io::Result<()> {
        match self {
            WorkerOutputSink::Stderr => io::stderr().lock().write_all(line),
            WorkerOutputSink::File { file, .. } => file.write_all(line),
        }
    }
}

/// The tasks copying one worker's output; they end when the worker's pipes close.
#[derive(Debug, Default)]
pub struct WorkerOutput {
    forwarders: Vec<JoinHandle<()>>,
}

impl WorkerOutput {
    /// Copies `stdout` and `stderr` (those the child has) to `sink`, each line
    /// prefixed `[plugin_id] `. Call inside a Tokio runtime.
    pub fn forward(
        plugin_id: &str,
        stdout: Option<impl AsyncRead + Unpin + Send + 'static>,
        stderr: Option<impl AsyncRead + Unpin + Send + 'static>,
        sink: WorkerOutputSink,
    ) -> WorkerOutput {
        let mut forwarders = Vec::new();
        let second_sink = match sink.try_clone() {
            Ok(second) => Some(second),
            Err(error) => {
                tracing::warn!("worker `{plugin_id}`: its stderr goes to wattline's: {error}");
                Some(WorkerOutputSink::Stderr)
            }
        };
        if let Some(stdout) = stdout {
            forwarders.push(tokio::spawn(copy_lines(plugin_id.to_owned(), stdout, sink)));
        }
        if let (Some(stderr), Some(sink)) = (stderr, second_sink) {
            forwarders.push(tokio::spawn(copy_lines(plugin_id.to_owned(), stderr, sink)));
        }
        WorkerOutput { forwarders }
    }

    /// Waits for the last lines of a worker that exited, 2 s at most (a grandchild
    /// may hold its pipes open); what is still unread is left behind.
    pub async fn drain(self) {
        for forwarder in self.forwarders {
            let abort = forwarder.abort_handle();
            if tokio::time::timeout(DRAIN_LIMIT, forwarder).await.is_err() {
                abort.abort();
            }
        }
    }
}

/// Copies `stream` line by line to `sink` until it closes or cannot be read.
async fn copy_lines(plugin_id: String, stream: impl AsyncRead + Unpin, mut sink: WorkerOutputSink) {
    let mut reader = BufReader::new(stream);
    let mut line = Vec::new();
    loop {
        line.clear();
        match reader.read_until(b'\n', &mut line).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        let mut prefixed = Vec::with_capacity(plugin_id.len() + 3 + line.len() + 1);
        prefixed.push(b'[');
        prefixed.extend_from_slice(plugin_id.as_bytes());
        prefixed.extend_from_slice(b"] ");
        prefixed.extend_from_slice(&line);
        if !line.ends_with(b"\n") {
            prefixed.push(b'\n');
        }
        if let Err(error) = sink.write_line(&prefixed) {
            // Keep reading, so the worker never blocks on a full pipe.
            if let WorkerOutputSink::File { path, .. } = &sink {
                tracing::warn!(
                    "worker `{plugin_id}`: cannot write to {}: {error}",
                    path.display()
                );
                sink = WorkerOutputSink::Stderr;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn each_line_is_prefixed_and_a_last_line_without_newline_is_ended() {
        let directory = tempfile::tempdir().unwrap();
        let path = directory.path().join("worker.log");
        let sink = WorkerOutputSink::open(Some(&path)).unwrap();
        let stdout: &[u8] = b"first\nsecond";
        let stderr: &[u8] = b"warning\n";
        WorkerOutput::forward("acme.lookup", Some(stdout), Some(stderr), sink)
            .drain()
            .await;
        let written = std::fs::read_to_string(&path).unwrap();
        let mut lines: Vec<&str> = written.lines().collect();
        lines.sort_unstable();
        assert_eq!(
            lines,
            [
                "[acme.lookup] first",
                "[acme.lookup] second",
                "[acme.lookup] warning"
            ]
        );
        assert!(written.ends_with('\n'));
    }
}
