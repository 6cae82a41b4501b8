//! Reaching an agent: resolve its name, open the control connection, and
//! shake hands (hellos both ways, then the key proof when the agent asks
//! for it). Every other part of the session starts here.

use std::net::{SocketAddr, TcpStream, ToSocketAddrs};

use socket2::{Domain, Protocol, SockAddr, Socket, Type};

use super::{SessionError, Target, HELLO_TIMEOUT, REPLY_TIMEOUT};
use crate::address::Family;
use crate::protocol::auth::{self, End, Psk};
use crate::protocol::channel::Channel;
use crate::protocol::{Hello, Message, ProtocolError, MAX_AGENT_FRAME};

fn resolve(target: &Target) -> Result<Vec<SocketAddr>, SessionError> {
    let resolve_error = |detail: String| SessionError::Resolve {
        host: target.host.clone(),
        detail,
    };
    let host = target.host.trim_start_matches('[').trim_end_matches(']');
    let addrs: Vec<SocketAddr> = (host, target.port)
        .to_socket_addrs()
        .map_err(|e| resolve_error(e.to_string()))?
        .filter(|a| match target.family {
            Some(Family::V4) => a.is_ipv4(),
            Some(Family::V6) => a.is_ipv6(),
            None => true,
        })
        .collect();
    if addrs.is_empty() {
        return Err(resolve_error("no address of the requested family (-4/-6)".into()));
    }
    Ok(addrs)
}

/// Opens the control connection to the first address that answers.
pub fn connect(target: &Target) -> Result<TcpStream, SessionError> {
    let mut last = None;
    for addr in resolve(target)? {
        let attempt = (|| {
            let domain = if addr.is_ipv4() { Domain::IPV4 } else { Domain::IPV6 };
            let socket = Socket::new(domain, Type::STREAM, Some(Protocol::TCP))?;
            if let Some(bind) = target.bind {
                socket.bind(&SocketAddr::new(bind, 0).into())?;
            }
            socket.connect_timeout(&SockAddr::from(addr), target.connect_timeout)?;
            Ok::<TcpStream, std::io::Error>(socket.into())
        })();
        match attempt {
            Ok(stream) => return Ok(stream),
            Err(e) => last = Some(connect_error(e, addr, target)),
        }
    }
    Err(last.expect("resolve returns at least one address"))
}

/// Why connecting to `addr` failed, with what to do about it.
fn connect_error(e: std::io::Error, addr: SocketAddr, target: &Target) -> SessionError {
    match e.kind() {
        std::io::ErrorKind::ConnectionRefused => SessionError::Refused {
            addr,
            port: target.port,
        },
        std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock => SessionError::ConnectTimeout {
            addr,
            seconds: target.connect_timeout.as_secs_f64(),
        },
        _ => SessionError::Connect { addr, source: e },
    }
}

/// A control connection past the handshake: the agent's address and hello.
pub(super) struct Connected {
    pub channel: Channel,
    pub addr: SocketAddr,
    pub hello: Hello,
}

/// Connects to `target` and shakes hands, proving the key of its
/// `psk_file` when the agent asks for one.
pub(super) fn open(target: &Target) -> Result<Connected, SessionError> {
    let psk = target.psk_file.as_deref().map(Psk::from_file).transpose()?;
    let stream = connect(target)?;
    let addr = stream.peer_addr().map_err(ProtocolError::Io)?;
    let mut channel = Channel::new(stream, MAX_AGENT_FRAME);
    let hello = handshake(&mut channel, addr, psk.as_ref())?;
    Ok(Connected { channel, addr, hello })
}

/// A message other than the one expected, as the error it means: the
/// agent's refusal in its words, busy, or a protocol error.
pub(super) fn unexpected(expected: &str, got: Message, addr: SocketAddr) -> SessionError {
    match got {
        Message::Busy {
            seconds_left,
            running_seconds,
        } => SessionError::Busy {
            addr,
            seconds_left,
            running_seconds,
        },
        Message::Error { message } if message.contains("unknown field") => SessionError::AgentRefused(format!(
            "{message} (the agent runs an older nicbench build than this client, which added that \
             parameter: run the same build on both ends)"
        )),
        Message::Error { message } => SessionError::AgentRefused(message),
        other => SessionError::Protocol(ProtocolError::Unexpected {
            expected: expected.to_string(),
            got: other.kind().to_string(),
        }),
    }
}

