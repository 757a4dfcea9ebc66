//! Linux OS readers: /proc/PID/io and /proc/PID/fd, on fixtures and on real child processes. Parsers on real-format text, fixture trees under a temp
//! root, and smoke tests against this machine's real `/proc`.

#[path = "linux_support/mod.rs"]
mod linux_support;

use std::fs;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use wattline_actors::ReadErrorClass;
use wattline_actors::platform::linux::cgroup::read_proc_cgroup;
use wattline_actors::platform::linux::fd_count::{FdCountSource, fd_count_source, read_fd_count};
use wattline_actors::platform::linux::process_io::{ProcessIo, parse_process_io, read_process_io};
use wattline_actors::platform::linux::process_status::{ProcessStatus, read_process_status};
use wattline_actors::platform::linux::smaps_rollup::read_smaps_rollup;
use wattline_actors::platform::linux::{ParseError, ReadError};

use linux_support::*;

// /proc/PID/io
// ---------------------------------------------------------------------------------

#[test]
fn io_parses_real_format() {
    assert_eq!(
        parse_process_io(PROC_IO).expect("parse"),
        ProcessIo {
            read_bytes: 409_600,
            write_bytes: 8192,
            syscr: 10,
            syscw: 3,
        }
    );
}

#[test]
fn io_rejects_missing_fields_and_garbage() {
    assert_eq!(
        parse_process_io("syscr: 1\nread_bytes: 2\nwrite_bytes: 3\n"),
        Err(ParseError::MissingField("syscw"))
    );
    assert_eq!(
        parse_process_io("syscr: 1\nsyscw: 1\nread_bytes: 0x10\nwrite_bytes: 3\n"),
        Err(ParseError::InvalidValue {
            field: "read_bytes",
            value: "0x10".into()
        })
    );
    assert!(matches!(
        parse_process_io("\n\nnonsense"),
        Err(ParseError::MalformedLine { line: 3, .. })
    ));
}

/// `/proc/1/io` needs ptrace access to pid 1. In this project's sandbox that is refused
/// even to uid 0 (the caller lacks capabilities pid 1 holds), so the real kernel path
/// exercises `PermissionDenied`. On a host where this test process may read it, the
/// reader must agree with a plain read instead.
#[test]
fn real_proc_1_io_permission_matches_kernel() {
    let plain = fs::read_to_string("/proc/1/io");
    let mut buf = Vec::new();
    let ours = read_process_io(Path::new("/"), 1, &mut buf);
    match plain {
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
            let err = ours.expect_err("kernel refused, reader must too");
            assert!(matches!(err, ReadError::PermissionDenied { .. }), "{err:?}");
            assert_eq!(err.class(), ReadErrorClass::PermissionDenied);
            assert_eq!(err.path(), Path::new("/proc/1/io"));
        }
        Ok(text) => {
            let expected = parse_process_io(&text).expect("parse");
            let got = ours.expect("readable").expect("present");
            // Counters only grow; the reader ran after the plain read.
            assert!(got.syscr >= expected.syscr && got.read_bytes >= expected.read_bytes);
        }
        Err(e) => panic!("unexpected error reading /proc/1/io: {e}"),
    }
}

/// A fixture `io` file with mode 000. Root bypasses file permission bits (DAC), so as
/// uid 0 this covers "mode bits do not stop root" (values read exactly); as any other
/// user it covers the EACCES → `PermissionDenied` mapping on a real open(2).
#[test]
fn fixture_io_mode_000() {
    let fx = Fixture::new();
    fx.file("proc/77/io", PROC_IO);
    let path = fx.path("proc/77/io");
    fs::set_permissions(&path, fs::Permissions::from_mode(0o000)).expect("chmod");
    let mut buf = Vec::new();
    let result = read_process_io(fx.root(), 77, &mut buf);
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        assert_eq!(
            result.expect("root reads").expect("present").write_bytes,
            8192
        );
    } else {
        let err = result.expect_err("denied");
        assert!(matches!(err, ReadError::PermissionDenied { .. }));
        assert_eq!(err.path(), path);
    }
    fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).expect("chmod back");
}

#[test]
fn io_error_mapping_and_classes() {
    let p = Path::new("/proc/5/io");
    let cases = [
        (libc::EACCES, ReadErrorClass::PermissionDenied),
        (libc::EPERM, ReadErrorClass::PermissionDenied),
        (libc::ESRCH, ReadErrorClass::TargetGone),
        (libc::EIO, ReadErrorClass::Unavailable),
    ];
    for (errno, class) in cases {
        let err = ReadError::from_io(p, std::io::Error::from_raw_os_error(errno));
        assert_eq!(err.class(), class, "errno {errno}");
        assert_eq!(err.path(), p);
    }
    let parse = ReadError::parse(p, ParseError::MissingField("syscr"));
    assert_eq!(parse.class(), ReadErrorClass::Invalid);
    assert_eq!(
        parse.to_string(),
        "cannot parse /proc/5/io: missing required field `syscr`"
    );
}

