//! The line-rate model: what an Ethernet link can carry at most, counting
//! everything that occupies the wire — preamble and start-of-frame delimiter
//! (8 bytes), the interframe gap (12 bytes), the Ethernet header (14 bytes),
//! an optional 802.1Q VLAN tag (4 bytes), the frame check sequence (4 bytes)
//! and the padding of frames below the 64-byte minimum — and the IP, TCP or
//! UDP headers above it.
//!
//! A *frame* here is the Ethernet frame from the destination MAC address to
//! the FCS (64 to 1518 bytes at MTU 1500, 1522 with a VLAN tag); the *MTU*
//! is the largest IP packet; the *payload* is what the application hands to
//! the top protocol of the stack (for raw Ethernet, the Ethernet payload).

use serde::Serialize;

/// Preamble (7 bytes) and start-of-frame delimiter (1 byte).
pub const PREAMBLE_SFD_BYTES: u64 = 8;
/// Minimum interframe gap: 96 bit times.
pub const INTERFRAME_GAP_BYTES: u64 = 12;
/// Destination, source and EtherType.
pub const ETHERNET_HEADER_BYTES: u64 = 14;
pub const FCS_BYTES: u64 = 4;
pub const VLAN_TAG_BYTES: u64 = 4;
/// Smallest legal frame (header to FCS); shorter frames are padded.
pub const MIN_FRAME_BYTES: u64 = 64;
pub const IPV4_HEADER_BYTES: u64 = 20;
pub const IPV6_HEADER_BYTES: u64 = 40;
pub const TCP_HEADER_BYTES: u64 = 20;
/// TCP header with the timestamp option (10 bytes, padded to 12).
pub const TCP_TIMESTAMPS_HEADER_BYTES: u64 = 32;
pub const UDP_HEADER_BYTES: u64 = 8;

/// The protocols above Ethernet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Stack {
    /// Raw Ethernet: the payload is the Ethernet payload.
    Eth,
    Ipv4,
    Ipv6,
    /// TCP over IPv4, no options.
    Tcp4,
    /// TCP over IPv4 with timestamps (Linux default).
    Tcp4Ts,
    Udp4,
    Tcp6,
    Tcp6Ts,
    Udp6,
}

impl Stack {
    /// Bytes of IP header.
    pub fn ip_header_bytes(self) -> u64 {
        match self {
            Stack::Eth => 0,
            Stack::Ipv4 | Stack::Tcp4 | Stack::Tcp4Ts | Stack::Udp4 => IPV4_HEADER_BYTES,
            Stack::Ipv6 | Stack::Tcp6 | Stack::Tcp6Ts | Stack::Udp6 => IPV6_HEADER_BYTES,
        }
    }

    /// Bytes of transport header.
    pub fn transport_header_bytes(self) -> u64 {
        match self {
            Stack::Eth | Stack::Ipv4 | Stack::Ipv6 => 0,
            Stack::Tcp4 | Stack::Tcp6 => TCP_HEADER_BYTES,
            Stack::Tcp4Ts | Stack::Tcp6Ts => TCP_TIMESTAMPS_HEADER_BYTES,
            Stack::Udp4 | Stack::Udp6 => UDP_HEADER_BYTES,
        }
    }

    /// Every header inside the Ethernet payload.
    pub fn header_bytes(self) -> u64 {
        self.ip_header_bytes() + self.transport_header_bytes()
    }

    pub fn name(self) -> &'static str {
        match self {
            Stack::Eth => "eth",
            Stack::Ipv4 => "ipv4",
            Stack::Ipv6 => "ipv6",
            Stack::Tcp4 => "tcp4",
            Stack::Tcp4Ts => "tcp4-ts",
            Stack::Udp4 => "udp4",
            Stack::Tcp6 => "tcp6",
            Stack::Tcp6Ts => "tcp6-ts",
            Stack::Udp6 => "udp6",
        }
    }
}

/// How the frame size is given.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "given", content = "bytes")]
pub enum Size {
    /// Ethernet frame, header to FCS (VLAN tag included when present).
    Frame(u64),
    /// Largest IP packet (the Ethernet payload for raw Ethernet).
    Mtu(u64),
    /// Application payload per frame.
    Payload(u64),
}

