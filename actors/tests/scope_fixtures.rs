//! Scope resolution over fixture `/proc` trees: children files, a child that vanished
//! after it was listed, a listed pid reused by an unrelated process, a root that is
//! gone or changed identity.

use std::path::Path;

use wattline_actors::scope::{ProcessIdentity, ScopeStatus, ScopeTarget, resolve_scope};

fn stat_line(pid: u32, name: &str, parent: u32, user: u64, start: u64) -> String {
    format!(
        "{pid} ({name}) S {parent} {pid} {pid} 0 -1 0 0 0 0 0 {user} 5 0 0 20 0 1 0 {start} 1000000 100 0\n"
    )
}

fn process(root: &Path, pid: u32, parent: u32, user: u64, start: u64, children: &[u32]) {
    let dir = root.join(format!("proc/{pid}"));
    std::fs::create_dir_all(dir.join(format!("task/{pid}"))).unwrap();
    std::fs::write(
        dir.join("stat"),
        stat_line(pid, "worker (x)", parent, user, start),
    )
    .unwrap();
    let list: Vec<String> = children.iter().map(u32::to_string).collect();
    std::fs::write(
        dir.join(format!("task/{pid}/children")),
        format!("{} ", list.join(" ")),
    )
    .unwrap();
}

fn tree() -> ScopeTarget {
    ScopeTarget::ProcessTree(ProcessIdentity {
        pid: 10,
        start_ticks: 1000,
    })
}

#[test]
fn a_tree_is_walked_through_children_files() {
    let fixture = tempfile::tempdir().unwrap();
    let root = fixture.path();
    process(root, 10, 1, 7, 1000, &[11, 12]);
    process(root, 11, 10, 3, 1001, &[13]);
    process(root, 12, 10, 2, 1002, &[]);
    process(root, 13, 11, 1, 1003, &[]);
    process(root, 99, 1, 50, 10, &[]);
    let scope = resolve_scope(root, tree());
    assert_eq!(scope.status, ScopeStatus::Ready);
    let mut pids: Vec<u32> = scope.processes.iter().map(|p| p.pid).collect();
    pids.sort_unstable();
    assert_eq!(pids, vec![10, 11, 12, 13]);
    assert_eq!(scope.visible_processes, 4);
    assert!(scope.fully_sampled());
}

#[test]
fn a_child_that_vanished_after_listing_is_skipped_not_a_failure() {
    let fixture = tempfile::tempdir().unwrap();
    let root = fixture.path();
    process(root, 10, 1, 7, 1000, &[11, 12]);
    process(root, 11, 10, 3, 1001, &[]);
    // 12 is listed as a child but its /proc entry is gone.
    let scope = resolve_scope(root, tree());
    assert_eq!(
        scope.visible_processes, 3,
        "listed processes count, including the gone one"
    );
    assert_eq!(scope.processes.len(), 2);
    assert_eq!(scope.exited_after_listing, 1);
    assert!(
        scope.fully_sampled(),
        "an exited child does not make totals unavailable"
    );
}

#[test]
fn a_listed_pid_reused_by_an_unrelated_process_makes_totals_unavailable() {
    let fixture = tempfile::tempdir().unwrap();
    let root = fixture.path();
    process(root, 10, 1, 7, 1000, &[11]);
    // 11 was our child when listed; now the pid belongs to a process of another parent.
    process(root, 11, 500, 3, 2000, &[]);
    let scope = resolve_scope(root, tree());
    assert_eq!(scope.unreadable_processes, 1);
    assert!(!scope.fully_sampled());
    assert_eq!(scope.processes.len(), 1);
}

#[test]
fn a_gone_or_changed_root_is_unavailable() {
    let fixture = tempfile::tempdir().unwrap();
    let root = fixture.path();
    let scope = resolve_scope(root, tree());
    assert_eq!(scope.status, ScopeStatus::RootGone);
    process(root, 10, 1, 7, 4242, &[]);
    let scope = resolve_scope(root, tree());
    assert_eq!(scope.status, ScopeStatus::RootIdentityChanged);
    assert!(scope.is_unavailable());
}

#[test]
fn global_scope_counts_listed_processes_and_skips_the_gone() {
    let fixture = tempfile::tempdir().unwrap();
    let root = fixture.path();
    process(root, 1, 0, 1, 1, &[]);
    process(root, 2, 1, 1, 2, &[]);
    std::fs::create_dir_all(root.join("proc/3")).unwrap(); // listed, stat gone
    std::fs::write(root.join("proc/4"), "").unwrap(); // a numeric non-directory: unreadable
    let scope = resolve_scope(root, ScopeTarget::Global);
    assert_eq!(scope.visible_processes, 4);
    assert_eq!(scope.processes.len(), 2);
    assert_eq!(scope.exited_after_listing + scope.unreadable_processes, 2);
}

/// Without `children` files the tree is found from every process's parent; one whose
/// `stat` cannot be read may be in the tree with its subtree, so the totals are not
/// claimed complete (it used to be dropped with `unreadable_processes` left at 0).
#[test]
fn an_unreadable_process_in_the_parent_scan_is_counted_not_dropped() {
    let fixture = tempfile::tempdir().unwrap();
    let root = fixture.path();
    for (pid, parent, start) in [(10, 1, 1000), (11, 10, 1001)] {
        let dir = root.join(format!("proc/{pid}"));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("stat"), stat_line(pid, "worker", parent, 1, start)).unwrap();
    }
    // 12 is listed in /proc but its stat is garbage: it may be 11's child.
    std::fs::create_dir_all(root.join("proc/12")).unwrap();
    std::fs::write(root.join("proc/12/stat"), "not a stat line\n").unwrap();
    let scope = resolve_scope(root, tree());
    assert_eq!(scope.status, ScopeStatus::Ready);
    let mut pids: Vec<u32> = scope.processes.iter().map(|p| p.pid).collect();
    pids.sort_unstable();
    assert_eq!(pids, vec![10, 11]);
    assert_eq!(scope.unreadable_processes, 1);
    assert!(!scope.fully_sampled(), "totals must not claim completeness");
}

#[test]
fn children_forked_by_another_thread_are_found_in_a_threaded_or_zombie_leader() {
    // (state, threads): several threads; a leader that exited with one thread left.
    for (state, threads) in [("S", 2), ("Z", 1)] {
        let fixture = tempfile::tempdir().unwrap();
        let root = fixture.path();
        process(root, 10, 1, 7, 1000, &[11]);
        process(root, 11, 10, 3, 1001, &[]);
        process(root, 12, 11, 2, 1002, &[]);
        let child = root.join("proc/11");
        let stat = stat_line(11, "worker (x)", 10, 3, 1001)
            .replacen(" S ", &format!(" {state} "), 1)
            .replacen(" 20 0 1 0 ", &format!(" 20 0 {threads} 0 "), 1);
        std::fs::write(child.join("stat"), stat).unwrap();
        std::fs::create_dir_all(child.join("task/15")).unwrap();
        std::fs::write(child.join("task/15/children"), "12 ").unwrap();
        let scope = resolve_scope(root, tree());
        let mut pids: Vec<u32> = scope.processes.iter().map(|p| p.pid).collect();
        pids.sort_unstable();
        assert_eq!(pids, vec![10, 11, 12], "state {state}, {threads} threads");
    }
}
