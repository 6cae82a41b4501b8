//! Running a plan: each case is its measuring command run in this
//! process (see `cmd::run`), saving into the plan's database with the
//! plan's tags. The store is the plan's memory: a case whose run is complete is
//! not run again, so a plan stopped by Ctrl-C, a reboot or a crash resumes
//! where it stopped.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command as Process, Stdio};

use serde::Serialize;

use super::file::{Plan, When};
use super::identity::Identity;
use crate::model::{Role, RunResult};
use crate::store::plan_runs::PlanRunRecord;
use crate::store::query::{Filter, RunSummary};
use crate::store::{Store, Tag};
use crate::workload::runner::IntervalTick;

/// Where a plan run stands: which cases finished in earlier invocations.
pub struct Resume {
    pub plan_run: String,
    pub seed: u64,
    /// Case key -> run id, for cases whose run is complete.
    pub finished: BTreeMap<String, i64>,
    pub resumed: bool,
    /// Why this plan run and not the newest one of the plan (a changed
    /// plan, an older plan run without a fingerprint), or what `--resume`
    /// overrode: printed before the plan starts.
    pub note: Option<String>,
    /// The plan run's record to write when the plan starts: a new plan
    /// run, or one `--resume` adopts with the plan as it is now. None: its
    /// record is the plan's already.
    pub record: Option<PlanRunRecord>,
}

/// How a plan run is chosen: a new one (`--restart`), the one named
/// (`--resume RUN`), or the newest one of the plan if it measures what the
/// plan measures now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Choose<'a> {
    Newest,
    Restart,
    Resume(&'a str),
}

/// A plan run of this plan found in the database: its record (None for a
/// plan run of a version before fingerprints), its seed tag, and the start
/// of its newest activity.
struct Found {
    record: Option<PlanRunRecord>,
    seed_tag: Option<u64>,
    latest: f64,
}

/// Finds the plan run to continue, or starts a new one: the newest plan
/// run of this plan when its fingerprint is `identity`'s; a new one, with
/// a note naming what changed, when it is not; the plan run `--resume`
/// names, whatever it measured. `plan_file` names the file in hints.
pub fn resume(
    db: &Path,
    plan: &Plan,
    identity: &Identity,
    choose: Choose,
    seed: Option<u64>,
    plan_file: &str,
) -> anyhow::Result<Resume> {
    if choose == Choose::Restart || (!crate::store::exists(db) && choose == Choose::Newest) {
        return fresh(plan, identity, seed, None);
    }
    if !crate::store::exists(db) {
        anyhow::bail!(
            "--resume: there is no database at {}, so no plan run to resume",
            db.display()
        );
    }
    if let Choose::Resume(asked) = choose {
        super::check_plan_run_id(asked)
            .map_err(|why| anyhow::anyhow!("--resume {asked:?}: not a plan-run id: {why}"))?;
    }
    let store = Store::open(db)?;
    let filter = Filter {
        tags: vec![super::file::tag("plan", plan.name()).map_err(anyhow::Error::msg)?],
        ..Filter::default()
    };
    let runs = store.runs(&filter)?;
    let mut found = plan_runs_found(&store, &runs, db, plan)?;
    let (plan_run, chosen, note, record) = match choose {
        Choose::Resume(asked) => {
            let Some(chosen) = found.remove(asked) else {
                return Err(not_found(&store, &found, asked, db, plan, plan_file));
            };
            let (note, record) = adopted(&chosen, asked, identity, plan, seed);
            (asked.to_string(), chosen, note, record)
        }
        _ => {
            let Some((plan_run, newest)) = found.into_iter().max_by(|a, b| a.1.latest.total_cmp(&b.1.latest)) else {
                return fresh(plan, identity, seed, None);
            };
            if let Some(why) = not_resumed(&newest, &plan_run, identity, plan_file) {
                return fresh(plan, identity, seed, Some(why));
            }
            (plan_run, newest, None, None)
        }
    };
    let recorded_seed = chosen.record.as_ref().map(|r| r.seed).or(chosen.seed_tag);
    if let (Some(asked), Some(had)) = (seed, recorded_seed) {
        if asked != had {
            anyhow::bail!(
                "plan run {plan_run} was shuffled with seed {had}, not {asked}: resume without --seed, \
                 or start over with --restart --seed {asked}"
            );
        }
    }
    Ok(Resume {
        finished: finished_cases(&runs, &plan_run),
        plan_run,
        seed: recorded_seed.or(seed).unwrap_or(0),
        resumed: true,
        note,
        record,
    })
}

