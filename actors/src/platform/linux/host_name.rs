//! Reads the host's name from `/proc/sys/kernel/hostname` (the UTS namespace's, so a
//! container reports its own), for the `host.name` resource attribute.

use std::path::Path;

use super::{ReadError, read_file};

/// The host name in `text` (the file's content): its first line, trimmed; `None` when
/// blank.
pub fn parse_host_name(text: &str) -> Option<String> {
    let name = text.lines().next().unwrap_or("").trim();
    (!name.is_empty()).then(|| name.to_owned())
}

/// Reads `root/proc/sys/kernel/hostname`; `Ok(None)` when the file is absent or blank.
pub fn read_host_name(root: &Path) -> Result<Option<String>, ReadError> {
    let path = root.join("proc/sys/kernel/hostname");
    let mut buf = Vec::with_capacity(64);
    if !read_file(&path, &mut buf)? {
        return Ok(None);
    }
    Ok(parse_host_name(&String::from_utf8_lossy(&buf)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_line_trimmed_or_none_when_blank() {
        assert_eq!(parse_host_name("gpu-node-17\n"), Some("gpu-node-17".into()));
        assert_eq!(parse_host_name("  \n"), None);
        assert_eq!(parse_host_name(""), None);
    }

    #[test]
    fn reads_the_fixture_tree_and_an_absent_file_is_none() {
        let root = tempfile::tempdir().unwrap();
        assert_eq!(read_host_name(root.path()).unwrap(), None);
        std::fs::create_dir_all(root.path().join("proc/sys/kernel")).unwrap();
        std::fs::write(root.path().join("proc/sys/kernel/hostname"), "trainer-3\n").unwrap();
        assert_eq!(
            read_host_name(root.path()).unwrap(),
            Some("trainer-3".into())
        );
    }

    #[test]
    fn this_machine_has_a_name() {
        assert!(read_host_name(Path::new("/")).unwrap().is_some());
    }
}
