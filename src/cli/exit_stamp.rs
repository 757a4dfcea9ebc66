//! When the command exited, as near as this process can see it. `run` closes the
//! measured window at the command's exit; tokio learns of an exit through a pidfd
//! that its runtime polls, and then a task must be scheduled: on a loaded 2-core host
//! that came 25–41 ms late, a 1 s command's window 2.5–4% too long. A thread of its
//! own, blocked in `waitid(WNOWAIT)`, is woken by the exit itself and stamps the
//! time then, without reaping the child (tokio still reaps it and reads its status).

use std::sync::{Arc, OnceLock};
use std::time::Instant;

/// The instant the child exited, once a watching thread saw it.
#[derive(Clone, Default)]
pub struct ExitStamp {
    exited_at: Arc<OnceLock<Instant>>,
}

impl ExitStamp {
    /// Watches the child `pid` (a child of this process) from a thread of its own,
    /// which ends when the child exits. `None` when the thread cannot start (the
    /// window then closes when the runtime sees the exit, as without it).
    pub fn watch(pid: u32) -> Option<Self> {
        let stamp = ExitStamp::default();
        let exited_at = Arc::clone(&stamp.exited_at);
        let pid = libc::id_t::try_from(pid).ok()?;
        std::thread::Builder::new()
            .name("wattline-exit".into())
            .stack_size(64 * 1024)
            .spawn(move || {
                if wait_for_exit_without_reaping(pid) {
                    let _ = exited_at.set(Instant::now());
                }
            })
            .map_err(|error| tracing::debug!("cannot watch the command's exit: {error}"))
            .ok()?;
        Some(stamp)
    }

    /// When the child exited, if the watching thread has seen it.
    pub fn exited_at(&self) -> Option<Instant> {
        self.exited_at.get().copied()
    }

    /// The instant the window closes, `seen` being when the runtime saw the exit:
    /// the stamp, when there is one and it is not later.
    pub fn window_end(&self, seen: Instant) -> Instant {
        self.exited_at().map_or(seen, |exited| exited.min(seen))
    }
}

/// Blocks until the child `pid` has exited, leaving it to be reaped: `false` when
/// it cannot be waited for (already reaped, or not our child).
fn wait_for_exit_without_reaping(pid: libc::id_t) -> bool {
    loop {
        // SAFETY: siginfo_t is plain data; zeroed is a valid value for waitid to fill.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: `info` is a valid, writable siginfo_t for the call's duration.
        let result =
            unsafe { libc::waitid(libc::P_PID, pid, &mut info, libc::WEXITED | libc::WNOWAIT) };
        if result == 0 {
            return true;
        }
        if std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            return false;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// Whether `pid` is a zombie: exited, not yet reaped.
    #[cfg(target_os = "linux")]
    fn is_zombie(pid: u32) -> bool {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|stat| {
                let after_name = &stat[stat.rfind(')')? + 1..];
                after_name
                    .split_whitespace()
                    .next()
                    .map(|state| state == "Z")
            })
            .unwrap_or(false)
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn the_exit_is_stamped_before_a_busy_runtime_sees_it_and_the_child_is_still_reaped() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let mut child = tokio::process::Command::new("true").spawn().unwrap();
            let pid = child.id().unwrap();
            let stamp = ExitStamp::watch(pid).unwrap();
            // The runtime is busy (this thread never yields) while the child exits.
            let deadline = Instant::now() + Duration::from_secs(10);
            while !is_zombie(pid) {
                assert!(Instant::now() < deadline, "the child never exited");
                std::thread::sleep(Duration::from_millis(5));
            }
            // Time for the watching thread to wake, then the runtime gets round to it.
            std::thread::sleep(Duration::from_millis(500));
            let busy_until = Instant::now();
            let status = child.wait().await.unwrap();
            let seen = Instant::now();
            assert!(status.success(), "tokio still reaps the child: {status}");
            let exited = stamp.exited_at().expect("the exit was stamped");
            assert!(
                exited < busy_until,
                "stamped {:?} after the runtime was free",
                exited - busy_until
            );
            assert_eq!(stamp.window_end(seen), exited);
        });
    }

    #[test]
    fn without_a_stamp_the_window_closes_when_the_runtime_saw_the_exit() {
        let stamp = ExitStamp::default();
        let seen = Instant::now();
        assert_eq!(stamp.window_end(seen), seen);
        // A stamp later than the runtime's sighting (the thread woke late) never
        // lengthens the window.
        let _ = stamp.exited_at.set(seen + Duration::from_millis(10));
        assert_eq!(stamp.window_end(seen), seen);
    }

    #[test]
    fn a_process_that_is_not_our_child_is_not_waited_for() {
        // PID 1 is never this test's child: waitid fails at once (ECHILD).
        assert!(!wait_for_exit_without_reaping(1));
    }
}
