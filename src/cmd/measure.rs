//! Running a measuring command: options to spec and target, the test, and
//! the chosen output. Shared by every workload's command.

use std::io::Write;
use std::net::IpAddr;

use anyhow::Context;

use super::signals;
use crate::cli::parse::CpuList;
use crate::cli::MeasureArgs;
use crate::logging;
use crate::model::RunResult;
use crate::plan::{self, CaseOptions};
use crate::probe::nic;
use crate::report::json::{Json, StreamEvent};
use crate::report::text::{interval_lines, Text};
use crate::report::Reporter;
use crate::session::{Family, Target};
use crate::stats::Policy;
use crate::workload::runner::{IntervalCallback, IntervalTick, ProgressCallback};
use crate::workload::{Direction, SideOptions, SpecError, TestSpec};

/// The part of a spec every measuring command fills the same way.
pub fn base_spec(workload: &str, m: &MeasureArgs, message_bytes: u64) -> TestSpec {
    let side = |send: Option<u64>, receive: Option<u64>, cpus: &Option<CpuList>| SideOptions {
        send_buffer_bytes: send.or(m.window),
        receive_buffer_bytes: receive.or(m.window),
        cpus: cpus.as_ref().map(|c| c.0.clone()).unwrap_or_default(),
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

/// `-B`: an address, or an interface whose address of the wanted family is used.
pub fn bind_address(bind: &str, family: Option<Family>) -> anyhow::Result<IpAddr> {
    if let Ok(ip) = bind.trim_start_matches('[').trim_end_matches(']').parse::<IpAddr>() {
        return Ok(ip);
    }
    let invalid = |why: &str| SpecError::Invalid(format!("-B {bind}: {why}"));
    let addresses: Vec<IpAddr> = nic::interface_addresses()
        .into_iter()
        .filter(|(name, _)| name == bind)
        .map(|(_, ip)| ip)
        .collect();
    if addresses.is_empty() && !nic::interface_names().iter().any(|name| name == bind) {
        return Err(invalid("not an IP address, and there is no interface of that name").into());
    }
    addresses
        .into_iter()
        .filter(|ip| match family {
            Some(Family::V4) => ip.is_ipv4(),
            Some(Family::V6) => ip.is_ipv6(),
            None => true,
        })
        // Prefer IPv4, then global IPv6 over link-local (which needs a scope).
        .min_by_key(|ip| match ip {
            IpAddr::V4(_) => 0,
            IpAddr::V6(v6) if (v6.segments()[0] & 0xffc0) != 0xfe80 => 1,
            IpAddr::V6(_) => 2,
        })
        .ok_or_else(|| invalid("the interface has no address of the requested family").into())
}

pub fn target(m: &MeasureArgs) -> anyhow::Result<Target> {
    let family = if m.ipv4 {
        Some(Family::V4)
    } else if m.ipv6 {
        Some(Family::V6)
    } else {
        None
    };
    Ok(Target {
        host: m.host.clone(),
        port: m.port,
        family,
        bind: m.bind.as_deref().map(|b| bind_address(b, family)).transpose()?,
        connect_timeout: m.connect_timeout,
        wait: m.wait,
        psk_file: m.psk_file.clone(),
    })
}

/// The iperf3 server's host and port when the peer is one
/// (`iperf3://HOST[:PORT]` or `--iperf3`), None for a nicbench agent.
pub fn iperf3_peer(m: &MeasureArgs) -> anyhow::Result<Option<(String, u16)>> {
    let default_port = |explicit: Option<u16>| {
        explicit.unwrap_or(if m.port == crate::protocol::DEFAULT_PORT {
            crate::iperf3::wire::DEFAULT_PORT
        } else {
            m.port
        })
    };
    match crate::iperf3::parse_target(&m.host) {
        Some(Ok((host, port))) => Ok(Some((host, default_port(port)))),
        Some(Err(e)) => Err(SpecError::Invalid(e).into()),
        None if m.iperf3 => Ok(Some((m.host.clone(), default_port(None)))),
        None => Ok(None),
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
    let mut target = target(m)?;
    let iperf3 = iperf3_peer(m)?;
    if let Some((host, port)) = &iperf3 {
        target.host = host.clone();
        target.port = *port;
    }
    let context = || match &iperf3 {
        Some((host, port)) => format!("{} test against the iperf3 server {host}:{port}", spec.workload),
        None => format!("{} test against {}:{}", spec.workload, m.host, m.port),
    };
    let outcome = if iperf3.is_some() {
        let interrupted = options.interrupted;
        let mut trial = |number: u32| {
            crate::iperf3::client::run(
                &target,
                spec,
                crate::session::RunOptions {
                    interrupted,
                    on_interval: on_interval(),
                    on_progress: None,
                    trial: number,
                },
            )
        };
        plan::run_trials(&mut trial, options)
    } else {
        plan::run_case(&target, spec, options, &on_interval, on_progress)
    };
    let mut run = match outcome {
        Ok(run) => run,
        Err(failure) => {
            // Trials that finished before the failing one are results:
            // show them, then fail with the error.
            if let Some(mut run) = failure.finished {
                crate::verdict::annotate(&mut run, m.link_speed);
                logging::warn(&format!(
                    "a trial failed after {} finished; those are shown, marked interrupted",
                    run.trials.len()
                ));
                let _ = print(m, &run);
            }
            return Err(anyhow::Error::new(failure.error)).with_context(context);
        }
    };
    if m.link_speed.is_some() {
        crate::verdict::annotate(&mut run, m.link_speed);
    }
    Ok(run)
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