/// Hellos both ways, then the key proof when the agent asks for it.
fn handshake(channel: &mut Channel, addr: SocketAddr, psk: Option<&Psk>) -> Result<Hello, SessionError> {
    handshake_keyed(channel, addr, psk, false)
}

/// The handshake; with `require_key`, an agent that does not ask for the
/// key is refused before anything else is sent: only an agent that proves
/// it knows our key may receive traffic we send for somebody else (a
/// peer test, a probe).
pub(super) fn handshake_keyed(
    channel: &mut Channel,
    addr: SocketAddr,
    psk: Option<&Psk>,
    require_key: bool,
) -> Result<Hello, SessionError> {
    channel.send(&Message::Hello(Hello::ours(crate::workload::names())))?;
    let hello = channel.recv(HELLO_TIMEOUT, "the agent's hello").map_err(|e| match e {
        // Something listens there, but it does not speak our protocol.
        ProtocolError::Timeout { .. } | ProtocolError::FrameTooLarge { .. } | ProtocolError::Malformed(_) => {
            SessionError::NotAnAgent {
                addr,
                detail: foreign_answer(&e),
            }
        }
        other => other.into(),
    })?;
    let hello = match hello {
        Message::Hello(hello) => hello,
        other => return Err(unexpected("hello", other, addr)),
    };
    hello.check_peer("agent").map_err(|e| match e {
        ProtocolError::NotNicbench => SessionError::NotAnAgent {
            addr,
            detail: "it speaks something else: its hello has the wrong magic".into(),
        },
        other => other.into(),
    })?;
    if require_key && !hello.auth_required {
        return Err(SessionError::AgentRefused(format!(
            "the agent at {addr} does not ask for a pre-shared key, so it cannot prove it belongs to this \
             mesh; peer tests go only to agents started with the same --psk-file"
        )));
    }
    match (hello.auth_required, psk) {
        (false, None) => {}
        (false, Some(_)) => {
            log::warn!("the agent at {addr} does not require authentication; the pre-shared key was not used");
        }
        (true, None) => return Err(SessionError::AuthRequired { addr }),
        (true, Some(_)) if !hello.has_feature(crate::protocol::FEATURE_SEALED_SESSION) => {
            return Err(SessionError::AuthFailed(format!(
                "the agent at {addr} (nicbench {}) asks for the key but does not seal the session with it, so \
                 a relay between us could change its requests: run nicbench {} or newer there (or something \
                 between us rewrote its hello)",
                hello.software_version,
                env!("CARGO_PKG_VERSION")
            )))
        }
        (true, Some(psk)) => authenticate(channel, addr, psk)?,
    }
    Ok(hello)
}

/// What a service that is no nicbench agent answered, in words: the
/// first four bytes, read as our frame length, are often text ("HTTP").
fn foreign_answer(e: &ProtocolError) -> String {
    match e {
        ProtocolError::FrameTooLarge { length, .. } => {
            let bytes = length.to_be_bytes();
            if bytes.iter().all(|b| b.is_ascii_graphic() || *b == b' ') {
                format!(
                    "it speaks something else: its answer starts with \"{}\"",
                    String::from_utf8_lossy(&bytes)
                )
            } else {
                format!("it speaks something else: its answer is no nicbench hello: {e}")
            }
        }
        ProtocolError::Timeout { seconds, .. } => {
            format!("it stayed silent: no nicbench hello within {seconds:.0} s of connecting")
        }
        other => format!("it speaks something else: its answer is no nicbench hello: {other}"),
    }
}

/// The client's half of the challenge-response (see `protocol::auth`):
/// prove the key, check the agent's proof that it knows it too, then seal
/// the channel so that every later frame either way carries the session
/// key's MAC.
fn authenticate(channel: &mut Channel, addr: SocketAddr, psk: &Psk) -> Result<(), SessionError> {
    let malformed = |what: &str| SessionError::Protocol(ProtocolError::Malformed(format!("{what} is not hex")));
    let agent_nonce = match channel.recv(REPLY_TIMEOUT, "the agent's auth_challenge")? {
        Message::AuthChallenge { nonce } => {
            auth::hex_decode(&nonce, auth::NONCE_LEN).ok_or_else(|| malformed("the challenge nonce"))?
        }
        other => return Err(unexpected("auth_challenge", other, addr)),
    };
    let client_nonce = auth::new_nonce();
    let transcript = channel.transcript(End::Client);
    let proof = auth::Handshake {
        agent_nonce: &agent_nonce,
        client_nonce: &client_nonce,
        transcript: &transcript,
    };
    channel.send(&Message::AuthResponse {
        nonce: auth::hex_encode(&client_nonce),
        mac: auth::hex_encode(&psk.client_mac(&proof)),
    })?;
    match channel.recv(REPLY_TIMEOUT, "the agent to check the key")? {
        Message::AuthOk { mac } => {
            let mac = auth::hex_decode(&mac, auth::MAC_LEN).ok_or_else(|| malformed("the agent's proof"))?;
            if psk.verify_agent(&proof, &mac) {
                channel.seal(psk.session_key(&proof), End::Client);
                Ok(())
            } else {
                Err(SessionError::AuthFailed(format!(
                    "authentication failed: the agent at {addr} accepted us but could not prove it knows the same key; \
                     it may not be the agent you meant"
                )))
            }
        }
        Message::Error { message } => Err(SessionError::AuthFailed(message)),
        other => Err(unexpected("auth_ok", other, addr)),
    }
}

