//! What the fuzz tests of every crate share: how many cases to run (a CI count per
//! test, `PROPTEST_CASES` for a longer run) and hostile inputs built from valid samples.
//!
//! Each crate's `tests/fuzz_*.rs` includes this file with `#[path]`; none uses all of it.

#![allow(dead_code)]

use std::borrow::Cow;

use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::{Config, FileFailurePersistence};

/// The variable that sets every fuzz test's case count, for a longer run.
pub const CASES_VARIABLE: &str = "PROPTEST_CASES";

/// Runner settings for a test that runs `ci_cases` cases unless [`CASES_VARIABLE`] says
/// otherwise. proptest reads that variable only for tests that set no count of their
/// own, so it is read here.
pub fn runner_config(ci_cases: u32) -> Config {
    let cases = std::env::var(CASES_VARIABLE)
        .ok()
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or(ci_cases);
    Config {
        cases,
        // `fuzz_x.proptest-regressions` beside the test file: proptest's default looks
        // for a `src` folder, which integration tests do not have.
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource(
            "proptest-regressions",
        ))),
        ..Config::default()
    }
}

/// Field values that break parsers: past 64 bits, negative, empty, fractional, other
/// fields' keywords, separators, and bytes that are not UTF-8.
pub const HOSTILE_TOKENS: &[&[u8]] = &[
    b"18446744073709551615",
    b"18446744073709551616",
    b"99999999999999999999999999999999",
    b"4611686018427387904",
    b"9223372036854775807",
    b"-1",
    b"-9223372036854775808",
    b"",
    b" ",
    b"0",
    b"00",
    b"-0",
    b"+1",
    b"1.5",
    b"1e400",
    b"NaN",
    b"inf",
    b"0x1f",
    b"max",
    b"kB",
    b"MiB",
    b"N/A",
    b"[N/A]",
    b"ns",
    b"\xff\xfe",
    b"\xc3",
    b"\0",
    b"\n",
    b"\r\n",
    b":",
    b"=",
    b",",
    b", ",
    b"(",
    b")",
    b" - ",
    b"-",
    b"\\",
    b"\\0",
    b"\"",
    b"{",
    b"]",
    b"\xef\xbb\xbf",
];

/// One structural change to a sample.
#[derive(Debug, Clone)]
pub enum Mutation {
    /// The token at this position (a run of bytes between separators) becomes `with`.
    ReplaceToken { token: Index, with: Vec<u8> },
    /// The text ends at this byte (possibly inside a UTF-8 sequence).
    TruncateAt(Index),
    /// This line appears twice.
    DuplicateLine(Index),
    /// These two lines trade places.
    SwapLines(Index, Index),
    /// This line is gone.
    DropLine(Index),
    /// `bytes` are inserted at this byte.
    Insert { at: Index, bytes: Vec<u8> },
}

/// A replacement value: a hostile token, a long digit string, a random number written
/// out, or a few random bytes.
pub fn hostile_token() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        4 => proptest::sample::select(HOSTILE_TOKENS).prop_map(<[u8]>::to_vec),
        1 => "[0-9]{1,40}".prop_map(String::into_bytes),
        1 => any::<u64>().prop_map(|n| n.to_string().into_bytes()),
        1 => any::<i64>().prop_map(|n| n.to_string().into_bytes()),
        1 => any::<f64>().prop_map(|n| n.to_string().into_bytes()),
        1 => proptest::collection::vec(any::<u8>(), 0..6),
    ]
}

/// `u64` values arithmetic breaks on.
pub const EDGE_U64: &[u64] = &[
    0,
    1,
    u64::MAX,
    u64::MAX - 1,
    u64::MAX / 2,
    i64::MAX as u64,
    1 << 62,
    u32::MAX as u64,
];

/// A `u64` that is often one of [`EDGE_U64`].
pub fn edge_u64() -> impl Strategy<Value = u64> {
    prop_oneof![
        2 => any::<u64>(),
        1 => proptest::sample::select(EDGE_U64),
    ]
}

/// One [`Mutation`].
pub fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        6 => (any::<Index>(), hostile_token())
            .prop_map(|(token, with)| Mutation::ReplaceToken { token, with }),
        2 => any::<Index>().prop_map(Mutation::TruncateAt),
        1 => any::<Index>().prop_map(Mutation::DuplicateLine),
        1 => (any::<Index>(), any::<Index>()).prop_map(|(a, b)| Mutation::SwapLines(a, b)),
        1 => any::<Index>().prop_map(Mutation::DropLine),
        1 => (any::<Index>(), hostile_token())
            .prop_map(|(at, bytes)| Mutation::Insert { at, bytes }),
    ]
}

/// A valid sample from `samples` with one to five mutations applied.
pub fn mutated(samples: &'static [&'static str]) -> impl Strategy<Value = Vec<u8>> {
    (
        proptest::sample::select(samples),
        proptest::collection::vec(mutation(), 1..6),
    )
        .prop_map(|(sample, mutations)| apply(sample.as_bytes(), &mutations))
}

/// Arbitrary input: any string, any bytes, or bytes from the characters `/proc`,
/// cgroup, CSV, TOML and JSON files are made of.
pub fn noise() -> impl Strategy<Value = Vec<u8>> {
    const ALPHABET: &[u8] = b"0123456789 -:=,.()[]{}\"'#/\\\n\tkBmaxsomefulltotalN/AP\xff\xc3";
    prop_oneof![
        any::<String>().prop_map(String::into_bytes),
        proptest::collection::vec(any::<u8>(), 0..256),
        proptest::collection::vec(proptest::sample::select(ALPHABET), 0..256),
    ]
}

