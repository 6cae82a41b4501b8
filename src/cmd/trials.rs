//! One case's trials against an agent: the repetition loop over sessions,
//! each trial retried while the agent is still busy with the one before.
//! A measuring command runs its case through it ([`super::measure`]), and
//! `--scaling` each link alone ([`super::multilink`]), which `measure`
//! calls: kept in either, it would make the two import each other.

use std::time::{Duration, Instant};

use crate::model::RunResult;
use crate::repeat::{self, CaseFailure, CaseOptions};
use crate::session::{RunOptions, SessionError, Target};
use crate::workload::runner::{IntervalCallback, ProgressCallback};
use crate::workload::TestSpec;

/// How long to retry when the agent is still finishing the previous trial.
const BUSY_RETRY: Duration = Duration::from_secs(10);

/// Runs the trials of `spec` against `target` under the policy: the
/// repetition loop over a session, each trial retried while the agent is
/// still busy with the one before.
pub fn run_case(
    target: &Target,
    spec: &TestSpec,
    options: CaseOptions,
    on_interval: &dyn Fn() -> Option<IntervalCallback>,
    on_progress: &dyn Fn() -> Option<ProgressCallback>,
) -> Result<RunResult, CaseFailure<SessionError>> {
    let settings = crate::workload::Settings::default();
    run_case_adjusted(target, spec, options, on_interval, on_progress, &|_| {}, &settings)
}

/// [`run_case`], with `adjust` applied to each trial's run the moment it
/// ends, before the policy sees it and before it is saved (a command that
/// adds what it measured around the test: `files` adds its raw TCP trial).
pub fn run_case_adjusted(
    target: &Target,
    spec: &TestSpec,
    options: CaseOptions,
    on_interval: &dyn Fn() -> Option<IntervalCallback>,
    on_progress: &dyn Fn() -> Option<ProgressCallback>,
    adjust: &dyn Fn(&mut RunResult),
    settings: &crate::workload::Settings,
) -> Result<RunResult, CaseFailure<SessionError>> {
    let interrupted = options.interrupted;
    // The agent may still be closing the previous trial (none precedes the first).
    let mut trial = |number: u32| {
        let attempt = || {
            let shaper = super::lab::ShaperWatch::start(target);
            let run = crate::session::run(
                target,
                spec,
                RunOptions {
                    interrupted,
                    on_interval: on_interval(),
                    on_progress: on_progress(),
                    trial: number,
                    settings: settings.clone(),
                },
            )?;
            Ok((run, shaper))
        };
        retry_while_busy(number > 1, attempt).map(|(mut run, shaper)| {
            if let Some(shaper) = shaper {
                shaper.finish(&mut run);
            }
            adjust(&mut run);
            run
        })
    };
    repeat::run_trials(&mut trial, options)
}

/// `attempt` (a session with the agent), tried again 50 ms later while the
/// agent answers that it is still busy with the trial before, for at most
/// [`BUSY_RETRY`]; once only when `retry` is false.
pub fn retry_while_busy<T>(
    retry: bool,
    mut attempt: impl FnMut() -> Result<T, SessionError>,
) -> Result<T, SessionError> {
    let busy_until = Instant::now() + BUSY_RETRY;
    loop {
        match attempt() {
            Err(SessionError::Busy { .. }) if retry && Instant::now() < busy_until => {
                std::thread::sleep(Duration::from_millis(50))
            }
            other => return other,
        }
    }
}
