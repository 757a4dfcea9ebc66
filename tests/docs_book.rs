//! The book (`docs/`, built by mdBook in CI) and the README that links into it: every
//! chapter is in `SUMMARY.md` and every `SUMMARY.md` entry exists; every relative link
//! resolves to a file, and every `#anchor` to a heading of that file (by mdBook's
//! rule for heading ids); every `{{#include}}` names a file (and anchor) that exists;
//! the language tours are included from `examples/`, so the book shows them as they
//! run; no chapter names a commit (the book says what is true now; how it became so is
//! `CHANGELOG.md`'s); and the README stays a landing page.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

fn book_source() -> PathBuf {
    Path::new(ROOT).join("docs/src")
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|error| panic!("{}: {error}", path.display()))
}

/// The book's chapters (every `.md` under `docs/src` but `SUMMARY.md`).
fn chapters() -> Vec<PathBuf> {
    let mut chapters: Vec<PathBuf> = std::fs::read_dir(book_source())
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "md"))
        .filter(|path| !path.ends_with("SUMMARY.md"))
        .collect();
    chapters.sort();
    chapters
}

/// The text outside fenced code blocks, line by line.
fn prose_lines(text: &str) -> Vec<&str> {
    let mut in_code = false;
    text.lines()
        .filter(|line| {
            if line.trim_start().starts_with("```") {
                in_code = !in_code;
                return false;
            }
            !in_code
        })
        .collect()
}

/// The targets of the inline links `[text](target)` of `text`, outside code (fenced
/// or inline).
fn link_targets(text: &str) -> Vec<String> {
    let mut targets = Vec::new();
    for line in prose_lines(text) {
        // Inline code spans hold no links.
        let mut outside = String::new();
        for (index, part) in line.split('`').enumerate() {
            if index % 2 == 0 {
                outside.push_str(part);
            }
        }
        let mut rest = outside.as_str();
        while let Some(start) = rest.find("](") {
            let after = &rest[start + 2..];
            let Some(end) = after.find(')') else { break };
            targets.push(after[..end].trim().to_owned());
            rest = &after[end..];
        }
    }
    targets
}

/// mdBook's id for a heading: lower case, whitespace to `-`, only alphanumerics, `-`
/// and `_` kept.
fn heading_id(heading: &str) -> String {
    heading
        .chars()
        .filter_map(|character| {
            if character.is_alphanumeric() || character == '_' || character == '-' {
                Some(character.to_ascii_lowercase())
            } else if character.is_whitespace() {
                Some('-')
            } else {
                None
            }
        })
        .collect()
}

/// The ids of `text`'s headings, a repeated one numbered as mdBook numbers it.
fn anchors(text: &str) -> BTreeSet<String> {
    let mut ids = BTreeSet::new();
    for line in prose_lines(text) {
        let Some(heading) = line.strip_prefix('#') else {
            continue;
        };
        let heading = heading.trim_start_matches('#').trim();
        let id = heading_id(heading);
        let mut unique = id.clone();
        let mut number = 1;
        while ids.contains(&unique) {
            unique = format!("{id}-{number}");
            number += 1;
        }
        ids.insert(unique);
    }
    ids
}

/// Every broken relative link of the markdown file `file`, in words.
fn broken_links(file: &Path) -> Vec<String> {
    let text = read(file);
    let folder = file.parent().unwrap();
    let mut broken = Vec::new();
    for target in link_targets(&text) {
        if target.starts_with("http://")
            || target.starts_with("https://")
            || target.starts_with("mailto:")
        {
            continue;
        }
        let (path, anchor) = match target.split_once('#') {
            Some((path, anchor)) => (path, Some(anchor)),
            None => (target.as_str(), None),
        };
        let linked = if path.is_empty() {
            file.to_path_buf()
        } else {
            folder.join(path)
        };
        if !linked.exists() {
            broken.push(format!("{}: no file {target}", file.display()));
            continue;
        }
        if let Some(anchor) = anchor
            && !anchors(&read(&linked)).contains(anchor)
        {
            broken.push(format!(
                "{}: no heading #{anchor} in {path}",
                file.display()
            ));
        }
    }
    broken
}

#[test]
fn every_chapter_is_in_the_summary_and_every_entry_exists() {
    let summary = read(&book_source().join("SUMMARY.md"));
    let listed: BTreeSet<PathBuf> = link_targets(&summary)
        .iter()
        .map(|target| book_source().join(target))
        .collect();
    for entry in &listed {
        assert!(
            entry.exists(),
            "SUMMARY.md lists {}, which is missing",
            entry.display()
        );
    }
    for chapter in chapters() {
        assert!(
            listed.contains(&chapter),
            "{} is not in SUMMARY.md",
            chapter.display()
        );
    }
}

