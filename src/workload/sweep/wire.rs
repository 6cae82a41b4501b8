//! The per-point header the client sends on the sweep's data connection,
//! telling the agent what to do next. 32 bytes, big-endian:
//!
//! ```text
//! magic "NBSW" (4) | op (1) | flags (1) | core (2) | size (8) | batches (4) | warm-up (4) | per batch (8)
//! ```
//!
//! Flags: bit 0 (`pin apart`, sent by clients before issue 42's second
//! part) = the client found both ends on one kernel and ran its end on its
//! first allowed core; the agent runs its end on its second, unless cores
//! were given. Bit 1 (`place`) = both ends are on one kernel and nobody
//! chose cores, so the client places the agent's end for this point: on
//! the core in `core` (together with the client's), or, with `core`
//! 0xFFFF, wherever the scheduler puts it. Agents from before a flag
//! ignore it (and `core`, which was zero).
//!
//! Each point starts with `warm-up` untimed exchanges, then `batches`
//! batches of `per batch` exchanges. Ops: `end` (the sweep is over),
//! `tcp_ping_pong` (echo each message), `tcp_stream` (read a batch, then
//! send a one-byte acknowledgement), `udp_ping_pong` (echo datagrams on the
//! UDP socket until the client's 8-byte end mark arrives on TCP, then
//! answer with the number of datagrams echoed, 8 bytes).
//!
//! Every count is checked before the agent acts on it: a point whose
//! exchanges (`warm-up + batches x per batch`) or bytes (exchanges x size)
//! do not fit 64 bits, or whose batches hold no exchange, is refused, so
//! the agent never sends an acknowledgement for bytes it did not read.

pub const MAGIC: [u8; 4] = *b"NBSW";
pub const HEADER_LEN: usize = 32;

/// What the agent does for a point.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    End = 0,
    TcpPingPong = 1,
    TcpStream = 2,
    UdpPingPong = 3,
}

/// One point's instructions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameHeader {
    pub op: Op,
    pub size: u64,
    pub batches: u32,
    pub warmup: u32,
    pub per_batch: u64,
    /// The `pin apart` flag.
    pub pin_apart: bool,
    /// The `place` flag and its core.
    pub place: Option<AgentPlace>,
}

/// Where the client asks the agent to run its end of a point (the
/// `place` flag).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AgentPlace {
    /// On this core (the client's own: both ends together).
    Core(u16),
    /// Wherever the scheduler puts it: every core the agent may use.
    Scheduler,
}

/// Flag bits of [`FrameHeader::pin_apart`] and [`FrameHeader::place`].
const FLAG_PIN_APART: u8 = 1;
const FLAG_PLACE: u8 = 2;
/// `core` of [`AgentPlace::Scheduler`].
const SCHEDULER_CORE: u16 = 0xFFFF;
/// The most cores a CPU set names (glibc's `CPU_SETSIZE`).
pub const MAX_CORES: u16 = 1024;

/// A header that cannot be followed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameHeaderError {
    #[error("the sweep header does not start with NBSW (not a nicbench sweep client)")]
    Magic,
    #[error("unknown sweep operation {0}")]
    Op(u8),
    #[error("sweep message size {size} B is outside 1 B to {max} B agreed for this test")]
    Size { size: u64, max: u64 },
    #[error("the sweep header places the agent's end on core {0}, beyond the {MAX_CORES} cores a CPU set names")]
    Core(u16),
    #[error(
        "the sweep header asks for {batches} batches of 0 exchanges; a batch holds at least one \
         (not a nicbench sweep client)"
    )]
    EmptyBatches { batches: u32 },
    #[error(
        "the sweep header asks for {warmup} + {batches} x {per_batch} exchanges of {size} B: more bytes than \
         a 64-bit count holds (not a nicbench sweep client)"
    )]
    Overflow {
        size: u64,
        batches: u32,
        warmup: u32,
        per_batch: u64,
    },
}

