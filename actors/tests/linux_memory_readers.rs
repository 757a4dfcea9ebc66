//! Linux OS readers: meminfo, /proc/PID/status and /proc/PID/smaps_rollup. Parsers on real-format text, fixture trees under a temp
//! root, and smoke tests against this machine's real `/proc`.

#[path = "linux_support/mod.rs"]
mod linux_support;

use std::path::Path;

use wattline_actors::ReadErrorClass;
use wattline_actors::platform::linux::meminfo::{MemInfo, parse_meminfo, read_meminfo};
use wattline_actors::platform::linux::process_status::{
    ProcessStatus, parse_process_status, read_process_status,
};
use wattline_actors::platform::linux::smaps_rollup::{
    SmapsRollup, parse_smaps_rollup, read_smaps_rollup,
};
use wattline_actors::platform::linux::{ParseError, ReadError};

use linux_support::*;

// meminfo
// ---------------------------------------------------------------------------------

#[test]
fn meminfo_parses_real_format_in_bytes() {
    let info = parse_meminfo(MEMINFO).expect("parse");
    assert_eq!(
        info,
        MemInfo {
            total_bytes: 24_684_096 * KIB,
            free_bytes: 23_623_688 * KIB,
            available_bytes: Some(24_352_300 * KIB),
            buffers_bytes: Some(5_688 * KIB),
            cached_bytes: Some(914_032 * KIB),
            sreclaimable_bytes: Some(51_700 * KIB),
            shmem_bytes: Some(8_788 * KIB),
        }
    );
    assert_eq!(info.system_used_bytes(), Some(331_796 * KIB));
}

#[test]
fn meminfo_without_memavailable_has_no_used() {
    let info = parse_meminfo("MemTotal: 1000 kB\nMemFree: 400 kB\n").expect("parse");
    assert_eq!(info.total_bytes, 1_024_000);
    assert_eq!(info.free_bytes, 409_600);
    assert_eq!(info.available_bytes, None);
    assert_eq!(info.cached_bytes, None);
    assert_eq!(info.system_used_bytes(), None);
}

#[test]
fn meminfo_used_saturates_when_available_exceeds_total() {
    let info = parse_meminfo("MemTotal: 10 kB\nMemFree: 1 kB\nMemAvailable: 11 kB\n").unwrap();
    assert_eq!(info.system_used_bytes(), Some(0));
}

#[test]
fn meminfo_rejects_missing_keys_and_garbage() {
    assert_eq!(
        parse_meminfo("MemFree: 1 kB\nMemAvailable: 2 kB\n"),
        Err(ParseError::MissingField("MemTotal"))
    );
    assert_eq!(
        parse_meminfo("MemTotal: 1 kB\n"),
        Err(ParseError::MissingField("MemFree"))
    );
    assert_eq!(
        parse_meminfo("hello world\n"),
        Err(ParseError::MalformedLine {
            line: 1,
            text: "hello world".into()
        })
    );
    assert_eq!(
        parse_meminfo("MemTotal: 12x kB\nMemFree: 1 kB\n"),
        Err(ParseError::InvalidValue {
            field: "MemTotal",
            value: "12x".into()
        })
    );
    assert_eq!(
        parse_meminfo("MemTotal: 12 MB\nMemFree: 1 kB\n"),
        Err(ParseError::InvalidValue {
            field: "MemTotal",
            value: "12 MB".into()
        })
    );
    assert_eq!(
        parse_meminfo("MemTotal: 18446744073709551615 kB\nMemFree: 1 kB\n"),
        Err(ParseError::Overflow("MemTotal"))
    );
    assert_eq!(parse_meminfo(""), Err(ParseError::MissingField("MemTotal")));
}

