//! `nicbench run PLAN.toml`: a roundup plan from start (or from where it
//! stopped) to its tables.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::mpsc::RecvTimeoutError;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::{FromArgMatches, Parser};
use indicatif::{MultiProgress, ProgressBar, ProgressStyle};
use serde::Serialize;

use super::measure::{AsCase, Audience};
use super::measuring::{self, Ended};
use super::signals;
use crate::cli::run::RunArgs;
use crate::cli::{Cli, Measurement};
use crate::model::HostSetting;
use crate::plan::exec::{self, CaseRecord, Monitors, Outcome};
use crate::plan::file::{Agent, When};
use crate::plan::host::{self, HostChanges};
use crate::plan::identity::Identity;
use crate::plan::runner::{self, command_text, human, Planned, Tally};
use crate::plan::{self, Case, Plan};
use crate::session::Target;

/// A plan that ended before every case was measured: cut short by a
/// signal (resume by running it again), or with failed cases.
#[derive(Debug, thiserror::Error)]
pub enum PlanStopped {
    #[error(
        "the plan was stopped after {done} of {total} cases; the finished cases are saved: \
         run `{again}` again to resume (finished cases are skipped)"
    )]
    Interrupted {
        done: usize,
        total: usize,
        /// The command that resumes it: `nicbench run PLAN` with the
        /// options that choose the database and the plan run.
        again: String,
    },
    #[error("{failed} of {total} cases failed (listed above); the others are saved")]
    Failed { failed: usize, total: usize },
}

impl PlanStopped {
    pub fn exit_code(&self) -> i32 {
        match self {
            PlanStopped::Interrupted { .. } => super::measure::CutShort::EXIT_CODE,
            PlanStopped::Failed { .. } => 5,
        }
    }
}

/// Restore files of earlier plan runs: applied with `--restore`, else named.
fn leftover_changes(db: &Path, apply: bool) -> anyhow::Result<()> {
    let found = host::leftovers(&plan::plans_dir(db));
    if !apply {
        for (file, originals) in &found {
            log::warn!(
                "an earlier plan run changed host settings and did not put them back ({}; {}): \
                 run `nicbench run PLAN --restore` to restore them",
                originals.describe(),
                file.display()
            );
        }
        return Ok(());
    }
    if found.is_empty() {
        super::stdout::line(format_args!(
            "no host settings to restore (no restore file under {})",
            plan::plans_dir(db).display()
        ));
        return Ok(());
    }
    let mut failed = 0;
    for (file, originals) in found {
        let failures = host::apply(&originals);
        if failures.is_empty() {
            super::stdout::line(format_args!("restored {}", originals.describe()));
            let _ = std::fs::remove_file(&file);
        } else {
            failed += failures.len();
            for f in failures {
                super::stdout::line(f);
            }
        }
    }
    if failed > 0 {
        anyhow::bail!("{failed} setting(s) could not be restored (above); the restore files are kept");
    }
    Ok(())
}

