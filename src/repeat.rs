//! Repeating one case: runs the trials of one case under a repetition policy
//! (`--repeat N --pick ...` or `--confidence LEVEL,WIDTH --iterations MAX,MIN`),
//! shows a line per trial on a progress writer, keeps every trial's raw
//! result, and reports the picked (or mean) figure with a
//! [`RepetitionSummary`]. It never looks at the workload kind: trials are
//! compared by [`figure_of_merit`], the one place that knows which figure
//! of a trial matters. Nor does it know how a trial runs: the caller hands
//! it a function that runs trial N against an agent (`cmd::measure` over a
//! session, or over iperf3's protocol), so it sits below the session.

use std::io::Write;

use crate::model::TestSpec;
use crate::model::{RepetitionSummary, RunResult, TrialResult};
use crate::stats::{self, Decision, Pick, Policy};
use crate::workload::{format_figure, Figure};

/// The figure of merit of a trial of `spec`: its workload's own
/// (transactions per second, a sweep's peak, the receiver's rate). Every
/// figure here is "higher is better".
pub fn figure_of_merit(spec: &TestSpec, trial: &TrialResult) -> Figure {
    crate::workload::results_of(&spec.workload).figure_of_merit(trial)
}

/// A case that stopped on a failing trial, with the trials that had
/// finished before it: they are reported (and were saved), never dropped.
#[derive(Debug, thiserror::Error)]
#[error("{error}")]
pub struct CaseFailure<E: std::error::Error + 'static> {
    #[source]
    pub error: E,
    /// The run of the finished trials (its repetition summary marked
    /// interrupted); None when the first trial failed.
    pub finished: Option<Box<RunResult>>,
}

impl<E: std::error::Error + 'static> From<E> for CaseFailure<E> {
    fn from(error: E) -> CaseFailure<E> {
        CaseFailure { error, finished: None }
    }
}

/// What the runner needs besides the trials themselves.
pub struct CaseOptions<'a> {
    pub policy: Policy,
    /// Why to stop, once the user pressed Ctrl-C: the running trial is cut
    /// short and no further trial starts.
    pub interrupted: &'a (dyn Fn() -> Option<String> + Sync),
    /// Where a line per finished trial goes (stderr); None for silence.
    pub progress: Option<&'a mut dyn Write>,
    /// Called with each trial the moment it ends (the run header and that
    /// trial), before the next one starts: the results store saves it.
    pub on_trial: Option<&'a mut dyn FnMut(&RunResult)>,
}

/// The repetition loop: `run_trial(N)` runs trial N (tests use a fake).
pub fn run_trials<E: std::error::Error + 'static>(
    run_trial: &mut dyn FnMut(u32) -> Result<RunResult, E>,
    mut options: CaseOptions,
) -> Result<RunResult, CaseFailure<E>> {
    let policy = options.policy;
    let mut first: Option<(RunResult, Figure)> = None;
    let mut trials: Vec<TrialResult> = Vec::new();
    // The figures the policy decides on, and which trial each came from:
    // a cut-short trial's figure is no measurement of the asked test.
    let mut values = Vec::new();
    let mut numbers = Vec::new();
    let mut interrupted = false;
    let mut decision = Decision::Continue;
    let mut failure = None;
    while decision == Decision::Continue {
        let number = trials.len() as u32 + 1;
        let run = match run_trial(number) {
            Ok(run) => run,
            Err(error) if trials.is_empty() => return Err(error.into()),
            Err(error) => {
                failure = Some(error);
                interrupted = true;
                break;
            }
        };
        if let Some(on_trial) = options.on_trial.as_deref_mut() {
            on_trial(&run);
        }
        let figure = figure_of_merit(&run.spec, &run.result);
        let cut_short = run.result.interruption.is_some();
        trials.push(run.result.clone());
        if !cut_short {
            values.push(figure.value);
            numbers.push(number);
            decision = stats::decide(&policy, &values);
        }
        if let Some(out) = options.progress.as_deref_mut() {
            let line = match &run.result.interruption {
                Some(i) => format!(
                    "trial {number}: cut short after {:.2} s ({}); not counted",
                    i.elapsed_seconds, i.reason
                ),
                None => trial_line(&policy, &values, &figure, &decision),
            };
            let _ = writeln!(out, "{line}");
        }
        first.get_or_insert((run, figure));
        if cut_short || (decision == Decision::Continue && (options.interrupted)().is_some()) {
            interrupted = true;
            break;
        }
    }
    let (mut run, figure) = first.expect("at least one trial ran");
    if values.is_empty() {
        // Only a cut-short trial: report it, marked as such.
        run.result = trials[0].clone();
    } else if policy != Policy::SINGLE {
        let mut summary = summarize(&policy, &figure, &values, &decision, interrupted);
        summary.picked_trial = numbers[summary.picked_trial as usize - 1];
        run.result = trials[summary.picked_trial as usize - 1].clone();
        run.repetition = Some(summary);
    } else {
        run.result = trials[0].clone();
    }
    run.trials = trials;
    run.interrupted = interrupted;
    match failure {
        None => Ok(run),
        Some(error) => Err(CaseFailure {
            error,
            finished: Some(Box::new(run)),
        }),
    }
}

