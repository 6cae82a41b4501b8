//! Importing results of other tools so they sit in the same tables:
//! iperf3 `-J` documents, NetPIPE output files (`np.out`) and nicbench's own
//! JSON documents. What a format does not carry stays NULL; nothing is
//! invented. A malformed file is named with the line and byte where it
//! went wrong and what was expected.

pub mod iperf3;
pub mod netpipe;

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::columns::{self, Columns};

/// One run read from a file, ready to save.
#[derive(Debug, Clone, PartialEq)]
pub struct Imported {
    /// `iperf3`, `netpipe` or `nicbench-json`.
    pub source: &'static str,
    /// The document kept for `show --json` and `export`: the tool's own.
    pub document: Value,
    pub columns: Columns,
}

/// Why a file could not be imported.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error("cannot read {file}: {source}")]
    Read { file: PathBuf, source: std::io::Error },
    #[error("{file}: line {line}, byte {byte}: {what}; nothing was imported from it")]
    Malformed {
        file: PathBuf,
        line: usize,
        byte: usize,
        what: String,
    },
}

/// Where in a text a line and 1-based column point: the byte offset.
fn byte_at(text: &str, line: usize, column: usize) -> usize {
    let before: usize = text
        .split_inclusive('\n')
        .take(line.saturating_sub(1))
        .map(str::len)
        .sum();
    before + column.saturating_sub(1)
}

/// Reads one file: iperf3 or nicbench JSON when it starts with `{`, else
/// NetPIPE's text.
pub fn read(file: &Path) -> Result<Imported, ImportError> {
    let text = std::fs::read_to_string(file).map_err(|source| ImportError::Read {
        file: file.to_path_buf(),
        source,
    })?;
    parse(file, &text)
}

/// [`read`] on the file's text.
pub fn parse(file: &Path, text: &str) -> Result<Imported, ImportError> {
    let malformed = |line: usize, byte: usize, what: String| ImportError::Malformed {
        file: file.to_path_buf(),
        line,
        byte,
        what,
    };
    if !text.trim_start().starts_with('{') {
        return netpipe::parse(text).map_err(|e| malformed(e.line, e.byte, e.what));
    }
    let doc: Value = serde_json::from_str(text).map_err(|e| {
        let byte = byte_at(text, e.line(), e.column());
        malformed(e.line(), byte, format!("invalid JSON ({e})"))
    })?;
    let whole = |what: String| malformed(1, 0, what);
    match doc.get("schema").and_then(Value::as_str) {
        Some(crate::model::SCHEMA) => {
            // The document must be what nicbench writes, field for field.
            serde_json::from_value::<crate::model::RunResult>(doc.clone())
                .map_err(|e| whole(format!("not a valid {} document: {e}", crate::model::SCHEMA)))?;
            let columns = columns::of_document(&doc);
            Ok(Imported {
                source: "nicbench-json",
                document: doc,
                columns,
            })
        }
        Some(other) => Err(whole(format!(
            "schema '{other}' is not one this nicbench reads (expected {})",
            crate::model::SCHEMA
        ))),
        None => iperf3::parse(&doc).map_err(whole),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invalid_json_names_line_and_byte() {
        let text = "{\n  \"start\": {},\n  \"end\": [1,\n}";
        match parse(Path::new("x.json"), text) {
            Err(ImportError::Malformed { line, byte, what, .. }) => {
                assert_eq!(line, 4);
                assert_eq!(byte, text.rfind('}').unwrap());
                assert!(what.starts_with("invalid JSON"), "{what}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn an_unknown_json_document_says_what_was_expected() {
        let error = parse(Path::new("x.json"), "{\"a\": 1}").unwrap_err().to_string();
        assert!(
            error.contains("x.json: line 1") && error.contains("iperf3 -J document"),
            "{error}"
        );
        let error = parse(Path::new("x.json"), "{\"schema\": \"nicbench.run/9\"}")
            .unwrap_err()
            .to_string();
        assert!(error.contains("expected nicbench.run/1"), "{error}");
    }
}
