//! `wattline doctor` through the binary, with the stand-ins the energy tests use: the
//! fake NVML and a stand-in `nvidia-smi` found, then missing, each said with its fix;
//! a bad configuration exits 2 after the checks.

mod support;

use support::{fake_nvml, wattline};

fn doctor(
    home: &std::path::Path,
    configure: impl FnOnce(&mut std::process::Command),
) -> (Option<i32>, serde_json::Value) {
    let mut command = wattline(home);
    command
        .args(["doctor", "--json"])
        .env("PATH", "/usr/bin:/bin")
        .env_remove("LD_LIBRARY_PATH");
    configure(&mut command);
    let output = command.output().unwrap();
    let findings = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|error| panic!("{error}: {}", String::from_utf8_lossy(&output.stdout)));
    (output.status.code(), findings)
}

fn check<'a>(findings: &'a serde_json::Value, area: &str) -> &'a serde_json::Value {
    findings["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|check| check["area"] == area)
        .unwrap_or_else(|| panic!("no {area} check: {findings}"))
}

#[test]
fn gpu_sources_found_are_described_and_missing_ones_come_with_the_fix() {
    let home = tempfile::tempdir().unwrap();
    let (code, bare) = doctor(home.path(), |_| {});
    assert_eq!(code, Some(0));
    let areas: Vec<&str> = bare["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["area"].as_str().unwrap())
        .collect();
    assert_eq!(
        areas,
        [
            "nvml",
            "nvidia_smi",
            "drm",
            "rapl",
            "cgroup",
            "psi",
            "process_io"
        ]
    );
    let nvml = check(&bare, "nvml");
    assert_eq!(nvml["status"], "unavailable");
    assert_eq!(
        nvml["finding"],
        "NVML library not found (libnvidia-ml.so.1)"
    );
    assert!(nvml["fix"].as_str().unwrap().contains("LD_LIBRARY_PATH"));
    assert_eq!(
        check(&bare, "nvidia_smi")["finding"],
        "nvidia-smi is not on the search path"
    );

    let library = fake_nvml(&[]);
    let (_bin, path) = support::path_with_stand_in_nvidia_smi();
    let (code, found) = doctor(home.path(), |command| {
        command
            .env("LD_LIBRARY_PATH", library.path())
            .env("PATH", &path);
    });
    assert_eq!(code, Some(0));
    let nvml = check(&found, "nvml");
    assert_eq!(nvml["status"], "ok", "{nvml}");
    assert!(
        nvml["finding"]
            .as_str()
            .unwrap()
            .contains("device(s), energy counter on"),
        "{nvml}"
    );
    assert!(nvml["fix"].is_null());
    let smi = check(&found, "nvidia_smi");
    assert_eq!(smi["status"], "ok", "{smi}");
    assert!(
        smi["finding"]
            .as_str()
            .unwrap()
            .contains(": 1 device(s), answered in "),
        "{smi}"
    );

    // A driver without the energy counter: measurable, from power samples.
    let old = fake_nvml(&["-DFAKE_NO_ENERGY_SYMBOL"]);
    let (_, partial) = doctor(home.path(), |command| {
        command.env("LD_LIBRARY_PATH", old.path());
    });
    let nvml = check(&partial, "nvml");
    assert_eq!(nvml["status"], "partial", "{nvml}");
    assert!(
        nvml["finding"]
            .as_str()
            .unwrap()
            .contains("energy counter on 0 of them"),
        "{nvml}"
    );
}

#[test]
fn a_bad_configuration_exits_2_after_the_checks_and_names_the_file() {
    let home = tempfile::tempdir().unwrap();
    let config = home.path().join("plugins.toml");
    std::fs::write(
        &config,
        "version = 1\n[[components]]\nkind = \"nonsense\"\n",
    )
    .unwrap();
    let (code, findings) = doctor(home.path(), |command| {
        command.arg("--config").arg(&config);
    });
    assert_eq!(code, Some(2));
    assert_eq!(
        findings["checks"].as_array().unwrap().len(),
        7,
        "the checks ran"
    );
    let error = findings["config_error"].as_str().unwrap();
    assert!(error.contains(&config.display().to_string()), "{error}");
    assert!(
        findings["config_files"]
            .as_array()
            .unwrap()
            .iter()
            .any(|file| file["exists"] == true)
    );

    let text = wattline(home.path())
        .args(["doctor", "--config"])
        .arg(&config)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&text.stdout);
    assert!(
        stdout.starts_with("what wattline can measure here\n"),
        "{stdout}"
    );
    assert!(stdout.contains("invalid"), "{stdout}");
}
