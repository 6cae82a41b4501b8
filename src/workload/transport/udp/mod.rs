//! UDP, the datagram transport (Linux): binding, the
//! registration handshake that admits only the control peer with the
//! session token, UDP GSO/GRO socket options, batched sendmmsg/recvmmsg,
//! the per-socket drop counter from /proc/net/udp, and the send and
//! receive loops any workload over datagrams runs ([`loops`], counting
//! into [`counts::UdpEnd`]).
//!
//! Registration: each client stream socket sends [`register_datagram`]s
//! (token + stream id) to its agent port until it gets an ack. The agent
//! refuses (and counts) anything else, and once a stream has registered it
//! `connect()`s the socket to that source, so the kernel filters every
//! other sender from then on.

pub mod counts;
pub mod loops;
pub mod wire;

use std::net::{IpAddr, SocketAddr};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use socket2::{Domain, Protocol, SockAddr, Socket, Type};

use super::admission::{apply_buffers, check_destination, local_port, set_int_option};
use super::datagram::{DatagramServing, Endpoint};
use super::stream::ConnectOptions;
use super::{About, Delivery, Transport};
use crate::linerate::Stack;
use crate::model::spec::SideOptions;
use crate::protocol::TOKEN_LEN;
use crate::workload::base::{AgentNet, ClientNet, WorkloadError};
use wire::{ack_datagram, check_register, register_datagram, DatagramHeader, Kind, REGISTER_LEN};

/// UDP.
pub struct Udp;

static ABOUT: About = About {
    name: "udp",
    label: "UDP",
    delivery: Delivery::Datagram,
    socket: (Type::DGRAM, Some(Protocol::UDP)),
    stack: [Stack::Udp4, Stack::Udp6],
};

impl Transport for Udp {
    fn about(&self) -> &'static About {
        &ABOUT
    }

    fn largest_message(&self) -> Option<(u64, &'static str)> {
        Some((wire::MAX_DATAGRAM_BYTES, "the largest UDP payload over IPv4"))
    }

    fn serve_datagrams(
        &self,
        net: &AgentNet,
        ids: &[u32],
        options: &ConnectOptions,
    ) -> Result<Box<dyn DatagramServing>, WorkloadError> {
        let mut sockets = Vec::with_capacity(ids.len());
        for &id in ids {
            let socket = bind_udp(net.local_ip_for(id), options.side)?;
            (options.configure)(&socket)?;
            sockets.push((id, socket));
        }
        Ok(Box::new(Registering {
            sockets,
            net: net.clone(),
        }))
    }

    fn dial_datagrams(
        &self,
        net: &ClientNet,
        ids: &[u32],
        options: &ConnectOptions,
    ) -> Result<Vec<Endpoint>, WorkloadError> {
        Ok(register_streams(net, ids, options.side, options.configure)?
            .into_iter()
            .map(|(id, socket)| Endpoint { id, socket, refused: 0 })
            .collect())
    }
}

/// The agent's UDP sockets of a test, waiting for their registrations.
struct Registering {
    sockets: Vec<(u32, Socket)>,
    net: AgentNet,
}

impl DatagramServing for Registering {
    fn ports(&self) -> Vec<u16> {
        self.sockets.iter().map(|(_, s)| local_port(s)).collect()
    }

    fn accept(self: Box<Self>, deadline: Instant) -> Result<Vec<Endpoint>, WorkloadError> {
        let refused = await_registrations(&self.sockets, &self.net, deadline)?;
        Ok(self
            .sockets
            .into_iter()
            .zip(refused)
            .map(|((id, socket), refused)| Endpoint { id, socket, refused })
            .collect())
    }
}

