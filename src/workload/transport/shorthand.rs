//! The command line's shorthands for a transport: flags named after one
//! (`--mptcp` for `--transport mptcp`, `-u/--udp` for `--transport udp`).
//! They are the transport layer's, like its encryption options: a
//! workload flattens the set that fits what it carries, beside its own
//! `--transport NAME`, and asks [`Shorthand::chosen`] which transport the
//! flags name; it never names one itself.

use super::Proto;

/// The transports a flag of their own name picks, for a workload.
pub trait Shorthand {
    /// The transport a shorthand flag given picks; None without one.
    fn chosen(&self) -> Option<Proto>;

    /// The transport of a command line with `--transport` as `transport`:
    /// a shorthand's (they conflict with `--transport`), else
    /// `--transport`'s, else TCP's.
    fn transport(&self, transport: Option<Proto>) -> Proto {
        self.chosen().or(transport).unwrap_or_default()
    }
}

/// The shorthand of a workload of byte streams: `--mptcp`.
#[derive(clap::Args, Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StreamShorthands {
    /// Multipath TCP: `--transport mptcp`.
    #[arg(long, conflicts_with = "transport")]
    pub mptcp: bool,
}

impl Shorthand for StreamShorthands {
    fn chosen(&self) -> Option<Proto> {
        self.mptcp.then_some(Proto::MPTCP)
    }
}

/// The shorthand of a workload that also sends datagrams: `-u/--udp`.
#[derive(clap::Args, Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DatagramShorthands {
    /// Over UDP, for the sizes that fit a datagram (at most 65507 B); --transport udp.
    #[arg(short = 'u', long, conflicts_with = "transport")]
    pub udp: bool,
}

impl Shorthand for DatagramShorthands {
    fn chosen(&self) -> Option<Proto> {
        self.udp.then_some(Proto::UDP)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A shorthand picks its transport; without one `--transport` does,
    /// and without either it is TCP.
    #[test]
    fn a_shorthand_picks_its_transport_else_the_named_one_else_tcp() {
        let (none, mptcp) = (StreamShorthands::default(), StreamShorthands { mptcp: true });
        assert_eq!(mptcp.transport(None), Proto::MPTCP);
        assert_eq!(none.transport(Some(Proto::TLS)), Proto::TLS);
        assert_eq!(none.transport(None), Proto::TCP);
        assert_eq!(DatagramShorthands { udp: true }.transport(None), Proto::UDP);
        assert_eq!(DatagramShorthands::default().transport(Some(Proto::QUIC)), Proto::QUIC);
    }
}
