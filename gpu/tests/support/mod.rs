//! Helpers shared by the GPU source tests: fixture paths, fake `nvidia-smi` folders,
//! the fake NVML build, and a log recorder.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use tracing::field::{Field, Visit};
use tracing::{Event, Level, Metadata, Subscriber, span};

/// `tests/fixtures/<relative>`.
pub fn fixture(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(relative)
}

/// Text of a fixture file.
pub fn fixture_text(relative: &str) -> String {
    std::fs::read_to_string(fixture(relative)).expect("fixture readable")
}

/// A temp folder holding `nvidia-smi` (a copy of `fake-smi/<script>`, executable)
/// and, when given, `answer.csv` (a copy of `smi/<answer>`).
pub fn fake_smi_dir(script: &str, answer: Option<&str>) -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("temp dir");
    let program = dir.path().join("nvidia-smi");
    std::fs::copy(fixture(&format!("fake-smi/{script}")), &program).expect("copy script");
    std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    if let Some(answer) = answer {
        std::fs::copy(
            fixture(&format!("smi/{answer}")),
            dir.path().join("answer.csv"),
        )
        .expect("copy answer");
    }
    dir
}

/// The device queries (`--query-gpu`) among the lines of the `calls` file a fake tool
/// appends its arguments to; the process queries that follow an answer are left out.
pub fn calls(dir: &Path) -> Vec<String> {
    std::fs::read_to_string(dir.join("calls"))
        .map(|text| {
            text.lines()
                .filter(|line| !line.contains("--query-compute-apps"))
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// Compile `fake_nvml.c` with `defines` into `dir/libnvidia-ml.so.1`.
pub fn build_fake_nvml(dir: &Path, defines: &[String]) -> PathBuf {
    let library = dir.join("libnvidia-ml.so.1");
    let status = std::process::Command::new("cc")
        .args(["-shared", "-fPIC", "-O0", "-o"])
        .arg(&library)
        .arg(fixture("fake_nvml.c"))
        .args(defines)
        .arg("-lm")
        .status()
        .expect("the system C compiler (cc) runs");
    assert!(status.success(), "fake NVML did not compile");
    library
}

/// One captured log event.
#[derive(Debug, Clone)]
pub struct LogLine {
    pub level: Level,
    /// The message and every field, `name=value`, space separated.
    pub text: String,
}

/// A subscriber that keeps every event (install with `tracing::subscriber::set_default`).
#[derive(Clone, Default)]
pub struct LogRecorder {
    lines: Arc<Mutex<Vec<LogLine>>>,
}

impl LogRecorder {
    pub fn lines(&self) -> Vec<LogLine> {
        self.lines.lock().expect("log lock").clone()
    }

    pub fn at(&self, level: Level) -> Vec<String> {
        self.lines()
            .into_iter()
            .filter(|line| line.level == level)
            .map(|line| line.text)
            .collect()
    }
}

struct TextVisitor(String);

impl Visit for TextVisitor {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if !self.0.is_empty() {
            self.0.push(' ');
        }
        self.0.push_str(&format!("{}={:?}", field.name(), value));
    }
}

impl Subscriber for LogRecorder {
    fn enabled(&self, _metadata: &Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _span: &span::Attributes<'_>) -> span::Id {
        span::Id::from_u64(1)
    }
    fn record(&self, _span: &span::Id, _values: &span::Record<'_>) {}
    fn record_follows_from(&self, _span: &span::Id, _follows: &span::Id) {}
    fn event(&self, event: &Event<'_>) {
        let mut visitor = TextVisitor(String::new());
        event.record(&mut visitor);
        self.lines.lock().expect("log lock").push(LogLine {
            level: *event.metadata().level(),
            text: visitor.0,
        });
    }
    fn enter(&self, _span: &span::Id) {}
    fn exit(&self, _span: &span::Id) {}
}
