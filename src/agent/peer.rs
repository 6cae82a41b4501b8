//! Peer tests: the agent as the client of a test toward another agent, for
//! an authenticated coordinator (`nicbench mesh`).
//!
//! This is the one place where somebody else makes this host send traffic,
//! so every condition is checked before a byte of test data leaves:
//!
//! 1. the operator allowed it (`serve --allow-peer-tests`, which needs
//!    `--psk-file`), and the coordinator proved the key (the handshake
//!    before this request);
//! 2. the test is a throughput or latency test (tcp, udp, rr) within this
//!    agent's limits (duration, streams, message size, and the rate as the
//!    workload reads its parameters: none set is unlimited), with no
//!    `--links` and no local options that name this host's resources;
//! 3. the target answers as a nicbench agent *and proves it knows the same
//!    key* (hello and mutual authentication on the control connection)
//!    before any data connection is opened; data goes only to the address
//!    that control connection reached;
//! 4. this agent holds its own test slot while it runs, so it never serves
//!    another test (or a second peer test) at the same time; the test is
//!    stopped when the slot's time and grace have passed.

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::run::{admit, queue_wait};
use super::{stream_closed, Refusal, Shared};
use crate::metrics::PeerTestOutcome;
use crate::protocol::channel::Channel;
use crate::protocol::Message;
use crate::session::{self, RunOptions, Target};
use crate::workload::{self, TestSpec};

/// How long the agent waits for the target to accept its connection.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Time a peer test may take besides its own and its wait in line: the
/// control connection, the handshake and the data connections.
const PEER_SETUP: Duration = Duration::from_secs(20);

/// Why a peer test is refused before anything is sent: checked in order,
/// each in words for the coordinator's user.
pub(super) fn check_request(shared: &Shared, target: &str, spec: &TestSpec) -> Result<(String, u16), String> {
    if !shared.config.allow_peer_tests {
        return Err(
            "this agent does not run tests toward other agents: start it with --allow-peer-tests \
                    (and --psk-file) to let an authenticated coordinator (nicbench mesh) use it"
                .into(),
        );
    }
    if shared.config.psk.is_none() {
        return Err(
            "this agent runs peer tests only for an authenticated coordinator: start it with --psk-file".into(),
        );
    }
    if !workload::find(&spec.workload).is_ok_and(|w| w.peer_tests()) {
        return Err(format!(
            "a peer test runs {}; '{}' is not one of them",
            workload::peer_test_names().collect::<Vec<_>>().join(", "),
            spec.workload
        ));
    }
    if !spec.links.is_empty() {
        return Err("a peer test runs over one path; --links is not allowed".into());
    }
    if !spec.client.cpus.is_empty() {
        return Err("a peer test may not pin this agent's CPUs (-A/--affinity); drop it".into());
    }
    let workload = workload::find(&spec.workload).map_err(|e| e.to_string())?;
    workload.validate(spec).map_err(|e| e.to_string())?;
    shared.config.limits.check_offered(spec, workload.offered_rate(spec))?;
    shared
        .config
        .limits
        .check_memory(spec, workload.agent_memory_bytes(spec))?;
    let (host, port) = crate::address::split_host_port(target).map_err(|e| e.to_string())?;
    let port =
        port.ok_or_else(|| format!("peer test target '{target}' has no port; the coordinator sends HOST:PORT"))?;
    if host.is_empty() || host.len() > 253 {
        return Err(format!("peer test target '{target}' has no valid host name"));
    }
    Ok((host, port))
}

/// Runs one peer test for the coordinator on `channel` and answers with
/// the run, or refuses in words.
pub(super) fn serve(
    channel: &mut Channel,
    coordinator: SocketAddr,
    shared: &Shared,
    target: String,
    spec: TestSpec,
    wait_seconds: f64,
) -> Result<(), Refusal> {
    let metrics = crate::metrics::AgentMetrics::global();
    let (host, port) = check_request(shared, &target, &spec).map_err(|reason| {
        shared.stats.peer_tests_refused.fetch_add(1, Ordering::Relaxed);
        metrics.peer_test(&spec.workload, PeerTestOutcome::Refused);
        Refusal::Tell(reason)
    })?;
    let wait_seconds = queue_wait(wait_seconds);
    let ticket = admit(channel, shared, &spec, wait_seconds)?;
    // Its time here: the wait in the target's line, the connections and
    // the test itself; the slot ends with it (and the grace).
    ticket.started(
        Some(Duration::from_secs_f64(spec.expected_seconds() + wait_seconds) + PEER_SETUP),
        None,
    );
    let psk = shared.config.psk.as_ref().expect("checked above");
    let peer_target = Target {
        host,
        port,
        family: None,
        bind: None,
        connect_timeout: CONNECT_TIMEOUT,
        wait: Duration::from_secs_f64(wait_seconds),
        psk_file: None,
    };
    let watch = channel
        .stream()
        .try_clone()
        .map_err(|e| Refusal::Tell(format!("cannot watch the control connection: {e}")))?;
    let interrupted = || {
        if shared.shutdown.load(Ordering::Relaxed) {
            Some("the agent running the peer test is shutting down".to_string())
        } else if stream_closed(&watch) {
            Some("the coordinator closed its connection".to_string())
        } else if ticket.expired() {
            Some("the peer test ran past its time and grace on the agent running it".to_string())
        } else {
            None
        }
    };
    log::info!("{coordinator}: peer test: {} toward {target}", spec.workload);
    let result = session::run_with_psk(
        &peer_target,
        Some(psk),
        true,
        &spec,
        RunOptions {
            interrupted: &interrupted,
            settings: Default::default(),
            on_interval: None,
            on_progress: None,
            trial: 1,
        },
    );
    drop(ticket);
    match result {
        Ok(run) => {
            shared.stats.peer_tests_run.fetch_add(1, Ordering::Relaxed);
            metrics.peer_test(&spec.workload, PeerTestOutcome::Done);
            log::info!("{coordinator}: peer test toward {target} done");
            channel.send(&Message::PeerTestDone { run: Box::new(run) })?;
            Ok(())
        }
        Err(e) => {
            shared.stats.peer_tests_failed.fetch_add(1, Ordering::Relaxed);
            metrics.peer_test(&spec.workload, PeerTestOutcome::Failed);
            Err(Refusal::Tell(format!("the peer test toward {target} failed: {e}")))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{key, shared};
    use super::*;
    use crate::model::spec::tests::spec;

    /// Issue 31: a peer test without a rate was within --max-rate.
    #[test]
    fn a_peer_test_that_sets_no_rate_is_held_to_the_max_rate() {
        let agent = shared(|c| {
            c.allow_peer_tests = true;
            c.psk = Some(key());
            c.limits.max_rate_bits_per_second = Some(1e6);
        });
        let mut rateless = spec("udp");
        rateless.params = serde_json::json!({});
        let words = check_request(&agent, "192.0.2.9:5310", &rateless).unwrap_err();
        assert!(
            words.contains("an unlimited rate") && words.contains("--max-rate"),
            "{words}"
        );
        let words = check_request(&agent, "192.0.2.9:5310", &spec("tcp")).unwrap_err();
        assert!(words.contains("--max-rate"), "{words}");
        let mut paced = spec("udp");
        paced.params = serde_json::json!({ "rate_bits_per_second": 500_000 });
        assert_eq!(
            check_request(&agent, "192.0.2.9:5310", &paced),
            Ok(("192.0.2.9".to_string(), 5310))
        );
    }
}