/// Socket option numbers (include/uapi/linux/udp.h, asm-generic/socket.h).
const UDP_SEGMENT: libc::c_int = 103;
const UDP_GRO: libc::c_int = 104;
/// Most segments the kernel accepts in one GSO send.
pub const MAX_GSO_SEGMENTS: usize = 64;
/// Largest buffer handed to one GSO send or returned by one GRO receive.
pub const MAX_OFFLOAD_BYTES: usize = 65_000;
/// How long a client waits for all its streams to be acknowledged.
const REGISTER_TIMEOUT: Duration = Duration::from_secs(3);

fn domain_of(ip: IpAddr) -> Domain {
    if ip.is_ipv4() {
        Domain::IPV4
    } else {
        Domain::IPV6
    }
}

/// The real-time clock, the clock of kernel receive timestamps
/// (SO_TIMESTAMPNS) and of the datagrams' send stamps.
pub use crate::workload::base::one_way::realtime_nanos;

/// Turns on UDP GSO: every send longer than `segment` is cut by the kernel.
pub fn enable_gso(socket: &Socket, segment: usize) -> Result<(), WorkloadError> {
    set_int_option(socket, libc::SOL_UDP, UDP_SEGMENT, segment as libc::c_int).map_err(WorkloadError::io(
        "enabling UDP GSO (UDP_SEGMENT, Linux 4.18+); run without --gso",
    ))
}

/// Turns on UDP GRO: the kernel may hand over several datagrams at once.
pub fn enable_gro(socket: &Socket) -> Result<(), WorkloadError> {
    set_int_option(socket, libc::SOL_UDP, UDP_GRO, 1).map_err(WorkloadError::io(
        "enabling UDP GRO (UDP_GRO, Linux 5.0+); run without --gro",
    ))
}

/// SO_TIMESTAMPNS: the kernel stamps every datagram on arrival, so jitter
/// does not depend on when the receiving thread gets to run.
pub fn enable_receive_timestamps(socket: &Socket) -> Result<(), WorkloadError> {
    set_int_option(socket, libc::SOL_SOCKET, libc::SO_TIMESTAMPNS, 1)
        .map_err(WorkloadError::io("enabling kernel receive timestamps (SO_TIMESTAMPNS)"))
}

/// SO_RXQ_OVFL: each datagram comes with the count of datagrams the
/// socket dropped before it was queued, so the drops of the warm-up can be
/// told from the measured part's (a socket's /proc/net/udp count covers
/// both).
pub fn enable_drop_counts(socket: &Socket) -> Result<(), WorkloadError> {
    set_int_option(socket, libc::SOL_SOCKET, libc::SO_RXQ_OVFL, 1)
        .map_err(WorkloadError::io("enabling per-datagram drop counts (SO_RXQ_OVFL)"))
}

/// A UDP socket bound to `ip`, kernel-chosen port, with the side's buffers.
pub fn bind_udp(ip: IpAddr, side: &SideOptions) -> Result<Socket, WorkloadError> {
    let socket = Socket::new(domain_of(ip), Type::DGRAM, Some(Protocol::UDP))
        .map_err(WorkloadError::io("creating a UDP socket"))?;
    apply_buffers(&socket, side)?;
    socket
        .bind(&SocketAddr::new(ip, 0).into())
        .map_err(WorkloadError::io(format!("binding a UDP socket on {ip}")))?;
    Ok(socket)
}

