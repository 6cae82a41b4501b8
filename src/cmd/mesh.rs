//! `nicbench mesh`: every ordered pair of many agents, each test run by the
//! sending agent itself toward the receiving one (a peer test; this host
//! carries no test traffic), in rounds of disjoint pairs; the N x N matrix,
//! its outliers, every run in the store; optionally again and again.

use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Context;
use indicatif::{ProgressBar, ProgressStyle};

use super::{signals, UsageError};
use crate::cli::mesh::{MeshArgs, MeshFormat};
use crate::mesh::matrix::{self, Cell, MeshHost, MeshResult};
use crate::mesh::schedule;
use crate::metrics::{FailureReason, MeshMetrics, MetricsServer, Routes};
use crate::model::{RunResult, TestSpec};
use crate::report::text::Text;
use crate::report::Reporter;
use crate::session::{self, Target};
use crate::store::{self, RunMeta, RunWriter, Store, Tag};

/// One agent of the mesh as the user named it.
#[derive(Debug, Clone, PartialEq)]
pub struct Member {
    pub name: String,
    pub host: String,
    pub port: u16,
}

impl Member {
    /// HOST:PORT, as the other agents reach it.
    pub fn address(&self) -> String {
        crate::address::display(&self.host, self.port)
    }

    fn target(&self, args: &MeshArgs) -> Target {
        Target {
            host: self.host.clone(),
            port: self.port,
            family: None,
            bind: None,
            connect_timeout: Duration::from_secs(5),
            wait: args.wait,
            psk_file: args.psk_file.clone(),
        }
    }
}

/// `NAME=HOST[:PORT]`, `HOST:PORT` or `HOST`.
pub fn parse_member(input: &str, default_port: u16) -> Result<Member, String> {
    let (name, rest) = match input.split_once('=') {
        Some((name, rest)) => (Some(name), rest),
        None => (None, input),
    };
    let (host, port) = crate::address::split_host_port(rest).map_err(|e| e.to_string())?;
    if host.is_empty() {
        return Err(format!("'{input}': no host; write HOST, HOST:PORT or NAME=HOST[:PORT]"));
    }
    let name = name.unwrap_or(&host).to_string();
    if name.is_empty() || name.len() > 64 || name.chars().any(|c| c.is_control() || c.is_whitespace()) {
        return Err(format!(
            "'{input}': the name '{name}' must be 1 to 64 characters without spaces"
        ));
    }
    Ok(Member {
        name,
        host,
        port: port.unwrap_or(default_port),
    })
}

/// The members from the command line (`HOST`, `NAME=HOST[:PORT]`,
/// `dns:NAME[:PORT]`) and `--hosts-file`, checked: at least two, no name or
/// address twice.
pub fn gather(args: &MeshArgs) -> Result<Vec<Member>, String> {
    let mut all: Vec<(String, Member)> = Vec::new();
    let from_list = |h: crate::mesh::hosts::MeshHost| Member {
        name: h.name,
        host: h.address,
        port: h.port.unwrap_or(args.port),
    };
    for input in &args.hosts {
        match crate::mesh::hosts::parse_dns_spec(input).map_err(|e| e.to_string())? {
            Some((name, port)) => {
                for h in crate::mesh::hosts::expand_dns(&name, port).map_err(|e| e.to_string())? {
                    all.push((input.clone(), from_list(h)));
                }
            }
            None => all.push((input.clone(), parse_member(input, args.port)?)),
        }
    }
    if let Some(path) = &args.hosts_file {
        let hosts =
            crate::mesh::hosts::parse_hosts_file(path, args.hosts_group.as_deref()).map_err(|e| e.to_string())?;
        for h in hosts {
            all.push((format!("{} in {}", h.name, path.display()), from_list(h)));
        }
    }
    checked(all)
}

/// No name or address twice, and at least two members.
fn checked(all: Vec<(String, Member)>) -> Result<Vec<Member>, String> {
    let mut out: Vec<Member> = Vec::new();
    for (input, m) in all {
        if let Some(other) = out.iter().find(|o| o.name == m.name || o.address() == m.address()) {
            return Err(format!(
                "'{input}' and '{}={}' name the same host or the same name; give each agent once",
                other.name,
                other.address()
            ));
        }
        out.push(m);
    }
    if out.len() < 2 {
        return Err(format!(
            "a mesh needs at least two agents; {} given (HOST... or --hosts-file)",
            out.len()
        ));
    }
    Ok(out)
}

