//! `--html`: the page `wattline run` writes for a real command, and the one `wattline
//! report FILE` writes from that run's ATOF file, loaded in headless Chromium: no
//! console message, and a screenshot with the charts drawn. The screenshots stay under
//! `target/report-html/` for a person (or CI) to look at.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use support::wattline;

/// A stand-in `nvidia-smi` whose power climbs from 150 W to 340 W and back in 2 s, so
/// the GPU chart has a shape.
const RAMPING_NVIDIA_SMI: &str = r#"#!/bin/sh
uuid=GPU-3f2b9c1e-8a4d-4b7e-9c21-5d6e7f8a9b0c
case "$*" in
  *-L*) echo "GPU 0: NVIDIA H200 (UUID: $uuid)";;
  *--loop-ms=*) i=0; while :; do i=$(( (i + 1) % 20 )); echo "0, $uuid, $((150 + i * 10)).00"; sleep 0.1; done;;
  *) echo "0, $uuid, NVIDIA H200, 7, 3, 1377, 143771, 46, 250.00, 700.00, 1980, 3201, [N/A], P0, Not Active, Not Active, Not Active, Not Active, 0, 0, 250.00";;
esac
"#;

/// Keeps one processor busy for 1.5 s (the shell's own arithmetic, the clock read
/// every 5000 steps).
const BUSY_LOOP: &str = "end=$(( $(date +%s%N) / 1000000 + 1500 )); \
    while [ $(( $(date +%s%N) / 1000000 )) -lt $end ]; do \
    i=0; while [ $i -lt 5000 ]; do i=$((i + 1)); done; done";

/// The line colour of each chart's first line (the renderer's palette).
const FIRST_LINE_RGB: (u8, u8, u8) = (0x00, 0x72, 0xb2);

fn chromium() -> String {
    match std::env::var("WATTLINE_CHROMIUM") {
        Ok(path) if !path.is_empty() => path,
        _ => panic!(
            "WATTLINE_CHROMIUM is not set: the HTML report test loads the page in headless \
             Chromium. Install it with `apt-get install -y chromium` (Debian; scripts/test.sh \
             does so when /usr/bin/chromium is missing) and set \
             WATTLINE_CHROMIUM=/usr/bin/chromium"
        ),
    }
}

/// `target/report-html/`, kept after the test.
fn artefacts() -> PathBuf {
    let directory = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .expect("the target directory holds tmp/")
        .join("report-html");
    std::fs::create_dir_all(&directory).unwrap();
    directory
}

/// Loads `page` in headless Chromium with a fresh profile and no network features,
/// screenshots it to `png`, and returns the browser's log.
fn screenshot(browser: &str, page: &Path, png: &Path) -> String {
    let profile = tempfile::tempdir().unwrap();
    let _ = std::fs::remove_file(png);
    let output = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--enable-logging=stderr",
            "--v=0",
            "--window-size=1280,2000",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg(format!("--screenshot={}", png.display()))
        .arg(format!("file://{}", page.display()))
        .output()
        .unwrap_or_else(|error| panic!("cannot start {browser}: {error}"));
    let log = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(output.status.success(), "chromium failed:\n{log}");
    assert!(png.exists(), "no screenshot written:\n{log}");
    log
}

/// The page logged nothing to the console (it has no script, so any console line is
/// an error: a blocked load, a parse problem).
fn assert_no_console_message(log: &str) {
    let console: Vec<&str> = log
        .lines()
        .filter(|line| line.contains(":CONSOLE") || line.contains("Failed to load"))
        .collect();
    assert!(console.is_empty(), "console messages: {console:#?}");
}

/// The screenshot shows charts: many colours, the first line colour drawn over
/// thousands of pixels, and plenty that is neither page nor card background.
fn assert_charts_drawn(png: &Path) {
    let decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(png).unwrap()));
    let mut reader = decoder.read_info().unwrap();
    let mut buffer = vec![0; reader.output_buffer_size().unwrap()];
    let frame = reader.next_frame(&mut buffer).unwrap();
    let channels = frame.color_type.samples();
    assert!(channels >= 3, "{:?}", frame.color_type);
    let (width, height) = (frame.width as usize, frame.height as usize);
    assert_eq!((width, height), (1280, 2000));
    let pixels: Vec<(u8, u8, u8)> = buffer[..frame.buffer_size()]
        .chunks(channels)
        .map(|pixel| (pixel[0], pixel[1], pixel[2]))
        .collect();
    let near = |(r, g, b): (u8, u8, u8), (tr, tg, tb): (u8, u8, u8), by: i32| {
        (i32::from(r) - i32::from(tr)).abs() <= by
            && (i32::from(g) - i32::from(tg)).abs() <= by
            && (i32::from(b) - i32::from(tb)).abs() <= by
    };
    let distinct: std::collections::HashSet<_> = pixels.iter().collect();
    assert!(distinct.len() > 100, "{} colours", distinct.len());
    let line = pixels
        .iter()
        .filter(|pixel| near(**pixel, FIRST_LINE_RGB, 40))
        .count();
    assert!(line > 2000, "{line} pixels of the line colour");
    let drawn = pixels
        .iter()
        .filter(|pixel| {
            !near(**pixel, (0xff, 0xff, 0xff), 6) && !near(**pixel, (0xf6, 0xf7, 0xf9), 6)
        })
        .count();
    println!(
        "{}: {} colours, {line} pixels of the line colour, {drawn} drawn",
        png.display(),
        distinct.len()
    );
    assert!(
        drawn * 100 > pixels.len() * 3,
        "only {drawn} of {} pixels drawn",
        pixels.len()
    );
}

