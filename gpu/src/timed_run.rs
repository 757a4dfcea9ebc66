//! One run of a program, without a shell, under a time limit that never loses the
//! answer of a child that has already exited: its output and its exit are awaited
//! together, and when the timer wins (for example because the runtime thread was
//! blocked past the deadline) the child is asked with `try_wait` and its pipes are
//! drained before anything is killed. The `nvidia-smi` collector runs each query so.

use std::path::Path;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt};

/// How long pipes are drained after the child is known to have exited.
const DRAIN_GRACE: Duration = Duration::from_secs(1);

/// How one run of a program ended.
#[derive(Debug)]
pub enum RunOutcome {
    /// The program exited; everything it wrote is here.
    Exited {
        /// Exit status.
        status: ExitStatus,
        /// Standard output.
        stdout: Vec<u8>,
        /// Standard error.
        stderr: Vec<u8>,
    },
    /// Still running at the deadline: killed. What it wrote so far is here.
    TimedOut {
        /// Standard output so far.
        stdout: Vec<u8>,
        /// Standard error so far.
        stderr: Vec<u8>,
    },
    /// It could not be started (or waited for).
    Failed(std::io::Error),
}

/// Run `program` with `args` (no shell), reading its output and exit together, with
/// `timeout` as the limit. When the timer fires first, a child that has already
/// exited is not killed: its pipes are drained and its answer is returned.
pub async fn run_with_timeout(program: &Path, args: &[String], timeout: Duration) -> RunOutcome {
    let mut command = tokio::process::Command::new(program);
    command
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(error) => return RunOutcome::Failed(error),
    };
    let mut stdout_pipe = child.stdout.take();
    let mut stderr_pipe = child.stderr.take();
    let mut stdout = Vec::new();
    let mut stderr = Vec::new();

    let finished = {
        let work = async {
            let _ = tokio::join!(
                read_pipe(&mut stdout_pipe, &mut stdout),
                read_pipe(&mut stderr_pipe, &mut stderr)
            );
            child.wait().await
        };
        let deadline = tokio::time::sleep(timeout);
        tokio::select! {
            biased;
            status = work => Some(status),
            () = deadline => None,
        }
    };

    match finished {
        Some(Ok(status)) => RunOutcome::Exited {
            status,
            stdout,
            stderr,
        },
        Some(Err(error)) => RunOutcome::Failed(error),
        None => match child.try_wait() {
            // The timer fired late (or at the same moment as the exit): the child is
            // done, so take what it wrote instead of killing it.
            Ok(Some(status)) => {
                let _ = tokio::time::timeout(DRAIN_GRACE, async {
                    tokio::join!(
                        read_pipe(&mut stdout_pipe, &mut stdout),
                        read_pipe(&mut stderr_pipe, &mut stderr)
                    )
                })
                .await;
                RunOutcome::Exited {
                    status,
                    stdout,
                    stderr,
                }
            }
            _ => {
                if let Err(error) = child.start_kill() {
                    tracing::debug!(%error, "could not kill nvidia-smi after its timeout");
                }
                let _ = tokio::time::timeout(DRAIN_GRACE, child.wait()).await;
                RunOutcome::TimedOut { stdout, stderr }
            }
        },
    }
}

/// Append everything `pipe` yields to `buffer`, until end of file (then the pipe is
/// dropped). Cancel-safe: bytes read are in `buffer` before the next await.
async fn read_pipe<R: AsyncRead + Unpin>(
    pipe: &mut Option<R>,
    buffer: &mut Vec<u8>,
) -> std::io::Result<()> {
    let mut chunk = [0_u8; 4096];
    while let Some(reader) = pipe.as_mut() {
        let read = reader.read(&mut chunk).await?;
        if read == 0 {
            *pipe = None;
        } else {
            buffer.extend_from_slice(&chunk[..read]);
        }
    }
    Ok(())
}
