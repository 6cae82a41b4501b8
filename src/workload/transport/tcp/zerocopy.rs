//! `--zerocopy=msg`: send(2) with `MSG_ZEROCOPY` on a socket with
//! `SO_ZEROCOPY`, and the kernel's completions read from the socket's error
//! queue in batches.
//!
//! Each send that moves bytes gets the next number of the socket's counter;
//! the kernel later queues a notice naming a range of those numbers once it
//! is done with the pages (merged, so one notice often covers many sends),
//! flagged `SO_EE_CODE_ZEROCOPY_COPIED` when it had to copy them after all.
//! That is always the case when the receiver is on this host (loopback,
//! veth): the pages are copied on delivery, so the mode cannot gain there,
//! and the record says so. The hot loop drains the queue once per
//! [`DRAIN_EVERY`] sends, not per send, and the end waits for every
//! outstanding completion so no pinned page is left behind.

use std::io;
use std::os::fd::RawFd;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::workload::base::WorkloadError;

/// `SO_ZEROCOPY` (asm-generic/socket.h; x86, arm and most others).
const SO_ZEROCOPY: libc::c_int = 60;
/// `SO_EE_ORIGIN_ZEROCOPY` (linux/errqueue.h).
const SO_EE_ORIGIN_ZEROCOPY: u8 = 5;
/// `SO_EE_CODE_ZEROCOPY_COPIED`: the kernel copied the data after all.
const SO_EE_CODE_ZEROCOPY_COPIED: u8 = 1;

/// Sends between two drains of the error queue in the hot loop. A drain
/// is one `recvmsg` per queued notice plus one that finds the queue
/// empty; the kernel merges consecutive ranges, so this is a few calls per
/// batch, and the pinned memory stays far below `optmem_max`.
pub const DRAIN_EVERY: u64 = 32;

/// How long the end of a stream waits for the last completions.
const FINAL_WAIT: Duration = Duration::from_secs(10);

/// What MSG_ZEROCOPY did on one sending end (JSON: `tcp.msg_zerocopy`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MsgZeroCopy {
    /// send(2) calls with MSG_ZEROCOPY that moved bytes.
    pub sends: u64,
    /// Of those, how many the kernel reported done (all of them when the
    /// error queue was drained to the end).
    pub completions: u64,
    /// Completions the kernel flagged `SO_EE_CODE_ZEROCOPY_COPIED`: it
    /// copied the pages after all (always so on loopback and veth).
    pub copied: u64,
    /// Times a send was refused for want of option memory (ENOBUFS) and
    /// waited for completions before trying again.
    pub buffer_waits: u64,
    /// What the counts mean for the figure, in one sentence.
    pub note: String,
}

/// Turns `SO_ZEROCOPY` on for a sending socket, or says clearly why not.
pub fn enable(fd: RawFd) -> Result<(), WorkloadError> {
    enable_with(fd, set_so_zerocopy)
}

/// [`enable`] with the setsockopt injected (tests: a kernel that refuses).
pub fn enable_with(fd: RawFd, set: impl FnOnce(RawFd) -> io::Result<()>) -> Result<(), WorkloadError> {
    set(fd).map_err(|e| {
        WorkloadError::Setup(format!(
            "--zerocopy=msg needs MSG_ZEROCOPY (Linux 4.14 or later for TCP), but the kernel of {} \
             refused SO_ZEROCOPY: {e}; use -Z (sendfile) instead",
            crate::probe::host::hostname()
        ))
    })
}

