//! The hot loops of a TLS stream end. The sender hands each message to
//! rustls, which seals it into records of up to 16 KiB, and writes them
//! four records to a vectored write; the receiver reads the socket through a
//! large buffer (rustls asks for 4 KiB at a time, which would be a system
//! call each), opens the records and takes their plaintext where rustls
//! put it. Both count plaintext bytes, so the two
//! ends of a stream agree; the sender ends with close_notify, which the
//! receiver waits for.

use std::io::{BufRead, BufReader, Write};
use std::sync::atomic::Ordering;
use std::time::Instant;

use socket2::Socket;

use super::session::{ClientSetup, ServerSetup, Session};
use super::KEY;
use crate::model::SocketBuffers;
use crate::probe::tcpinfo;
use crate::workload::base::runner::{StreamContext, TaskEnd};
use crate::workload::base::{Aborter, AgentNet, ClientNet, WorkloadError};
use crate::workload::transport::admission::{self, Configure, JoinListener};
use crate::workload::transport::stream::{
    dial_sockets, same_host, Body, ConnectOptions, Held, PlainServing, Serving, Stream, Streams,
};
use crate::workload::transport::tcp::{pattern, ReceivePath, SendPath, RECEIVE_CHUNK};

/// How much sealed data the sender lets rustls hold before it writes:
/// four records. rustls seals each record into an allocation of its own
/// and frees it once written; with a whole 256 KiB message queued, freeing
/// it let glibc trim the heap and every next message faulted its pages in
/// again (15% of the sender's samples in page faults, docs/TLS.md).
const BUFFER_LIMIT: usize = 64 * 1024;

/// The sender's loop: seal and write messages until stopped or the quota
/// is sent, then close_notify and shut the write side.
pub fn send(socket: Socket, session: Session, message: usize, quota: Option<u64>, ctx: &StreamContext) -> TaskEnd {
    let Session {
        mut connection,
        end: mut tls,
    } = session;
    tls.cipher_one_core_bits_per_second = super::one_core_speed(&tls.cipher_suite, true);
    connection.set_buffer_limit(Some(BUFFER_LIMIT));
    let buffer = pattern(message);
    let mut out: &Socket = &socket;
    let mut total = 0u64;
    let mut error = None;
    'messages: while !ctx.stop.load(Ordering::Relaxed) {
        let want = match quota {
            Some(q) if q - total < message as u64 => (q - total) as usize,
            _ => message,
        };
        if want == 0 {
            break;
        }
        let mut taken = 0;
        while taken < want {
            match connection.writer().write(&buffer[taken..want]) {
                Ok(n) => taken += n,
                Err(e) => {
                    error = Some(format!("sealing records failed after {total} bytes: {e}"));
                    break 'messages;
                }
            }
            while connection.wants_write() {
                if let Err(e) = connection.write_tls(&mut out) {
                    if e.kind() == std::io::ErrorKind::Interrupted {
                        continue;
                    }
                    error = Some(format!("send failed after {total} bytes: {e}"));
                    break 'messages;
                }
            }
        }
        total += want as u64;
        ctx.bytes.store(total, Ordering::Relaxed);
    }
    if error.is_none() {
        connection.send_close_notify();
        while connection.wants_write() {
            if connection.write_tls(&mut out).is_err() {
                break;
            }
        }
    }
    let _ = socket.shutdown(std::net::Shutdown::Write);
    let mut end = TaskEnd::of_socket(&socket, error);
    end.extras.set(KEY, &tls);
    end
}

/// How much of the socket one read takes into the receiver's buffer.
const READ_AHEAD: usize = RECEIVE_CHUNK;

