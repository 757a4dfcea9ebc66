//! Property tests of `plugins.toml` parsing, validation and layering: no text makes
//! them panic, every error names the file and the field path (or the TOML line), a
//! value swapped into any field is refused at that field's component, layers merge by
//! precedence, and a merged configuration written out reads back the same.
//!
//! `PROPTEST_CASES=200000 cargo test -p wattline-config --test fuzz_plugins_toml` for a
//! longer run.

#[path = "../../tests/fuzz_support/mod.rs"]
mod fuzz_support;

use proptest::prelude::*;
use proptest::sample::{Index, select};
use toml::{Table, Value};

use fuzz_support::{lossy, mutated, noise, runner_config, with_files};
use wattline_config::{ConfigError, EffectiveConfig, PluginsDocument, load_file, merge_tables};

/// Cases per test in CI.
const CI_CASES: u32 = 2000;
/// Cases for the tests that validate and merge whole documents (each costs more).
const CI_DOCUMENT_CASES: u32 = 1000;
/// Cases per test that writes a file.
const CI_FILE_CASES: u32 = 300;

const SOURCE: &str = "plugins.toml";

/// Valid documents that between them set every field the schema has.
const SAMPLES: &[&str] = &[
    r#"version = 1

[[components]]
kind = "resource_metrics"
[components.config]
measurement_scope = "process_tree"
polling = { enabled = true, interval_millis = 1000 }
cpu = { enabled = true }
memory = { enabled = true, private_max_cpu_share = 0.5 }
process = { enabled = false }
disk = { enabled = true, process_io = true, filesystem_paths = ["/", "/var"] }
gpu = { enabled = true, device_metrics = true, process_metrics = false, devices = ["0", "GPU-8932f937"] }
network = { enabled = true, interfaces = ["eth0", "lo"] }
[components.config.units.cpu]
user_time = "seconds"
consumption_rate = "millicores"
[components.config.units.memory]
resident = "mebibytes"
some_pressure_stall_time = "microseconds"
[components.config.units.disk]
read_throughput = "megabits_per_second"
[components.config.units.gpu]
device_compute_utilization = "fraction"
[components.config.units.network.interface]
received_data = "kilobytes"
"#,
    r#"version = 1

[[components]]
kind = "energy"
[components.config]
cost_per_kwh = 0.31
currency = "EUR"
carbon_intensity = 380.5
carbon_region = "DE"
co2_tracking = true
interval_millis = 2000
pue = 1.4
power_sample_millis = 50

[[components]]
kind = "diagnostics"
enabled = true
[components.config]
history_capacity = 64

[[components]]
kind = "atof"
[components.config]
output_directory = "/tmp/wattline"
filename = "run-%Y-%m-%d.jsonl"
mode = "overwrite"
"#,
    r#"version = 1

[[components]]
kind = "opentelemetry"
[components.config]
export_interval_millis = 10000
temporality = "delta"
max_instruments = 512
cardinality_limit = 4000
metric_names = "both"

[[components.config.endpoints]]
endpoint = "http://127.0.0.1:4317"
header_env = { authorization = "COLLECTOR_TOKEN" }
timeout_millis = 1500
service_name = "agent"
service_namespace = "lab"
service_version = "1.2.3"

[[components.config.endpoints]]
endpoint = "http://127.0.0.1:4318"
transport = "http_binary"
headers = { x-team = "energy" }
resource_attributes = { "deployment.environment" = "lab" }

[[components]]
kind = "worker"
[components.config]
plugin_id = "acme.lookup"
command = ["python3", "lookup.py"]
env = { LOOKUP_MODE = "fast" }
[components.config.config]
backend = "primary"
retries = 2

[[components]]
kind = "worker"
enabled = false
[components.config]
plugin_id = "acme.audit"
command = ["./audit"]
"#,
    "version = 1\n",
];

/// One step into a TOML document.
#[derive(Debug, Clone, PartialEq)]
enum Step {
    Key(String),
    Index(usize),
}

/// `components[0].config.polling`, as error paths write it.
fn path_text(path: &[Step]) -> String {
    let mut text = String::new();
    for step in path {
        match step {
            Step::Key(key) if text.is_empty() => text.push_str(key),
            Step::Key(key) => {
                text.push('.');
                text.push_str(key);
            }
            Step::Index(index) => text.push_str(&format!("[{index}]")),
        }
    }
    text
}

