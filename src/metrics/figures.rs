//! The figures of one run that become metrics, read from the result model
//! in base units: bytes per second, ratios, seconds, seconds per byte.
//! Shared by the mesh's series and the probe's, so both say the same.

use crate::model::{CpuReport, Flow, FlowTotal, Party, RunResult};

/// One direction of data relative to the test's two ends: `forward` is
/// from the client (the mesh's `src`) to the agent (`dst`), `reverse` the
/// other way. A bidirectional test has both.
#[derive(Debug, Clone, PartialEq)]
pub struct DirectionFigures {
    /// `forward` or `reverse`.
    pub direction: &'static str,
    pub sender_bytes_per_second: f64,
    pub receiver_bytes_per_second: f64,
    /// Share of datagrams (udp) or transactions (rr) lost; None for a
    /// workload without a loss count (tcp).
    pub loss_ratio: Option<f64>,
    /// CPU of the end that sent this direction's data, and of the end that
    /// received it (in a bidirectional test each host does both, so the
    /// two directions show the same hosts' figures).
    pub sender_cpu: Option<CpuFigures>,
    pub receiver_cpu: Option<CpuFigures>,
}

/// CPU cost of one end over the run.
#[derive(Debug, Clone, PartialEq)]
pub struct CpuFigures {
    /// Busy share of all cores together, 0 to 1.
    pub utilization_ratio: f64,
    /// CPU time of all cores per byte the end sent or received (netperf's
    /// service demand, `service_demand_us_per_kb` / 1024 / 10^6).
    pub service_demand_seconds_per_byte: Option<f64>,
    /// CPU time per transaction (request/response workloads).
    pub service_demand_seconds_per_transaction: Option<f64>,
}

/// Round-trip time percentiles of a request/response run, in seconds.
#[derive(Debug, Clone, PartialEq)]
pub struct RttFigures {
    pub p50_seconds: f64,
    pub p90_seconds: f64,
    pub p99_seconds: f64,
}

/// Everything the metrics say about one run.
#[derive(Debug, Clone, PartialEq)]
pub struct RunFigures {
    pub workload: String,
    pub directions: Vec<DirectionFigures>,
    /// Present for a workload that measures round trips.
    pub rtt: Option<RttFigures>,
    pub started_at_unix_seconds: f64,
}

const DIRECTIONS: [(Flow, &str); 2] = [(Flow::ClientToAgent, "forward"), (Flow::AgentToClient, "reverse")];

impl RunFigures {
    pub fn of(run: &RunResult) -> RunFigures {
        let r = &run.result;
        let mut directions = Vec::new();
        for (flow, name) in DIRECTIONS {
            let total = match flow {
                Flow::ClientToAgent => r.sum.client_to_agent.as_ref(),
                Flow::AgentToClient => r.sum.agent_to_client.as_ref(),
            };
            let Some(total) = total else { continue };
            directions.push(DirectionFigures {
                direction: name,
                sender_bytes_per_second: total.sender.bits_per_second / 8.0,
                receiver_bytes_per_second: total.receiver.bits_per_second / 8.0,
                loss_ratio: loss_ratio(total, run),
                sender_cpu: cpu(run, flow.sender()),
                receiver_cpu: cpu(run, flow.receiver()),
            });
        }
        if directions.is_empty() && r.sum.receiver.bytes > 0 {
            // A document without per-flow totals: the sums, in the spec's direction.
            let flow = match run.spec.direction {
                crate::model::Direction::Reverse => DIRECTIONS[1],
                _ => DIRECTIONS[0],
            };
            directions.push(DirectionFigures {
                direction: flow.1,
                sender_bytes_per_second: r.sum.sender.bits_per_second / 8.0,
                receiver_bytes_per_second: r.sum.receiver.bits_per_second / 8.0,
                loss_ratio: None,
                sender_cpu: cpu(run, flow.0.sender()),
                receiver_cpu: cpu(run, flow.0.receiver()),
            });
        }
        RunFigures {
            workload: run.workload.clone(),
            directions,
            rtt: rtt(run),
            started_at_unix_seconds: run.started_at_unix_seconds,
        }
    }
}

/// The share of one direction's offer that was lost, as the workload
/// counts loss (datagrams, transactions).
fn loss_ratio(total: &FlowTotal, run: &RunResult) -> Option<f64> {
    crate::workload::results_of(&run.workload).loss_ratio(total, &run.result)
}