fn set_so_zerocopy(fd: RawFd) -> io::Result<()> {
    let one: libc::c_int = 1;
    // SAFETY: the option value is a c_int that outlives the call.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            SO_ZEROCOPY,
            &one as *const libc::c_int as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The flags of a MSG_ZEROCOPY send.
pub const SEND_FLAGS: libc::c_int = libc::MSG_NOSIGNAL | libc::MSG_ZEROCOPY;

/// Sends made and completions collected on one socket.
#[derive(Debug, Default)]
pub struct Completions {
    sends: u64,
    completed: u64,
    copied: u64,
    buffer_waits: u64,
}

impl Completions {
    /// One send that moved bytes (it took the next number).
    #[inline]
    pub fn sent(&mut self) {
        self.sends += 1;
    }

    /// Whether the hot loop should drain now.
    #[inline]
    pub fn drain_due(&self) -> bool {
        self.sends - self.completed >= DRAIN_EVERY
    }

    /// Sends not yet reported done.
    pub fn outstanding(&self) -> u64 {
        self.sends - self.completed
    }

    /// Counts one notice from the error queue; false when it is not a
    /// zero-copy completion (another error on the socket).
    pub fn record(&mut self, notice: &libc::sock_extended_err) -> bool {
        if notice.ee_origin != SO_EE_ORIGIN_ZEROCOPY || notice.ee_errno != 0 {
            return false;
        }
        // An inclusive range of send numbers [ee_info, ee_data], which
        // wraps at 2^32.
        let count = u64::from(notice.ee_data.wrapping_sub(notice.ee_info)) + 1;
        self.completed += count;
        if notice.ee_code & SO_EE_CODE_ZEROCOPY_COPIED != 0 {
            self.copied += count;
        }
        true
    }

    /// Reads every notice queued now, without blocking.
    pub fn drain(&mut self, fd: RawFd) -> io::Result<()> {
        loop {
            match read_notice(fd)? {
                Some(notice) => {
                    self.record(&notice);
                }
                None => return Ok(()),
            }
        }
    }

    /// A send was refused with ENOBUFS: wait (up to a second) until the
    /// kernel reports some sends done, then let the loop try again.
    pub fn wait_for_room(&mut self, fd: RawFd) -> io::Result<()> {
        self.buffer_waits += 1;
        let before = self.completed;
        let until = Instant::now() + Duration::from_secs(1);
        while self.completed == before && self.outstanding() > 0 {
            if !wait_readable_errors(fd, until)? {
                break;
            }
            self.drain(fd)?;
        }
        Ok(())
    }

    /// After the last send: collects completions until every send is
    /// accounted for (or [`FINAL_WAIT`] passes), so no page stays pinned.
    pub fn finish(mut self, fd: RawFd) -> (MsgZeroCopy, Option<String>) {
        let until = Instant::now() + FINAL_WAIT;
        let mut error = None;
        while self.outstanding() > 0 {
            if let Err(e) = self.drain(fd) {
                error = Some(format!("reading MSG_ZEROCOPY completions: {e}"));
                break;
            }
            if self.outstanding() == 0 {
                break;
            }
            match wait_readable_errors(fd, until) {
                Ok(true) => {}
                Ok(false) => {
                    error = Some(format!(
                        "{} of {} MSG_ZEROCOPY sends were not reported done within {} s",
                        self.outstanding(),
                        self.sends,
                        FINAL_WAIT.as_secs()
                    ));
                    break;
                }
                Err(e) => {
                    error = Some(format!("waiting for MSG_ZEROCOPY completions: {e}"));
                    break;
                }
            }
        }
        (self.record_of(), error)
    }

    fn record_of(&self) -> MsgZeroCopy {
        let note = if self.completions_copied_all() {
            "the kernel copied every send (the receiver is on this host, e.g. loopback or veth, \
             or the device cannot send from user pages): MSG_ZEROCOPY saved no copy here"
                .to_string()
        } else if self.copied > 0 {
            format!(
                "the kernel copied {} of {} completed sends; the rest went out from the sender's pages",
                self.copied, self.completed
            )
        } else if self.completed > 0 {
            "every completed send went out from the sender's pages, uncopied".to_string()
        } else {
            "no send completed".to_string()
        };
        MsgZeroCopy {
            sends: self.sends,
            completions: self.completed,
            copied: self.copied,
            buffer_waits: self.buffer_waits,
            note,
        }
    }

    fn completions_copied_all(&self) -> bool {
        self.completed > 0 && self.copied == self.completed
    }
}

/// One notice from the error queue, None when it is empty.
fn read_notice(fd: RawFd) -> io::Result<Option<libc::sock_extended_err>> {
    // Room for one cmsghdr with a sock_extended_err and its offender address.
    let mut control = [0u64; 16];
    // SAFETY: msghdr is plain data; the control buffer outlives the call
    // and its length is passed; no data buffer is read into.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_control = control.as_mut_ptr() as *mut libc::c_void;
    msg.msg_controllen = std::mem::size_of_val(&control) as _;
    let rc = unsafe { libc::recvmsg(fd, &mut msg, libc::MSG_ERRQUEUE | libc::MSG_DONTWAIT) };
    if rc < 0 {
        let e = io::Error::last_os_error();
        return match e.kind() {
            io::ErrorKind::WouldBlock => Ok(None),
            io::ErrorKind::Interrupted => read_notice(fd),
            _ => Err(e),
        };
    }
    // SAFETY: the kernel filled msg_control up to msg_controllen; the
    // CMSG macros stay inside it, and the payload is read unaligned.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
        while !cmsg.is_null() {
            let c = &*cmsg;
            let is_error = (c.cmsg_level == libc::SOL_IP && c.cmsg_type == libc::IP_RECVERR)
                || (c.cmsg_level == libc::SOL_IPV6 && c.cmsg_type == libc::IPV6_RECVERR);
            if is_error {
                let notice = std::ptr::read_unaligned(libc::CMSG_DATA(cmsg) as *const libc::sock_extended_err);
                return Ok(Some(notice));
            }
            cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
        }
    }
    // A notice without the expected header: nothing to count, but the
    // queue may hold more.
    Ok(Some(unsafe { std::mem::zeroed() }))
}