/// Every value's path in `table`, tables and arrays included, parents first.
fn value_paths(table: &Table) -> Vec<Vec<Step>> {
    fn walk(value: &Value, path: &mut Vec<Step>, out: &mut Vec<Vec<Step>>) {
        out.push(path.clone());
        match value {
            Value::Table(table) => {
                for (key, child) in table {
                    path.push(Step::Key(key.clone()));
                    walk(child, path, out);
                    path.pop();
                }
            }
            Value::Array(items) => {
                for (index, child) in items.iter().enumerate() {
                    path.push(Step::Index(index));
                    walk(child, path, out);
                    path.pop();
                }
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    for (key, value) in table {
        walk(value, &mut vec![Step::Key(key.clone())], &mut out);
    }
    out
}

/// The value at `path`, mutably.
fn value_at<'a>(table: &'a mut Table, path: &[Step]) -> Option<&'a mut Value> {
    let (Step::Key(first), rest) = path.split_first()? else {
        return None;
    };
    let mut value = table.get_mut(first)?;
    for step in rest {
        value = match (value, step) {
            (Value::Table(table), Step::Key(key)) => table.get_mut(key)?,
            (Value::Array(items), Step::Index(index)) => items.get_mut(*index)?,
            _ => return None,
        };
    }
    Some(value)
}

/// A value some field somewhere will not take: past a range, of another type, blank,
/// relative, or a table where a scalar goes.
fn hostile_value() -> impl Strategy<Value = Value> {
    let datetime = "1979-05-27T07:32:00Z".parse::<toml::value::Datetime>().ok();
    let mut unknown_field = Table::new();
    unknown_field.insert("no_such_field".into(), Value::Integer(1));
    prop_oneof![
        select(
            &[
                i64::MIN,
                -1,
                0,
                1,
                9,
                10,
                60_001,
                65_537,
                1_000_001,
                i64::MAX
            ][..]
        )
        .prop_map(Value::Integer),
        any::<i64>().prop_map(Value::Integer),
        select(
            &[
                f64::NAN,
                f64::INFINITY,
                f64::NEG_INFINITY,
                -0.0,
                0.5,
                -1.0,
                1e308
            ][..]
        )
        .prop_map(Value::Float),
        select(
            &[
                "",
                " ",
                "relative/dir",
                "a/b",
                "%Y/%m",
                "http://",
                "https://x:1",
                "ftp://x",
                "max",
                "all",
                "none",
                "GPU-",
                "kibibytes",
                "µs",
                "\u{0}",
                "\u{202e}",
                "x\ny",
                "ZZ",
                "bad header"
            ][..]
        )
        .prop_map(|text| Value::String(text.to_owned())),
        any::<bool>().prop_map(Value::Boolean),
        Just(Value::Array(Vec::new())),
        Just(Value::Array(vec![
            Value::Integer(1),
            Value::String(String::new())
        ])),
        Just(Value::Table(Table::new())),
        Just(Value::Table(unknown_field)),
        Just(datetime.map_or(Value::Boolean(false), Value::Datetime)),
    ]
}

/// A sample with the value at one of its paths replaced.
fn swapped_field() -> impl Strategy<Value = (Table, Vec<Step>)> {
    (select(SAMPLES), any::<Index>(), hostile_value()).prop_filter_map(
        "samples without fields",
        |(sample, which, value)| {
            let mut table: Table = sample.parse().ok()?;
            let paths = value_paths(&table);
            let path = paths.get(which.index(paths.len().max(1)))?.clone();
            *value_at(&mut table, &path)? = value;
            Some((table, path))
        },
    )
}

/// The error names the source and either a field path it shows or the TOML position.
fn check_error(error: &ConfigError, source: &str) {
    let shown = error.to_string();
    assert!(shown.starts_with(&format!("{source}: ")), "{shown}");
    if error.field_path.is_empty() {
        assert!(
            error.rule.starts_with("not valid TOML")
                || error.rule.starts_with("not valid UTF-8")
                || error.rule.starts_with("cannot be read"),
            "{shown}"
        );
        if error.rule.starts_with("not valid TOML") {
            assert!(error.rule.contains("line "), "{shown}");
        }
    } else {
        assert!(
            shown.contains(&format!(": {}: ", error.field_path)),
            "{shown}"
        );
    }
}

/// Merges `layers`, checks any error, and (once merged) that the configuration written
/// out reads back the same.
fn merge_and_round_trip(layers: &[PluginsDocument]) -> Result<(), TestCaseError> {
    let merged = match EffectiveConfig::merge(layers) {
        Ok(merged) => merged,
        Err(error) => {
            check_error(&error, "merged configuration");
            prop_assert!(
                error.field_path.starts_with("components[kind = "),
                "{error}"
            );
            return Ok(());
        }
    };
    prop_assert_eq!(merged.validate(), Ok(()));
    let written = merged
        .to_toml()
        .map_err(|e| TestCaseError::fail(e.to_string()))?;
    let document = PluginsDocument::parse("written", &written)
        .map_err(|e| TestCaseError::fail(format!("{e}\n{written}")))?;
    let again = EffectiveConfig::merge(&[document])
        .map_err(|e| TestCaseError::fail(format!("{e}\n{written}")))?;
    // Written out again, it is the same text (a fixed point)...
    prop_assert_eq!(again.to_toml(), Ok(written.clone()));
    // ...and the same values; a worker's own `config` may hold NaN, which is never
    // equal to itself, so workers are compared by the text above.
    prop_assert_eq!(
        &again.resource_metrics,
        &merged.resource_metrics,
        "{}",
        written
    );
    prop_assert_eq!(&again.diagnostics, &merged.diagnostics, "{}", written);
    prop_assert_eq!(
        again.energy.map(|e| e.config),
        merged.energy.map(|e| e.config),
        "{}",
        written
    );
    prop_assert_eq!(&again.atof, &merged.atof, "{}", written);
    prop_assert_eq!(&again.opentelemetry, &merged.opentelemetry, "{}", written);
    Ok(())
}

/// A TOML table of a few levels, for the merge rule.
fn toml_table() -> impl Strategy<Value = Table> {
    let leaf = prop_oneof![
        any::<i64>().prop_map(Value::Integer),
        any::<bool>().prop_map(Value::Boolean),
        "[a-z]{0,3}".prop_map(Value::String),
        proptest::collection::vec(any::<i64>().prop_map(Value::Integer), 0..3)
            .prop_map(Value::Array),
    ];
    let value = leaf.prop_recursive(3, 24, 4, |inner| {
        proptest::collection::btree_map("[a-d]", inner, 0..4)
            .prop_map(|map| Value::Table(map.into_iter().collect()))
    });
    proptest::collection::btree_map("[a-d]", value, 0..4).prop_map(|map| map.into_iter().collect())
}

/// Every non-table value of `table` with its path.
fn leaves(table: &Table) -> Vec<(Vec<String>, Value)> {
    let mut out = Vec::new();
    for (key, value) in table {
        match value {
            Value::Table(inner) => {
                for (mut path, leaf) in leaves(inner) {
                    path.insert(0, key.clone());
                    out.push((path, leaf));
                }
            }
            other => out.push((vec![key.clone()], other.clone())),
        }
    }
    out
}

fn lookup<'a>(table: &'a Table, path: &[String]) -> Option<&'a Value> {
    let (last, parents) = path.split_last()?;
    let mut table = table;
    for key in parents {
        table = table.get(key)?.as_table()?;
    }
    table.get(last)
}

