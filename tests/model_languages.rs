//! The snapshot's records in the three languages: every record of the model
//! (`model/src/snapshot/`, `model/src/measurement.rs`) has a Python dataclass
//! (`python/wattline/_model.py`) and a TypeScript interface (`node/index.d.ts`) of the
//! same name with the same fields (camelCase in TypeScript), so a field cannot be
//! added to one language and forgotten in another.
//!
//! The records are generated from the model's Rust source between the `begin
//! generated` / `end generated` lines of both files (all but [`HAND_WRITTEN`]):
//! `WATTLINE_UPDATE_BINDINGS=1 cargo test --test model_languages` rewrites them, and
//! without it the test fails naming the stale file and that command.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

type Records = BTreeMap<String, BTreeSet<String>>;

/// The command that rewrites the generated regions of the two language files.
const UPDATE_COMMAND: &str = "WATTLINE_UPDATE_BINDINGS=1 cargo test --test model_languages";

/// One field of a Rust record: its name, its type as written, its rustdoc.
#[derive(Debug, Clone, PartialEq)]
struct Field {
    name: String,
    rust_type: String,
    doc: String,
}

/// One `pub struct` of the model with named fields, in file order.
#[derive(Debug, Clone, PartialEq)]
struct Record {
    name: String,
    doc: String,
    fields: Vec<Field>,
}

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

/// `pub struct Name { pub field: Type, … }` records of a Rust file, each with its
/// rustdoc and its fields' (a `///` run, attributes between it and the item allowed).
fn rust_records(text: &str) -> Vec<Record> {
    let mut records: Vec<Record> = Vec::new();
    let mut inside = false;
    let mut doc: Vec<&str> = Vec::new();
    for line in text.lines() {
        let code = line.trim();
        if let Some(text) = code.strip_prefix("///") {
            doc.push(text.trim());
            continue;
        }
        if code.starts_with("#[") {
            continue;
        }
        let this_doc = doc.join(" ");
        doc.clear();
        if let Some(name) = declared(line, "pub struct ").filter(|_| line.ends_with('{')) {
            records.push(Record {
                name,
                doc: this_doc,
                fields: Vec::new(),
            });
            inside = true;
        } else if line.starts_with('}') {
            inside = false;
        } else if let (true, Some(record), Some(field)) =
            (inside, records.last_mut(), code.strip_prefix("pub "))
            && let Some((name, rust_type)) = field.split_once(':')
        {
            record.fields.push(Field {
                name: name.to_owned(),
                rust_type: rust_type.trim().trim_end_matches(',').to_owned(),
                doc: this_doc,
            });
        }
    }
    records
}

/// The field names of each record.
fn field_sets(records: &[Record]) -> Records {
    records
        .iter()
        .map(|record| {
            let fields = record.fields.iter().map(|field| field.name.clone());
            (record.name.clone(), fields.collect())
        })
        .collect()
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

/// The snapshot's records: every record of the model files that the `Snapshot` reaches
/// through its fields' types (the base-unit readings beside them are not in it).
fn model_records() -> Vec<Record> {
    let mut all = Vec::new();
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
        all.extend(rust_records(&read(file)));
    }
    let mut reached = BTreeSet::from(["Snapshot".to_owned()]);
    let mut to_visit = vec!["Snapshot".to_owned()];
    while let Some(name) = to_visit.pop() {
        let Some(record) = all.iter().find(|record| record.name == name) else {
            continue;
        };
        for field in &record.fields {
            for used in field.rust_type.split(|c: char| !c.is_alphanumeric()) {
                if reached.insert(used.to_owned()) {
                    to_visit.push(used.to_owned());
                }
            }
        }
    }
    all.retain(|record| reached.contains(&record.name));
    all
}

/// Records written by hand in both languages (a generic one; the snapshot with its
/// methods); the test still checks their fields.
const HAND_WRITTEN: [&str; 2] = ["Measurement", "Snapshot"];

/// A Rust type as written (`Option<Vec<A>>`): its name and its type arguments.
fn split_type(rust_type: &str) -> (&str, Vec<&str>) {
    let Some((name, rest)) = rust_type.split_once('<') else {
        return (rust_type.trim(), Vec::new());
    };
    let inner = rest.strip_suffix('>').unwrap_or(rest);
    let mut arguments = Vec::new();
    let (mut depth, mut from) = (0, 0);
    for (at, c) in inner.char_indices() {
        match c {
            '<' => depth += 1,
            '>' => depth -= 1,
            ',' if depth == 0 => {
                arguments.push(inner[from..at].trim());
                from = at + 1;
            }
            _ => {}
        }
    }
    arguments.push(inner[from..].trim());
    (name.trim(), arguments)
}

