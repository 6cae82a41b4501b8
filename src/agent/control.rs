//! One control connection: the client's hello, ours, the key proof when
//! the agent has a key, then the one request the connection carries,
//! handed to the part that serves it (a test, a host setting, a peer test,
//! a watch) or answered here (facts, addresses). The whole handshake, from
//! the connection's accept to its request, has one deadline
//! (`--handshake-timeout`): each message does not start a new one, so a
//! client cannot hold a connection longer by answering late.

use std::net::{IpAddr, SocketAddr, TcpStream};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::limits::Slot;
use super::{host_settings, peer, run, unexpected, watch, Refusal, Shared};
use crate::probe::host::facts_toward;
use crate::protocol::auth::{self, End, Psk};
use crate::protocol::channel::Channel;
use crate::protocol::{self, Hello, Message, ProtocolError, MAX_CLIENT_FRAME};

/// The one deadline of a connection's handshake: hello, key proof and
/// request all arrive before it.
#[derive(Debug, Clone, Copy)]
pub(super) struct Handshake {
    deadline: Instant,
    allowed: Duration,
}

impl Handshake {
    /// A handshake that began at `accepted` and may take `allowed`.
    pub(super) fn new(accepted: Instant, allowed: Duration) -> Handshake {
        Handshake {
            deadline: accepted + allowed,
            allowed,
        }
    }

    /// What is left of the handshake's time at `now`.
    fn left(&self, now: Instant) -> Duration {
        self.deadline.saturating_duration_since(now)
    }

    /// The next message, within what is left of the handshake; a timeout
    /// names the whole time allowed.
    fn recv(&self, channel: &mut Channel, waiting_for: &str) -> Result<Message, ProtocolError> {
        channel
            .recv(self.left(Instant::now()), waiting_for)
            .map_err(|e| match e {
                ProtocolError::Timeout { waiting_for, .. } => ProtocolError::Timeout {
                    seconds: self.allowed.as_secs_f64(),
                    waiting_for,
                },
                other => other,
            })
    }
}

/// Serves one control connection, accepted at `accepted`, to its end; a
/// refusal is logged, and told to the client when it is worth telling.
/// Its place on the control port (`slot`) is settled once its request
/// arrives: never closed to make room after that.
pub(super) fn handle_connection(stream: TcpStream, peer: SocketAddr, accepted: Instant, shared: &Shared, slot: &Slot) {
    let local_ip = match stream.local_addr() {
        Ok(a) => a.ip(),
        Err(_) => return,
    };
    log::debug!("{peer}: control connection opened");
    let mut channel = Channel::new(stream, MAX_CLIENT_FRAME);
    let handshake = Handshake::new(accepted, shared.config.handshake_timeout);
    match serve_connection(&mut channel, peer, local_ip, handshake, shared, slot) {
        Ok(()) => {}
        Err(Refusal::Quiet(reason)) => log::warn!("{peer}: closed: {reason}"),
        Err(Refusal::Busy(reason)) => log::info!("{peer}: {reason}"),
        Err(Refusal::Tell(reason)) => {
            log::warn!("{peer}: refused: {reason}");
            let _ = channel.send(&Message::Error { message: reason });
        }
        Err(Refusal::Aborted(reason)) => {
            log::warn!("{peer}: closed: test aborted: {reason}");
            let _ = channel.send(&Message::Error {
                message: format!("test aborted: {reason}"),
            });
        }
    }
    log::debug!("{peer}: control connection closed");
}

