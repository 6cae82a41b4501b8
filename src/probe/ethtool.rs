//! The ethtool ioctl (SIOCETHTOOL) called directly: driver info, link
//! settings, offload features, rings, coalescing and channels. Each call
//! answers `None` when the device does not support it (loopback, veth and
//! most virtual devices support only some), never an error.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use crate::model::{Coalescing, Offloads, Queues, Rings};

const SIOCETHTOOL: libc::c_ulong = 0x8946;
const ETHTOOL_GSET: u32 = 0x01;
const ETHTOOL_GDRVINFO: u32 = 0x03;
const ETHTOOL_GCOALESCE: u32 = 0x0e;
const ETHTOOL_SCOALESCE: u32 = 0x0f;
const ETHTOOL_GRINGPARAM: u32 = 0x10;
const ETHTOOL_SRINGPARAM: u32 = 0x11;
const ETHTOOL_GSTRINGS: u32 = 0x1b;
const ETHTOOL_GSSET_INFO: u32 = 0x37;
const ETHTOOL_GFEATURES: u32 = 0x3a;
const ETHTOOL_SFEATURES: u32 = 0x3b;
const ETHTOOL_GCHANNELS: u32 = 0x3c;
const ETHTOOL_GLINKSETTINGS: u32 = 0x4c;
const ETH_SS_FEATURES: u32 = 4;
const ETH_GSTRING_LEN: usize = 32;
const SPEED_UNKNOWN: u32 = u32::MAX;
/// Most 32-bit words a link mode mask may have (`__s8` in the ABI).
const MAX_MASK_WORDS: usize = 127;

/// `struct ifreq` with `ifr_data`, padded to the kernel's 40 bytes.
#[repr(C)]
struct IfReq {
    name: [u8; libc::IFNAMSIZ],
    data: *mut libc::c_void,
    _pad: [u8; 16],
}

/// A socket to issue ethtool ioctls on, for one interface.
pub struct Ethtool {
    fd: OwnedFd,
    name: [u8; libc::IFNAMSIZ],
}

/// `struct ethtool_drvinfo`
#[repr(C)]
struct DrvInfo {
    cmd: u32,
    driver: [u8; 32],
    version: [u8; 32],
    fw_version: [u8; 32],
    bus_info: [u8; 32],
    erom_version: [u8; 32],
    reserved2: [u8; 12],
    n_priv_flags: u32,
    n_stats: u32,
    testinfo_len: u32,
    eedump_len: u32,
    regdump_len: u32,
}

// The kernel reads and writes these by layout: a field added, removed or
// resized here must fail the build, not corrupt memory at run time.
// struct ifreq is 40 bytes on 64-bit Linux (32 on 32-bit): the name, then
// a union that holds our pointer; struct ethtool_drvinfo is 196 bytes.
const _: () = assert!(std::mem::size_of::<IfReq>() >= std::mem::size_of::<libc::ifreq>());
const _: () = assert!(std::mem::size_of::<IfReq>() == libc::IFNAMSIZ + std::mem::size_of::<usize>() + 16);
const _: () = assert!(std::mem::size_of::<DrvInfo>() == 196);

/// Driver identification (ETHTOOL_GDRVINFO).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DriverInfo {
    pub driver: Option<String>,
    pub version: Option<String>,
    pub firmware: Option<String>,
    pub bus_info: Option<String>,
}

/// Link speed, duplex and autonegotiation.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LinkSettings {
    pub speed_mbit: Option<u32>,
    pub duplex: Option<String>,
    pub autoneg: Option<bool>,
}

/// A C string from a fixed buffer; None when empty or "N/A".
fn c_text(bytes: &[u8]) -> Option<String> {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    let text = String::from_utf8_lossy(&bytes[..end]).trim().to_string();
    (!text.is_empty() && text != "N/A").then_some(text)
}

fn duplex_name(duplex: u8) -> Option<String> {
    match duplex {
        0 => Some("half".into()),
        1 => Some("full".into()),
        _ => None,
    }
}

