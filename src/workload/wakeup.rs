//! What a wake-up on another core costs this host: a short TCP ping-pong
//! of 1 KiB over loopback between two threads of this process, once with
//! both on one core and once on two. A small message's round trip pays two
//! wake-ups (one per direction), so half the difference is one wake-up.
//! On one VM this was 50 us a wake-up: a sweep pinned apart read 58 us at
//! 1 KiB where one left to the scheduler read 8 us (issue 42). The sweep
//! and rr report it beside their results as a fact of the host, so a
//! reader can tell a placement's cost from the stack's.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::thread;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::workload::runner::pin_current_thread;

/// Bytes per message of the probe.
pub const PROBE_BYTES: usize = 1024;
/// Round trips per timed batch, batches per placement; the fastest batch
/// counts, as for the sweep's points.
const PER_BATCH: u32 = 20;
const BATCHES: u32 = 10;
/// Round trips before timing (connections, caches, frequency).
const WARMUP: u32 = 20;

/// The probe's two round trips and the wake-up they imply.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WakeupCost {
    /// The two cores: the first alone, then the first and the second.
    pub cores: [u32; 2],
    /// Round trip of 1 KiB each way with both ends on the first core.
    pub together_round_trip_us: f64,
    /// The same with the ends on the two cores.
    pub apart_round_trip_us: f64,
    /// Half the difference (two wake-ups per round trip), at least 0.
    pub cross_core_wakeup_us: f64,
}

impl WakeupCost {
    /// "a wake-up on another core costs X us here (1 KiB round trip ...)",
    /// for the text of the workloads that report it.
    pub fn describe(&self) -> String {
        format!(
            "a wake-up on another core costs {:.1} us here (1 KiB round trip {:.1} us with both ends on core {} \
             and {:.1} us on cores {} and {})",
            self.cross_core_wakeup_us,
            self.together_round_trip_us,
            self.cores[0],
            self.apart_round_trip_us,
            self.cores[0],
            self.cores[1]
        )
    }
}

/// The two cores a probe (and a sweep by turns) uses when nobody chose
/// any: the first two of `allowed`, in order. None with fewer than two.
pub fn first_two(allowed: &[u32]) -> Option<(u32, u32)> {
    match allowed {
        [first, second, ..] => Some((*first, *second)),
        _ => None,
    }
}

/// Measures both placements on `cores`; None when a thread could not be
/// pinned (a cpuset without one of them) or the loopback pair failed.
pub fn probe(cores: (u32, u32)) -> Option<WakeupCost> {
    let together = round_trip_us(cores.0, cores.0)?;
    let apart = round_trip_us(cores.0, cores.1)?;
    Some(WakeupCost {
        cores: [cores.0, cores.1],
        together_round_trip_us: together,
        apart_round_trip_us: apart,
        cross_core_wakeup_us: one_wakeup_us(together, apart),
    })
}

/// One wake-up, from the round trips with both ends on one core and on
/// two: half their difference (a round trip pays two), at least 0 (a
/// second core that is faster pays no wake-up worth naming).
fn one_wakeup_us(together_round_trip_us: f64, apart_round_trip_us: f64) -> f64 {
    ((apart_round_trip_us - together_round_trip_us) / 2.0).max(0.0)
}

/// The fastest batch's round trip, in microseconds, between a thread on
/// `initiator` and an echoing thread on `echo`.
fn round_trip_us(initiator: u32, echo: u32) -> Option<f64> {
    // The pair is made before any thread starts (the kernel completes the
    // connection from the backlog), so no thread can wait for a peer that
    // never comes; a failing thread closes its end, which ends the other.
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).ok()?;
    let mut near = TcpStream::connect(listener.local_addr().ok()?).ok()?;
    let (mut far, _) = listener.accept().ok()?;
    near.set_nodelay(true).ok()?;
    far.set_nodelay(true).ok()?;
    let echoing = thread::Builder::new()
        .name("wakeup-echo".into())
        .spawn(move || -> Option<()> {
            pin_current_thread(echo).error.is_none().then_some(())?;
            let mut buffer = [0u8; PROBE_BYTES];
            for _ in 0..WARMUP + PER_BATCH * BATCHES {
                far.read_exact(&mut buffer).ok()?;
                far.write_all(&buffer).ok()?;
            }
            Some(())
        })
        .ok()?;
    let timing = thread::Builder::new()
        .name("wakeup-probe".into())
        .spawn(move || -> Option<f64> {
            pin_current_thread(initiator).error.is_none().then_some(())?;
            let mut buffer = [7u8; PROBE_BYTES];
            let mut exchange = |stream: &mut TcpStream| -> Option<()> {
                stream.write_all(&buffer).ok()?;
                stream.read_exact(&mut buffer).ok()
            };
            for _ in 0..WARMUP {
                exchange(&mut near)?;
            }
            let mut best = f64::INFINITY;
            for _ in 0..BATCHES {
                let start = Instant::now();
                for _ in 0..PER_BATCH {
                    exchange(&mut near)?;
                }
                best = best.min(start.elapsed().as_secs_f64() * 1e6 / f64::from(PER_BATCH));
            }
            Some(best)
        });
    let best = match timing {
        Ok(handle) => handle.join().ok().flatten(),
        // `near` went down with the closure: the echo's read ends.
        Err(_) => None,
    };
    let echoed = echoing.join().ok().flatten();
    best.filter(|_| echoed.is_some())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the probe controls: both round trips are measured and the
    /// wake-up is half their difference, never below 0. Their sizes are the
    /// host's (not asserted).
    #[test]
    fn the_first_two_allowed_cores_are_the_probes() {
        assert_eq!(first_two(&[0, 1]), Some((0, 1)));
        assert_eq!(first_two(&[2, 5, 7]), Some((2, 5)));
        assert_eq!(first_two(&[3]), None);
        assert_eq!(first_two(&[]), None);
    }

    #[test]
    fn the_wakeup_is_half_the_difference_of_two_round_trips_and_never_negative() {
        assert_eq!(one_wakeup_us(8.0, 108.0), 50.0);
        assert_eq!(one_wakeup_us(20.0, 21.0), 0.5);
        // Apart faster than together: no wake-up cost, not a negative one.
        assert_eq!(one_wakeup_us(30.0, 10.0), 0.0);
    }

    #[test]
    fn the_probe_times_both_placements_on_the_cores_it_was_given() {
        let Some(cost) = probe((0, 0)) else {
            panic!("core 0 could not be pinned on this host")
        };
        assert_eq!(cost.cores, [0, 0]);
        assert!(
            cost.together_round_trip_us > 0.0 && cost.apart_round_trip_us > 0.0,
            "{cost:?}"
        );
        // A core this host does not have cannot be pinned.
        assert_eq!(probe((0, 100_000)), None);
    }
}
