//! `wattline run`'s cgroup for the command: made before it starts, joined by the
//! child between fork and exec (so even its first child is inside), removed after.

use wattline::command_cgroup::{self, CommandCgroup};

/// The run's group, removed when dropped (an early error return leaves nothing
/// behind); [`RunCgroup::finish`] removes it and says what could not be.
#[derive(Debug)]
pub struct RunCgroup(Option<CommandCgroup>);

impl RunCgroup {
    /// Makes the group for this run (`wattline-run-<pid>` under wattline's own
    /// group); `Err` says why there is none, for the diagnostics.
    pub fn create() -> Result<RunCgroup, String> {
        let name = format!("wattline-run-{}", std::process::id());
        command_cgroup::create(std::path::Path::new("/"), &name)
            .map(|cgroup| RunCgroup(Some(cgroup)))
            .map_err(|error| {
                format!(
                    "the command runs in wattline's own cgroup, so its cgroup fields are null: {error}"
                )
            })
    }

    /// The group.
    pub fn cgroup(&self) -> Option<&CommandCgroup> {
        self.0.as_ref()
    }

    /// Removes the group now; a group a daemonised child still runs in is left, and
    /// said.
    pub fn finish(mut self) -> Option<String> {
        self.0.take().as_ref().and_then(remove_after_run)
    }
}

impl Drop for RunCgroup {
    fn drop(&mut self) {
        if let Some(cgroup) = self.0.take() {
            let _ = command_cgroup::remove(&cgroup);
        }
    }
}

/// Makes the child write its pid into every `cgroup.procs` of `cgroup` before it runs
/// the command. Between fork and exec only async-signal-safe calls are allowed: the
/// paths are made here, and the child only opens, writes and closes.
#[cfg(target_os = "linux")]
pub fn join_before_exec(command: &mut tokio::process::Command, cgroup: &CommandCgroup) {
    use std::os::unix::ffi::OsStrExt;
    let paths: Vec<std::ffi::CString> = cgroup
        .procs_files()
        .iter()
        .filter_map(|path| std::ffi::CString::new(path.as_os_str().as_bytes()).ok())
        .collect();
    // SAFETY: the closure makes no allocation and calls only open, write and close,
    // which are async-signal-safe; `paths` is owned by the closure.
    unsafe {
        command.pre_exec(move || {
            for path in &paths {
                let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
                if fd >= 0 {
                    // "0" is the writing process, in v1 and v2 alike.
                    libc::write(fd, b"0".as_ptr().cast(), 1);
                    libc::close(fd);
                }
            }
            Ok(())
        });
    }
}

/// Elsewhere than Linux no group is ever made.
#[cfg(not(target_os = "linux"))]
pub fn join_before_exec(_command: &mut tokio::process::Command, _cgroup: &CommandCgroup) {}

fn remove_after_run(cgroup: &CommandCgroup) -> Option<String> {
    let left: Vec<String> = command_cgroup::remove(cgroup)
        .into_iter()
        .map(|(path, error)| format!("{} ({error})", path.display()))
        .collect();
    (!left.is_empty()).then(|| {
        format!(
            "the command's cgroup still holds processes (children that outlived it) and was \
             left in place: {}",
            left.join(", ")
        )
    })
}