fn resource_layer(
    source: &str,
    enabled: bool,
    interval: Option<u64>,
) -> Result<PluginsDocument, TestCaseError> {
    let polling = interval.map_or(String::new(), |millis| {
        format!("polling = {{ interval_millis = {millis} }}\n")
    });
    let text = format!(
        "version = 1\n[[components]]\nkind = \"resource_metrics\"\nenabled = {enabled}\n[components.config]\n{polling}"
    );
    PluginsDocument::parse(source, &text).map_err(|e| TestCaseError::fail(e.to_string()))
}

#[test]
fn every_sample_is_valid_and_merges() {
    for sample in SAMPLES {
        let document = PluginsDocument::parse(SOURCE, sample).unwrap_or_else(|e| panic!("{e}"));
        EffectiveConfig::merge(&[document]).unwrap_or_else(|e| panic!("{e}"));
    }
}

proptest! {
    #![proptest_config(runner_config(CI_CASES))]

    #[test]
    fn any_text_is_a_document_or_an_error_naming_the_place(bytes in noise()) {
        if let Err(error) = PluginsDocument::parse(SOURCE, &lossy(&bytes)) {
            check_error(&error, SOURCE);
        }
    }

    #[test]
    fn mutated_samples_are_documents_or_errors_naming_the_place(bytes in mutated(SAMPLES)) {
        match PluginsDocument::parse(SOURCE, &lossy(&bytes)) {
            Ok(document) => merge_and_round_trip(&[document])?,
            Err(error) => check_error(&error, SOURCE),
        }
    }

    #[test]
    fn merging_keeps_every_value_of_the_later_table_and_the_rest_of_the_earlier(base in toml_table(), overlay in toml_table()) {
        let mut merged = base.clone();
        merge_tables(&mut merged, &overlay);
        for (path, value) in leaves(&overlay) {
            prop_assert_eq!(lookup(&merged, &path), Some(&value), "{:?}", path);
        }
        for (path, value) in leaves(&base) {
            // Kept unless the overlay put something else at it or above it.
            let shadowed = (1..=path.len()).any(|n| lookup(&overlay, &path[..n]).is_some_and(|v| !v.is_table() || n == path.len()));
            if !shadowed {
                prop_assert_eq!(lookup(&merged, &path), Some(&value), "{:?}", path);
            }
        }
    }

    #[test]
    fn the_last_enabled_layer_that_sets_a_field_wins(
        layers in proptest::collection::vec((any::<bool>(), proptest::option::of(1..=i64::MAX as u64)), 1..5),
    ) {
        let documents = layers
            .iter()
            .enumerate()
            .map(|(index, (enabled, interval))| resource_layer(&format!("layer{index}.toml"), *enabled, *interval))
            .collect::<Result<Vec<_>, _>>()?;
        let merged = EffectiveConfig::merge(&documents).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let any_enabled = layers.iter().any(|(enabled, _)| *enabled);
        prop_assert_eq!(merged.resource_metrics.is_some(), any_enabled);
        let expected = layers.iter().rev().filter(|(enabled, _)| *enabled).find_map(|(_, interval)| *interval).unwrap_or(5000);
        if let Some(resource) = merged.resource_metrics {
            prop_assert_eq!(resource.polling.interval_millis, expected);
        }
    }
}

