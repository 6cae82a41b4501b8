//! The agent's one rule for where traffic may go: only to an address that
//! proved itself over TCP. The control connection's peer proved its address
//! by completing a TCP handshake; any other address a test names (the client
//! addresses of `--links`) proves itself the same way before any data flows:
//! the client opens a TCP connection *from* that address to the agent's
//! proof port and presents the test's token ([`prove`]); the agent records
//! it ([`await_proofs`]). A UDP datagram proves nothing (its source can be
//! forged), so UDP registrations, UDP replies and every other send target go
//! through [`ProvenAddresses::admits`] and nothing else.
//!
//! Wire: the client sends the 16-byte token followed by [`PROOF_TAG`]; the
//! agent answers one byte, [`PROOF_OK`], and closes.

use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use socket2::{Domain, Protocol, SockAddr, Socket, Type};

use super::sockets::{accept_until, token_matches, Deadlined};
use super::WorkloadError;
use crate::model::LinkPair;
use crate::protocol::TOKEN_LEN;

/// What follows the token on a proof connection (never a data stream's
/// preamble: a stream id is 4 bytes, this is 8).
pub const PROOF_TAG: &[u8; 8] = b"nbproof1";
/// The agent's answer to a good proof.
pub const PROOF_OK: u8 = 1;
const PROOF_LEN: usize = TOKEN_LEN + PROOF_TAG.len();
/// How long one proof connection may take to present itself, whole.
const PROOF_READ_TIMEOUT: Duration = Duration::from_secs(2);

/// The addresses the agent may send to in one test: the control
/// connection's peer, and those that proved themselves (set once, after
/// the proofs; shared by every clone of the test's [`super::AgentNet`]).
#[derive(Debug, Clone)]
pub struct ProvenAddresses {
    peer: IpAddr,
    others: Arc<OnceLock<Vec<IpAddr>>>,
}

impl ProvenAddresses {
    /// Only the control connection's peer, so far.
    pub fn peer_only(peer: IpAddr) -> ProvenAddresses {
        ProvenAddresses {
            peer: peer.to_canonical(),
            others: Arc::new(OnceLock::new()),
        }
    }

    /// Records the addresses that proved themselves; a second call is an
    /// error, never silently ignored.
    pub fn record(&self, proven: Vec<IpAddr>) -> Result<(), WorkloadError> {
        let proven = proven.into_iter().map(|ip| ip.to_canonical()).collect();
        self.others
            .set(proven)
            .map_err(|_| WorkloadError::Setup("the proven addresses of this test were recorded twice".into()))
    }

    /// True when the agent may send to (and admit data from) `ip`.
    pub fn admits(&self, ip: IpAddr) -> bool {
        let ip = ip.to_canonical();
        ip == self.peer || self.others.get().is_some_and(|o| o.contains(&ip))
    }

    /// [`Self::admits`] as a result that says why not, for a destination.
    pub fn check(&self, destination: SocketAddr) -> Result<(), WorkloadError> {
        match self.admits(destination.ip()) {
            true => Ok(()),
            false => Err(WorkloadError::Setup(format!(
                "refusing to send to {destination}: the agent sends only to the client at {} and to \
                 addresses that proved themselves over TCP with the test's token",
                self.peer
            ))),
        }
    }
}

/// The addresses a test's links name that must prove themselves: each
/// link's client address other than the control connection's peer, once.
pub fn needed(links: &[LinkPair], peer: IpAddr) -> Vec<IpAddr> {
    let mut needed: Vec<IpAddr> = Vec::new();
    for link in links {
        let client = link.client.to_canonical();
        if client != peer.to_canonical() && !needed.contains(&client) {
            needed.push(client);
        }
    }
    needed
}

/// Agent: the listener proofs arrive on, on every address of the needed
/// addresses' family (both families when they mix).
pub fn listen(needed: &[IpAddr]) -> Result<Socket, WorkloadError> {
    let any_v6 = needed.iter().any(|ip| ip.is_ipv6());
    let (domain, any): (Domain, IpAddr) = match any_v6 {
        true => (Domain::IPV6, IpAddr::from([0u16; 8])),
        false => (Domain::IPV4, IpAddr::from([0u8; 4])),
    };
    let socket = Socket::new(domain, Type::STREAM, Some(Protocol::TCP))
        .map_err(WorkloadError::io("creating the proof listener"))?;
    if any_v6 {
        socket
            .set_only_v6(false)
            .map_err(WorkloadError::io("letting the proof listener take IPv4 too"))?;
    }
    socket
        .bind(&SocketAddr::new(any, 0).into())
        .map_err(WorkloadError::io("binding the proof listener"))?;
    socket
        .listen(needed.len().clamp(1, 64) as i32)
        .map_err(WorkloadError::io("listening for address proofs"))?;
    Ok(socket)
}