/// Agent: waits until every socket's stream has registered from the control
/// peer with the token, connects each to its client, and returns how many
/// datagrams each socket refused on the way.
pub fn await_registrations(
    sockets: &[(u32, Socket)],
    net: &AgentNet,
    deadline: Instant,
) -> Result<Vec<u64>, WorkloadError> {
    let mut registered = vec![false; sockets.len()];
    let mut refused = vec![0u64; sockets.len()];
    while registered.iter().any(|r| !r) {
        let now = Instant::now();
        if now >= deadline {
            return Err(WorkloadError::Setup(format!(
                "only {} of {} UDP streams registered in time ({} datagrams refused); \
                 is a firewall dropping UDP between the hosts?",
                registered.iter().filter(|r| **r).count(),
                sockets.len(),
                refused.iter().sum::<u64>()
            )));
        }
        let mut fds: Vec<libc::pollfd> = sockets
            .iter()
            .map(|(_, s)| libc::pollfd {
                fd: s.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        let timeout = (deadline - now).as_millis().min(200) as libc::c_int;
        // SAFETY: fds is a valid array of pollfd.
        unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout) };
        for (i, (id, socket)) in sockets.iter().enumerate() {
            if fds[i].revents == 0 {
                continue;
            }
            let mut buf = [std::mem::MaybeUninit::<u8>::uninit(); 2048];
            let Ok((len, from)) = socket.recv_from_with_flags(&mut buf, libc::MSG_DONTWAIT) else {
                continue;
            };
            // SAFETY: recv_from initialized the first `len` bytes.
            let data: Vec<u8> = buf[..len].iter().map(|b| unsafe { b.assume_init() }).collect();
            let local = socket.local_addr().ok().and_then(|a| a.as_socket()).map(|a| a.ip());
            // A datagram proves nothing about its source: the source must
            // be an address that proved itself over TCP, or the agent would
            // stream to whomever a forged registration names.
            let from_ok: Result<(), String> = match from.as_socket() {
                Some(a) => net
                    .check_stream(*id, a.ip(), local)
                    .and_then(|()| check_destination(net, a).map_err(|e| e.to_string())),
                None => Err("not an IP address".into()),
            };
            match check_register(&data, &net.token) {
                Some(stream) if from_ok.is_ok() && stream == *id => {
                    if !registered[i] {
                        socket
                            .connect(&from)
                            .map_err(WorkloadError::io(format!("connecting UDP stream {id} to its client")))?;
                        registered[i] = true;
                    }
                    let _ = socket.send(&ack_datagram(*id));
                }
                _ => {
                    refused[i] += 1;
                    if refused[i] == 1 {
                        let why = from_ok
                            .err()
                            .unwrap_or_else(|| "not a registration with the session token".into());
                        log::warn!("UDP stream {id}: refused a datagram from {:?}: {why}", from.as_socket());
                    }
                }
            }
        }
    }
    Ok(refused)
}

/// Client: one socket per port, connected to the agent and registered.
pub fn register_streams(
    net: &ClientNet,
    ids: &[u32],
    side: &SideOptions,
    configure: &dyn Fn(&Socket) -> Result<(), WorkloadError>,
) -> Result<Vec<(u32, Socket)>, WorkloadError> {
    if net.data_ports.len() != ids.len() {
        return Err(WorkloadError::Setup(format!(
            "the agent offered {} UDP ports for {} streams",
            net.data_ports.len(),
            ids.len()
        )));
    }
    let mut sockets = Vec::with_capacity(ids.len());
    for (&id, &port) in ids.iter().zip(&net.data_ports) {
        let (bind, agent_ip) = net.route(id);
        let local = bind.unwrap_or(if agent_ip.is_ipv4() {
            IpAddr::from([0u8; 4])
        } else {
            IpAddr::from([0u16; 8])
        });
        let socket = bind_udp(local, side)?;
        configure(&socket)?;
        let addr = SocketAddr::new(agent_ip, port);
        socket
            .connect(&SockAddr::from(addr))
            .map_err(WorkloadError::io(format!("connecting UDP stream {id} to {addr}")))?;
        sockets.push((id, socket));
    }
    let deadline = Instant::now() + REGISTER_TIMEOUT;
    for (id, socket) in &sockets {
        register_one(socket, *id, &net.token, deadline);
    }
    Ok(sockets)
}

