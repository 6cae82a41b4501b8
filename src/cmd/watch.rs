//! `nicbench watch -- COMMAND`: runs any command (scp, rsync, curl, a
//! backup job) and measures around it what a test measures around its
//! streams: the interface's counters both ways (sampled every second), the
//! CPU of every core, the CPU of the command's process tree (from wait4,
//! which counts every descendant it waited for), the host's facts, the
//! line rate and the verdict. The run is saved as workload `watch` with
//! the command line as the tag `command`; the command's exit code is
//! passed through, and a Ctrl-C reaching nicbench is forwarded to it.

use std::io::Write;
use std::net::IpAddr;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::Context;

use super::save::{self, Saver};
use super::signals;
use crate::cli::watch::WatchArgs;
use crate::model::{
    BothCounters, BothCpu, CpuReport, Endpoint, Flow, FlowTotal, HostFacts, Interval, NicCounters, ProcessCpu, Role,
    RunResult, SideCounters, SideReport, StreamEnd, StreamResult, Sum, TestSpec, Total, TrialResult, SCHEMA,
};
use crate::probe::counters::CounterProbe;
use crate::probe::cpu::{cpu_report, CpuSampler, ProcStat};
use crate::probe::nic;
use crate::report::json::Json;
use crate::report::text::Text;
use crate::report::Reporter;
use crate::store::Tag;
use crate::units::{bits_per_second, Bytes, Rate};
use crate::workload::{Direction, SideOptions, SpecError};

mod words;

/// Connects to the `--peer` agent and has it start sampling; its address
/// as shown. Fails, saying why, before the command has run.
fn start_peer(peer: &str, args: &WatchArgs) -> anyhow::Result<(crate::session::PeerWatch, String)> {
    let (host, port) = super::address::agent_address(peer, None, None)?;
    let shown = super::address::display(&host, port);
    let watch = crate::session::watch_start(&crate::session::Target {
        host,
        port,
        family: None,
        bind: None,
        connect_timeout: args.connect_timeout,
        wait: Duration::ZERO,
        psk_file: args.psk_file.clone(),
    })
    .with_context(|| format!("--peer {shown}: the peer's side cannot be sampled, so the command was not run"))?;
    Ok((watch, shown))
}

/// The command ended with a non-zero status: nicbench exits with it.
#[derive(Debug, thiserror::Error)]
#[error("the watched command exited with status {0}")]
pub struct CommandExit(pub i32);

/// The interface of the default route (IPv4), from /proc/net/route.
fn default_interface() -> Option<String> {
    let table = std::fs::read_to_string("/proc/net/route").ok()?;
    table.lines().skip(1).find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        (fields.len() > 2 && fields[1] == "00000000").then(|| fields[0].to_string())
    })
}

/// Bytes sent and received by `iface` so far.
fn interface_bytes(iface: &str) -> Option<(u64, u64)> {
    let read = |name: &str| -> Option<u64> {
        std::fs::read_to_string(format!("/sys/class/net/{iface}/statistics/{name}"))
            .ok()?
            .trim()
            .parse()
            .ok()
    };
    Some((read("tx_bytes")?, read("rx_bytes")?))
}