/// The bytes as the readers decode them: lossily.
pub fn lossy(bytes: &[u8]) -> Cow<'_, str> {
    String::from_utf8_lossy(bytes)
}

/// `sample` after each of `mutations`, in order.
pub fn apply(sample: &[u8], mutations: &[Mutation]) -> Vec<u8> {
    let mut text = sample.to_vec();
    for mutation in mutations {
        text = apply_one(&text, mutation);
    }
    text
}

fn apply_one(text: &[u8], mutation: &Mutation) -> Vec<u8> {
    match mutation {
        Mutation::ReplaceToken { token, with } => {
            let tokens = token_spans(text);
            if tokens.is_empty() {
                return text.to_vec();
            }
            let (start, end) = tokens[token.index(tokens.len())];
            [&text[..start], with.as_slice(), &text[end..]].concat()
        }
        Mutation::TruncateAt(at) => text[..at.index(text.len() + 1)].to_vec(),
        Mutation::Insert { at, bytes } => {
            let at = at.index(text.len() + 1);
            [&text[..at], bytes.as_slice(), &text[at..]].concat()
        }
        Mutation::DuplicateLine(line) => edit_lines(text, |lines| {
            let line = line.index(lines.len());
            lines.insert(line, lines[line].clone());
        }),
        Mutation::SwapLines(a, b) => edit_lines(text, |lines| {
            let (a, b) = (a.index(lines.len()), b.index(lines.len()));
            lines.swap(a, b);
        }),
        Mutation::DropLine(line) => edit_lines(text, |lines| {
            lines.remove(line.index(lines.len()));
        }),
    }
}

/// Bytes that end a token.
fn is_separator(byte: u8) -> bool {
    matches!(
        byte,
        b' ' | b'\t' | b'\n' | b':' | b'=' | b',' | b'(' | b')' | b'"' | b'[' | b']' | b'{' | b'}'
    )
}

/// Start and end of every run of non-separator bytes.
fn token_spans(text: &[u8]) -> Vec<(usize, usize)> {
    let mut spans = Vec::new();
    let mut start = None;
    for (index, byte) in text.iter().enumerate() {
        match (start, is_separator(*byte)) {
            (None, false) => start = Some(index),
            (Some(from), true) => {
                spans.push((from, index));
                start = None;
            }
            _ => {}
        }
    }
    if let Some(from) = start {
        spans.push((from, text.len()));
    }
    spans
}

/// Applies `edit` to the lines of `text` (each keeps its `\n`); text without lines is
/// returned as is.
fn edit_lines(text: &[u8], edit: impl FnOnce(&mut Vec<Vec<u8>>)) -> Vec<u8> {
    let mut lines: Vec<Vec<u8>> = text
        .split_inclusive(|byte| *byte == b'\n')
        .map(<[u8]>::to_vec)
        .collect();
    if lines.is_empty() {
        return text.to_vec();
    }
    // A last line without `\n` gets one, so a moved line never joins another.
    if let Some(last) = lines.last_mut()
        && last.last() != Some(&b'\n')
    {
        last.push(b'\n');
    }
    edit(&mut lines);
    lines.concat()
}

/// A directory tree kept for a whole test, whose files each case sets. Creating and
/// removing a directory per case costs milliseconds on some file systems (this
/// project's VM: 17 ms), removing and creating a small file does not.
pub struct ScratchTree {
    root: tempfile::TempDir,
}

impl ScratchTree {
    /// An empty tree under the temp directory.
    pub fn new() -> std::io::Result<Self> {
        Ok(ScratchTree {
            root: tempfile::tempdir()?,
        })
    }

    /// The tree's root.
    pub fn root(&self) -> &std::path::Path {
        self.root.path()
    }

    /// Gives `relative` the bytes `content`, or removes it for `None`. Removes before
    /// writing: truncating a file that holds data is the slow path on ext4.
    pub fn set(&self, relative: &str, content: Option<&[u8]>) -> std::io::Result<()> {
        let path = self.root().join(relative);
        match std::fs::remove_file(&path) {
            Err(error) if error.kind() != std::io::ErrorKind::NotFound => return Err(error),
            _ => {}
        }
        let Some(content) = content else {
            return Ok(());
        };
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(path, content)
    }
}

/// Sets each `(path, content)` in this thread's [`ScratchTree`] (`None` removes the
/// file), then runs `read` on the tree's root. Each test runs on a thread of its own,
/// so its cases share one tree, removed when the test ends.
pub fn with_files<'a, T>(
    files: impl IntoIterator<Item = (String, Option<&'a [u8]>)>,
    read: impl FnOnce(&std::path::Path) -> T,
) -> Result<T, TestCaseError> {
    thread_local! {
        static TREE: ScratchTree = ScratchTree::new().expect("a temp directory for the tree");
    }
    TREE.with(|tree| {
        for (path, content) in files {
            tree.set(&path, content)?;
        }
        Ok(read(tree.root()))
    })
    .map_err(|error: std::io::Error| TestCaseError::fail(format!("scratch tree: {error}")))
}