pub fn run(args: RunArgs) -> anyhow::Result<()> {
    if args.restore {
        let db = absolute(&super::save::database_path(&args.db));
        return leftover_changes(&db, true);
    }
    let plan = Plan::load(&args.plan)?;
    // The queue and lab axes need the lab this runs in: checked before the dry run.
    let invalid = |message| plan::PlanError::Invalid {
        path: args.plan.display().to_string(),
        message,
    };
    let lab = InLab {
        queues: match plan.matrix.queue.is_empty() {
            true => None,
            false => Some(plan::queue::RouterQueues::here(&plan.matrix.queue).map_err(invalid)?),
        },
        changes: match plan.matrix.lab.is_empty() {
            true => None,
            false => Some(plan::lab_axis::LabChanges::here(&plan.matrix.lab).map_err(invalid)?),
        },
    };
    let cases = plan::expand(&plan).map_err(|message| plan::PlanError::Invalid {
        path: args.plan.display().to_string(),
        message,
    })?;
    let mut problems = Vec::new();
    let mut planned = Vec::new();
    let grammar = <Cli as clap::CommandFactory>::command();
    for mut case in cases {
        let checked = case
            .resolve_address(&plan, &grammar)
            .and_then(|()| case.checked(&plan, &grammar));
        match checked {
            Ok(checked) => planned.push(Planned {
                key: case.key(),
                trials: checked.trials,
                estimate: checked.estimate,
                case,
            }),
            Err(e) => problems.push(format!("{}: {e}", case.key())),
        }
    }
    if !problems.is_empty() {
        let shown = problems.len().min(10);
        let mut items = problems[..shown].to_vec();
        if problems.len() > shown {
            items.push(format!("... and {} more", problems.len() - shown));
        }
        return Err(super::UsageList {
            head: format!(
                "{}: {} of {} cases are not valid command lines:",
                args.plan.display(),
                problems.len(),
                problems.len() + planned.len()
            ),
            items,
            hint: "fix the options, or leave such cells out with [[matrix.exclude]]".into(),
        }
        .into());
    }
    let db = absolute(&super::save::database_path(&args.db));
    leftover_changes(&db, false)?;
    let cases: Vec<Case> = planned.iter().map(|p| p.case.clone()).collect();
    let identity = Identity::of(&plan, &cases);
    let choose = match (&args.resume, args.restart) {
        (Some(run), _) => exec::Choose::Resume(run),
        (None, true) => exec::Choose::Restart,
        (None, false) => exec::Choose::Newest,
    };
    let resume = exec::resume(
        &db,
        &plan,
        &identity,
        choose,
        args.seed,
        &args.plan.display().to_string(),
    )?;
    // A dry run of a new plan run without --seed cannot know the seed the
    // real run will draw: it lists the file's order and says so.
    let seed_known = resume.resumed || args.seed.is_some();
    let shuffle = !args.no_shuffle && (seed_known || !args.dry_run);
    if shuffle {
        shuffle_planned(&mut planned, resume.seed);
    }
    if args.dry_run {
        let order = if shuffle {
            format!("shuffled with seed {}", resume.seed)
        } else if args.no_shuffle {
            "the file's order (--no-shuffle)".to_string()
        } else {
            "listed in the file's order; the run shuffles it with a seed drawn at its start (--seed N to fix one)"
                .to_string()
        };
        return dry_run(&plan, &planned, &resume, &db, &order);
    }
    execute(&args, &plan, planned, resume, &db, lab)
}

/// Shuffles the cases with the plan run's seed: the same order on every
/// resume.
fn shuffle_planned(planned: &mut Vec<Planned>, seed: u64) {
    let mut index: Vec<usize> = (0..planned.len()).collect();
    {
        use rand::seq::SliceRandom;
        use rand::SeedableRng;
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        index.shuffle(&mut rng);
    }
    let mut slots: Vec<Option<Planned>> = planned.drain(..).map(Some).collect();
    planned.extend(index.into_iter().map(|i| slots[i].take().expect("a permutation")));
}

fn absolute(path: &Path) -> PathBuf {
    if path.is_absolute() || crate::store::postgres::is_url(path) {
        path.to_path_buf()
    } else {
        std::env::current_dir()
            .map(|d| d.join(path))
            .unwrap_or_else(|_| path.to_path_buf())
    }
}

/// The tags a case's run is saved with: the plan, the plan run and its
/// seed, the case, its axes and the plan's own tags.
fn case_tags(case: &Planned, plan: &Plan, plan_run: &str, seed: u64) -> Vec<(String, String)> {
    let mut tags = vec![
        ("plan".to_string(), plan.name().to_string()),
        ("plan_run".into(), plan_run.to_string()),
        ("plan_seed".into(), seed.to_string()),
        ("case".into(), case.key.clone()),
    ];
    tags.extend(case.case.axis_tags());
    tags.extend(plan.matrix.tags.iter().map(|(k, v)| (k.clone(), v.clone())));
    tags
}

