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
    /// A TCP sender's retransmits in the interval, congestion window and
    /// round trip at its end, as a run's `intervals[]` carry them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retransmits: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub congestion_window_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rtt_us: Option<u32>,
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
                .map(|s| IntervalStream {
                    stream_id: s.stream_id,
                    role: s.role,
                    bytes: s.bytes,
                    bits_per_second: crate::units::bits_per_second(s.bytes, seconds),
                    retransmits: s.tcp.map(|t| t.retransmits),
                    congestion_window_bytes: s.tcp.map(|t| t.congestion_window_bytes),
                    rtt_us: s.tcp.map(|t| t.rtt_us),
                })
                .collect(),
        }
    }

    pub fn write_line(&self, out: &mut dyn Write) -> io::Result<()> {
        crate::outside_text::write_json(&mut *out, self)?;
        writeln!(out)
    }
}