/// The record of plan run `plan_run` of `plan` as it is now, started now.
fn record_of(plan: &Plan, identity: &Identity, plan_run: &str, seed: u64) -> PlanRunRecord {
    PlanRunRecord {
        plan_run: plan_run.to_string(),
        plan: plan.name().to_string(),
        started_at_unix_seconds: crate::store::now_unix_seconds(),
        seed,
        fingerprint: identity.fingerprint(),
        identity: identity.to_json(),
    }
}

/// A new plan run: named after the time and a random number, shuffled with
/// `seed` or a random one; `note` says why it is new.
fn fresh(plan: &Plan, identity: &Identity, seed: Option<u64>, note: Option<String>) -> anyhow::Result<Resume> {
    let mut bytes = [0u8; 8];
    getrandom::getrandom(&mut bytes).map_err(|e| anyhow::anyhow!("no random numbers: {e}"))?;
    let stamp: String = crate::report::runs::utc(crate::store::now_unix_seconds())
        .chars()
        .filter_map(|c| match c {
            '-' | ':' => None,
            ' ' => Some('-'),
            c => Some(c),
        })
        .collect();
    let plan_run = format!("{stamp}-{:04x}", u16::from_le_bytes([bytes[0], bytes[1]]));
    let seed = seed.unwrap_or_else(|| u64::from_le_bytes(bytes) >> 16);
    Ok(Resume {
        record: Some(record_of(plan, identity, &plan_run, seed)),
        plan_run,
        seed,
        finished: Default::default(),
        resumed: false,
        note,
    })
}

fn tag_value(tags: &[Tag], key: &str) -> Option<String> {
    tags.iter().find(|t| t.key == key).map(|t| t.value.clone())
}

/// Every plan run of `plan` in the database: those with a record, and
/// those only its runs' tags name (an older nicbench's). Ids read from the
/// database name a directory: each is checked before it is used at all
/// (the database is a file anyone may have written).
fn plan_runs_found(
    store: &Store,
    runs: &[RunSummary],
    db: &Path,
    plan: &Plan,
) -> anyhow::Result<BTreeMap<String, Found>> {
    let untrusted = |plan_run: &str, from: &str| {
        super::check_plan_run_id(plan_run).map_err(|why| {
            anyhow::anyhow!(
                "database {}: {from} names plan run {plan_run:?} of the plan '{}', which is not a plan-run id \
                 ({why}); nicbench names a directory after a plan run, so it resumes none: remove it from the \
                 database, or start a new plan run with --restart",
                db.display(),
                plan.name()
            )
        })
    };
    let mut found: BTreeMap<String, Found> = BTreeMap::new();
    for record in store.plan_runs(plan.name())? {
        untrusted(&record.plan_run, "its plan_runs table")?;
        found.insert(
            record.plan_run.clone(),
            Found {
                latest: record.started_at_unix_seconds,
                record: Some(record),
                seed_tag: None,
            },
        );
    }
    for run in runs {
        let Some(plan_run) = tag_value(&run.tags, "plan_run") else {
            continue;
        };
        untrusted(&plan_run, &format!("the plan_run tag of run {}", run.id))?;
        let entry = found.entry(plan_run).or_insert(Found {
            record: None,
            seed_tag: None,
            latest: f64::NEG_INFINITY,
        });
        entry.latest = entry.latest.max(run.started_at_unix_seconds);
        if entry.seed_tag.is_none() {
            entry.seed_tag = tag_value(&run.tags, "plan_seed").and_then(|s| s.parse().ok());
        }
    }
    Ok(found)
}