/// A size that does not fit the stack.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LineRateError {
    #[error("a {bytes}-byte frame is below the {MIN_FRAME_BYTES}-byte Ethernet minimum; give --frame 64 or more")]
    FrameTooSmall { bytes: u64 },
    #[error("a {bytes}-byte {what} leaves no room for the {headers} bytes of {stack} headers; give a larger size")]
    NoRoom {
        what: &'static str,
        bytes: u64,
        headers: u64,
        stack: &'static str,
    },
    #[error("--payload must be at least 1 byte")]
    EmptyPayload,
    #[error("the link speed must be at least 1 bit/s")]
    NoSpeed,
}

/// The model's answer for one link speed, frame size and stack.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LineRate {
    pub link_bits_per_second: f64,
    pub stack: &'static str,
    pub vlan: bool,
    pub size: Size,
    /// Ethernet frame, header to FCS, padding included.
    pub frame_bytes: u64,
    /// What the frame occupies on the wire: frame + preamble/SFD + gap.
    pub wire_bytes: u64,
    /// Application payload carried per frame.
    pub payload_bytes: u64,
    /// Padding added to reach the minimum frame.
    pub padding_bytes: u64,
    pub frames_per_second: f64,
    pub goodput_bits_per_second: f64,
    /// Payload share of the wire.
    pub efficiency_percent: f64,
    /// Start of one frame to the start of the next, back to back.
    pub frame_interval_ns: f64,
}

/// Computes the line rate of one case.
pub fn compute(link_bits_per_second: f64, size: Size, stack: Stack, vlan: bool) -> Result<LineRate, LineRateError> {
    if link_bits_per_second.is_nan() || link_bits_per_second < 1.0 {
        return Err(LineRateError::NoSpeed);
    }
    let l2_overhead = ETHERNET_HEADER_BYTES + FCS_BYTES + if vlan { VLAN_TAG_BYTES } else { 0 };
    let headers = stack.header_bytes();
    let no_room = |what, bytes| LineRateError::NoRoom {
        what,
        bytes,
        headers,
        stack: stack.name(),
    };
    let (frame_unpadded, payload) = match size {
        Size::Frame(frame) => {
            if frame < MIN_FRAME_BYTES {
                return Err(LineRateError::FrameTooSmall { bytes: frame });
            }
            let room = frame.checked_sub(l2_overhead + headers).filter(|&p| p > 0);
            (frame, room.ok_or_else(|| no_room("frame", frame))?)
        }
        Size::Mtu(mtu) => {
            let room = mtu.checked_sub(headers).filter(|&p| p > 0);
            (mtu + l2_overhead, room.ok_or_else(|| no_room("MTU", mtu))?)
        }
        Size::Payload(0) => return Err(LineRateError::EmptyPayload),
        Size::Payload(payload) => (payload + headers + l2_overhead, payload),
    };
    let frame_bytes = frame_unpadded.max(MIN_FRAME_BYTES);
    let wire_bytes = frame_bytes + PREAMBLE_SFD_BYTES + INTERFRAME_GAP_BYTES;
    let frames_per_second = link_bits_per_second / (wire_bytes as f64 * 8.0);
    Ok(LineRate {
        link_bits_per_second,
        stack: stack.name(),
        vlan,
        size,
        frame_bytes,
        wire_bytes,
        payload_bytes: payload,
        padding_bytes: frame_bytes - frame_unpadded,
        frames_per_second,
        goodput_bits_per_second: frames_per_second * payload as f64 * 8.0,
        efficiency_percent: payload as f64 * 100.0 / wire_bytes as f64,
        frame_interval_ns: wire_bytes as f64 * 8.0 / link_bits_per_second * 1e9,
    })
}

/// What a link speed is spent on per IP packet: the bytes that count
/// against the speed besides the IP packet itself. It follows where the
/// speed came from: a PHY's speed is spent on the wire, a shaper's rate on
/// what the shaper counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// A physical Ethernet wire: Ethernet header and FCS (18 bytes), padding
    /// to the 64-byte minimum frame, preamble/SFD (8) and interframe gap
    /// (12): 38 bytes per full-size packet.
    EthernetWire,
    /// What a qdisc counts (tbf and every other Linux shaper): the packet as
    /// it dequeues it — the frame with its 14-byte Ethernet header, without
    /// preamble, gap or FCS — plus its configured `overhead`, at least its
    /// `mpu`, and in 53-byte cells of 48 when its link layer is ATM.
    Qdisc {
        overhead_bytes: u64,
        mpu_bytes: u64,
        atm: bool,
    },
    /// A fixed number of bytes per IP packet (`--link-overhead`).
    Fixed { overhead_bytes: u64 },
}

