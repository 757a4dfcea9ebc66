//! The files of one ATOF set: the name of each part of a rotated file, and the parts
//! found beside a given file.
//!
//! A rotated file's parts are numbered from 1, four digits at least, the number put
//! after a `-` before `.jsonl` (the name less a `.zst` ending ending in `.jsonl`), else
//! at the end of the name less `.zst`: `run.jsonl.zst` has parts `run-0001.jsonl.zst`,
//! `run-0002.jsonl.zst`, ...; `run.log` has `run.log-0001`, ...

use std::path::{Path, PathBuf};

use wattline_config::atof::ZSTD_FILE_SUFFIX;

/// The ending the part number goes before.
const JSONL_SUFFIX: &str = ".jsonl";
/// The fewest digits a part number is written with.
const PART_DIGITS: usize = 4;

/// A file name split where a part number goes: `stem` + `-NNNN` + `ending`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct SplitName<'a> {
    stem: &'a str,
    ending: &'a str,
}

fn split_name(name: &str) -> SplitName<'_> {
    let without_zst = name.strip_suffix(ZSTD_FILE_SUFFIX).unwrap_or(name);
    let stem = without_zst
        .strip_suffix(JSONL_SUFFIX)
        .unwrap_or(without_zst);
    SplitName {
        stem,
        ending: &name[stem.len()..],
    }
}

/// The name of part `part` (from 1) of the set whose unrotated name is `name`.
pub fn part_file_name(name: &str, part: u32) -> String {
    let split = split_name(name);
    format!(
        "{}-{part:0width$}{}",
        split.stem,
        split.ending,
        width = PART_DIGITS
    )
}

/// The set name and part number of a part's file name, when it has the form
/// [`part_file_name`] writes; `None` otherwise.
pub fn parse_part_file_name(name: &str) -> Option<(String, u32)> {
    let split = split_name(name);
    let (stem, digits) = split.stem.rsplit_once('-')?;
    if digits.len() < PART_DIGITS || !digits.bytes().all(|byte| byte.is_ascii_digit()) {
        return None;
    }
    let part = digits.parse::<u32>().ok().filter(|part| *part > 0)?;
    // `-0001` and `-1` are not the same part: only the form written is one.
    if part_file_name(&format!("{stem}{}", split.ending), part) != name {
        return None;
    }
    Some((format!("{stem}{}", split.ending), part))
}

/// The parts of set `name` in `directory`, in part order. Reads the directory; an
/// absent directory has none.
pub fn list_parts(directory: &Path, name: &str) -> std::io::Result<Vec<(u32, PathBuf)>> {
    let entries = match std::fs::read_dir(directory) {
        Ok(entries) => entries,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(error) => return Err(error),
    };
    let mut parts = Vec::new();
    for entry in entries {
        let entry = entry?;
        let file_name = entry.file_name();
        let Some(file_name) = file_name.to_str() else {
            continue;
        };
        if let Some((set, part)) = parse_part_file_name(file_name)
            && set == name
        {
            parts.push((part, entry.path()));
        }
    }
    parts.sort();
    Ok(parts)
}

/// The files to read for `path`, in order: the parts of its set when `path` is a part
/// of a set whose part 1 exists, or names a set (an absent unrotated name whose part 1
/// exists); otherwise `path` alone.
pub fn files_of_set(path: &Path) -> std::io::Result<Vec<PathBuf>> {
    let directory = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let Some(name) = path.file_name().and_then(|name| name.to_str()) else {
        return Ok(vec![path.to_path_buf()]);
    };
    let set = match parse_part_file_name(name) {
        Some((set, _)) => set,
        None if !path.exists() => name.to_string(),
        None => return Ok(vec![path.to_path_buf()]),
    };
    if !directory.join(part_file_name(&set, 1)).exists() {
        return Ok(vec![path.to_path_buf()]);
    }
    let parts = list_parts(&directory, &set)?;
    Ok(parts.into_iter().map(|(_, path)| path).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_part_number_goes_before_jsonl_and_zst() {
        assert_eq!(part_file_name("run.jsonl", 1), "run-0001.jsonl");
        assert_eq!(part_file_name("run.jsonl.zst", 12), "run-0012.jsonl.zst");
        assert_eq!(
            part_file_name("wattline-2026-12-31-23.59.58.jsonl", 3),
            "wattline-2026-12-31-23.59.58-0003.jsonl"
        );
        assert_eq!(part_file_name("run.log", 2), "run.log-0002");
        assert_eq!(part_file_name("run.log.zst", 2), "run.log-0002.zst");
        assert_eq!(part_file_name("run.jsonl", 12345), "run-12345.jsonl");
    }

    #[test]
    fn a_part_name_parses_back_and_other_names_do_not() {
        assert_eq!(
            parse_part_file_name("run-0012.jsonl.zst"),
            Some(("run.jsonl.zst".into(), 12))
        );
        assert_eq!(
            parse_part_file_name("run.log-0002"),
            Some(("run.log".into(), 2))
        );
        assert_eq!(
            parse_part_file_name("run-12345.jsonl"),
            Some(("run.jsonl".into(), 12345))
        );
        assert_eq!(parse_part_file_name("run.jsonl"), None);
        assert_eq!(parse_part_file_name("run-12.jsonl"), None);
        assert_eq!(parse_part_file_name("run-0000.jsonl"), None);
        assert_eq!(parse_part_file_name("run-01234.jsonl"), None);
        assert_eq!(parse_part_file_name("run-12a4.jsonl"), None);
    }

    #[test]
    fn a_set_is_read_from_any_part_or_its_name_and_a_lone_file_alone() {
        let directory = tempfile::tempdir().unwrap();
        let root = directory.path();
        for name in [
            "run-0002.jsonl",
            "run-0001.jsonl",
            "run-0010.jsonl",
            "other-0001.jsonl",
        ] {
            std::fs::write(root.join(name), "").unwrap();
        }
        let expected: Vec<PathBuf> = ["run-0001.jsonl", "run-0002.jsonl", "run-0010.jsonl"]
            .iter()
            .map(|name| root.join(name))
            .collect();
        assert_eq!(
            files_of_set(&root.join("run-0010.jsonl")).unwrap(),
            expected
        );
        assert_eq!(files_of_set(&root.join("run.jsonl")).unwrap(), expected);
        // A name that looks like a part, with no part 1 beside it, is a file of its own.
        std::fs::write(root.join("year-2026.jsonl"), "").unwrap();
        std::fs::write(root.join("year-2025.jsonl"), "").unwrap();
        assert_eq!(
            files_of_set(&root.join("year-2026.jsonl")).unwrap(),
            vec![root.join("year-2026.jsonl")]
        );
        // An existing unrotated file is read alone.
        std::fs::write(root.join("run.jsonl"), "").unwrap();
        assert_eq!(
            files_of_set(&root.join("run.jsonl")).unwrap(),
            vec![root.join("run.jsonl")]
        );
    }
}
