//! QUIC's streams as a workload gets them, all on one connection, and
//! their bulk sender's and receiver's loops. The sender hands quinn each message
//! as one shared buffer (no copy into quinn, as quinn's `perf` does); the
//! receiver takes the chunks quinn opened, 32 at a time, where they lie.
//! Both count stream bytes, so the two ends of a stream agree: the sender
//! finishes its stream and waits until the receiver has read all of it.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use quinn::{ReadError, StoppedError, VarInt, WriteError};
use socket2::Socket;

use super::endpoint::{self, closed_when_done, Connected, Listening, CLOSE_ABORTED};
use super::{DEFAULT_CONGESTION, KEY};
use crate::model::SocketBuffers;
use crate::workload::base::runner::{StreamContext, TaskEnd};
use crate::workload::base::{Aborter, AgentNet, ClientNet, WorkloadError};
use crate::workload::transport::stream::{Body, ConnectOptions, Held, Hold, Serving, Stream, Streams};
use crate::workload::transport::tcp::{pattern, ReceivePath, SendPath};
use crate::workload::transport::tls;
use crate::workload::transport::Configure;

/// One QUIC stream of the end's connection, both halves.
pub struct QuicStream {
    connected: Arc<Connected>,
    send: quinn::SendStream,
    recv: quinn::RecvStream,
}

impl Stream for QuicStream {
    fn socket(&self) -> Option<&Socket> {
        None
    }

    /// The endpoint's UDP socket's.
    fn buffers(&self) -> SocketBuffers {
        self.connected.local.buffers.clone()
    }

    fn aborter(&self) -> Aborter {
        let connection = self.connected.connection.clone();
        Arc::new(move || connection.close(VarInt::from_u32(CLOSE_ABORTED), b"aborted"))
    }

    /// Whether the peer's address is one of this host's (a UDP socket
    /// binds only to a local address).
    fn peer_on_this_host(&self) -> bool {
        let ip = self.connected.connection.remote_address().ip();
        ip.is_loopback() || std::net::UdpSocket::bind(std::net::SocketAddr::new(ip, 0)).is_ok()
    }

    fn carry(self: Box<Self>, seals: bool, body: Body) -> TaskEnd {
        let QuicStream { connected, send, recv } = *self;
        let mut wire = super::wire::QuicWire::new(&connected.local.driver, send, recv);
        let mut end = body(None, &mut wire);
        drop(wire);
        record(&mut end, &connected, seals);
        end
    }

    /// quinn protects the packets: the kernel's paths do not apply.
    fn send(self: Box<Self>, message: usize, quota: Option<u64>, _: SendPath, ctx: &StreamContext) -> TaskEnd {
        let QuicStream { connected, send, recv } = *self;
        drop(recv);
        let error = connected.local.driver.block_on(send_loop(send, message, quota, ctx));
        end_of(&connected, error, true)
    }

    fn receive(self: Box<Self>, _: usize, _: ReceivePath, ctx: &StreamContext) -> TaskEnd {
        let QuicStream { connected, send, recv } = *self;
        drop(send);
        let error = connected.local.driver.block_on(receive_loop(recv, ctx));
        end_of(&connected, error, false)
    }
}

/// The connection while its streams run: quinn's work (packets,
/// protection, system calls) runs on the stream threads as they drive
/// the runtime, so their CPU time has it; closed as done once they end.
struct Running(Arc<Connected>);

impl Hold for Running {
    fn start(&self) {
        self.0.local.driver.hand_over();
    }

    fn finish(&self) {
        self.0.local.close(&self.0.connection);
    }
}

fn streams(connected: Connected, streams: endpoint::Streams) -> Streams {
    let connected = Arc::new(connected);
    Streams {
        streams: streams
            .into_iter()
            .map(|(id, send, recv)| {
                let stream = QuicStream {
                    connected: connected.clone(),
                    send,
                    recv,
                };
                (id, Box::new(stream) as Box<dyn Stream>)
            })
            .collect(),
        held: Held(Box::new(Running(connected))),
    }
}

/// The agent's endpoint, and the cipher suite the spec names.
pub struct QuicServing {
    listening: Listening,
    cipher: &'static str,
}

impl QuicServing {
    pub fn bind(net: &AgentNet, options: &ConnectOptions, count: usize) -> Result<QuicServing, WorkloadError> {
        let congestion = options.congestion.unwrap_or(DEFAULT_CONGESTION);
        Ok(QuicServing {
            listening: Listening::bind(net, options.side, congestion, count)?,
            cipher: options.tls.cloned().unwrap_or_default().cipher.suite_name(),
        })
    }
}

