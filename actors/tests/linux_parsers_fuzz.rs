//! Linux OS readers: arbitrary bytes through every parser: none panics. Parsers on real-format text, fixture trees under a temp
//! root, and smoke tests against this machine's real `/proc`.

#[path = "linux_support/mod.rs"]
mod linux_support;

use wattline_actors::platform::linux::cgroup::{
    parse_cgroup_mounts, parse_cpuset_count, parse_pids_events, parse_proc_cgroup, unescape_octal,
};
use wattline_actors::platform::linux::cgroup_v1;
use wattline_actors::platform::linux::cgroup_v2;
use wattline_actors::platform::linux::meminfo::parse_meminfo;
use wattline_actors::platform::linux::net_dev::parse_net_dev;
use wattline_actors::platform::linux::pressure::parse_pressure;
use wattline_actors::platform::linux::process_io::parse_process_io;
use wattline_actors::platform::linux::process_status::parse_process_status;
use wattline_actors::platform::linux::smaps_rollup::parse_smaps_rollup;

// Arbitrary bytes never panic
// ---------------------------------------------------------------------------------

/// Feeds 2,000 deterministic pseudo-random byte strings (biased towards the
/// characters the formats use) through every parser. None may panic, and none of the
/// parsers with required keys may accept noise.
#[test]
fn parsers_never_panic_on_arbitrary_bytes() {
    const ALPHABET: &[u8] = b"0123456789 -:=,/\\\n\tkBmaxsomefulltotal\xff\xc3";
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut accepted_required = 0;
    for _ in 0..2000 {
        let len = (next() % 200) as usize;
        let bytes: Vec<u8> = (0..len)
            .map(|_| ALPHABET[(next() % ALPHABET.len() as u64) as usize])
            .collect();
        let text = String::from_utf8_lossy(&bytes);
        let required = [
            parse_meminfo(&text).is_ok(),
            parse_process_status(&text).is_ok(),
            parse_smaps_rollup(&text).is_ok(),
            parse_process_io(&text).is_ok(),
        ];
        accepted_required += required.iter().filter(|ok| **ok).count();
        let _ = parse_pressure(&text);
        let _ = parse_net_dev(&text);
        let _ = parse_cgroup_mounts(&text);
        let _ = parse_proc_cgroup(&text);
        let _ = parse_cpuset_count(&text);
        let _ = parse_pids_events(&text);
        let _ = cgroup_v2::parse_cpu_stat(&text);
        let _ = cgroup_v2::parse_cpu_max(&text);
        let _ = cgroup_v2::parse_memory_events(&text);
        let _ = cgroup_v2::parse_memory_max(&text);
        let _ = cgroup_v1::parse_cpu_stat(&text);
        let _ = cgroup_v1::parse_oom_control(&text);
        let _ = cgroup_v1::parse_limit_in_bytes(&text);
        let _ = cgroup_v1::parse_cfs_quota(&text);
        let _ = unescape_octal(&text);
    }
    assert_eq!(accepted_required, 0);
}