/// Agent: accepts proof connections until every address of `needed` has
/// proved itself or `deadline` passes. A connection from any other
/// address, or without the token, is refused and counted.
pub fn await_proofs(
    listener: &Socket,
    needed: &[IpAddr],
    token: &[u8; TOKEN_LEN],
    deadline: Instant,
) -> Result<Vec<IpAddr>, WorkloadError> {
    let mut proven: Vec<IpAddr> = Vec::new();
    let mut refused = 0u32;
    while proven.len() < needed.len() {
        let Some((socket, from)) = accept_until(listener, deadline, "an address proof")? else {
            let missing: Vec<String> = needed
                .iter()
                .filter(|ip| !proven.contains(ip))
                .map(|ip| ip.to_string())
                .collect();
            return Err(WorkloadError::Setup(format!(
                "the link client address(es) {} did not prove themselves over TCP in time ({refused} proof \
                 connections refused): the agent sends nothing to an address that has not; check that TCP \
                 from each link's client address reaches the agent, and that the client runs nicbench of \
                 this version",
                missing.join(", ")
            )));
        };
        let Some(from) = from.as_socket().map(|a| a.ip().to_canonical()) else {
            refused += 1;
            continue;
        };
        if !needed.contains(&from) || proven.contains(&from) {
            refused += 1;
            log::warn!(
                "refused an address proof from {from}: the test names no link client there, or it proved already"
            );
            continue;
        }
        match read_proof(&socket, deadline.min(Instant::now() + PROOF_READ_TIMEOUT)) {
            Ok(presented) if token_matches(&presented[..TOKEN_LEN], token) && &presented[TOKEN_LEN..] == PROOF_TAG => {
                let mut writer: &Socket = &socket;
                // The client waits for this byte before it sends anything
                // else from the address; a lost answer fails its proof.
                if writer.write_all(&[PROOF_OK]).is_ok() {
                    proven.push(from);
                }
            }
            Ok(_) => {
                refused += 1;
                log::warn!("refused an address proof from {from}: wrong session token");
            }
            Err(e) => {
                refused += 1;
                log::warn!("refused an address proof from {from}: {e}");
            }
        }
    }
    Ok(proven)
}

/// The proof, whole by `deadline` (a peer sending a byte at a time is cut
/// off there, not at a per-read timeout).
fn read_proof(socket: &Socket, deadline: Instant) -> std::io::Result<[u8; PROOF_LEN]> {
    let mut presented = [0u8; PROOF_LEN];
    Deadlined::new(socket, deadline).read_exact(&mut presented)?;
    Ok(presented)
}

