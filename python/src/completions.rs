//! Results of native calls that finish on wattline's runtime, left for an asyncio
//! event loop without touching Python on the runtime's threads. A finished call puts
//! its result in the queue and, when the queue was empty, writes one byte to a pipe
//! the loop watches (`loop.add_reader`); the loop, woken, takes every result waiting
//! and settles its futures.
//!
//! Calling back into Python from a runtime thread instead would take the GIL there:
//! wait for a busy loop to let it go (up to the interpreter's switch interval), and
//! make and delete a thread state per call (a fresh 16 KiB frame stack mapped and
//! unmapped each time, whose unmapping interrupts every other core to flush its TLB).

use std::io::Write;
use std::sync::{Arc, Mutex, PoisonError};

use pyo3::prelude::*;

/// One finished call: its token, and its JSON result or error.
type Finished = (u64, Result<String, PyErr>);

/// The queue the runtime's threads fill and one event loop drains.
#[pyclass(module = "wattline._native", frozen)]
pub(crate) struct Completions(Arc<Queue>);

struct Queue {
    ready: Mutex<Vec<Finished>>,
    /// Readable while results wait (the loop watches it); the loop empties it.
    wake_reader: std::io::PipeReader,
    wake_writer: std::io::PipeWriter,
}

impl Completions {
    /// What a call finishing on another thread hands its result to.
    pub(crate) fn sender(&self, token: u64) -> Completion {
        Completion {
            queue: Arc::clone(&self.0),
            token,
        }
    }
}

/// One call's place in a [`Completions`] queue.
pub(crate) struct Completion {
    queue: Arc<Queue>,
    token: u64,
}

impl Completion {
    /// Leaves the call's result for the loop, and wakes it when it had none waiting
    /// (one byte stands for any number of results: the loop takes them all).
    pub(crate) fn finish(self, result: Result<String, PyErr>) {
        let was_empty = {
            let mut ready = self
                .queue
                .ready
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            ready.push((self.token, result));
            ready.len() == 1
        };
        if was_empty {
            // At most a byte or two wait unread, far below a pipe's capacity; a loop
            // that has closed reads none, and nobody waits then.
            let _ = (&self.queue.wake_writer).write(&[1]);
        }
    }
}

#[pymethods]
impl Completions {
    #[new]
    fn new() -> PyResult<Self> {
        let (wake_reader, wake_writer) = std::io::pipe()?;
        Ok(Completions(Arc::new(Queue {
            ready: Mutex::new(Vec::new()),
            wake_reader,
            wake_writer,
        })))
    }

    /// The file descriptor the loop watches: readable while results wait. The loop
    /// reads it empty (non-blocking) before each [`Self::take`].
    #[cfg(unix)]
    fn fileno(&self) -> i32 {
        use std::os::fd::AsRawFd;
        self.0.wake_reader.as_raw_fd()
    }

    /// Every result waiting, oldest first: `(token, json, None)` or
    /// `(token, None, error)`.
    fn take(&self, py: Python<'_>) -> Vec<(u64, Option<String>, Option<Py<PyAny>>)> {
        let finished =
            std::mem::take(&mut *self.0.ready.lock().unwrap_or_else(PoisonError::into_inner));
        finished
            .into_iter()
            .map(|(token, result)| match result {
                Ok(text) => (token, Some(text), None),
                Err(error) => (token, None, Some(error.into_value(py).into_any())),
            })
            .collect()
    }
}