/// Sends registrations until acknowledged or the deadline passes. Without
/// an ack the test still goes on: the agent says over the control
/// connection whether every stream arrived.
fn register_one(socket: &Socket, id: u32, token: &[u8; TOKEN_LEN], deadline: Instant) {
    let mut attempt = 0u64;
    let _ = socket.set_read_timeout(Some(Duration::from_millis(50)));
    while Instant::now() < deadline {
        let _ = socket.send(&register_datagram(id, attempt, token));
        attempt += 1;
        let mut buf = [std::mem::MaybeUninit::<u8>::uninit(); REGISTER_LEN];
        let until = Instant::now() + Duration::from_millis(50 * attempt.min(4));
        while Instant::now() < until {
            match socket.recv(&mut buf) {
                Ok(len) => {
                    // SAFETY: recv initialized the first `len` bytes.
                    let data: Vec<u8> = buf[..len].iter().map(|b| unsafe { b.assume_init() }).collect();
                    if DatagramHeader::read(&data).is_some_and(|h| h.kind == Kind::Ack && h.stream_id == id) {
                        let _ = socket.set_read_timeout(None);
                        return;
                    }
                }
                Err(_) => break,
            }
        }
    }
    let _ = socket.set_read_timeout(None);
    log::debug!("UDP stream {id}: no registration ack; relying on the agent's ready");
}

/// Datagrams the kernel dropped at this socket (receive buffer full), from
/// the `drops` column of /proc/net/udp and /proc/net/udp6.
pub fn socket_drops(socket: &Socket) -> Option<u64> {
    // SAFETY: fstat writes into the zeroed struct.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstat(socket.as_raw_fd(), &mut st) } != 0 {
        return None;
    }
    let inode = st.st_ino.to_string();
    ["/proc/net/udp", "/proc/net/udp6"]
        .iter()
        .filter_map(|p| std::fs::read_to_string(p).ok())
        .find_map(|text| drops_of_inode(&text, &inode))
}

/// The drops of the socket with `inode` in a /proc/net/udp table.
pub fn drops_of_inode(table: &str, inode: &str) -> Option<u64> {
    table.lines().skip(1).find_map(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        (f.len() >= 13 && f[9] == inode).then(|| f[12].parse().ok()).flatten()
    })
}

/// Batches of outgoing datagrams for sendmmsg: `entries` buffers of up to
/// `entry_bytes` each (one datagram, or a GSO train of several).
pub struct SendBatch {
    pub buffers: Vec<Vec<u8>>,
    iov: Vec<libc::iovec>,
    msgs: Vec<libc::mmsghdr>,
}

// SAFETY: the raw pointers point into `buffers`, owned by the same value.
unsafe impl Send for SendBatch {}

impl SendBatch {
    pub fn new(entries: usize, entry_bytes: usize) -> SendBatch {
        let mut buffers: Vec<Vec<u8>> = (0..entries)
            .map(|_| (0..entry_bytes).map(|i| (i % 251) as u8).collect())
            .collect();
        let iov: Vec<libc::iovec> = buffers
            .iter_mut()
            .map(|b| libc::iovec {
                iov_base: b.as_mut_ptr() as *mut libc::c_void,
                iov_len: b.len(),
            })
            .collect();
        // SAFETY: mmsghdr is plain data; zero is a valid empty header.
        let msgs = (0..entries).map(|_| unsafe { std::mem::zeroed() }).collect();
        SendBatch { buffers, iov, msgs }
    }

    /// Sends the first `lens.len()` buffers with the given lengths; returns
    /// how many went out.
    pub fn send(&mut self, fd: libc::c_int, lens: &[usize]) -> std::io::Result<usize> {
        for (i, &len) in lens.iter().enumerate() {
            self.iov[i].iov_len = len;
            self.msgs[i].msg_hdr.msg_iov = &mut self.iov[i];
            self.msgs[i].msg_hdr.msg_iovlen = 1;
        }
        // SAFETY: msgs and iov point into buffers that live as long as self.
        let n = unsafe { libc::sendmmsg(fd, self.msgs.as_mut_ptr(), lens.len() as libc::c_uint, 0) };
        if n < 0 {
            Err(std::io::Error::last_os_error())
        } else {
            Ok(n as usize)
        }
    }
}

