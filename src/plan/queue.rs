//! The `queue` axis: how long the lab router's queue holds (its tbf's
//! latency, as `nicbench lab set --queue` sets it) during a case. It
//! exists only in a lab: the plan runs under `nicbench lab exec LAB HOST
//! nicbench run PLAN`, and [`RouterQueues`] sets every shaped egress of the
//! router to the case's value before the case, hands the case the lab's
//! description as it now is, and puts each queue back after the case —
//! after a failure too, and on drop.

use super::lab_axis::{LabChange, LabChanges};
use crate::lab::{self, LabError, LabState, LinkSelector, QueueSetting};
use crate::lab_env::{LabEnv, LAB_VAR, PATHS_VAR};

/// A value of the axis: `200ms`, `0.5s`, `default` (None: the lab's
/// default sizing). The error says what is allowed.
pub fn parse(value: &str) -> Result<Option<f64>, String> {
    lab::spec::parse_queue(value).map_err(|e| match e {
        LabError::Invalid { hint, .. } => hint,
        other => other.to_string(),
    })
}

/// How to run a plan with the axis, for messages.
const HOW: &str = "run the plan inside the lab: `nicbench lab exec LAB HOST nicbench run PLAN`";

/// The router queues of the lab this process runs in, set per case
/// through the lab axes' changes ([`LabChanges`]), which put back what
/// they changed.
pub struct RouterQueues {
    changes: LabChanges,
}

impl RouterQueues {
    /// The lab this process runs in, checked for every value of the axis
    /// (`values`): refused outside a lab (without [`LAB_VAR`]), in a lab
    /// without a router that shapes a link, and for a queue the router's
    /// tbf cannot hold at its rate. Changes nothing.
    pub fn here(values: &[String]) -> Result<RouterQueues, String> {
        let lab = std::env::var(LAB_VAR)
            .map_err(|_| format!("[matrix] queue sets the queue of a lab's router, and this is not a lab: {HOW}"))?;
        let paths = std::env::var(PATHS_VAR)
            .map_err(|_| format!("[matrix] queue: ${LAB_VAR} is '{lab}' but ${PATHS_VAR} is not set: {HOW}"))?;
        let env = LabEnv::parse(&lab, &paths).map_err(|e| format!("[matrix] queue: ${PATHS_VAR}: {e}"))?;
        let state = lab::load_complete(&lab).map_err(|e| format!("[matrix] queue: {e}"))?;
        if shaped_router_ends(&state).is_empty() {
            return Err(format!(
                "[matrix] queue: lab '{lab}' has no router queue to set: build it with --via-router (or --switch) and --rate"
            ));
        }
        for v in values {
            let mut copy = state.clone();
            lab::spec::apply_queue(&mut copy, &every_end(&state, parse(v)?))
                .map_err(|e| format!("[matrix] queue = \"{v}\": {e}"))?;
        }
        let changes = LabChanges::for_lab(lab, env.host).map_err(|e| format!("[matrix] queue: {e}"))?;
        Ok(RouterQueues { changes })
    }

    /// Sets every shaped router egress to `value` for the case.
    pub fn set(&mut self, value: &str) -> Result<(), String> {
        let what = format!("queue = \"{value}\"");
        let seconds = parse(value).map_err(|e| format!("{what}: {e}"))?;
        let state = lab::load_complete(self.changes.lab()).map_err(|e| e.to_string())?;
        let change = LabChange {
            queue: every_end(&state, seconds),
            ..LabChange::default()
        };
        self.changes.make(&change, &what)
    }

    /// Puts back every queue [`RouterQueues::set`] changed.
    pub fn restore(&mut self) -> Result<(), String> {
        self.changes.restore()
    }
}

/// Every router (or switch port) egress with a rate limit, as a selector of that egress
/// alone (its link, toward the host at its other end), with its queue.
fn shaped_router_ends(state: &LabState) -> Vec<(LinkSelector, Option<f64>)> {
    // The router's links, or the switch's ports: the lab's forwarding host.
    let Some(router) = state.hosts.iter().find(|h| h.router) else {
        return Vec::new();
    };
    let mut ends = Vec::new();
    for link in &state.links {
        for (i, end) in link.ends.iter().enumerate() {
            if end.host == router.name && end.rate_bits_per_second.is_some() {
                let select = LinkSelector {
                    link: Some(link.id),
                    towards: Some(link.ends[1 - i].host.clone()),
                };
                ends.push((select, end.queue_seconds));
            }
        }
    }
    ends
}

/// `seconds` on every shaped router egress.
fn every_end(state: &LabState, seconds: Option<f64>) -> Vec<QueueSetting> {
    shaped_router_ends(state)
        .into_iter()
        .map(|(select, _)| QueueSetting { select, seconds })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_times_from_1ms_to_10s_or_default() {
        assert_eq!(parse("200ms"), Ok(Some(0.2)));
        assert_eq!(parse("default"), Ok(None));
        for bad in ["200", "0.5ms", "11s", "fast", ""] {
            let e = parse(bad).unwrap_err();
            assert!(e.contains("from 1ms to 10s"), "{bad}: {e}");
        }
    }
}