/// Why `--resume asked` finds nothing: a plan run of another plan, or none
/// of that id (naming this plan's newest ones).
fn not_found(
    store: &Store,
    found: &BTreeMap<String, Found>,
    asked: &str,
    db: &Path,
    plan: &Plan,
    plan_file: &str,
) -> anyhow::Error {
    match store.plan_run(asked) {
        Err(e) => return e.into(),
        Ok(Some(other)) => {
            return anyhow::anyhow!(
                "--resume {asked}: that plan run is of the plan '{}', not '{}' ({plan_file})",
                other.plan,
                plan.name()
            )
        }
        Ok(None) => {}
    }
    let mut known: Vec<(&String, &Found)> = found.iter().collect();
    known.sort_by(|a, b| b.1.latest.total_cmp(&a.1.latest));
    let known: Vec<&str> = known.iter().take(5).map(|(k, _)| k.as_str()).collect();
    anyhow::anyhow!(
        "--resume {asked}: no plan run {asked} of the plan '{}' in {}; {}",
        plan.name(),
        db.display(),
        if known.is_empty() {
            "it has no plan runs there".to_string()
        } else {
            format!("its plan runs, newest first: {}", known.join(", "))
        }
    )
}

/// Plan run `asked`, adopted as `--resume` asks: the note saying what it
/// overrode, and its record with the plan as it is now when it had none
/// or another plan's.
fn adopted(
    chosen: &Found,
    asked: &str,
    identity: &Identity,
    plan: &Plan,
    seed: Option<u64>,
) -> (Option<String>, Option<PlanRunRecord>) {
    let changed = match &chosen.record {
        Some(r) if r.fingerprint == identity.fingerprint() => None,
        Some(r) => Some(format!(
            "resuming plan run {asked} as asked, although the plan changed since it started ({}); \
             it is recorded with the plan as it is now",
            changed(&r.identity, identity)
        )),
        None => Some(format!(
            "resuming plan run {asked} as asked; it was started by a nicbench that did not record \
             what a plan run measures, and is recorded with the plan as it is now"
        )),
    };
    let seed = chosen
        .record
        .as_ref()
        .map(|r| r.seed)
        .or(chosen.seed_tag)
        .or(seed)
        .unwrap_or(0);
    let record = changed.is_some().then(|| PlanRunRecord {
        started_at_unix_seconds: chosen
            .record
            .as_ref()
            .map_or(chosen.latest, |r| r.started_at_unix_seconds),
        ..record_of(plan, identity, asked, seed)
    });
    (changed, record)
}

/// Why the newest plan run is not continued (a new one starts), if it is
/// not: the plan changed since, or it has no record of what it measures.
fn not_resumed(newest: &Found, plan_run: &str, identity: &Identity, plan_file: &str) -> Option<String> {
    match &newest.record {
        Some(r) if r.fingerprint == identity.fingerprint() => None,
        Some(r) => Some(format!(
            "the plan changed since plan run {plan_run} ({}): a new plan run starts; \
             `nicbench run {plan_file} --resume {plan_run}` continues the old one anyway",
            changed(&r.identity, identity)
        )),
        None => Some(format!(
            "plan run {plan_run} was started by a nicbench that did not record what a plan run \
             measures, so it is not resumed: a new plan run starts; \
             `nicbench run {plan_file} --resume {plan_run}` continues it with this plan"
        )),
    }
}