/// Shakes hands, then serves the one request this connection carries.
fn serve_connection(
    channel: &mut Channel,
    peer: SocketAddr,
    local_ip: IpAddr,
    handshake: Handshake,
    shared: &Shared,
    slot: &Slot,
) -> Result<(), Refusal> {
    expect_hello(channel, &handshake)?;
    channel.send(&Message::Hello(our_hello(shared)))?;
    if let Some(psk) = &shared.config.psk {
        authenticate(channel, psk, &handshake, shared)?;
    }
    let mut addresses_sent = false;
    let mut clock_replies = 0;
    loop {
        let request = handshake.recv(channel, "test_request")?;
        let received_ns = crate::probe::clock::realtime_ns();
        slot.settle();
        match request {
            Message::TestRequest { spec, wait_seconds } => {
                return run::serve(channel, peer, local_ip, shared, spec, wait_seconds)
            }
            Message::FactsRequest => {
                channel.send(&Message::Facts {
                    facts: facts_toward(local_ip),
                })?;
                return Ok(());
            }
            // Once per connection, so a client cannot keep a control
            // connection busy with requests.
            Message::SetMtu { mtu } => return host_settings::serve_mtu(channel, peer, local_ip, shared, mtu),
            Message::PeerTestRequest {
                target,
                spec,
                wait_seconds,
            } => return peer::serve(channel, peer, shared, target, spec, wait_seconds),
            // Once per connection too, as set_mtu.
            Message::SetHost { setting } => return host_settings::serve(channel, peer, local_ip, shared, &setting),
            Message::ClockRequest { sent_ns } if clock_replies < protocol::MAX_CLOCK_REQUESTS => {
                clock_replies += 1;
                super::clock::answer(channel, sent_ns, received_ns)?;
            }
            Message::AddressesRequest if !addresses_sent => {
                addresses_sent = true;
                channel.send(&Message::Addresses {
                    addresses: crate::probe::nic::interface_addresses_with_prefix(),
                })?;
            }
            // `nicbench watch --peer`: sample this side until watch_stop.
            Message::WatchStart => return watch::serve(channel, peer, local_ip, shared),
            other => return Err(unexpected("test_request", &other)),
        }
    }
}

/// The agent's hello: whether it asks for the key, and the features its
/// configuration offers.
fn our_hello(shared: &Shared) -> Hello {
    let mut hello = Hello::ours(crate::workload::names());
    hello.auth_required = shared.config.psk.is_some();
    if shared.config.allow_peer_tests && shared.config.psk.is_some() {
        hello.features.push(protocol::FEATURE_PEER_TESTS.to_string());
    }
    hello.features.push(protocol::FEATURE_WATCH.to_string());
    hello.features.push(protocol::FEATURE_CLOCK.to_string());
    // What the workloads themselves add (rr's stamped responses).
    let offered = crate::workload::REGISTRY.iter().flat_map(|w| w.agent_features());
    hello.features.extend(offered.map(|f| f.to_string()));
    if shared.config.allow_host_changes && shared.config.psk.is_some() {
        hello.features.push(protocol::FEATURE_HOST_CHANGES.to_string());
    }
    if shared.config.psk.is_some() {
        hello.features.push(protocol::FEATURE_SEALED_SESSION.to_string());
    }
    hello
}

/// Reads the client's hello and checks it is nicbench of our protocol.
fn expect_hello(channel: &mut Channel, handshake: &Handshake) -> Result<(), Refusal> {
    match handshake.recv(channel, "hello")? {
        Message::Hello(hello) => hello.check_peer("client").map_err(Refusal::from),
        other => Err(unexpected("hello", &other)),
    }
}

