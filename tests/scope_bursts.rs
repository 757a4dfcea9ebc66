//! Bursts that lose nothing: 10 000 Agent scopes opened at once (then ended at once,
//! or kept live across polls) with the ATOF file (plain and zstd) and an OTLP exporter
//! on. Every count is checked against the input, from the event file itself: each
//! scope's one start, one end and one `wattline.scope_energy` mark, and under every
//! poll exactly one mark copy per scope live at that point of the file.

mod support;

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::io::BufRead;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde::Deserialize;
use wattline::Pipeline;
use wattline::config::{AtofCompression, AtofConfig, EffectiveConfig, ResourceMetricsConfig};
use wattline::events::{EventSink, PipelineEvent, RESOURCE_MARK_NAME};
use wattline::overrides::enable_otlp;

/// How many scopes a burst opens.
const SCOPES: usize = 10_000;
/// The mark every settled scope gets.
const SCOPE_ENERGY: &str = "wattline.scope_energy";

/// The fields of an event line the checks read (the rest is skipped).
#[derive(Deserialize)]
struct Line {
    kind: String,
    uuid: String,
    parent_uuid: Option<String>,
    timestamp: String,
    name: String,
    scope_category: Option<String>,
}

/// Counts the polls whose mark was copied under every scope of a burst: only tells the
/// test when to end them (what is checked is read from the file).
#[derive(Default)]
struct FullPolls(AtomicUsize);