impl FrameHeader {
    pub const END: FrameHeader = FrameHeader {
        op: Op::End,
        size: 0,
        batches: 0,
        warmup: 0,
        per_batch: 0,
        pin_apart: false,
        place: None,
    };

    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        b[..4].copy_from_slice(&MAGIC);
        b[4] = self.op as u8;
        if self.pin_apart {
            b[5] |= FLAG_PIN_APART;
        }
        if let Some(place) = self.place {
            b[5] |= FLAG_PLACE;
            let core = match place {
                AgentPlace::Core(core) => core,
                AgentPlace::Scheduler => SCHEDULER_CORE,
            };
            b[6..8].copy_from_slice(&core.to_be_bytes());
        }
        b[8..16].copy_from_slice(&self.size.to_be_bytes());
        b[16..20].copy_from_slice(&self.batches.to_be_bytes());
        b[20..24].copy_from_slice(&self.warmup.to_be_bytes());
        b[24..32].copy_from_slice(&self.per_batch.to_be_bytes());
        b
    }

    /// Decodes and checks a header; `max_size` is the largest size of the test.
    pub fn decode(b: &[u8; HEADER_LEN], max_size: u64) -> Result<FrameHeader, FrameHeaderError> {
        if b[..4] != MAGIC {
            return Err(FrameHeaderError::Magic);
        }
        let op = match b[4] {
            0 => Op::End,
            1 => Op::TcpPingPong,
            2 => Op::TcpStream,
            3 => Op::UdpPingPong,
            other => return Err(FrameHeaderError::Op(other)),
        };
        let u64_at = |i: usize| u64::from_be_bytes(b[i..i + 8].try_into().expect("8 bytes"));
        let u32_at = |i: usize| u32::from_be_bytes(b[i..i + 4].try_into().expect("4 bytes"));
        let place = match u16::from_be_bytes([b[6], b[7]]) {
            _ if b[5] & FLAG_PLACE == 0 => None,
            SCHEDULER_CORE => Some(AgentPlace::Scheduler),
            core if core < MAX_CORES => Some(AgentPlace::Core(core)),
            core => return Err(FrameHeaderError::Core(core)),
        };
        let header = FrameHeader {
            op,
            size: u64_at(8),
            batches: u32_at(16),
            warmup: u32_at(20),
            per_batch: u64_at(24),
            pin_apart: b[5] & FLAG_PIN_APART != 0,
            place,
        };
        if op == Op::End {
            return Ok(header);
        }
        if !(1..=max_size).contains(&header.size) {
            return Err(FrameHeaderError::Size {
                size: header.size,
                max: max_size,
            });
        }
        if header.batches > 0 && header.per_batch == 0 {
            return Err(FrameHeaderError::EmptyBatches {
                batches: header.batches,
            });
        }
        if header.point_bytes().is_none() {
            return Err(FrameHeaderError::Overflow {
                size: header.size,
                batches: header.batches,
                warmup: header.warmup,
                per_batch: header.per_batch,
            });
        }
        Ok(header)
    }

    /// Exchanges in the point, warm-up included; None when they do not
    /// fit 64 bits (a header [`decode`](Self::decode) accepted always fits).
    pub fn exchanges(&self) -> Option<u64> {
        u64::from(self.batches)
            .checked_mul(self.per_batch)?
            .checked_add(u64::from(self.warmup))
    }

    /// Bytes one way in the point, warm-up included; None when they do not
    /// fit 64 bits.
    pub fn point_bytes(&self) -> Option<u64> {
        self.exchanges()?.checked_mul(self.size)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_refusals() {
        let h = FrameHeader {
            op: Op::TcpStream,
            size: 4096,
            batches: 7,
            warmup: 1,
            per_batch: 1000,
            pin_apart: false,
            place: None,
        };
        assert_eq!(FrameHeader::decode(&h.encode(), 8192), Ok(h));
        let pinned = FrameHeader { pin_apart: true, ..h };
        assert_eq!(pinned.encode()[5], 1);
        assert_eq!(FrameHeader::decode(&pinned.encode(), 8192), Ok(pinned));
        // The client places the agent's end: on a core, or the scheduler's.
        for place in [AgentPlace::Core(0), AgentPlace::Core(1023), AgentPlace::Scheduler] {
            let placed = FrameHeader {
                place: Some(place),
                ..h
            };
            assert_eq!(placed.encode()[5], 2);
            assert_eq!(FrameHeader::decode(&placed.encode(), 8192), Ok(placed));
        }
        assert_eq!(
            FrameHeader {
                place: Some(AgentPlace::Scheduler),
                ..h
            }
            .encode()[6..8],
            [0xFF, 0xFF]
        );
        let mut beyond = FrameHeader {
            place: Some(AgentPlace::Core(0)),
            ..h
        }
        .encode();
        beyond[6..8].copy_from_slice(&1024u16.to_be_bytes());
        assert_eq!(FrameHeader::decode(&beyond, 8192), Err(FrameHeaderError::Core(1024)));
        // Without the flag the core bytes are not read (older clients sent zero).
        let mut unflagged = h.encode();
        unflagged[6..8].copy_from_slice(&[0xAB, 0xCD]);
        assert_eq!(FrameHeader::decode(&unflagged, 8192).unwrap().place, None);
        // An older client left the byte zero.
        assert!(!FrameHeader::decode(&h.encode(), 8192).unwrap().pin_apart);
        assert_eq!(h.exchanges(), Some(7001));
        assert_eq!(FrameHeader::decode(&FrameHeader::END.encode(), 1), Ok(FrameHeader::END));
        assert_eq!(
            FrameHeader::decode(&h.encode(), 1024),
            Err(FrameHeaderError::Size { size: 4096, max: 1024 })
        );
        let mut bad = h.encode();
        bad[0] = b'X';
        assert_eq!(FrameHeader::decode(&bad, 8192), Err(FrameHeaderError::Magic));
        let mut bad = h.encode();
        bad[4] = 9;
        assert_eq!(FrameHeader::decode(&bad, 8192), Err(FrameHeaderError::Op(9)));
    }

    /// Issue 67: 2^52 exchanges of 4096 B wrapped to 0 bytes, and the agent
    /// sent a one-byte acknowledgement per batch without reading a byte
    /// (1.79 MB of them for one 32-byte header).
    #[test]
    fn a_header_whose_counts_overflow_or_hold_empty_batches_is_refused() {
        let wraps = FrameHeader {
            op: Op::TcpStream,
            size: 4096,
            batches: u32::MAX,
            warmup: 0,
            per_batch: 1 << 52,
            pin_apart: false,
            place: None,
        };
        // The exact header: the old product wrapped to zero bytes.
        assert_eq!((1u64 << 52).wrapping_mul(4096), 0);
        let bytes = wraps.encode();
        assert_eq!(
            bytes[8..],
            [
                0, 0, 0, 0, 0, 0, 0x10, 0, // size 4096
                0xFF, 0xFF, 0xFF, 0xFF, // batches
                0, 0, 0, 0, // warm-up
                0, 0x10, 0, 0, 0, 0, 0, 0 // per batch 2^52
            ]
        );
        let refused = FrameHeader::decode(&bytes, 8192).unwrap_err();
        assert_eq!(
            refused,
            FrameHeaderError::Overflow {
                size: 4096,
                batches: u32::MAX,
                warmup: 0,
                per_batch: 1 << 52
            }
        );
        assert!(
            refused.to_string().contains("more bytes than a 64-bit count holds"),
            "{refused}"
        );
        // One batch of 2^52 x 4096 B alone wraps too; and the exchange count
        // itself (u32::MAX x u64::MAX).
        for (batches, per_batch, size) in [(1, 1u64 << 52, 4096), (u32::MAX, u64::MAX, 1)] {
            let h = FrameHeader {
                batches,
                per_batch,
                size,
                ..wraps
            };
            assert!(
                matches!(
                    FrameHeader::decode(&h.encode(), 8192),
                    Err(FrameHeaderError::Overflow { .. })
                ),
                "{h:?}"
            );
            assert!(h.point_bytes().is_none());
        }
        // Batches of nothing: an acknowledgement each for no byte read.
        let empty = FrameHeader {
            per_batch: 0,
            batches: 1000,
            ..wraps
        };
        assert_eq!(
            FrameHeader::decode(&empty.encode(), 8192),
            Err(FrameHeaderError::EmptyBatches { batches: 1000 })
        );
        // The largest point a client of this version sends is taken.
        let largest = FrameHeader {
            batches: super::super::points::BATCHES as u32,
            warmup: 1,
            per_batch: super::super::points::MAX_EXCHANGES,
            size: 64 << 20,
            ..wraps
        };
        assert_eq!(FrameHeader::decode(&largest.encode(), 64 << 20), Ok(largest));
    }
}
