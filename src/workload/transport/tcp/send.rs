//! The hot loops of a TCP stream end: the sender (copying send(2),
//! sendfile(2), send with MSG_ZEROCOPY) and the receiver (copying recv(2),
//! or recv with MSG_TRUNC that discards). Each loop owns its buffers and
//! counters; per call it makes the one syscall and stores one counter, and
//! never allocates, locks, logs or reads the clock.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};

use socket2::Socket;

use super::zerocopy::{self, Completions};
use super::{TcpEnd, KEY};
use crate::workload::base::runner::{StreamContext, TaskEnd};

/// How a sender hands its bytes to the kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendPath {
    /// send(2) from a buffer: the kernel copies it.
    Copy,
    /// sendfile(2) from a file in the page cache: the socket takes
    /// references to its pages (`-Z`).
    Sendfile,
    /// send(2) with MSG_ZEROCOPY on a socket with SO_ZEROCOPY
    /// (`--zerocopy=msg`); completions read from the error queue.
    MsgZeroCopy,
}

/// How a receiver takes its bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReceivePath {
    /// recv(2) into a buffer.
    Copy,
    /// recv(2) with MSG_TRUNC: the kernel drops the bytes uncopied.
    Discard,
}

fn last_os_error(what: &str) -> Option<std::io::Error> {
    let e = std::io::Error::last_os_error();
    if e.kind() == std::io::ErrorKind::Interrupted {
        None
    } else {
        log::debug!("{what}: {e}");
        Some(e)
    }
}

/// The bytes every sender sends: a pattern no receive buffer starts with.
/// One read-only copy per length, shared by every sender alive in this
/// process (16 reverse streams of 64 MiB hold 64 MiB, not 1 GiB): nothing
/// writes it, so MSG_ZEROCOPY may pin its pages from several sockets.
///
/// The bytes are a box of their own behind the shared count: the cache's
/// weak reference keeps only the count's small block, so the bytes are
/// freed when the last sender ends (an `Arc<[u8]>` shares one block, which
/// a weak reference keeps whole: 64 MiB held between tests, issue 41's soak).
pub(crate) fn pattern(len: usize) -> Arc<Box<[u8]>> {
    static SHARED: Mutex<Vec<Weak<Box<[u8]>>>> = Mutex::new(Vec::new());
    let mut shared = SHARED.lock().unwrap_or_else(|p| p.into_inner());
    shared.retain(|p| p.strong_count() > 0);
    if let Some(alive) = shared.iter().filter_map(Weak::upgrade).find(|p| p.len() == len) {
        return alive;
    }
    let fresh: Arc<Box<[u8]>> = Arc::new((0..len).map(|i| (i % 251) as u8).collect());
    shared.push(Arc::downgrade(&fresh));
    fresh
}

/// A file of `len` bytes to sendfile(2) from: an unnamed file in the page
/// cache (O_TMPFILE in the temporary directory), or a memory file where
/// that is refused (a read-only or private /tmp). The page cache's
/// splice-read looks the pages up in batches and in large folios, where a
/// memory file's (shmem) looks up each 4 KiB page alone: that lookup was
/// 14% of the sender's time with -Z (docs/BENCHMARKS.md, issue 33).
fn sendfile_source(len: usize) -> std::io::Result<OwnedFd> {
    let file = match page_cache_file() {
        Ok(file) => file,
        Err(e) => {
            log::debug!(
                "no unnamed file in {}: {e}; sending from a memory file",
                std::env::temp_dir().display()
            );
            memory_file()?
        }
    };
    let mut f = std::fs::File::from(file.try_clone()?);
    std::io::Write::write_all(&mut f, &pattern(len))?;
    Ok(file)
}

