//! What the MPTCP tests share: skipping where this host has no MPTCP (failing
//! under CI instead), MPTCP listeners and clients on loopback, a transfer whose
//! both ends' figures are read back and checked to add up, and a fresh network
//! namespace to set a path manager up in.

use std::io::{self, Read, Write};
use std::mem::size_of;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::process::Command;
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use socket2::{Domain, SockRef};

use super::{availability, connection, open_socket, MptcpConnection, Subflow};

/// What each transfer test sends, client to server.
const TRANSFER_BYTES: u64 = 4 << 20;

pub(super) use crate::probe::skip_or_fail;

/// Whether MPTCP works in this thread's namespace; when not, skips or fails.
pub(super) fn mptcp_here() -> bool {
    let available = availability();
    if let Err(e) = &available {
        skip_or_fail(&e.to_string());
    }
    available.is_ok()
}

pub(super) fn mptcp_listener() -> TcpListener {
    let socket = open_socket(Domain::IPV4).unwrap();
    socket.bind(&SocketAddr::from(([127, 0, 0, 1], 0)).into()).unwrap();
    socket.listen(16).unwrap();
    socket.into()
}

/// Gives a listener, and so the connections it accepts, a receive buffer
/// four times a whole transfer, so that the receive window never closes:
/// SO_RCVBUFFORCE passes net.core.rmem_max with CAP_NET_ADMIN, and
/// without it SO_RCVBUF is capped there.
fn hold_whole_transfer(listener: &TcpListener) {
    let bytes = (4 * TRANSFER_BYTES) as libc::c_int;
    // SAFETY: setsockopt reads one c_int.
    let forced = unsafe {
        libc::setsockopt(
            listener.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVBUFFORCE,
            &bytes as *const libc::c_int as *const libc::c_void,
            size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if forced != 0 {
        let _ = SockRef::from(listener).set_recv_buffer_size(bytes as usize);
    }
}

pub(super) fn mptcp_connect(to: SocketAddr) -> TcpStream {
    let socket = open_socket(Domain::IPV4).unwrap();
    socket.connect(&to.into()).unwrap();
    socket.into()
}

/// Polls `probe` until it gives a value; panics with `what` after 10 s.
fn wait_for<T>(what: &str, mut probe: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(value) = probe() {
            return value;
        }
        assert!(start.elapsed() < Duration::from_secs(10), "waited 10 s for {what}");
        thread::sleep(Duration::from_millis(5));
    }
}

fn sum(subflows: &[Subflow], field: fn(&Subflow) -> Option<u64>) -> u64 {
    subflows
        .iter()
        .map(|s| field(s).expect("this kernel fills tcp_info's byte counters"))
        .sum()
}

/// Both ends of one transfer, read while the connection is still open.
pub(super) struct Transfer {
    pub(super) client_end: MptcpConnection,
    pub(super) server_end: MptcpConnection,
    pub(super) client_local: SocketAddr,
    pub(super) server: SocketAddr,
    /// The receive buffer the server's connection was granted.
    pub(super) server_receive_buffer_bytes: u64,
}

/// Sends TRANSFER_BYTES from an MPTCP client to an MPTCP listener on
/// 127.0.0.1 and reads both ends' figures once the server has read it all
/// and the client has it all acknowledged. The path manager opens extra
/// subflows only once the connection is fully established, for a client
/// when its first data is acknowledged: a first chunk goes alone, then
/// the client waits for `subflows` subflows before the rest.
pub(super) fn transfer(subflows: usize) -> Transfer {
    let listener = mptcp_listener();
    hold_whole_transfer(&listener);
    let server = listener.local_addr().unwrap();
    let (figures_tx, figures_rx) = mpsc::channel();
    let (close_tx, close_rx) = mpsc::channel::<()>();
    let server_side = thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        let mut buffer = vec![0u8; 256 << 10];
        let mut received = 0u64;
        while received < TRANSFER_BYTES {
            let n = stream.read(&mut buffer).unwrap();
            assert!(n > 0, "the client closed after {received} bytes");
            received += n as u64;
        }
        let granted = SockRef::from(&stream).recv_buffer_size().unwrap() as u64;
        figures_tx.send((connection(&stream).unwrap(), granted)).unwrap();
        // Open until the client has read its figures: a FIN would be
        // acknowledged, and counted, as one more byte.
        let _ = close_rx.recv();
    });
    let mut client = mptcp_connect(server);
    let chunk = vec![0x5a_u8; 64 << 10];
    client.write_all(&chunk).unwrap();
    wait_for(&format!("{subflows} subflows"), || {
        (connection(&client).unwrap().subflows.len() >= subflows).then_some(())
    });
    let mut sent = chunk.len() as u64;
    while sent < TRANSFER_BYTES {
        let n = (TRANSFER_BYTES - sent).min(chunk.len() as u64) as usize;
        client.write_all(&chunk[..n]).unwrap();
        sent += n as u64;
    }
    let (server_end, server_receive_buffer_bytes) = figures_rx.recv().unwrap();
    // The last DATA_ACK and the subflows' last ACKs may trail the read. A
    // subflow's `bytes_acked` counts its SYN, so once all it sent is
    // acknowledged it is one above its `bytes_sent`.
    let client_end = wait_for("the client's data acknowledged", || {
        let end = connection(&client).unwrap();
        let all_acked = end.bytes_acked == Some(TRANSFER_BYTES)
            && end
                .subflows
                .iter()
                .all(|s| s.bytes_acked.unwrap_or(0) > s.bytes_sent.unwrap_or(0));
        all_acked.then_some(end)
    });
    let client_local = client.local_addr().unwrap();
    close_tx.send(()).unwrap();
    server_side.join().unwrap();
    Transfer {
        client_end,
        server_end,
        client_local,
        server,
        server_receive_buffer_bytes,
    }
}