fn dry_run(plan: &Plan, planned: &[Planned], resume: &exec::Resume, db: &Path, order: &str) -> anyhow::Result<()> {
    let mut out = super::stdout::out();
    let todo: Vec<&Planned> = planned
        .iter()
        .filter(|p| !resume.finished.contains_key(&p.key))
        .collect();
    let total: Duration = todo.iter().map(|p| p.estimate).sum::<Duration>()
        + plan.duration(&plan.defaults.pause).unwrap_or_default() * todo.len().saturating_sub(1) as u32;
    writeln!(out, "plan {}: {} cases", plan.name(), planned.len())?;
    if let Some(note) = &resume.note {
        writeln!(out, "{note}")?;
    }
    if resume.resumed {
        writeln!(
            out,
            "resumes plan run {} in {}: {} of {} cases finished, {} to run (--restart to start over)",
            resume.plan_run,
            db.display(),
            planned.len() - todo.len(),
            planned.len(),
            todo.len()
        )?;
    }
    writeln!(out)?;
    let width = planned.iter().map(|p| p.key.len()).max().unwrap_or(4).max(4);
    writeln!(out, "{:>3}  {:<width$}  {:>10}  command", "#", "case", "estimate")?;
    for (i, p) in planned.iter().enumerate() {
        let estimate = if resume.finished.contains_key(&p.key) {
            "done".to_string()
        } else {
            human(p.estimate)
        };
        writeln!(
            out,
            "{:>3}  {:<width$}  {:>10}  {}{}",
            i + 1,
            p.key,
            estimate,
            host_text(&p.case),
            command_text(&p.case.command_line(plan))
        )?;
    }
    writeln!(out)?;
    writeln!(
        out,
        "estimated time: {} for {} case(s) (durations x trials + about 0.6 s per trial and 0.4 s per case{})",
        human(total),
        todo.len(),
        if plan.defaults.pause.is_some() {
            ", plus pauses"
        } else {
            ""
        }
    )?;
    let d = &plan.defaults;
    let repeated = d.repeat.is_some() || d.confidence.is_some() || d.iterations.is_some();
    if let (true, Some(fanout)) = (repeated, planned.iter().find(|p| p.case.receivers.is_some())) {
        writeln!(
            out,
            "{} cases run one test each: [defaults] repeat, confidence and iterations apply to the other cases",
            fanout.case.workload
        )?;
    }
    writeln!(
        out,
        "order: {order}; every run is tagged plan={} and saved in {}",
        plan.name(),
        db.display()
    )?;
    if planned.iter().any(|p| p.case.mtu.is_some() || !p.case.host.is_empty()) {
        writeln!(
            out,
            "host settings (MTU, offloads, rings, coalesce, qdisc): {}; each agent must run with \
             --allow-host-changes and --psk-file; every setting changed is restored when the plan ends",
            if plan.defaults.allow_host_changes {
                "this host's are set too (allow_host_changes = true; needs root)"
            } else {
                "NOT possible: set allow_host_changes = true in [defaults]"
            }
        )?;
    }
    writeln!(out)?;
    // The agents, at the address and port their cases reach: reachable,
    // their version, authentication, and whether they accept the host
    // changes their cases need; no test traffic.
    let mut failed = None;
    let mut agents: Vec<&Agent> = planned.iter().flat_map(|p| p.case.agents()).collect();
    agents.sort_by(|a, b| (&a.label, &a.address).cmp(&(&b.label, &b.address)));
    agents.dedup();
    for agent in agents {
        let label = &agent.label;
        let mut needs: Vec<String> = planned
            .iter()
            .filter(|p| p.case.agents().contains(&agent))
            .flat_map(|p| host_changes_of(&p.case))
            .collect();
        needs.sort();
        needs.dedup();
        let checked = check_agent(agent).and_then(|(hello, facts)| {
            host_changes_accepted(agent, &hello, &needs)?;
            Ok(facts)
        });
        match checked {
            Ok(facts) => writeln!(
                out,
                "agent {label} ({}): nicbench {} on {} ({}, {} CPUs), reachable{}{}",
                agent.address,
                crate::outside_text::terminal(&facts.nicbench_version),
                crate::outside_text::terminal(&facts.hostname),
                crate::outside_text::terminal(&facts.kernel),
                facts.logical_cpus,
                if agent.psk_file.is_some() {
                    ", authenticated"
                } else {
                    ""
                },
                if needs.is_empty() { "" } else { ", accepts host changes" }
            )?,
            Err(e) => {
                writeln!(
                    out,
                    "agent {label} ({}): {}",
                    agent.address,
                    super::failure::one_line(&e)
                )?;
                failed.get_or_insert(e);
            }
        }
    }
    out.flush()?;
    match failed {
        Some(e) => Err(e.context("the dry run found an agent the plan cannot use")),
        None => Ok(()),
    }
}

