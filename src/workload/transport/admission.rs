//! Data connections of every connection transport (TCP and the byte
//! streams that follow it): a listener on the agent that admits only the
//! control connection's peer presenting the session token, and the
//! client's connect that presents it.
//!
//! Every data connection opens with a 20-byte preamble: the 16-byte session
//! token, then the stream id as a big-endian u32.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use socket2::Socket;

use super::Proto;
use crate::model::spec::SideOptions;
use crate::protocol::TOKEN_LEN;
pub use crate::workload::base::sockets::{accept_until, token_matches, Deadlined};
use crate::workload::base::{AgentNet, ClientNet, WorkloadError};

const PREAMBLE_LEN: usize = TOKEN_LEN + 4;
/// How long a data connection may take to present its whole preamble,
/// from its accept (never past the test's setup deadline).
const PREAMBLE_TIMEOUT: Duration = Duration::from_secs(5);
/// Data connections from an admitted address whose preamble is refused
/// that one test tolerates besides one per stream: past them its setup
/// fails (what `--max-streams` is to streams, this is to refused data
/// connections).
const REFUSED_BEYOND_STREAMS: usize = 16;

/// Data connections refused since the process started (wrong peer, wrong
/// or missing token, unknown or repeated stream id).
static REFUSED: AtomicU64 = AtomicU64::new(0);

/// How many data connections this process has refused so far.
pub fn refused_data_connections() -> u64 {
    REFUSED.load(Ordering::Relaxed)
}

/// Counts and logs one refused data connection.
fn refuse(peer: Option<SocketAddr>, why: &str) {
    let total = REFUSED.fetch_add(1, Ordering::Relaxed) + 1;
    let peer = peer.map_or_else(|| "an unknown address".to_string(), |p| p.to_string());
    log::warn!("refused a data connection from {peer}: {why} ({total} refused since start)");
}

/// The agent sends traffic only to an address that proved itself over
/// TCP (the control connection's peer, or a link client address that
/// presented the token on the proof port: [`crate::workload::base::address_proof`]). Every
/// place a workload learns a destination (a UDP registration's source, a
/// datagram to answer) checks it here before sending anything there.
pub fn check_destination(net: &AgentNet, destination: SocketAddr) -> Result<(), WorkloadError> {
    net.proven.check(destination)
}

pub use super::Configure;

/// Requests the socket buffer sizes of `side`.
pub fn apply_buffers(socket: &Socket, side: &SideOptions) -> Result<(), WorkloadError> {
    if let Some(size) = side.send_buffer_bytes {
        socket
            .set_send_buffer_size(size as usize)
            .map_err(WorkloadError::io(format!("setting SO_SNDBUF to {size} B")))?;
    }
    if let Some(size) = side.receive_buffer_bytes {
        socket
            .set_recv_buffer_size(size as usize)
            .map_err(WorkloadError::io(format!("setting SO_RCVBUF to {size} B")))?;
    }
    Ok(())
}

/// SO_BUSY_POLL (asm-generic/socket.h).
const SO_BUSY_POLL: libc::c_int = 46;