proptest! {
    #![proptest_config(runner_config(CI_DOCUMENT_CASES))]

    #[test]
    fn a_swapped_value_is_refused_at_its_component_or_merges_and_reads_back((table, path) in swapped_field(), as_text in any::<bool>()) {
        let parsed = if as_text {
            // Written and parsed again: the path from text to document.
            match toml::to_string(&table) {
                Ok(text) => PluginsDocument::parse(SOURCE, &text),
                // A NaN key or the like that TOML cannot write: validate the table.
                Err(_) => PluginsDocument::from_table(SOURCE, &table),
            }
        } else {
            PluginsDocument::from_table(SOURCE, &table)
        };
        let document = match parsed {
            Ok(document) => document,
            Err(error) => {
                check_error(&error, SOURCE);
                // The component the swap was in (or a top-level key) is named.
                let swapped = path_text(&path[..path.len().min(2)]);
                let named = error.field_path.starts_with(&swapped)
                    || swapped.starts_with(&error.field_path)
                    || error.rule.contains(&swapped);
                prop_assert!(named, "swapped {} but the error is {error}", path_text(&path));
                return Ok(());
            }
        };
        merge_and_round_trip(&[document])?;
    }

    #[test]
    fn layers_of_swapped_samples_merge_or_name_the_merged_field(
        layers in proptest::collection::vec(swapped_field(), 1..4),
    ) {
        let documents: Vec<PluginsDocument> = layers
            .iter()
            .enumerate()
            .filter_map(|(index, (table, _))| PluginsDocument::from_table(&format!("layer{index}.toml"), table).ok())
            .collect();
        merge_and_round_trip(&documents)?;
    }
}

proptest! {
    #![proptest_config(runner_config(CI_FILE_CASES))]

    #[test]
    fn a_file_of_any_bytes_is_a_document_or_an_error_naming_the_file(bytes in prop_oneof![noise(), mutated(SAMPLES)]) {
        let file = [("plugins.toml".to_owned(), Some(bytes.as_slice()))];
        let (path, loaded) = with_files(file, |root| {
            let path = root.join("plugins.toml");
            let loaded = load_file(&path, true);
            (path, loaded)
        })?;
        let source = path.display().to_string();
        match (loaded, std::str::from_utf8(&bytes)) {
            (Ok(document), _) => prop_assert!(document.is_some()),
            (Err(error), Err(utf8)) => {
                check_error(&error, &source);
                prop_assert_eq!(error.rule, format!("not valid UTF-8 (at byte {})", utf8.valid_up_to()));
            }
            (Err(error), Ok(_)) => check_error(&error, &source),
        }
    }
}