#[test]
fn run_and_report_write_pages_that_chromium_shows_with_their_charts() {
    let browser = chromium();
    let home = tempfile::tempdir().unwrap();
    let atof = home.path().join("runs");
    let out = artefacts();
    let run_page = out.join("run.html");
    let (_bin, path) = support::path_with_nvidia_smi(RAMPING_NVIDIA_SMI);
    let output = wattline(home.path())
        .env("PATH", &path)
        .env("GENAI_ENABLE_CO2_TRACKING", "true")
        .args([
            "run",
            "--quiet",
            "--interval",
            "100",
            "--scope",
            "process-tree",
        ])
        .arg("--atof")
        .arg(&atof)
        .arg("--html")
        .arg(&run_page)
        .args(["--", "sh", "-c", BUSY_LOOP])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    // The table's sparkline for the GPU.
    let sparkline = stderr
        .lines()
        .find(|line| line.starts_with("GPU NVIDIA H200 GPU-3f2b9c1e"))
        .unwrap_or_else(|| panic!("no sparkline: {stderr}"));
    assert!(
        sparkline
            .chars()
            .filter(|c| ('▁'..='█').contains(c))
            .count()
            >= 30,
        "{sparkline}"
    );

    let page = std::fs::read_to_string(&run_page).unwrap();
    for chart in ["gpu-power-chart", "cpu-use-chart", "memory-chart"] {
        assert!(page.contains(&format!("<svg id=\"{chart}\"")), "no {chart}");
    }
    assert!(page.contains("scope process_tree"));
    assert!(page.contains("while [ $(( $(date +%s%N) / 1000000 )) -lt $end ]"));
    assert!(
        page.contains("No CPU package or DRAM power was read") || page.contains("cpu-power-chart")
    );
    let run_png = out.join("screenshot.png");
    let log = screenshot(&browser, &run_page, &run_png);
    println!("screenshot of the run's page: {}", run_png.display());
    assert_no_console_message(&log);
    assert_charts_drawn(&run_png);

    // The same run, rebuilt from its ATOF file.
    let file = std::fs::read_dir(&atof)
        .unwrap()
        .next()
        .expect("an ATOF file")
        .unwrap()
        .path();
    let report_page = out.join("report.html");
    let output = wattline(home.path())
        .arg("report")
        .arg(&file)
        .arg("--html")
        .arg(&report_page)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains("power over the run"), "{stdout}");
    let replayed = std::fs::read_to_string(&report_page).unwrap();
    assert!(replayed.contains("rebuilt from an ATOF file"));
    for chart in ["gpu-power-chart", "cpu-use-chart", "memory-chart"] {
        assert!(
            replayed.contains(&format!("<svg id=\"{chart}\"")),
            "no {chart}"
        );
    }
    let report_png = out.join("report-screenshot.png");
    let log = screenshot(&browser, &report_page, &report_png);
    println!("screenshot of the replayed page: {}", report_png.display());
    assert_no_console_message(&log);
    assert_charts_drawn(&report_png);
}

#[test]
fn without_gpu_power_the_page_says_why() {
    let browser = chromium();
    let home = tempfile::tempdir().unwrap();
    let page_path = home.path().join("page.html");
    // No stand-in: on a machine without an NVIDIA driver no GPU power is read.
    let output = wattline(home.path())
        .args([
            "run",
            "--quiet",
            "--interval",
            "100",
            "--report",
            "json",
            "--html",
        ])
        .arg(&page_path)
        .args(["--", "sh", "-c", "sleep 0.3"])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let page = std::fs::read_to_string(&page_path).unwrap();
    match report["gpu_unavailable"].as_str() {
        Some(reason) => {
            let said = format!(
                "No GPU power was read: {}",
                wattline::report::html::escape(reason)
            );
            assert!(page.contains(&said), "{said} not in the page");
            assert!(!page.contains("gpu-power-chart"));
        }
        // A machine with a GPU draws it.
        None => assert!(page.contains("<svg id=\"gpu-power-chart\"")),
    }
    let png = home.path().join("page.png");
    assert_no_console_message(&screenshot(&browser, &page_path, &png));
}
