//! `wattline completions SHELL` and `wattline man`, as a user installs them: the
//! scripts name every subcommand and are valid for their shell (bash checks its own
//! syntax here), and the manual page is roff naming the commands.

mod support;

use support::wattline;

const SUBCOMMANDS: [&str; 9] = [
    "collect",
    "diagnostics",
    "run",
    "report",
    "config",
    "doctor",
    "compare",
    "completions",
    "man",
];

fn printed(arguments: &[&str]) -> String {
    let home = tempfile::tempdir().unwrap();
    let output = support::succeeded(wattline(home.path()).args(arguments));
    String::from_utf8(output.stdout).unwrap()
}

#[test]
fn each_shell_gets_a_script_naming_every_subcommand() {
    for shell in ["bash", "zsh", "fish"] {
        let script = printed(&["completions", shell]);
        for subcommand in SUBCOMMANDS {
            assert!(script.contains(subcommand), "{shell}: no {subcommand}");
        }
        // A flag of a subcommand, completed too.
        assert!(script.contains("fail-above"), "{shell}");
    }
    let bash = printed(&["completions", "bash"]);
    assert!(bash.contains("complete -F _wattline"), "{bash}");
    let home = tempfile::tempdir().unwrap();
    let file = home.path().join("wattline.bash");
    std::fs::write(&file, &bash).unwrap();
    let check = std::process::Command::new("bash")
        .arg("-n")
        .arg(&file)
        .output()
        .unwrap();
    assert!(check.status.success(), "{check:?}");
    assert!(printed(&["completions", "fish"]).contains("complete -c wattline"));
    assert!(printed(&["completions", "zsh"]).starts_with("#compdef wattline"));
}

#[test]
fn an_unknown_shell_is_refused_by_name() {
    let home = tempfile::tempdir().unwrap();
    let output = wattline(home.path())
        .args(["completions", "tcsh"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("tcsh"));
}

#[test]
fn the_manual_page_is_roff_naming_the_commands() {
    let page = printed(&["man"]);
    assert!(page.contains(".TH wattline 1"), "{page}");
    for subcommand in SUBCOMMANDS {
        assert!(page.contains(subcommand), "no {subcommand}");
    }
}