impl Serving for QuicServing {
    fn port(&self) -> u16 {
        self.listening.port()
    }

    fn accept(self: Box<Self>, ids: &[u32], _: Configure, deadline: Instant) -> Result<Streams, WorkloadError> {
        let (connected, opened) = self.listening.accept(ids, self.cipher, deadline)?;
        Ok(streams(connected, opened))
    }
}

/// The client's connection, every stream of `ids` open on it.
pub fn dial(net: &ClientNet, port: u16, ids: &[u32], options: &ConnectOptions) -> Result<Streams, WorkloadError> {
    let tls = options.tls.cloned().unwrap_or_default();
    let congestion = options.congestion.unwrap_or(DEFAULT_CONGESTION);
    let (connected, opened) = endpoint::connect(net, port, options.side, &tls, congestion, ids)?;
    Ok(streams(connected, opened))
}

/// A stream end's record (its bytes are the context's count): its error,
/// and what [`record`] puts in it.
fn end_of(connected: &Connected, error: Option<String>, sends: bool) -> TaskEnd {
    let mut end = TaskEnd {
        tcp_info: None,
        socket: Some(connected.local.buffers.clone()),
        error,
        ..TaskEnd::default()
    };
    record(&mut end, connected, sends);
    end
}

/// Puts the handshake under `tls` (with this end's one-core cipher speed,
/// of sealing when `seals`) and the connection's figures under `quic` in
/// a stream end.
fn record(end: &mut TaskEnd, connected: &Connected, seals: bool) {
    tls::record_handshake(end, connected.tls.clone(), seals);
    end.extras.set(KEY, &connected.local.figures(&connected.connection));
}

/// The sender's loop: hand quinn messages until stopped or the quota is
/// sent, finish the stream, and wait until the receiver has read it all.
async fn send_loop(
    mut stream: quinn::SendStream,
    message: usize,
    quota: Option<u64>,
    ctx: &StreamContext<'_>,
) -> Option<String> {
    let buffer = Bytes::from(pattern(message).to_vec());
    let mut total = 0u64;
    while !ctx.stop.load(Ordering::Relaxed) {
        let want = match quota {
            Some(q) if q - total < message as u64 => (q - total) as usize,
            _ => message,
        };
        if want == 0 {
            break;
        }
        if let Err(e) = stream.write_chunk(buffer.slice(..want)).await {
            let why = match e {
                WriteError::Stopped(code) => format!("the receiver stopped the stream (code {code})"),
                WriteError::ConnectionLost(e) => format!("the connection was lost: {e}"),
                e => e.to_string(),
            };
            return Some(format!("send failed after {total} bytes: {why}"));
        }
        total += want as u64;
        ctx.bytes.store(total, Ordering::Relaxed);
    }
    if let Err(e) = stream.finish() {
        return Some(format!("finishing the stream after {total} bytes: {e}"));
    }
    match stream.stopped().await {
        Ok(None) => None,
        Ok(Some(code)) => Some(format!(
            "the receiver stopped the stream (code {code}) before reading it all"
        )),
        Err(StoppedError::ConnectionLost(e)) if closed_when_done(&e) => None,
        Err(e) => Some(format!(
            "after {total} bytes, waiting for the receiver to read them: {e}"
        )),
    }
}

/// The receiver's loop: take what quinn opened until the sender finishes
/// the stream, counting its bytes.
async fn receive_loop(mut stream: quinn::RecvStream, ctx: &StreamContext<'_>) -> Option<String> {
    let mut chunks: [Bytes; 32] = std::array::from_fn(|_| Bytes::new());
    let mut total = 0u64;
    loop {
        match stream.read_chunks(&mut chunks).await {
            Ok(Some(n)) => {
                total += chunks[..n].iter().map(|c| c.len() as u64).sum::<u64>();
                ctx.bytes.store(total, Ordering::Relaxed);
            }
            Ok(None) => return None,
            Err(ReadError::ConnectionLost(e)) if closed_when_done(&e) => {
                return Some(format!(
                    "the connection closed after {total} bytes, before the stream's end"
                ))
            }
            Err(e) => return Some(format!("receive failed after {total} bytes: {e}")),
        }
    }
}
