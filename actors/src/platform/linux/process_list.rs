//! Listing processes: every numeric `/proc` entry, and a process's children from
//! `/proc/PID/task/TID/children`.

use std::path::Path;

use crate::platform::error::ReadError;

/// Every process ID under `root/proc`, unsorted.
pub fn list_all_process_ids(root: &Path) -> Result<Vec<u32>, ReadError> {
    let proc_dir = root.join("proc");
    let entries = std::fs::read_dir(&proc_dir).map_err(|error| ReadError::Io {
        path: proc_dir.clone(),
        source: error,
    })?;
    let mut pids = Vec::with_capacity(512);
    for entry in entries.flatten() {
        let name = entry.file_name();
        if let Some(pid) = name.to_str().and_then(|name| name.parse::<u32>().ok()) {
            pids.push(pid);
        }
    }
    Ok(pids)
}

/// The direct children of `pid`, from the `children` file of each of its threads.
/// A process that exited meanwhile has no children (`Ok` with an empty list is not
/// distinguishable from a childless process here; the caller checks the parent's own
/// identity).
pub fn read_children(root: &Path, pid: u32, children: &mut Vec<u32>) -> Result<(), ReadError> {
    let task_dir = root.join(format!("proc/{pid}/task"));
    let tasks = match std::fs::read_dir(&task_dir) {
        Ok(tasks) => tasks,
        Err(error) if super::is_absent(&error) => {
            return Err(ReadError::Gone { path: task_dir });
        }
        Err(error) => return Err(ReadError::from_io(&task_dir, error)),
    };
    let mut text = Vec::with_capacity(64);
    for task in tasks.flatten() {
        let path = task.path().join("children");
        match read_children_file(&path, &mut text) {
            Ok(()) => parse_children(&text, children),
            // A thread that ended between listing and reading has no children to add.
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
            Err(error) if error.raw_os_error() == Some(libc::ESRCH) => {}
            Err(error) => return Err(ReadError::from_io(&path, error)),
        }
    }
    Ok(())
}

/// The direct children of the process whose `stat` is `stat`, as [`read_children`]
/// finds them; a live process of one thread has one `children` file, its own, read
/// without listing `task/` first (most processes of a tree: two syscalls of four).
/// A zombie leader may have a live thread of another id, so it is listed.
pub fn read_children_of(
    root: &Path,
    stat: &super::process_stat::ProcessStat,
    children: &mut Vec<u32>,
) -> Result<(), ReadError> {
    if stat.thread_count != 1 || stat.is_zombie() {
        return read_children(root, stat.pid, children);
    }
    let path = root.join(format!("proc/{0}/task/{0}/children", stat.pid));
    let mut text = Vec::with_capacity(64);
    match read_children_file(&path, &mut text) {
        Ok(()) => {
            parse_children(&text, children);
            Ok(())
        }
        // Exited since its `stat` was read: gone, as its `task/` would be.
        Err(error)
            if error.kind() == std::io::ErrorKind::NotFound
                || error.raw_os_error() == Some(libc::ESRCH) =>
        {
            Err(ReadError::Gone { path })
        }
        Err(error) => Err(ReadError::from_io(&path, error)),
    }
}

/// Reads one `children` file into `text` (cleared first), without a size probe.
fn read_children_file(path: &Path, text: &mut Vec<u8>) -> std::io::Result<()> {
    text.clear();
    let mut file = std::fs::File::open(path)?;
    super::read_unsized(&mut file, text).map(|_| ())
}

/// Parses a `children` file: space-separated pids.
pub fn parse_children(text: &[u8], children: &mut Vec<u32>) {
    for field in text.split(|byte| byte.is_ascii_whitespace()) {
        if let Some(pid) = std::str::from_utf8(field)
            .ok()
            .and_then(|f| f.parse::<u32>().ok())
        {
            children.push(pid);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn children_file_parses_with_trailing_space() {
        let mut children = Vec::new();
        parse_children(b"12 345 6789 ", &mut children);
        parse_children(b"", &mut children);
        assert_eq!(children, vec![12, 345, 6789]);
    }

    #[test]
    fn lists_numeric_entries_only() {
        let root = tempfile::tempdir().unwrap();
        for name in ["1", "42", "self", "net", "007x"] {
            std::fs::create_dir_all(root.path().join("proc").join(name)).unwrap();
        }
        let mut pids = list_all_process_ids(root.path()).unwrap();
        pids.sort_unstable();
        assert_eq!(pids, vec![1, 42]);
    }
}
