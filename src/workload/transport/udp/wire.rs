//! The UDP data plane without sockets: the datagram header, the
//! receiver's sequence accounting (lost, out of order, duplicates), RFC 3550
//! jitter, and the sender's token-bucket pacer. Pure code, tested here.
//!
//! DatagramHeader, 28 bytes, big-endian:
//!
//! ```text
//! 0  magic "NBUD"   4  kind   5  flags   6  reserved (2)
//! 8  stream id (u32)   12  sequence (u64)   20  send time (u64 ns)
//! ```
//!
//! The send time is on the sender's real-time clock when the flags carry
//! [`FLAG_REALTIME`] (senders since 2026-12-07), so that a receiver can
//! time each datagram's transit; before, it was the monotonic clock, good
//! for jitter only.
//!
//! A registration datagram is a header of kind [`Kind::Register`] followed by
//! the 16-byte session token; the agent answers with [`Kind::Ack`].

use std::time::Duration;

use crate::protocol::TOKEN_LEN;

pub const MAGIC: u32 = 0x4e42_5544;
pub const HEADER_LEN: usize = 28;
pub const REGISTER_LEN: usize = HEADER_LEN + TOKEN_LEN;
/// Largest UDP payload over IPv4 (65535 - 20 IP - 8 UDP); IPv6 allows 20 more.
pub const MAX_DATAGRAM_BYTES: u64 = 65507;
/// Flag: the datagram was sent during the warm-up.
pub const FLAG_WARMUP: u8 = 1;
/// Flag: the send time is the sender's CLOCK_REALTIME.
pub const FLAG_REALTIME: u8 = 2;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    Data = 1,
    Register = 2,
    Ack = 3,
    /// A sender's closing datagram (only with iperf 2's header in front,
    /// [`Iperf2Header`]): receivers take no count from it.
    End = 4,
}

/// A decoded header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DatagramHeader {
    pub kind: Kind,
    pub flags: u8,
    pub stream_id: u32,
    pub seq: u64,
    pub send_nanos: u64,
}

impl DatagramHeader {
    pub fn data(stream_id: u32, seq: u64, send_nanos: u64, flags: u8) -> DatagramHeader {
        DatagramHeader {
            kind: Kind::Data,
            flags,
            stream_id,
            seq,
            send_nanos,
        }
    }

    /// Writes the header into the first [`HEADER_LEN`] bytes of `buf`.
    #[inline]
    pub fn write(&self, buf: &mut [u8]) {
        buf[0..4].copy_from_slice(&MAGIC.to_be_bytes());
        buf[4] = self.kind as u8;
        buf[5] = self.flags;
        buf[6..8].copy_from_slice(&[0, 0]);
        buf[8..12].copy_from_slice(&self.stream_id.to_be_bytes());
        buf[12..20].copy_from_slice(&self.seq.to_be_bytes());
        buf[20..28].copy_from_slice(&self.send_nanos.to_be_bytes());
    }

    /// Reads a header; None for anything that is not ours.
    #[inline]
    pub fn read(buf: &[u8]) -> Option<DatagramHeader> {
        if buf.len() < HEADER_LEN || buf[0..4] != MAGIC.to_be_bytes() {
            return None;
        }
        let kind = match buf[4] {
            1 => Kind::Data,
            2 => Kind::Register,
            3 => Kind::Ack,
            4 => Kind::End,
            _ => return None,
        };
        let u32_at = |i: usize| u32::from_be_bytes(buf[i..i + 4].try_into().unwrap());
        let u64_at = |i: usize| u64::from_be_bytes(buf[i..i + 8].try_into().unwrap());
        Some(DatagramHeader {
            kind,
            flags: buf[5],
            stream_id: u32_at(8),
            seq: u64_at(12),
            send_nanos: u64_at(20),
        })
    }
}

/// A registration datagram for `stream_id` carrying the session token.
pub fn register_datagram(stream_id: u32, attempt: u64, token: &[u8; TOKEN_LEN]) -> [u8; REGISTER_LEN] {
    let mut buf = [0u8; REGISTER_LEN];
    DatagramHeader {
        kind: Kind::Register,
        flags: 0,
        stream_id,
        seq: attempt,
        send_nanos: 0,
    }
    .write(&mut buf);
    buf[HEADER_LEN..].copy_from_slice(token);
    buf
}

/// The stream id of a valid registration with the right token.
pub fn check_register(buf: &[u8], token: &[u8; TOKEN_LEN]) -> Option<u32> {
    let h = DatagramHeader::read(buf)?;
    (h.kind == Kind::Register
        && buf.len() == REGISTER_LEN
        && crate::workload::transport::admission::token_matches(&buf[HEADER_LEN..], token))
    .then_some(h.stream_id)
}

