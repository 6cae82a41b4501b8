//! A new connection per transaction (`rr --crr`, netperf's TCP_CRR), as a
//! workload gets it. The agent serves ([`super::Transport::serve_transactions`],
//! bound before the test so its port goes to the client) and each of its
//! streams answers the connections that come ([`Answering`]); the client
//! dials ([`super::Transport::dial_transactions`]) and each stream opens one
//! connection per transaction ([`Dialing`]). The transport owns each
//! connection's life: connect, admission (the session token and the stream
//! id before anything else), its handshake where it has one, the request
//! and response, and the close. What the handshakes settled on goes into
//! the stream end when it is done.
//!
//! Here: the kernel byte stream every connection transport has (TCP,
//! MPTCP, AF_UNIX), with TLS's handshake on each connection for a
//! transport whose connections open with one (TLS; [`Secured`]). QUIC, whose
//! connections come from one endpoint, has its own in `quic/`.

use std::io::Write;
use std::sync::Arc;
use std::time::{Duration, Instant};

use socket2::Socket;

use super::stream::{ConnectOptions, Held, Hold};
use super::tls::session::{ClientSetup, ServerSetup};
use super::tls::wire::TlsIo;
use super::tls::{self, TlsEnd};
use super::{admission, Configure, Proto};
use crate::model::SocketBuffers;
use crate::protocol::TOKEN_LEN;
use crate::workload::base::runner::TaskEnd;
use crate::workload::base::sockets::{read_full, readable_within, token_matches};
use crate::workload::base::{Aborter, AgentNet, ClientNet, WorkloadError};

/// How long an agent's stream waits for a connection before it looks
/// whether the test is over.
pub const POLL: Duration = Duration::from_millis(50);
/// How long one connection may take to connect, or to deliver its
/// request or response.
const CONNECTION_TIMEOUT: Duration = Duration::from_secs(5);
/// How long the agent waits for an admitted connection's request.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(2);

/// A client stream's connections, one per transaction.
pub trait Dialing: Send {
    /// Names its connections in an error: "a new connection to 10.0.0.2:5201".
    fn connection(&self) -> String;
    /// One transaction on a new connection: `configure` set on its socket
    /// before it connects (where it has a kernel socket of its own), the
    /// request sent, the response read to its length, the connection
    /// closed at once (a reset: no TIME_WAIT piles up). Why not, where it
    /// failed.
    fn transact(&mut self, configure: Configure, request: &[u8], response: &mut [u8]) -> Result<(), String>;
    /// Puts what its connections' handshakes settled on in the stream end
    /// (the requests' direction sealed here), where they had one.
    fn finish(self: Box<Self>, end: &mut TaskEnd);
}

/// What one turn of an agent stream's [`Answering::answer`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// Nothing counted: no connection came in time, or it failed its
    /// admission, its handshake or its transaction.
    Nothing,
    /// One transaction answered.
    Answered,
    /// The listener is gone: the test was aborted.
    Closed,
}

/// An agent stream's share of the connections that come.
pub trait Answering: Send {
    /// Waits a short while ([`POLL`]) for one connection, admits it (the
    /// client's address, the session token, one of the test's stream ids),
    /// reads its request to `request`'s length and answers with
    /// `response`; `before_response` sees the connection's kernel socket,
    /// where it has one, between the two (TCP_QUICKACK).
    fn answer(&mut self, request: &mut [u8], response: &[u8], before_response: &mut dyn FnMut(&Socket)) -> Answer;
    /// Puts what its connections' handshakes settled on in the stream end
    /// (the responses' direction sealed here), where they had one.
    fn finish(self: Box<Self>, end: &mut TaskEnd);
}

/// One end's streams of a test with a connection per transaction.
pub struct Transactions<E> {
    /// Each stream's end, by id.
    pub ends: Vec<(u32, E)>,
    /// What the streams share while they run (QUIC's endpoint, driven by
    /// the stream threads; its last closes delivered after).
    pub held: Held,
    /// The buffers a connection runs with, where the transport sets them
    /// once for all (QUIC's socket); the kernel's defaults otherwise.
    pub buffers: SocketBuffers,
    /// Ends the test's waits from another thread (closes the listener or
    /// the endpoint); None where nothing waits long.
    pub aborter: Option<Aborter>,
}

