//! `unix`: an AF_UNIX stream socket between the client and an agent on
//! the same host. The kernel moves bytes from one socket's buffer to the
//! other's with no TCP/IP stack between: no segments, no checksums, no
//! loopback device, no congestion control. That is the floor of what any
//! IP transport can do on this host, shown beside loopback TCP.
//!
//! The agent's data listener is bound to an abstract name,
//! `nicbench-data-N`, N a number it picks and names to the client in
//! place of a port. An abstract name belongs to one network namespace and
//! goes with its socket, so nothing is left in the file system; the
//! session token admits a connection, as over TCP.

use std::io::ErrorKind;
use std::net::{IpAddr, SocketAddr, UdpSocket};

use socket2::{Domain, SockAddr, Socket, Type};

use super::{About, Configure, Delivery, Transport};
use crate::linerate::Stack;
use crate::workload::base::{ClientNet, WorkloadError};

/// The prefix of a data listener's abstract name; the number after it
/// stands for the port.
pub const NAME_PREFIX: &str = "nicbench-data-";

/// Numbers tried before the listener gives up (each taken by another
/// listener of this network namespace).
const ATTEMPTS: usize = 64;

/// A stream over an AF_UNIX socket.
pub struct Unix;

static ABOUT: About = About {
    name: "unix",
    label: "AF_UNIX",
    delivery: Delivery::Stream,
    socket: (Type::STREAM, None),
    // No headers: nothing it sends crosses a link.
    stack: [Stack::Eth, Stack::Eth],
};

impl Transport for Unix {
    fn about(&self) -> &'static About {
        &ABOUT
    }

    fn tcp_options(&self) -> bool {
        false
    }

    fn listen(&self, _ip: IpAddr, backlog: i32, configure: Configure) -> Result<Socket, WorkloadError> {
        let socket = Socket::new(Domain::UNIX, Type::STREAM, None)
            .map_err(WorkloadError::io("creating the AF_UNIX data listener"))?;
        configure(&socket)?;
        let mut taken = 0;
        loop {
            let mut random = [0u8; 2];
            getrandom::getrandom(&mut random).map_err(|e| WorkloadError::Setup(format!("picking a name: {e}")))?;
            // Above 1023, as a port would be; never 0 (no port).
            let number = u16::from_be_bytes(random).max(1024);
            match socket.bind(&address(number)?) {
                Ok(()) => break,
                Err(e) if e.kind() == ErrorKind::AddrInUse && taken < ATTEMPTS => taken += 1,
                Err(e) => {
                    return Err(WorkloadError::io(format!(
                        "binding the AF_UNIX data listener {NAME_PREFIX}{number}"
                    ))(e))
                }
            }
        }
        socket
            .listen(backlog)
            .map_err(WorkloadError::io("listening for data connections"))?;
        Ok(socket)
    }

    fn connect(&self, net: &ClientNet, port: u16, id: u32, configure: Configure) -> Result<Socket, WorkloadError> {
        if !on_this_host(net.agent_ip) {
            return Err(WorkloadError::Setup(format!(
                "--transport unix: the agent at {} is not on this host (or is in another network namespace of \
                 it); an AF_UNIX socket joins only a client and an agent of one host: run `nicbench serve` here \
                 and test against 127.0.0.1, or use --transport tcp",
                net.agent_ip
            )));
        }
        if !net.routes.is_empty() {
            return Err(WorkloadError::Setup(
                "--transport unix with --links: an AF_UNIX socket takes no path over a link; drop --links or use \
                 --transport tcp"
                    .into(),
            ));
        }
        let socket = Socket::new(Domain::UNIX, Type::STREAM, None)
            .map_err(WorkloadError::io("creating an AF_UNIX data socket"))?;
        configure(&socket)?;
        socket.connect(&address(port)?).map_err(WorkloadError::io(format!(
            "connecting data stream {id} to {NAME_PREFIX}{port}"
        )))?;
        Ok(socket)
    }
}

/// The abstract address of data listener `number`.
fn address(number: u16) -> Result<SockAddr, WorkloadError> {
    SockAddr::unix(format!("\0{NAME_PREFIX}{number}")).map_err(WorkloadError::io(format!(
        "naming the AF_UNIX listener {NAME_PREFIX}{number}"
    )))
}

/// The number a data listener bound to an abstract name of this
/// transport stands for; None for any other address.
pub fn number_of(address: &SockAddr) -> Option<u16> {
    let name = address.as_abstract_namespace()?;
    std::str::from_utf8(name).ok()?.strip_prefix(NAME_PREFIX)?.parse().ok()
}

/// Whether `ip` is an address of this host in this network namespace
/// (a loopback address, or one a socket here can bind to): where an
/// abstract AF_UNIX name reaches. Nothing is sent.
pub fn on_this_host(ip: IpAddr) -> bool {
    ip.is_loopback() || UdpSocket::bind(SocketAddr::new(ip, 0)).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listener_names_the_number_its_client_connects_to() {
        let ip: IpAddr = "127.0.0.1".parse().unwrap();
        let listener = Unix.listen(ip, 4, &|_| Ok(())).unwrap();
        let number = number_of(&listener.local_addr().unwrap()).expect("an abstract name of ours");
        assert!(number >= 1024);
        let net = ClientNet::on_this_kernel(ip, vec![number], [0; crate::protocol::TOKEN_LEN]);
        let client = Unix.connect(&net, number, 1, &|_| Ok(())).unwrap();
        let (accepted, _) = listener.accept().unwrap();
        client.send(b"x").unwrap();
        let mut byte = [std::mem::MaybeUninit::new(0u8)];
        assert_eq!(accepted.recv(&mut byte).unwrap(), 1);
        // A second listener gets a name of its own.
        let other = Unix.listen(ip, 4, &|_| Ok(())).unwrap();
        assert_ne!(number_of(&other.local_addr().unwrap()), Some(number));
    }

    #[test]
    fn an_ip_address_is_no_listener_number() {
        let tcp: SockAddr = SocketAddr::from(([127, 0, 0, 1], 5201)).into();
        assert_eq!(number_of(&tcp), None);
    }
}