pub fn ack_datagram(stream_id: u32) -> [u8; HEADER_LEN] {
    let mut buf = [0u8; HEADER_LEN];
    DatagramHeader {
        kind: Kind::Ack,
        flags: 0,
        stream_id,
        seq: 0,
        send_nanos: 0,
    }
    .write(&mut buf);
    buf
}

/// Where nicbench's header starts in a datagram that carries iperf 2's in
/// front of it: iperf 2's 16 bytes, its flags word (only the 64-bit
/// sequence flag: no extensions, so an iperf 2 receiver reads nothing
/// further) and 4 bytes of padding.
pub const IPERF2_PREFIX: usize = 24;
/// iperf 2's header flag (in the word after its 16 bytes): the second id
/// word holds the upper 32 bits of the sequence number.
const IPERF2_SEQNO64B: u32 = 0x0800_0000;

/// iperf 2's UDP header (2.0.10 and later, as 2.1.8 sends it), 16 bytes,
/// big-endian, with no magic:
///
/// ```text
/// 0  id (i32)   4  send time, seconds (u32)   8  microseconds (u32)
/// 12 id2 (i32): upper bits of the sequence number when the flags say so
/// 16 flags (u32), then iperf 2's own extensions when the flags ask
/// ```
///
/// Data datagrams are numbered from 1; the closing datagrams carry the
/// negated number after the last data datagram (and count down from there,
/// one number per repeat). The send time is the real-time clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Iperf2Header {
    /// Positive: a data datagram's number (from 1); negative: closing.
    pub seq: i64,
    pub send_nanos: u64,
}

impl Iperf2Header {
    pub const LEN: usize = 16;

    /// Writes the header and a flags word that says only that the sequence
    /// number has 64 bits (20 bytes): iperf 2.1.8's receiver takes it so,
    /// and asks nothing more of the datagram.
    #[inline]
    pub fn write(&self, buf: &mut [u8]) {
        let (secs, nanos) = (self.send_nanos / 1_000_000_000, self.send_nanos % 1_000_000_000);
        buf[0..4].copy_from_slice(&(self.seq as i32).to_be_bytes());
        buf[4..8].copy_from_slice(&(secs as u32).to_be_bytes());
        buf[8..12].copy_from_slice(&((nanos / 1000) as u32).to_be_bytes());
        buf[12..16].copy_from_slice(&((self.seq >> 32) as i32).to_be_bytes());
        buf[16..20].copy_from_slice(&IPERF2_SEQNO64B.to_be_bytes());
    }

    /// Reads a header; None for a datagram too short to hold one. Any 16
    /// bytes read as one (iperf 2 has no magic): the caller judges the
    /// sequence number.
    #[inline]
    pub fn read(buf: &[u8]) -> Option<Iperf2Header> {
        if buf.len() < Self::LEN {
            return None;
        }
        let word = |i: usize| u32::from_be_bytes(buf[i..i + 4].try_into().unwrap());
        let flags = if buf.len() >= 20 { word(16) } else { 0 };
        let seq = if flags & IPERF2_SEQNO64B != 0 {
            (i64::from(word(12) as i32) << 32) | i64::from(word(0))
        } else {
            i64::from(word(0) as i32)
        };
        let send_nanos = u64::from(word(4)) * 1_000_000_000 + u64::from(word(8).min(999_999)) * 1000;
        Some(Iperf2Header { seq, send_nanos })
    }
}

/// Bits remembered behind the highest sequence number, to tell a late
/// datagram from a duplicate.
const WINDOW: u64 = 1 << 16;

/// The receiver's accounting of sequence numbers.
#[derive(Debug, Clone)]
pub struct SeqTracker {
    /// One past the highest sequence number seen.
    next: u64,
    seen: Vec<u64>,
    /// Distinct datagrams sent after the warm-up.
    pub received: u64,
    pub warmup: u64,
    pub duplicates: u64,
    pub out_of_order: u64,
}

impl Default for SeqTracker {
    fn default() -> Self {
        SeqTracker {
            next: 0,
            seen: vec![0; (WINDOW / 64) as usize],
            received: 0,
            warmup: 0,
            duplicates: 0,
            out_of_order: 0,
        }
    }
}

impl SeqTracker {
    #[inline]
    fn bit(&mut self, seq: u64) -> (&mut u64, u64) {
        let i = seq % WINDOW;
        (&mut self.seen[(i / 64) as usize], 1u64 << (i % 64))
    }

    /// One past the highest sequence number seen (0 before any).
    pub fn next_seq(&self) -> u64 {
        self.next
    }