/// The agent's end, bound before the test.
pub trait TransactionServing: Send {
    /// The port the client dials.
    fn port(&self) -> u16;
    /// One answering end for each stream of `ids`; they share the
    /// listener.
    fn accept(self: Box<Self>, ids: &[u32]) -> Result<Transactions<Box<dyn Answering>>, WorkloadError>;
}

/// Nothing held: a kernel listener needs no driving.
struct Nothing;

impl Hold for Nothing {}

/// The kernel byte stream's agent end: its listener and, for a transport
/// that shakes hands in user space, TLS's server side.
struct Listening {
    listener: Arc<Socket>,
    net: AgentNet,
    tls: Option<Arc<ServerSetup>>,
    /// Wait for a connection in poll(2), not in a blocking accept
    /// ([`Transport::accept_heeds_timeout`]).
    wait_in_poll: bool,
}

/// TLS's side of each connection where the transport has it, for
/// [`serve_stream`] and [`dial_stream`].
pub enum Secured {
    /// The kernel's byte stream as it is.
    Plain,
    /// A TLS 1.3 handshake on each connection after the token.
    Tls,
}

impl Secured {
    /// TLS's side where a transport's connections open with a TLS 1.3
    /// handshake ([`super::Transport::tls_handshake`]).
    pub fn of(tls_handshake: bool) -> Secured {
        match tls_handshake {
            true => Secured::Tls,
            false => Secured::Plain,
        }
    }
}

/// The agent's end of a kernel stream transport: its listener on the
/// address the client came to, `options`' buffers and socket options set
/// before it listens.
pub fn serve_stream(
    proto: Proto,
    net: &AgentNet,
    options: &ConnectOptions,
    secured: Secured,
) -> Result<Box<dyn TransactionServing>, WorkloadError> {
    let listener = proto.listen(net.local_ip, 1024, options.configure)?;
    let tls = match secured {
        Secured::Plain => None,
        Secured::Tls => Some(Arc::new(ServerSetup::new()?)),
    };
    Ok(Box::new(Listening {
        listener: Arc::new(listener),
        net: net.clone(),
        tls,
        wait_in_poll: !proto.accept_heeds_timeout(),
    }))
}

impl TransactionServing for Listening {
    fn port(&self) -> u16 {
        admission::local_port(&self.listener)
    }

    fn accept(self: Box<Self>, ids: &[u32]) -> Result<Transactions<Box<dyn Answering>>, WorkloadError> {
        match self.wait_in_poll {
            true => self
                .listener
                .set_nonblocking(true)
                .map_err(WorkloadError::io("making the --crr listener non-blocking"))?,
            false => self
                .listener
                .set_read_timeout(Some(POLL))
                .map_err(WorkloadError::io("setting the --crr listener's accept timeout"))?,
        }
        let aborter = admission::aborter(&[&*self.listener]);
        let ends = ids
            .iter()
            .map(|&id| {
                let answering = StreamAnswering {
                    listener: Arc::clone(&self.listener),
                    net: self.net.clone(),
                    ids: ids.to_vec(),
                    tls: self.tls.clone(),
                    handshakes: None,
                    buffer: Vec::new(),
                    wait_in_poll: self.wait_in_poll,
                };
                (id, Box::new(answering) as Box<dyn Answering>)
            })
            .collect();
        Ok(Transactions {
            ends,
            held: Held(Box::new(Nothing)),
            buffers: SocketBuffers::default(),
            aborter: Some(aborter),
        })
    }
}

/// One agent stream's turn at the shared listener.
struct StreamAnswering {
    listener: Arc<Socket>,
    net: AgentNet,
    ids: Vec<u32>,
    tls: Option<Arc<ServerSetup>>,
    handshakes: Option<TlsEnd>,
    /// The clear part of a connection's first bytes.
    buffer: Vec<u8>,
    wait_in_poll: bool,
}

impl StreamAnswering {
    /// Whether `from` may connect: the control connection's peer (or a
    /// proven link address); over AF_UNIX, the control peer if it is on
    /// this host.
    fn admits(&self, from: &socket2::SockAddr) -> bool {
        let ip = from
            .as_socket()
            .map(|a| a.ip())
            .or_else(|| (from.is_unix() && super::unix::on_this_host(self.net.peer_ip)).then_some(self.net.peer_ip));
        ip.is_some_and(|ip| self.net.peer_allowed(ip))
    }
}

