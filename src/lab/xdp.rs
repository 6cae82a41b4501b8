//! A do-nothing XDP program (`XDP_PASS`) on a veth, so that the veth
//! receives through NAPI with GRO left off: a veth polls with NAPI only
//! when GRO is on or an XDP program is attached (and an XDP program keeps
//! GRO off), and only a NAPI poll can run in a thread of its own (threaded
//! NAPI) that a host's CPU limit slows. Loaded with the bpf syscall and
//! attached over rtnetlink from a thread inside the host's namespace.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

const BPF_PROG_LOAD: libc::c_long = 5;
const BPF_PROG_TYPE_XDP: u32 = 6;
/// The program may see packets in several buffers: a veth's MTU may then
/// exceed a page (9000, 16128).
const BPF_F_XDP_HAS_FRAGS: u32 = 1 << 5;
const XDP_PASS: i32 = 2;
const RTM_SETLINK: u16 = 19;
const NLM_F_REQUEST: u16 = 1;
const NLM_F_ACK: u16 = 4;
const NLMSG_ERROR: u16 = 2;
const IFLA_XDP: u16 = 43;
const NLA_F_NESTED: u16 = 0x8000;
const IFLA_XDP_FD: u16 = 1;
const IFLA_XDP_FLAGS: u16 = 3;
const XDP_FLAGS_DRV_MODE: u32 = 1 << 2;

/// Loads the program; the descriptor holds it until attached.
fn load() -> std::io::Result<OwnedFd> {
    // mov64 r0, XDP_PASS; exit
    let mut insns = [0u8; 16];
    insns[0] = 0xb7;
    insns[4..8].copy_from_slice(&XDP_PASS.to_le_bytes());
    insns[8] = 0x95;
    let license = c"GPL";
    let mut attr = [0u8; 128];
    attr[0..4].copy_from_slice(&BPF_PROG_TYPE_XDP.to_le_bytes());
    attr[4..8].copy_from_slice(&2u32.to_le_bytes());
    attr[8..16].copy_from_slice(&(insns.as_ptr() as u64).to_le_bytes());
    attr[16..24].copy_from_slice(&(license.as_ptr() as u64).to_le_bytes());
    attr[44..48].copy_from_slice(&BPF_F_XDP_HAS_FRAGS.to_le_bytes());
    // SAFETY: attr is a bpf_attr for BPF_PROG_LOAD whose pointers stay
    // valid for the call; the kernel reads at most attr.len() bytes.
    let fd = unsafe { libc::syscall(libc::SYS_bpf, BPF_PROG_LOAD, attr.as_mut_ptr(), attr.len()) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: the syscall returned a new descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

fn attr(kind: u16, value: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&((4 + value.len()) as u16).to_ne_bytes());
    out.extend_from_slice(&kind.to_ne_bytes());
    out.extend_from_slice(value);
    while out.len() % 4 != 0 {
        out.push(0);
    }
    out
}

/// The RTM_SETLINK request that attaches program `fd` (-1: detaches) in
/// driver mode to interface `ifindex`.
fn request(ifindex: i32, fd: i32) -> Vec<u8> {
    let mut nested = attr(IFLA_XDP_FD, &fd.to_ne_bytes());
    if fd >= 0 {
        nested.extend(attr(IFLA_XDP_FLAGS, &XDP_FLAGS_DRV_MODE.to_ne_bytes()));
    }
    let xdp = attr(IFLA_XDP | NLA_F_NESTED, &nested);
    // struct ifinfomsg: family u8, pad u8, type u16, index i32, flags u32, change u32.
    let mut body = vec![0u8; 16];
    body[4..8].copy_from_slice(&ifindex.to_ne_bytes());
    body.extend(xdp);
    let mut message = Vec::new();
    message.extend_from_slice(&((16 + body.len()) as u32).to_ne_bytes());
    message.extend_from_slice(&RTM_SETLINK.to_ne_bytes());
    message.extend_from_slice(&(NLM_F_REQUEST | NLM_F_ACK).to_ne_bytes());
    message.extend_from_slice(&1u32.to_ne_bytes());
    message.extend_from_slice(&0u32.to_ne_bytes());
    message.extend(body);
    message
}

/// Sends `message` to the kernel's rtnetlink and reads its acknowledgement.
fn ask(message: &[u8]) -> std::io::Result<()> {
    // SAFETY: plain socket call.
    let raw = unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC,
            libc::NETLINK_ROUTE,
        )
    };
    if raw < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a new descriptor we own.
    let socket = unsafe { OwnedFd::from_raw_fd(raw) };
    // SAFETY: the buffer is valid for its length.
    let sent = unsafe { libc::send(socket.as_raw_fd(), message.as_ptr().cast(), message.len(), 0) };
    if sent < 0 {
        return Err(std::io::Error::last_os_error());
    }
    let mut answer = [0u8; 4096];
    // SAFETY: the buffer is valid for its length.
    let got = unsafe { libc::recv(socket.as_raw_fd(), answer.as_mut_ptr().cast(), answer.len(), 0) };
    if got < 0 {
        return Err(std::io::Error::last_os_error());
    }
    let answer = &answer[..got as usize];
    if answer.len() >= 20 && u16::from_ne_bytes([answer[4], answer[5]]) == NLMSG_ERROR {
        let code = i32::from_ne_bytes([answer[16], answer[17], answer[18], answer[19]]);
        if code != 0 {
            return Err(std::io::Error::from_raw_os_error(-code));
        }
    }
    Ok(())
}

/// Attaches (`on`) or detaches the pass-through program on `ifname` in the
/// calling thread's network namespace.
pub fn set(ifname: &str, on: bool) -> std::io::Result<()> {
    let index = crate::probe::netns::ifindex_of(ifname)
        .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::NotFound, format!("no interface {ifname}")))?;
    if !on {
        return ask(&request(index, -1));
    }
    let program = load()?;
    ask(&request(index, program.as_raw_fd()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_request_nests_the_descriptor_and_driver_mode_under_ifla_xdp() {
        let m = request(7, 5);
        assert_eq!(u32::from_ne_bytes(m[0..4].try_into().unwrap()) as usize, m.len());
        assert_eq!(u16::from_ne_bytes([m[4], m[5]]), RTM_SETLINK);
        assert_eq!(i32::from_ne_bytes(m[20..24].try_into().unwrap()), 7);
        // IFLA_XDP (nested): FD 5, then the flags.
        assert_eq!(u16::from_ne_bytes([m[34], m[35]]), IFLA_XDP | NLA_F_NESTED);
        assert_eq!(i32::from_ne_bytes(m[40..44].try_into().unwrap()), 5);
        assert_eq!(u32::from_ne_bytes(m[48..52].try_into().unwrap()), XDP_FLAGS_DRV_MODE);
        let off = request(7, -1);
        assert_eq!(off.len(), m.len() - 8, "a detach carries no flags");
    }
}