pub fn run(args: WatchArgs) -> anyhow::Result<()> {
    // The peer first: when it cannot sample, the command is not run at all
    // (nothing runs unmeasured).
    let peer = match &args.peer {
        Some(peer) => Some(start_peer(peer, &args)?),
        None => None,
    };
    let iface = watched_interface(&args, peer.as_ref().map(|(watch, _)| watch.local_ip))?;
    let Some(start_bytes) = interface_bytes(&iface) else {
        return Err(SpecError::Invalid(format!(
            "--iface {iface}: no such interface here (see 'ip link'); its counters are in /sys/class/net/{iface}/statistics"
        ))
        .into());
    };
    let address: Option<IpAddr> = nic::interface_addresses()
        .into_iter()
        .find(|(name, _)| *name == iface)
        .map(|(_, ip)| ip);
    signals::install();
    let probe = match address {
        Some(ip) => CounterProbe::for_local_address(Some(ip)),
        None => CounterProbe {
            interface: Some(iface.clone()),
            irqs: Vec::new(),
            cgroup: None,
        },
    };
    let sampler = ProcStat;
    let command_line = crate::shell::join(&args.command);
    let started_at = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    let counters_before = probe.snapshot();
    let cpu_before = sampler.sample().context("reading /proc/stat")?;
    let start = Instant::now();
    let child = std::process::Command::new(&args.command[0])
        .args(&args.command[1..])
        .spawn()
        .with_context(|| format!("starting '{}'", args.command[0]))?;
    let pid = child.id() as libc::pid_t;
    let (status, tree_cpu, samples) = wait_sampling(pid, &iface, start, start_bytes);
    let seconds = start.elapsed().as_secs_f64();
    let cpu_after = sampler.sample().context("reading /proc/stat")?;
    let counters = probe.delta(&counters_before, &probe.snapshot());
    let end_bytes = interface_bytes(&iface).unwrap_or(start_bytes);
    let tx = end_bytes.0.saturating_sub(start_bytes.0);
    let rx = end_bytes.1.saturating_sub(start_bytes.1);
    let peer = stop_peer(peer);
    let traffic = Traffic::of(tx, rx, peer.report.as_ref());
    let cpu = cpu_report(
        &cpu_before,
        &cpu_after,
        sampler.ticks_per_second(),
        seconds,
        tree_cpu.clone(),
        tx + rx,
    );
    let code = exit_code(status);
    let trial = watch_trial(&traffic, seconds, &samples, cpu, counters, peer.report.as_ref());
    let spec = watch_spec(&args, &iface, code, &tree_cpu, seconds, &peer);
    let facts = match address {
        Some(ip) => crate::probe::host::facts_toward(ip),
        None => crate::probe::host::facts_toward(IpAddr::from([127, 0, 0, 1])),
    };
    let mut run = RunResult {
        schema: SCHEMA.to_string(),
        workload: "watch".into(),
        started_at_unix_seconds: started_at.as_secs_f64(),
        client: Endpoint {
            address: address.map_or(iface.clone(), |ip| format!("{ip} ({iface})")),
            facts,
        },
        agent: Endpoint {
            address: peer
                .shown
                .clone()
                .unwrap_or_else(|| "the other end (not sampled)".into()),
            facts: peer.facts.clone(),
        },
        spec,
        trials: vec![trial.clone()],
        interrupted: false,
        result: trial,
        repetition: None,
        peer_protocol: None,
    };
    crate::verdict::annotate_link(&mut run, args.link_speed, None);
    let words = words::Words::of(&run, &iface, peer.report.is_some());
    if let Some(v) = run.result.verdict.as_mut() {
        v.summary = words.verdict(&v.summary);
    }
    run.trials = vec![run.result.clone()];
    let summary = format!(
        "watch: '{command_line}' ran {seconds:.2} s, exit status {code}; {iface}: sent {} ({}), received {} ({}); \
         the command's process tree used {:.2} s of CPU (user {:.2} s, sys {:.2} s: {:.0}% of one core)",
        Bytes(tx),
        Rate(bits_per_second(tx, seconds)),
        Bytes(rx),
        Rate(bits_per_second(rx, seconds)),
        tree_cpu.user_seconds + tree_cpu.system_seconds,
        tree_cpu.user_seconds,
        tree_cpu.system_seconds,
        (tree_cpu.user_seconds + tree_cpu.system_seconds) * 100.0 / seconds.max(1e-9)
    ) + &peer_summary(&peer, &traffic, seconds);
    let mut save_args = args.save.clone();
    if code != 0 && !args.keep_failed && !save_args.no_save {
        save_args.no_save = true;
        log::warn!(
            "the run was not saved: '{command_line}' failed (exit status {code}), so its figures measure a failure; \
             --keep-failed saves it anyway"
        );
    }
    save_args.tags.push(Tag {
        key: "command".into(),
        value: command_line.clone(),
    });
    let mut saver = Saver::start(&save_args, save::command_line(), Some(1));
    saver.trial(&run);
    let text = write_result(&run, args.json, &summary, &words)?;
    super::measure::save(saver, &run, text.as_deref(), !args.json)?;
    match code {
        0 => Ok(()),
        c => Err(CommandExit(c).into()),
    }
}

