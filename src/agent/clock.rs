//! The agent's half of the clock exchanges (feature `clock`, docs/CLOCKS.md):
//! each `clock_request` answered with this host's readings at its receipt
//! and at the reply, before a test request (from the control loop) and
//! after `done`.

use std::time::Duration;

use crate::protocol::channel::Channel;
use crate::protocol::{self, Message, ProtocolError};

/// Answers one `clock_request` read at `received_ns` (this host's clock).
pub(super) fn answer(channel: &mut Channel, client_sent_ns: i64, received_ns: i64) -> Result<(), ProtocolError> {
    channel.send(&Message::ClockReply {
        client_sent_ns,
        received_ns,
        sent_ns: crate::probe::clock::realtime_ns(),
    })
}

/// After `done`: answers the client's clock requests (at most
/// [`protocol::MAX_CLOCK_REQUESTS`]) until it closes, sends anything else,
/// or leaves [`CLOCK_AFTER_WAIT`] between two. The test is over, so nothing
/// here can fail it: an older client simply closes.
pub(super) fn serve_after(channel: &mut Channel) {
    for _ in 0..protocol::MAX_CLOCK_REQUESTS {
        let Ok(message) = channel.recv(CLOCK_AFTER_WAIT, "clock_request or the end") else {
            return;
        };
        let received_ns = crate::probe::clock::realtime_ns();
        match message {
            Message::ClockRequest { sent_ns } => {
                if answer(channel, sent_ns, received_ns).is_err() {
                    return;
                }
            }
            other => {
                log::debug!("after done: '{}' instead of clock_request; closing", other.kind());
                return;
            }
        }
    }
}

/// How long the agent waits after `done` for the client's next clock
/// request before it closes the connection.
const CLOCK_AFTER_WAIT: Duration = Duration::from_secs(5);