impl Ethtool {
    /// Opens a datagram socket for ioctls on `interface`; None when the
    /// name is too long or no socket can be had.
    pub fn open(interface: &str) -> Option<Ethtool> {
        if interface.is_empty() || interface.len() >= libc::IFNAMSIZ {
            return None;
        }
        let mut name = [0u8; libc::IFNAMSIZ];
        name[..interface.len()].copy_from_slice(interface.as_bytes());
        // SAFETY: plain socket(2); the fd is owned below.
        let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
        let fd = if fd >= 0 {
            fd
        } else {
            // SAFETY: as above, for hosts without IPv4.
            unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) }
        };
        if fd < 0 {
            return None;
        }
        // SAFETY: fd is a fresh descriptor we own.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Some(Ethtool { fd, name })
    }

    /// Issues one ethtool command; `data` must be the command's struct,
    /// starting with its `cmd` word, and as large as the kernel will write.
    ///
    /// # Safety
    /// `data` must point to a writable buffer of the size the command needs.
    unsafe fn call(&self, data: *mut libc::c_void) -> bool {
        let mut request = IfReq {
            name: self.name,
            data,
            _pad: [0; 16],
        };
        libc::ioctl(self.fd.as_raw_fd(), SIOCETHTOOL as _, &mut request as *mut IfReq) == 0
    }

    /// As [`Ethtool::call`], with the kernel's answer: the ioctl's
    /// non-negative result, or the errno.
    ///
    /// # Safety
    /// As [`Ethtool::call`].
    unsafe fn call_result(&self, data: *mut libc::c_void) -> std::io::Result<i32> {
        let mut request = IfReq {
            name: self.name,
            data,
            _pad: [0; 16],
        };
        let result = libc::ioctl(self.fd.as_raw_fd(), SIOCETHTOOL as _, &mut request as *mut IfReq);
        if result < 0 {
            Err(std::io::Error::last_os_error())
        } else {
            Ok(result)
        }
    }

    /// Calls a command whose struct is `N` u32 words, `cmd` first, and
    /// says why it failed.
    fn words_result<const N: usize>(&self, mut words: [u32; N]) -> std::io::Result<[u32; N]> {
        // SAFETY: the buffer is N words, the size of the command's struct.
        unsafe { self.call_result(words.as_mut_ptr().cast()) }.map(|_| words)
    }

    /// ETHTOOL_GRINGPARAM as its 9 words (`struct ethtool_ringparam`).
    pub fn ring_words(&self) -> std::io::Result<[u32; 9]> {
        let mut w = [0u32; 9];
        w[0] = ETHTOOL_GRINGPARAM;
        self.words_result(w)
    }

    /// ETHTOOL_SRINGPARAM with `words` (from [`ring_request`]).
    pub fn set_ring_words(&self, mut words: [u32; 9]) -> std::io::Result<()> {
        words[0] = ETHTOOL_SRINGPARAM;
        self.words_result(words).map(|_| ())
    }

    /// ETHTOOL_GCOALESCE as its 23 words (`struct ethtool_coalesce`).
    pub fn coalesce_words(&self) -> std::io::Result<[u32; 23]> {
        let mut w = [0u32; 23];
        w[0] = ETHTOOL_GCOALESCE;
        self.words_result(w)
    }

    /// ETHTOOL_SCOALESCE with `words` (from [`coalesce_request`]).
    pub fn set_coalesce_words(&self, mut words: [u32; 23]) -> std::io::Result<()> {
        words[0] = ETHTOOL_SCOALESCE;
        self.words_result(words).map(|_| ())
    }

    /// Every feature with its state (names from ETHTOOL_GSTRINGS, blocks
    /// from ETHTOOL_GFEATURES); Err says why the driver gave none.
    pub fn feature_table(&self) -> std::io::Result<Vec<Feature>> {
        let unsupported = || std::io::Error::from_raw_os_error(libc::EOPNOTSUPP);
        let (names, blocks) = self.feature_blocks().ok_or_else(unsupported)?;
        Ok(decode_features(&names, &blocks))
    }

    /// ETHTOOL_SFEATURES: sets feature `index` to `on` for each pair; the
    /// kernel's answer flags ([`FEATURES_WISH`], [`FEATURES_UNSUPPORTED`]).
    pub fn set_features(&self, count: usize, changes: &[(usize, bool)]) -> std::io::Result<i32> {
        let mut buffer = sfeatures_request(count, changes);
        // SAFETY: header plus one {valid, requested} pair per block.
        unsafe { self.call_result(buffer.as_mut_ptr().cast()) }
    }

    /// Calls a command whose struct is `N` u32 words, `cmd` first.
    fn words<const N: usize>(&self, cmd: u32) -> Option<[u32; N]> {
        let mut words = [0u32; N];
        words[0] = cmd;
        // SAFETY: the buffer is N words, the size of the command's struct.
        unsafe { self.call(words.as_mut_ptr().cast()) }.then_some(words)
    }

    pub fn driver_info(&self) -> Option<DriverInfo> {
        // SAFETY: DrvInfo is plain old data; all zeroes is valid.
        let mut info: DrvInfo = unsafe { std::mem::zeroed() };
        info.cmd = ETHTOOL_GDRVINFO;
        // SAFETY: info is a full ethtool_drvinfo.
        if !unsafe { self.call((&mut info as *mut DrvInfo).cast()) } {
            return None;
        }
        Some(DriverInfo {
            driver: c_text(&info.driver),
            version: c_text(&info.version),
            firmware: c_text(&info.fw_version),
            bus_info: c_text(&info.bus_info),
        })
    }

    /// ETHTOOL_GLINKSETTINGS (with its mask-size handshake), or the legacy
    /// ETHTOOL_GSET where the driver only has that.
    pub fn link_settings(&self) -> Option<LinkSettings> {
        self.link_settings_new().or_else(|| self.link_settings_legacy())
    }

    fn link_settings_new(&self) -> Option<LinkSettings> {
        // ethtool_link_settings: a 48-byte header, then three masks of
        // link_mode_masks_nwords (byte 15) words each.
        const HEADER: usize = 48;
        let mut buffer = vec![0u8; HEADER + 3 * 4 * MAX_MASK_WORDS];
        buffer[..4].copy_from_slice(&ETHTOOL_GLINKSETTINGS.to_ne_bytes());
        // SAFETY: the buffer holds the header and the largest masks.
        if !unsafe { self.call(buffer.as_mut_ptr().cast()) } {
            return None;
        }
        // The first call is a handshake: the kernel answers with minus
        // the number of mask words it wants.
        let nwords = buffer[15] as i8;
        if nwords < 0 {
            buffer.fill(0);
            buffer[..4].copy_from_slice(&ETHTOOL_GLINKSETTINGS.to_ne_bytes());
            buffer[15] = (-nwords) as u8;
            // SAFETY: as above.
            if !unsafe { self.call(buffer.as_mut_ptr().cast()) } {
                return None;
            }
        }
        let speed = u32::from_ne_bytes([buffer[4], buffer[5], buffer[6], buffer[7]]);
        Some(LinkSettings {
            speed_mbit: (speed != SPEED_UNKNOWN && speed != 0).then_some(speed),
            duplex: duplex_name(buffer[8]),
            autoneg: Some(buffer[11] == 1),
        })
    }

    fn link_settings_legacy(&self) -> Option<LinkSettings> {
        // struct ethtool_cmd: 11 u32 words.
        let w = self.words::<11>(ETHTOOL_GSET)?;
        let b = |word: usize, i: usize| w[word].to_ne_bytes()[i];
        let low = u16::from_ne_bytes([b(3, 0), b(3, 1)]);
        let high = u16::from_ne_bytes([b(7, 0), b(7, 1)]);
        let speed = u32::from(high) << 16 | u32::from(low);
        Some(LinkSettings {
            speed_mbit: (speed != SPEED_UNKNOWN && speed != 0 && speed != 0xffff).then_some(speed),
            duplex: duplex_name(b(3, 2)),
            autoneg: Some(b(4, 2) == 1),
        })
    }

    pub fn rings(&self) -> Option<Rings> {
        let w = self.words::<9>(ETHTOOL_GRINGPARAM)?;
        Some(Rings {
            rx_max_descriptors: w[1],
            tx_max_descriptors: w[4],
            rx_descriptors: w[5],
            tx_descriptors: w[8],
        })
    }

    pub fn coalescing(&self) -> Option<Coalescing> {
        let w = self.words::<23>(ETHTOOL_GCOALESCE)?;
        Some(Coalescing {
            rx_usecs: w[1],
            rx_max_frames: w[2],
            tx_usecs: w[5],
            tx_max_frames: w[6],
            adaptive_rx: w[10] != 0,
            adaptive_tx: w[11] != 0,
        })
    }

    pub fn channels(&self) -> Option<Queues> {
        let w = self.words::<9>(ETHTOOL_GCHANNELS)?;
        Some(Queues {
            rx: w[5],
            tx: w[6],
            combined: Some(w[8]),
            max_combined: Some(w[4]),
            source: "ethtool".into(),
        })
    }

    /// Names and active state of every feature.
    pub fn features(&self) -> Option<Vec<(String, bool)>> {
        let (names, blocks) = self.feature_blocks()?;
        Some(
            decode_features(&names, &blocks)
                .into_iter()
                .map(|f| (f.name, f.active))
                .collect(),
        )
    }

    /// The feature names and the ETHTOOL_GFEATURES words (two header words,
    /// then per block of 32 features: available, requested, active, never changed).
    fn feature_blocks(&self) -> Option<(Vec<String>, Vec<u32>)> {
        // struct ethtool_sset_info: cmd, reserved, u64 mask, then one u32.
        let mut info = [0u32; 5];
        info[0] = ETHTOOL_GSSET_INFO;
        let mask = 1u64 << ETH_SS_FEATURES;
        info[2..4].copy_from_slice(&[mask as u32, (mask >> 32) as u32]);
        if cfg!(target_endian = "big") {
            info.swap(2, 3);
        }
        // SAFETY: five words: header and one count.
        if !unsafe { self.call(info.as_mut_ptr().cast()) } {
            return None;
        }
        let count = info[4] as usize;
        if count == 0 || count > 4096 {
            return None;
        }
        let mut strings = vec![0u8; 12 + count * ETH_GSTRING_LEN];
        strings[0..4].copy_from_slice(&ETHTOOL_GSTRINGS.to_ne_bytes());
        strings[4..8].copy_from_slice(&ETH_SS_FEATURES.to_ne_bytes());
        strings[8..12].copy_from_slice(&(count as u32).to_ne_bytes());
        // SAFETY: header plus count strings of 32 bytes.
        if !unsafe { self.call(strings.as_mut_ptr().cast()) } {
            return None;
        }
        let blocks = count.div_ceil(32);
        let mut features = vec![0u32; 2 + 4 * blocks];
        features[0] = ETHTOOL_GFEATURES;
        features[1] = blocks as u32;
        // SAFETY: header plus `blocks` blocks of 4 words.
        if !unsafe { self.call(features.as_mut_ptr().cast()) } {
            return None;
        }
        let names = (0..count)
            .map(|i| c_text(&strings[12 + i * ETH_GSTRING_LEN..12 + (i + 1) * ETH_GSTRING_LEN]).unwrap_or_default())
            .collect();
        Some((names, features))
    }
}

