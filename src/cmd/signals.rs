//! Ctrl-C and SIGTERM: the first one asks the running test to stop and
//! still report; a second one exits at once. Handlers are installed with
//! `signal-hook` (sigaction, chained with any other handler), not
//! `libc::signal`.

use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::{Handle, Signals};

/// The first stop signal that arrived, 0 before any.
static SIGNAL: AtomicI32 = AtomicI32::new(0);

/// Exit code of a second stop signal (128 + SIGINT, as a shell reports it).
const EXIT_AT_ONCE: i32 = 130;

/// Installs the client's handlers for SIGINT and SIGTERM: the run loop
/// reads [`client_stop_reason`] between its steps.
pub fn install() {
    for signal in [SIGINT, SIGTERM] {
        // SAFETY: the action only touches an atomic and calls _exit (via
        // signal-hook's low_level::exit), both async-signal-safe.
        let registered = unsafe {
            signal_hook::low_level::register(signal, move || {
                if SIGNAL.swap(signal, Ordering::SeqCst) != 0 {
                    signal_hook::low_level::exit(EXIT_AT_ONCE);
                }
            })
        };
        if let Err(e) = registered {
            log::warn!("cannot handle signal {signal} ({e}): Ctrl-C will end the test without a report");
        }
    }
}

/// True once SIGINT or SIGTERM arrived.
pub fn interrupted() -> bool {
    SIGNAL.load(Ordering::Relaxed) != 0
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
    pub fn watch(shutdown: Arc<AtomicBool>) -> std::io::Result<AgentSignals> {
        let mut signals = Signals::new([SIGINT, SIGTERM])?;
        let handle = signals.handle();
        let thread = std::thread::Builder::new().name("signals".into()).spawn(move || {
            for signal in signals.forever() {
                if SIGNAL.swap(signal, Ordering::SeqCst) != 0 {
                    std::process::exit(EXIT_AT_ONCE);
                }
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
