//! NetPIPE 3.x output files (`NPtcp -o np.out`): one line per message
//! size, `bytes  Mbps  seconds`, where NetPIPE's "Mbps" is 2^20 bits per
//! second and the time is the one-way time of one message (half the round
//! trip). Imported as a `sweep` run headed by its peak bandwidth; NetPIPE
//! records no hosts, CPU or MTU, so those stay NULL.

use serde_json::{json, Value};

use std::io::{BufRead, Read};

use super::{checks, Imported, Skipped};
use crate::store::columns::{headline, Columns};

/// NetPIPE's megabit: 2^20 bits.
const NETPIPE_MEGABIT: f64 = 1_048_576.0;

/// Where a line went wrong.
#[derive(Debug, Clone, PartialEq)]
pub struct LineError {
    pub line: usize,
    pub byte: usize,
    pub what: String,
}

/// Why an `np.out` file is not imported.
#[derive(Debug)]
pub enum Error {
    Line(LineError),
    Read(std::io::Error),
}

/// The largest message NetPIPE is taken to send: 1 TiB.
const MAX_SIZE_BYTES: u64 = 1 << 40;
/// The longest line read (NetPIPE's are about 40 bytes).
const MAX_LINE_BYTES: usize = 4096;
/// The most lines of one run (NetPIPE writes about 100): bounds the
/// memory an import takes.
const MAX_POINTS: usize = 100_000;
/// The longest one-way time of one message: an hour.
const MAX_SECONDS: f64 = 3600.0;

/// Reads the text of an `np.out` file.
pub fn parse(text: &str) -> Result<Imported, LineError> {
    parse_lines(text.as_bytes(), Skipped::default()).map_err(|e| match e {
        Error::Line(e) => e,
        Error::Read(e) => LineError {
            line: 1,
            byte: 0,
            what: e.to_string(),
        },
    })
}

/// Reads an `np.out` file line by line from `reader`, which starts after
/// the whitespace `skipped` at the start of the file.
pub fn parse_lines(mut reader: impl BufRead, skipped: Skipped) -> Result<Imported, Error> {
    let mut points = Vec::new();
    let mut offset = skipped.bytes;
    let mut raw = Vec::new();
    for index in 0.. {
        raw.clear();
        let read = (&mut reader)
            .take(MAX_LINE_BYTES as u64)
            .read_until(b'\n', &mut raw)
            .map_err(Error::Read)?;
        if read == 0 {
            break;
        }
        let (number, start) = (skipped.newlines + index + 1, offset);
        if read == MAX_LINE_BYTES && raw.last() != Some(&b'\n') {
            return Err(Error::Line(LineError {
                line: number,
                byte: start,
                what: format!(
                    "a line longer than {MAX_LINE_BYTES} bytes: expected NetPIPE np.out lines of three numbers"
                ),
            }));
        }
        offset += raw.len();
        let Ok(line) = std::str::from_utf8(&raw) else {
            return Err(Error::Line(LineError {
                line: number,
                byte: start,
                what: "expected a NetPIPE np.out line of text; found bytes that are not UTF-8".into(),
            }));
        };
        if line.trim().is_empty() {
            continue;
        }
        if points.len() == MAX_POINTS {
            return Err(Error::Line(LineError {
                line: number,
                byte: start,
                what: format!("more than {MAX_POINTS} points: not the output of one NetPIPE run"),
            }));
        }
        points.push(point(line, number, start).map_err(Error::Line)?);
    }
    if points.is_empty() {
        return Err(Error::Line(LineError {
            line: 1,
            byte: 0,
            what: "no data: expected NetPIPE np.out lines (message bytes, Mbit/s, seconds)".into(),
        }));
    }
    let peak = points
        .iter()
        .filter_map(|p| p["bits_per_second"].as_f64())
        .fold(0.0, f64::max);
    // A NetPIPE run is a sweep, its peak the sweep's headline.
    let sweep = crate::workload::size_sweep();
    let mut columns = Columns {
        workload: sweep.name().into(),
        workload_figures: [(sweep.results().headline().name, peak)].into(),
        ..Columns::default()
    };
    columns.headline = headline(&columns);
    let document: Value = json!({"format": "netpipe-3", "points": points});
    Ok(Imported {
        source: "netpipe",
        document,
        columns,
    })
}

