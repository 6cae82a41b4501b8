//! The JSON document (`--json`) and JSON lines (`--json-stream`).

use std::io::{self, Write};

use serde::Serialize;

use super::Reporter;
use crate::model::RunResult;
use crate::workload::runner::IntervalTick;

/// Pretty-printed run document, schema `nicbench.run/1` (docs/SCHEMA.md).
pub struct Json;

impl Reporter for Json {
    fn render(&self, run: &RunResult, out: &mut dyn Write) -> io::Result<()> {
        crate::outside_text::write_json_pretty(&mut *out, run)?;
        writeln!(out)
    }
}

/// One line of `--json-stream` output.
#[derive(Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum StreamEvent<'a> {
    Interval {
        host: &'a str,
        start_seconds: f64,
        end_seconds: f64,
        omitted: bool,
        streams: Vec<IntervalStream>,
    },
    Result {
        result: &'a RunResult,
    },
}

#[derive(Serialize)]
pub struct IntervalStream {
    pub stream_id: u32,
    pub role: crate::model::Role,
    pub bytes: u64,
    pub bits_per_second: f64,
}

impl<'a> StreamEvent<'a> {
    pub fn interval(host: &'a str, tick: &IntervalTick) -> StreamEvent<'a> {
        let seconds = tick.end_seconds - tick.start_seconds;
        StreamEvent::Interval {
            host,
            start_seconds: tick.start_seconds,
            end_seconds: tick.end_seconds,
            omitted: tick.omitted,
            streams: tick
                .streams
                .iter()
                .map(|&(stream_id, role, bytes)| IntervalStream {
                    stream_id,
                    role,
                    bytes,
                    bits_per_second: crate::units::bits_per_second(bytes, seconds),
                })
                .collect(),
        }
    }

    pub fn write_line(&self, out: &mut dyn Write) -> io::Result<()> {
        crate::outside_text::write_json(&mut *out, self)?;
        writeln!(out)
    }
}
