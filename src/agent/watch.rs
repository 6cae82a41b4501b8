//! The agent's side of `nicbench watch --peer`: after `watch_start` it
//! samples its CPU (every core, with softirq and irq) and the counters of
//! the interface toward the client until `watch_stop`, then sends its side
//! as `done {report}`. It holds a test slot meanwhile (others are told
//! `busy`, as during a test, with no known end), and it is bounded: the
//! client closing the connection ends sampling at once, the agent's
//! `--max-duration` ends it with an error, and so does a shutdown.

use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::{unexpected, Refusal, Shared};
use crate::model::{Party, ProcessCpu, SideReport};
use crate::probe::counters::CounterProbe;
use crate::probe::cpu::{cpu_report, CpuSampler, ProcStat};
use crate::probe::host::facts_toward;
use crate::protocol::channel::Channel;
use crate::protocol::{Message, ProtocolError};

/// How often the agent looks at its shutdown flag and the deadline while
/// it waits for `watch_stop`.
const POLL: Duration = Duration::from_millis(200);

/// Serves one `watch_start` (already received) to its `watch_stop`.
pub(super) fn serve(channel: &mut Channel, peer: SocketAddr, local_ip: IpAddr, shared: &Shared) -> Result<(), Refusal> {
    let max_seconds = shared.config.limits.max_duration_seconds;
    let bound = Duration::from_secs_f64(max_seconds.clamp(0.0, 1e9));
    let ticket = match shared.admission.try_enter(bound) {
        Ok(ticket) => ticket,
        Err(busy) => {
            channel.send(&Message::Busy {
                seconds_left: busy.seconds_left,
                running_seconds: busy.running_seconds,
            })?;
            return Err(Refusal::Busy("busy, a watch was told to come back later".into()));
        }
    };
    if shared.shutdown.load(Ordering::Relaxed) {
        return Err(Refusal::Tell("the agent is shutting down".into()));
    }
    // No known end: a client asking meanwhile hears how long it has run.
    ticket.started(None, None);
    let probe = CounterProbe::for_local_address(Some(local_ip));
    let sampler = ProcStat;
    let counters_before = probe.snapshot();
    let cpu_before = sampler
        .sample()
        .map_err(|e| Refusal::Tell(format!("the agent cannot read /proc/stat: {e}")))?;
    let start = Instant::now();
    channel.send(&Message::WatchStarted {
        agent: facts_toward(local_ip),
        max_seconds,
    })?;
    log::info!(
        "{peer}: watch: sampling CPU and {} (at most {max_seconds:.0} s)",
        probe.interface.as_deref().unwrap_or("no interface")
    );
    let deadline = start + bound;
    loop {
        if shared.shutdown.load(Ordering::Relaxed) {
            return Err(Refusal::Tell(
                "the agent is shutting down (SIGTERM or SIGINT on its host): its side of the watch was not kept".into(),
            ));
        }
        let now = Instant::now();
        if now >= deadline {
            return Err(Refusal::Tell(format!(
                "the watch lasted longer than this agent allows ({max_seconds:.0} s, its --max-duration): \
                 it stopped sampling; watch shorter commands or ask for a larger --max-duration"
            )));
        }
        match channel.recv(POLL.min(deadline - now), "watch_stop") {
            Ok(Message::WatchStop) => break,
            Ok(other) => return Err(unexpected("watch_stop", &other)),
            Err(ProtocolError::Timeout { .. }) => continue,
            Err(ProtocolError::Closed(_)) | Err(ProtocolError::Io(_)) => {
                return Err(Refusal::Quiet(format!(
                    "left during its watch after {:.1} s; sampling stopped",
                    start.elapsed().as_secs_f64()
                )));
            }
            Err(other) => return Err(other.into()),
        }
    }
    let seconds = start.elapsed().as_secs_f64();
    let cpu_after = sampler
        .sample()
        .map_err(|e| Refusal::Tell(format!("the agent cannot read /proc/stat: {e}")))?;
    let counters = probe.delta(&counters_before, &probe.snapshot());
    let moved = counters.nic.as_ref().map_or(0, |n| n.rx_bytes + n.tx_bytes);
    let cpu = cpu_report(
        &cpu_before,
        &cpu_after,
        sampler.ticks_per_second(),
        seconds,
        ProcessCpu::default(),
        moved,
    );
    let report = SideReport {
        host: Party::Agent,
        streams: Vec::new(),
        cpu,
        counters: Some(counters),
        overlapped_tests: ticket.overlapped(),
        links: Vec::new(),
    };
    drop(ticket);
    shared.stats.tests_served.fetch_add(1, Ordering::Relaxed);
    channel.send(&Message::Done { report })?;
    log::info!("{peer}: watch done after {seconds:.1} s");
    Ok(())
}