#[test]
fn every_relative_link_and_anchor_resolves() {
    let mut files = chapters();
    files.push(Path::new(ROOT).join("README.md"));
    let broken: Vec<String> = files.iter().flat_map(|file| broken_links(file)).collect();
    assert!(broken.is_empty(), "{}", broken.join("\n"));
    // The checker finds what it should: a link to a missing heading is broken.
    let scratch = tempfile::tempdir().unwrap();
    std::fs::write(scratch.path().join("a.md"), "# Title\n\n## A `code` part\n").unwrap();
    std::fs::write(
        scratch.path().join("b.md"),
        "[ok](a.md#a-code-part) [no](a.md#missing) [gone](c.md) `[not](a link)`\n",
    )
    .unwrap();
    assert_eq!(broken_links(&scratch.path().join("b.md")).len(), 2);
}

#[test]
fn every_include_names_a_file_and_anchor_that_exist() {
    for chapter in chapters() {
        let text = read(&chapter);
        for (start, _) in text.match_indices("{{#include ") {
            let end = text[start..].find("}}").expect("the include ends") + start;
            let target = text[start + "{{#include ".len()..end].trim();
            let (path, anchor) = match target.split_once(':') {
                Some((path, anchor)) => (path, Some(anchor)),
                None => (target, None),
            };
            let included = chapter.parent().unwrap().join(path);
            let source = read(&included);
            if let Some(anchor) = anchor {
                assert!(
                    source.contains(&format!("ANCHOR: {anchor}"))
                        && source.contains(&format!("ANCHOR_END: {anchor}")),
                    "{}: no anchor {anchor} in {path}",
                    chapter.display()
                );
            }
        }
    }
}

#[test]
fn the_language_tours_are_included_from_the_examples_that_run() {
    for (chapter, include) in [
        (
            "rust.md",
            "{{#include ../../examples/library_tour.rs:readme}}",
        ),
        ("python.md", "{{#include ../../python/examples/tour.py}}"),
        ("node.md", "{{#include ../../node/examples/tour.js}}"),
    ] {
        let text = read(&book_source().join(chapter));
        assert!(text.contains(include), "{chapter} does not show {include}");
    }
}

/// The commit hashes in `text`, as (line number, word). A hash is a word of 7 to 40
/// lowercase hex digits holding at least one digit and one letter, standing alone: no
/// letter, digit, `-` or `_` on either side, so a GPU UUID's `GPU-8932f937` is not one.
/// Code blocks are read too. Words of exactly 16 or 32 digits are left out: they are
/// OpenTelemetry span and trace ids, which the book shows in its examples, and git
/// abbreviates a hash to 7 to 12 digits or writes all 40.
fn commit_hashes(text: &str) -> Vec<(usize, &str)> {
    let mut hashes = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let words = line.split(|character: char| {
            !(character.is_alphanumeric() || character == '-' || character == '_')
        });
        for word in words {
            let hex = word
                .chars()
                .all(|character| matches!(character, '0'..='9' | 'a'..='f'));
            let digit = word.chars().any(|character| character.is_ascii_digit());
            let letter = word.chars().any(|character| character.is_ascii_lowercase());
            let length = word.len();
            if hex && digit && letter && (7..=40).contains(&length) && length != 16 && length != 32
            {
                hashes.push((index + 1, word));
            }
        }
    }
    hashes
}

#[test]
fn no_chapter_names_a_commit() {
    let mut found = Vec::new();
    for chapter in chapters() {
        for (line, word) in commit_hashes(&read(&chapter)) {
            let file = chapter.strip_prefix(ROOT).unwrap_or(&chapter);
            found.push(format!("{}:{line}: {word}", file.display()));
        }
    }
    assert!(
        found.is_empty(),
        "commit hashes in the book (history goes in CHANGELOG.md):\n{}",
        found.join("\n")
    );
    // The scanner finds what it should, and only that.
    assert_eq!(
        commit_hashes("built at 4f60666,\nbefore (87f379b) and `0933f41a`"),
        vec![(1, "4f60666"), (2, "87f379b"), (2, "0933f41a")]
    );
    assert!(
        commit_hashes(
            "GPU-8932f937 run_ab12cd3 1865545 deadbeefcafe c20f4824e2b586d8 \
             33652a64c93cc78d32eb78e1cca5d881 ABC1234 ab12c"
        )
        .is_empty()
    );
}

#[test]
fn the_readme_is_a_landing_page() {
    let readme = read(&Path::new(ROOT).join("README.md"));
    let lines = readme.lines().count();
    assert!(
        lines <= 250,
        "README.md has {lines} lines: the reference goes in docs/"
    );
}