fn cpu(run: &RunResult, party: Party) -> Option<CpuFigures> {
    let c: &CpuReport = match party {
        Party::Client => &run.result.cpu.client,
        Party::Agent => &run.result.cpu.agent,
    };
    // A peer that measured only its own process (iperf3) has no host-wide figures.
    if c.logical_cpus == 0 {
        return None;
    }
    Some(CpuFigures {
        utilization_ratio: c.utilization_percent / 100.0,
        service_demand_seconds_per_byte: c.service_demand_us_per_kb.map(|d| d / 1024.0 / 1e6),
        service_demand_seconds_per_transaction: c.service_demand_us_per_transaction.map(|d| d / 1e6),
    })
}

fn rtt(run: &RunResult) -> Option<RttFigures> {
    let r = crate::workload::results_of(&run.workload).round_trips(&run.result)?;
    Some(RttFigures {
        p50_seconds: r.p50_seconds,
        p90_seconds: r.p90_seconds,
        p99_seconds: r.p99_seconds,
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn fixture(name: &str) -> RunResult {
        let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
    }

    #[test]
    fn tcp_forward_is_one_direction_in_bytes_per_second_with_both_ends_cpu() {
        let run = fixture("run-tcp.json");
        let f = RunFigures::of(&run);
        assert_eq!(f.directions.len(), 1);
        let d = &f.directions[0];
        assert_eq!(d.direction, "forward");
        assert_eq!(d.receiver_bytes_per_second, 38008844786.30838 / 8.0);
        assert_eq!(d.sender_bytes_per_second, 38019382777.47795 / 8.0);
        assert_eq!(d.loss_ratio, None);
        let sender = d.sender_cpu.as_ref().unwrap();
        assert_eq!(sender.utilization_ratio, 1.0);
        assert_eq!(
            sender.service_demand_seconds_per_byte,
            Some(0.45879859387923905 / 1024.0 / 1e6)
        );
        assert_eq!(
            d.receiver_cpu.as_ref().unwrap().utilization_ratio,
            run.result.cpu.agent.utilization_percent / 100.0
        );
        assert!(f.rtt.is_none());
    }

    #[test]
    fn udp_bidir_has_both_directions_with_their_loss() {
        let mut run = fixture("run-udp-bidir.json");
        let f = RunFigures::of(&run);
        let names: Vec<_> = f.directions.iter().map(|d| d.direction).collect();
        assert_eq!(names, ["forward", "reverse"]);
        assert_eq!(f.directions[1].receiver_bytes_per_second, 49987703.22745992 / 8.0);
        assert_eq!(f.directions[0].loss_ratio, Some(0.0));
        // The reverse direction's sender is the agent.
        assert_eq!(
            f.directions[1].sender_cpu.as_ref().unwrap().utilization_ratio,
            run.result.cpu.agent.utilization_percent / 100.0
        );
        let mut udp = run.result.sum.agent_to_client.as_ref().unwrap().extras.raw()["udp"].clone();
        udp["loss_percent"] = serde_json::json!(2.5);
        run.result.sum.agent_to_client.as_mut().unwrap().extras.set("udp", &udp);
        assert_eq!(RunFigures::of(&run).directions[1].loss_ratio, Some(0.025));
    }

    #[test]
    fn rr_has_rtt_in_seconds_and_transaction_loss() {
        let run = fixture("run-rr.json");
        let f = RunFigures::of(&run);
        let rtt = f.rtt.unwrap();
        assert_eq!(rtt.p50_seconds, 13.335 / 1e6);
        assert_eq!(rtt.p90_seconds, 16.399 / 1e6);
        assert_eq!(rtt.p99_seconds, 49.023 / 1e6);
        assert_eq!(f.directions[0].loss_ratio, Some(0.0));
        assert_eq!(
            f.directions[0]
                .sender_cpu
                .as_ref()
                .unwrap()
                .service_demand_seconds_per_transaction,
            Some(90.43408360128618 / 1e6)
        );
    }

    #[test]
    fn a_peer_without_host_cpu_gives_no_cpu_figures() {
        let mut run = fixture("run-tcp.json");
        run.result.cpu.agent.logical_cpus = 0;
        let f = RunFigures::of(&run);
        assert!(f.directions[0].receiver_cpu.is_none());
        assert!(f.directions[0].sender_cpu.is_some());
    }
}