fn page_cache_file() -> std::io::Result<OwnedFd> {
    use std::os::unix::ffi::OsStrExt;
    let dir = std::ffi::CString::new(std::env::temp_dir().as_os_str().as_bytes())
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    // SAFETY: a NUL-terminated path; the fd is owned here.
    let fd = unsafe { libc::open(dir.as_ptr(), libc::O_TMPFILE | libc::O_RDWR | libc::O_CLOEXEC, 0o600) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn memory_file() -> std::io::Result<OwnedFd> {
    // The system call, not glibc's wrapper: the wrapper came with glibc
    // 2.27, and the release binary runs on 2.17 (contrib/release.sh); the
    // call itself is Linux 3.17's.
    // SAFETY: memfd_create takes a NUL-terminated name; the fd is owned here.
    let fd = unsafe { libc::syscall(libc::SYS_memfd_create, c"nicbench-send".as_ptr(), libc::MFD_CLOEXEC) } as i32;
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// The sender's hot loop: one syscall and one counter store per message.
pub(crate) fn send_stream(
    socket: Socket,
    message: usize,
    quota: Option<u64>,
    path: SendPath,
    ctx: &StreamContext,
) -> TaskEnd {
    send_stream_held(socket, message, quota, path, None, ctx)
}

/// [`send_stream`] that pauses while `hold` is raised (the `loaded`
/// workload's phases): one more relaxed load per message, and a 1 ms nap
/// per turn while held.
pub(crate) fn send_stream_held(
    socket: Socket,
    message: usize,
    quota: Option<u64>,
    path: SendPath,
    hold: Option<&AtomicBool>,
    ctx: &StreamContext,
) -> TaskEnd {
    let fd = socket.as_raw_fd();
    let buffer = pattern(message);
    let source = match path {
        SendPath::Sendfile => match sendfile_source(message) {
            Ok(f) => Some(f),
            Err(e) => {
                return TaskEnd {
                    error: Some(format!("zero-copy send needs a file to send from: {e}")),
                    ..TaskEnd::default()
                }
            }
        },
        _ => None,
    };
    let source_fd = source.as_ref().map_or(-1, |f| f.as_raw_fd());
    let mut completions = (path == SendPath::MsgZeroCopy).then(Completions::default);
    let mut total = 0u64;
    let mut calls = 0u64;
    let mut error = None;
    while !ctx.stop.load(Ordering::Relaxed) {
        if hold.is_some_and(|h| h.load(Ordering::Relaxed)) {
            std::thread::sleep(std::time::Duration::from_millis(1));
            continue;
        }
        let want = match quota {
            Some(q) if q - total < message as u64 => (q - total) as usize,
            _ => message,
        };
        if want == 0 {
            break;
        }
        // SAFETY: the buffer outlives the call and is never written while
        // MSG_ZEROCOPY may still read it; the fds are open.
        let n = unsafe {
            match path {
                SendPath::Sendfile => {
                    let mut offset: libc::off_t = 0;
                    libc::sendfile(fd, source_fd, &mut offset, want)
                }
                SendPath::Copy => libc::send(fd, buffer.as_ptr() as *const libc::c_void, want, libc::MSG_NOSIGNAL),
                SendPath::MsgZeroCopy => {
                    libc::send(fd, buffer.as_ptr() as *const libc::c_void, want, zerocopy::SEND_FLAGS)
                }
            }
        };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if let (Some(c), Some(libc::ENOBUFS)) = (completions.as_mut(), e.raw_os_error()) {
                // The pages pinned by earlier sends used up the socket's
                // option memory: collect completions, then try again.
                if let Err(e) = c.wait_for_room(fd) {
                    error = Some(format!("reading MSG_ZEROCOPY completions after {total} bytes: {e}"));
                    break;
                }
                continue;
            }
            if let Some(e) = last_os_error("send") {
                error = Some(format!("send failed after {total} bytes: {e}"));
                break;
            }
            continue;
        }
        total += n as u64;
        calls += u64::from(n > 0);
        ctx.bytes.store(total, Ordering::Relaxed);
        if let Some(c) = completions.as_mut() {
            if n > 0 {
                c.sent();
                if c.drain_due() {
                    if let Err(e) = c.drain(fd) {
                        error = Some(format!("reading MSG_ZEROCOPY completions after {total} bytes: {e}"));
                        break;
                    }
                }
            }
        }
    }
    let _ = socket.shutdown(std::net::Shutdown::Write);
    let mut part = TcpEnd::default();
    match path {
        SendPath::Copy => {}
        SendPath::Sendfile => part.sendfile_calls = Some(calls),
        SendPath::MsgZeroCopy => {
            let (record, late) = completions.take().unwrap_or_default().finish(fd);
            error = error.or(late);
            part.msg_zerocopy = Some(record);
        }
    }
    let mut end = TaskEnd::of_socket(&socket, error);
    if path != SendPath::Copy {
        end.extras.set(KEY, &part);
    }
    end
}

/// The most a copying receiver asks of one recv(2), whatever the message size.
///
/// While recv(2) copies, the socket belongs to the reader: segments that
/// arrive meanwhile wait in its backlog, unacknowledged, until the copy
/// ends. A read of 256 KiB held them long enough that a bbr sender on
/// loopback ran out of window and sent a third less (iperf3 3.21's reader,
/// which asks only for what its 128 KiB buffer still lacks, got more); with
/// reads of at most 64 KiB nicbench's copying receiver went from 31-32 to
/// 44-47 Gbit/s, at no cost with cubic (docs/BENCHMARKS.md, issue 33).
pub const RECEIVE_CHUNK: usize = 64 * 1024;

/// The receiver's hot loop: read until the sender closes. Each call asks
/// for what the current message still lacks (a copying receiver at most
/// [`RECEIVE_CHUNK`] of it), so that after a short read the next one asks
/// for less and returns sooner, as iperf3's reader does. A discarding
/// receiver (MSG_TRUNC) that asked for a whole message every time read at
/// 38-46 Gbit/s under bbr on loopback where the same reader filling its
/// messages read 49-64 (docs/BENCHMARKS.md, issue 33).
pub(crate) fn receive_stream(socket: Socket, message: usize, path: ReceivePath, ctx: &StreamContext) -> TaskEnd {
    let fd = socket.as_raw_fd();
    let message = message.max(1);
    let most = match path {
        ReceivePath::Copy => message.min(RECEIVE_CHUNK),
        ReceivePath::Discard => message,
    };
    let mut buffer = vec![0u8; most];
    let flags = match path {
        ReceivePath::Copy => 0,
        ReceivePath::Discard => libc::MSG_TRUNC,
    };
    let mut total = 0u64;
    let mut lacking = message;
    let mut error = None;
    loop {
        let ask = lacking.min(most);
        // SAFETY: the buffer is `most` >= `ask` bytes long and outlives the call.
        let n = unsafe { libc::recv(fd, buffer.as_mut_ptr() as *mut libc::c_void, ask, flags) };
        if n == 0 {
            break;
        }
        if n < 0 {
            if let Some(e) = last_os_error("recv") {
                error = Some(format!("receive failed after {total} bytes: {e}"));
                break;
            }
            continue;
        }
        // MSG_TRUNC on TCP never reports more than asked; stay in step if it did.
        lacking = match lacking.saturating_sub(n as usize) {
            0 => message,
            left => left,
        };
        total += n as u64;
        ctx.bytes.store(total, Ordering::Relaxed);
    }
    let mut end = TaskEnd::of_socket(&socket, error);
    if path == ReceivePath::Discard {
        // The buffer starts zeroed and the sender's pattern is not: a
        // single copied byte would show.
        let part = TcpEnd {
            receive_buffer_untouched: Some(total > 0 && buffer.iter().all(|&b| b == 0)),
            ..TcpEnd::default()
        };
        end.extras.set(KEY, &part);
    }
    end
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn senders_alive_at_once_share_one_pattern_per_length() {
        let a = pattern(4096);
        let b = pattern(4096);
        assert!(Arc::ptr_eq(&a, &b), "one copy for every sender of a length");
        let other = pattern(4095);
        assert!(!Arc::ptr_eq(&a, &other));
        assert_eq!(a[250], 250);
        assert_eq!(a[251], 0, "the pattern");
        drop((a, b));
        let weak = Arc::downgrade(&pattern(8192));
        assert_eq!(weak.strong_count(), 0, "freed when the last sender ends");
        // The bytes live in their own allocation, which the cache's weak
        // reference does not keep: dropping the last sender frees them.
        let held = pattern(1 << 20);
        let (block, bytes) = (Arc::as_ptr(&held) as usize, held.as_ptr() as usize);
        assert!(
            bytes < block || bytes >= block + 64,
            "the bytes share the count's block"
        );
    }
}
