//! The client's half of the clock exchanges (docs/CLOCKS.md): a burst of
//! `clock_request`s to an agent offering the `clock` feature before the
//! test request, another after `done`, and what they say of the agent's
//! clock at the trial's middle.

use std::net::SocketAddr;

use super::connect::unexpected;
use super::{SessionError, REPLY_TIMEOUT};
use crate::model::ClockOffset;
use crate::probe::clock::{self, Exchange};
use crate::protocol::channel::Channel;
use crate::protocol::{Hello, Message, FEATURE_CLOCK};

/// Requests in one burst. They go out back to back and cost one round
/// trip: a later request waits behind the earlier ones at the agent, which
/// only widens its interval, and the narrowest of them bounds the offset.
pub const BURST: usize = 8;

/// The exchanges of one trial, when the agent offers them.
pub struct ClockExchanges {
    exchanges: Vec<Exchange>,
}

impl ClockExchanges {
    /// None when the agent does not offer the exchanges (`hello`).
    pub fn offered(hello: &Hello) -> Option<ClockExchanges> {
        hello
            .features
            .iter()
            .any(|f| f == FEATURE_CLOCK)
            .then(|| ClockExchanges {
                exchanges: Vec::with_capacity(2 * BURST),
            })
    }

    /// One burst; an agent that answers anything else, or a reply to no
    /// request of ours, is an error of the protocol.
    pub fn burst(&mut self, channel: &mut Channel, agent: SocketAddr) -> Result<(), SessionError> {
        let mut sent = Vec::with_capacity(BURST);
        for _ in 0..BURST {
            let sent_ns = clock::realtime_ns();
            channel.send(&Message::ClockRequest { sent_ns })?;
            sent.push(sent_ns);
        }
        for _ in 0..BURST {
            let reply = channel.recv(REPLY_TIMEOUT, "clock_reply")?;
            let client_received_ns = clock::realtime_ns();
            match reply {
                Message::ClockReply {
                    client_sent_ns,
                    received_ns,
                    sent_ns,
                } if sent.contains(&client_sent_ns) => self.exchanges.push(Exchange {
                    client_sent_ns,
                    agent_received_ns: received_ns,
                    agent_sent_ns: sent_ns,
                    client_received_ns,
                }),
                Message::ClockReply { client_sent_ns, .. } => {
                    return Err(SessionError::Protocol(crate::protocol::ProtocolError::Malformed(
                        format!(
                            "clock_reply for client time {client_sent_ns} ns, which no clock_request of ours carried"
                        ),
                    )))
                }
                other => return Err(unexpected("clock_reply", other, agent)),
            }
        }
        Ok(())
    }

    /// The burst after `done`. The trial is measured by then, so a failure
    /// here costs only the second burst (and the drift it would measure):
    /// said in the log, not an error.
    pub fn burst_after(&mut self, channel: &mut Channel, agent: SocketAddr) {
        if let Err(e) = self.burst(channel, agent) {
            log::warn!("the clock exchanges after the test failed ({e}); the clock offset rests on those before it");
        }
    }