#[test]
fn meminfo_reader_handles_absent_file_and_binary_garbage() {
    let fx = Fixture::new();
    assert!(
        read_meminfo(fx.root())
            .expect("absent is not an error")
            .is_none()
    );

    fx.file(
        "proc/meminfo",
        [0xff_u8, 0x00, 0xfe, b'\n', 0x80, b':', 0xc3],
    );
    let err = read_meminfo(fx.root()).expect_err("garbage must fail");
    assert_eq!(err.class(), ReadErrorClass::Invalid);
    assert_eq!(err.path(), fx.path("proc/meminfo"));

    fx.file("proc/meminfo", MEMINFO);
    let info = read_meminfo(fx.root()).expect("read").expect("present");
    assert_eq!(info.total_bytes, 24_684_096 * KIB);
}

#[test]
#[allow(clippy::unnecessary_cast)] // `totalram` is `c_ulong`: u64 here, u32 on 32-bit targets.
fn real_meminfo_total_matches_sysinfo() {
    let info = read_meminfo(Path::new("/"))
        .expect("read")
        .expect("/proc/meminfo exists");
    let mut si = std::mem::MaybeUninit::<libc::sysinfo>::uninit();
    // SAFETY: `si` is a writable `sysinfo` buffer; sysinfo(2) fills it on success.
    let rc = unsafe { libc::sysinfo(si.as_mut_ptr()) };
    assert_eq!(rc, 0);
    // SAFETY: rc == 0, so the kernel initialised the struct.
    let si = unsafe { si.assume_init() };
    // sysinfo and meminfo both derive MemTotal from totalram_pages.
    assert_eq!(
        info.total_bytes,
        si.totalram as u64 * u64::from(si.mem_unit)
    );
    let available = info
        .available_bytes
        .expect("MemAvailable on any kernel >= 3.14");
    assert!(available <= info.total_bytes);
    assert_eq!(info.system_used_bytes(), Some(info.total_bytes - available));
}

// ---------------------------------------------------------------------------------
// /proc/PID/status
// ---------------------------------------------------------------------------------

#[test]
fn status_parses_real_format() {
    assert_eq!(
        parse_process_status(STATUS).expect("parse"),
        ProcessStatus {
            vm_size_bytes: Some(3060 * KIB),
            vm_hwm_bytes: Some(1732 * KIB),
            vm_rss_bytes: Some(1712 * KIB),
            threads: 3,
        }
    );
}

#[test]
fn status_of_kernel_thread_has_no_vm_fields() {
    let kthread = "Name:\tkworker/0:1-events\nUmask:\t0000\nState:\tI (idle)\nKthread:\t1\nThreads:\t1\nSigQ:\t0/96365\n";
    assert_eq!(
        parse_process_status(kthread).expect("parse"),
        ProcessStatus {
            vm_size_bytes: None,
            vm_hwm_bytes: None,
            vm_rss_bytes: None,
            threads: 1,
        }
    );
}

#[test]
fn status_name_cannot_spoof_fields() {
    // A process may call itself anything; the Name line must not be read as VmRSS.
    let text = "Name:\tVmRSS: 999999 kB\nVmRSS:\t    8 kB\nThreads:\t2\n";
    let status = parse_process_status(text).expect("parse");
    assert_eq!(status.vm_rss_bytes, Some(8 * KIB));
    assert_eq!(status.threads, 2);
}

#[test]
fn status_rejects_missing_threads_and_garbage() {
    assert_eq!(
        parse_process_status("Name:\tx\nVmRSS:\t 1 kB\n"),
        Err(ParseError::MissingField("Threads"))
    );
    assert_eq!(
        parse_process_status("VmRSS:\t lots kB\nThreads:\t1\n"),
        Err(ParseError::InvalidValue {
            field: "VmRSS",
            value: "lots".into()
        })
    );
    assert_eq!(
        parse_process_status("Threads:\t-1\n"),
        Err(ParseError::InvalidValue {
            field: "Threads",
            value: "-1".into()
        })
    );
    assert!(matches!(
        parse_process_status("\u{0}\u{1}garbage"),
        Err(ParseError::MalformedLine { line: 1, .. })
    ));
}

