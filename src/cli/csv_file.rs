//! Appending a report row to a CSV file: the header is written when the file is new or
//! empty; an existing file must carry exactly wattline's header, or nothing is written
//! (rows of another layout would silently shift columns in a spreadsheet).

use std::io::{BufRead, Write};
use std::path::Path;

/// Appends `row` under `header` to the file at `path`.
pub fn append_row(path: &Path, header: &str, row: &str) -> Result<(), String> {
    let shown = path.display();
    let existing = match std::fs::File::open(path) {
        Ok(file) => {
            let mut first = String::new();
            std::io::BufReader::new(file)
                .read_line(&mut first)
                .map_err(|error| format!("{shown}: cannot be read: {error}"))?;
            Some(first.trim_end_matches(['\n', '\r']).to_string())
        }
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => None,
        Err(error) => return Err(format!("{shown}: cannot be read: {error}")),
    };
    let mut text = String::new();
    match existing.as_deref() {
        None | Some("") => {
            text.push_str(header);
            text.push('\n');
        }
        Some(found) if found == header => {}
        Some(found) => {
            let column = found
                .split(',')
                .zip(header.split(','))
                .position(|(theirs, ours)| theirs != ours)
                .unwrap_or_else(|| found.split(',').count().min(header.split(',').count()));
            return Err(format!(
                "{shown}: its header is not this wattline's CSV header (they differ at column {}): \
                 the row was not appended; use another file",
                column + 1
            ));
        }
    }
    text.push_str(row);
    text.push('\n');
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|error| format!("{shown}: cannot be opened for appending: {error}"))?;
    file.write_all(text.as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(|error| format!("{shown}: the row could not be written: {error}"))
}