/// The Python annotation of a Rust field type.
fn python_type(rust_type: &str) -> String {
    match split_type(rust_type) {
        ("Option", arguments) => format!("Optional[{}]", python_type(arguments[0])),
        ("Vec", arguments) => format!("List[{}]", python_type(arguments[0])),
        ("BTreeMap" | "HashMap", arguments) => format!(
            "Dict[{}, {}]",
            python_type(arguments[0]),
            python_type(arguments[1])
        ),
        ("Measurement", arguments) => format!("Measurement[{}]", arguments[0]),
        ("DateTime", _) => "_datetime.datetime".into(),
        ("String", _) => "str".into(),
        ("bool", _) => "bool".into(),
        ("f32" | "f64", _) => "float".into(),
        ("u8" | "u16" | "u32" | "u64" | "usize" | "i32" | "i64", _) => "int".into(),
        (name, _) => name.into(),
    }
}

/// The TypeScript type of a Rust field type (`Integer` where a value can pass 2^53).
fn typescript_type(rust_type: &str) -> String {
    match split_type(rust_type) {
        ("Option", arguments) => match split_type(arguments[0]) {
            ("Measurement", unit) => format!("M<{}>", unit[0]),
            _ => format!("{} | null", typescript_type(arguments[0])),
        },
        ("Vec", arguments) => match typescript_type(arguments[0]) {
            item if item.contains(' ') => format!("({item})[]"),
            item => format!("{item}[]"),
        },
        ("BTreeMap" | "HashMap", arguments) => format!(
            "Record<{}, {}>",
            typescript_type(arguments[0]),
            typescript_type(arguments[1])
        ),
        ("Measurement", arguments) => format!("Measurement<{}>", arguments[0]),
        ("DateTime", _) => "Date".into(),
        ("String", _) => "string".into(),
        ("bool", _) => "boolean".into(),
        ("u64" | "usize" | "i64", _) => "Integer".into(),
        ("f32" | "f64" | "u8" | "u16" | "u32" | "i32", _) => "number".into(),
        (name, _) => name.into(),
    }
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

/// `text` in lines of at most `width` characters (a longer word on its own line).
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    for word in text.split_whitespace() {
        match lines.last_mut() {
            Some(line) if line.len() + 1 + word.len() <= width => {
                line.push(' ');
                line.push_str(word);
            }
            _ => lines.push(word.to_owned()),
        }
    }
    lines
}

/// Lines of generated code are kept within this many characters.
const WIDTH: usize = 88;

/// The generated records of `_model.py`: one frozen dataclass per record, its rustdoc
/// as the docstring and as `#:` comments on the fields.
fn python_region(records: &[&Record]) -> String {
    let mut out = String::new();
    for record in records {
        out.push_str("\n\n@dataclasses.dataclass(frozen=True)\n");
        out.push_str(&format!("class {}:\n", record.name));
        let doc = wrap(&record.doc, WIDTH - 10);
        out.push_str(&format!("    \"\"\"{}", doc.join("\n    ")));
        out.push_str(if doc.len() > 1 {
            "\n    \"\"\"\n\n"
        } else {
            "\"\"\"\n\n"
        });
        for field in &record.fields {
            for line in wrap(&field.doc, WIDTH - 7) {
                out.push_str(&format!("    #: {line}\n"));
            }
            let annotation = python_type(&field.rust_type);
            out.push_str(&format!("    {}: {annotation}\n", field.name));
        }
    }
    out.push_str("\n\n");
    out
}

/// A JSDoc comment of `doc` at `indent`.
fn jsdoc(doc: &str, indent: &str) -> String {
    let lines = wrap(doc, WIDTH - indent.len() - 7);
    match lines.as_slice() {
        [line] => format!("{indent}/** {line} */\n"),
        lines => {
            let body: String = lines
                .iter()
                .map(|line| format!("{indent} * {line}\n"))
                .collect();
            format!("{indent}/**\n{body}{indent} */\n")
        }
    }
}

/// The generated records of `index.d.ts`: one interface per record, camelCase, its
/// rustdoc as JSDoc.
fn typescript_region(records: &[&Record]) -> String {
    let mut out = String::new();
    for record in records {
        out.push('\n');
        out.push_str(&jsdoc(&record.doc, ""));
        out.push_str(&format!("export interface {} {{\n", record.name));
        for field in &record.fields {
            out.push_str(&jsdoc(&field.doc, "  "));
            let declared = typescript_type(&field.rust_type);
            out.push_str(&format!("  {}: {declared};\n", camel_case(&field.name)));
        }
        out.push_str("}\n");
    }
    out.push('\n');
    out
}

/// `text` with what lies between the lines `begin` and `end` replaced by `body`.
fn with_region(text: &str, begin: &str, end: &str, body: &str) -> Result<String, String> {
    let start = text
        .find(begin)
        .ok_or_else(|| format!("no line `{begin}`"))?
        + begin.len();
    let stop = text[start..]
        .find(end)
        .ok_or_else(|| format!("no line `{end}` after `{begin}`"))?
        + start;
    Ok(format!("{}\n{body}{}", &text[..start], &text[stop..]))
}

