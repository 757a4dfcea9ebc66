//! The snapshot's records in the three languages: every record of the model
//! (`model/src/snapshot/`, `model/src/measurement.rs`) has a Python dataclass
//! (`python/wattline/_model.py`) and a TypeScript interface (`node/index.d.ts`) of the
//! same name with the same fields (camelCase in TypeScript), so a field cannot be
//! added to one language and forgotten in another.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

type Records = BTreeMap<String, BTreeSet<String>>;

fn read(relative: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(relative);
    std::fs::read_to_string(&path).unwrap_or_else(|error| panic!("{}: {error}", path.display()))
}

/// The name after `keyword` on a line that starts with it, up to `<`, ` ` or `{`.
fn declared(line: &str, keyword: &str) -> Option<String> {
    let rest = line.strip_prefix(keyword)?;
    let name: String = rest
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect();
    (!name.is_empty()).then_some(name)
}

/// `pub struct Name { pub field: … }` records of a Rust file.
fn rust_records(text: &str, into: &mut Records) {
    let mut current: Option<String> = None;
    for line in text.lines() {
        if let Some(name) = declared(line, "pub struct ").filter(|_| line.ends_with('{')) {
            into.insert(name.clone(), BTreeSet::new());
            current = Some(name);
        } else if line.starts_with('}') {
            current = None;
        } else if let (Some(name), Some(field)) = (&current, line.trim().strip_prefix("pub "))
            && let Some((field, _)) = field.split_once(':')
        {
            into.entry(name.clone())
                .or_default()
                .insert(field.to_owned());
        }
    }
}

/// The dataclasses of a Python file: `class Name…:` then `    field: Type` lines
/// (an enum's members are `NAME = …` and give no field; a `_private` field is the
/// class's own, not the record's).
fn python_classes(text: &str) -> Records {
    let mut classes = Records::new();
    let mut current: Option<String> = None;
    for line in text.lines() {
        if let Some(name) = declared(line, "class ") {
            classes.insert(name.clone(), BTreeSet::new());
            current = Some(name);
        } else if !line.starts_with(' ') && !line.trim().is_empty() {
            current = None;
        } else if let (Some(name), Some(field)) = (&current, line.strip_prefix("    ")) {
            let field_name: String = field
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if !field_name.is_empty()
                && !field_name.starts_with('_')
                && field[field_name.len()..].starts_with(": ")
            {
                classes.entry(name.clone()).or_default().insert(field_name);
            }
        }
    }
    classes
}

/// The interfaces of a TypeScript declaration file, each with the fields of the one it
/// extends.
fn typescript_interfaces(text: &str) -> Records {
    let mut interfaces = Records::new();
    let mut parents: BTreeMap<String, String> = BTreeMap::new();
    let mut current: Option<String> = None;
    for line in text.lines() {
        if let Some(name) = declared(line, "export interface ") {
            if let Some((_, parent)) = line.split_once(" extends ") {
                let parent: String = parent
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                parents.insert(name.clone(), parent);
            }
            interfaces.insert(name.clone(), BTreeSet::new());
            current = Some(name);
        } else if line.starts_with('}') {
            current = None;
        } else if let Some(name) = &current {
            let code = line.trim();
            if code.starts_with("/*") || code.starts_with('*') || code.starts_with("//") {
                continue;
            }
            for member in code.split(';') {
                let member = member.trim();
                let field: String = member
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                let after = &member[field.len()..];
                if !field.is_empty() && (after.starts_with(':') || after.starts_with("?:")) {
                    interfaces.entry(name.clone()).or_default().insert(field);
                }
            }
        }
    }
    for (child, parent) in parents {
        let inherited = interfaces.get(&parent).cloned().unwrap_or_default();
        interfaces.entry(child).or_default().extend(inherited);
    }
    interfaces
}

fn camel_case(snake: &str) -> String {
    let mut out = String::new();
    let mut upper = false;
    for c in snake.chars() {
        if c == '_' {
            upper = true;
        } else if upper {
            out.extend(c.to_uppercase());
            upper = false;
        } else {
            out.push(c);
        }
    }
    out
}

fn model_records() -> Records {
    let mut records = Records::new();
    for file in [
        "model/src/measurement.rs",
        "model/src/snapshot/mod.rs",
        "model/src/snapshot/cpu.rs",
        "model/src/snapshot/memory.rs",
        "model/src/snapshot/process.rs",
        "model/src/snapshot/disk.rs",
        "model/src/snapshot/gpu.rs",
        "model/src/snapshot/network.rs",
    ] {
        rust_records(&read(file), &mut records);
    }
    // The base-unit readings beside the records are the samplers' data, not the snapshot's.
    records.retain(|name, _| !name.ends_with("Reading") && name != "GpuSample");
    records
}

#[test]
fn the_parsers_read_the_shapes_they_are_given() {
    let mut rust = Records::new();
    rust_records(
        "pub struct A {\n    /// Doc: not a field.\n    pub one_two: u8,\n    pub three: Option<u8>,\n}\n",
        &mut rust,
    );
    assert_eq!(
        rust["A"],
        BTreeSet::from(["one_two".into(), "three".into()])
    );
    let python = python_classes(
        "class U(_StrEnum):\n    SECONDS = \"seconds\"\n\n@dataclasses.dataclass(frozen=True)\nclass A:\n    one_two: int\n    three: Optional[int]\n",
    );
    assert!(python["U"].is_empty());
    assert_eq!(python["A"], rust["A"]);
    let typescript = typescript_interfaces(
        "export interface A {\n  /** three: a comment */\n  oneTwo: number; three?: number;\n}\nexport interface B extends A {\n  four: string;\n}\n",
    );
    assert_eq!(
        typescript["A"],
        BTreeSet::from(["oneTwo".into(), "three".into()])
    );
    assert_eq!(typescript["B"].len(), 3);
    assert_eq!(camel_case("device_index"), "deviceIndex");
}

#[test]
fn every_snapshot_record_has_the_same_fields_in_python_and_typescript() {
    let model = model_records();
    assert!(
        model.contains_key("Snapshot") && model.contains_key("CpuMetrics"),
        "the model's records were not found: {model:?}"
    );
    let python = python_classes(&read("python/wattline/_model.py"));
    let typescript = typescript_interfaces(&read("node/index.d.ts"));
    let mut problems = Vec::new();
    for (record, fields) in &model {
        match python.get(record) {
            Some(found) if found == fields => {}
            Some(found) => problems.push(format!(
                "python/wattline/_model.py {record}: missing {:?}, extra {:?}",
                fields.difference(found).collect::<Vec<_>>(),
                found.difference(fields).collect::<Vec<_>>()
            )),
            None => problems.push(format!("python/wattline/_model.py has no class {record}")),
        }
        let camel: BTreeSet<String> = fields.iter().map(|field| camel_case(field)).collect();
        match typescript.get(record) {
            Some(found) if *found == camel => {}
            Some(found) => problems.push(format!(
                "node/index.d.ts {record}: missing {:?}, extra {:?}",
                camel.difference(found).collect::<Vec<_>>(),
                found.difference(&camel).collect::<Vec<_>>()
            )),
            None => problems.push(format!("node/index.d.ts has no interface {record}")),
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