/// The receiver's loop: open records until the sender's close_notify (or
/// the connection closes), counting the plaintext. The message size plays
/// no part: records are what arrive.
pub fn receive(socket: Socket, session: Session, ctx: &StreamContext) -> TaskEnd {
    let Session {
        mut connection,
        end: mut tls,
    } = session;
    tls.cipher_one_core_bits_per_second = super::one_core_speed(&tls.cipher_suite, false);
    let mut input = BufReader::with_capacity(READ_AHEAD, &socket);
    let mut total = 0u64;
    let mut error = None;
    let mut closed = false;
    loop {
        // The plaintext rustls opened, taken where it lies: a receiver that
        // copied it out again would count a copy TCP's receiver does not make.
        let mut reader = connection.reader();
        match reader.fill_buf().map(|b| b.len()) {
            // close_notify, and every record before it read.
            Ok(0) => break,
            Ok(n) => {
                reader.consume(n);
                total += n as u64;
                ctx.bytes.store(total, Ordering::Relaxed);
                continue;
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            // The connection closed without close_notify: the test was
            // stopped from this side, or the sender went away.
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => break,
            Err(e) => {
                error = Some(format!("reading records failed after {total} bytes: {e}"));
                break;
            }
        }
        if closed {
            break;
        }
        match connection.read_tls(&mut input) {
            Ok(0) => closed = true,
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                error = Some(format!("receive failed after {total} bytes: {e}"));
                break;
            }
        }
        if let Err(e) = connection.process_new_packets() {
            error = Some(format!("a TLS record was refused after {total} bytes: {e}"));
            break;
        }
        // An alert or a key update's answer.
        while connection.wants_write() {
            if connection.write_tls(&mut &socket).is_err() {
                break;
            }
        }
    }
    let mut end = TaskEnd::of_socket(&socket, error);
    end.extras.set(KEY, &tls);
    end
}

/// A TLS stream: its TCP socket and its session, the handshake done
/// (boxed: a rustls connection is over a kilobyte).
pub struct TlsStream {
    socket: Socket,
    session: Box<Session>,
}

impl Stream for TlsStream {
    fn socket(&self) -> Option<&Socket> {
        Some(&self.socket)
    }

    fn buffers(&self) -> SocketBuffers {
        tcpinfo::socket_buffers(&self.socket)
    }

    fn aborter(&self) -> Aborter {
        admission::aborter(&[&self.socket])
    }

    fn peer_on_this_host(&self) -> bool {
        same_host(&self.socket)
    }

    fn carry(self: Box<Self>, seals: bool, body: Body) -> TaskEnd {
        let TlsStream { socket, session } = *self;
        let mut io = super::wire::TlsIo::new(*session, &socket);
        let mut end = body(Some(&socket), &mut io);
        super::record_handshake(&mut end, io.end, seals);
        end
    }

    /// rustls seals the records: the kernel's paths do not apply (a spec
    /// asking for them is refused).
    fn send(self: Box<Self>, message: usize, quota: Option<u64>, _: SendPath, ctx: &StreamContext) -> TaskEnd {
        send(self.socket, *self.session, message, quota, ctx)
    }

    fn receive(self: Box<Self>, _: usize, _: ReceivePath, ctx: &StreamContext) -> TaskEnd {
        receive(self.socket, *self.session, ctx)
    }
}

fn streams(sockets: Vec<(u32, Socket)>, sessions: Vec<(u32, Session)>, held: Held) -> Streams {
    let mut sessions: std::collections::BTreeMap<u32, Session> = sessions.into_iter().collect();
    let streams = sockets
        .into_iter()
        .filter_map(|(id, socket)| {
            let session = Box::new(sessions.remove(&id)?);
            Some((id, Box::new(TlsStream { socket, session }) as Box<dyn Stream>))
        })
        .collect();
    Streams { streams, held }
}

/// The agent's TLS listener: TCP's, and the agent's certificate.
pub struct TlsServing {
    tcp: PlainServing,
    setup: ServerSetup,
}

impl TlsServing {
    pub fn bind(net: &AgentNet, options: &ConnectOptions, count: usize) -> Result<TlsServing, WorkloadError> {
        // Made now, so the facts the agent answers with announce it.
        let setup = ServerSetup::new()?;
        let tcp = PlainServing::bind(&super::Tls, net, options, count)?;
        Ok(TlsServing { tcp, setup })
    }
}

impl Serving for TlsServing {
    fn port(&self) -> u16 {
        self.tcp.port()
    }

    fn accept(self: Box<Self>, ids: &[u32], configure: Configure, deadline: Instant) -> Result<Streams, WorkloadError> {
        let (sockets, held) = self.tcp.accept_sockets(ids, configure, deadline)?;
        let sessions = self.setup.handshake_all(&sockets, deadline)?;
        Ok(streams(sockets, sessions, held))
    }
}

/// The client's TLS streams: TCP's, each with its handshake, trusting the
/// agent as the spec's options say.
pub fn dial(net: &ClientNet, port: u16, ids: &[u32], options: &ConnectOptions) -> Result<Streams, WorkloadError> {
    let sockets = dial_sockets(&super::Tls, net, port, ids, options.configure)?;
    let tls = options.tls.cloned().unwrap_or_default();
    let sessions = ClientSetup::new(&tls, net)?.handshake_all(&sockets)?;
    Ok(streams(sockets, sessions, Held(Box::new(JoinListener::none()))))
}