/// Sets an integer socket option that socket2 has no call for.
pub fn set_int_option(
    socket: &Socket,
    level: libc::c_int,
    name: libc::c_int,
    value: libc::c_int,
) -> std::io::Result<()> {
    // SAFETY: passes a pointer to a c_int of the given size.
    let rc = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            level,
            name,
            &value as *const _ as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// SO_BUSY_POLL: spin this long in the driver before sleeping on a
/// receive, on a socket of any transport.
pub fn set_busy_poll(socket: &Socket, micros: u32) -> Result<(), WorkloadError> {
    set_int_option(socket, libc::SOL_SOCKET, SO_BUSY_POLL, micros as libc::c_int).map_err(WorkloadError::io(format!(
        "setting SO_BUSY_POLL to {micros} us (needs CAP_NET_ADMIN to raise it)"
    )))
}

/// The listener an agent keeps for the subflows that join a connection
/// later. An MPTCP subflow joins through a listening socket on the port the
/// connection came in by: the peer's MP_JOIN SYN, sent once the agent has
/// announced another address, finds the listener or is reset. So for a
/// transport whose connections join at other addresses the agent keeps the
/// listener open until the test's sockets close (dropping this); for the
/// others (TCP) it closes it as soon as the streams are accepted.
pub struct JoinListener {
    _kept: Option<Socket>,
}

impl JoinListener {
    pub fn keep(proto: Proto, listener: Socket) -> JoinListener {
        JoinListener::keep_if(proto.joins_other_addresses(), listener)
    }

    /// Keeps `listener` when its transport's connections join (`joins`).
    pub fn keep_if(joins: bool, listener: Socket) -> JoinListener {
        JoinListener {
            _kept: joins.then_some(listener),
        }
    }

    /// For a side that has no listener (the client).
    pub fn none() -> JoinListener {
        JoinListener { _kept: None }
    }
}

/// The port a data listener names to the client: its IP port, or the
/// number an AF_UNIX listener's name stands for.
pub fn local_port(socket: &Socket) -> u16 {
    let address = socket.local_addr().ok();
    address
        .as_ref()
        .and_then(|a| a.as_socket().map(|a| a.port()).or_else(|| super::unix::number_of(a)))
        .unwrap_or(0)
}

/// Accepts one data connection per id in `expected`, refusing anything
/// not from the control peer or without the token. Each preamble is read
/// under one deadline from its accept (at most [`PREAMBLE_TIMEOUT`], never
/// past `deadline`), and past [`REFUSED_BEYOND_STREAMS`] refused preambles
/// the setup fails. Returns sockets by id.
pub fn accept_streams(
    listener: &Socket,
    net: &AgentNet,
    expected: &[u32],
    deadline: Instant,
) -> Result<BTreeMap<u32, Socket>, WorkloadError> {
    let mut streams = BTreeMap::new();
    let mut refused = 0u32;
    let mut refused_preambles = 0usize;
    while streams.len() < expected.len() {
        let Some((socket, peer)) = accept_until(listener, deadline, "a data connection")? else {
            return Err(WorkloadError::Setup(format!(
                "only {} of {} data connections arrived in time ({refused} refused)",
                streams.len(),
                expected.len()
            )));
        };
        let from_unix = peer.is_unix();
        let peer = peer.as_socket();
        // A peer without an IP address came over AF_UNIX, so from this
        // host: it stands for the control peer if that one is on this host.
        let peer_ip = peer
            .map(|p| p.ip())
            .or_else(|| (from_unix && super::unix::on_this_host(net.peer_ip)).then_some(net.peer_ip));
        if !peer_ip.is_some_and(|ip| net.peer_allowed(ip)) {
            refused += 1;
            let allowed = match net.routes.is_empty() {
                true => format!("only the control connection's peer {} may connect", net.peer_ip),
                false => "only the client addresses of the test's links may connect".to_string(),
            };
            refuse(peer, &allowed);
            continue;
        }
        if refused_preambles >= expected.len() + REFUSED_BEYOND_STREAMS {
            refuse(peer, "too many refused data connections for this test");
            return Err(WorkloadError::Setup(format!(
                "{refused_preambles} data connections from the client's address were refused (a wrong token, \
                 an unknown stream, or no preamble in time) for {} streams; the test is abandoned",
                expected.len()
            )));
        }
        let local = socket.local_addr().ok().and_then(|a| a.as_socket()).map(|a| a.ip());
        let accepted = Instant::now();
        let by = deadline.min(accepted + PREAMBLE_TIMEOUT);
        // Counted as refused until admitted below.
        refused_preambles += 1;
        match read_preamble(&socket, by) {
            Ok((token, id))
                if token_matches(&token, &net.token)
                    && expected.contains(&id)
                    && !streams.contains_key(&id)
                    && net
                        .check_stream(id, peer.map_or(net.peer_ip, |p| p.ip()), local)
                        .is_ok() =>
            {
                refused_preambles -= 1;
                let _ = Deadlined::new(&socket, deadline).clear();
                streams.insert(id, socket);
            }
            Ok((token, id)) => {
                refused += 1;
                let why = if !token_matches(&token, &net.token) {
                    "wrong session token".to_string()
                } else if let Err(why) = net.check_stream(id, peer.map_or(net.peer_ip, |p| p.ip()), local) {
                    why
                } else {
                    format!("stream id {id} not expected or already connected")
                };
                refuse(peer, &why);
            }
            Err(e) => {
                refused += 1;
                refuse(
                    peer,
                    &format!(
                        "no whole preamble (session token and stream id) within {:.1} s of its accept: {e}",
                        by.saturating_duration_since(accepted).as_secs_f64()
                    ),
                );
            }
        }
    }
    Ok(streams)
}

/// The 20-byte preamble, whole by `deadline`.
fn read_preamble(socket: &Socket, deadline: Instant) -> std::io::Result<([u8; TOKEN_LEN], u32)> {
    let mut preamble = [0u8; PREAMBLE_LEN];
    Deadlined::new(socket, deadline).read_exact(&mut preamble)?;
    let mut token = [0u8; TOKEN_LEN];
    token.copy_from_slice(&preamble[..TOKEN_LEN]);
    let id = u32::from_be_bytes(preamble[TOKEN_LEN..].try_into().unwrap());
    Ok((token, id))
}

/// Connects one data connection of transport `proto` for stream `id` and
/// presents the token.
pub fn connect_stream(
    proto: Proto,
    net: &ClientNet,
    port: u16,
    id: u32,
    configure: Configure,
) -> Result<Socket, WorkloadError> {
    let socket = proto.connect(net, port, id, configure)?;
    present_token(&socket, net, id)?;
    Ok(socket)
}

/// Opens data stream `id` on a connected `socket`: the session token and
/// the id, as the agent's [`accept_streams`] reads them.
pub fn present_token(socket: &Socket, net: &ClientNet, id: u32) -> Result<(), WorkloadError> {
    let mut preamble = [0u8; PREAMBLE_LEN];
    preamble[..TOKEN_LEN].copy_from_slice(&net.token);
    preamble[TOKEN_LEN..].copy_from_slice(&id.to_be_bytes());
    let mut writer: &Socket = socket;
    writer
        .write_all(&preamble)
        .map_err(WorkloadError::io(format!("opening data stream {id}")))
}

/// Closes every socket of a side (from another thread) so blocked calls return.
pub fn aborter(sockets: &[&Socket]) -> crate::workload::base::Aborter {
    let clones: Vec<Socket> = sockets.iter().filter_map(|s| s.try_clone().ok()).collect();
    std::sync::Arc::new(move || {
        for s in &clones {
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::IpAddr;

    #[test]
    fn token_comparison_needs_every_byte() {
        assert!(token_matches(b"abcd", b"abcd"));
        assert!(!token_matches(b"abcd", b"abce"));
        assert!(!token_matches(b"abc", b"abcd"));
    }

    #[test]
    fn strangers_and_wrong_tokens_are_refused_and_the_right_one_admitted() {
        let ip: IpAddr = "127.0.0.1".parse().unwrap();
        let token = crate::protocol::new_token();
        let agent_net = AgentNet::new(ip, ip, token, Default::default(), BTreeMap::new());
        let listener = Proto::TCP.listen(ip, 16, &|_| Ok(())).unwrap();
        let port = local_port(&listener);
        let client = move |token| ClientNet::on_this_kernel(ip, vec![port], token);
        // A wrong token, garbage, a silent connection, then the real one.
        let _wrong = connect_stream(Proto::TCP, &client(crate::protocol::new_token()), port, 1, &|_| Ok(())).unwrap();
        let mut junk = std::net::TcpStream::connect((ip, port)).unwrap();
        junk.write_all(b"GET / HTTP/1.0\r\nHost: x\r\n\r\n").unwrap();
        let good =
            std::thread::spawn(move || connect_stream(Proto::TCP, &client(token), port, 1, &|_| Ok(())).unwrap());
        let refused_before = refused_data_connections();
        let accepted = accept_streams(&listener, &agent_net, &[1], Instant::now() + Duration::from_secs(5)).unwrap();
        assert_eq!(accepted.keys().copied().collect::<Vec<_>>(), vec![1]);
        assert!(
            refused_data_connections() >= refused_before + 2,
            "the wrong token and the junk are counted"
        );
        drop(good.join().unwrap());
    }

    #[test]
    fn with_links_a_stream_is_admitted_only_over_its_own_link() {
        let ip = |s: &str| -> IpAddr { s.parse().unwrap() };
        let token = crate::protocol::new_token();
        let link = crate::model::LinkPair {
            client: ip("127.0.0.2"),
            agent: ip("127.0.0.3"),
        };
        let agent_net = AgentNet::new(
            ip("0.0.0.0"),
            ip("127.0.0.9"),
            token,
            Default::default(),
            BTreeMap::from([(1, link)]),
        );
        let unproven = agent_net
            .check_stream(1, ip("127.0.0.2"), Some(ip("127.0.0.3")))
            .unwrap_err();
        assert!(unproven.contains("has not proved itself"), "{unproven}");
        assert!(
            !agent_net.peer_allowed(ip("127.0.0.2")),
            "a link's client is admitted only once proven"
        );
        agent_net.proven.record(vec![ip("127.0.0.2")]).unwrap();
        let listener = Proto::TCP.listen(agent_net.local_ip, 16, &|_| Ok(())).unwrap();
        let port = local_port(&listener);
        let client = move |bind: &str, agent: &str| ClientNet {
            bind: Some(ip(bind)),
            ..ClientNet::on_this_kernel(ip(agent), vec![port], token)
        };
        // An address nobody announced, the right client to the wrong agent
        // address, then the link itself.
        let _stranger = connect_stream(Proto::TCP, &client("127.0.0.4", "127.0.0.3"), port, 1, &|_| Ok(())).unwrap();
        let _astray = connect_stream(Proto::TCP, &client("127.0.0.2", "127.0.0.5"), port, 1, &|_| Ok(())).unwrap();
        let good = std::thread::spawn(move || {
            connect_stream(Proto::TCP, &client("127.0.0.2", "127.0.0.3"), port, 1, &|_| Ok(())).unwrap()
        });
        let refused_before = refused_data_connections();
        let accepted = accept_streams(&listener, &agent_net, &[1], Instant::now() + Duration::from_secs(5)).unwrap();
        let socket = &accepted[&1];
        let peer = socket.peer_addr().unwrap().as_socket().unwrap();
        let local = socket.local_addr().unwrap().as_socket().unwrap();
        assert_eq!((peer.ip(), local.ip()), (link.client, link.agent));
        assert!(refused_data_connections() >= refused_before + 2);
        drop(good.join().unwrap());
        assert!(agent_net
            .check_stream(1, ip("127.0.0.2"), Some(ip("127.0.0.5")))
            .is_err());
        assert!(agent_net
            .check_stream(2, ip("127.0.0.2"), Some(ip("127.0.0.3")))
            .is_err());
        assert!(!agent_net.peer_allowed(ip("127.0.0.4")));
        assert!(agent_net.peer_allowed(ip("::ffff:127.0.0.2")));
    }

    #[test]
    fn traffic_goes_only_to_the_control_peer_and_proven_addresses() {
        let net = AgentNet::new(
            "127.0.0.1".parse().unwrap(),
            "::ffff:127.0.0.2".parse().unwrap(),
            [0; TOKEN_LEN],
            Default::default(),
            BTreeMap::new(),
        );
        assert!(check_destination(&net, "127.0.0.2:9".parse().unwrap()).is_ok());
        let err = check_destination(&net, "127.0.0.7:9".parse().unwrap()).unwrap_err();
        assert!(err.to_string().contains("only to the client"), "{err}");
        net.proven.record(vec!["127.0.0.7".parse().unwrap()]).unwrap();
        assert!(check_destination(&net, "127.0.0.7:9".parse().unwrap()).is_ok());
    }

    /// Issue 67, item 2: the preamble had a timeout per read, so a byte
    /// every 100 ms (under a 500 ms setup deadline) got a stream in after
    /// two seconds. It is cut off at the deadline now.
    #[test]
    fn a_preamble_dripped_a_byte_at_a_time_is_cut_off_at_the_deadline() {
        let ip: IpAddr = "127.0.0.1".parse().unwrap();
        let token = crate::protocol::new_token();
        let net = AgentNet::new(ip, ip, token, Default::default(), BTreeMap::new());
        let listener = Proto::TCP.listen(ip, 16, &|_| Ok(())).unwrap();
        let port = local_port(&listener);
        let drip = std::thread::spawn(move || {
            let mut s = std::net::TcpStream::connect((ip, port)).unwrap();
            let mut preamble = token.to_vec();
            preamble.extend_from_slice(&1u32.to_be_bytes());
            for byte in preamble {
                if s.write_all(&[byte]).is_err() {
                    return;
                }
                // The client's pace, not a wait for a state.
                std::thread::sleep(Duration::from_millis(100));
            }
        });
        let err = accept_streams(&listener, &net, &[1], Instant::now() + Duration::from_millis(500)).unwrap_err();
        assert!(
            err.to_string()
                .contains("0 of 1 data connections arrived in time (1 refused)"),
            "{err}"
        );
        drip.join().unwrap();
    }

    #[test]
    fn missing_connections_time_out_with_a_count() {
        let ip: IpAddr = "127.0.0.1".parse().unwrap();
        let net = AgentNet::new(ip, ip, [0; TOKEN_LEN], Default::default(), BTreeMap::new());
        let listener = Proto::TCP.listen(ip, 16, &|_| Ok(())).unwrap();
        let err = accept_streams(&listener, &net, &[1, 2], Instant::now() + Duration::from_millis(100)).unwrap_err();
        assert!(err.to_string().contains("0 of 2"), "{err}");
    }
}