/// Waits until the error queue has something (POLLERR) or `until`
/// passes; false on the latter.
fn wait_readable_errors(fd: RawFd, until: Instant) -> io::Result<bool> {
    loop {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ok(false);
        }
        let mut pfd = libc::pollfd {
            fd,
            events: 0,
            revents: 0,
        };
        let ms = left.as_millis().clamp(1, 100) as libc::c_int;
        // SAFETY: one pollfd, passed with its count.
        let rc = unsafe { libc::poll(&mut pfd, 1, ms) };
        if rc < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if rc > 0 && pfd.revents & libc::POLLERR != 0 {
            return Ok(true);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn notice(origin: u8, code: u8, lo: u32, hi: u32) -> libc::sock_extended_err {
        libc::sock_extended_err {
            ee_errno: 0,
            ee_origin: origin,
            ee_type: 0,
            ee_code: code,
            ee_pad: 0,
            ee_info: lo,
            ee_data: hi,
        }
    }

    #[test]
    fn a_notice_counts_its_whole_range_and_the_copied_flag() {
        let mut c = Completions::default();
        for _ in 0..10 {
            c.sent();
        }
        assert!(c.record(&notice(SO_EE_ORIGIN_ZEROCOPY, 0, 0, 3)));
        assert!(c.record(&notice(SO_EE_ORIGIN_ZEROCOPY, SO_EE_CODE_ZEROCOPY_COPIED, 4, 9)));
        assert_eq!((c.completed, c.copied, c.outstanding()), (10, 6, 0));
        // Not a zero-copy notice: not counted.
        assert!(!c.record(&notice(libc::SO_EE_ORIGIN_LOCAL, 0, 0, 0)));
        assert_eq!(c.completed, 10);
        let record = c.record_of();
        assert!(record.note.contains("copied 6 of 10"), "{}", record.note);
    }

    #[test]
    fn a_range_across_the_counter_wrap_is_counted_right() {
        let mut c = Completions::default();
        assert!(c.record(&notice(SO_EE_ORIGIN_ZEROCOPY, 0, u32::MAX - 1, 1)));
        assert_eq!(c.completed, 4);
    }

    #[test]
    fn all_copied_says_no_gain_is_possible() {
        let mut c = Completions::default();
        c.sent();
        c.record(&notice(SO_EE_ORIGIN_ZEROCOPY, SO_EE_CODE_ZEROCOPY_COPIED, 0, 0));
        assert!(c.record_of().note.contains("saved no copy"));
    }

    #[test]
    fn every_send_on_a_real_socket_is_completed_by_the_end() {
        use std::io::Read;
        use std::os::fd::AsRawFd;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let sender = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (mut receiver, _) = listener.accept().unwrap();
        let reader = std::thread::spawn(move || {
            let mut sink = vec![0u8; 1 << 16];
            let mut total = 0usize;
            while let Ok(n) = receiver.read(&mut sink) {
                if n == 0 {
                    break;
                }
                total += n;
            }
            total
        });
        let fd = sender.as_raw_fd();
        enable(fd).unwrap();
        let buffer = vec![7u8; 64 << 10];
        let mut c = Completions::default();
        let mut sent = 0usize;
        // More sends than one drain batch, drained as the hot loop does.
        for _ in 0..(3 * DRAIN_EVERY) {
            // SAFETY: the buffer outlives the call and is not written.
            let n = unsafe { libc::send(fd, buffer.as_ptr() as *const libc::c_void, buffer.len(), SEND_FLAGS) };
            assert!(n > 0, "{}", io::Error::last_os_error());
            sent += n as usize;
            c.sent();
            if c.drain_due() {
                c.drain(fd).unwrap();
            }
        }
        sender.shutdown(std::net::Shutdown::Write).unwrap();
        let (record, error) = c.finish(fd);
        assert_eq!(error, None);
        assert_eq!(record.sends, 3 * DRAIN_EVERY);
        assert_eq!(record.completions, record.sends, "{record:?}");
        // Loopback delivers to a socket on this host: the kernel copies.
        assert_eq!(record.copied, record.sends, "{record:?}");
        assert_eq!(reader.join().unwrap(), sent);
    }

    #[test]
    fn a_kernel_without_so_zerocopy_is_refused_clearly() {
        let err = enable_with(-1, |_| Err(io::Error::from_raw_os_error(libc::ENOPROTOOPT))).unwrap_err();
        let text = err.to_string();
        assert!(text.contains("--zerocopy=msg needs MSG_ZEROCOPY"), "{text}");
        assert!(text.contains("use -Z (sendfile) instead"), "{text}");
    }
}