    /// Accounts one datagram.
    #[inline]
    pub fn record(&mut self, seq: u64, warmup: bool) {
        // `next` saturates at u64::MAX: a second u64::MAX is then a repeat.
        if seq >= self.next && !(seq == u64::MAX && self.next == u64::MAX) {
            if seq - self.next >= WINDOW {
                self.seen.iter_mut().for_each(|w| *w = 0);
            } else {
                for s in self.next..seq {
                    let (word, mask) = self.bit(s);
                    *word &= !mask;
                }
            }
            let (word, mask) = self.bit(seq);
            *word |= mask;
            // A peer's u64::MAX must not wrap `next` back to 0.
            self.next = seq.saturating_add(1);
        } else if self.next - seq <= WINDOW {
            let (word, mask) = self.bit(seq);
            if *word & mask != 0 {
                self.duplicates += 1;
                return;
            }
            *word |= mask;
            self.out_of_order += 1;
        } else {
            // Too old to tell; count it as late.
            self.out_of_order += 1;
        }
        if warmup {
            self.warmup += 1;
        } else {
            self.received += 1;
        }
    }
}

/// RFC 3550 interarrival jitter: J += (|D| - J) / 16 with D the change in
/// transit time between consecutive arrivals. Clock offsets cancel out.
#[derive(Debug, Clone, Default)]
pub struct Jitter {
    last_transit: Option<i64>,
    jitter_nanos: f64,
}

impl Jitter {
    #[inline]
    pub fn update(&mut self, send_nanos: u64, arrival_nanos: u64) {
        // The send time is the peer's word: any 64 bits. Differences of
        // clocks wrap rather than overflow (offsets cancel out anyway).
        let transit = (arrival_nanos as i64).wrapping_sub(send_nanos as i64);
        if let Some(last) = self.last_transit {
            let d = transit.wrapping_sub(last).unsigned_abs() as f64;
            self.jitter_nanos += (d - self.jitter_nanos) / 16.0;
        }
        self.last_transit = Some(transit);
    }

    pub fn micros(&self) -> f64 {
        self.jitter_nanos / 1000.0
    }
}

/// A token bucket against elapsed time: after `t` seconds the sender may
/// have sent `t * rate` bytes plus a burst; credit left unused beyond the
/// burst is forgotten, so a stall is not followed by a flood.
#[derive(Debug, Clone)]
pub struct Pacer {
    bytes_per_second: f64,
    burst_bytes: f64,
    /// Bytes accounted so far (including forgotten credit).
    spent: f64,
}

impl Pacer {
    pub fn new(bits_per_second: u64, burst_bytes: u64) -> Pacer {
        Pacer {
            bytes_per_second: bits_per_second as f64 / 8.0,
            burst_bytes: burst_bytes as f64,
            spent: 0.0,
        }
    }

    /// Bytes that may be sent now, `elapsed` after the start.
    #[inline]
    pub fn allowance(&mut self, elapsed: Duration) -> u64 {
        let earned = elapsed.as_secs_f64() * self.bytes_per_second;
        let mut credit = earned - self.spent;
        if credit > self.burst_bytes {
            self.spent = earned - self.burst_bytes;
            credit = self.burst_bytes;
        }
        credit.max(0.0) as u64
    }

    #[inline]
    pub fn spend(&mut self, bytes: u64) {
        self.spent += bytes as f64;
    }

