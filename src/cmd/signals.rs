//! Ctrl-C and SIGTERM: the first one asks the running test to stop and
//! still report; a second one exits at once. Handlers are installed with
//! `signal-hook` (sigaction, chained with any other handler), not
//! `libc::signal`.
//!
//! One stop can arrive twice: `timeout -s INT 2 nicbench ...` sends SIGINT
//! to nicbench and then to its whole process group, nicbench included. That
//! echo is not a second Ctrl-C: a signal sent by the same process as the
//! first one within [`ECHO_WINDOW`] is ignored ([`is_echo`]). A second
//! Ctrl-C at a terminal comes from the kernel (no sender process), and a
//! second `kill` from another command from another process: both still
//! exit at once.

use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::sync::Arc;
use std::sync::Once;
use std::thread::JoinHandle;
use std::time::Duration;

use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::{Handle, Signals};

/// The first stop signal that arrived, 0 before any.
static SIGNAL: AtomicI32 = AtomicI32::new(0);
/// The process that sent the first stop signal, 0 when the kernel did (a
/// terminal's Ctrl-C).
static FIRST_SENDER: AtomicI32 = AtomicI32::new(0);
/// When the first stop signal arrived (CLOCK_MONOTONIC, nanoseconds).
static FIRST_AT_NANOS: AtomicU64 = AtomicU64::new(0);

/// Exit code of a second stop signal (128 + SIGINT, as a shell reports it).
const EXIT_AT_ONCE: i32 = 130;

/// How long a signal from the first one's sender counts as the same stop
/// delivered again (to the process and then to its group).
pub const ECHO_WINDOW: Duration = Duration::from_secs(1);

/// Where a stop signal came from and when it arrived.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Arrival {
    /// The sending process (kill, sigqueue), None when the kernel sent it.
    pub sender: Option<i32>,
    /// Nanoseconds on the monotonic clock.
    pub at_nanos: u64,
}

/// True when `next` is the first stop delivered again (the same sending
/// process within [`ECHO_WINDOW`]) rather than a second request to stop.
pub fn is_echo(first: Arrival, next: Arrival) -> bool {
    match (first.sender, next.sender) {
        (Some(a), Some(b)) => a == b && next.at_nanos.saturating_sub(first.at_nanos) < ECHO_WINDOW.as_nanos() as u64,
        _ => false,
    }
}

/// The monotonic clock in nanoseconds; clock_gettime is async-signal-safe.
fn monotonic_nanos() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime fills the timespec it is given.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Where a signal came from, from its siginfo.
fn arrival_of(info: &libc::siginfo_t) -> Arrival {
    let sent = matches!(info.si_code, libc::SI_USER | libc::SI_QUEUE | libc::SI_TKILL);
    // SAFETY: si_pid is filled in for signals sent by a process (the codes above).
    let sender = sent.then(|| unsafe { info.si_pid() });
    Arrival {
        sender,
        at_nanos: monotonic_nanos(),
    }
}

/// Records a stop signal; true when it is a second request to stop (exit
/// at once), false for the first one and for its echo. Async-signal-safe.
fn record(signal: i32, arrival: Arrival) -> bool {
    match SIGNAL.compare_exchange(0, signal, Ordering::SeqCst, Ordering::SeqCst) {
        Ok(_) => {
            FIRST_SENDER.store(arrival.sender.unwrap_or(0), Ordering::SeqCst);
            FIRST_AT_NANOS.store(arrival.at_nanos.max(1), Ordering::SeqCst);
            false
        }
        // The first one's handler, on another thread, has not recorded its
        // arrival yet: this came within nanoseconds of it, from `timeout`.
        Err(_) if FIRST_AT_NANOS.load(Ordering::SeqCst) == 0 => false,
        Err(_) => {
            let sender = FIRST_SENDER.load(Ordering::SeqCst);
            let first = Arrival {
                sender: (sender != 0).then_some(sender),
                at_nanos: FIRST_AT_NANOS.load(Ordering::SeqCst),
            };
            !is_echo(first, arrival)
        }
    }
}

/// Whether a second stop ends the process at once (a measuring command),
/// or is recorded for a plan to end its case in flight and still put back
/// what it changed ([`install_for_plan`]).
static SECOND_EXITS: AtomicBool = AtomicBool::new(true);
/// A second request to stop arrived and did not end the process.
static SECOND: AtomicBool = AtomicBool::new(false);

/// What a request to stop after the first does: true when it ends the
/// process at once -- a measuring command's second stop, a plan's third.
/// Async-signal-safe.
fn again_exits() -> bool {
    SECOND_EXITS.load(Ordering::SeqCst) || SECOND.swap(true, Ordering::SeqCst)
}