/// The interface to watch: `--iface`, else the one holding the address
/// toward the peer, else the one of the default route.
fn watched_interface(args: &WatchArgs, peer_local_ip: Option<IpAddr>) -> Result<String, SpecError> {
    match (&args.iface, peer_local_ip) {
        (Some(i), _) => Ok(i.clone()),
        (None, Some(local_ip)) => nic::interface_with_address(local_ip)
            .ok_or_else(|| SpecError::Invalid(format!("no interface holds {local_ip}: give --iface IF"))),
        (None, None) => default_interface()
            .ok_or_else(|| SpecError::Invalid("no default route to find the interface by: give --iface IF".into())),
    }
}

/// The `--peer` once the command has run: its address as shown, its facts
/// and what it measured (none when it sent nothing).
struct PeerEnd {
    shown: Option<String>,
    facts: HostFacts,
    report: Option<SideReport>,
}

/// Has the peer stop sampling and send its side; a peer that sends
/// nothing is a warning, since the command has run.
fn stop_peer(peer: Option<(crate::session::PeerWatch, String)>) -> PeerEnd {
    match peer {
        Some((watch, shown)) => {
            let facts = watch.agent.clone();
            match watch.stop() {
                Ok(report) => PeerEnd {
                    shown: Some(shown),
                    facts,
                    report: Some(report),
                },
                Err(e) => {
                    // The command has run: keep what this host measured.
                    let e = crate::outside_text::terminal(&e.to_string()).into_owned();
                    super::stdout::err_line(format_args!(
                        "nicbench: warning: the peer {shown} sent no measurement: {e}"
                    ));
                    PeerEnd {
                        shown: Some(shown),
                        facts,
                        report: None,
                    }
                }
            }
        }
        None => PeerEnd {
            shown: None,
            facts: HostFacts::default(),
            report: None,
        },
    }
}

/// The bytes of both directions at both ends: this host's interface, and
/// the peer's where it counted them (else this host's counts stand for the
/// far ends too).
struct Traffic {
    tx: u64,
    rx: u64,
    peer_tx: u64,
    peer_rx: u64,
    /// The far ends are the peer's own counts: this host's samples are
    /// intervals of its own ends only.
    local_ends_only: bool,
}

impl Traffic {
    fn of(tx: u64, rx: u64, peer_report: Option<&SideReport>) -> Traffic {
        // What the peer's interface counted, where it could: the far ends of
        // the two directions.
        let peer_nic = peer_nic(peer_report);
        let (peer_rx, peer_tx) = match peer_nic {
            Some(n) => (n.rx_bytes, n.tx_bytes),
            None => (tx, rx),
        };
        Traffic {
            tx,
            rx,
            peer_tx,
            peer_rx,
            local_ends_only: peer_nic.is_some(),
        }
    }
}

/// The peer's interface counters toward this host, when it found one.
fn peer_nic(peer_report: Option<&SideReport>) -> Option<&NicCounters> {
    peer_report
        .and_then(|r| r.counters.as_ref())
        .and_then(|c| c.nic.as_ref())
}

