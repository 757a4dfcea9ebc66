//! `/proc/stat`: the system-wide CPU time counters behind the global consumption rate.

use std::path::Path;

use super::process_stat::parse_number;
use crate::platform::error::{ParseError, ReadError};

/// System-wide CPU time, clock ticks summed over every logical processor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SystemCpuTimes {
    /// Ticks spent doing work: user, nice, system, irq, softirq and steal.
    pub busy_ticks: u64,
    /// Busy plus idle and iowait.
    pub total_ticks: u64,
    /// Logical processors with a `cpuN` line (the online ones).
    pub logical_processors: u64,
}

/// Reads the aggregate `cpu` line of `/proc/stat`.
pub fn read_system_cpu_times(root: &Path) -> Result<SystemCpuTimes, ReadError> {
    let path = root.join("proc/stat");
    let text = std::fs::read(&path).map_err(|source| ReadError::Io {
        path: path.clone(),
        source,
    })?;
    parse_system_cpu_times(&text).map_err(|detail| {
        ReadError::parse(
            &path,
            ParseError::InvalidValue {
                field: "cpu",
                value: detail,
            },
        )
    })
}

/// Parses the aggregate `cpu` line.
pub fn parse_system_cpu_times(text: &[u8]) -> Result<SystemCpuTimes, String> {
    let line = text
        .split(|&byte| byte == b'\n')
        .find(|line| line.starts_with(b"cpu "))
        .ok_or("no aggregate `cpu` line")?;
    let mut values = [0u64; 8];
    let mut fields = line
        .split(|&byte| byte == b' ')
        .filter(|f| !f.is_empty())
        .skip(1);
    for (index, value) in values.iter_mut().enumerate() {
        // Old kernels stop after fewer columns; the missing ones count as zero.
        match fields.next() {
            Some(field) => *value = parse_number(field, "cpu")?,
            None if index >= 4 => break,
            None => return Err(format!("`cpu` line has only {index} columns")),
        }
    }
    let [user, nice, system, idle, iowait, irq, softirq, steal] = values;
    // Each column fits in 64 bits but their sum need not: such a line is corrupt.
    let sum = |columns: &[u64]| {
        columns
            .iter()
            .try_fold(0u64, |sum, column| sum.checked_add(*column))
            .ok_or_else(|| "`cpu` columns overflow 64 bits when added".to_string())
    };
    let busy_ticks = sum(&[user, nice, system, irq, softirq, steal])?;
    let total_ticks = sum(&[busy_ticks, idle, iowait])?;
    let logical_processors = text
        .split(|&byte| byte == b'\n')
        .filter(|line| {
            line.strip_prefix(b"cpu")
                .is_some_and(|rest| rest.first().is_some_and(u8::is_ascii_digit))
        })
        .count() as u64;
    Ok(SystemCpuTimes {
        busy_ticks,
        total_ticks,
        logical_processors,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aggregate_line_sums_busy_columns() {
        let text = b"cpu  100 5 50 1000 20 3 2 1 0 0\ncpu0 50 2 25 500 10 1 1 0 0 0\nintr 1\n";
        let times = parse_system_cpu_times(text).unwrap();
        assert_eq!(times.busy_ticks, 100 + 5 + 50 + 3 + 2 + 1);
        assert_eq!(times.total_ticks, times.busy_ticks + 1000 + 20);
        assert_eq!(times.logical_processors, 1);
    }

    #[test]
    fn missing_or_garbage_lines_are_errors() {
        assert!(parse_system_cpu_times(b"cpu0 1 2 3 4\n").is_err());
        assert!(parse_system_cpu_times(b"cpu  1 2\n").is_err());
        assert!(parse_system_cpu_times(b"cpu  1 x 3 4\n").is_err());
    }

    #[test]
    fn columns_whose_sum_overflows_are_an_error_not_a_panic() {
        // Found by fuzz_proc_parsers (shrunk input): busy + idle overflowed, a panic in
        // debug builds and a wrapped total in release.
        let error = parse_system_cpu_times(b"cpu  0 0 3730513127188808080 14716230946520743536\n")
            .unwrap_err();
        assert!(error.contains("`cpu`"), "{error}");
        assert!(parse_system_cpu_times(b"cpu  18446744073709551615 1 0 0\n").is_err());
    }

    #[test]
    fn real_proc_stat_parses() {
        let times = read_system_cpu_times(Path::new("/")).unwrap();
        assert!(times.total_ticks >= times.busy_ticks && times.total_ticks > 0);
    }
}