#[test]
fn real_self_io_counts_write_syscalls() {
    let root = Path::new("/");
    let pid = std::process::id();
    let mut buf = Vec::new();
    let before = read_process_io(root, pid, &mut buf)
        .expect("read")
        .expect("present");
    let mut file = tempfile::tempfile().expect("temp file");
    for _ in 0..5 {
        file.write_all(b"x").expect("write");
    }
    let after = read_process_io(root, pid, &mut buf)
        .expect("read")
        .expect("present");
    // Other test threads may also write, so at least our five write(2) calls.
    assert!(after.syscw >= before.syscw + 5, "{before:?} -> {after:?}");
}

// ---------------------------------------------------------------------------------
// /proc/PID/fd
// ---------------------------------------------------------------------------------

#[test]
fn fd_count_counts_entries_without_following_links() {
    let fx = Fixture::new();
    fx.dir("proc/10/fd").dir("proc/11");
    for (name, target) in [
        ("0", "/dev/null"),
        ("1", "/nonexistent/a"),
        ("2", "pipe:[1]"),
    ] {
        std::os::unix::fs::symlink(target, fx.path(&format!("proc/10/fd/{name}"))).unwrap();
    }
    fx.file("proc/10/fd/255", "");
    // A fixture tree is no procfs: its directories' sizes are not counts.
    assert_eq!(fd_count_source(fx.root()), FdCountSource::Listing);
    assert_eq!(
        read_fd_count(fx.root(), 10, FdCountSource::Listing).expect("ok"),
        Some(4)
    );
    assert_eq!(
        read_fd_count(fx.root(), 11, FdCountSource::Listing).expect("ok"),
        None
    );
    let err = read_fd_count(fx.root(), 12, FdCountSource::Listing).expect_err("gone");
    assert!(matches!(err, ReadError::Gone { .. }));
    assert_eq!(err.path(), fx.path("proc/12/fd"));
}

/// Descriptors above 2 that this process would pass to a child (no `FD_CLOEXEC`).
/// Rust opens everything close-on-exec, but a test runner may inherit open fds.
fn inheritable_fds_above_2() -> u64 {
    let mut count = 0;
    for entry in fs::read_dir("/proc/self/fd").expect("list own fds") {
        let name = entry.expect("entry").file_name();
        let fd: i32 = name.to_string_lossy().parse().expect("numeric fd");
        // SAFETY: F_GETFD only queries flags; a closed fd (the listing's own) gives -1.
        let flags = unsafe { libc::fcntl(fd, libc::F_GETFD) };
        if fd > 2 && flags >= 0 && flags & libc::FD_CLOEXEC == 0 {
            count += 1;
        }
    }
    count
}

/// `sleep 30` with null stdio, as `configure` sets it up, once it sleeps: after its
/// exec (the forked Rust child may still hold a pipe fd before) and its start-up
/// (which opens locale files for a moment).
fn sleeping_child(configure: impl FnOnce(&mut Command)) -> std::process::Child {
    let mut command = Command::new("sleep");
    command
        .arg("30")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    configure(&mut command);
    let child = command.spawn().expect("spawn sleep");
    let pid = child.id();
    let deadline = Instant::now() + Duration::from_secs(5);
    let asleep = || {
        let comm = fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
        let wchan = fs::read_to_string(format!("/proc/{pid}/wchan")).unwrap_or_default();
        comm == "sleep\n" && wchan.contains("nanosleep")
    };
    while !asleep() {
        assert!(Instant::now() < deadline, "child never fell asleep");
        std::thread::sleep(Duration::from_millis(10));
    }
    child
}

/// Spawns `sleep` with null stdio: it holds fds 0, 1, 2 plus whatever non-close-on-exec
/// fds it inherits from this process, and one thread.
#[test]
fn real_child_fd_count_and_status() {
    let inherited = inheritable_fds_above_2();
    let mut child = sleeping_child(|_| {});
    let pid = child.id();
    let root = Path::new("/");
    let listed = read_fd_count(root, pid, FdCountSource::Listing);
    let source = fd_count_source(root);
    let from_source = read_fd_count(root, pid, source);
    let directory_size = fs::metadata(format!("/proc/{pid}/fd")).map(|m| m.len());
    let mut buf = Vec::new();
    let status = read_process_status(root, pid, &mut buf);
    child.kill().expect("kill our child");
    child.wait().expect("reap our child");
    assert_eq!(listed.expect("read").expect("present"), 3 + inherited);
    assert_eq!(
        from_source.expect("read").expect("present"),
        3 + inherited,
        "{source:?}"
    );
    if kernel_at_least(6, 2) {
        // The kernel gives the count as the directory's size from 6.2.
        assert!(
            matches!(source, FdCountSource::DirectorySize { .. }),
            "{source:?}"
        );
        assert_eq!(directory_size.expect("stat fd"), 3 + inherited);
    }
    let status = status.expect("read").expect("present");
    assert_eq!(status.threads, 1);
    let rss = status.vm_rss_bytes.expect("live process has VmRSS");
    assert!(rss > 0);
    assert!(status.vm_hwm_bytes.expect("VmHWM") >= rss);
    assert!(status.vm_size_bytes.expect("VmSize") >= rss);
}