/// The one trial of a watch: the interface's two directions as streams,
/// both hosts' CPU and counters.
fn watch_trial(
    traffic: &Traffic,
    seconds: f64,
    samples: &[(f64, u64, u64)],
    cpu: CpuReport,
    counters: SideCounters,
    peer_report: Option<&SideReport>,
) -> TrialResult {
    let Traffic {
        tx,
        rx,
        peer_tx,
        peer_rx,
        local_ends_only,
    } = *traffic;
    TrialResult {
        trial: 1,
        streams: vec![
            stream(
                1,
                Flow::ClientToAgent,
                (tx, peer_rx),
                seconds,
                samples,
                0,
                local_ends_only,
            ),
            stream(
                2,
                Flow::AgentToClient,
                (peer_tx, rx),
                seconds,
                samples,
                1,
                local_ends_only,
            ),
        ],
        sum: Sum {
            sender: total(tx + peer_tx, seconds),
            receiver: total(peer_rx + rx, seconds),
            client_to_agent: Some(flow_total((tx, peer_rx), seconds)),
            agent_to_client: Some(flow_total((peer_tx, rx), seconds)),
            extras: Default::default(),
        },
        cpu: BothCpu {
            client: cpu,
            agent: peer_report.map(|r| r.cpu.clone()).unwrap_or_default(),
        },
        counters: BothCounters {
            client: Some(counters),
            agent: peer_report.and_then(|r| r.counters.clone()),
        },
        ..TrialResult::default()
    }
}

/// The spec a watch is saved with: workload `watch`, bidirectional over
/// its duration, the command and its outcome as parameters.
fn watch_spec(
    args: &WatchArgs,
    iface: &str,
    code: i32,
    tree_cpu: &ProcessCpu,
    seconds: f64,
    peer: &PeerEnd,
) -> TestSpec {
    let mut spec = TestSpec {
        workload: "watch".into(),
        duration_seconds: seconds.max(1e-3),
        bytes: None,
        omit_seconds: 0.0,
        streams: 1,
        direction: Direction::Bidir,
        message_bytes: 1,
        interval_seconds: 1.0,
        client: SideOptions::default(),
        agent: SideOptions::default(),
        params: serde_json::Value::Null,
        links: Vec::new(),
    };
    spec.params = serde_json::json!({
        "command": args.command,
        "interface": iface,
        "exit_code": code,
        "process_tree_cpu_seconds": tree_cpu.user_seconds + tree_cpu.system_seconds,
    });
    if let Some(shown) = &peer.shown {
        spec.params["peer"] = serde_json::Value::String(shown.clone());
        spec.params["peer_sampled"] = serde_json::Value::Bool(peer.report.is_some());
    }
    spec
}

/// The summary line's part about the peer (empty without `--peer`).
fn peer_summary(peer: &PeerEnd, traffic: &Traffic, seconds: f64) -> String {
    let (peer_rx, peer_tx) = (traffic.peer_rx, traffic.peer_tx);
    match (&peer.shown, peer_nic(peer.report.as_ref()), &peer.report) {
        (Some(shown), Some(_), Some(r)) => format!(
            "; peer {shown}: {} received {} ({}), sent {} ({}), CPU {:.1}% of {} cores",
            r.counters
                .as_ref()
                .and_then(|c| c.interface.as_deref())
                .unwrap_or("its interface"),
            Bytes(peer_rx),
            Rate(bits_per_second(peer_rx, seconds)),
            Bytes(peer_tx),
            Rate(bits_per_second(peer_tx, seconds)),
            r.cpu.utilization_percent,
            r.cpu.logical_cpus
        ),
        (Some(shown), None, Some(r)) => format!(
            "; peer {shown}: CPU {:.1}% of {} cores (no interface toward this host found there)",
            r.cpu.utilization_percent, r.cpu.logical_cpus
        ),
        (Some(shown), _, None) => format!("; peer {shown}: not sampled (see the warning above)"),
        (None, _, _) => String::new(),
    }
}

/// Writes the run to stdout, as JSON or as the summary line and the text
/// report; returns the text written (none for JSON) for the store.
fn write_result(run: &RunResult, json: bool, summary: &str, words: &words::Words) -> anyhow::Result<Option<String>> {
    let mut out = super::stdout::out();
    if json {
        Json.render(run, &mut out).context("writing the result")?;
        Ok(None)
    } else {
        let mut buffer = summary.to_string().into_bytes();
        buffer.push(b'\n');
        let mut report = Vec::new();
        let _ = Text.render(run, &mut report);
        buffer.extend(words.report(&String::from_utf8_lossy(&report)).into_bytes());
        out.write_all(&buffer).context("writing the result")?;
        Ok(Some(String::from_utf8_lossy(&buffer).into_owned()))
    }
}