/// One line's point: its size, rate and one-way time, each in its range.
fn point(line: &str, number: usize, start: usize) -> Result<Value, LineError> {
    let fields: Vec<&str> = line.split_whitespace().collect();
    let bad = |what: String| LineError {
        line: number,
        byte: start + line.len() - line.trim_start().len(),
        what,
    };
    let expected = "expected a NetPIPE np.out line: message bytes, Mbit/s (2^20), seconds";
    if fields.len() != 3 {
        return Err(bad(format!(
            "{expected}; found {} field(s): '{}'",
            fields.len(),
            line.trim()
        )));
    }
    let size: u64 = fields[0]
        .parse()
        .map_err(|_| bad(format!("{expected}; '{}' is not a byte count", fields[0])))?;
    let (Ok(mbps), Ok(seconds)) = (fields[1].parse::<f64>(), fields[2].parse::<f64>()) else {
        return Err(bad(format!(
            "{expected}; '{}' holds a field that is not a number",
            line.trim()
        )));
    };
    if !(1..=MAX_SIZE_BYTES).contains(&size) {
        return Err(bad(format!(
            "field 1 (message bytes) {size} is not a message size: expected 1 to {MAX_SIZE_BYTES}"
        )));
    }
    let bits_per_second = mbps * NETPIPE_MEGABIT;
    if !(bits_per_second.is_finite() && (0.0..=checks::MAX_BITS_PER_SECOND).contains(&bits_per_second)) {
        return Err(bad(format!(
            "field 2 (Mbit/s) {} is {bits_per_second} bit/s, not a measurement: expected 0 to {} Mbit/s (1 Pbit/s)",
            fields[1],
            (checks::MAX_BITS_PER_SECOND / NETPIPE_MEGABIT).floor()
        )));
    }
    if !(seconds.is_finite() && (0.0..=MAX_SECONDS).contains(&seconds)) {
        return Err(bad(format!(
            "field 3 (seconds) {} is not the time of one message: expected 0 to {MAX_SECONDS}",
            fields[2]
        )));
    }
    Ok(json!({
        "size_bytes": size,
        "bits_per_second": bits_per_second,
        "one_way_seconds": seconds,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn points_and_the_peak_in_bits_per_second() {
        let text = "       1 0.063584   0.00012000\n    1024 50.000000   0.00001953\n\n 1048576 800.0 0.01\n";
        let run = parse(text).unwrap();
        assert_eq!(
            run.columns.number("sweep_peak_bits_per_second"),
            Some(800.0 * 1_048_576.0)
        );
        assert_eq!(run.document["points"].as_array().unwrap().len(), 3);
        assert_eq!(run.document["points"][1]["size_bytes"], 1024);
    }

    #[test]
    fn a_bad_line_is_named_with_its_byte() {
        let text = "1 0.06 0.0001\n   2 x 0.0002\n";
        let e = parse(text).unwrap_err();
        assert_eq!((e.line, e.byte), (2, 17));
        assert!(e.what.contains("not a number"), "{}", e.what);
    }

    #[test]
    fn a_bandwidth_over_a_petabit_or_a_negative_time_is_refused_with_its_field() {
        let e = parse("1 0.06 0.0001\n2 1e308 0.0002\n").unwrap_err();
        assert_eq!(e.line, 2);
        assert!(e.what.contains("field 2 (Mbit/s) 1e308"), "{}", e.what);
        let e = parse("1 0.06 -0.0001\n").unwrap_err();
        assert!(e.what.contains("field 3 (seconds)"), "{}", e.what);
        let e = parse("0 0.06 0.0001\n").unwrap_err();
        assert!(e.what.contains("field 1 (message bytes) 0"), "{}", e.what);
    }
}