#[test]
fn real_self_status_and_fd() {
    let pid = std::process::id();
    let mut buf = Vec::new();
    let status = read_process_status(Path::new("/"), pid, &mut buf)
        .expect("read")
        .expect("present");
    assert!(status.threads >= 1);
    assert!(status.vm_size_bytes.expect("VmSize") >= status.vm_rss_bytes.expect("VmRSS"));
    // stdin/stdout/stderr at least.
    assert!(
        read_fd_count(Path::new("/"), pid, fd_count_source(Path::new("/")))
            .expect("ok")
            .expect("present")
            >= 3
    );
}

/// Another user's process: as root, a child running as `nobody` is counted from either
/// source alike; as any other user, PID 1 (root's) is denied from either, never taken
/// at its directory's size.
#[test]
fn another_users_process_is_counted_alike_or_denied_alike() {
    let root = Path::new("/");
    let source = fd_count_source(root);
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        for source in [FdCountSource::Listing, source] {
            let denied = read_fd_count(root, 1, source);
            assert!(
                matches!(denied, Err(ReadError::PermissionDenied { .. })),
                "{source:?}: {denied:?}"
            );
        }
        return;
    }
    use std::os::unix::process::CommandExt;
    let mut child = sleeping_child(|command| {
        command.uid(65534).gid(65534);
    });
    let pid = child.id();
    let listed = read_fd_count(root, pid, FdCountSource::Listing);
    let from_source = read_fd_count(root, pid, source);
    let owner_only = read_fd_count(root, pid, FdCountSource::DirectorySize { any_owner: false });
    child.kill().expect("kill our child");
    child.wait().expect("reap our child");
    let listed = listed
        .expect("root lists any fd directory")
        .expect("present");
    assert_eq!(
        from_source.expect("read").expect("present"),
        listed,
        "{source:?}"
    );
    assert_eq!(owner_only.expect("read").expect("present"), listed);
}

/// Whether the running kernel is `major.minor` or later (`uname -r`).
fn kernel_at_least(major: u32, minor: u32) -> bool {
    let release = fs::read_to_string("/proc/sys/kernel/osrelease").expect("osrelease");
    let mut numbers = release
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|part| part.parse::<u32>().ok());
    let running = (numbers.next().unwrap_or(0), numbers.next().unwrap_or(0));
    running >= (major, minor)
}

/// A reaped child has no `/proc/PID`: every per-process reader says `Gone`.
#[test]
fn real_vanished_process_is_gone() {
    let mut child = Command::new("true").spawn().expect("spawn true");
    let pid = child.id();
    child.wait().expect("reap");
    let root = Path::new("/");
    let mut buf = Vec::new();
    assert!(matches!(
        read_process_status(root, pid, &mut buf),
        Err(ReadError::Gone { .. })
    ));
    assert!(matches!(
        read_process_io(root, pid, &mut buf),
        Err(ReadError::Gone { .. })
    ));
    assert!(matches!(
        read_smaps_rollup(root, pid, &mut buf),
        Err(ReadError::Gone { .. })
    ));
    for source in [FdCountSource::Listing, fd_count_source(root)] {
        assert!(matches!(
            read_fd_count(root, pid, source),
            Err(ReadError::Gone { .. })
        ));
    }
    assert!(matches!(
        read_proc_cgroup(root, pid, &mut buf),
        Err(ReadError::Gone { .. })
    ));
}

/// A zombie keeps `/proc/PID` but has no memory map: status has no `Vm*` lines,
/// smaps_rollup answers ESRCH (→ `Gone`), the fd table is empty.
#[test]
fn real_zombie_process() {
    let mut child = Command::new("true").spawn().expect("spawn true");
    let pid = child.id();
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let stat = fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        if stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| rest.starts_with('Z'))
        {
            break;
        }
        assert!(Instant::now() < deadline, "child never became a zombie");
        std::thread::sleep(Duration::from_millis(10));
    }
    let root = Path::new("/");
    let mut buf = Vec::new();
    let status = read_process_status(root, pid, &mut buf);
    let rollup = read_smaps_rollup(root, pid, &mut buf);
    let fds = read_fd_count(root, pid, FdCountSource::Listing);
    let fds_from_source = read_fd_count(root, pid, fd_count_source(root));
    child.wait().expect("reap");
    assert_eq!(
        status.expect("read").expect("present"),
        ProcessStatus {
            vm_size_bytes: None,
            vm_hwm_bytes: None,
            vm_rss_bytes: None,
            threads: 1
        }
    );
    assert!(matches!(rollup, Err(ReadError::Gone { .. })), "{rollup:?}");
    assert_eq!(fds.expect("read").expect("present"), 0);
    assert_eq!(fds_from_source.expect("read").expect("present"), 0);
}

// ---------------------------------------------------------------------------------
