//! Reads per-interface traffic counters from `/proc/net/dev`.

use std::path::Path;

use super::{ParseError, ReadError, parse_u64, read_file};

/// Number of counters after the interface name (8 receive, 8 transmit).
const COUNTERS: usize = 16;

/// Lifetime counters of one network interface.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetDevStats {
    /// Interface name: the text before the first `:`, trimmed (non-UTF-8 bytes are
    /// replaced with U+FFFD).
    pub name: String,
    /// Received bytes.
    pub rx_bytes: u64,
    /// Received packets.
    pub rx_packets: u64,
    /// Receive errors.
    pub rx_errs: u64,
    /// Transmitted bytes.
    pub tx_bytes: u64,
    /// Transmitted packets.
    pub tx_packets: u64,
    /// Transmit errors.
    pub tx_errs: u64,
}

/// Parses `/proc/net/dev` text: two header lines, then `name: 16 counters` per line.
///
/// The name ends at the first `:` (old kernels print no space between the name and a
/// wide first counter). Fails on text with fewer than two header lines, a line without
/// `:`, an empty name, or anything other than 16 numeric counters; a bad counter's
/// error names its line.
pub fn parse_net_dev(text: &str) -> Result<Vec<NetDevStats>, ParseError> {
    let mut lines = text.lines();
    if lines.next().is_none() || lines.next().is_none() {
        return Err(ParseError::MissingField("header"));
    }
    let mut out = Vec::new();
    for (index, line) in lines.enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let index = index + 2;
        let Some((name, rest)) = line.split_once(':') else {
            return Err(ParseError::malformed(index, line));
        };
        let name = name.trim();
        if name.is_empty() {
            return Err(ParseError::malformed(index, line));
        }
        let mut counters = [0u64; COUNTERS];
        let mut seen = 0;
        for token in rest.split_ascii_whitespace() {
            let Some(slot) = counters.get_mut(seen) else {
                return Err(ParseError::malformed(index, line));
            };
            *slot = parse_u64("interface counter", token)
                .map_err(|detail| ParseError::on_line(index, detail))?;
            seen += 1;
        }
        if seen != COUNTERS {
            return Err(ParseError::malformed(index, line));
        }
        out.push(NetDevStats {
            name: name.to_owned(),
            rx_bytes: counters[0],
            rx_packets: counters[1],
            rx_errs: counters[2],
            tx_bytes: counters[8],
            tx_packets: counters[9],
            tx_errs: counters[10],
        });
    }
    Ok(out)
}

/// Reads `root/proc/net/dev` (the caller's network namespace); `Ok(None)` when absent.
pub fn read_net_dev(root: &Path) -> Result<Option<Vec<NetDevStats>>, ReadError> {
    let path = root.join("proc/net/dev");
    let mut buf = Vec::with_capacity(4096);
    if !read_file(&path, &mut buf)? {
        return Ok(None);
    }
    parse_net_dev(&String::from_utf8_lossy(&buf))
        .map(Some)
        .map_err(|e| ReadError::parse(&path, e))
}