/// Refuses to ask an agent for links when its hello does not offer them.
pub(super) fn check_links_supported(hello: &Hello, addr: SocketAddr) -> Result<(), SessionError> {
    if hello.has_feature(crate::protocol::FEATURE_LINKS) {
        return Ok(());
    }
    Err(SessionError::AgentRefused(format!(
        "the agent at {addr} (nicbench {}) does not know --links; run nicbench {} or newer there",
        hello.software_version,
        env!("CARGO_PKG_VERSION")
    )))
}

/// Refuses a test that needs `feature` of an agent whose hello does not
/// offer it, naming the option (`option`) that asked for it.
pub(super) fn check_feature(
    hello: &Hello,
    addr: SocketAddr,
    (feature, option): (&str, &str),
) -> Result<(), SessionError> {
    if hello.has_feature(feature) {
        return Ok(());
    }
    // Builds between releases carry the same version number.
    let newer = match hello.software_version == env!("CARGO_PKG_VERSION") {
        true => format!("a build of nicbench {} as new as this client's", hello.software_version),
        false => format!("nicbench {} or newer", env!("CARGO_PKG_VERSION")),
    };
    Err(SessionError::AgentRefused(format!(
        "the agent at {addr} (nicbench {}) does not know {option}; run {newer} there, or drop {option}",
        hello.software_version
    )))
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::net::TcpListener;
    use std::time::Duration;

    use super::super::tests::{fake_agent, greet, loopback};
    use super::*;

    #[test]
    fn a_refusal_for_an_unknown_field_says_the_agent_is_older() {
        let addr: SocketAddr = "127.0.0.1:5201".parse().unwrap();
        let refused = |message: &str| {
            unexpected(
                "accepted",
                Message::Error {
                    message: message.into(),
                },
                addr,
            )
        };
        let old = refused("bad parameters for workload 'sweep': unknown field `passes`, expected one of `min_bytes`");
        let text = old.to_string();
        assert!(text.contains("unknown field `passes`"), "{text}");
        assert!(text.contains("run the same build on both ends"), "{text}");
        // Any other refusal is passed on in the agent's words alone.
        let busy = refused("the agent allows at most 4 streams").to_string();
        assert!(!busy.contains("older"), "{busy}");
    }

    #[test]
    fn an_unexpected_message_names_what_was_awaited() {
        let addr: SocketAddr = "127.0.0.1:5201".parse().unwrap();
        let e = unexpected("ready", Message::Start, addr);
        assert!(
            matches!(&e, SessionError::Protocol(ProtocolError::Unexpected { expected, got })
                if expected == "ready" && got == "start"),
            "{e:?}"
        );
        let busy = unexpected(
            "accepted",
            Message::Busy {
                seconds_left: 9.0,
                running_seconds: None,
            },
            addr,
        );
        assert!(matches!(busy, SessionError::Busy { seconds_left, .. } if seconds_left == 9.0));
    }

    #[test]
    fn a_foreign_service_is_named_by_what_it_said() {
        let http = ProtocolError::FrameTooLarge {
            length: u32::from_be_bytes(*b"HTTP"),
            limit: 16 << 20,
        };
        assert_eq!(
            foreign_answer(&http),
            "it speaks something else: its answer starts with \"HTTP\""
        );
        let binary = ProtocolError::FrameTooLarge {
            length: u32::from_be_bytes([0xff, 0, 1, 2]),
            limit: 16 << 20,
        };
        assert!(foreign_answer(&binary).starts_with("it speaks something else: its answer is no nicbench hello"));
        let addr: SocketAddr = "[::1]:80".parse().unwrap();
        let e = SessionError::NotAnAgent {
            addr,
            detail: foreign_answer(&http),
        };
        assert_eq!(e.exit_code(), 3);
        assert!(e
            .to_string()
            .contains("that port is not a nicbench agent (it speaks something else"));
    }

    #[test]
    fn resolving_keeps_only_the_asked_family() {
        let mut target = loopback(5310);
        target.family = Some(Family::V6);
        let e = resolve(&target).unwrap_err();
        assert!(e.to_string().contains("no address of the requested family"), "{e}");
        target.host = "[::1]".into();
        assert_eq!(resolve(&target).unwrap(), vec!["[::1]:5310".parse().unwrap()]);
        target.family = Some(Family::V4);
        assert!(resolve(&target).is_err());
    }

    #[test]
    fn connect_errors_say_what_to_do() {
        let target = loopback(5999);
        let addr: SocketAddr = "127.0.0.1:5999".parse().unwrap();
        let refused = connect_error(std::io::ErrorKind::ConnectionRefused.into(), addr, &target);
        assert!(
            refused.to_string().contains("'nicbench serve --port 5999'"),
            "{refused}"
        );
        let silent = connect_error(std::io::ErrorKind::TimedOut.into(), addr, &target);
        assert!(matches!(silent, SessionError::ConnectTimeout { seconds, .. } if seconds == 5.0));
        let other = connect_error(std::io::ErrorKind::PermissionDenied.into(), addr, &target);
        assert!(matches!(other, SessionError::Connect { .. }));
        assert!([refused, silent, other].iter().all(|e| e.exit_code() == 3));
    }

    #[test]
    fn a_closed_loopback_port_is_refused() {
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let e = connect(&loopback(port)).unwrap_err();
        assert!(matches!(e, SessionError::Refused { port: p, .. } if p == port), "{e:?}");
    }

    #[test]
    fn an_http_server_is_not_an_agent() {
        let (target, server) = fake_agent(|channel| {
            let _ = channel.recv(Duration::from_secs(10), "hello");
            let mut stream = channel.stream();
            stream.write_all(b"HTTP/1.1 400 Bad Request\r\n\r\n").unwrap();
        });
        let e = open(&target).err().expect("an HTTP server passed the handshake");
        server.join().unwrap();
        assert!(
            matches!(&e, SessionError::NotAnAgent { detail, .. } if detail.ends_with("its answer starts with \"HTTP\"")),
            "{e:?}"
        );
    }

    #[test]
    fn an_agent_that_asks_for_a_key_needs_one() {
        let (target, agent) = fake_agent(|channel| greet(channel, keyed_hello()));
        let e = open(&target).err().expect("no key, yet connected");
        agent.join().unwrap();
        assert!(matches!(e, SessionError::AuthRequired { .. }), "{e:?}");
    }

    #[test]
    fn a_keyed_run_refuses_an_agent_that_does_not_ask_for_the_key() {
        let (target, agent) = fake_agent(|channel| greet(channel, Hello::ours(["tcp"])));
        let stream = connect(&target).unwrap();
        let addr = stream.peer_addr().unwrap();
        let mut channel = Channel::new(stream, MAX_AGENT_FRAME);
        let psk = Psk::from_bytes(b"0123456789abcdef0123456789abcdef");
        let e = handshake_keyed(&mut channel, addr, Some(&psk), true).unwrap_err();
        agent.join().unwrap();
        assert!(e.to_string().contains("does not ask for a pre-shared key"), "{e}");
    }

    /// A keyed agent's hello: it asks for the key and seals the session.
    fn keyed_hello() -> Hello {
        let mut hello = Hello::ours(["tcp"]);
        hello.auth_required = true;
        hello.features.push(crate::protocol::FEATURE_SEALED_SESSION.into());
        hello
    }

    /// The agent's half of the key proof, answering with `agent_key`'s
    /// proof; then the channel is sealed with `agent_key`.
    fn prove(channel: &mut Channel, client_key: &Psk, agent_key: &Psk) {
        greet(channel, keyed_hello());
        let agent_nonce = auth::new_nonce();
        channel
            .send(&Message::AuthChallenge {
                nonce: auth::hex_encode(&agent_nonce),
            })
            .unwrap();
        let transcript = channel.transcript(End::Agent);
        let Message::AuthResponse { nonce, mac } = channel.recv(Duration::from_secs(10), "auth_response").unwrap()
        else {
            panic!("no auth_response");
        };
        let client_nonce = auth::hex_decode(&nonce, auth::NONCE_LEN).unwrap();
        let mac = auth::hex_decode(&mac, auth::MAC_LEN).unwrap();
        let proof = auth::Handshake {
            agent_nonce: &agent_nonce,
            client_nonce: &client_nonce,
            transcript: &transcript,
        };
        assert!(client_key.verify_client(&proof, &mac));
        channel
            .send(&Message::AuthOk {
                mac: auth::hex_encode(&agent_key.agent_mac(&proof)),
            })
            .unwrap();
        channel.seal(agent_key.session_key(&proof), End::Agent);
    }

    #[test]
    fn the_key_is_proved_both_ways_and_then_seals_the_session() {
        let key = Psk::from_bytes(b"0123456789abcdef0123456789abcdef");
        let same = Psk::from_bytes(b"0123456789abcdef0123456789abcdef");
        let (target, agent) = fake_agent(move |channel| {
            prove(channel, &same, &same);
            assert_eq!(
                channel.recv(Duration::from_secs(10), "facts_request").unwrap(),
                Message::FactsRequest
            );
            channel.send(&Message::Ready).unwrap();
        });
        let stream = connect(&target).unwrap();
        let addr = stream.peer_addr().unwrap();
        let mut channel = Channel::new(stream, MAX_AGENT_FRAME);
        let hello = handshake_keyed(&mut channel, addr, Some(&key), true).unwrap();
        assert!(hello.auth_required && channel.is_sealed());
        channel.send(&Message::FactsRequest).unwrap();
        assert_eq!(channel.recv(Duration::from_secs(10), "ready").unwrap(), Message::Ready);
        agent.join().unwrap();
    }

    #[test]
    fn a_keyed_client_refuses_an_agent_that_would_not_seal_the_session() {
        // An older agent, or a relay that struck the feature from its hello.
        let (target, agent) = fake_agent(|channel| {
            let mut hello = Hello::ours(["tcp"]);
            hello.auth_required = true;
            greet(channel, hello);
        });
        let stream = connect(&target).unwrap();
        let addr = stream.peer_addr().unwrap();
        let mut channel = Channel::new(stream, MAX_AGENT_FRAME);
        let psk = Psk::from_bytes(b"0123456789abcdef0123456789abcdef");
        let e = handshake_keyed(&mut channel, addr, Some(&psk), false).unwrap_err();
        agent.join().unwrap();
        assert!(
            matches!(&e, SessionError::AuthFailed(words) if words.contains("does not seal the session")),
            "{e:?}"
        );
    }

    #[test]
    fn an_agent_that_cannot_prove_the_key_is_refused() {
        let key = Psk::from_bytes(b"0123456789abcdef0123456789abcdef");
        let client_key = Psk::from_bytes(b"0123456789abcdef0123456789abcdef");
        let impostor = Psk::from_bytes(b"fedcba9876543210fedcba9876543210");
        let (target, agent) = fake_agent(move |channel| prove(channel, &client_key, &impostor));
        let stream = connect(&target).unwrap();
        let addr = stream.peer_addr().unwrap();
        let mut channel = Channel::new(stream, MAX_AGENT_FRAME);
        let e = handshake_keyed(&mut channel, addr, Some(&key), false).unwrap_err();
        agent.join().unwrap();
        assert!(
            matches!(&e, SessionError::AuthFailed(words) if words.contains("could not prove")),
            "{e:?}"
        );
        assert_eq!(e.exit_code(), 4);
    }

    #[test]
    fn links_need_an_agent_that_offers_them() {
        let addr: SocketAddr = "127.0.0.1:5310".parse().unwrap();
        let mut hello = Hello::ours(["tcp"]);
        assert!(check_links_supported(&hello, addr).is_ok());
        hello.features.clear();
        let e = check_links_supported(&hello, addr).unwrap_err();
        assert!(e.to_string().contains("does not know --links"), "{e}");
    }

    #[test]
    fn a_feature_the_agent_does_not_offer_is_refused_naming_the_option() {
        let addr: SocketAddr = "127.0.0.1:5310".parse().unwrap();
        let needed = ("rr_one_way", "--one-way");
        let mut hello = Hello::ours(["tcp"]);
        hello.features.push("rr_one_way".into());
        assert!(check_feature(&hello, addr, needed).is_ok());
        hello.features.clear();
        let e = check_feature(&hello, addr, needed).unwrap_err().to_string();
        assert!(
            e.contains("does not know --one-way; run a build of nicbench ")
                && e.contains(" as new as this client's there, or drop --one-way"),
            "{e}"
        );
    }
}