/// The members of plain `HOST` arguments (tests).
pub fn members(inputs: &[String], default_port: u16) -> Result<Vec<Member>, String> {
    let mut all = Vec::new();
    for input in inputs {
        all.push((input.clone(), parse_member(input, default_port)?));
    }
    checked(all)
}

/// The test every pair runs, parsed as the workload's own command would.
pub fn spec_of(args: &MeshArgs) -> anyhow::Result<TestSpec> {
    let workload = args.workload.as_str();
    let mut argv: Vec<String> = vec![
        "nicbench".into(),
        workload.into(),
        "mesh-peer".into(),
        "-t".into(),
        format!("{}ms", args.duration.as_millis()),
        "-O".into(),
        format!("{}ms", args.omit.as_millis()),
        "-P".into(),
        args.streams.to_string(),
    ];
    argv.extend(args.options.iter().cloned());
    let (_, spec) = super::measurement(&argv).map_err(|e| match e.downcast::<UsageError>() {
        Ok(usage) => UsageError(format!("workload options after --: {}", usage.0)).into(),
        Err(e) => e,
    })?;
    crate::workload::args::check(&spec).map_err(|e| UsageError(e.to_string()))?;
    if !spec.client.cpus.is_empty() || !spec.links.is_empty() {
        return Err(
            UsageError("a mesh test may not pin CPUs (-A) or use --links: the agents refuse both".into()).into(),
        );
    }
    Ok(spec)
}

pub fn run(args: MeshArgs) -> anyhow::Result<()> {
    if args.psk_file.is_none() {
        return Err(UsageError(
            "a mesh needs the agents' pre-shared key: --psk-file FILE (or NICBENCH_PSK_FILE); each agent runs \
             `nicbench serve --allow-peer-tests --psk-file FILE` with the same key"
                .into(),
        )
        .into());
    }
    // Tests that share a host measure each other's throughput; a figure
    // the line rate does not bound (round trips) stands it.
    let throughput = crate::workload::find(&args.workload).map_or(true, |w| w.results().line_rate_applies());
    if args.overlap && throughput {
        let without: Vec<&str> = crate::workload::peer_test_names()
            .filter(|n| crate::workload::results_of(n).line_rate_applies())
            .collect();
        return Err(UsageError(format!(
            "--overlap is for {} only: throughput tests that share a host measure each other",
            crate::workload::peer_test_names()
                .filter(|n| !without.contains(n))
                .collect::<Vec<_>>()
                .join(", ")
        ))
        .into());
    }
    let spec = spec_of(&args)?;
    let members = gather(&args).map_err(UsageError)?;
    signals::install();
    let metrics = std::sync::Arc::new(MeshMetrics::new());
    let _server = match args.metrics_listen {
        Some(listen) => {
            let m = metrics.clone();
            let server = MetricsServer::start(listen, Routes::metrics(move || m.render()))
                .with_context(|| format!("--metrics-listen: cannot listen on {listen}"))?;
            log::info!("mesh metrics on http://{}/metrics", server.local_addr());
            Some(server)
        }
        None => None,
    };
    let mut done = 0u32;
    let started = Instant::now();
    let mut left_out = Vec::new();
    loop {
        if let Some(every) = args.every {
            // The k-th run starts at k x every plus a random tenth of it.
            let offset = every.mul_f64(random_fraction() * 0.1);
            let at = started + every * done + offset;
            if !sleep_until(at) {
                break;
            }
        }
        let result = run_once(&args, &spec, &members, &metrics)?;
        print(&args, &result)?;
        if let Some(path) = &args.chart {
            write_chart(&result, path)?;
        }
        if let Some(keep) = args.keep {
            remove_older(&args, keep, result.started_at_unix_seconds)?;
        }
        done += 1;
        let measured = result.cells.iter().filter(|c| c.value.is_some()).count();
        left_out = result
            .hosts
            .iter()
            .filter(|h| h.status != "ok")
            .map(|h| format!("{} ({})", h.name, h.status))
            .collect();
        if args.every.is_none() || signals::interrupted() || args.runs.is_some_and(|n| done >= n) {
            if measured == 0 {
                anyhow::bail!("no pair of the mesh could be measured (see above)");
            }
            break;
        }
    }
    match left_out.is_empty() {
        true => Ok(()),
        false => Err(HostsLeftOut(left_out).into()),
    }
}