/// Room for the control messages of one datagram: a GRO segment size
/// (CMSG_SPACE(4) = 24 B), a receive timestamp (CMSG_SPACE(16) = 32 B)
/// and a drop count (CMSG_SPACE(4) = 24 B), with room to spare.
type Control = [u64; 12];

/// One received message: its length, the GRO segment size if the kernel
/// coalesced several datagrams, and the kernel's arrival time (real-time
/// clock, ns) if timestamps are on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReceivedDatagram {
    pub len: usize,
    pub segment: Option<usize>,
    pub arrival_nanos: Option<u64>,
    /// The socket's drops before this datagram was queued (SO_RXQ_OVFL);
    /// the kernel sends none while the count is 0.
    pub drops_before: Option<u32>,
}

/// Buffers for recvmmsg, with room for the control messages of each.
pub struct RecvBatch {
    pub buffers: Vec<Vec<u8>>,
    controls: Vec<Control>,
    iov: Vec<libc::iovec>,
    msgs: Vec<libc::mmsghdr>,
}

// SAFETY: the raw pointers point into fields owned by the same value.
unsafe impl Send for RecvBatch {}

impl RecvBatch {
    pub fn new(entries: usize, entry_bytes: usize) -> RecvBatch {
        let mut buffers: Vec<Vec<u8>> = (0..entries).map(|_| vec![0u8; entry_bytes]).collect();
        let iov = buffers
            .iter_mut()
            .map(|b| libc::iovec {
                iov_base: b.as_mut_ptr() as *mut libc::c_void,
                iov_len: b.len(),
            })
            .collect();
        // SAFETY: mmsghdr is plain data.
        let msgs = (0..entries).map(|_| unsafe { std::mem::zeroed() }).collect();
        RecvBatch {
            buffers,
            controls: vec![Control::default(); entries],
            iov,
            msgs,
        }
    }

    /// How many datagrams one call can return.
    pub fn capacity(&self) -> usize {
        self.msgs.len()
    }

    /// Receives at least one datagram (or times out); returns the count.
    pub fn recv(&mut self, fd: libc::c_int) -> std::io::Result<usize> {
        self.recv_with(fd, libc::MSG_WAITFORONE)
    }

    /// Takes what is queued without waiting (EAGAIN if nothing is).
    pub fn recv_queued(&mut self, fd: libc::c_int) -> std::io::Result<usize> {
        self.recv_with(fd, libc::MSG_DONTWAIT)
    }

    fn recv_with(&mut self, fd: libc::c_int, flags: libc::c_int) -> std::io::Result<usize> {
        for i in 0..self.msgs.len() {
            let hdr = &mut self.msgs[i].msg_hdr;
            hdr.msg_iov = &mut self.iov[i];
            hdr.msg_iovlen = 1;
            hdr.msg_control = self.controls[i].as_mut_ptr() as *mut libc::c_void;
            hdr.msg_controllen = std::mem::size_of::<Control>() as _;
            hdr.msg_name = std::ptr::null_mut();
            hdr.msg_namelen = 0;
        }
        // SAFETY: every header points at live buffers owned by self.
        let n = unsafe {
            libc::recvmmsg(
                fd,
                self.msgs.as_mut_ptr(),
                self.msgs.len() as libc::c_uint,
                flags,
                std::ptr::null_mut(),
            )
        };
        if n < 0 {
            Err(std::io::Error::last_os_error())
        } else {
            Ok(n as usize)
        }
    }

