//! Running a measuring command: options to spec and target, the test, and
//! the chosen output. Shared by every workload's command.

use std::io::Write;

use anyhow::Context;

use super::signals;
use crate::cli::MeasureArgs;
use crate::logging;
use crate::model::RunResult;
use crate::plan::{self, CaseOptions};
use crate::report::json::{Json, StreamEvent};
use crate::report::text::{interval_lines, Text};
use crate::report::Reporter;
use crate::session::{Family, Target};
use crate::stats::Policy;
use crate::workload::runner::{IntervalCallback, IntervalTick, ProgressCallback};
use crate::workload::{Direction, SideOptions, TestSpec};

/// The part of a spec every measuring command fills the same way.
pub fn base_spec(workload: &str, m: &MeasureArgs, message_bytes: u64) -> TestSpec {
    let side = |send: Option<u64>, receive: Option<u64>, cpus: &Option<Vec<u32>>| SideOptions {
        send_buffer_bytes: send.or(m.window),
        receive_buffer_bytes: receive.or(m.window),
        cpus: cpus.clone().unwrap_or_default(),
    };
    TestSpec {
        workload: workload.to_string(),
        duration_seconds: m.duration.as_secs_f64(),
        bytes: None,
        omit_seconds: m.omit.as_secs_f64(),
        streams: m.streams,
        direction: if m.bidir {
            Direction::Bidir
        } else if m.reverse {
            Direction::Reverse
        } else {
            Direction::Forward
        },
        message_bytes,
        interval_seconds: m.interval.map(|d| d.as_secs_f64()).unwrap_or(1.0),
        client: side(m.sndbuf, m.rcvbuf, &m.affinity),
        agent: side(m.remote_sndbuf, m.remote_rcvbuf, &m.remote_affinity),
        params: serde_json::Value::Null,
    }
}

pub fn target(m: &MeasureArgs) -> Target {
    Target {
        host: m.host.clone(),
        port: m.port,
        family: if m.ipv4 {
            Some(Family::V4)
        } else if m.ipv6 {
            Some(Family::V6)
        } else {
            None
        },
        bind: m.bind,
        connect_timeout: m.connect_timeout,
    }
}

/// The repetition policy the options ask for (one trial by default).
pub fn policy(m: &MeasureArgs) -> Policy {
    match (m.confidence, m.iterations) {
        (None, None) => Policy::Repeat {
            trials: m.repeat,
            pick: m.pick,
        },
        (confidence, iterations) => {
            let (level_percent, width_percent) = confidence.unwrap_or((99.0, 5.0));
            let (max_trials, min_trials) = iterations.unwrap_or((10, 3));
            Policy::Confidence {
                level_percent,
                width_percent,
                max_trials,
                min_trials,
            }
        }
    }
}

/// Runs one test and prints it in the chosen format.
pub fn execute(m: &MeasureArgs, spec: &TestSpec) -> anyhow::Result<()> {
    let run = measure(m, spec, &|| None)?;
    print(m, &run)
}

/// Runs the trials of one test under the repetition policy of `m`, with
/// live interval output as asked and a line per trial on stderr.
pub fn measure(
    m: &MeasureArgs,
    spec: &TestSpec,
    on_progress: &dyn Fn() -> Option<ProgressCallback>,
) -> anyhow::Result<RunResult> {
    signals::install();
    let json_stream = m.json_stream;
    let live = m.interval.is_some() && !m.json;
    let on_interval = move || -> Option<IntervalCallback> {
        if json_stream {
            Some(Box::new(|tick: &IntervalTick| {
                let _ = StreamEvent::interval("client", tick).write_line(&mut std::io::stdout().lock());
            }))
        } else if live {
            Some(Box::new(|tick: &IntervalTick| {
                let _ = interval_lines("client", tick, &mut std::io::stdout().lock());
            }))
        } else {
            None
        }
    };
    let policy = policy(m);
    let mut stderr = std::io::stderr();
    let show_trials = policy != Policy::SINGLE && logging::enabled(logging::Level::Warn);
    let options = CaseOptions {
        policy,
        interrupted: &signals::interrupted,
        progress: show_trials.then_some(&mut stderr as &mut dyn Write),
    };
    plan::run_case(&target(m), spec, options, &on_interval, on_progress)
        .with_context(|| format!("{} test against {}:{}", spec.workload, m.host, m.port))
}

/// Prints a run in the format `m` asks for.
pub fn print(m: &MeasureArgs, run: &RunResult) -> anyhow::Result<()> {
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let written = if m.json_stream {
        StreamEvent::Result { result: run }.write_line(&mut out)
    } else if m.json {
        Json.render(run, &mut out)
    } else {
        Text.render(run, &mut out)
    };
    match written.and_then(|_| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e).context("writing the result"),
        _ => Ok(()),
    }
}