/// A mesh that measured the others but had to leave hosts out (down, or
/// refusing): its matrix is printed and saved, and it exits 3 (an agent
/// unreachable), so that a script notices the missing rows.
#[derive(Debug, thiserror::Error)]
#[error(
    "the mesh left out {} host(s) it could not test: {} (their rows and columns are empty; the other pairs are printed and saved)",
    .0.len(),
    .0.join(", ")
)]
pub struct HostsLeftOut(pub Vec<String>);

/// A uniform number in [0, 1) from the OS's random source.
fn random_fraction() -> f64 {
    let mut bytes = [0u8; 8];
    let _ = getrandom::getrandom(&mut bytes);
    (u64::from_le_bytes(bytes) >> 11) as f64 / (1u64 << 53) as f64
}

/// Sleeps until `at`, waking for Ctrl-C; false when interrupted.
fn sleep_until(at: Instant) -> bool {
    loop {
        if signals::interrupted() {
            return false;
        }
        let left = at.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return true;
        }
        std::thread::sleep(left.min(Duration::from_millis(200)));
    }
}

/// A fresh id for one run of the mesh: its start time and a random suffix.
fn mesh_run_id() -> String {
    let now = store::now_unix_seconds();
    let mut bytes = [0u8; 3];
    let _ = getrandom::getrandom(&mut bytes);
    format!(
        "{}-{}",
        now as u64,
        bytes.iter().map(|b| format!("{b:02x}")).collect::<String>()
    )
}

/// What one test of a round gave.
struct Outcome {
    src: usize,
    dst: usize,
    started_at: f64,
    seconds: f64,
    result: Result<RunResult, session::SessionError>,
}

/// Runs the whole mesh once: checks every agent, then the rounds.
pub fn run_once(
    args: &MeshArgs,
    spec: &TestSpec,
    members: &[Member],
    metrics: &MeshMetrics,
) -> anyhow::Result<MeshResult> {
    let started_at = store::now_unix_seconds();
    let clock = Instant::now();
    let mesh_run = mesh_run_id();
    let hosts = check_hosts(args, members);
    let live: Vec<usize> = (0..members.len()).filter(|&i| hosts[i].status == "ok").collect();
    let rounds = schedule::rounds(live.len(), args.overlap);
    let total: usize = rounds.iter().map(Vec::len).sum();
    let bar = progress_bar(total);
    let mut store = open_store(args);
    let recorder = Recorder {
        args,
        spec,
        members,
        metrics,
        mesh_run: &mesh_run,
        bar: &bar,
    };
    let mut cells = Vec::new();
    for (k, round) in rounds.iter().enumerate() {
        if signals::interrupted() {
            log::warn!("interrupted: the mesh stops after the rounds that finished");
            break;
        }
        let tests: Vec<(usize, usize)> = round.iter().map(|&(a, b)| (live[a], live[b])).collect();
        bar.set_message(format!(
            "round {}/{}: {}",
            k + 1,
            rounds.len(),
            tests
                .iter()
                .map(|&(a, b)| format!("{}->{}", members[a].name, members[b].name))
                .collect::<Vec<_>>()
                .join(", ")
        ));
        for o in run_round(args, spec, members, &tests) {
            bar.inc(1);
            cells.push(recorder.cell(o, k, &mut store));
        }
    }
    bar.finish_and_clear();
    cells.sort_by_key(|c| (c.src, c.dst));
    let (metric, unit, _) = matrix::metric_of(&spec.workload);
    let mut result = MeshResult {
        schema: matrix::SCHEMA.into(),
        mesh: args.name.clone(),
        mesh_run,
        workload: spec.workload.clone(),
        metric: metric.into(),
        unit: unit.into(),
        started_at_unix_seconds: started_at,
        wall_seconds: clock.elapsed().as_secs_f64(),
        rounds: rounds.len(),
        test_seconds: spec.expected_seconds(),
        hosts,
        cells,
        outliers: Vec::new(),
    };
    result.find_outliers();
    Ok(result)
}