impl Answering for StreamAnswering {
    fn answer(&mut self, request: &mut [u8], response: &[u8], before_response: &mut dyn FnMut(&Socket)) -> Answer {
        let (socket, from) = match accept_within(&self.listener, POLL, self.wait_in_poll) {
            Ok(Some(pair)) => pair,
            Ok(None) => return Answer::Nothing,
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => return Answer::Closed, // aborted
            Err(_) => return Answer::Nothing,
        };
        if !self.admits(&from) {
            return Answer::Nothing;
        }
        let _ = socket.set_read_timeout(Some(REQUEST_TIMEOUT));
        // The preamble, and over the kernel's stream the request with it
        // (the client sends both in one segment): one read for both.
        let preamble = TOKEN_LEN + 4;
        let clear = preamble + if self.tls.is_some() { 0 } else { request.len() };
        self.buffer.resize(clear, 0);
        if !matches!(read_full(&socket, &mut self.buffer), Ok(true))
            || !token_matches(&self.buffer[..TOKEN_LEN], &self.net.token)
        {
            return Answer::Nothing;
        }
        let mut id = [0u8; 4];
        id.copy_from_slice(&self.buffer[TOKEN_LEN..preamble]);
        if !self.ids.contains(&u32::from_be_bytes(id)) {
            return Answer::Nothing;
        }
        let Some(setup) = &self.tls else {
            request.copy_from_slice(&self.buffer[preamble..]);
            before_response(&socket);
            let mut writer: &Socket = &socket;
            return match writer.write_all(response) {
                Ok(()) => Answer::Answered,
                Err(_) => Answer::Nothing,
            };
        };
        let Ok(session) = setup.handshake(&socket, Instant::now() + REQUEST_TIMEOUT) else {
            return Answer::Nothing;
        };
        let record = session.end.clone();
        let mut io = TlsIo::new(session, &socket);
        if !matches!(read_full(&mut io, request), Ok(true)) {
            return Answer::Nothing;
        }
        before_response(&socket);
        if io.write_all(response).is_err() {
            return Answer::Nothing;
        }
        self.handshakes
            .get_or_insert_with(TlsEnd::default)
            .add_handshake(&record);
        Answer::Answered
    }

    fn finish(self: Box<Self>, end: &mut TaskEnd) {
        if let Some(record) = self.handshakes {
            tls::record_handshake(end, record, false);
        }
    }
}

