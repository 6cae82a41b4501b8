//! rr's part of `nicbench rr` beyond its spec: the warning when `--spin`
//! measured the scheduler rather than the network.

use super::result::{RrResult, KEY};
use super::RrParams;
use crate::model::RunResult;
use crate::workload::args::Around;

/// Around a request/response test.
pub struct RrAround;

impl Around for RrAround {
    fn cautions(&self, run: &RunResult) -> Vec<String> {
        spin_defeats_itself(run).into_iter().collect()
    }
}

/// Why `--spin` measured the scheduler rather than the network, when it
/// did: client and agent on one host, with no core left over beside the
/// threads that spin (a requester and a responder per flow). A spinning
/// thread never sleeps, so the kernel's network work and the other end
/// wait for it to be preempted: the median stays low, the tail does not.
fn spin_defeats_itself(run: &RunResult) -> Option<String> {
    let params: RrParams = run.spec.params().ok()?;
    if !params.spin || !run.shared_host() {
        return None;
    }
    let (client, agent) = (&run.spec.client.cpus, &run.spec.agent.cpus);
    let cores = if client.is_empty() || agent.is_empty() {
        run.result.cpu.client.logical_cpus as usize
    } else {
        let mut both: Vec<u32> = client.iter().chain(agent).copied().collect();
        both.sort_unstable();
        both.dedup();
        both.len()
    };
    let spinning = 2 * run.spec.streams as usize;
    if cores == 0 || spinning < cores {
        return None;
    }
    let tail = run
        .result
        .sum
        .extras
        .get::<RrResult>(KEY)
        .and_then(|rr| rr.latency)
        .map(|l| format!(" (here p50 {:.1} us, p99 {:.1} us)", l.p50_us, l.p99_us))
        .unwrap_or_default();
    Some(format!(
        "--spin: client and agent share this host's {cores} core{}, and {spinning} threads spin on them \
         (a requester and a responder per flow): no core is left for the kernel's network work, so the \
         ends wait to be scheduled and the tail latency measures the scheduler{tail}; spin with fewer \
         flows than half the cores, or run the agent on another host",
        if cores == 1 { "" } else { "s" }
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(spin: bool, cpus: &[u32]) -> RunResult {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/run-rr.json");
        let mut run: RunResult = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let mut params: RrParams = run.spec.params().unwrap();
        params.spin = spin;
        run.spec.set_params(&params).unwrap();
        run.spec.client.cpus = cpus.to_vec();
        run.spec.agent.cpus = cpus.to_vec();
        run
    }

    /// Regression: `rr --spin` with both ends on 2 shared cores gave p50
    /// 8 us but p99 12 ms without a word.
    #[test]
    fn spinning_on_no_more_cores_than_spinning_threads_on_one_host_is_warned() {
        // The fixture: 2 flows on one host (loopback) of 2 cores.
        let run = fixture(true, &[]);
        assert_eq!(run.result.cpu.client.logical_cpus, 2);
        let why = spin_defeats_itself(&run).expect("a warning");
        assert!(why.contains("2 cores") && why.contains("4 threads spin"), "{why}");
        assert!(why.contains("p99"), "{why}");
        assert_eq!(spin_defeats_itself(&fixture(false, &[])), None);
        // Pinned to 8 cores, 4 spinning threads leave cores free.
        assert_eq!(spin_defeats_itself(&fixture(true, &[0, 1, 2, 3, 4, 5, 6, 7])), None);
        let mut apart = fixture(true, &[]);
        apart.agent.facts.boot_id = "another-host".into();
        apart.agent.facts.hostname = "b".into();
        assert_eq!(spin_defeats_itself(&apart), None);
    }
}