impl Framing {
    /// Bytes one IP packet of `ip_packet_bytes` costs against the speed.
    pub fn counted_bytes(self, ip_packet_bytes: u64) -> u64 {
        match self {
            Framing::EthernetWire => {
                (ip_packet_bytes + ETHERNET_HEADER_BYTES + FCS_BYTES).max(MIN_FRAME_BYTES)
                    + PREAMBLE_SFD_BYTES
                    + INTERFRAME_GAP_BYTES
            }
            // As the kernel's psched_l2t_ns: overhead, then mpu, then cells.
            Framing::Qdisc {
                overhead_bytes,
                mpu_bytes,
                atm,
            } => {
                let len = (ip_packet_bytes + ETHERNET_HEADER_BYTES + overhead_bytes).max(mpu_bytes);
                if atm {
                    len.div_ceil(48) * 53
                } else {
                    len
                }
            }
            Framing::Fixed { overhead_bytes } => ip_packet_bytes + overhead_bytes,
        }
    }

    /// `ethernet_wire`, `qdisc` or `option`, as in the JSON document.
    pub fn name(self) -> &'static str {
        match self {
            Framing::EthernetWire => "ethernet_wire",
            Framing::Qdisc { .. } => "qdisc",
            Framing::Fixed { .. } => "option",
        }
    }
}

/// Goodput of full-size packets on a link.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Goodput {
    /// What one packet costs against the link speed (see [`Framing`]).
    pub counted_bytes: u64,
    pub payload_bytes: u64,
    pub packets_per_second: f64,
    pub goodput_bits_per_second: f64,
}

/// Goodput of back-to-back IP packets of `ip_packet_bytes`, each carrying
/// `payload_bytes` of application data, at `link_bits_per_second`.
pub fn goodput(
    link_bits_per_second: f64,
    ip_packet_bytes: u64,
    payload_bytes: u64,
    framing: Framing,
) -> Option<Goodput> {
    if payload_bytes == 0
        || ip_packet_bytes < payload_bytes
        || link_bits_per_second.is_nan()
        || link_bits_per_second < 1.0
    {
        return None;
    }
    let counted_bytes = framing.counted_bytes(ip_packet_bytes);
    let packets_per_second = link_bits_per_second / (counted_bytes as f64 * 8.0);
    Some(Goodput {
        counted_bytes,
        payload_bytes,
        packets_per_second,
        goodput_bits_per_second: packets_per_second * payload_bytes as f64 * 8.0,
    })
}