/// Waits for the command while sampling the interface every second and
/// forwarding a Ctrl-C; returns its status, its process tree's CPU time and
/// the samples (tx, rx bytes since the start, at seconds since the start).
fn wait_sampling(
    pid: libc::pid_t,
    iface: &str,
    start: Instant,
    start_bytes: (u64, u64),
) -> (i32, ProcessCpu, Vec<(f64, u64, u64)>) {
    let mut samples = Vec::new();
    let mut next = start + Duration::from_secs(1);
    let mut forwarded = false;
    loop {
        let mut status = 0;
        // SAFETY: rusage is plain data filled by the kernel; pid is our child.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        let rc = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut usage) };
        if rc == pid || rc < 0 {
            let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
            let cpu = ProcessCpu {
                user_seconds: tv(usage.ru_utime),
                system_seconds: tv(usage.ru_stime),
            };
            return (status, cpu, samples);
        }
        if !forwarded && signals::client_stop_reason().is_some() {
            // SAFETY: kill(2) on our own child.
            unsafe { libc::kill(pid, libc::SIGINT) };
            forwarded = true;
        }
        if Instant::now() >= next {
            if let Some((tx, rx)) = interface_bytes(iface) {
                samples.push((
                    start.elapsed().as_secs_f64(),
                    tx.saturating_sub(start_bytes.0),
                    rx.saturating_sub(start_bytes.1),
                ));
            }
            next += Duration::from_secs(1);
        }
        // No notification of a child's exit short of blocking in wait:
        // poll at 20 ms, which bounds the time error of the result.
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The shell's view of a status: the code, or 128 + the signal.
fn exit_code(status: i32) -> i32 {
    if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else if libc::WIFSIGNALED(status) {
        128 + libc::WTERMSIG(status)
    } else {
        1
    }
}

fn total(bytes: u64, seconds: f64) -> Total {
    Total {
        bytes,
        seconds,
        bits_per_second: bits_per_second(bytes, seconds),
    }
}

/// One direction: bytes its sender and its receiver counted.
fn flow_total((sent, received): (u64, u64), seconds: f64) -> FlowTotal {
    FlowTotal {
        sender: total(sent, seconds),
        receiver: total(received, seconds),
        extras: Default::default(),
    }
}

/// One direction of the interface as a stream: the bytes its sending and
/// its receiving interface counted, this host's per-second samples as
/// intervals (on this host's end only when the other end is the peer's).
fn stream(
    id: u32,
    flow: Flow,
    (sent, received): (u64, u64),
    seconds: f64,
    samples: &[(f64, u64, u64)],
    which: usize,
    local_ends_only: bool,
) -> StreamResult {
    let mut intervals = Vec::new();
    let (mut last_at, mut last_bytes) = (0.0, 0u64);
    for &(at, tx, rx) in samples {
        let b = if which == 0 { tx } else { rx };
        intervals.push(Interval {
            start_seconds: last_at,
            end_seconds: at,
            bytes: b - last_bytes,
            bits_per_second: bits_per_second(b - last_bytes, at - last_at),
            ..Interval::default()
        });
        (last_at, last_bytes) = (at, b);
    }
    // Stream 1 is sent here (its sender end is local), stream 2 received.
    let local = if which == 0 { Role::Sender } else { Role::Receiver };
    let end = |role| {
        let bytes = if role == Role::Sender { sent } else { received };
        StreamEnd {
            stream_id: id,
            role,
            bytes,
            seconds,
            bits_per_second: bits_per_second(bytes, seconds),
            intervals: if role == local || !local_ends_only {
                intervals.clone()
            } else {
                Vec::new()
            },
            ..StreamEnd::default()
        }
    };
    StreamResult {
        stream_id: id,
        flow,
        sender: end(Role::Sender),
        receiver: end(Role::Receiver),
        extras: Default::default(),
    }
}