/// One device feature (`ethtool -k` lists them) and its state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Feature {
    pub name: String,
    /// Its index in the kernel's feature strings (the bit to set).
    pub index: usize,
    /// The driver lets it be changed (`[fixed]` in `ethtool -k` otherwise).
    pub changeable: bool,
    pub requested: bool,
    pub active: bool,
}

/// ETHTOOL_SFEATURES's answer bit: some asked-for state could not be had
/// (a dependency of another feature holds it); read back to see.
pub const FEATURES_WISH: i32 = 1;
/// ETHTOOL_SFEATURES's answer bit: some feature asked for cannot be changed.
pub const FEATURES_UNSUPPORTED: i32 = 2;

/// Features from their names and the ETHTOOL_GFEATURES words.
fn decode_features(names: &[String], words: &[u32]) -> Vec<Feature> {
    let bit = |i: usize, field: usize| {
        words
            .get(2 + 4 * (i / 32) + field)
            .is_some_and(|w| w & (1 << (i % 32)) != 0)
    };
    names
        .iter()
        .enumerate()
        .map(|(i, name)| Feature {
            name: name.clone(),
            index: i,
            changeable: bit(i, 0),
            requested: bit(i, 1),
            active: bit(i, 2),
        })
        .collect()
}

/// `struct ethtool_sfeatures` for `count` features: cmd, the number of
/// blocks, then per block of 32 features the `valid` (bits to change) and
/// `requested` (their new state) words.
fn sfeatures_request(count: usize, changes: &[(usize, bool)]) -> Vec<u32> {
    let blocks = count.div_ceil(32).max(1);
    let mut words = vec![0u32; 2 + 2 * blocks];
    words[0] = ETHTOOL_SFEATURES;
    words[1] = blocks as u32;
    for &(index, on) in changes.iter().filter(|(i, _)| *i < blocks * 32) {
        let (block, bit) = (index / 32, 1u32 << (index % 32));
        words[2 + 2 * block] |= bit;
        if on {
            words[3 + 2 * block] |= bit;
        } else {
            words[3 + 2 * block] &= !bit;
        }
    }
    words
}