/// Client: proves `from` to the agent at `to` (its proof port) with the
/// test's token, and waits for the agent's answer.
pub fn prove(from: IpAddr, to: SocketAddr, token: &[u8; TOKEN_LEN], timeout: Duration) -> Result<(), WorkloadError> {
    let failed = |what: &str, e: std::io::Error| {
        WorkloadError::Setup(format!(
            "proving the link address {from} to the agent at {to}: {what}: {e}; the agent sends nothing to an \
             address that has not proved itself over TCP"
        ))
    };
    let domain = if to.is_ipv4() { Domain::IPV4 } else { Domain::IPV6 };
    let socket = Socket::new(domain, Type::STREAM, Some(Protocol::TCP)).map_err(|e| failed("creating a socket", e))?;
    socket
        .bind(&SocketAddr::new(from, 0).into())
        .map_err(|e| failed("binding to it", e))?;
    socket
        .connect_timeout(&SockAddr::from(to), timeout)
        .map_err(|e| failed("connecting", e))?;
    let mut presented = [0u8; PROOF_LEN];
    presented[..TOKEN_LEN].copy_from_slice(token);
    presented[TOKEN_LEN..].copy_from_slice(PROOF_TAG);
    let mut stream: &Socket = &socket;
    stream
        .write_all(&presented)
        .map_err(|e| failed("sending the token", e))?;
    socket
        .set_read_timeout(Some(timeout))
        .map_err(|e| failed("setting a timeout", e))?;
    let mut answer = [0u8; 1];
    stream
        .read_exact(&mut answer)
        .map_err(|e| failed("reading the answer", e))?;
    match answer[0] {
        PROOF_OK => Ok(()),
        other => Err(WorkloadError::Setup(format!(
            "proving the link address {from} to the agent at {to}: it answered {other}, not {PROOF_OK}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn link(client: &str, agent: &str) -> LinkPair {
        LinkPair {
            client: ip(client),
            agent: ip(agent),
        }
    }

    #[test]
    fn only_the_peer_is_admitted_until_others_prove_themselves() {
        let proven = ProvenAddresses::peer_only(ip("127.0.0.2"));
        assert!(proven.admits(ip("127.0.0.2")));
        assert!(
            proven.admits(ip("::ffff:127.0.0.2")),
            "a mapped address is the same address"
        );
        assert!(!proven.admits(ip("127.0.0.3")));
        let clone = proven.clone();
        proven.record(vec![ip("127.0.0.3")]).unwrap();
        assert!(
            clone.admits(ip("127.0.0.3")),
            "every clone of the test's net sees the proofs"
        );
        assert!(proven.record(vec![]).is_err(), "a second record is an error");
        let e = proven.check("127.0.0.4:9".parse().unwrap()).unwrap_err();
        assert!(e.to_string().contains("refusing to send to 127.0.0.4:9"), "{e}");
    }

    #[test]
    fn the_links_clients_other_than_the_peer_need_proof_once_each() {
        let links = [
            link("127.0.0.2", "127.0.0.1"),
            link("127.0.0.3", "127.0.0.1"),
            link("127.0.0.3", "127.0.0.5"),
        ];
        assert_eq!(needed(&links, ip("127.0.0.2")), vec![ip("127.0.0.3")]);
        assert_eq!(needed(&links, ip("::ffff:127.0.0.2")), vec![ip("127.0.0.3")]);
        assert!(needed(&[], ip("127.0.0.2")).is_empty());
    }

    fn proof_round(
        from: &str,
        token: [u8; TOKEN_LEN],
        presented: [u8; TOKEN_LEN],
    ) -> (Result<Vec<IpAddr>, String>, Result<(), String>) {
        let needed = vec![ip("127.0.0.3")];
        let listener = listen(&needed).unwrap();
        let port = crate::workload::transport::admission::local_port(&listener);
        let to: SocketAddr = SocketAddr::new(ip("127.0.0.1"), port);
        let from = ip(from);
        let client =
            std::thread::spawn(move || prove(from, to, &presented, Duration::from_secs(1)).map_err(|e| e.to_string()));
        let agent = await_proofs(&listener, &needed, &token, Instant::now() + Duration::from_millis(1500))
            .map_err(|e| e.to_string());
        (agent, client.join().unwrap())
    }

    #[test]
    fn a_proof_from_the_named_address_with_the_token_is_recorded() {
        let (agent, client) = proof_round("127.0.0.3", [7; TOKEN_LEN], [7; TOKEN_LEN]);
        assert_eq!(agent.unwrap(), vec![ip("127.0.0.3")]);
        client.unwrap();
    }

    #[test]
    fn a_proof_with_the_wrong_token_or_from_another_address_proves_nothing() {
        let (agent, client) = proof_round("127.0.0.3", [7; TOKEN_LEN], [8; TOKEN_LEN]);
        let e = agent.unwrap_err();
        assert!(
            e.contains("127.0.0.3 did not prove themselves") && e.contains("1 proof connections refused"),
            "{e}"
        );
        assert!(client.unwrap_err().contains("reading the answer"));
        let (agent, client) = proof_round("127.0.0.4", [7; TOKEN_LEN], [7; TOKEN_LEN]);
        assert!(agent.unwrap_err().contains("1 proof connections refused"));
        assert!(client.is_err());
    }

    /// Issue 67, item 2: a proof sent a byte at a time under the timeout
    /// per read went in after the deadline; it is cut off at it now.
    #[test]
    fn a_proof_dripped_a_byte_at_a_time_is_cut_off_at_the_deadline() {
        let needed = vec![ip("127.0.0.3")];
        let token = [7; TOKEN_LEN];
        let listener = listen(&needed).unwrap();
        let port = crate::workload::transport::admission::local_port(&listener);
        let drip = std::thread::spawn(move || {
            let socket = Socket::new(Domain::IPV4, Type::STREAM, Some(Protocol::TCP)).unwrap();
            socket.bind(&SocketAddr::new(ip("127.0.0.3"), 0).into()).unwrap();
            socket.connect(&SocketAddr::new(ip("127.0.0.1"), port).into()).unwrap();
            let mut writer: &Socket = &socket;
            for byte in token.iter().chain(PROOF_TAG.iter()) {
                if writer.write_all(&[*byte]).is_err() {
                    return;
                }
                // The client's pace, not a wait for a state.
                std::thread::sleep(Duration::from_millis(100));
            }
        });
        let e = await_proofs(&listener, &needed, &token, Instant::now() + Duration::from_millis(500)).unwrap_err();
        assert!(e.to_string().contains("1 proof connections refused"), "{e}");
        drip.join().unwrap();
    }
}