/// The progress line after a trial.
fn trial_line(policy: &Policy, values: &[f64], figure: &Figure, decision: &Decision) -> String {
    let n = values.len();
    let shown = format_figure(figure.value, figure.unit);
    match policy {
        Policy::Repeat { trials, .. } => format!("trial {n}/{trials}: {shown}"),
        Policy::Confidence {
            level_percent,
            width_percent,
            max_trials,
            ..
        } => {
            let width = stats::mean_interval(values, *level_percent)
                .map(|i| format!("{:.1}% of the mean", i.width_percent))
                .unwrap_or_else(|| format!("n/a (fewer than {} trials)", stats::MIN_INTERVAL_TRIALS));
            let verdict = match decision {
                Decision::Continue => "continuing",
                Decision::Done => "width met, stopping",
                Decision::GaveUp { .. } => "maximum reached, stopping",
            };
            format!(
                "trial {n} (at most {max_trials}): {shown}; {level_percent}% interval width {width} \
                 (asked: {width_percent}%), {verdict}"
            )
        }
    }
}

/// The repetition summary of a finished case.
pub fn summarize(
    policy: &Policy,
    figure: &Figure,
    values: &[f64],
    decision: &Decision,
    interrupted: bool,
) -> RepetitionSummary {
    let (pick, level, width_met) = match *policy {
        Policy::Repeat { pick, .. } => (pick, 95.0, None),
        Policy::Confidence { level_percent, .. } => {
            (Pick::Mean, level_percent, Some(matches!(decision, Decision::Done)))
        }
    };
    let index = stats::pick_index(values, pick).expect("at least one trial");
    let mean = stats::mean(values);
    let reported_value = match pick {
        Pick::Mean => mean,
        Pick::Best | Pick::Median => values[index],
    };
    RepetitionSummary {
        policy: *policy,
        metric: figure.metric.into(),
        unit: figure.unit.into(),
        picked_trial: index as u32 + 1,
        reported_value,
        values: values.to_vec(),
        min: values.iter().copied().fold(f64::INFINITY, f64::min),
        median: stats::median(values),
        max: values.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        mean,
        stddev: stats::stddev(values),
        // Every figure of merit is a rate or a count (bit/s,
        // transactions/s, round trips per minute): never below 0.
        interval: stats::mean_interval(values, level).map(|i| i.within(0.0)),
        width_met,
        interrupted,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Endpoint, Sum, Total, SCHEMA};

    fn fake_run(trial: u32, bits_per_second: f64) -> RunResult {
        let result = TrialResult {
            trial,
            streams: vec![],
            sum: Sum {
                receiver: Total {
                    bits_per_second,
                    ..Total::default()
                },
                ..Sum::default()
            },
            ..TrialResult::default()
        };
        RunResult {
            schema: SCHEMA.into(),
            workload: "tcp".into(),
            started_at_unix_seconds: 0.0,
            client: Endpoint::default(),
            agent: Endpoint::default(),
            spec: crate::model::spec::tests::spec("tcp"),
            trials: vec![result.clone()],
            result,
            interrupted: false,
            repetition: None,
            peer_protocol: None,
        }
    }

    fn run_with(values: &[f64], policy: Policy) -> (RunResult, String) {
        let mut progress = Vec::new();
        let mut next = values.iter();
        let mut trial = |n: u32| Ok(fake_run(n, *next.next().expect("the runner asked for too many trials")));
        let run = run_trials::<std::io::Error>(
            &mut trial,
            CaseOptions {
                policy,
                interrupted: &|| None,
                progress: Some(&mut progress),
                on_trial: None,
            },
        )
        .unwrap();
        (run, String::from_utf8(progress).unwrap())
    }

    #[test]
    fn a_failing_trial_keeps_the_finished_ones() {
        let mut trial = |n: u32| {
            if n < 3 {
                Ok(fake_run(n, 100.0 * f64::from(n)))
            } else {
                Err(std::io::Error::other("stream 1 (receiver): connection reset"))
            }
        };
        let policy = Policy::Repeat {
            trials: 5,
            pick: Pick::Median,
        };
        let options = CaseOptions {
            policy,
            interrupted: &|| None,
            progress: None,
            on_trial: None,
        };
        let failure = run_trials(&mut trial, options).unwrap_err();
        assert!(failure.to_string().contains("connection reset"), "{failure}");
        let run = failure.finished.expect("the two finished trials are kept");
        assert_eq!(run.trials.len(), 2);
        let r = run.repetition.unwrap();
        assert!(r.interrupted);
        assert_eq!(r.values, vec![100.0, 200.0]);
    }

    #[test]
    fn a_failing_first_trial_has_nothing_to_keep() {
        let mut trial = |_| Err(std::io::Error::other("stream 1 (sender): broken pipe"));
        let options = CaseOptions {
            policy: Policy::SINGLE,
            interrupted: &|| None,
            progress: None,
            on_trial: None,
        };
        assert!(run_trials(&mut trial, options).unwrap_err().finished.is_none());
    }

    #[test]
    fn repeat_keeps_every_trial_and_reports_the_best() {
        let policy = Policy::Repeat {
            trials: 3,
            pick: Pick::Best,
        };
        let (run, progress) = run_with(&[5e9, 9e9, 7e9], policy);
        assert_eq!(run.trials.len(), 3);
        let r = run.repetition.unwrap();
        assert_eq!(r.picked_trial, 2);
        assert_eq!(run.result.trial, 2);
        assert_eq!(r.reported_value, 9e9);
        assert_eq!((r.min, r.median, r.max), (5e9, 7e9, 9e9));
        assert!(progress.contains("trial 3/3: 7.00 Gbit/s"), "{progress}");
    }

    #[test]
    fn confidence_stops_at_max_and_says_so() {
        let policy = Policy::Confidence {
            level_percent: 99.0,
            width_percent: 5.0,
            max_trials: 4,
            min_trials: 2,
        };
        let (run, progress) = run_with(&[5e9, 9e9, 7e9, 3e9], policy);
        assert_eq!(run.trials.len(), 4);
        let r = run.repetition.unwrap();
        assert_eq!(r.width_met, Some(false));
        assert_eq!(r.reported_value, 6e9);
        assert!(r.interval.unwrap().width_percent > 5.0);
        assert!(progress.contains("maximum reached"), "{progress}");
    }

    #[test]
    fn confidence_stops_as_soon_as_the_width_is_met() {
        let policy = Policy::Confidence {
            level_percent: 99.0,
            width_percent: 5.0,
            max_trials: 10,
            min_trials: 2,
        };
        // Three at least: two trials make no interval.
        let (run, _) = run_with(&[9e9, 9e9, 9e9, 1.0], policy);
        assert_eq!(run.trials.len(), 3);
        assert_eq!(run.repetition.unwrap().width_met, Some(true));
    }

    #[test]
    fn a_cut_short_trial_ends_the_case_uncounted_and_marks_the_run() {
        let policy = Policy::Repeat {
            trials: 3,
            pick: Pick::Median,
        };
        let mut progress = Vec::new();
        let mut trial = |n: u32| {
            let mut run = fake_run(n, if n == 2 { 1e9 } else { 5e9 });
            if n == 2 {
                run.result.interruption = Some(crate::model::Interruption {
                    by: crate::model::Party::Client,
                    reason: "SIGINT".into(),
                    elapsed_seconds: 0.5,
                    planned_seconds: Some(1.0),
                });
            }
            Ok(run)
        };
        let options = CaseOptions {
            policy,
            interrupted: &|| None,
            progress: Some(&mut progress),
            on_trial: None,
        };
        let run = run_trials::<std::io::Error>(&mut trial, options).unwrap();
        assert!(run.interrupted);
        assert_eq!(run.trials.len(), 2, "no trial starts after a cut-short one");
        let r = run.repetition.unwrap();
        assert_eq!(r.values, vec![5e9], "the cut-short figure is not counted");
        assert_eq!((r.picked_trial, run.result.trial), (1, 1));
        assert!(r.interrupted);
        let progress = String::from_utf8(progress).unwrap();
        assert!(
            progress.contains("trial 2: cut short after 0.50 s (SIGINT); not counted"),
            "{progress}"
        );
    }

    #[test]
    fn each_trial_is_handed_over_before_the_next_starts() {
        let seen = std::cell::RefCell::new(Vec::new());
        let mut trial = |n: u32| {
            assert_eq!(
                seen.borrow().len() as u32,
                n - 1,
                "trial {n} started before the last was handed over"
            );
            Ok(fake_run(n, 1e9 * n as f64))
        };
        let mut on_trial = |run: &RunResult| seen.borrow_mut().push(run.result.trial);
        let policy = Policy::Repeat {
            trials: 3,
            pick: Pick::Best,
        };
        run_trials::<std::io::Error>(
            &mut trial,
            CaseOptions {
                policy,
                interrupted: &|| None,
                progress: None,
                on_trial: Some(&mut on_trial),
            },
        )
        .unwrap();
        assert_eq!(*seen.borrow(), vec![1, 2, 3]);
    }

    /// `--repeat 2`: no interval (two trials are too few), and the
    /// reported trial is the lower one, not called the median: the JSON's
    /// `median` is the true one, the mean of the two.
    #[test]
    fn two_trials_report_the_lower_without_an_interval() {
        let policy = Policy::Repeat {
            trials: 2,
            pick: Pick::Median,
        };
        let (run, _) = run_with(&[854.57e6, 518.19e6], policy);
        let r = run.repetition.unwrap();
        assert!(r.interval.is_none(), "{:?}", r.interval);
        assert_eq!((r.picked_trial, r.reported_value), (2, 518.19e6));
        assert_eq!(r.median, (854.57e6 + 518.19e6) / 2.0);
    }

    /// Three trials that vary by more than their mean: the interval stops
    /// at 0 Gbit/s rather than reaching below it.
    #[test]
    fn the_interval_of_a_rate_stops_at_zero() {
        let policy = Policy::Repeat {
            trials: 3,
            pick: Pick::Median,
        };
        let (run, _) = run_with(&[8.25e9, 20.64e9, 11.32e9], policy);
        let i = run.repetition.unwrap().interval.unwrap();
        assert_eq!(i.low, 0.0);
        assert!(i.high > 20.64e9 && i.clamped(), "{i:?}");
    }

    #[test]
    fn a_single_trial_has_no_summary() {
        let (run, _) = run_with(&[1e9], Policy::SINGLE);
        assert!(run.repetition.is_none());
        assert_eq!(run.trials.len(), 1);
    }
}