/// Bytes one message of `message_bytes` costs against a link's speed, cut
/// into IP packets of at most `mtu_bytes`: each TCP segment carries its
/// own headers; a UDP datagram carries one UDP header and is cut into IP
/// fragments (each with an IP header; their 8-byte alignment is ignored).
/// What a wire of that speed needs to carry the message, ACKs aside.
pub fn message_counted_bytes(framing: Framing, mtu_bytes: u64, stack: Stack, message_bytes: u64) -> u64 {
    let (per_packet, payload) = match stack {
        Stack::Udp4 | Stack::Udp6 => (stack.ip_header_bytes(), message_bytes + UDP_HEADER_BYTES),
        _ => (stack.header_bytes(), message_bytes),
    };
    let room = mtu_bytes.saturating_sub(per_packet).max(1);
    let (full, rest) = (payload / room, payload % room);
    let mut bytes = full * framing.counted_bytes(room + per_packet);
    if rest > 0 || full == 0 {
        bytes += framing.counted_bytes(rest + per_packet);
    }
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, tolerance: f64) -> bool {
        (a - b).abs() <= tolerance
    }

    #[test]
    fn a_message_is_cut_into_packets_that_each_pay_their_headers() {
        let qdisc = Framing::Qdisc {
            overhead_bytes: 0,
            mpu_bytes: 0,
            atm: false,
        };
        // 1 byte of TCP with timestamps: 20 + 32 + 1, plus the 14-byte Ethernet header.
        assert_eq!(message_counted_bytes(qdisc, 1500, Stack::Tcp4Ts, 1), 67);
        // 3000 bytes in segments of 1448: two full, one of 104.
        assert_eq!(
            message_counted_bytes(qdisc, 1500, Stack::Tcp4Ts, 3000),
            2 * 1514 + (104 + 52 + 14)
        );
        // Exactly two full segments: no third packet.
        assert_eq!(message_counted_bytes(qdisc, 1500, Stack::Tcp4Ts, 2896), 2 * 1514);
        // A UDP datagram of 3000 bytes: 3008 after its header, in fragments of 1480.
        assert_eq!(
            message_counted_bytes(qdisc, 1500, Stack::Udp4, 3000),
            2 * 1514 + (48 + 20 + 14)
        );
        // On a wire: 1 byte of TCP is a 71-byte frame plus preamble and gap;
        // 1 byte of UDP (29 B of IP) is padded to the 64-byte minimum frame.
        assert_eq!(message_counted_bytes(Framing::EthernetWire, 1500, Stack::Tcp4Ts, 1), 91);
        assert_eq!(message_counted_bytes(Framing::EthernetWire, 1500, Stack::Udp4, 1), 84);
    }

    #[test]
    fn minimum_frame_at_10_mbit() {
        // 64 + 8 + 12 = 84 bytes = 672 bits; 10e6 / 672 = 14880.952...
        let r = compute(10e6, Size::Frame(64), Stack::Eth, false).unwrap();
        assert_eq!(r.wire_bytes, 84);
        assert!(close(r.frames_per_second, 14880.95, 0.01), "{}", r.frames_per_second);
        assert_eq!(r.payload_bytes, 46);
        // 46 * 8 * 14880.95 = 5476190.5 bit/s
        assert!(close(r.goodput_bits_per_second, 5_476_190.48, 0.1));
        assert!(close(r.frame_interval_ns, 67_200.0, 1e-6));
    }

    #[test]
    fn full_frame_at_1_gbit() {
        // 1518 + 20 = 1538 bytes = 12304 bits; 1e9 / 12304 = 81274.382...
        let r = compute(1e9, Size::Frame(1518), Stack::Eth, false).unwrap();
        assert!(close(r.frames_per_second, 81274.38, 0.01), "{}", r.frames_per_second);
        assert_eq!(r.payload_bytes, 1500);
        assert!(close(r.efficiency_percent, 1500.0 * 100.0 / 1538.0, 1e-9));
        assert!(close(r.frame_interval_ns, 12304.0, 1e-6));
    }

    #[test]
    fn tcp_with_timestamps_at_mtu_1500_on_1_gbit() {
        // payload 1500 - 20 - 32 = 1448; 81274.38 * 1448 * 8 = 941.49 Mbit/s
        let r = compute(1e9, Size::Mtu(1500), Stack::Tcp4Ts, false).unwrap();
        assert_eq!(r.frame_bytes, 1518);
        assert_eq!(r.payload_bytes, 1448);
        assert!(
            close(r.goodput_bits_per_second / 1e6, 941.49, 0.01),
            "{}",
            r.goodput_bits_per_second
        );
    }

    #[test]
    fn jumbo_frame_at_10_gbit() {
        // 9018 + 20 = 9038 bytes = 72304 bits; 10e9 / 72304 = 138304.9...
        let r = compute(10e9, Size::Frame(9018), Stack::Eth, false).unwrap();
        assert!(close(r.frames_per_second, 138_304.9, 0.1), "{}", r.frames_per_second);
        assert_eq!(r.payload_bytes, 9000);
        // UDP/IPv4 in a 9018-byte frame: 9000 - 28 = 8972 bytes of payload.
        let udp = compute(10e9, Size::Mtu(9000), Stack::Udp4, false).unwrap();
        assert_eq!(udp.frame_bytes, 9018);
        assert_eq!(udp.payload_bytes, 8972);
        assert!(close(udp.efficiency_percent, 8972.0 * 100.0 / 9038.0, 1e-9));
    }

    #[test]
    fn small_payloads_are_padded_to_the_minimum_frame() {
        // 1 byte of UDP over IPv4: 14 + 20 + 8 + 1 + 4 = 47 -> padded to 64.
        let r = compute(1e9, Size::Payload(1), Stack::Udp4, false).unwrap();
        assert_eq!(r.frame_bytes, 64);
        assert_eq!(r.padding_bytes, 17);
        assert!(close(r.frames_per_second, 1e9 / 672.0, 1e-6));
    }

    #[test]
    fn vlan_tag_adds_four_bytes() {
        let r = compute(1e9, Size::Mtu(1500), Stack::Eth, true).unwrap();
        assert_eq!(r.frame_bytes, 1522);
        assert_eq!(r.wire_bytes, 1542);
        let f = compute(1e9, Size::Frame(1522), Stack::Eth, true).unwrap();
        assert_eq!(f.payload_bytes, 1500);
    }

    #[test]
    fn ipv6_costs_twenty_bytes_more_than_ipv4() {
        let v4 = compute(1e9, Size::Mtu(1500), Stack::Tcp4, false).unwrap();
        let v6 = compute(1e9, Size::Mtu(1500), Stack::Tcp6, false).unwrap();
        assert_eq!(v4.payload_bytes - v6.payload_bytes, 20);
    }

    #[test]
    fn impossible_sizes_are_refused_with_the_reason() {
        assert_eq!(
            compute(1e9, Size::Frame(60), Stack::Eth, false).unwrap_err(),
            LineRateError::FrameTooSmall { bytes: 60 }
        );
        let err = compute(1e9, Size::Frame(64), Stack::Tcp6Ts, false)
            .unwrap_err()
            .to_string();
        assert!(err.contains("no room"), "{err}");
        assert!(compute(1e9, Size::Mtu(28), Stack::Udp4, false).is_err());
        assert_eq!(
            compute(1e9, Size::Payload(0), Stack::Eth, false).unwrap_err(),
            LineRateError::EmptyPayload
        );
        assert_eq!(
            compute(0.0, Size::Frame(64), Stack::Eth, false).unwrap_err(),
            LineRateError::NoSpeed
        );
        assert_eq!(
            compute(f64::NAN, Size::Frame(64), Stack::Eth, false).unwrap_err(),
            LineRateError::NoSpeed
        );
    }

    #[test]
    fn goodput_on_the_wire_matches_the_frame_model() {
        // TCP with timestamps at MTU 1500 on 1 Gbit/s: 1448 B in 1538 B on the wire.
        let g = goodput(1e9, 1500, 1448, Framing::EthernetWire).unwrap();
        assert_eq!(g.counted_bytes, 1538);
        assert!(close(g.goodput_bits_per_second / 1e6, 941.49, 0.01));
        let frame = compute(1e9, Size::Mtu(1500), Stack::Tcp4Ts, false).unwrap();
        assert!(close(g.goodput_bits_per_second, frame.goodput_bits_per_second, 1e-6));
        // A 1-byte UDP datagram is padded to the 64-byte frame.
        assert_eq!(Framing::EthernetWire.counted_bytes(29), 84);
        assert!(goodput(1e9, 1500, 0, Framing::EthernetWire).is_none());
        assert!(goodput(0.0, 1500, 1448, Framing::EthernetWire).is_none());
    }

    #[test]
    fn a_qdisc_counts_the_frame_without_preamble_gap_and_fcs() {
        let tbf = Framing::Qdisc {
            overhead_bytes: 0,
            mpu_bytes: 0,
            atm: false,
        };
        // MTU 9000 on a 1 Gbit/s tbf: 8948 B of payload per 9014 B counted.
        let g = goodput(1e9, 9000, 8948, tbf).unwrap();
        assert_eq!(g.counted_bytes, 9014);
        assert!(close(g.goodput_bits_per_second / 1e6, 992.68, 0.01), "{g:?}");
        // The 992.87 Mbit/s read 100.3% of the wire model (990.04).
        let wire = goodput(1e9, 9000, 8948, Framing::EthernetWire).unwrap();
        assert!(close(wire.goodput_bits_per_second / 1e6, 990.04, 0.01));
        assert!(992.87e6 / g.goodput_bits_per_second < 1.0002);
        // 100 Mbit/s at MTU 1500: 1448 / 1514.
        let g = goodput(100e6, 1500, 1448, tbf).unwrap();
        assert!(close(g.goodput_bits_per_second / 1e6, 95.64, 0.01), "{g:?}");
    }

    #[test]
    fn qdisc_overhead_mpu_and_atm_cells_follow_the_kernel() {
        let with = |overhead_bytes, mpu_bytes, atm| Framing::Qdisc {
            overhead_bytes,
            mpu_bytes,
            atm,
        };
        assert_eq!(with(24, 0, false).counted_bytes(1500), 1538);
        assert_eq!(with(0, 96, false).counted_bytes(40), 96);
        // 1514 B in 48-byte cells: 32 cells of 53 bytes.
        assert_eq!(with(0, 0, true).counted_bytes(1500), 32 * 53);
        assert_eq!(Framing::Fixed { overhead_bytes: 14 }.counted_bytes(9000), 9014);
        assert_eq!(with(0, 0, false).name(), "qdisc");
        assert_eq!(Framing::EthernetWire.name(), "ethernet_wire");
    }
}