/// Case key -> run id, for the cases of `plan_run` whose run is complete.
fn finished_cases(runs: &[RunSummary], plan_run: &str) -> BTreeMap<String, i64> {
    let mut finished = BTreeMap::new();
    for run in runs.iter().filter(|r| r.complete) {
        if tag_value(&run.tags, "plan_run").as_deref() == Some(plan_run) {
            if let Some(case) = tag_value(&run.tags, "case") {
                finished.entry(case).or_insert(run.id);
            }
        }
    }
    finished
}

/// What changed from the stored identity `old` (JSON) to `new`.
fn changed(old: &str, new: &Identity) -> String {
    match Identity::from_json(old) {
        Ok(old) => {
            let differences = super::identity::differences(&old, new);
            if differences.is_empty() {
                "its record was written by another version of nicbench".into()
            } else {
                differences.join("; ")
            }
        }
        Err(_) => "its record was written by another version of nicbench".into(),
    }
}

/// Writes the plan run's record, when it needs one (see [`Resume::record`]).
pub fn record_plan_run(db: &Path, resume: &Resume) -> anyhow::Result<()> {
    if let Some(record) = &resume.record {
        Store::open(db)?.record_plan_run(record)?;
    }
    Ok(())
}

/// How one case ended.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "snake_case", tag = "status")]
pub enum Outcome {
    /// Measured in an earlier invocation of this plan run.
    Skipped { run_id: i64 },
    Measured {
        run_id: Option<i64>,
        headline: Option<String>,
        seconds: f64,
    },
    Failed {
        reason: String,
        exit_code: Option<i32>,
        seconds: f64,
    },
    /// Cut short by Ctrl-C; redone on resume.
    Interrupted { seconds: f64 },
}

/// A case, as it appears in the plan run's summary file.
#[derive(Debug, Clone, Serialize)]
pub struct CaseRecord {
    pub case: String,
    pub command_line: String,
    #[serde(flatten)]
    pub outcome: Outcome,
    /// Files holding the output of the plan's commands for this case.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub command_output: Vec<PathBuf>,
}

/// What the plan shows of the case in flight: the trial its intervals
/// belong to and the receiver rate of the latest one.
#[derive(Default)]
pub struct CaseProgress {
    /// Receiver rate of the latest interval, bits/s.
    rate: Option<f64>,
    /// Which trial the intervals belong to (a new trial restarts the clock).
    trial: u32,
    last_start: f64,
}

impl CaseProgress {
    /// Takes one interval of the case.
    pub fn interval(&mut self, tick: &IntervalTick) {
        if tick.start_seconds < self.last_start || self.trial == 0 {
            self.trial += 1;
        }
        self.last_start = tick.start_seconds;
        let seconds = tick.end_seconds - tick.start_seconds;
        let rate: f64 = tick
            .streams
            .iter()
            .filter(|s| s.role == Role::Receiver)
            .map(|s| crate::units::bits_per_second(s.bytes, seconds))
            .sum();
        if rate > 0.0 {
            self.rate = Some(rate);
        }
    }

    /// "trial 2 of 5  9.41 Gbit/s": the case's line, of `trials` in all.
    pub fn line(&self, trials: u32) -> String {
        let trial = if trials > 1 {
            format!("trial {} of {trials}", self.trial.max(1))
        } else {
            String::new()
        };
        let rate = self
            .rate
            .map(|r| crate::workload::format_figure(r, "bit/s"))
            .unwrap_or_default();
        format!("{trial}  {rate}").trim().to_string()
    }
}

/// The run's figure of merit, as `runs` lists it.
pub fn headline(run: &RunResult) -> Option<String> {
    let doc = serde_json::to_value(run).ok()?;
    let columns = crate::store::columns::of_document(&doc);
    crate::store::columns::headline(&columns).map(|h| crate::workload::format_figure(h.value, &h.unit))
}