/// `struct ethtool_ringparam` to set: the current words with the receive
/// (`rx_pending`, word 5) and transmit (`tx_pending`, word 8) sizes
/// replaced; Err when one exceeds the driver's maximum (words 1 and 4).
pub fn ring_request(current: [u32; 9], rx: Option<u32>, tx: Option<u32>) -> Result<[u32; 9], String> {
    let mut w = current;
    for (name, wanted, max_word, word) in [("rx", rx, 1, 5), ("tx", tx, 4, 8)] {
        if let Some(n) = wanted {
            if n > w[max_word] {
                return Err(format!(
                    "{name}={n} exceeds the driver's maximum of {} descriptors",
                    w[max_word]
                ));
            }
            w[word] = n;
        }
    }
    w[0] = ETHTOOL_SRINGPARAM;
    Ok(w)
}

/// The fields of `struct ethtool_coalesce` a plan sets, by word.
pub struct CoalesceChange {
    pub rx_usecs: Option<u32>,
    pub rx_frames: Option<u32>,
    pub tx_usecs: Option<u32>,
    pub tx_frames: Option<u32>,
    pub adaptive_rx: Option<bool>,
    pub adaptive_tx: Option<bool>,
}

/// `struct ethtool_coalesce` to set: the current words with the asked
/// fields replaced (rx_coalesce_usecs 1, rx_max_coalesced_frames 2,
/// tx_coalesce_usecs 5, tx_max_coalesced_frames 6, use_adaptive_rx 10,
/// use_adaptive_tx 11).
pub fn coalesce_request(current: [u32; 23], change: &CoalesceChange) -> [u32; 23] {
    let mut w = current;
    for (word, value) in [
        (1, change.rx_usecs),
        (2, change.rx_frames),
        (5, change.tx_usecs),
        (6, change.tx_frames),
        (10, change.adaptive_rx.map(u32::from)),
        (11, change.adaptive_tx.map(u32::from)),
    ] {
        if let Some(v) = value {
            w[word] = v;
        }
    }
    w[0] = ETHTOOL_SCOALESCE;
    w
}