/// What a case changes on its agent: "MTU 9000", "offloads tso=off".
fn host_changes_of(case: &Case) -> Vec<String> {
    let mut changes: Vec<String> = case.mtu.map(|m| format!("MTU {m}")).into_iter().collect();
    changes.extend(case.host.iter().map(|(axis, value)| format!("{axis} {value}")));
    changes
}

/// The agent will accept the host changes `needs` (none: nothing to
/// check): the plan knows its key, and it offers `host_changes` (started
/// with --allow-host-changes and --psk-file). Err says what to fix.
fn host_changes_accepted(agent: &Agent, hello: &crate::protocol::Hello, needs: &[String]) -> anyhow::Result<()> {
    if needs.is_empty() {
        return Ok(());
    }
    let label = &agent.label;
    let needs = needs.join(", ");
    if !hello.has_feature(crate::protocol::FEATURE_HOST_CHANGES) {
        anyhow::bail!(
            "the matrix sets {needs} on agent {label}, which refuses host changes (nicbench {}): restart it \
             with `nicbench serve --allow-host-changes --psk-file FILE`, or leave those axes out of the matrix",
            crate::outside_text::terminal(&hello.software_version)
        );
    }
    if agent.psk_file.is_none() {
        anyhow::bail!(
            "the matrix sets {needs} on agent {label}, which changes host settings only for a client that \
             proves its key, and [[agents]] {label} has no psk_file: add psk_file = \"FILE\" (the agent's \
             --psk-file)"
        );
    }
    Ok(())
}

/// "(MTU 9000, offloads tso=off on both ends) ": what a case sets first.
fn host_text(case: &Case) -> String {
    let parts = host_changes_of(case);
    let mut text = String::new();
    if !case.lab.is_empty() {
        let options: Vec<String> = case.lab.iter().flat_map(|(_, _, o)| o.iter().cloned()).collect();
        text += &match options.is_empty() {
            true => "(lab as built) ".to_string(),
            false => format!("(lab set {}) ", options.join(" ")),
        };
    }
    if !parts.is_empty() {
        text += &format!("({} on both ends) ", parts.join(", "));
    }
    text
}

/// Hello, authentication and the agent's facts: what a case needs, without
/// a test.
fn check_agent(agent: &plan::file::Agent) -> anyhow::Result<(crate::protocol::Hello, crate::model::HostFacts)> {
    let (host, port) = super::address::agent_address(&agent.address, None, None)?;
    let target = Target {
        host,
        port,
        family: None,
        bind: None,
        connect_timeout: Duration::from_secs(5),
        wait: Duration::ZERO,
        psk_file: agent.psk_file.as_ref().map(PathBuf::from),
    };
    Ok(crate::session::probe_agent(&target, None)?)
}

/// The plan run's record: what ran, how each case ended.
#[derive(Serialize)]
struct Summary<'a> {
    plan: &'a str,
    plan_run: &'a str,
    seed: u64,
    shuffled: bool,
    database: String,
    cases: &'a [CaseRecord],
}

/// Progress: a bar for the plan, a line for the case in flight (on a
/// terminal); plain lines otherwise.
struct Progress {
    bars: Option<(MultiProgress, ProgressBar, ProgressBar)>,
}

impl Progress {
    fn new(total: usize) -> Progress {
        if !std::io::stderr().is_terminal() || !log::log_enabled!(log::Level::Warn) {
            return Progress { bars: None };
        }
        let multi = MultiProgress::new();
        let plan = multi.add(ProgressBar::new(total as u64));
        plan.set_style(
            ProgressStyle::with_template("plan [{bar:30}] {pos}/{len} cases  {msg}")
                .expect("a valid template")
                .progress_chars("=> "),
        );
        let case = multi.add(ProgressBar::new_spinner());
        case.set_style(ProgressStyle::with_template("  {spinner} {msg}").expect("a valid template"));
        case.enable_steady_tick(Duration::from_millis(200));
        Progress {
            bars: Some((multi, plan, case)),
        }
    }

    fn finish(self) {
        if let Some((_, plan, case)) = self.bars {
            case.finish_and_clear();
            plan.finish_and_clear();
        }
    }
}

impl runner::Show for Progress {
    fn plan(&self, done: usize, message: String) {
        if let Some((_, plan, _)) = &self.bars {
            plan.set_position(done as u64);
            plan.set_message(message);
        }
    }

