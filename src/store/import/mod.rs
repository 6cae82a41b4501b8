//! Importing results of other tools so they sit in the same tables:
//! iperf3 `-J` documents, NetPIPE output files (`np.out`) and nicbench's own
//! JSON documents. What a format does not carry stays NULL; nothing is
//! invented. Files are streamed (NetPIPE line by line, JSON parsed from a
//! buffered reader), never read whole into memory. A malformed file is
//! named with the line and byte where it went wrong and what was expected;
//! a figure outside what can be measured (negative or non-finite rates,
//! CPU beyond the cores, a date before 1990 or in the future, a workload
//! nicbench does not know) with its file, line and field.

pub mod checks;
pub mod iperf3;
pub mod netpipe;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

use serde::Deserialize;
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
    #[error(
        "{file} is {}, more than the {} MiB a document may be; nothing was imported from it \
         (a run that large makes every report that reads it slow)",
        size_text(*.bytes),
        super::MAX_DOCUMENT_BYTES >> 20
    )]
    TooLarge {
        file: PathBuf,
        /// Its size, or None when it was read past the cap from a stream.
        bytes: Option<u64>,
    },
    #[error("{file}{}: field {field}: {what}; nothing was imported from it", line_text(*.line))]
    Invalid {
        file: PathBuf,
        /// Where the field is written, when the file could be searched for it.
        line: Option<usize>,
        field: String,
        what: String,
    },
}

fn line_text(line: Option<usize>) -> String {
    line.map(|l| format!(": line {l}")).unwrap_or_default()
}

fn size_text(bytes: Option<u64>) -> String {
    match bytes {
        Some(b) => format!("{:.1} MiB", b as f64 / (1u64 << 20) as f64),
        None => "longer than that".into(),
    }
}

/// A reader that fails once more than [`super::MAX_DOCUMENT_BYTES`] came
/// through it (a file that grows, a pipe): the cap holds whatever the size
/// said at the start.
struct Capped<R> {
    inner: R,
    left: u64,
}

/// The error [`Capped`] fails with, told apart from the file's own.
#[derive(Debug)]
struct OverCap;

impl std::fmt::Display for OverCap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "more than {} MiB", super::MAX_DOCUMENT_BYTES >> 20)
    }
}

impl std::error::Error for OverCap {}

impl<R: std::io::Read> std::io::Read for Capped<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        match self.left.checked_sub(n as u64) {
            Some(left) => {
                self.left = left;
                Ok(n)
            }
            None => Err(std::io::Error::other(OverCap)),
        }
    }
}

/// Whether `error` (or what it wraps) is [`Capped`]'s.
fn over_cap(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut cause = Some(error);
    while let Some(e) = cause {
        if e.is::<OverCap>()
            || e.downcast_ref::<std::io::Error>()
                .and_then(|io| io.get_ref())
                .is_some_and(|i| i.is::<OverCap>())
        {
            return true;
        }
        cause = e.source();
    }
    false
}

/// Reads one file: iperf3 or nicbench JSON when it starts with `{`, else
/// NetPIPE's text. The file is read through a buffer, once. A file over
/// [`super::MAX_DOCUMENT_BYTES`] is refused before it is parsed (or when
/// the reading passes the cap), saying the cap.
pub fn read(file: &Path) -> Result<Imported, ImportError> {
    let opened = std::fs::File::open(file).map_err(|source| ImportError::Read {
        file: file.to_path_buf(),
        source,
    })?;
    let too_large = |bytes| ImportError::TooLarge {
        file: file.to_path_buf(),
        bytes,
    };
    let size = opened.metadata().ok().filter(|m| m.is_file()).map(|m| m.len());
    if let Some(bytes) = size.filter(|&b| b > super::MAX_DOCUMENT_BYTES) {
        return Err(too_large(Some(bytes)));
    }
    let capped = Capped {
        inner: opened,
        left: super::MAX_DOCUMENT_BYTES,
    };
    parse_from(file, BufReader::with_capacity(1 << 16, capped)).map_err(|e| match &e {
        ImportError::Read { source, .. } if over_cap(source) => too_large(None),
        ImportError::Malformed { what, .. } if what.contains(&OverCap.to_string()) => too_large(None),
        _ => e,
    })
}