/// Runs the plan's commands of one kind for a case; their output goes to
/// files in `dir`. Returns the files, and the reason the case fails when an
/// essential command failed.
pub fn run_commands(plan: &Plan, when: When, dir: &Path, case_index: usize) -> (Vec<PathBuf>, Option<String>) {
    let mut files = Vec::new();
    let mut failure = None;
    for (i, c) in plan.commands.iter().enumerate().filter(|(_, c)| c.when == when) {
        let file = dir.join(format!("case{:03}-{}-{}.txt", case_index + 1, when_name(when), i + 1));
        let result = Process::new(&c.run[0]).args(&c.run[1..]).stdin(Stdio::null()).output();
        let (ok, text) = match result {
            Ok(out) => (
                out.status.success(),
                format!(
                    "$ {}\n{}{}exit: {}\n",
                    c.run.join(" "),
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr),
                    out.status
                ),
            ),
            Err(e) => (false, format!("$ {}\ncannot run it: {e}\n", c.run.join(" "))),
        };
        let _ = std::fs::write(&file, &text);
        files.push(file);
        if !ok && c.essential && failure.is_none() {
            failure = Some(format!(
                "essential {} command `{}` failed: {}",
                when_name(when),
                c.run.join(" "),
                text.lines().last().unwrap_or("").trim()
            ));
        }
    }
    (files, failure)
}

fn when_name(w: When) -> &'static str {
    match w {
        When::Before => "before",
        When::After => "after",
        When::Alongside => "alongside",
    }
}

/// Commands that run alongside a case: started before it, stopped
/// (SIGTERM) after it.
pub struct Monitors {
    running: Vec<(Child, PathBuf, Vec<String>, bool)>,
}

impl Monitors {
    pub fn start(plan: &Plan, dir: &Path, case_index: usize) -> Result<Monitors, (Vec<PathBuf>, String)> {
        let mut running = Vec::new();
        for (i, c) in plan
            .commands
            .iter()
            .enumerate()
            .filter(|(_, c)| c.when == When::Alongside)
        {
            let file = dir.join(format!("case{:03}-alongside-{}.txt", case_index + 1, i + 1));
            let out = std::fs::File::create(&file);
            let spawned = out.and_then(|out| {
                let err = out.try_clone()?;
                Process::new(&c.run[0])
                    .args(&c.run[1..])
                    .stdin(Stdio::null())
                    .stdout(out)
                    .stderr(err)
                    .spawn()
            });
            match spawned {
                Ok(child) => running.push((child, file, c.run.clone(), c.essential)),
                Err(e) => {
                    let _ = std::fs::write(&file, format!("$ {}\ncannot run it: {e}\n", c.run.join(" ")));
                    if c.essential {
                        let mut files: Vec<PathBuf> = running.iter().map(|r| r.1.clone()).collect();
                        Monitors { running }.stop();
                        files.push(file);
                        return Err((
                            files,
                            format!("essential alongside command `{}` cannot run: {e}", c.run.join(" ")),
                        ));
                    }
                }
            }
        }
        Ok(Monitors { running })
    }

    /// Stops every monitor; an essential one that ended on its own with a
    /// failure fails the case.
    pub fn stop(self) -> (Vec<PathBuf>, Option<String>) {
        let mut failure = None;
        let mut files = Vec::new();
        for (mut child, file, run, essential) in self.running {
            let ended_on_its_own = child.try_wait().ok().flatten();
            if ended_on_its_own.is_none() {
                // SAFETY: kill(2) on our own child's pid.
                unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
            }
            let _ = child.wait();
            if let Some(status) = ended_on_its_own {
                if !status.success() && essential && failure.is_none() {
                    failure = Some(format!(
                        "essential alongside command `{}` failed: {status}",
                        run.join(" ")
                    ));
                }
            }
            files.push(file);
        }
        (files, failure)
    }
}

/// Writes the plan run's summary (every case, its outcome, its command
/// line) as JSON.
pub fn write_summary(file: &Path, summary: &impl Serialize) -> std::io::Result<()> {
    let mut out = std::fs::File::create(file)?;
    crate::outside_text::write_json_pretty(&mut out, summary)?;
    writeln!(out)
}
