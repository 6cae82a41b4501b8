//! The loop over a plan's cases: skip the cases an earlier invocation
//! finished, pause between cases, set each case's MTU and host settings,
//! run the plan's commands and monitors around it, run it, and record how
//! it ended. What each step does to the world (host changes, child
//! processes, signals) is behind [`Steps`], and what is shown behind
//! [`Show`], so the order and the rules are tested here on fakes.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use super::exec::{CaseRecord, Outcome};
use super::file::{Agent, When};
use super::{Case, Plan};
use crate::model::HostSetting;

/// A case with what it runs and how long it should take.
pub struct Planned {
    pub case: Case,
    pub key: String,
    /// The trials its command line asks for (`--repeat`, `--iterations`),
    /// wherever in the plan the option was given.
    pub trials: u32,
    pub estimate: Duration,
}

/// What running a case does to the world, one method per step.
pub trait Steps {
    /// A stop signal came: no further case starts.
    fn stopped(&self) -> bool;
    /// The plan's pause between two cases.
    fn pause(&mut self, pause: Duration);
    fn set_mtu(&mut self, agent: &Agent, mtu: u32) -> Result<(), String>;
    /// Whether the path to `agent` passes `mtu`-byte packets (after the
    /// ends are set): Err names a black hole.
    fn check_path(&mut self, agent: &Agent, mtu: u32) -> Result<(), String>;
    fn set_host(&mut self, agent: &Agent, setting: &HostSetting) -> Result<(), String>;
    /// Sets the lab router's queue for the next case (a value of the
    /// `queue` axis, see [`super::queue`]).
    fn set_queue(&mut self, queue: &str) -> Result<(), String>;
    /// Puts back what [`Steps::set_queue`] changed (nothing changed: Ok).
    fn restore_queue(&mut self) -> Result<(), String>;
    /// Changes the lab for the next case as value `value` of lab axis
    /// `axis` says (its `lab set` options; see [`super::lab_axis`]).
    fn set_lab(&mut self, axis: &str, value: &str, options: &[String]) -> Result<(), String>;
    /// Puts back what [`Steps::set_lab`] changed (nothing changed: Ok).
    fn restore_lab(&mut self) -> Result<(), String>;
    /// The plan's commands before or after case `index`: the files holding
    /// their output, and why they failed.
    fn commands(&mut self, when: When, index: usize) -> (Vec<PathBuf>, Option<String>);
    /// Starts the plan's monitors for case `index`; on failure, the files
    /// they wrote and why.
    fn start_monitors(&mut self, index: usize) -> Result<(), (Vec<PathBuf>, String)>;
    /// Stops the monitors started last: their files, and why one failed.
    fn stop_monitors(&mut self) -> (Vec<PathBuf>, Option<String>);
    /// Runs the case itself, with `line` for what it says meanwhile.
    fn run(&mut self, planned: &Planned, line: &dyn Fn(String)) -> Outcome;
}

/// Where the loop says how far it is.
pub trait Show {
    /// `done` cases of the plan are behind; `message` says what is left.
    fn plan(&self, done: usize, message: String);
    /// What the case in flight is doing.
    fn case(&self, message: String);
    /// A line that stays: how a case ended.
    fn println(&self, line: String);
}