/// [`read`] on a text in memory (tests, and files already read).
pub fn parse(file: &Path, text: &str) -> Result<Imported, ImportError> {
    parse_from(file, text.as_bytes())
}

/// Reads a run from `reader`; `file` names it in errors (and is read again
/// only to find the line of a field that failed its check).
pub fn parse_from(file: &Path, mut reader: impl BufRead) -> Result<Imported, ImportError> {
    let read_error = |source| ImportError::Read {
        file: file.to_path_buf(),
        source,
    };
    let skipped = skip_whitespace(&mut reader).map_err(read_error)?;
    let starts_json = reader.fill_buf().map_err(read_error)?.first() == Some(&b'{');
    if !starts_json {
        return netpipe::parse_lines(reader, skipped).map_err(|e| match e {
            netpipe::Error::Line(e) => ImportError::Malformed {
                file: file.to_path_buf(),
                line: e.line,
                byte: e.byte,
                what: e.what,
            },
            netpipe::Error::Read(source) => read_error(source),
        });
    }
    let doc: Value = {
        let mut de = serde_json::Deserializer::from_reader(reader);
        let parsed = Value::deserialize(&mut de).and_then(|v| de.end().map(|_| v));
        parsed.map_err(|e| {
            // The JSON starts after the whitespace skipped above.
            let line = e.line() + skipped.newlines;
            let column = if e.line() == 1 {
                e.column() + skipped.after_last_newline
            } else {
                e.column()
            };
            ImportError::Malformed {
                file: file.to_path_buf(),
                line,
                byte: byte_at(file, line, column),
                what: format!("invalid JSON ({e})"),
            }
        })?
    };
    let whole = |what: String| ImportError::Malformed {
        file: file.to_path_buf(),
        line: skipped.newlines + 1,
        byte: skipped.bytes,
        what,
    };
    let invalid = |bad: checks::Bad| ImportError::Invalid {
        file: file.to_path_buf(),
        line: bad.value.and_then(|v| line_of_field(file, &bad.field, v)),
        field: bad.field,
        what: bad.what,
    };
    match doc.get("schema").and_then(Value::as_str) {
        Some(crate::model::SCHEMA) => {
            let columns = columns::of_document(&doc);
            checks::nicbench_document(&doc, &columns).map_err(invalid)?;
            // The document must be what nicbench writes, field for field
            // (read from the tree in place: no second copy of a large file).
            crate::model::RunResult::deserialize(&doc)
                .map_err(|e| whole(format!("not a valid {} document: {e}", crate::model::SCHEMA)))?;
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
        None => iperf3::parse(doc).map_err(|e| match e {
            iperf3::Error::Document(what) => whole(what),
            iperf3::Error::Figure(bad) => invalid(bad),
        }),
    }
}

/// What [`skip_whitespace`] passed over.
#[derive(Debug, Clone, Copy, Default)]
pub struct Skipped {
    pub bytes: usize,
    pub newlines: usize,
    /// Bytes after the last newline skipped.
    pub after_last_newline: usize,
}

/// Consumes the whitespace at the start of `reader`.
fn skip_whitespace(reader: &mut impl BufRead) -> std::io::Result<Skipped> {
    let mut skipped = Skipped::default();
    loop {
        let buffer = reader.fill_buf()?;
        let n = buffer.iter().take_while(|b| b.is_ascii_whitespace()).count();
        for &b in &buffer[..n] {
            if b == b'\n' {
                skipped.newlines += 1;
                skipped.after_last_newline = 0;
            } else {
                skipped.after_last_newline += 1;
            }
        }
        let more = n == buffer.len() && n > 0;
        skipped.bytes += n;
        reader.consume(n);
        if !more {
            return Ok(skipped);
        }
    }
}

/// The byte offset of a 1-based line and column of `file`, read again line
/// by line (0 when the file cannot be read).
fn byte_at(file: &Path, line: usize, column: usize) -> usize {
    let Ok(opened) = std::fs::File::open(file) else {
        return column.saturating_sub(1);
    };
    let mut reader = BufReader::new(opened);
    let mut before = 0;
    let mut buffer = Vec::new();
    for _ in 1..line {
        buffer.clear();
        match reader.read_until(b'\n', &mut buffer) {
            Ok(0) | Err(_) => break,
            Ok(n) => before += n,
        }
    }
    before + column.saturating_sub(1)
}

/// The first line of `file` where the last key of the dotted `field` is
/// written with `value`; None when the file cannot be read or holds it
/// nowhere.
fn line_of_field(file: &Path, field: &str, value: f64) -> Option<usize> {
    let key = format!("\"{}\"", field.rsplit('.').next()?);
    let reader = BufReader::new(std::fs::File::open(file).ok()?);
    for (index, line) in reader.split(b'\n').enumerate() {
        let line = String::from_utf8_lossy(&line.ok()?).into_owned();
        let mut rest = line.as_str();
        while let Some(at) = rest.find(&key) {
            rest = &rest[at + key.len()..];
            let Some(after) = rest.trim_start().strip_prefix(':') else {
                continue;
            };
            let number: String = after
                .trim_start()
                .chars()
                .take_while(|c| c.is_ascii_digit() || "+-.eE".contains(*c))
                .collect();
            if number.parse::<f64>().ok() == Some(value) {
                return Some(index + 1);
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invalid_json_names_line_and_byte() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("x.json");
        let text = "\n{\n  \"start\": {},\n  \"end\": [1,\n}";
        std::fs::write(&file, text).unwrap();
        match read(&file) {
            Err(ImportError::Malformed { line, byte, what, .. }) => {
                assert_eq!(line, 5);
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

    /// Issue 67: a 200 MB document was taken in, and every report then
    /// read it (11 s and 836 MB). A file over the cap is refused first.
    #[test]
    fn a_document_over_the_cap_is_refused_saying_the_cap() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("big.json");
        let big = std::fs::File::create(&file).unwrap();
        // Sparse: the size is what is checked, before a byte is parsed.
        big.set_len(super::super::MAX_DOCUMENT_BYTES + 1).unwrap();
        let error = read(&file).unwrap_err();
        assert!(
            matches!(error, ImportError::TooLarge { bytes: Some(_), .. }),
            "{error:?}"
        );
        let text = error.to_string();
        assert!(text.contains("more than the 64 MiB a document may be"), "{text}");
        // Read through a stream (no size to check first): cut at the cap.
        let capped = Capped {
            inner: std::io::Read::take(std::io::repeat(b' '), super::super::MAX_DOCUMENT_BYTES + 10),
            left: super::super::MAX_DOCUMENT_BYTES,
        };
        let parsed = parse_from(&file, BufReader::new(capped)).unwrap_err();
        match parsed {
            ImportError::Read { source, .. } => assert!(over_cap(&source), "{source}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_field_out_of_range_is_named_with_its_line() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("i.json");
        let text = "{\n \"start\": {\"timestamp\": {\"timesecs\": 1700000000},\n  \"test_start\": {\"protocol\": \"TCP\"}},\n \
                    \"end\": {\n  \"sum_received\": {\"bits_per_second\": -5e9},\n  \"sum_sent\": {\"bits_per_second\": 1e9}}}";
        std::fs::write(&file, text).unwrap();
        let error = read(&file).unwrap_err().to_string();
        assert!(
            error.contains("i.json: line 5: field end.sum_received.bits_per_second: -5000000000"),
            "{error}"
        );
    }
}
