//! NetPIPE 3.x output files (`NPtcp -o np.out`): one line per message
//! size, `bytes  Mbps  seconds`, where NetPIPE's "Mbps" is 2^20 bits per
//! second and the time is the one-way time of one message (half the round
//! trip). Imported as a `sweep` run headed by its peak bandwidth; NetPIPE
//! records no hosts, CPU or MTU, so those stay NULL.

use serde_json::{json, Value};

use super::Imported;
use crate::store::columns::{headline, Columns};
use crate::workload::sweep::Sweep;
use crate::workload::Workload;

/// NetPIPE's megabit: 2^20 bits.
const NETPIPE_MEGABIT: f64 = 1_048_576.0;

/// Where a line went wrong.
#[derive(Debug, Clone, PartialEq)]
pub struct LineError {
    pub line: usize,
    pub byte: usize,
    pub what: String,
}

/// Reads the text of an `np.out` file.
pub fn parse(text: &str) -> Result<Imported, LineError> {
    let mut points = Vec::new();
    let mut offset = 0;
    for (index, line) in text.split_inclusive('\n').enumerate() {
        let (number, start) = (index + 1, offset);
        offset += line.len();
        if line.trim().is_empty() {
            continue;
        }
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
        let parse = |s: &str| s.parse::<f64>().ok().filter(|v| v.is_finite() && *v >= 0.0);
        let (Some(mbps), Some(seconds)) = (parse(fields[1]), parse(fields[2])) else {
            return Err(bad(format!(
                "{expected}; '{}' holds a field that is not a number",
                line.trim()
            )));
        };
        points.push(json!({
            "size_bytes": size,
            "bits_per_second": mbps * NETPIPE_MEGABIT,
            "one_way_seconds": seconds,
        }));
    }
    if points.is_empty() {
        return Err(LineError {
            line: 1,
            byte: 0,
            what: "no data: expected NetPIPE np.out lines (message bytes, Mbit/s, seconds)".into(),
        });
    }
    let peak = points
        .iter()
        .filter_map(|p| p["bits_per_second"].as_f64())
        .fold(0.0, f64::max);
    // A NetPIPE run is a sweep, its peak the sweep's headline.
    let sweep: &dyn Workload = &Sweep;
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
}