/// Checks every agent at once: a host that is down or refuses is left out
/// of the schedule, so its partners are not kept waiting round after round.
fn check_hosts(args: &MeshArgs, members: &[Member]) -> Vec<MeshHost> {
    let mut hosts: Vec<MeshHost> = members
        .iter()
        .map(|m| MeshHost {
            name: m.name.clone(),
            address: m.address(),
            status: "ok".into(),
            reason: None,
        })
        .collect();
    let checks: Vec<Result<(), String>> = std::thread::scope(|s| {
        let handles: Vec<_> = members
            .iter()
            .map(|m| {
                s.spawn(move || {
                    session::probe_agent(&m.target(args), Some(crate::protocol::FEATURE_PEER_TESTS))
                        .map(|_| ())
                        .map_err(|e| e.to_string())
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err("the check panicked".into())))
            .collect()
    });
    for (host, check) in hosts.iter_mut().zip(checks) {
        if let Err(reason) = check {
            log::warn!("{} ({}) is left out of the mesh: {reason}", host.name, host.address);
            host.status = if reason.contains("refused") && !reason.contains("connection refused") {
                "refused".into()
            } else {
                "down".into()
            };
            host.reason = Some(reason);
        }
    }
    hosts
}

fn progress_bar(total: usize) -> ProgressBar {
    let bar = ProgressBar::new(total as u64);
    bar.set_style(
        ProgressStyle::with_template("{spinner} mesh {pos}/{len} tests [{elapsed_precise}, {eta} left] {msg}")
            .expect("a valid template"),
    );
    bar
}

/// The store the runs are saved to; none with `--no-save`, or (with a
/// warning) when it cannot be opened.
fn open_store(args: &MeshArgs) -> Option<Store> {
    if args.save.no_save {
        return None;
    }
    let path = super::save::database_path(&args.save.db);
    match Store::open(&path) {
        Ok(s) => Some(s),
        Err(e) => {
            log::warn!("the mesh's runs will not be saved: {e}");
            None
        }
    }
}

/// One round: its tests (source, destination) all at once, each timed.
fn run_round(args: &MeshArgs, spec: &TestSpec, members: &[Member], tests: &[(usize, usize)]) -> Vec<Outcome> {
    std::thread::scope(|s| {
        let handles: Vec<_> = tests
            .iter()
            .map(|&(src, dst)| {
                let (from, toward) = (members[src].target(args), members[dst].address());
                s.spawn(move || {
                    let (started_at, clock) = (store::now_unix_seconds(), Instant::now());
                    let result = session::peer_test(&from, &toward, spec);
                    Outcome {
                        src,
                        dst,
                        started_at,
                        seconds: clock.elapsed().as_secs_f64(),
                        result,
                    }
                })
            })
            .collect();
        handles.into_iter().filter_map(|h| h.join().ok()).collect()
    })
}

/// Where a test's outcome goes: the metrics, the store, the log.
struct Recorder<'a> {
    args: &'a MeshArgs,
    spec: &'a TestSpec,
    members: &'a [Member],
    metrics: &'a MeshMetrics,
    mesh_run: &'a str,
    bar: &'a ProgressBar,
}

impl Recorder<'_> {
    /// The matrix cell of a test of round `round`, its run recorded and
    /// saved (to `store`, given back after each save) or its failure logged.
    fn cell(&self, o: Outcome, round: usize, store: &mut Option<Store>) -> Cell {
        let mut cell = Cell {
            src: o.src,
            dst: o.dst,
            value: None,
            run_id: None,
            verdict: None,
            verdict_kind: None,
            error: None,
            started_at_unix_seconds: o.started_at,
            seconds: o.seconds,
            round,
        };
        let (src, dst) = (&self.members[o.src].name, &self.members[o.dst].name);
        match o.result {
            Ok(run) => {
                self.metrics.record_run(src, dst, &run);
                cell.value = matrix::value_of(&run);
                if cell.value.is_none() {
                    cell.error = Some("the run has no figure (nothing received)".into());
                }
                cell.verdict = run.result.verdict.as_ref().map(|v| v.summary.clone());
                cell.verdict_kind = run.result.verdict.as_ref().map(|v| v.kind.clone());
                if !self.args.save.no_save {
                    let (db, id) = save(
                        store.take(),
                        self.args,
                        self.spec,
                        &run,
                        self.mesh_run,
                        &self.members[o.src],
                        &self.members[o.dst],
                    );
                    *store = db;
                    cell.run_id = id;
                }
            }
            Err(e) => {
                self.metrics
                    .record_failure(src, dst, &self.spec.workload, failure_reason(&e));
                self.bar.suspend(|| log::warn!("{src}->{dst}: {e}"));
                cell.error = Some(e.to_string());
            }
        }
        cell
    }
}

