//! Kernel constants that turn `/proc` units into base units: clock ticks and page size.

/// Clock ticks per second (`_SC_CLK_TCK`), read once.
pub fn clock_ticks_per_second() -> u64 {
    // SAFETY: sysconf has no preconditions; it returns -1 on an unknown name.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    u64::try_from(ticks).ok().filter(|&t| t > 0).unwrap_or(100)
}

/// Page size in bytes (`_SC_PAGESIZE`).
pub fn page_size_bytes() -> u64 {
    // SAFETY: sysconf has no preconditions; it returns -1 on an unknown name.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    u64::try_from(size).ok().filter(|&s| s > 0).unwrap_or(4096)
}
