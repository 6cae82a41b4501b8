//! The report's part on fan-out tests (`nicbench multicast`): the runs a
//! test saved for its agents, found by their tags (`fanout_run`, `agent`,
//! `slowest`), read back through their workload's
//! [`crate::workload::FanoutView`], and drawn as one chart per test
//! ([`super::chart::receivers`]) with a table of the receivers under it.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::chart::receivers::{group_tests, loss_text, Receivers, SavedReceiver};
use super::chart::svg::escape;
use crate::model::RunResult;
use crate::store::query::{Filter, RunSummary};
use crate::store::tags::{FANOUT_AGENT, FANOUT_RUN, FANOUT_SLOWEST};
use crate::store::{Store, StoreError};

/// Most fan-out tests one report draws: the newest.
pub const MAX_TESTS: usize = 6;

fn tag<'a>(run: &'a RunSummary, key: &str) -> Option<&'a str> {
    run.tags.iter().find(|t| t.key == key).map(|t| t.value.as_str())
}

/// The newest [`MAX_TESTS`] fan-out tests among the complete runs of
/// `filter`, newest first, as charts; and, when there are more, a
/// sentence saying which are drawn and how to choose another. A run whose
/// document is unreadable, or whose workload does not read agents, is
/// left out.
pub fn read(store: &Store, filter: &Filter) -> Result<(Vec<Receivers>, Option<String>), StoreError> {
    let runs = store.runs(&super::chart::data::complete(filter))?;
    // fanout_run -> its runs; the newest test holds the highest run id.
    let mut tests: BTreeMap<&str, Vec<&RunSummary>> = BTreeMap::new();
    for run in &runs {
        if let (Some(test), Some(_)) = (tag(run, FANOUT_RUN), tag(run, FANOUT_AGENT)) {
            tests.entry(test).or_default().push(run);
        }
    }
    let mut newest: Vec<(&str, i64)> = tests
        .iter()
        .map(|(test, runs)| (*test, runs.iter().map(|r| r.id).max().unwrap_or(0)))
        .collect();
    newest.sort_by_key(|(_, id)| std::cmp::Reverse(*id));
    let shown: Vec<&str> = newest.iter().take(MAX_TESTS).map(|(test, _)| *test).collect();
    let mut saved = Vec::new();
    for test in &shown {
        for summary in &tests[test] {
            if let Some(receiver) = saved_receiver(store, summary)? {
                saved.push(receiver);
            }
        }
    }
    let note = (newest.len() > shown.len()).then(|| {
        format!(
            "The newest {} of {} group tests are drawn; `{}` reports any other.",
            shown.len(),
            newest.len(),
            crate::store::given(store.path()).command(&["report", "--tag", &format!("{FANOUT_RUN}=ID")])
        )
    });
    Ok((group_tests(saved), note))
}

/// One agent's saved run read back by its workload; None when it cannot be.
fn saved_receiver(store: &Store, summary: &RunSummary) -> Result<Option<SavedReceiver>, StoreError> {
    let Some(view) = crate::workload::find(&summary.workload).ok().and_then(|w| w.fanout()) else {
        return Ok(None);
    };
    let Some(saved) = store.run_or_skip(summary.id)? else {
        return Ok(None);
    };
    let Ok(run) = serde_json::from_value::<RunResult>(saved.document) else {
        return Ok(None);
    };
    let case = crate::workload::results_of(&run.workload).case(&run.spec);
    let test = case
        .into_iter()
        .find(|(part, _)| *part == "workload")
        .map_or_else(|| run.workload.clone(), |(_, words)| words);
    Ok(Some(SavedReceiver {
        run_id: summary.id,
        fanout_run: tag(summary, FANOUT_RUN).unwrap_or_default().to_string(),
        agent: tag(summary, FANOUT_AGENT).unwrap_or_default().to_string(),
        slowest: tag(summary, FANOUT_SLOWEST) == Some("true"),
        started_at_unix_seconds: summary.started_at_unix_seconds,
        test,
        figures: view.stored_figures(&run),
    }))
}

/// The table under a test's chart: a row per receiver, in the chart's
/// order; a figure its run does not hold is `-`.
pub fn write_table(out: &mut String, test: &Receivers) {
    let rate = |bits: Option<f64>| bits.map(|b| crate::units::Rate(b).to_string());
    let sender = match (rate(test.sent_bits_per_second), rate(test.offered_bits_per_second)) {
        (Some(sent), Some(offered)) => format!("; the sender sent {sent} (offered {offered})"),
        (Some(sent), None) => format!("; the sender sent {sent}"),
        (None, Some(offered)) => format!("; offered {offered}, the sender not measured here"),
        (None, None) => String::new(),
    };
    let _ = write!(
        out,
        "<div class=\"scroll\"><table class=\"sortable receivers\" data-fanout-run=\"{}\"><caption>Each receiver of \
         the test tagged {FANOUT_RUN}={}{}</caption><thead><tr><th scope=\"col\">receiver</th>\
         <th scope=\"col\">run</th><th scope=\"col\">received datagrams</th><th scope=\"col\">lost</th>\
         <th scope=\"col\">loss</th><th scope=\"col\">joined in</th><th scope=\"col\">standing</th></tr></thead><tbody>",
        escape(&test.fanout_run),
        escape(&test.fanout_run),
        escape(&sender)
    );
    let cell = |value: Option<String>, text: Option<String>| match (value, text) {
        (Some(v), Some(t)) => format!("<td class=\"num\" data-v=\"{v}\">{}</td>", escape(&t)),
        _ => "<td class=\"num\" data-v=\"\">-</td>".to_string(),
    };
    for r in &test.receivers {
        let counts = r.figures.counts;
        let join = r.figures.join_latency_seconds;
        let standing = match r.slowest {
            true => format!("{}, slowest", r.figures.standing),
            false => r.figures.standing.clone(),
        };
        let _ = write!(
            out,
            "<tr{}><th scope=\"row\">{}</th><td class=\"num\" data-v=\"{id}\"><a href=\"#run-{id}\">{id}</a></td>{}{}{}{}<td>{}</td></tr>",
            if r.slowest { " class=\"slowest\"" } else { "" },
            escape(&r.name),
            cell(
                counts.map(|c| c.received_datagrams.to_string()),
                counts.map(|c| c.received_datagrams.to_string())
            ),
            cell(
                counts.map(|c| c.lost_datagrams.to_string()),
                counts.map(|c| c.lost_datagrams.to_string())
            ),
            cell(
                counts.map(|c| c.loss_percent.to_string()),
                counts.map(|c| loss_text(c.loss_percent))
            ),
            cell(
                join.map(|s| s.to_string()),
                join.map(crate::workload::base::one_way::delay_text)
            ),
            escape(&standing),
            id = r.run_id,
        );
    }
    out.push_str("</tbody></table></div>\n");
}
