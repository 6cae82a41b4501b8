//! Multipath TCP (`IPPROTO_MPTCP`, Linux 5.6+): one byte stream the
//! kernel spreads over subflows on several paths. To the workloads it is a
//! byte stream like TCP: the same admission, the same hot loops, the same
//! socket calls. What is its own is the socket's protocol, the check that
//! this host (this network namespace) has it enabled, and the subflow
//! figures `probe::mptcp` reads from the kernel.

use socket2::{Protocol, Type};

use super::{Delivery, Transport};
use crate::linerate::Stack;
use crate::probe::mptcp;

/// Multipath TCP.
pub struct Mptcp;

impl Transport for Mptcp {
    fn name(&self) -> &'static str {
        "mptcp"
    }

    fn label(&self) -> &'static str {
        "MPTCP"
    }

    fn delivery(&self) -> Delivery {
        Delivery::Stream
    }

    fn socket(&self) -> (Type, Protocol) {
        (Type::STREAM, Protocol::from(mptcp::IPPROTO_MPTCP))
    }

    /// Refused with what to enable: a kernel without CONFIG_MPTCP, or a
    /// network namespace with `net.mptcp.enabled=0`.
    fn available(&self) -> Result<(), String> {
        mptcp::availability().map_err(|e| e.to_string())
    }

    /// TCP's headers with timestamps. The model leaves out the DSS option
    /// MPTCP adds to data segments (up to 28 bytes), so an MPTCP share of
    /// the line rate reads up to 2% high at MTU 1500.
    fn stack(&self, ipv6: bool) -> Stack {
        match ipv6 {
            false => Stack::Tcp4Ts,
            true => Stack::Tcp6Ts,
        }
    }
}
