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

use socket2::Socket;

use super::session::Session;
use super::KEY;
use crate::probe::tcpinfo;
use crate::workload::base::runner::{StreamContext, TaskEnd};
use crate::workload::transport::tcp::{pattern, RECEIVE_CHUNK};

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
    let mut end = TaskEnd {
        tcp_info: tcpinfo::tcp_info(&socket),
        socket: Some(tcpinfo::socket_buffers(&socket)),
        error,
        ..TaskEnd::default()
    };
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
    let mut end = TaskEnd {
        tcp_info: tcpinfo::tcp_info(&socket),
        socket: Some(tcpinfo::socket_buffers(&socket)),
        error,
        ..TaskEnd::default()
    };
    end.extras.set(KEY, &tls);
    end
}