/// Runs `planned` in order; `finished` maps the keys of cases an earlier
/// invocation measured to their run ids. Returns a record per case reached
/// (a stop signal leaves the rest unrecorded: they run on resume).
pub fn run_cases(
    plan: &Plan,
    planned: &[Planned],
    finished: &BTreeMap<String, i64>,
    steps: &mut dyn Steps,
    show: &dyn Show,
) -> Vec<CaseRecord> {
    let total = planned.len();
    let pause = plan.duration(&plan.defaults.pause).unwrap_or_default();
    let estimated_left = |from: usize| -> Duration {
        planned[from..]
            .iter()
            .filter(|p| !finished.contains_key(&p.key))
            .map(|p| p.estimate)
            .sum()
    };
    let mut records: Vec<CaseRecord> = Vec::new();
    let (mut spent, mut estimated_done) = (Duration::ZERO, Duration::ZERO);
    let mut ran_any = false;
    for (i, p) in planned.iter().enumerate() {
        if steps.stopped() {
            break;
        }
        let command_line = command_text(&p.case.command_line(plan));
        if let Some(&run_id) = finished.get(&p.key) {
            records.push(CaseRecord {
                case: p.key.clone(),
                command_line,
                outcome: Outcome::Skipped { run_id },
                command_output: Vec::new(),
            });
            continue;
        }
        if ran_any && !pause.is_zero() {
            show.case(format!("pause {}", human(pause)));
            steps.pause(pause);
            if steps.stopped() {
                break;
            }
        }
        ran_any = true;
        // ETA from the measured pace: the estimate of what is left, scaled
        // by how the estimates compared with reality so far.
        let pace = if estimated_done.is_zero() {
            1.0
        } else {
            spent.as_secs_f64() / estimated_done.as_secs_f64()
        };
        let eta = Duration::from_secs_f64(estimated_left(i).as_secs_f64() * pace);
        show.plan(i, format!("about {} left", human(eta)));
        let label = format!("[{}/{total}] {}", i + 1, p.key);
        show.case(label.clone());
        let started = Instant::now();
        let (outcome, files) = run_case(i, p, &label, steps, show);
        spent += started.elapsed();
        estimated_done += p.estimate;
        show.println(match &outcome {
            Outcome::Measured {
                headline,
                seconds,
                run_id,
            } => format!(
                "{label}: {} ({:.1} s{})",
                headline.as_deref().unwrap_or("measured"),
                seconds,
                run_id.map(|id| format!(", run {id}")).unwrap_or_default()
            ),
            Outcome::Failed { reason, .. } => format!("{label}: FAILED: {reason}"),
            Outcome::Interrupted { seconds } => format!("{label}: interrupted after {seconds:.1} s"),
            Outcome::Skipped { .. } => unreachable!("skipped cases are not run"),
        });
        records.push(CaseRecord {
            case: p.key.clone(),
            command_line,
            outcome,
            command_output: files,
        });
    }
    records
}

fn failed(reason: String, seconds: f64) -> Outcome {
    Outcome::Failed {
        reason,
        exit_code: None,
        seconds,
    }
}

/// One case: the lab changed as its lab axes say, its host settings (the
/// first failure ends the case before its commands), the lab router's
/// queue, the commands before, the monitors, the case, the commands after,
/// the queue and the lab put back. A measured case whose monitor or
/// after-command failed, or whose queue or lab could not be put back, is a
/// failure, with the time it measured for.
fn run_case(index: usize, p: &Planned, label: &str, steps: &mut dyn Steps, show: &dyn Show) -> (Outcome, Vec<PathBuf>) {
    if p.case.lab.is_empty() {
        return run_case_on_hosts(index, p, label, steps, show);
    }
    let values: Vec<String> = p
        .case
        .lab
        .iter()
        .map(|(axis, value, _)| format!("{axis}={value}"))
        .collect();
    show.case(format!("{label}  changing the lab for {}", values.join(", ")));
    let changed = p
        .case
        .lab
        .iter()
        .try_for_each(|(axis, value, options)| steps.set_lab(axis, value, options));
    let (outcome, files) = match changed {
        Ok(()) => run_case_on_hosts(index, p, label, steps, show),
        Err(reason) => (failed(reason, 0.0), Vec::new()),
    };
    (put_back(outcome, steps.restore_lab()), files)
}

/// The case with its lab in place: its host settings, the router's queue,
/// and the rest ([`run_case_here`]).
fn run_case_on_hosts(
    index: usize,
    p: &Planned,
    label: &str,
    steps: &mut dyn Steps,
    show: &dyn Show,
) -> (Outcome, Vec<PathBuf>) {
    if let Err(reason) = host_settings(p, label, steps, show) {
        return (failed(reason, 0.0), Vec::new());
    }
    let Some(queue) = &p.case.queue else {
        return run_case_here(index, p, label, steps, show);
    };
    show.case(format!("{label}  setting the lab router's queue to {queue}"));
    let (outcome, files) = match steps.set_queue(queue) {
        Ok(()) => run_case_here(index, p, label, steps, show),
        Err(reason) => (failed(reason, 0.0), Vec::new()),
    };
    (put_back(outcome, steps.restore_queue()), files)
}