    /// How long until `bytes` may be sent.
    pub fn wait_for(&self, elapsed: Duration, bytes: u64) -> Duration {
        let earned = elapsed.as_secs_f64() * self.bytes_per_second;
        let missing = self.spent + bytes as f64 - earned;
        if missing <= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(missing / self.bytes_per_second)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trips_and_junk_is_refused() {
        let h = DatagramHeader::data(7, 123_456_789_012, 42, FLAG_WARMUP);
        let mut buf = [0u8; 100];
        h.write(&mut buf);
        assert_eq!(DatagramHeader::read(&buf), Some(h));
        assert_eq!(DatagramHeader::read(&buf[..HEADER_LEN - 1]), None);
        assert_eq!(DatagramHeader::read(b"GET / HTTP/1.0\r\n\r\nxxxxxxxxxxxxxxxxxx"), None);
        buf[4] = 99;
        assert_eq!(DatagramHeader::read(&buf), None);
    }

    /// The bytes iperf 2.1.8 sent (captured on loopback): data datagram 3
    /// and the closing datagram -659, both with the 64-bit flag set.
    #[test]
    fn iperf2_headers_read_as_iperf_2_sends_them_and_round_trip() {
        let data = hex("00000003 6b16c2b7 0006ea7d 00000000 48010098");
        assert_eq!(
            Iperf2Header::read(&data),
            Some(Iperf2Header {
                seq: 3,
                send_nanos: 1_796_653_751_000_000_000 + 453_245_000
            })
        );
        let closing = hex("fffffd6d 6b16c2b8 0006ef30 ffffffff 48010098");
        assert_eq!(Iperf2Header::read(&closing).unwrap().seq, -659);
        // Without the flag, the first word alone is the number.
        let old = hex("fffffd6d 6b16c2b8 0006ef30 00000007 00000000");
        assert_eq!(Iperf2Header::read(&old).unwrap().seq, -659);
        assert_eq!(Iperf2Header::read(&data[..15]), None);
        let mut buf = [0xaau8; 40];
        for seq in [1i64, 1 << 40, -(1 << 33) - 5] {
            let h = Iperf2Header {
                seq,
                send_nanos: 1_796_653_751_123_456_000,
            };
            h.write(&mut buf);
            assert_eq!(&buf[16..20], &[8, 0, 0, 0], "the 64-bit flag, no extensions");
            assert_eq!(Iperf2Header::read(&buf).unwrap().seq, seq);
            assert_eq!(Iperf2Header::read(&buf).unwrap().send_nanos, h.send_nanos);
        }
    }

    fn hex(s: &str) -> Vec<u8> {
        let s: String = s.split_whitespace().collect();
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn registration_needs_the_token() {
        let token = [9u8; TOKEN_LEN];
        let reg = register_datagram(3, 0, &token);
        assert_eq!(check_register(&reg, &token), Some(3));
        assert_eq!(check_register(&reg, &[8u8; TOKEN_LEN]), None);
        assert_eq!(check_register(&reg[..REGISTER_LEN - 1], &token), None);
        assert_eq!(check_register(&ack_datagram(3), &token), None);
    }

    #[test]
    fn tracker_counts_gaps_reordering_and_duplicates() {
        let mut t = SeqTracker::default();
        for seq in [0, 1, 2, 5, 3, 3, 6, 7, 7] {
            t.record(seq, false);
        }
        // 4 never came; 3 came late once and then again.
        assert_eq!(t.received, 7);
        assert_eq!(t.out_of_order, 1);
        assert_eq!(t.duplicates, 2);
    }

    #[test]
    fn tracker_survives_huge_jumps_and_old_datagrams() {
        let mut t = SeqTracker::default();
        t.record(0, true);
        t.record(10 * WINDOW, false);
        t.record(1, false);
        t.record(10 * WINDOW + 1, false);
        t.record(10 * WINDOW, false);
        assert_eq!(t.warmup, 1);
        assert_eq!(t.received, 3);
        assert_eq!(t.duplicates, 1);
        assert_eq!(t.out_of_order, 1);
    }

    /// Issue 67: counts from the wire never overflow. A datagram numbered
    /// u64::MAX (and a send time of any 64 bits) is accounted, not a panic
    /// in a debug build nor a wrap of "one past the highest" to 0.
    #[test]
    fn the_largest_sequence_number_and_send_time_do_not_overflow() {
        let mut t = SeqTracker::default();
        t.record(u64::MAX, false);
        assert_eq!(t.next_seq(), u64::MAX);
        t.record(u64::MAX, false);
        assert_eq!((t.received, t.duplicates), (1, 1));
        let mut j = Jitter::default();
        for send in [u64::MAX, 0, u64::MAX, 1 << 63] {
            j.update(send, 1_000);
        }
        assert!(j.micros().is_finite());
    }

    #[test]
    fn jitter_is_zero_for_constant_transit_and_grows_with_variation() {
        let mut j = Jitter::default();
        for i in 0..100u64 {
            j.update(i * 1000, i * 1000 + 500_000);
        }
        assert_eq!(j.micros(), 0.0);
        for i in 100..1000u64 {
            j.update(i * 1000, i * 1000 + 500_000 + (i % 2) * 20_000);
        }
        // |D| is always 20 us: J converges to 20 us.
        assert!((j.micros() - 20.0).abs() < 0.5, "{}", j.micros());
    }

    #[test]
    fn pacer_holds_the_rate_and_forgets_old_credit() {
        let mut p = Pacer::new(8_000_000, 10_000); // 1 MB/s
        assert_eq!(p.allowance(Duration::ZERO), 0);
        let a = p.allowance(Duration::from_millis(5));
        assert_eq!(a, 5000);
        p.spend(5000);
        assert_eq!(p.allowance(Duration::from_millis(5)), 0);
        assert_eq!(p.wait_for(Duration::from_millis(5), 1000), Duration::from_millis(1));
        // A 1 s stall earns only the burst.
        assert_eq!(p.allowance(Duration::from_millis(1005)), 10_000);
        p.spend(10_000);
        assert_eq!(p.allowance(Duration::from_millis(1006)), 1000);
    }
}