/// Installs the client's handlers for SIGINT and SIGTERM (once per
/// process): the run loop reads [`client_stop_reason`] between its steps.
pub fn install() {
    static INSTALLED: Once = Once::new();
    INSTALLED.call_once(|| {
        for signal in [SIGINT, SIGTERM] {
            // SAFETY: the action only touches atomics, reads the clock and
            // calls _exit (via signal-hook's low_level::exit), all
            // async-signal-safe.
            let registered = unsafe {
                signal_hook_registry::register_sigaction(signal, move |info: &libc::siginfo_t| {
                    if record(signal, arrival_of(info)) && again_exits() {
                        signal_hook::low_level::exit(EXIT_AT_ONCE);
                    }
                })
            };
            if let Err(e) = registered {
                log::warn!("cannot handle signal {signal} ({e}): Ctrl-C will end the test without a report");
            }
        }
    });
}

/// The handlers of `nicbench run`, whose cases run in its process: the
/// first stop stops the case in flight (which saves what it measured) and
/// starts no further case; a second ends the case at once
/// ([`stopped_at_once`]) while the plan still stops its monitors, puts
/// back what it changed and writes its summary, as when each case was a
/// child process the plan outlived; a third ends the process at once.
pub fn install_for_plan() {
    SECOND_EXITS.store(false, Ordering::SeqCst);
    install();
}

/// True once SIGINT or SIGTERM arrived.
pub fn interrupted() -> bool {
    SIGNAL.load(Ordering::Relaxed) != 0
}

/// True once a second request to stop arrived under [`install_for_plan`]:
/// the case in flight is left, not waited for.
pub fn stopped_at_once() -> bool {
    SECOND.load(Ordering::SeqCst)
}

/// Why a client's test must stop, once a signal arrived: the words that go
/// into the result (`interruption.reason`).
pub fn client_stop_reason() -> Option<String> {
    match SIGNAL.load(Ordering::Relaxed) {
        0 => None,
        libc::SIGINT => Some("SIGINT, Ctrl-C, on the client".into()),
        libc::SIGTERM => Some("SIGTERM on the client".into()),
        other => Some(format!("signal {other} on the client")),
    }
}

/// The agent's watcher: a thread that sleeps until SIGINT or SIGTERM
/// arrives (no polling), then raises `shutdown` and says so; a second
/// signal exits at once. Owned by the caller, who stops and joins it with
/// [`AgentSignals::stop`] when the agent has stopped.
pub struct AgentSignals {
    handle: Handle,
    thread: JoinHandle<()>,
}

impl AgentSignals {
    /// The agent's handlers record where each stop came from (as the
    /// client's do, so `timeout`'s echo is not a second stop); the thread
    /// says so and raises `shutdown`.
    pub fn watch(shutdown: Arc<AtomicBool>) -> std::io::Result<AgentSignals> {
        for signal in [SIGINT, SIGTERM] {
            // SAFETY: as in `install`: atomics, the clock and _exit only.
            unsafe {
                signal_hook_registry::register_sigaction(signal, move |info: &libc::siginfo_t| {
                    if record(signal, arrival_of(info)) {
                        signal_hook::low_level::exit(EXIT_AT_ONCE);
                    }
                })
            }?;
        }
        // Wakes the thread; the handlers above decide.
        let mut signals = Signals::new([SIGINT, SIGTERM])?;
        let handle = signals.handle();
        let thread = std::thread::Builder::new().name("signals".into()).spawn(move || {
            if signals.forever().next().is_some() {
                log::warn!("signal received: finishing the running test, then stopping (again to exit at once)");
                shutdown.store(true, Ordering::Relaxed);
            }
        })?;
        Ok(AgentSignals { handle, thread })
    }

    /// Stops watching and joins the thread.
    pub fn stop(self) {
        self.handle.close();
        let _ = self.thread.join();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn sent(pid: i32, ms: u64) -> Arrival {
        Arrival {
            sender: Some(pid),
            at_nanos: ms * MS,
        }
    }

    #[test]
    fn the_same_senders_signal_at_once_is_the_first_stop_again() {
        // `timeout` signals the process, then its group: same sender.
        assert!(is_echo(sent(700, 10), sent(700, 10)));
        assert!(is_echo(sent(700, 10), sent(700, 900)));
    }

    #[test]
    fn a_second_ctrl_c_or_another_senders_signal_is_a_second_stop() {
        let terminal = |ms| Arrival {
            sender: None,
            at_nanos: ms * MS,
        };
        assert!(!is_echo(terminal(10), terminal(20)));
        assert!(!is_echo(sent(700, 10), terminal(20)));
        assert!(!is_echo(terminal(10), sent(700, 20)));
        assert!(!is_echo(sent(700, 10), sent(701, 20)));
        // The same sender again, later: a script's second `kill`.
        assert!(!is_echo(sent(700, 10), sent(700, 10 + 1000)));
    }
}