    fn case(&self, message: String) {
        if let Some((_, _, case)) = &self.bars {
            case.set_message(message);
        }
    }

    fn println(&self, line: String) {
        match &self.bars {
            Some((multi, _, _)) => {
                let _ = multi.println(line);
            }
            None if log::log_enabled!(log::Level::Warn) => super::stdout::err_line(line),
            None => {}
        }
    }
}

/// The steps of a case as they really happen: host changes, the plan's
/// commands and monitors, the case's measuring command in this process.
struct RealSteps<'a> {
    plan: &'a Plan,
    dir: &'a Path,
    db: &'a Path,
    /// The CLI's grammar the cases are parsed with.
    grammar: &'a clap::Command,
    resume: &'a exec::Resume,
    host_changes: &'a mut HostChanges,
    monitors: Option<Monitors>,
    /// The lab this runs in, when the matrix changes it.
    lab: InLab,
}

/// What the plan changes in the lab it runs in, per case.
struct InLab {
    /// The lab router's queues, when the matrix has a `queue` axis.
    queues: Option<plan::queue::RouterQueues>,
    /// The lab's settings, when the matrix has `[matrix.lab]` axes.
    changes: Option<plan::lab_axis::LabChanges>,
}

/// What a case runs: a measuring command, or a fan-out command with its
/// agents' labels (the names of its receivers and their runs' tags).
enum CaseCommand {
    Measure(Box<Measurement>),
    Fanout(Box<crate::cli::fanout::Fanout>, Vec<String>),
}

impl RealSteps<'_> {
    /// The case's command, saving into the plan's database with the plan's
    /// tags, and its command line as the store keeps it. Err: why it cannot
    /// run (exit code 2, as the command's usage errors).
    fn command(&self, planned: &Planned) -> Result<(CaseCommand, String), String> {
        let matches = planned.case.matches(self.plan, self.grammar)?;
        let cli = Cli::from_arg_matches(&matches).map_err(|e| e.to_string())?;
        let mut command = match cli.command {
            crate::cli::Command::Measure(command) => CaseCommand::Measure(command),
            crate::cli::Command::Fanout(command) => {
                let labels = planned.case.agents().iter().map(|a| a.label.clone()).collect();
                CaseCommand::Fanout(command, labels)
            }
            _ => return Err(format!("'{}' is not a measuring command", planned.case.workload)),
        };
        let save = match &mut command {
            CaseCommand::Measure(command) => &mut command.measure.save,
            CaseCommand::Fanout(command, _) => &mut command.args.save,
        };
        let tags = case_tags(planned, self.plan, &self.resume.plan_run, self.resume.seed);
        let mut line = std::env::args().take(1).collect::<Vec<_>>();
        line.extend(planned.case.command_line(self.plan));
        line.extend(["--db".into(), self.db.display().to_string()]);
        save.db = Some(self.db.to_path_buf());
        for (key, value) in tags {
            let tag = format!("{key}={value}");
            save.tags.push(tag.parse().map_err(|e| format!("--tag {tag}: {e}"))?);
            line.extend(["--tag".into(), tag]);
        }
        Ok((command, crate::shell::join(line)))
    }
}