    /// ReceivedDatagram `i` of the last receive.
    pub fn message(&self, i: usize) -> ReceivedDatagram {
        let msg = &self.msgs[i];
        let hdr = &msg.msg_hdr;
        let mut out = ReceivedDatagram {
            len: msg.msg_len as usize,
            segment: None,
            arrival_nanos: None,
            drops_before: None,
        };
        // SAFETY: the CMSG macros walk the control buffer the kernel filled.
        unsafe {
            let mut cmsg = libc::CMSG_FIRSTHDR(hdr);
            while !cmsg.is_null() {
                if (*cmsg).cmsg_level == libc::SOL_UDP && (*cmsg).cmsg_type == UDP_GRO {
                    let size = std::ptr::read_unaligned(libc::CMSG_DATA(cmsg) as *const libc::c_int);
                    out.segment = (size > 0).then_some(size as usize);
                } else if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_TIMESTAMPNS {
                    let ts = std::ptr::read_unaligned(libc::CMSG_DATA(cmsg) as *const libc::timespec);
                    out.arrival_nanos = Some(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64);
                } else if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SO_RXQ_OVFL {
                    out.drops_before = Some(std::ptr::read_unaligned(libc::CMSG_DATA(cmsg) as *const u32));
                }
                cmsg = libc::CMSG_NXTHDR(hdr, cmsg);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drops_are_read_from_the_socket_line() {
        let table = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer drops\n\
          5: 0100007F:9C40 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 123456 2 0000000000000000 17\n";
        assert_eq!(drops_of_inode(table, "123456"), Some(17));
        assert_eq!(drops_of_inode(table, "999"), None);
    }

    #[test]
    fn received_datagrams_carry_the_kernels_arrival_time() {
        let ip: IpAddr = "127.0.0.1".parse().unwrap();
        let receiver = bind_udp(ip, &SideOptions::default()).unwrap();
        enable_receive_timestamps(&receiver).unwrap();
        let sender = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let before = realtime_nanos();
        for len in [20usize, 300] {
            sender
                .send_to(&vec![7u8; len], receiver.local_addr().unwrap().as_socket().unwrap())
                .unwrap();
        }
        let mut batch = RecvBatch::new(4, 2048);
        let mut got = Vec::new();
        let _ = receiver.set_read_timeout(Some(Duration::from_secs(2)));
        while got.len() < 2 {
            let n = batch.recv(receiver.as_raw_fd()).unwrap();
            got.extend((0..n).map(|i| batch.message(i)));
        }
        let after = realtime_nanos();
        assert_eq!(got.iter().map(|m| m.len).collect::<Vec<_>>(), [20, 300]);
        for m in got {
            let at = m.arrival_nanos.expect("SO_TIMESTAMPNS gives every datagram a stamp");
            assert!(before <= at && at <= after, "{before} <= {at} <= {after}");
            assert_eq!(m.segment, None);
        }
        // Nothing queued: a non-waiting receive says so at once.
        let err = batch.recv_queued(receiver.as_raw_fd()).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::WouldBlock);
    }

    #[test]
    fn a_fresh_socket_has_no_drops() {
        let s = bind_udp("127.0.0.1".parse().unwrap(), &SideOptions::default()).unwrap();
        assert_eq!(socket_drops(&s), Some(0));
    }

    #[test]
    fn the_seam_hands_over_endpoints_claimed_by_the_token_and_counts_strangers() {
        let ip: IpAddr = "127.0.0.1".parse().unwrap();
        let token = crate::protocol::new_token();
        let agent_net = AgentNet::new(ip, ip, token, Default::default(), Default::default());
        let configured = std::sync::atomic::AtomicUsize::new(0);
        let configure = |_: &Socket| {
            configured.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            Ok(())
        };
        let side = SideOptions::default();
        let serving = Udp
            .serve_datagrams(&agent_net, &[1, 2], &ConnectOptions::new(&side, &configure, None))
            .unwrap();
        let ports = serving.ports();
        assert_eq!(ports.len(), 2);
        assert!(ports.iter().all(|&p| p != 0) && ports[0] != ports[1], "{ports:?}");
        let stranger = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        stranger
            .send_to(b"junk that is not ours", ("127.0.0.1", ports[1]))
            .unwrap();
        stranger
            .send_to(
                &register_datagram(2, 0, &crate::protocol::new_token()),
                ("127.0.0.1", ports[1]),
            )
            .unwrap();
        let client_net = ClientNet::on_this_kernel(ip, ports.clone(), token);
        let client = std::thread::spawn(move || {
            let side = SideOptions::default();
            Udp.dial_datagrams(&client_net, &[1, 2], &ConnectOptions::new(&side, &|_| Ok(()), None))
        });
        let agent = serving.accept(Instant::now() + Duration::from_secs(5)).unwrap();
        let client = client.join().unwrap().unwrap();
        assert_eq!(
            configured.load(std::sync::atomic::Ordering::Relaxed),
            2,
            "configure runs on every socket"
        );
        assert_eq!(
            agent.iter().map(|e| (e.id, e.refused)).collect::<Vec<_>>(),
            [(1, 0), (2, 2)]
        );
        assert_eq!(
            client.iter().map(|e| (e.id, e.refused)).collect::<Vec<_>>(),
            [(1, 0), (2, 0)]
        );
        // Connected both ways, stream by stream: the agent's socket now
        // talks to its stream's client socket only.
        for (a, c) in agent.iter().zip(&client) {
            assert_eq!(
                a.socket.peer_addr().unwrap().as_socket(),
                c.socket.local_addr().unwrap().as_socket()
            );
            assert_eq!(
                c.socket.peer_addr().unwrap().as_socket(),
                a.socket.local_addr().unwrap().as_socket()
            );
        }
    }

    #[test]
    fn a_client_offered_fewer_ports_than_streams_is_refused() {
        let ip: IpAddr = "127.0.0.1".parse().unwrap();
        let net = ClientNet::on_this_kernel(ip, vec![9], [0; TOKEN_LEN]);
        let side = SideOptions::default();
        let err = Udp
            .dial_datagrams(&net, &[1, 2], &ConnectOptions::new(&side, &|_| Ok(()), None))
            .err()
            .expect("two streams on one port");
        assert!(
            err.to_string().contains("the agent offered 1 UDP ports for 2 streams"),
            "{err}"
        );
    }

    #[test]
    fn a_stream_transport_has_no_datagram_endpoints_and_the_error_says_so() {
        let ip: IpAddr = "127.0.0.1".parse().unwrap();
        let net = AgentNet::new(ip, ip, [0; TOKEN_LEN], Default::default(), Default::default());
        let side = SideOptions::default();
        let err = super::super::Proto::TCP
            .serve_datagrams(&net, &[1], &ConnectOptions::new(&side, &|_| Ok(()), None))
            .err()
            .expect("TCP carries no datagrams");
        assert!(
            err.to_string().contains("TCP delivers a byte stream, not datagrams"),
            "{err}"
        );
        assert_eq!(super::super::datagrams(), super::super::Proto::UDP);
    }

    #[test]
    fn message_sizes_are_checked_against_the_largest_datagram() {
        let udp = super::super::Proto::UDP;
        assert!(udp.check_message_size("-l", wire::MAX_DATAGRAM_BYTES, 16).is_ok());
        assert!(udp.check_message_size("-l", 16, 16).is_ok());
        let over = udp
            .check_message_size("-l", wire::MAX_DATAGRAM_BYTES + 1, 16)
            .unwrap_err()
            .to_string();
        assert!(
            over.contains("16 to 65507 bytes (65507 is the largest UDP payload over IPv4"),
            "{over}"
        );
        let under = udp.check_message_size("-l", 15, 16).unwrap_err().to_string();
        assert!(under.contains("15 bytes"), "{under}");
        // A byte stream takes any size from the header on.
        assert!(super::super::Proto::TCP.check_message_size("-l", u64::MAX, 1).is_ok());
    }
}