/// `outcome`, failed if what the case changed could not be put back.
fn put_back(outcome: Outcome, restored: Result<(), String>) -> Outcome {
    let Err(e) = restored else {
        return outcome;
    };
    match outcome {
        Outcome::Failed { reason, seconds, .. } => failed(format!("{reason}; {e}"), seconds),
        Outcome::Measured { seconds, .. } | Outcome::Interrupted { seconds } => failed(e, seconds),
        skipped @ Outcome::Skipped { .. } => skipped,
    }
}

/// The case with its settings in place: the commands before, the
/// monitors, the case, the commands after.
fn run_case_here(
    index: usize,
    p: &Planned,
    label: &str,
    steps: &mut dyn Steps,
    show: &dyn Show,
) -> (Outcome, Vec<PathBuf>) {
    let (mut files, before_failure) = steps.commands(When::Before, index);
    if let Some(reason) = before_failure {
        return (failed(reason, 0.0), files);
    }
    if let Err((monitor_files, reason)) = steps.start_monitors(index) {
        files.extend(monitor_files);
        return (failed(reason, 0.0), files);
    }
    let line = |m: String| show.case(format!("{label}  {m}"));
    let mut outcome = steps.run(p, &line);
    let (monitor_files, monitor_failure) = steps.stop_monitors();
    files.extend(monitor_files);
    let (after_files, after_failure) = steps.commands(When::After, index);
    files.extend(after_files);
    if let (Outcome::Measured { seconds, .. }, Some(reason)) = (&outcome, monitor_failure.or(after_failure)) {
        outcome = failed(reason, *seconds);
    }
    (outcome, files)
}

/// The case's MTU and the check that the path passes it, then its host
/// settings, in order; the first that fails ends it.
fn host_settings(p: &Planned, label: &str, steps: &mut dyn Steps, show: &dyn Show) -> Result<(), String> {
    if let Some(mtu) = p.case.mtu {
        for agent in p.case.agents() {
            show.case(format!("{label}  setting MTU {mtu}"));
            steps.set_mtu(agent, mtu)?;
            show.case(format!("{label}  checking the path passes {mtu}-byte packets"));
            steps.check_path(agent, mtu)?;
        }
    }
    for (axis, value) in &p.case.host {
        let setting = HostSetting::parse(axis, value)?;
        for agent in p.case.agents() {
            show.case(format!("{label}  setting {}", setting.describe()));
            steps.set_host(agent, &setting)?;
        }
    }
    Ok(())
}

/// How the cases of a plan run ended, counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tally {
    /// Measured by this invocation.
    pub measured: usize,
    pub failed: usize,
    /// Measured now or earlier.
    pub done: usize,
}

impl Tally {
    pub fn of(records: &[CaseRecord]) -> Tally {
        let count = |f: fn(&Outcome) -> bool| records.iter().filter(|r| f(&r.outcome)).count();
        Tally {
            measured: count(|o| matches!(o, Outcome::Measured { .. })),
            failed: count(|o| matches!(o, Outcome::Failed { .. })),
            done: count(|o| matches!(o, Outcome::Measured { .. } | Outcome::Skipped { .. })),
        }
    }
}

/// A case's command line as the user could type it.
pub fn command_text(argv: &[String]) -> String {
    crate::shell::join(std::iter::once("nicbench").chain(argv.iter().map(String::as_str)))
}