impl runner::Steps for RealSteps<'_> {
    fn stopped(&self) -> bool {
        signals::interrupted()
    }

    /// Sleeps, unless a stop signal comes first.
    fn pause(&mut self, pause: Duration) {
        let end = Instant::now() + pause;
        while Instant::now() < end && !signals::interrupted() {
            std::thread::sleep(Duration::from_millis(50).min(end.saturating_duration_since(Instant::now())));
        }
    }

    fn set_mtu(&mut self, agent: &Agent, mtu: u32) -> Result<(), String> {
        self.host_changes.set_mtu(agent, mtu)
    }

    fn check_path(&mut self, agent: &Agent, mtu: u32) -> Result<(), String> {
        if let Some(why) = crate::probe::path_mtu::check_agent(&agent.label, &agent.address, mtu)? {
            log::warn!("{why}");
        }
        Ok(())
    }

    fn set_host(&mut self, agent: &Agent, setting: &HostSetting) -> Result<(), String> {
        self.host_changes.set_host(agent, setting)
    }

    fn set_queue(&mut self, queue: &str) -> Result<(), String> {
        self.lab.queues.as_mut().ok_or("the plan has no queue axis")?.set(queue)
    }

    fn restore_queue(&mut self) -> Result<(), String> {
        self.lab.queues.as_mut().map_or(Ok(()), |q| q.restore())
    }

    fn set_lab(&mut self, axis: &str, value: &str, options: &[String]) -> Result<(), String> {
        let changes = self.lab.changes.as_mut().ok_or("the plan has no lab axis")?;
        changes.set(axis, value, options)
    }

    fn restore_lab(&mut self) -> Result<(), String> {
        self.lab.changes.as_mut().map_or(Ok(()), |c| c.restore())
    }

    fn commands(&mut self, when: When, index: usize) -> (Vec<PathBuf>, Option<String>) {
        exec::run_commands(self.plan, when, self.dir, index)
    }

    fn start_monitors(&mut self, index: usize) -> Result<(), (Vec<PathBuf>, String)> {
        self.monitors = Some(Monitors::start(self.plan, self.dir, index)?);
        Ok(())
    }

    fn stop_monitors(&mut self) -> (Vec<PathBuf>, Option<String>) {
        self.monitors.take().map(Monitors::stop).unwrap_or_default()
    }

    fn run(&mut self, planned: &Planned, line: &dyn Fn(String)) -> Outcome {
        let started = Instant::now();
        let seconds = || started.elapsed().as_secs_f64();
        let (command, command_line) = match self.command(planned) {
            Ok(command) => command,
            Err(reason) => {
                return Outcome::Failed {
                    reason,
                    exit_code: Some(2),
                    seconds: seconds(),
                }
            }
        };
        let job = move |case: &AsCase| -> anyhow::Result<(Ended, Option<String>)> {
            match command {
                CaseCommand::Measure(command) => {
                    measuring::measure_for(*command, Audience::Plan(case)).map(|ended| (ended, None))
                }
                CaseCommand::Fanout(command, labels) => {
                    let ended = super::fanout::measure_for(*command, Some(&labels), Audience::Plan(case))?;
                    let receivers = &ended.document.receivers;
                    let slowest = receivers.iter().find(|r| r.slowest).map(|r| match receivers.len() {
                        1 => format!("receiver {}", r.name),
                        n => format!("slowest {} of {n} receivers", r.name),
                    });
                    let run = ended.document.run;
                    Ok((
                        Ended {
                            run,
                            run_id: ended.run_id,
                        },
                        slowest,
                    ))
                }
            }
        };
        let Some(ended) = run_case(job, command_line, planned.trials, line) else {
            return Outcome::Interrupted { seconds: seconds() };
        };
        match ended {
            Ok((ended, note)) => Outcome::Measured {
                headline: match (exec::headline(&ended.run), note) {
                    (Some(headline), Some(note)) => Some(format!("{headline}, {note}")),
                    (headline, note) => headline.or(note),
                },
                run_id: ended.run_id,
                seconds: seconds(),
            },
            Err(e) => {
                let code = super::exit_code(&e);
                // 6: cut short (marked, saved incomplete); 130: stopped before any result.
                if signals::interrupted() && (code == super::measure::CutShort::EXIT_CODE || code == 130) {
                    return Outcome::Interrupted { seconds: seconds() };
                }
                Outcome::Failed {
                    reason: super::failure::lines(&e).join("; caused by: "),
                    exit_code: Some(code),
                    seconds: seconds(),
                }
            }
        }
    }
}