/// The bounded reason label of a failed peer test.
fn failure_reason(e: &session::SessionError) -> FailureReason {
    use session::SessionError as E;
    match e {
        E::Resolve { .. } | E::Refused { .. } | E::ConnectTimeout { .. } | E::Connect { .. } => {
            FailureReason::Unreachable
        }
        E::Busy { .. } => FailureReason::Busy,
        E::AgentRefused(_) => FailureReason::Refused,
        E::Key(_) | E::AuthRequired { .. } | E::AuthFailed(_) => FailureReason::Auth,
        E::Protocol(crate::protocol::ProtocolError::Timeout { .. }) => FailureReason::Timeout,
        E::NotAnAgent { .. } | E::Protocol(_) | E::BadReport(_) => FailureReason::Protocol,
        _ => FailureReason::Other,
    }
}

/// The command line that reproduces one test by hand from the sending host.
fn command_line(args: &MeshArgs, spec: &TestSpec, dst: &Member) -> String {
    let mut words = vec![
        "nicbench".to_string(),
        spec.workload.clone(),
        dst.address(),
        "-t".into(),
        format!("{}s", args.duration.as_secs_f64()),
    ];
    if !args.omit.is_zero() {
        words.extend(["-O".into(), format!("{}s", args.omit.as_secs_f64())]);
    }
    if args.streams > 1 {
        words.extend(["-P".into(), args.streams.to_string()]);
    }
    words.extend(args.options.iter().cloned());
    if let Some(psk) = &args.psk_file {
        words.extend(["--psk-file".into(), psk.display().to_string()]);
    }
    crate::shell::join(&words)
}

/// Saves one run with the mesh's tags; a run the database (None: it could
/// not be opened) does not take is kept in its spool, said, and the mesh
/// goes on.
fn save(
    db: Option<Store>,
    args: &MeshArgs,
    spec: &TestSpec,
    run: &RunResult,
    mesh_run: &str,
    src: &Member,
    dst: &Member,
) -> (Option<Store>, Option<i64>) {
    let tag = |k: &str, v: &str| Tag {
        key: k.into(),
        value: v.into(),
    };
    let mut tags = args.save.tags.clone();
    tags.extend([
        tag("mesh", &args.name),
        tag("mesh_run", mesh_run),
        tag("src", &src.name),
        tag("dst", &dst.name),
    ]);
    let mut text = Vec::new();
    let _ = Text.render(run, &mut text);
    let text = String::from_utf8_lossy(&text);
    let meta = RunMeta {
        command_line: command_line(args, spec, dst),
        tags,
        trials_planned: Some(1),
        source: None,
    };
    let path = super::save::database_path(&args.save.db);
    let (db, partial, why) = match db {
        Some(db) => {
            let mut writer = RunWriter::new(db, meta.clone());
            let saved = writer.trial(run).and_then(|_| writer.finish(run, Some(&text)));
            let partial = writer.id();
            match saved {
                Ok(id) => return (Some(writer.into_store()), Some(id)),
                Err(e) => (Some(writer.into_store()), partial, e.to_string()),
            }
        }
        None => (None, None, "the database could not be opened".to_string()),
    };
    let kept = serde_json::to_value(run)
        .map_err(std::io::Error::other)
        .and_then(|doc| store::spool::keep(&path, &meta, partial, &doc, Some(&text)));
    match kept {
        Ok(file) => log::warn!(
            "{}->{}: not saved in {} ({why}); kept in the spool as {}, which the next command that opens it saves",
            src.name,
            dst.name,
            path.display(),
            file.display()
        ),
        Err(e) => log::warn!(
            "{}->{}: not saved in {} ({why}), nor in the spool ({e})",
            src.name,
            dst.name,
            path.display()
        ),
    }
    (db, None)
}

