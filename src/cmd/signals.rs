//! Ctrl-C and SIGTERM: the first one asks the running test to stop and
//! still report; a second one exits at once.

use std::sync::atomic::{AtomicI32, Ordering};

/// The first stop signal that arrived, 0 before any.
static SIGNAL: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_signal(signal: libc::c_int) {
    if SIGNAL.swap(signal, Ordering::SeqCst) != 0 {
        // SAFETY: _exit is async-signal-safe.
        unsafe { libc::_exit(130) };
    }
}

/// Installs the handlers for SIGINT and SIGTERM.
pub fn install() {
    // SAFETY: the handler only touches an atomic and calls _exit.
    unsafe {
        libc::signal(libc::SIGINT, on_signal as *const () as libc::sighandler_t);
        libc::signal(libc::SIGTERM, on_signal as *const () as libc::sighandler_t);
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