/// Runs a case's command (`job`) on a thread of its own while this one
/// keeps `line` told how far it is (every 100 ms). A panic of the case is
/// its failure, not the plan's. None: a second stop came while the case
/// ran, which leaves it at once, as the child process a case once was
/// ended; its thread ends with the process, after the plan put back what
/// it changed.
fn run_case<T: Send + 'static>(
    job: impl FnOnce(&AsCase) -> anyhow::Result<T> + Send + 'static,
    command_line: String,
    trials: u32,
    line: &dyn Fn(String),
) -> Option<anyhow::Result<T>> {
    let progress = Arc::new(Mutex::new(exec::CaseProgress::default()));
    let case = AsCase {
        command_line,
        on_interval: {
            let progress = Arc::clone(&progress);
            Arc::new(move |tick| progress.lock().unwrap_or_else(|e| e.into_inner()).interval(tick))
        },
    };
    let show = || line(progress.lock().unwrap_or_else(|e| e.into_inner()).line(trials));
    let (done, ended) = std::sync::mpsc::channel();
    let thread = std::thread::Builder::new().name("case".into()).spawn(move || {
        let _ = done.send(job(&case));
    });
    let thread = match thread {
        Ok(thread) => thread,
        Err(e) => return Some(Err(anyhow::Error::new(e).context("starting the case's thread"))),
    };
    show();
    // The first stop is said once, so whoever pressed Ctrl-C knows it was
    // heard and what a second one does.
    let mut told = false;
    let ended = loop {
        if !told && signals::interrupted() {
            told = true;
            log::warn!(
                "signal received: finishing the running case, then stopping the plan (again to leave the case at once)"
            );
        }
        match ended.recv_timeout(Duration::from_millis(100)) {
            Ok(ended) => break Some(ended),
            Err(RecvTimeoutError::Timeout) if signals::stopped_at_once() => return None,
            Err(RecvTimeoutError::Timeout) => show(),
            Err(RecvTimeoutError::Disconnected) => break None,
        }
    };
    match (thread.join(), ended) {
        (Ok(()), Some(ended)) => Some(ended),
        _ => Some(Err(anyhow::anyhow!("the case panicked (its message is on stderr)"))),
    }
}

fn execute(
    args: &RunArgs,
    plan: &Plan,
    planned: Vec<Planned>,
    resume: exec::Resume,
    db: &Path,
    lab: InLab,
) -> anyhow::Result<()> {
    // The cases' own handlers, before the first case: a stop that comes
    // while one starts still reaches it.
    signals::install_for_plan();
    let dir = plan::plan_run_dir(db, plan.name(), &resume.plan_run).map_err(anyhow::Error::msg)?;
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    exec::record_plan_run(db, &resume)?;
    let mut host_changes = HostChanges::new(dir.join(host::RESTORE_FILE), plan.defaults.allow_host_changes);
    let total = planned.len();
    let skipped = planned.iter().filter(|p| resume.finished.contains_key(&p.key)).count();
    let mut out = super::stdout::out();
    if let Some(note) = &resume.note {
        writeln!(out, "{note}")?;
    }
    writeln!(
        out,
        "plan {}, run {}{}: {total} cases{}, seed {}",
        plan.name(),
        resume.plan_run,
        if resume.resumed { " (resumed)" } else { "" },
        if skipped > 0 {
            format!(", {skipped} finished earlier and skipped")
        } else {
            String::new()
        },
        resume.seed
    )?;
    out.flush()?;
    drop(out);
    let progress = Progress::new(total);
    let mut steps = RealSteps {
        plan,
        dir: &dir,
        db,
        grammar: &<Cli as clap::CommandFactory>::command(),
        resume: &resume,
        host_changes: &mut host_changes,
        monitors: None,
        lab,
    };
    let records = runner::run_cases(plan, &planned, &resume.finished, &mut steps, &progress);
    progress.finish();
    let restore_failures = host_changes.restore();
    let summary_file = dir.join("summary.json");
    exec::write_summary(
        &summary_file,
        &Summary {
            plan: plan.name(),
            plan_run: &resume.plan_run,
            seed: resume.seed,
            shuffled: !args.no_shuffle,
            database: db.display().to_string(),
            cases: &records,
        },
    )
    .with_context(|| format!("writing {}", summary_file.display()))?;
    let Tally { measured, done, .. } = Tally::of(&records);
    let failed: Vec<&CaseRecord> = records
        .iter()
        .filter(|r| matches!(r.outcome, Outcome::Failed { .. }))
        .collect();
    let mut out = super::stdout::out();
    writeln!(out)?;
    writeln!(
        out,
        "plan {}, run {}: {done} of {total} cases done ({measured} measured now, {skipped} earlier), {} failed",
        plan.name(),
        resume.plan_run,
        failed.len()
    )?;
    for r in &failed {
        if let Outcome::Failed { reason, .. } = &r.outcome {
            writeln!(out, "  FAILED {}: {reason}", r.case)?;
        }
    }
    for f in &restore_failures {
        writeln!(
            out,
            "  NOT RESTORED: {f} (the restore file is kept: `nicbench run PLAN --restore`)"
        )?;
    }
    writeln!(out, "summary: {}", summary_file.display())?;
    out.flush()?;
    drop(out);
    if signals::interrupted() {
        return Err(PlanStopped::Interrupted {
            done,
            total,
            again: resume_command(args),
        }
        .into());
    }
    report_tables(plan, &resume.plan_run, db)?;
    html_report(plan, &args.plan, &resume.plan_run, db, &dir.join("report.html"));
    if !failed.is_empty() {
        return Err(PlanStopped::Failed {
            failed: failed.len(),
            total,
        }
        .into());
    }
    Ok(())
}