/// Waits up to `wait` for a connection on `listener` and takes it,
/// unless another stream's thread took it first (None). With
/// `wait_in_poll` the listener is non-blocking and the wait is poll(2)'s:
/// an MPTCP listener's accept does not heed SO_RCVTIMEO, so a blocking
/// accept with no connection coming outwaited the test's end and the
/// agent aborted it. Otherwise the listener's SO_RCVTIMEO is `wait` and
/// the accept waits itself: one call per connection, not two (a
/// connection per transaction was 9% slower unpinned with the poll).
fn accept_within(
    listener: &Socket,
    wait: Duration,
    wait_in_poll: bool,
) -> std::io::Result<Option<(Socket, socket2::SockAddr)>> {
    if wait_in_poll {
        // Whatever the wait says, the accept below tells whether a
        // connection came (or the listener was shut).
        let _ = readable_within(listener, wait);
    }
    match listener.accept() {
        Ok(pair) => Ok(Some(pair)),
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::Interrupted
            ) =>
        {
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

/// The client's ends of a kernel stream transport, one per stream of
/// `ids`, each connecting to `port` over its stream's link.
pub fn dial_stream(
    proto: Proto,
    net: &ClientNet,
    port: u16,
    ids: &[u32],
    options: &ConnectOptions,
    secured: Secured,
) -> Result<Transactions<Box<dyn Dialing>>, WorkloadError> {
    let tls = match secured {
        Secured::Plain => None,
        Secured::Tls => Some(Arc::new(ClientSetup::new(
            &options.tls.cloned().unwrap_or_default(),
            net,
        )?)),
    };
    let ends = ids
        .iter()
        .map(|&id| {
            let dialing = StreamDialing {
                proto,
                net: net.clone(),
                port,
                id,
                tls: tls.clone(),
                handshakes: None,
                message: Vec::new(),
            };
            (id, Box::new(dialing) as Box<dyn Dialing>)
        })
        .collect();
    Ok(Transactions {
        ends,
        held: Held(Box::new(Nothing)),
        buffers: SocketBuffers::default(),
        aborter: None,
    })
}

/// One client stream's connections.
struct StreamDialing {
    proto: Proto,
    net: ClientNet,
    port: u16,
    id: u32,
    tls: Option<Arc<ClientSetup>>,
    handshakes: Option<TlsEnd>,
    /// The preamble and the request, sent in one write (kept between
    /// transactions).
    message: Vec<u8>,
}

impl Dialing for StreamDialing {
    fn connection(&self) -> String {
        let (_, agent) = self.net.route(self.id);
        format!("a new connection to {}", std::net::SocketAddr::new(agent, self.port))
    }

    fn transact(&mut self, configure: Configure, request: &[u8], response: &mut [u8]) -> Result<(), String> {
        let socket = self
            .proto
            .connect(&self.net, self.port, self.id, configure)
            .map_err(|e| e.to_string())?;
        // Closed with a reset once done: a connection per transaction
        // would leave a TIME_WAIT each.
        let _ = socket.set_linger(Some(Duration::ZERO));
        // No write timeout: the first bytes of a new connection fit its
        // empty send buffer, and a handshake has its own deadline.
        let _ = socket.set_read_timeout(Some(CONNECTION_TIMEOUT));
        let mut preamble = [0u8; TOKEN_LEN + 4];
        preamble[..TOKEN_LEN].copy_from_slice(&self.net.token);
        preamble[TOKEN_LEN..].copy_from_slice(&self.id.to_be_bytes());
        let mut writer: &Socket = &socket;
        let Some(setup) = &self.tls else {
            // The preamble and the request in one segment.
            self.message.clear();
            self.message.extend_from_slice(&preamble);
            self.message.extend_from_slice(request);
            writer
                .write_all(&self.message)
                .map_err(|e| format!("sending the request: {e}"))?;
            return match read_full(&socket, response) {
                Ok(true) => Ok(()),
                Ok(false) => Err("the agent closed the connection without a response".into()),
                Err(e) => Err(format!("reading the response: {e}")),
            };
        };
        writer
            .write_all(&preamble)
            .map_err(|e| format!("opening the connection: {e}"))?;
        let session = setup
            .handshake(&socket, Instant::now() + CONNECTION_TIMEOUT)
            .map_err(|e| format!("TLS handshake: {e}"))?;
        let mut io = TlsIo::new(session, &socket);
        io.write_all(request).map_err(|e| format!("sending the request: {e}"))?;
        let record = io.end.clone();
        match read_full(&mut io, response) {
            Ok(true) => {
                self.handshakes
                    .get_or_insert_with(TlsEnd::default)
                    .add_handshake(&record);
                Ok(())
            }
            Ok(false) => Err("the agent closed the connection without a response".into()),
            Err(e) => Err(format!("reading the response: {e}")),
        }
    }

    fn finish(self: Box<Self>, end: &mut TaskEnd) {
        if let Some(record) = self.handshakes {
            tls::record_handshake(end, record, true);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::net::{IpAddr, TcpStream};

    use super::*;
    use crate::model::SideOptions;

    /// Answers until `answered` transactions came, counting the turns
    /// that answered nothing.
    fn answer(answering: &mut dyn Answering, answered: usize) -> (Vec<Vec<u8>>, usize) {
        let (mut requests, mut nothing) = (Vec::new(), 0);
        let mut hooked = 0;
        while requests.len() < answered {
            let mut request = [0u8; 3];
            match answering.answer(&mut request, b"hello", &mut |_| hooked += 1) {
                Answer::Answered => requests.push(request.to_vec()),
                Answer::Nothing => nothing += 1,
                Answer::Closed => panic!("closed before {answered} answers"),
            }
        }
        assert_eq!(hooked, answered, "the hook sees every answered connection");
        (requests, nothing)
    }

    #[test]
    fn each_transaction_is_a_connection_admitted_by_token_and_stream() {
        let ip: IpAddr = "127.0.0.1".parse().unwrap();
        let token = crate::protocol::new_token();
        let agent_net = AgentNet::new(ip, ip, token, Default::default(), Default::default());
        let side = SideOptions::default();
        let options = ConnectOptions::new(&side, &|_| Ok(()), None);
        let serving = Proto::TCP.serve_transactions(&agent_net, &options).unwrap();
        let port = serving.port();
        let agent = serving.accept(&[1, 2]).unwrap();
        assert_eq!(agent.ends.iter().map(|(id, _)| *id).collect::<Vec<_>>(), [1, 2]);
        let aborter = agent.aborter.clone().expect("the listener can be shut");
        let mut answering = agent.ends.into_iter().next().unwrap().1;

        // A stranger's token and an unknown stream are not answered.
        let mut wrong = TcpStream::connect((ip, port)).unwrap();
        wrong.write_all(&[0u8; TOKEN_LEN + 4 + 3]).unwrap();
        let mut unknown = TcpStream::connect((ip, port)).unwrap();
        unknown.write_all(&token).unwrap();
        unknown.write_all(&9u32.to_be_bytes()).unwrap();
        unknown.write_all(b"abc").unwrap();

        let net = ClientNet::on_this_kernel(ip, Vec::new(), token);
        let dialer = std::thread::spawn(move || {
            let side = SideOptions::default();
            let options = ConnectOptions::new(&side, &|_| Ok(()), None);
            let mut client = Proto::TCP.dial_transactions(&net, port, &[2], &options).unwrap();
            assert!(client.aborter.is_none());
            let (id, mut dialing) = client.ends.pop().unwrap();
            assert_eq!(id, 2);
            assert_eq!(dialing.connection(), format!("a new connection to 127.0.0.1:{port}"));
            let mut responses = Vec::new();
            for _ in 0..3 {
                let mut response = [0u8; 5];
                dialing.transact(&|_| Ok(()), b"abc", &mut response).unwrap();
                responses.push(response);
            }
            let mut end = TaskEnd::default();
            dialing.finish(&mut end);
            assert!(end.extras.get::<TlsEnd>(tls::KEY).is_none(), "no handshake over TCP");
            responses
        });
        let (requests, nothing) = answer(&mut *answering, 3);
        assert_eq!(requests, vec![b"abc".to_vec(); 3]);
        assert!(
            nothing >= 2,
            "the stranger and the unknown stream: {nothing} turns answered nothing"
        );
        assert_eq!(dialer.join().unwrap(), [*b"hello"; 3]);
        // Aborted: the listener is shut, and the next turn says so.
        aborter();
        let mut request = [0u8; 3];
        assert_eq!(answering.answer(&mut request, b"hello", &mut |_| {}), Answer::Closed);
    }

    /// With nobody connecting a turn ends with nothing answered, whether
    /// the listener's accept waits itself (TCP: SO_RCVTIMEO) or in poll(2)
    /// (MPTCP, whose accept ignores the timeout: this hung before the
    /// poll), and a turn after the abort says the listener is closed.
    #[test]
    fn with_nobody_connecting_a_turn_ends_and_an_aborted_one_says_closed() {
        if Proto::MPTCP.available().is_err() {
            crate::probe::skip_or_fail("this kernel opens no MPTCP socket (net.mptcp.enabled=0?)");
        }
        let ip: IpAddr = "127.0.0.1".parse().unwrap();
        let net = AgentNet::new(
            ip,
            ip,
            crate::protocol::new_token(),
            Default::default(),
            Default::default(),
        );
        let side = SideOptions::default();
        let options = ConnectOptions::new(&side, &|_| Ok(()), None);
        for proto in [Proto::TCP, Proto::MPTCP].into_iter().filter(|p| p.available().is_ok()) {
            assert_eq!(proto.accept_heeds_timeout(), proto != Proto::MPTCP);
            let agent = proto.serve_transactions(&net, &options).unwrap().accept(&[1]).unwrap();
            let aborter = agent.aborter.clone().expect("the listener can be shut");
            let mut answering = agent.ends.into_iter().next().unwrap().1;
            let mut request = [0u8; 3];
            for _ in 0..2 {
                let turn = answering.answer(&mut request, b"hello", &mut |_| {});
                assert_eq!(turn, Answer::Nothing, "{}", proto.name());
            }
            aborter();
            let turn = answering.answer(&mut request, b"hello", &mut |_| {});
            assert_eq!(turn, Answer::Closed, "{}", proto.name());
        }
    }

    #[test]
    fn a_datagram_transport_has_no_connections_and_the_error_says_so() {
        let ip: IpAddr = "127.0.0.1".parse().unwrap();
        let net = AgentNet::new(ip, ip, [0; TOKEN_LEN], Default::default(), Default::default());
        let side = SideOptions::default();
        let err = Proto::UDP
            .serve_transactions(&net, &ConnectOptions::new(&side, &|_| Ok(()), None))
            .err()
            .expect("UDP has no connections");
        assert!(
            err.to_string().contains("UDP carries datagrams, not connections"),
            "{err}"
        );
    }
}