/// The agent's half of the challenge-response (see `protocol::auth`), then
/// the seal: every later frame either way carries the session key's MAC.
fn authenticate(channel: &mut Channel, psk: &Psk, handshake: &Handshake, shared: &Shared) -> Result<(), Refusal> {
    let agent_nonce = auth::new_nonce();
    channel.send(&Message::AuthChallenge {
        nonce: auth::hex_encode(&agent_nonce),
    })?;
    // What both ends said so far, as the client will have it when it answers.
    let transcript = channel.transcript(End::Agent);
    let refuse = |reason: String| {
        shared.stats.auth_failures.fetch_add(1, Ordering::Relaxed);
        crate::metrics::AgentMetrics::global().refused(crate::metrics::RefusalReason::Auth);
        Refusal::Tell(reason)
    };
    let (client_nonce, mac) = match handshake.recv(channel, "auth_response")? {
        Message::AuthResponse { nonce, mac } => (nonce, mac),
        other => {
            return Err(refuse(format!(
                "authentication required: this agent needs its pre-shared key \
                 (client: --psk-file or NICBENCH_PSK_FILE); got '{}' instead of auth_response",
                other.kind()
            )))
        }
    };
    let decoded = (
        auth::hex_decode(&client_nonce, auth::NONCE_LEN),
        auth::hex_decode(&mac, auth::MAC_LEN),
    );
    let (Some(client_nonce), Some(mac)) = decoded else {
        return Err(refuse("malformed auth_response: nonce and mac must be hex".into()));
    };
    let proof = auth::Handshake {
        agent_nonce: &agent_nonce,
        client_nonce: &client_nonce,
        transcript: &transcript,
    };
    if !psk.verify_client(&proof, &mac) {
        if psk.is_handshake_only_proof(&agent_nonce, &client_nonce, &mac) {
            return Err(refuse(format!(
                "authentication refused: the client holds the right key but is an older nicbench whose proof \
                 covers only the handshake; this agent (nicbench {}) seals every frame of the session with \
                 the key: run the same release on both ends",
                env!("CARGO_PKG_VERSION")
            )));
        }
        return Err(refuse(
            "authentication failed: the client's pre-shared key differs from this agent's \
             (or something between the two ends changed the hellos)"
                .into(),
        ));
    }
    channel.send(&Message::AuthOk {
        mac: auth::hex_encode(&psk.agent_mac(&proof)),
    })?;
    channel.seal(psk.session_key(&proof), End::Agent);
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::thread;

    use super::super::tests::{control_pair, key, shared};
    use super::super::{Agent, AgentConfig};
    use super::*;
    use crate::protocol::MAX_AGENT_FRAME;

    #[test]
    fn the_hello_offers_peer_tests_only_with_a_key() {
        let open = our_hello(&shared(|c| c.allow_peer_tests = true));
        assert!(!open.auth_required);
        assert!(!open.has_feature(protocol::FEATURE_PEER_TESTS));
        assert!(open.has_feature(protocol::FEATURE_WATCH));
        let keyed = our_hello(&shared(|c| {
            c.allow_peer_tests = true;
            c.psk = Some(key());
        }));
        assert!(keyed.auth_required);
        assert!(keyed.has_feature(protocol::FEATURE_PEER_TESTS));
        let keyed_only = our_hello(&shared(|c| c.psk = Some(key())));
        assert!(!keyed_only.has_feature(protocol::FEATURE_PEER_TESTS));
    }

    #[test]
    fn a_client_that_skips_its_hello_is_told() {
        let (mut agent, mut client) = control_pair();
        client.send(&Message::Start).unwrap();
        match expect_hello(&mut agent, &Handshake::new(Instant::now(), Duration::from_secs(10))) {
            Err(Refusal::Tell(words)) => assert_eq!(words, "expected hello, got 'start'"),
            _ => panic!("a start before the hello was accepted"),
        }
    }

    #[test]
    fn the_handshake_has_one_deadline_that_a_late_message_does_not_extend() {
        let start = Instant::now();
        let handshake = Handshake::new(start, Duration::from_secs(10));
        // A hello at 9 s leaves 1 s for the rest, not another 10 s.
        assert_eq!(handshake.left(start + Duration::from_secs(9)), Duration::from_secs(1));
        assert_eq!(handshake.left(start + Duration::from_secs(11)), Duration::ZERO);
        // On a connection whose handshake time has run out, the next
        // message is refused at once, naming the whole time allowed.
        let (mut agent, _client) = control_pair();
        let accepted = Instant::now().checked_sub(Duration::from_secs(10)).unwrap();
        let spent = Handshake::new(accepted, Duration::from_secs(10));
        match expect_hello(&mut agent, &spent) {
            Err(Refusal::Tell(words)) => assert_eq!(words, "timed out after 10.0 s waiting for hello"),
            _ => panic!("a handshake past its deadline went on"),
        }
    }

    /// Plays the agent's half of the key proof on one end of a loopback
    /// pair, the client's on the other with `client_key`; returns the
    /// agent's verdict and the failures it counted.
    fn prove_with(client_key: Psk) -> (Result<(), String>, usize) {
        let (mut agent, mut client) = control_pair();
        let state = shared(|c| c.psk = Some(key()));
        let handshake = Handshake::new(Instant::now(), Duration::from_secs(10));
        let played = thread::scope(|s| {
            let agent_side = s.spawn(|| authenticate(&mut agent, &key(), &handshake, &state));
            let Message::AuthChallenge { nonce } = client.recv(Duration::from_secs(10), "auth_challenge").unwrap()
            else {
                panic!("no challenge");
            };
            let agent_nonce = auth::hex_decode(&nonce, auth::NONCE_LEN).unwrap();
            let client_nonce = auth::new_nonce();
            let transcript = client.transcript(End::Client);
            let proof = auth::Handshake {
                agent_nonce: &agent_nonce,
                client_nonce: &client_nonce,
                transcript: &transcript,
            };
            client
                .send(&Message::AuthResponse {
                    nonce: auth::hex_encode(&client_nonce),
                    mac: auth::hex_encode(&client_key.client_mac(&proof)),
                })
                .unwrap();
            (agent_side.join().unwrap(), agent_nonce, client_nonce, transcript)
        });
        let (played, agent_nonce, client_nonce, transcript) = played;
        if played.is_ok() {
            // Sealed from here on, both ways.
            let proof = auth::Handshake {
                agent_nonce: &agent_nonce,
                client_nonce: &client_nonce,
                transcript: &transcript,
            };
            let Message::AuthOk { mac } = client.recv(Duration::from_secs(10), "auth_ok").unwrap() else {
                panic!("no auth_ok");
            };
            assert!(client_key.verify_agent(&proof, &auth::hex_decode(&mac, auth::MAC_LEN).unwrap()));
            assert!(agent.is_sealed());
            client.seal(client_key.session_key(&proof), End::Client);
            client.send(&Message::FactsRequest).unwrap();
            assert_eq!(
                agent.recv(Duration::from_secs(10), "facts_request").unwrap(),
                Message::FactsRequest
            );
        }
        let verdict = played.map_err(|refusal| match refusal {
            Refusal::Tell(words) => words,
            _ => panic!("a failed key proof is told to the client"),
        });
        (verdict, state.stats.auth_failures.load(Ordering::Relaxed))
    }

    #[test]
    fn the_right_key_passes_and_a_wrong_one_is_counted() {
        assert_eq!(prove_with(key()), (Ok(()), 0));
        let (verdict, failures) = prove_with(Psk::from_bytes(b"not the agent's key"));
        assert_eq!(
            verdict.unwrap_err(),
            "authentication failed: the client's pre-shared key differs from this agent's \
             (or something between the two ends changed the hellos)"
        );
        assert_eq!(failures, 1);
    }

    /// A keyless agent on loopback, greeted: its handle (the agent lives
    /// as long as it), the control channel and the agent's hello.
    fn greeted_agent() -> (super::super::AgentHandle, Channel, Hello) {
        let handle = Agent::bind(AgentConfig::new("127.0.0.1:0".parse().unwrap()))
            .unwrap()
            .spawn();
        let mut channel = Channel::new(TcpStream::connect(handle.addr).unwrap(), MAX_AGENT_FRAME);
        channel.send(&Message::Hello(Hello::ours(["tcp"]))).unwrap();
        let Message::Hello(hello) = channel.recv(Duration::from_secs(10), "hello").unwrap() else {
            panic!("no hello");
        };
        (handle, channel, hello)
    }

    #[test]
    fn addresses_are_answered_once_per_connection() {
        let (_agent, mut channel, _) = greeted_agent();
        let wait = Duration::from_secs(10);
        channel.send(&Message::AddressesRequest).unwrap();
        assert!(matches!(
            channel.recv(wait, "addresses").unwrap(),
            Message::Addresses { .. }
        ));
        channel.send(&Message::AddressesRequest).unwrap();
        assert_eq!(
            channel.recv(wait, "error").unwrap(),
            Message::Error {
                message: "expected test_request, got 'addresses_request'".into()
            }
        );
    }

    #[test]
    fn clock_requests_are_answered_up_to_the_limit_then_refused() {
        let (_agent, mut channel, hello) = greeted_agent();
        let wait = Duration::from_secs(10);
        assert!(hello.features.iter().any(|f| f == protocol::FEATURE_CLOCK));
        // The workloads' own features join the protocol's (rr's stamps).
        assert!(hello.features.iter().any(|f| f == "rr_one_way"), "{:?}", hello.features);
        for n in 0..protocol::MAX_CLOCK_REQUESTS {
            let sent_ns = 1_000_000 + i64::from(n);
            let before = crate::probe::clock::realtime_ns();
            channel.send(&Message::ClockRequest { sent_ns }).unwrap();
            let Message::ClockReply {
                client_sent_ns,
                received_ns,
                sent_ns: replied_ns,
            } = channel.recv(wait, "clock_reply").unwrap()
            else {
                panic!("no clock_reply");
            };
            let after = crate::probe::clock::realtime_ns();
            // The request's reading comes back as it went; the agent's two
            // readings are of the same clock as ours, in order, between our
            // send and our receipt.
            assert_eq!(client_sent_ns, sent_ns);
            assert!(before <= received_ns && received_ns <= replied_ns && replied_ns <= after);
        }
        channel.send(&Message::ClockRequest { sent_ns: 0 }).unwrap();
        assert_eq!(
            channel.recv(wait, "error").unwrap(),
            Message::Error {
                message: "expected test_request, got 'clock_request'".into()
            }
        );
    }
}