/// The command that resumes a plan run stopped part way: the plan, and
/// the options the user gave that choose where it resumes (`--db`,
/// `--resume`) and its order (`--no-shuffle`).
fn resume_command(args: &RunArgs) -> String {
    let mut argv = vec!["nicbench".to_string(), "run".into(), args.plan.display().to_string()];
    if let Some(db) = &args.db {
        argv.extend(["--db".into(), db.display().to_string()]);
    }
    if let Some(run) = &args.resume {
        argv.extend(["--resume".into(), run.clone()]);
    }
    if args.no_shuffle {
        argv.push("--no-shuffle".into());
    }
    crate::shell::join(argv)
}

/// The HTML report of exactly this plan run, beside its summary. A plan
/// whose every case failed has nothing to draw: that is said, not fatal.
fn html_report(plan: &Plan, plan_file: &Path, plan_run: &str, db: &Path, out: &Path) {
    let title = format!(
        "{}: plan run {plan_run}",
        plan.description.as_deref().unwrap_or(plan.name())
    );
    let mut argv: Vec<String> = vec![
        "nicbench".into(),
        "report".into(),
        "--db".into(),
        db.display().to_string(),
        "--tag".into(),
        format!("plan_run={plan_run}"),
        "--out".into(),
        out.display().to_string(),
        "--title".into(),
        title,
    ];
    if !plan.report.tables.is_empty() {
        argv.extend(["--plan".into(), plan_file.display().to_string()]);
    }
    if let Some(t) = plan.report.tables.first() {
        argv.extend(["--rows".into(), t.rows.clone()]);
        if !t.cols.is_empty() {
            argv.extend(["--cols".into(), t.cols.clone()]);
        }
    }
    let result = Cli::try_parse_from(&argv)
        .map_err(|e| anyhow::anyhow!("{e}"))
        .and_then(|cli| match cli.command {
            crate::cli::Command::Report(args) => super::chart::report(args),
            _ => unreachable!("a report command line"),
        });
    super::stdout::line("");
    if let Err(e) = result {
        super::stdout::line(format_args!("(no HTML report: {})", super::failure::one_line(&e)));
    }
}

/// The tables of the plan's `[report]`, over this plan run's runs.
fn report_tables(plan: &Plan, plan_run: &str, db: &Path) -> anyhow::Result<()> {
    for (i, t) in plan.report.tables.iter().enumerate() {
        let mut argv = vec![
            "nicbench".to_string(),
            "compare".into(),
            "--db".into(),
            db.display().to_string(),
            "--tag".into(),
            format!("plan_run={plan_run}"),
            "--rows".into(),
            t.rows.clone(),
            "--metric".into(),
            t.metric.clone(),
        ];
        if !t.cols.is_empty() {
            argv.extend(["--cols".into(), t.cols.clone()]);
        }
        if let Some(s) = &t.stat {
            argv.extend(["--stat".into(), s.clone()]);
        }
        if let Some(b) = &t.baseline {
            argv.extend(["--baseline".into(), b.clone()]);
        }
        if let Some(w) = &t.workload {
            argv.extend(["--workload".into(), w.clone()]);
        }
        let title = t
            .title
            .clone()
            .unwrap_or_else(|| format!("Table {}: {}", i + 1, t.metric));
        super::stdout::line(format_args!("\n{title}"));
        let cli = Cli::try_parse_from(&argv).map_err(|e| anyhow::anyhow!("[[report.tables]] #{}: {e}", i + 1))?;
        let crate::cli::Command::Compare(compare) = cli.command else {
            unreachable!("a compare command line")
        };
        if let Err(e) = super::compare::run(compare) {
            // A table with no data (every case failed) is said, not fatal.
            super::stdout::line(format_args!("  (no table: {})", super::failure::one_line(&e)));
        }
    }
    Ok(())
}