/// A duration for a person: `42 s`, `3 min 05 s`, `2 h 10 min`.
pub fn human(d: Duration) -> String {
    let s = d.as_secs_f64().round() as u64;
    match s {
        0..=59 => format!("{s} s"),
        60..=3599 => format!("{} min {:02} s", s / 60, s % 60),
        _ => format!("{} h {:02} min", s / 3600, (s % 3600) / 60),
    }
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;
    use std::path::Path;

    use super::*;

    const PLAN: &str = "[[agents]]\nlabel = \"a\"\naddress = \"127.0.0.1:5999\"\n\
                        [matrix]\nworkload = [\"tcp\"]\nagent = [\"a\"]\nstreams = [1, 2, 3]\n";

    fn plan(extra: &str) -> Plan {
        Plan::parse(&format!("{PLAN}{extra}"), Path::new("p.toml")).unwrap_or_else(|e| panic!("{e}"))
    }

    fn planned(plan: &Plan) -> Vec<Planned> {
        super::super::expand(plan)
            .unwrap()
            .into_iter()
            .map(|case| Planned {
                key: case.key(),
                trials: 1,
                estimate: Duration::from_secs(10),
                case,
            })
            .collect()
    }

    /// Records every step; fails the ones it is told to.
    #[derive(Default)]
    struct Fake {
        log: Vec<String>,
        stop_after_runs: Option<usize>,
        runs: usize,
        fail_mtu: bool,
        black_hole: bool,
        fail_before: bool,
        fail_monitor_stop: bool,
        fail_queue: bool,
        fail_queue_restore: bool,
        fail_lab: bool,
        fail_lab_restore: bool,
    }

    impl Steps for Fake {
        fn stopped(&self) -> bool {
            self.stop_after_runs.is_some_and(|n| self.runs >= n)
        }
        fn pause(&mut self, pause: Duration) {
            self.log.push(format!("pause {}", pause.as_secs()));
        }
        fn set_mtu(&mut self, _: &Agent, mtu: u32) -> Result<(), String> {
            self.log.push(format!("mtu {mtu}"));
            if self.fail_mtu {
                Err("cannot set the MTU".into())
            } else {
                Ok(())
            }
        }
        fn check_path(&mut self, agent: &Agent, mtu: u32) -> Result<(), String> {
            self.log.push(format!("path {mtu}"));
            if self.black_hole {
                Err(format!(
                    "path to {} does not pass {mtu}-byte packets: largest that passed 1500",
                    agent.label
                ))
            } else {
                Ok(())
            }
        }
        fn set_host(&mut self, _: &Agent, setting: &HostSetting) -> Result<(), String> {
            self.log.push(format!("host {}", setting.describe()));
            Ok(())
        }
        fn set_queue(&mut self, queue: &str) -> Result<(), String> {
            self.log.push(format!("queue {queue}"));
            if self.fail_queue {
                Err("the router refused".into())
            } else {
                Ok(())
            }
        }
        fn restore_queue(&mut self) -> Result<(), String> {
            self.log.push("queue restored".into());
            if self.fail_queue_restore {
                Err("could not restore the queue".into())
            } else {
                Ok(())
            }
        }
        fn set_lab(&mut self, axis: &str, value: &str, options: &[String]) -> Result<(), String> {
            self.log.push(format!("lab {axis}={value} [{}]", options.join(" ")));
            if self.fail_lab {
                Err("the lab refused".into())
            } else {
                Ok(())
            }
        }
        fn restore_lab(&mut self) -> Result<(), String> {
            self.log.push("lab restored".into());
            if self.fail_lab_restore {
                Err("could not put the lab back".into())
            } else {
                Ok(())
            }
        }
        fn commands(&mut self, when: When, index: usize) -> (Vec<PathBuf>, Option<String>) {
            self.log.push(format!("{when:?} {index}"));
            let failure = (self.fail_before && when == When::Before).then(|| "before failed".to_string());
            (vec![PathBuf::from(format!("{when:?}-{index}.out"))], failure)
        }
        fn start_monitors(&mut self, index: usize) -> Result<(), (Vec<PathBuf>, String)> {
            self.log.push(format!("monitors {index}"));
            Ok(())
        }
        fn stop_monitors(&mut self) -> (Vec<PathBuf>, Option<String>) {
            self.log.push("monitors stopped".into());
            (Vec::new(), self.fail_monitor_stop.then(|| "monitor died".to_string()))
        }
        fn run(&mut self, planned: &Planned, line: &dyn Fn(String)) -> Outcome {
            self.log.push(format!("run {}", planned.key));
            line("trial 1".into());
            self.runs += 1;
            Outcome::Measured {
                run_id: Some(self.runs as i64),
                headline: None,
                seconds: 2.5,
            }
        }
    }

    #[derive(Default)]
    struct Lines(RefCell<Vec<String>>);

    impl Show for Lines {
        fn plan(&self, _: usize, _: String) {}
        fn case(&self, message: String) {
            self.0.borrow_mut().push(message);
        }
        fn println(&self, line: String) {
            self.0.borrow_mut().push(line);
        }
    }

    fn keys(records: &[CaseRecord]) -> Vec<&str> {
        records.iter().map(|r| r.case.as_str()).collect()
    }

    #[test]
    fn finished_cases_are_skipped_with_their_run_and_the_pause_falls_only_between_runs() {
        let plan = plan("[defaults]\npause = \"3s\"\n");
        let cases = planned(&plan);
        let finished = BTreeMap::from([(cases[0].key.clone(), 41)]);
        let mut fake = Fake::default();
        let records = run_cases(&plan, &cases, &finished, &mut fake, &Lines::default());
        assert!(matches!(records[0].outcome, Outcome::Skipped { run_id: 41 }));
        assert!(records[1..]
            .iter()
            .all(|r| matches!(r.outcome, Outcome::Measured { .. })));
        let runs: Vec<&String> = fake
            .log
            .iter()
            .filter(|l| l.starts_with("run ") || l.starts_with("pause"))
            .collect();
        assert_eq!(
            runs,
            [
                &format!("run {}", cases[1].key),
                "pause 3",
                &format!("run {}", cases[2].key)
            ]
        );
        assert_eq!(
            records[1].command_line,
            format!("nicbench {}", cases[1].case.command_line(&plan).join(" "))
        );
    }

    #[test]
    fn each_case_runs_between_its_commands_and_monitors() {
        let plan = plan("");
        let cases = planned(&plan);
        let mut fake = Fake::default();
        let records = run_cases(&plan, &cases[..1], &BTreeMap::new(), &mut fake, &Lines::default());
        assert_eq!(
            fake.log,
            [
                "Before 0",
                "monitors 0",
                &format!("run {}", cases[0].key),
                "monitors stopped",
                "After 0"
            ]
        );
        let files: Vec<&str> = records[0].command_output.iter().map(|f| f.to_str().unwrap()).collect();
        assert_eq!(files, ["Before-0.out", "After-0.out"]);
    }

    #[test]
    fn a_failed_host_setting_fails_the_case_before_its_commands() {
        let plan = plan("mtu = [9000]\n[defaults]\nallow_host_changes = true\n");
        let cases = planned(&plan);
        assert_eq!(cases[0].case.mtu, Some(9000), "the plan sets an MTU");
        let mut fake = Fake {
            fail_mtu: true,
            ..Fake::default()
        };
        let records = run_cases(&plan, &cases[..1], &BTreeMap::new(), &mut fake, &Lines::default());
        assert_eq!(fake.log, ["mtu 9000"]);
        match &records[0].outcome {
            Outcome::Failed { reason, seconds, .. } => {
                assert_eq!(reason, "cannot set the MTU");
                assert_eq!(*seconds, 0.0);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_lab_is_changed_before_everything_else_and_put_back_after_everything_even_when_it_fails() {
        let plan = plan(
            "mtu = [9000]\nqueue = [\"5ms\"]\n[matrix.lab.card]\nslow = [\"--rate\", \"2=500mbit\"]\nas-built = []\n",
        );
        let cases = planned(&plan);
        assert_eq!(cases[0].key, "tcp agent=a streams=1 mtu=9000 queue=5ms card=as-built");
        assert_eq!(cases[1].key, "tcp agent=a streams=1 mtu=9000 queue=5ms card=slow");
        let mut fake = Fake::default();
        let records = run_cases(&plan, &cases[1..2], &BTreeMap::new(), &mut fake, &Lines::default());
        assert_eq!(
            fake.log,
            [
                "lab card=slow [--rate 2=500mbit]",
                "mtu 9000",
                "path 9000",
                "queue 5ms",
                "Before 0",
                "monitors 0",
                &format!("run {}", cases[1].key),
                "monitors stopped",
                "After 0",
                "queue restored",
                "lab restored",
            ]
        );
        assert!(matches!(records[0].outcome, Outcome::Measured { .. }));
        // A host setting that fails still puts the lab back.
        let mut fake = Fake {
            fail_mtu: true,
            ..Fake::default()
        };
        run_cases(&plan, &cases[..1], &BTreeMap::new(), &mut fake, &Lines::default());
        assert_eq!(fake.log, ["lab card=as-built []", "mtu 9000", "lab restored"]);
        // A change the lab refused fails the case before anything runs.
        let mut fake = Fake {
            fail_lab: true,
            ..Fake::default()
        };
        let records = run_cases(&plan, &cases[..1], &BTreeMap::new(), &mut fake, &Lines::default());
        assert_eq!(fake.log, ["lab card=as-built []", "lab restored"]);
        assert!(matches!(&records[0].outcome, Outcome::Failed { reason, .. } if reason == "the lab refused"));
        // A measured case whose lab could not be put back is a failure
        // that keeps its time.
        let mut fake = Fake {
            fail_lab_restore: true,
            ..Fake::default()
        };
        let records = run_cases(&plan, &cases[..1], &BTreeMap::new(), &mut fake, &Lines::default());
        match &records[0].outcome {
            Outcome::Failed { reason, seconds, .. } => {
                assert_eq!(reason, "could not put the lab back");
                assert_eq!(*seconds, 2.5);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_router_queue_is_set_before_the_commands_and_put_back_after_the_case_even_when_it_fails() {
        let plan = plan("queue = [\"5ms\", \"200ms\"]\n");
        let cases = planned(&plan);
        assert_eq!(cases[0].key, "tcp agent=a streams=1 queue=5ms");
        let mut fake = Fake::default();
        let records = run_cases(&plan, &cases[..2], &BTreeMap::new(), &mut fake, &Lines::default());
        assert_eq!(
            fake.log,
            [
                "queue 5ms",
                "Before 0",
                "monitors 0",
                &format!("run {}", cases[0].key),
                "monitors stopped",
                "After 0",
                "queue restored",
                "queue 200ms",
                "Before 1",
                "monitors 1",
                &format!("run {}", cases[1].key),
                "monitors stopped",
                "After 1",
                "queue restored",
            ]
        );
        assert!(records.iter().all(|r| matches!(r.outcome, Outcome::Measured { .. })));
        // A failed before-command still puts the queue back.
        let mut fake = Fake {
            fail_before: true,
            ..Fake::default()
        };
        run_cases(&plan, &cases[..1], &BTreeMap::new(), &mut fake, &Lines::default());
        assert_eq!(fake.log, ["queue 5ms", "Before 0", "queue restored"]);
        // A queue the router refused fails the case before it runs, and
        // whatever part of it was set is put back.
        let mut fake = Fake {
            fail_queue: true,
            ..Fake::default()
        };
        let records = run_cases(&plan, &cases[..1], &BTreeMap::new(), &mut fake, &Lines::default());
        assert_eq!(fake.log, ["queue 5ms", "queue restored"]);
        assert!(matches!(&records[0].outcome, Outcome::Failed { reason, .. } if reason == "the router refused"));
        // A measured case whose queue could not be put back is a failure
        // that keeps its time.
        let mut fake = Fake {
            fail_queue_restore: true,
            ..Fake::default()
        };
        let records = run_cases(&plan, &cases[..1], &BTreeMap::new(), &mut fake, &Lines::default());
        match &records[0].outcome {
            Outcome::Failed { reason, seconds, .. } => {
                assert_eq!(reason, "could not restore the queue");
                assert_eq!(*seconds, 2.5);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_black_hole_fails_its_case_before_it_runs_and_the_plan_goes_on() {
        let plan = plan("mtu = [1500, 9000]\n[defaults]\nallow_host_changes = true\n");
        let cases = planned(&plan);
        let mut fake = Fake {
            black_hole: true,
            ..Fake::default()
        };
        let records = run_cases(&plan, &cases[..2], &BTreeMap::new(), &mut fake, &Lines::default());
        assert_eq!(fake.log, ["mtu 1500", "path 1500", "mtu 9000", "path 9000"]);
        for r in &records {
            match &r.outcome {
                Outcome::Failed { reason, seconds, .. } => {
                    assert!(reason.starts_with("path to a does not pass"), "{reason}");
                    assert_eq!(*seconds, 0.0);
                }
                other => panic!("{other:?}"),
            }
        }
        let mut fake = Fake::default();
        run_cases(&plan, &cases[..1], &BTreeMap::new(), &mut fake, &Lines::default());
        assert_eq!(fake.log[..3], ["mtu 1500", "path 1500", "Before 0"]);
    }

    #[test]
    fn a_failed_before_command_skips_the_case_and_keeps_its_output() {
        let plan = plan("");
        let cases = planned(&plan);
        let mut fake = Fake {
            fail_before: true,
            ..Fake::default()
        };
        let records = run_cases(&plan, &cases[..1], &BTreeMap::new(), &mut fake, &Lines::default());
        assert_eq!(fake.log, ["Before 0"]);
        assert!(matches!(&records[0].outcome, Outcome::Failed { reason, .. } if reason == "before failed"));
        assert_eq!(records[0].command_output, [PathBuf::from("Before-0.out")]);
    }

    #[test]
    fn a_monitor_that_failed_turns_a_measured_case_into_a_failure_with_its_time() {
        let plan = plan("");
        let cases = planned(&plan);
        let mut fake = Fake {
            fail_monitor_stop: true,
            ..Fake::default()
        };
        let lines = Lines::default();
        let records = run_cases(&plan, &cases[..1], &BTreeMap::new(), &mut fake, &lines);
        match &records[0].outcome {
            Outcome::Failed { reason, seconds, .. } => {
                assert_eq!(reason, "monitor died");
                assert_eq!(*seconds, 2.5);
            }
            other => panic!("{other:?}"),
        }
        let shown = lines.0.into_inner();
        assert!(shown.contains(&format!("[1/1] {}  trial 1", cases[0].key)), "{shown:?}");
        assert!(
            shown.contains(&format!("[1/1] {}: FAILED: monitor died", cases[0].key)),
            "{shown:?}"
        );
    }

    #[test]
    fn a_stop_signal_leaves_the_remaining_cases_for_the_resume() {
        let plan = plan("");
        let cases = planned(&plan);
        let mut fake = Fake {
            stop_after_runs: Some(1),
            ..Fake::default()
        };
        let records = run_cases(&plan, &cases, &BTreeMap::new(), &mut fake, &Lines::default());
        assert_eq!(keys(&records), [cases[0].key.as_str()]);
        let tally = Tally::of(&records);
        assert_eq!(
            tally,
            Tally {
                measured: 1,
                failed: 0,
                done: 1
            }
        );
    }

    #[test]
    fn the_tally_counts_skipped_cases_as_done_but_not_as_measured_now() {
        let plan = plan("");
        let cases = planned(&plan);
        let finished = BTreeMap::from([(cases[2].key.clone(), 7)]);
        let mut fake = Fake {
            fail_before: true,
            ..Fake::default()
        };
        let records = run_cases(&plan, &cases, &finished, &mut fake, &Lines::default());
        assert_eq!(
            Tally::of(&records),
            Tally {
                measured: 0,
                failed: 2,
                done: 1
            }
        );
    }

    #[test]
    fn durations_read_as_seconds_minutes_or_hours() {
        assert_eq!(human(Duration::from_secs(42)), "42 s");
        assert_eq!(human(Duration::from_secs(185)), "3 min 05 s");
        assert_eq!(human(Duration::from_secs(7800)), "2 h 10 min");
    }
}
