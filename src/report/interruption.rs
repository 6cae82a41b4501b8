//! The one line that says a run was cut short, for the text report.

use crate::model::RunResult;

/// "INTERRUPTED: ..." when the run was cut short, else None.
pub fn line(run: &RunResult) -> Option<String> {
    if !run.interrupted {
        return None;
    }
    let cut: Vec<_> = run
        .trials
        .iter()
        .filter_map(|t| t.interruption.as_ref().map(|i| (t.trial, i)))
        .collect();
    Some(match cut.first() {
        Some((trial, i)) => {
            let ran = match i.planned_seconds {
                Some(planned) => format!("after {:.2} s of {planned:.2} s", i.elapsed_seconds),
                None => format!("after {:.2} s", i.elapsed_seconds),
            };
            let which = if run.trials.len() > 1 {
                format!("trial {trial} ")
            } else {
                String::new()
            };
            format!(
                "INTERRUPTED: {which}stopped by the {} {ran} ({}); the figures cover only the part that ran",
                i.by.as_str(),
                i.reason
            )
        }
        None => format!(
            "INTERRUPTED: stopped after {} trial(s), fewer than the policy asked for",
            run.trials.len()
        ),
    })
}