/// The language file `relative` with its generated region current: written when
/// `WATTLINE_UPDATE_BINDINGS=1`, else a message naming the stale file and the command.
fn check_generated(relative: &str, begin: &str, end: &str, body: &str) -> Option<String> {
    let text = read(relative);
    let current = match with_region(&text, begin, end, body) {
        Ok(current) => current,
        Err(problem) => return Some(format!("{relative}: {problem}")),
    };
    if current == text {
        return None;
    }
    if std::env::var("WATTLINE_UPDATE_BINDINGS").is_ok_and(|value| value == "1") {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(relative);
        std::fs::write(&path, current).unwrap_or_else(|error| panic!("{relative}: {error}"));
        return None;
    }
    Some(format!(
        "{relative} is stale against the model's records; run `{UPDATE_COMMAND}`"
    ))
}

#[test]
fn the_parsers_read_the_shapes_they_are_given() {
    let rust = rust_records(
        "/// A record.\n#[derive(Debug)]\npub struct A {\n    /// Doc: not a field.\n    pub one_two: u8,\n    pub three: Option<Measurement<CountUnit>>,\n}\n",
    );
    assert_eq!(rust[0].doc, "A record.");
    assert_eq!(rust[0].fields[0].doc, "Doc: not a field.");
    assert_eq!(
        rust[0].fields[1].rust_type,
        "Option<Measurement<CountUnit>>"
    );
    let rust = field_sets(&rust);
    assert_eq!(
        rust["A"],
        BTreeSet::from(["one_two".into(), "three".into()])
    );
    let python = python_classes(
        "class U(_StrEnum):\n    SECONDS = \"seconds\"\n\n@dataclasses.dataclass(frozen=True)\nclass A:\n    \"\"\"Doc.\"\"\"\n\n    #: one\n    one_two: int\n    three: Optional[int]\n",
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
fn rust_types_map_to_python_and_typescript() {
    let cases = [
        (
            "Option<Measurement<CapacityUnit>>",
            "Optional[Measurement[CapacityUnit]]",
            "M<CapacityUnit>",
        ),
        (
            "Option<Vec<AcceleratorDeviceMetrics>>",
            "Optional[List[AcceleratorDeviceMetrics]]",
            "AcceleratorDeviceMetrics[] | null",
        ),
        ("Vec<LimitEvent>", "List[LimitEvent]", "LimitEvent[]"),
        (
            "BTreeMap<String, u64>",
            "Dict[str, int]",
            "Record<string, Integer>",
        ),
        ("Option<u32>", "Optional[int]", "number | null"),
        ("DateTime<Utc>", "_datetime.datetime", "Date"),
        (
            "Vec<Option<String>>",
            "List[Optional[str]]",
            "(string | null)[]",
        ),
    ];
    for (rust, python, typescript) in cases {
        assert_eq!(python_type(rust), python, "{rust}");
        assert_eq!(typescript_type(rust), typescript, "{rust}");
    }
    assert_eq!(
        with_region("a\n<<\nold\n>>\nz", "<<", ">>", "new\n").as_deref(),
        Ok("a\n<<\nnew\n>>\nz")
    );
    assert!(with_region("a\n", "<<", ">>", "").is_err());
    assert_eq!(wrap("one two three", 7), ["one two", "three"]);
    assert_eq!(jsdoc("a b", "  "), "  /** a b */\n");
}

/// Where each record's fields differ from the model's in the two language files.
fn field_problems(model: &Records) -> Vec<String> {
    let python = python_classes(&read("python/wattline/_model.py"));
    let typescript = typescript_interfaces(&read("node/index.d.ts"));
    let mut problems = Vec::new();
    for (record, fields) in model {
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
    problems
}

/// One test, so that the update run writes the files before their fields are read.
#[test]
fn every_snapshot_record_is_generated_into_python_and_typescript_with_the_same_fields() {
    let records = model_records();
    let model = field_sets(&records);
    assert!(
        model.contains_key("Snapshot") && model.contains_key("CpuMetrics"),
        "the model's records were not found: {model:?}"
    );
    assert!(
        !model.contains_key("CpuReading"),
        "a base-unit reading is not a snapshot record"
    );
    let generated: Vec<&Record> = records
        .iter()
        .filter(|record| !HAND_WRITTEN.contains(&record.name.as_str()))
        .collect();
    let stale: Vec<String> = [
        check_generated(
            "python/wattline/_model.py",
            "# --- begin generated from model/src (snapshot records): do not edit ---",
            "# --- end generated ---",
            &python_region(&generated),
        ),
        check_generated(
            "node/index.d.ts",
            "// --- begin generated from model/src (snapshot records): do not edit ---",
            "// --- end generated ---",
            &typescript_region(&generated),
        ),
    ]
    .into_iter()
    .flatten()
    .collect();
    assert!(stale.is_empty(), "{}", stale.join("\n"));
    let problems = field_problems(&model);
    assert!(
        problems.is_empty(),
        "{}\n(the generated records are rewritten by `{UPDATE_COMMAND}`)",
        problems.join("\n")
    );
}