    /// The agent's clock at client time `at_ns`, as the run records it.
    pub fn recorded(&self, at_ns: i64) -> ClockOffset {
        clock::recorded(&self.exchanges, at_ns)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::MAX_AGENT_FRAME;
    use std::net::{TcpListener, TcpStream};
    use std::time::Duration;

    /// A client channel to an agent thread that answers each request with
    /// what `answer` makes of its reading (None: answer nothing more).
    fn agent_answering(
        answer: impl Fn(i64) -> Message + Send + 'static,
    ) -> (Channel, SocketAddr, std::thread::JoinHandle<()>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let agent = std::thread::spawn(move || {
            let (stream, _) = listener.accept().unwrap();
            let mut channel = Channel::new(stream, MAX_AGENT_FRAME);
            while let Ok(Message::ClockRequest { sent_ns }) = channel.recv(Duration::from_secs(10), "clock_request") {
                if channel.send(&answer(sent_ns)).is_err() {
                    return;
                }
            }
        });
        let client = Channel::new(TcpStream::connect(addr).unwrap(), MAX_AGENT_FRAME);
        (client, addr, agent)
    }

    fn offered() -> ClockExchanges {
        let mut hello = Hello::ours(["tcp"]);
        hello.features.push(FEATURE_CLOCK.into());
        ClockExchanges::offered(&hello).expect("the feature is offered")
    }

    #[test]
    fn an_agent_without_the_feature_gets_no_request() {
        assert!(ClockExchanges::offered(&Hello::ours(["tcp"])).is_none());
    }

    #[test]
    fn two_bursts_on_one_clock_bound_an_offset_of_zero() {
        let (mut channel, addr, agent) = agent_answering(|client_sent_ns| {
            let received_ns = clock::realtime_ns();
            Message::ClockReply {
                client_sent_ns,
                received_ns,
                sent_ns: clock::realtime_ns(),
            }
        });
        let mut exchanges = offered();
        let start = clock::realtime_ns();
        exchanges.burst(&mut channel, addr).unwrap();
        std::thread::sleep(Duration::from_millis(20));
        exchanges.burst_after(&mut channel, addr);
        let end = clock::realtime_ns();
        drop(channel);
        agent.join().unwrap();
        let recorded = exchanges.recorded(start + (end - start) / 2);
        assert_eq!(recorded.exchanges, 2 * BURST as u32);
        assert_eq!(recorded.problem, None);
        let (offset, bound) = (recorded.agent_minus_client_us.unwrap(), recorded.bound_us.unwrap());
        assert!(
            offset.abs() <= bound,
            "one clock: 0 lies within {offset} +/- {bound} us"
        );
    }

    #[test]
    fn a_clock_a_second_ahead_is_found_within_its_bound() {
        let (mut channel, addr, agent) = agent_answering(|client_sent_ns| {
            let received_ns = clock::realtime_ns() + 1_000_000_000;
            Message::ClockReply {
                client_sent_ns,
                received_ns,
                sent_ns: clock::realtime_ns() + 1_000_000_000,
            }
        });
        let mut exchanges = offered();
        let at = clock::realtime_ns();
        exchanges.burst(&mut channel, addr).unwrap();
        drop(channel);
        agent.join().unwrap();
        let recorded = exchanges.recorded(at);
        let (offset, bound) = (recorded.agent_minus_client_us.unwrap(), recorded.bound_us.unwrap());
        assert!((offset - 1e6).abs() <= bound, "1 s lies within {offset} +/- {bound} us");
    }

    #[test]
    fn a_reply_to_no_request_of_ours_is_an_error_of_the_protocol() {
        let (mut channel, addr, agent) = agent_answering(|client_sent_ns| Message::ClockReply {
            client_sent_ns: client_sent_ns - 1,
            received_ns: 0,
            sent_ns: 0,
        });
        let e = offered().burst(&mut channel, addr).unwrap_err().to_string();
        assert!(e.contains("which no clock_request of ours carried"), "{e}");
        drop(channel);
        agent.join().unwrap();
    }

    #[test]
    fn another_message_instead_of_a_reply_is_named() {
        let (mut channel, addr, agent) = agent_answering(|_| Message::Error {
            message: "no clocks here".into(),
        });
        let e = offered().burst(&mut channel, addr).unwrap_err().to_string();
        assert!(e.contains("no clocks here"), "{e}");
        drop(channel);
        agent.join().unwrap();
    }

    #[test]
    fn a_stepped_agent_clock_is_a_problem_not_a_figure() {
        let step = std::sync::atomic::AtomicI64::new(0);
        let (mut channel, addr, agent) = agent_answering(move |client_sent_ns| {
            // After the first burst the agent's clock jumps 50 ms ahead.
            let jump = step.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let ahead = if jump >= BURST as i64 { 50_000_000 } else { 0 };
            let received_ns = clock::realtime_ns() + ahead;
            Message::ClockReply {
                client_sent_ns,
                received_ns,
                sent_ns: clock::realtime_ns() + ahead,
            }
        });
        let mut exchanges = offered();
        let at = clock::realtime_ns();
        exchanges.burst(&mut channel, addr).unwrap();
        exchanges.burst(&mut channel, addr).unwrap();
        drop(channel);
        agent.join().unwrap();
        let recorded = exchanges.recorded(at);
        assert_eq!(recorded.agent_minus_client_us, None);
        assert!(recorded.problem.unwrap().contains("a clock was stepped"));
    }
}
