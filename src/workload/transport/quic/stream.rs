//! A QUIC side of the `tcp` workload: its streams on one connection, and
//! the sender's and receiver's loops. The sender hands quinn each message
//! as one shared buffer (no copy into quinn, as quinn's `perf` does); the
//! receiver takes the chunks quinn opened, 32 at a time, where they lie.
//! Both count stream bytes, so the two ends of a stream agree: the sender
//! finishes its stream and waits until the receiver has read all of it.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::Bytes;
use quinn::{ConnectionError, ReadError, StoppedError, VarInt, WriteError};

use super::endpoint::{Connected, Streams, CLOSE_ABORTED, CLOSE_DONE};
use super::KEY;
use crate::model::TestSpec;
use crate::model::{Flow, Party, Role};
use crate::workload::base::runner::{run_streams, StreamBody, StreamContext, StreamTask, TaskEnd};
use crate::workload::base::{Aborter, RunControl, Side, SideOutcome};
use crate::workload::transport::tcp::pattern;
use crate::workload::transport::tls;

/// One end's QUIC streams, open and admitted.
pub struct QuicSide {
    host: Party,
    spec: TestSpec,
    connected: Arc<Connected>,
    streams: Vec<(u32, Flow, quinn::SendStream, quinn::RecvStream)>,
}

impl QuicSide {
    pub fn new(host: Party, spec: &TestSpec, connected: Connected, streams: Streams) -> QuicSide {
        let flows = spec.flows();
        let streams = streams
            .into_iter()
            .filter_map(|(id, send, recv)| {
                flows
                    .iter()
                    .find(|(f, _)| *f == id)
                    .map(|(_, flow)| (id, *flow, send, recv))
            })
            .collect();
        QuicSide {
            host,
            spec: spec.clone(),
            connected: Arc::new(connected),
            streams,
        }
    }
}

impl Side for QuicSide {
    fn aborter(&self) -> Aborter {
        let connection = self.connected.connection.clone();
        Arc::new(move || connection.close(VarInt::from_u32(CLOSE_ABORTED), b"aborted"))
    }

    fn run(self: Box<Self>, control: &RunControl) -> SideOutcome {
        let message = self.spec.message_bytes as usize;
        let senders = self
            .streams
            .iter()
            .filter(|(_, f, _, _)| f.sender() == self.host)
            .count() as u64;
        let mut sender_index = 0u64;
        let mut tasks = Vec::new();
        let buffers = self.connected.local.buffers.clone();
        for (id, flow, send, recv) in self.streams {
            let connected = self.connected.clone();
            let (role, body): (Role, StreamBody) = if flow.sender() == self.host {
                let quota = self
                    .spec
                    .bytes
                    .map(|total| total / senders + u64::from(sender_index < total % senders));
                sender_index += 1;
                drop(recv);
                (
                    Role::Sender,
                    Box::new(move |ctx: &StreamContext| {
                        let error = connected.local.driver.block_on(send_loop(send, message, quota, ctx));
                        end_of(&connected, error, true)
                    }),
                )
            } else {
                drop(send);
                (
                    Role::Receiver,
                    Box::new(move |ctx: &StreamContext| {
                        let error = connected.local.driver.block_on(receive_loop(recv, ctx));
                        end_of(&connected, error, false)
                    }),
                )
            };
            tasks.push(StreamTask::new(id, role, buffers.clone(), body));
        }
        // quinn's work (packets, protection, system calls) runs on the
        // stream threads as they drive the runtime: their CPU time has it.
        self.connected.local.driver.hand_over();
        let outcome = run_streams(tasks, control);
        self.connected.local.close(&self.connected.connection);
        outcome
    }
}

/// A stream end's record (its bytes are the context's count): its error,
/// the handshake under `tls` and the connection's figures under `quic`.
fn end_of(connected: &Connected, error: Option<String>, sends: bool) -> TaskEnd {
    let mut end = TaskEnd {
        tcp_info: None,
        socket: Some(connected.local.buffers.clone()),
        error,
        ..TaskEnd::default()
    };
    let mut record = connected.tls.clone();
    record.cipher_one_core_bits_per_second = tls::one_core_speed(&record.cipher_suite, sends);
    end.extras.set(tls::KEY, &record);
    end.extras.set(KEY, &connected.local.figures(&connected.connection));
    end
}

/// Whether a connection error is the peer's close after its streams were
/// done: the end of the test, not a failure.
pub(crate) fn closed_when_done(e: &ConnectionError) -> bool {
    matches!(e, ConnectionError::ApplicationClosed(c) if c.error_code == VarInt::from_u32(CLOSE_DONE))
        || matches!(e, ConnectionError::LocallyClosed)
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