fn print(args: &MeshArgs, result: &MeshResult) -> anyhow::Result<()> {
    let text = match args.format {
        MeshFormat::Text => {
            let mut t = crate::report::mesh::text(result);
            let per_round = result.wall_seconds / result.rounds.max(1) as f64;
            t += &format!(
                "time: {:.1} s for {} rounds of {:.1} s tests: {:.2} s per round (each test's set-up and \
                 report, and the slowest pair of the round)\n",
                result.wall_seconds, result.rounds, result.test_seconds, per_round
            );
            t
        }
        MeshFormat::Markdown => crate::report::mesh::markdown(result),
        MeshFormat::Csv => crate::report::mesh::csv(result),
        MeshFormat::Json => crate::outside_text::json_pretty(result)? + "\n",
    };
    let mut out = std::io::stdout().lock();
    super::stdout::closed_pipe_is_the_end(
        out.write_all(text.as_bytes()).and_then(|_| out.flush()),
        "writing the matrix",
    )
}

fn write_chart(result: &MeshResult, path: &Path) -> anyhow::Result<()> {
    let chart = crate::report::chart::Chart::Heatmap(crate::report::chart::Heatmap::of(result));
    let size = (900, 700);
    let bytes = match path.extension().and_then(|e| e.to_str()) {
        Some("png") => crate::report::chart::render_png(&chart, size)?,
        Some("svg") => crate::report::chart::render_svg(&chart, size)?.into_bytes(),
        _ => return Err(UsageError(format!("--chart {}: the name must end in .svg or .png", path.display())).into()),
    };
    std::fs::write(path, bytes).with_context(|| format!("writing {}", path.display()))?;
    log::info!("heat map written to {}", path.display());
    Ok(())
}

/// `--keep`: removes this mesh's runs that started more than `keep` before
/// the mesh run that just ended (never that run's own).
fn remove_older(args: &MeshArgs, keep: Duration, this_run_started: f64) -> anyhow::Result<()> {
    if args.save.no_save {
        return Ok(());
    }
    let mut db = Store::open(&super::save::database_path(&args.save.db))?;
    let filter = store::query::Filter {
        tags: vec![Tag {
            key: "mesh".into(),
            value: args.name.clone(),
        }],
        ..Default::default()
    };
    let cutoff = this_run_started - keep.as_secs_f64();
    let old: Vec<i64> = db
        .runs(&filter)?
        .into_iter()
        .filter(|r| r.started_at_unix_seconds < cutoff)
        .map(|r| r.id)
        .collect();
    if !old.is_empty() {
        let removed = db.remove(&old)?;
        log::info!(
            "--keep: removed {removed} run(s) of mesh '{}' older than {:.0} s",
            args.name,
            keep.as_secs_f64()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn members_take_names_ports_and_refuse_twins() {
        let m = members(
            &["a=10.0.0.1".into(), "10.0.0.2:6000".into(), "[::1]:7000".into()],
            5310,
        )
        .unwrap();
        assert_eq!(
            m[0],
            Member {
                name: "a".into(),
                host: "10.0.0.1".into(),
                port: 5310
            }
        );
        assert_eq!(m[1].name, "10.0.0.2");
        assert_eq!(m[1].port, 6000);
        assert_eq!(m[2].address(), "[::1]:7000");
        let twice = members(&["a=h1".into(), "a=h2".into()], 5310).unwrap_err();
        assert!(twice.contains("same"), "{twice}");
        let same_addr = members(&["x=h1".into(), "y=h1:5310".into()], 5310).unwrap_err();
        assert!(same_addr.contains("same host"), "{same_addr}");
        assert!(members(&["h1".into()], 5310).unwrap_err().contains("at least two"));
        assert!(parse_member("h:0", 5310).is_err());
        assert!(parse_member("=h", 5310).is_err());
        assert!(parse_member("bad name=h", 5310).is_err());
    }
}