#[test]
fn status_reader_tolerates_non_utf8_name_and_reports_gone() {
    let fx = Fixture::new();
    let mut status = b"Name:\t\xffbad\xfe\n".to_vec();
    status.extend_from_slice(STATUS.as_bytes());
    fx.file("proc/42/status", status).dir("proc/43");
    let mut buf = Vec::new();
    let got = read_process_status(fx.root(), 42, &mut buf)
        .expect("read")
        .expect("present");
    assert_eq!(got.threads, 3);
    assert_eq!(got.vm_rss_bytes, Some(1712 * KIB));

    // /proc/43 exists without a status file: absent, not an error.
    assert_eq!(
        read_process_status(fx.root(), 43, &mut buf).expect("ok"),
        None
    );

    // /proc/44 does not exist: the process is gone.
    let err = read_process_status(fx.root(), 44, &mut buf).expect_err("gone");
    assert!(matches!(err, ReadError::Gone { .. }));
    assert_eq!(err.class(), ReadErrorClass::TargetGone);
    assert_eq!(err.path(), fx.path("proc/44/status"));
}

// ---------------------------------------------------------------------------------
// /proc/PID/smaps_rollup
// ---------------------------------------------------------------------------------

#[test]
fn smaps_rollup_parses_real_format() {
    let rollup = parse_smaps_rollup(SMAPS_ROLLUP).expect("parse");
    assert_eq!(
        rollup,
        SmapsRollup {
            rss_bytes: 1760 * KIB,
            private_clean_bytes: 68 * KIB,
            private_dirty_bytes: 116 * KIB,
            private_hugetlb_bytes: Some(4096 * KIB),
        }
    );
    assert_eq!(rollup.private_bytes(), (68 + 116 + 4096) * KIB);
}

#[test]
fn smaps_rollup_without_hugetlb_and_with_errors() {
    let text = "Rss: 10 kB\nPrivate_Clean: 1 kB\nPrivate_Dirty: 2 kB\n";
    let rollup = parse_smaps_rollup(text).expect("parse");
    assert_eq!(rollup.private_hugetlb_bytes, None);
    assert_eq!(rollup.private_bytes(), 3 * KIB);

    assert_eq!(
        parse_smaps_rollup("Private_Clean: 1 kB\nPrivate_Dirty: 2 kB\n"),
        Err(ParseError::MissingField("Rss"))
    );
    assert_eq!(
        parse_smaps_rollup("Rss: 1 kB\nPrivate_Dirty: 2 kB\n"),
        Err(ParseError::MissingField("Private_Clean"))
    );
    assert!(matches!(
        parse_smaps_rollup("this is not smaps"),
        Err(ParseError::MalformedLine { line: 1, .. })
    ));
}

#[test]
fn smaps_rollup_reader_empty_file_is_none() {
    let fx = Fixture::new();
    fx.file("proc/7/smaps_rollup", "")
        .file("proc/8/smaps_rollup", SMAPS_ROLLUP);
    let mut buf = Vec::new();
    assert_eq!(read_smaps_rollup(fx.root(), 7, &mut buf).expect("ok"), None);
    let rollup = read_smaps_rollup(fx.root(), 8, &mut buf)
        .expect("ok")
        .expect("some");
    assert_eq!(rollup.rss_bytes, 1760 * KIB);
    assert!(matches!(
        read_smaps_rollup(fx.root(), 9, &mut buf),
        Err(ReadError::Gone { .. })
    ));
}

#[test]
fn real_self_smaps_rollup_private_within_rss() {
    let mut buf = Vec::new();
    let rollup = read_smaps_rollup(Path::new("/"), std::process::id(), &mut buf)
        .expect("read own smaps_rollup")
        .expect("kernel >= 4.14");
    assert!(rollup.rss_bytes > 0);
    assert!(rollup.private_clean_bytes + rollup.private_dirty_bytes <= rollup.rss_bytes);
}

// ---------------------------------------------------------------------------------