/// The subflows' byte counts add up to the connection's, end by end:
/// - sender: a subflow's `bytes_sent` counts its own retransmissions
///   (`bytes_retrans`); what is left is its first transmissions, which
///   together carry the connection's data once (`bytes_sent`) plus the
///   data MPTCP sent again on another subflow (`bytes_retrans`);
/// - sender, acknowledged: the same, plus each subflow's SYN, which TCP's
///   `bytes_acked` counts as one byte (the connection's does not);
/// - receiver: in-order bytes per subflow; data reinjected on a second
///   subflow may arrive twice, so the sum exceeds the connection's
///   `bytes_received` by at most what the sender reinjected.
///
/// One thing neither end's connection counts: while the receive window
/// is closed and all data is acknowledged, MPTCP probes it by sending the
/// last acknowledged byte again as new data on a subflow
/// (`mptcp_sendmsg_frag`, net/mptcp/protocol.c), so each probe adds one
/// byte to the subflows only. The sums are exact when the receiver's
/// buffer holds the whole transfer (the window never closes); otherwise
/// the subflows may carry a few probe bytes more, here held to 0.1%.
pub(super) fn assert_sums(t: &Transfer) {
    let (client, server) = (&t.client_end, &t.server_end);
    assert!(!client.fallback && !server.fallback, "fell back: {client:?} {server:?}");
    assert_eq!(
        client.bytes_sent,
        Some(TRANSFER_BYTES),
        "the client's connection counts what it wrote"
    );
    assert_eq!(client.bytes_acked, Some(TRANSFER_BYTES));
    assert_eq!(
        server.bytes_received,
        Some(TRANSFER_BYTES),
        "the server's connection counts what it read"
    );
    let reinjected = client.bytes_retrans.unwrap();
    let first_transmissions = sum(&client.subflows, |s| s.bytes_sent) - sum(&client.subflows, |s| s.bytes_retrans);
    let probe_bytes = first_transmissions
        .checked_sub(TRANSFER_BYTES + reinjected)
        .unwrap_or_else(|| panic!("the subflows sent less than the connection: {:#?}", client.subflows));
    match t.server_receive_buffer_bytes >= 4 * TRANSFER_BYTES {
        true => assert_eq!(probe_bytes, 0, "the window never closed, yet: {:#?}", client.subflows),
        false => assert!(
            probe_bytes <= TRANSFER_BYTES / 1000,
            "{probe_bytes} probe bytes: {:#?}",
            client.subflows
        ),
    }
    let syns = client.subflows.len() as u64;
    assert_eq!(sum(&client.subflows, |s| s.bytes_acked), first_transmissions + syns);
    let received = sum(&server.subflows, |s| s.bytes_received);
    assert!(
        (TRANSFER_BYTES..=first_transmissions).contains(&received),
        "the server's subflows received {received} bytes, the connection {TRANSFER_BYTES}, \
         {reinjected} reinjected, {probe_bytes} in window probes"
    );
    assert_eq!(
        client.subflows.len(),
        server.subflows.len(),
        "both ends list the same subflows"
    );
}

pub(super) fn print_figures(label: &str, t: &Transfer) {
    eprintln!(
        "{label}: the server's receive buffer: {} bytes",
        t.server_receive_buffer_bytes
    );
    for (end, figures) in [("client", &t.client_end), ("server", &t.server_end)] {
        eprintln!(
            "{label}: {end}: {} subflows (extra {}), connection sent {:?} received {:?} acked {:?} reinjected {:?}",
            figures.subflows.len(),
            figures.extra_subflows,
            figures.bytes_sent,
            figures.bytes_received,
            figures.bytes_acked,
            figures.bytes_retrans
        );
        for s in &figures.subflows {
            eprintln!(
                "  {} -> {} {}: sent {:?} retrans {:?} acked {:?} received {:?}, rtt {} us",
                s.local, s.remote, s.state, s.bytes_sent, s.bytes_retrans, s.bytes_acked, s.bytes_received, s.rtt_us
            );
        }
    }
}
/// `ip ARGS` in this thread's namespace.
pub(super) fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("cannot run ip: {e}"))?;
    match out.status.success() {
        true => Ok(()),
        false => Err(format!(
            "`ip {}`: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )),
    }
}

/// Runs `f` on a thread of its own in a new network namespace with
/// loopback up (threads it starts share it); None when this process may
/// not make one (skipped, or failed under CI).
pub(super) fn in_new_namespace<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Option<T> {
    let outcome = thread::spawn(move || {
        // SAFETY: unshare moves only the calling thread into the new namespace.
        if unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0 {
            let e = io::Error::last_os_error();
            return Err(format!(
                "cannot make a network namespace ({e}): run as root or with CAP_SYS_ADMIN"
            ));
        }
        ip(&["link", "set", "lo", "up"])?;
        Ok(f())
    })
    .join()
    .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
    outcome.map_err(|why| skip_or_fail(&why)).ok()
}