/// The offloads a report shows, from the kernel's feature names.
pub fn offloads(features: &[(String, bool)]) -> Offloads {
    let state = |names: &[&str]| {
        let found: Vec<bool> = features
            .iter()
            .filter(|(n, _)| names.contains(&n.as_str()))
            .map(|&(_, on)| on)
            .collect();
        (!found.is_empty()).then(|| found.iter().any(|&on| on))
    };
    Offloads {
        tso: state(&["tx-tcp-segmentation"]),
        gso: state(&["tx-generic-segmentation"]),
        gro: state(&["rx-gro"]),
        lro: state(&["rx-lro"]),
        rx_checksum: state(&["rx-checksum"]),
        tx_checksum: state(&["tx-checksum-ipv4", "tx-checksum-ip-generic", "tx-checksum-ipv6"]),
        scatter_gather: state(&["tx-scatter-gather"]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offloads_map_kernel_feature_names() {
        let f = |n: &str, on| (n.to_string(), on);
        let o = offloads(&[
            f("tx-tcp-segmentation", true),
            f("rx-gro", false),
            f("tx-checksum-ipv4", false),
            f("tx-checksum-ip-generic", true),
        ]);
        assert_eq!(o.tso, Some(true));
        assert_eq!(o.gro, Some(false));
        assert_eq!(o.tx_checksum, Some(true));
        assert_eq!(o.lro, None);
    }

    #[test]
    fn sfeatures_sets_valid_and_requested_bits_per_block() {
        // 70 features: 3 blocks. Bit 3 on, bit 40 off, bit 69 on.
        let w = sfeatures_request(70, &[(3, true), (40, false), (69, true), (500, true)]);
        assert_eq!(w.len(), 2 + 2 * 3);
        assert_eq!(&w[..2], &[ETHTOOL_SFEATURES, 3]);
        assert_eq!((w[2], w[3]), (1 << 3, 1 << 3));
        assert_eq!((w[4], w[5]), (1 << 8, 0));
        assert_eq!((w[6], w[7]), (1 << 5, 1 << 5));
    }

    #[test]
    fn gfeatures_blocks_decode_to_changeable_requested_and_active() {
        let names: Vec<String> = (0..34).map(|i| format!("f{i}")).collect();
        // Block 0: available, requested, active, never changed; block 1 the same.
        let words = [ETHTOOL_GFEATURES, 2, 0b011, 0b001, 0b101, 0, 0b10, 0b10, 0, 0];
        let f = decode_features(&names, &words);
        assert_eq!((f[0].changeable, f[0].requested, f[0].active), (true, true, true));
        assert_eq!((f[1].changeable, f[1].requested, f[1].active), (true, false, false));
        assert_eq!((f[2].changeable, f[2].active), (false, true));
        assert_eq!(
            (f[33].name.as_str(), f[33].index, f[33].changeable, f[33].requested),
            ("f33", 33, true, true)
        );
        assert!(!f[32].active);
    }

    #[test]
    fn ring_and_coalesce_requests_change_only_the_asked_words() {
        // ethtool_ringparam: cmd, rx_max, rx_mini_max, rx_jumbo_max, tx_max,
        // rx, rx_mini, rx_jumbo, tx.
        let current = [ETHTOOL_GRINGPARAM, 4096, 0, 0, 2048, 512, 0, 0, 512];
        let w = ring_request(current, Some(256), None).unwrap();
        assert_eq!(w, [ETHTOOL_SRINGPARAM, 4096, 0, 0, 2048, 256, 0, 0, 512]);
        let w = ring_request(current, None, Some(2048)).unwrap();
        assert_eq!(w[8], 2048);
        let e = ring_request(current, Some(256), Some(4096)).unwrap_err();
        assert_eq!(e, "tx=4096 exceeds the driver's maximum of 2048 descriptors");
        let mut current = [0u32; 23];
        current[0] = ETHTOOL_GCOALESCE;
        current[1] = 8;
        current[10] = 1;
        current[20] = 77;
        let w = coalesce_request(
            current,
            &CoalesceChange {
                rx_usecs: Some(0),
                rx_frames: Some(1),
                tx_usecs: None,
                tx_frames: None,
                adaptive_rx: Some(false),
                adaptive_tx: Some(true),
            },
        );
        assert_eq!(w[0], ETHTOOL_SCOALESCE);
        assert_eq!((w[1], w[2], w[5], w[10], w[11], w[20]), (0, 1, 0, 0, 1, 77));
    }

    #[test]
    fn c_text_stops_at_nul_and_drops_placeholders() {
        assert_eq!(c_text(b"veth\0\0junk"), Some("veth".into()));
        assert_eq!(c_text(b"N/A\0"), None);
        assert_eq!(c_text(b"\0"), None);
    }

    #[test]
    fn loopback_answers_features_without_driver_errors() {
        // Loopback exists in every namespace; it has features but no
        // rings. The point: no panic, no error, just what it has.
        let lo = Ethtool::open("lo").expect("a socket");
        let features = lo.features().expect("loopback lists its features");
        assert!(features.iter().any(|(n, _)| n == "rx-gro"), "{features:?}");
        let _ = lo.rings();
        let _ = lo.driver_info();
        let _ = lo.link_settings();
        assert!(Ethtool::open("").is_none());
        assert!(Ethtool::open("a-name-far-too-long-for-ifnamsiz").is_none());
    }
}