impl EventSink for FullPolls {
    fn send(&self, event: PipelineEvent) {
        if let PipelineEvent::MarkCopies(copies) = event
            && copies.copies.len() == SCOPES
        {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
}

/// A pipeline polling every second, the ATOF file (`compression`) in `directory`, OTLP
/// to a closed local port (its exports fail; the file must not care); `polls` sees
/// every event too.
async fn spawn(directory: &Path, compression: AtofCompression, polls: Arc<FullPolls>) -> Pipeline {
    let mut resource = ResourceMetricsConfig::default();
    resource.polling.enabled = true;
    resource.polling.interval_millis = 1000;
    let mut config = EffectiveConfig {
        resource_metrics: Some(resource),
        atof: Some(AtofConfig {
            output_directory: directory.to_string_lossy().into_owned(),
            filename: "run.jsonl".into(),
            compression,
            ..AtofConfig::default()
        }),
        ..EffectiveConfig::default()
    };
    let url = format!("http://127.0.0.1:{}", support::free_port());
    enable_otlp(&mut config, &url, "otlp url").unwrap();
    if let Some(otlp) = &mut config.opentelemetry {
        otlp.export_interval_millis = 500;
        for endpoint in &mut otlp.endpoints {
            endpoint.timeout_millis = 200;
        }
    }
    Pipeline::builder()
        .config(config)
        .environment(Default::default())
        .gpu_source(|| None)
        .event_sink(polls)
        .spawn()
        .await
        .unwrap()
}

/// Every line of the event file in `directory`, plain or zstd, in file order. A last
/// line cut short would fail to parse: nothing may be cut after shutdown.
fn lines(directory: &Path, compression: AtofCompression) -> Vec<Line> {
    let text = match compression {
        AtofCompression::Zstd => {
            let file = std::fs::File::open(directory.join("run.jsonl.zst")).unwrap();
            let mut reader = wattline_exporters::atof_frames::FrameLines::new(file).unwrap();
            let (mut text, mut line) = (String::new(), String::new());
            while reader.read_line(&mut line).unwrap() > 0 {
                text.push_str(&line);
                line.clear();
            }
            text
        }
        _ => std::fs::read_to_string(directory.join("run.jsonl")).unwrap(),
    };
    assert!(text.ends_with('\n'), "the file ends with a whole line");
    text.lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

/// Each of `scopes` has one start, one end and one scope-energy mark, and nothing
/// else carries those kinds for them.
fn assert_one_of_each(lines: &[Line], scopes: &HashSet<String>) {
    let mut counts: HashMap<&str, [u32; 3]> = HashMap::new();
    for line in lines {
        let slot = match (line.kind.as_str(), line.scope_category.as_deref()) {
            ("scope", Some("start")) => Some((line.uuid.as_str(), 0)),
            ("scope", Some("end")) => Some((line.uuid.as_str(), 1)),
            ("mark", _) if line.name == SCOPE_ENERGY => {
                line.parent_uuid.as_deref().map(|parent| (parent, 2))
            }
            _ => None,
        };
        if let Some((uuid, index)) = slot.filter(|(uuid, _)| scopes.contains(*uuid)) {
            counts.entry(uuid).or_default()[index] += 1;
        }
    }
    assert_eq!(counts.len(), scopes.len(), "every scope is in the file");
    let wrong: Vec<_> = counts
        .iter()
        .filter(|(_, counts)| **counts != [1, 1, 1])
        .take(5)
        .collect();
    assert!(wrong.is_empty(), "[starts, ends, energy marks]: {wrong:?}");
}

/// Walks the file in order, keeping the set of `scopes` live (started, not ended):
/// every poll's copies lie together, and under each poll every scope live then has
/// exactly one copy (a poll with none live has one mark, under the root). Returns
/// how many polls had all of `scopes` live.
fn assert_one_copy_per_live_scope(lines: &[Line], scopes: &HashSet<String>) -> usize {
    let mut live: BTreeSet<&str> = BTreeSet::new();
    // Per poll: the parents of its copies, and the scopes live at its first copy.
    let mut polls: BTreeMap<&str, (Vec<&str>, BTreeSet<&str>)> = BTreeMap::new();
    let mut current: Option<&str> = None;
    for line in lines {
        match (line.kind.as_str(), line.scope_category.as_deref()) {
            ("scope", Some("start")) if scopes.contains(&line.uuid) => {
                live.insert(&line.uuid);
            }
            ("scope", Some("end")) if scopes.contains(&line.uuid) => {
                live.remove(line.uuid.as_str());
            }
            ("mark", _) if line.name == RESOURCE_MARK_NAME => {
                let at = line.timestamp.as_str();
                if current != Some(at) {
                    assert!(!polls.contains_key(at), "the copies of poll {at} are apart");
                    polls.insert(at, (Vec::new(), live.clone()));
                    current = Some(at);
                }
                let parent = line.parent_uuid.as_deref().unwrap_or_default();
                polls.get_mut(at).unwrap().0.push(parent);
            }
            _ => {}
        }
    }
    let mut all_live = 0;
    for (at, (parents, live_then)) in &polls {
        let mut sorted = parents.clone();
        sorted.sort_unstable();
        if live_then.is_empty() {
            assert_eq!(parents.len(), 1, "poll {at} with no scope live: one mark");
            assert!(!scopes.contains(parents[0]), "poll {at}: under the root");
            continue;
        }
        let expected: Vec<&str> = live_then.iter().copied().collect();
        assert!(
            sorted == expected,
            "poll {at}: {} copies for {} live scopes",
            parents.len(),
            live_then.len()
        );
        all_live += usize::from(live_then.len() == scopes.len());
    }
    all_live
}

/// Opens `SCOPES` scopes at once; keeps them live until `full_polls` polls copied
/// their mark under every one; ends them at once; shuts down and checks the file.
/// Returns how many polls in the file had every scope live.
async fn burst(compression: AtofCompression, full_polls: usize) -> usize {
    let directory = tempfile::tempdir().unwrap();
    let polls = Arc::new(FullPolls::default());
    let pipeline = spawn(directory.path(), compression, Arc::clone(&polls)).await;
    let agents: Vec<_> = (0..SCOPES)
        .map(|index| {
            pipeline
                .agent_scope(&format!("agent-{}", index % 8))
                .unwrap()
        })
        .collect();
    let scopes: HashSet<String> = agents
        .iter()
        .map(|agent| agent.uuid().to_string())
        .collect();
    assert_eq!(scopes.len(), SCOPES);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while polls.0.load(Ordering::SeqCst) < full_polls {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the polls did not come"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for agent in agents {
        agent.end().unwrap();
    }
    pipeline.shutdown().await.unwrap();
    let lines = lines(directory.path(), compression);
    assert_one_of_each(&lines, &scopes);
    assert_one_copy_per_live_scope(&lines, &scopes)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_scopes_opened_and_ended_at_once_lose_nothing_plain() {
    burst(AtofCompression::None, 0).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_scopes_opened_and_ended_at_once_lose_nothing_zstd() {
    burst(AtofCompression::Zstd, 0).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_scopes_live_across_polls_get_one_copy_each_per_poll_plain() {
    let polls = burst(AtofCompression::None, 2).await;
    assert!(polls >= 2, "{polls} poll(s) with every scope live");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_scopes_live_across_polls_get_one_copy_each_per_poll_zstd() {
    let polls = burst(AtofCompression::Zstd, 2).await;
    assert!(polls >= 2, "{polls} poll(s) with every scope live");
}
