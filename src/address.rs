//! The agent's address as the user writes it: `HOST`, `HOST:PORT`,
//! `[IPv6]:PORT`, a bare IPv6 address; and the same shown back with
//! brackets where an IPv6 address needs them (`[::1]:5310`).

use std::net::IpAddr;

use crate::model::SpecError;

/// Address family to use when a name resolves to both.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    V4,
    V6,
}

/// Splits `HOST:PORT` and `[V6]:PORT`; a bare IPv6 address (more than one
/// colon, no brackets) has no port. Brackets are removed from the host.
pub fn split_host_port(input: &str) -> Result<(String, Option<u16>), SpecError> {
    let bad_port = |port: &str| {
        SpecError::Invalid(format!(
            "HOST '{input}': '{port}' is not a port (1 to 65535); write HOST, HOST:PORT or [IPv6]:PORT"
        ))
    };
    let parse_port = |port: &str| match port.parse::<u16>() {
        Ok(p) if p > 0 => Ok(p),
        _ => Err(bad_port(port)),
    };
    if let Some(rest) = input.strip_prefix('[') {
        let Some((host, after)) = rest.split_once(']') else {
            return Err(SpecError::Invalid(format!(
                "HOST '{input}': no closing ']'; write [IPv6] or [IPv6]:PORT"
            )));
        };
        return match after {
            "" => Ok((host.to_string(), None)),
            _ => match after.strip_prefix(':') {
                Some(port) => Ok((host.to_string(), Some(parse_port(port)?))),
                None => Err(bad_port(after)),
            },
        };
    }
    match input.matches(':').count() {
        1 => {
            let (host, port) = input.split_once(':').expect("one colon");
            Ok((host.to_string(), Some(parse_port(port)?)))
        }
        _ => Ok((input.to_string(), None)),
    }
}

/// The host and port to connect to: a port in HOST wins over the default,
/// and must agree with `-p` when both are given.
pub fn agent_address(host: &str, port: Option<u16>, family: Option<Family>) -> Result<(String, u16), SpecError> {
    let (name, in_host) = split_host_port(host)?;
    let port = match (in_host, port) {
        (Some(a), Some(b)) if a != b => {
            return Err(SpecError::Invalid(format!(
                "HOST '{host}' names port {a} but -p/--port says {b}; give the port once"
            )))
        }
        (Some(p), _) | (None, Some(p)) => p,
        (None, None) => crate::protocol::DEFAULT_PORT,
    };
    if let Ok(ip) = name.parse::<IpAddr>() {
        let clash = match (family, ip) {
            (Some(Family::V6), IpAddr::V4(_)) => Some(("-6/--ipv6", "an IPv4")),
            (Some(Family::V4), IpAddr::V6(_)) => Some(("-4/--ipv4", "an IPv6")),
            _ => None,
        };
        if let Some((option, kind)) = clash {
            return Err(SpecError::Invalid(format!(
                "{option} contradicts HOST {name}, which is {kind} address; drop {option} or give an address of that family"
            )));
        }
    }
    Ok((name, port))
}

/// `host:port`, with brackets around an IPv6 address: `[::1]:5310`.
pub fn display(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_port_forms() {
        let ok = |s: &str| split_host_port(s).unwrap();
        assert_eq!(ok("127.0.0.1:46999"), ("127.0.0.1".into(), Some(46999)));
        assert_eq!(ok("b:46010"), ("b".into(), Some(46010)));
        assert_eq!(ok("[::1]:5311"), ("::1".into(), Some(5311)));
        assert_eq!(ok("[fe80::1%eth0]"), ("fe80::1%eth0".into(), None));
        assert_eq!(ok("::1"), ("::1".into(), None));
        assert_eq!(ok("host.example"), ("host.example".into(), None));
        for bad in ["127.0.0.1:x", "127.0.0.1:0", "[::1", "[::1]x", "h:70000"] {
            assert!(split_host_port(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn ports_from_host_and_option_must_agree() {
        assert_eq!(agent_address("h:7", None, None).unwrap(), ("h".into(), 7));
        assert_eq!(agent_address("h:7", Some(7), None).unwrap(), ("h".into(), 7));
        assert_eq!(agent_address("h", None, None).unwrap().1, crate::protocol::DEFAULT_PORT);
        assert!(agent_address("h:7", Some(8), None)
            .unwrap_err()
            .to_string()
            .contains("give the port once"));
    }

    #[test]
    fn a_family_option_that_contradicts_the_address_is_an_option_error() {
        let e = agent_address("127.0.0.1", None, Some(Family::V6))
            .unwrap_err()
            .to_string();
        assert!(e.contains("-6/--ipv6") && e.contains("IPv4"), "{e}");
        assert!(agent_address("::1", None, Some(Family::V4)).is_err());
        assert!(agent_address("::1", None, Some(Family::V6)).is_ok());
    }

    #[test]
    fn ipv6_is_shown_in_brackets() {
        assert_eq!(display("::1", 5310), "[::1]:5310");
        assert_eq!(display("127.0.0.1", 5310), "127.0.0.1:5310");
    }
}
