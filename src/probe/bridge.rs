//! A Linux bridge's view of multicast, read inside the network namespace
//! it lives in (a lab's switch): its multicast database (mdb: which ports
//! it forwards each group to, from `bridge -j mdb show`) and its IGMP/MLD
//! counters, the bridge's own and each port's (`ip -j link xstats`, kept
//! by the kernel when the bridge has `mcast_stats_enabled 1`).
//!
//! Both come from iproute2's JSON, which is outside input: every field is
//! checked, and JSON of another shape is an error that says what was
//! expected, never a panic. Entering another namespace (`ip -n`) needs
//! root; the error then says so.

use std::net::IpAddr;
use std::process::{Command, Stdio};

use serde::Deserialize;
use serde_json::Value;

use crate::lab_env::plain_name;
use crate::model::switch::{Both, McastCounters};

/// Longest interface name Linux takes (IFNAMSIZ less the NUL).
const MAX_IFACE_LEN: usize = 15;

/// Why the bridge could not be read.
#[derive(Debug, thiserror::Error)]
pub enum BridgeError {
    #[error("cannot run `{command}`: {source} (iproute2's `ip` and `bridge` are needed)")]
    Run {
        command: String,
        #[source]
        source: std::io::Error,
    },
    #[error("`{command}` failed: {stderr}")]
    Failed { command: String, stderr: String },
    #[error("`{command}` printed {problem}")]
    Unexpected { command: String, problem: String },
    #[error("{0}")]
    Invalid(String),
}

/// One entry of the bridge's multicast database.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MdbEntry {
    /// The port the bridge forwards the group to (the bridge's own name
    /// when its host joined).
    pub port: String,
    pub group: IpAddr,
    /// The one source of a source-specific entry.
    pub source: Option<IpAddr>,
    /// `temp` or `permanent`.
    pub state: String,
}

/// The bridge's multicast settings and counters at one moment.
#[derive(Debug, Clone, PartialEq)]
pub struct BridgeCounters {
    /// IGMP/MLD snooping is on (`mcast_snooping 1`): without it the
    /// bridge floods every group and keeps no mdb.
    pub snooping: bool,
    /// The bridge's own counters.
    pub bridge: McastCounters,
    /// Each port's, by name, in the kernel's order.
    pub ports: Vec<(String, McastCounters)>,
}

/// The bridge `bridge`'s mdb entries for IP groups, read in the network
/// namespace `netns`.
pub fn mdb(netns: &str, bridge: &str) -> Result<Vec<MdbEntry>, BridgeError> {
    check_names(netns, bridge)?;
    let args = ["-n", netns, "-j", "mdb", "show", "dev", bridge];
    let (command, text) = run("bridge", &args)?;
    parse_mdb(&text, bridge).map_err(|problem| BridgeError::Unexpected { command, problem })
}

/// The bridge `bridge`'s multicast counters in the network namespace
/// `netns`, its own and each port's; an error when the bridge keeps none
/// (`mcast_stats_enabled 0`: the kernel then shows zeros).
pub fn counters(netns: &str, bridge: &str) -> Result<BridgeCounters, BridgeError> {
    check_names(netns, bridge)?;
    let unexpected = |command: String| move |problem| BridgeError::Unexpected { command, problem };
    let (command, text) = run("ip", &["-n", netns, "-d", "-j", "link", "show", "dev", bridge])?;
    let settings = parse_settings(&text, bridge).map_err(unexpected(command))?;
    if !settings.stats_enabled {
        return Err(BridgeError::Invalid(format!(
            "bridge {bridge} in {netns} keeps no multicast counters: set `ip link set dev {bridge} type bridge \
             mcast_stats_enabled 1` there"
        )));
    }
    let (command, text) = run("ip", &["-n", netns, "-j", "link", "show", "master", bridge])?;
    let port_names = parse_ports(&text).map_err(unexpected(command))?;
    let (command, text) = run(
        "ip",
        &["-n", netns, "-j", "link", "xstats", "type", "bridge", "dev", bridge],
    )?;
    let own = parse_xstats(&text).map_err(unexpected(command.clone()))?;
    let own = match own.as_slice() {
        [(name, counters)] if name == bridge => *counters,
        _ => return Err(unexpected(command)(format!("not the counters of {bridge} alone"))),
    };
    let (command, text) = run("ip", &["-n", netns, "-j", "link", "xstats", "type", "bridge_slave"])?;
    let all = parse_xstats(&text).map_err(unexpected(command.clone()))?;
    // The namespace may hold other bridges: only this one's ports.
    let mut ports = Vec::with_capacity(port_names.len());
    for name in port_names {
        let Some((_, counters)) = all.iter().find(|(n, _)| *n == name) else {
            return Err(unexpected(command)(format!("no counters for port {name} of {bridge}")));
        };
        ports.push((name, *counters));
    }
    Ok(BridgeCounters {
        snooping: settings.snooping,
        bridge: own,
        ports,
    })
}

/// Refuses a namespace or bridge name that is no plain name before it
/// reaches a command line.
fn check_names(netns: &str, bridge: &str) -> Result<(), BridgeError> {
    if !plain_name(netns, 255) {
        return Err(BridgeError::Invalid(format!(
            "'{netns}' is not a network namespace name"
        )));
    }
    if !plain_name(bridge, MAX_IFACE_LEN) {
        return Err(BridgeError::Invalid(format!("'{bridge}' is not an interface name")));
    }
    Ok(())
}

/// Finds `program` on the PATH or where iproute2 installs it (`/sbin`
/// is often not on a user's PATH).
fn program(name: &str) -> std::path::PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin".into(), "/sbin".into()])
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
        .unwrap_or_else(|| name.into())
}

/// Runs `program args`: the command as words and what it printed.
fn run(name: &str, args: &[&str]) -> Result<(String, String), BridgeError> {
    let command = format!("{name} {}", args.join(" "));
    let out = Command::new(program(name))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|source| BridgeError::Run {
            command: command.clone(),
            source,
        })?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr).trim().to_string();
        // Entering another namespace is root's.
        let stderr = match stderr.contains("Operation not permitted") {
            true => format!("{stderr} (reading another network namespace needs root)"),
            false => stderr,
        };
        return Err(BridgeError::Failed { command, stderr });
    }
    match String::from_utf8(out.stdout) {
        Ok(text) => Ok((command, text)),
        Err(_) => Err(BridgeError::Unexpected {
            command,
            problem: "text that is not UTF-8".into(),
        }),
    }
}

/// `text` as JSON of shape `T` (through a `Value`, as the model reads).
fn json<T: serde::de::DeserializeOwned>(text: &str, what: &str) -> Result<T, String> {
    let value: Value = serde_json::from_str(text).map_err(|e| format!("no JSON ({e})"))?;
    T::deserialize(&value).map_err(|e| format!("JSON that is not {what} ({e})"))
}

#[derive(Deserialize)]
struct MdbDump {
    mdb: Vec<RawMdbEntry>,
}

#[derive(Deserialize)]
struct RawMdbEntry {
    dev: String,
    port: String,
    grp: String,
    state: String,
    #[serde(default)]
    src: Option<String>,
}

/// The IP groups' entries of `bridge` in `bridge -j mdb show`'s output;
/// the layer-2 entries some bridges also hold (a MAC address as the
/// group) are left out.
pub fn parse_mdb(text: &str, bridge: &str) -> Result<Vec<MdbEntry>, String> {
    let dumps: Vec<MdbDump> = json(text, "a list of mdb dumps")?;
    let mut entries = Vec::new();
    for raw in dumps.into_iter().flat_map(|d| d.mdb) {
        if raw.dev != bridge {
            continue;
        }
        let group: IpAddr = match raw.grp.parse() {
            Ok(group) => group,
            Err(_) if is_mac(&raw.grp) => continue,
            Err(_) => return Err(format!("group '{}', which is no IP address", raw.grp)),
        };
        if !group.is_multicast() {
            return Err(format!("group {group}, which is no multicast address"));
        }
        if !plain_name(&raw.port, MAX_IFACE_LEN) {
            return Err(format!("port '{}', which is no interface name", raw.port));
        }
        if !matches!(raw.state.as_str(), "temp" | "permanent") {
            return Err(format!(
                "state '{}' of group {group}: neither temp nor permanent",
                raw.state
            ));
        }
        let source = raw
            .src
            .map(|s| s.parse().map_err(|_| format!("source '{s}', which is no IP address")))
            .transpose()?;
        entries.push(MdbEntry {
            port: raw.port,
            group,
            source,
            state: raw.state,
        });
    }
    Ok(entries)
}

/// `01:00:5e:01:02:03`: six pairs of hex digits.
fn is_mac(text: &str) -> bool {
    let parts: Vec<&str> = text.split(':').collect();
    parts.len() == 6
        && parts
            .iter()
            .all(|p| p.len() == 2 && p.bytes().all(|b| b.is_ascii_hexdigit()))
}

#[derive(Deserialize)]
struct Link {
    ifname: String,
}

/// The names in `ip -j link show master BRIDGE`'s output (its ports).
pub fn parse_ports(text: &str) -> Result<Vec<String>, String> {
    let links: Vec<Link> = json(text, "a list of interfaces")?;
    links
        .into_iter()
        .map(|l| match plain_name(&l.ifname, MAX_IFACE_LEN) {
            true => Ok(l.ifname),
            false => Err(format!("port '{}', which is no interface name", l.ifname)),
        })
        .collect()
}

/// A bridge's multicast settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settings {
    pub snooping: bool,
    pub stats_enabled: bool,
}

#[derive(Deserialize)]
struct Detailed {
    ifname: String,
    linkinfo: Option<LinkInfo>,
}

#[derive(Deserialize)]
struct LinkInfo {
    info_kind: Option<String>,
    info_data: Option<BridgeData>,
}

#[derive(Deserialize)]
struct BridgeData {
    mcast_snooping: Option<u8>,
    mcast_stats_enabled: Option<u8>,
}

/// The multicast settings in `ip -d -j link show dev BRIDGE`'s output.
pub fn parse_settings(text: &str, bridge: &str) -> Result<Settings, String> {
    let links: Vec<Detailed> = json(text, "a list of interfaces")?;
    let [link] = links.as_slice() else {
        return Err(format!("{} interfaces where {bridge} alone was asked for", links.len()));
    };
    if link.ifname != bridge {
        return Err(format!("interface {} where {bridge} was asked for", link.ifname));
    }
    let info = link.linkinfo.as_ref();
    if info.and_then(|i| i.info_kind.as_deref()) != Some("bridge") {
        return Err(format!("{bridge} as an interface that is not a bridge"));
    }
    let data = info.and_then(|i| i.info_data.as_ref());
    let flag = |value: Option<u8>, name: &str| match value {
        Some(0) => Ok(false),
        Some(1) => Ok(true),
        Some(other) => Err(format!("{name} {other} where 0 or 1 was expected")),
        None => Err(format!(
            "no {name} for {bridge} (a kernel too old for bridge multicast counters?)"
        )),
    };
    Ok(Settings {
        snooping: flag(data.and_then(|d| d.mcast_snooping), "mcast_snooping")?,
        stats_enabled: flag(data.and_then(|d| d.mcast_stats_enabled), "mcast_stats_enabled")?,
    })
}

#[derive(Deserialize)]
struct Xstats {
    ifname: String,
    multicast: Option<serde_json::Map<String, Value>>,
}

/// Each interface's multicast counters in `ip -j link xstats type
/// bridge[_slave]`'s output, every protocol version added up: a group's
/// keys `rx_v1`, `rx_v2`... (or `rx`) are received, `tx_...` sent.
pub fn parse_xstats(text: &str) -> Result<Vec<(String, McastCounters)>, String> {
    let links: Vec<Xstats> = json(text, "a list of interface statistics")?;
    links
        .into_iter()
        .map(|link| {
            if !plain_name(&link.ifname, MAX_IFACE_LEN) {
                return Err(format!("interface '{}', which is no interface name", link.ifname));
            }
            let Some(multicast) = link.multicast else {
                return Err(format!("no multicast counters for {}", link.ifname));
            };
            let counters = mcast_counters(&multicast).map_err(|e| format!("{}'s counters: {e}", link.ifname))?;
            Ok((link.ifname, counters))
        })
        .collect()
}

fn mcast_counters(multicast: &serde_json::Map<String, Value>) -> Result<McastCounters, String> {
    let both = |key: &str| -> Result<Both, String> {
        let Some(Value::Object(fields)) = multicast.get(key) else {
            return Err(format!("no {key}"));
        };
        let mut sum = Both::default();
        for (name, value) in fields {
            let count = value
                .as_u64()
                .ok_or_else(|| format!("{key}.{name} is {value}, not a count"))?;
            let total = match name.split('_').next() {
                Some("rx") => &mut sum.received,
                Some("tx") => &mut sum.sent,
                _ => return Err(format!("{key}.{name} is neither received (rx) nor sent (tx)")),
            };
            *total = total
                .checked_add(count)
                .ok_or_else(|| format!("{key} adds up past 2^64"))?;
        }
        Ok(sum)
    };
    let count = |key: &str| -> Result<u64, String> {
        multicast
            .get(key)
            .and_then(Value::as_u64)
            .ok_or_else(|| format!("no count {key}"))
    };
    Ok(McastCounters {
        igmp_queries: both("igmp_queries")?,
        igmp_reports: both("igmp_reports")?,
        igmp_leaves: both("igmp_leaves")?,
        igmp_parse_errors: count("igmp_parse_errors")?,
        mld_queries: both("mld_queries")?,
        mld_reports: both("mld_reports")?,
        mld_leaves: both("mld_leaves")?,
        mld_parse_errors: count("mld_parse_errors")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Captured from iproute2 6.1 on Linux 6.18: bridge br0 with snooping,
    /// querier and counters on, ports eth0 and eth1 toward two hosts that
    /// joined 239.1.2.3 (IGMPv2), and the hosts' own IPv6 groups.
    const MDB: &str = include_str!("../../tests/fixtures/bridge/mdb.json");
    const PORTS: &str = include_str!("../../tests/fixtures/bridge/ports.json");
    const DETAILS: &str = include_str!("../../tests/fixtures/bridge/bridge-details.json");
    const XSTATS_BRIDGE: &str = include_str!("../../tests/fixtures/bridge/xstats-bridge.json");
    const XSTATS_PORTS: &str = include_str!("../../tests/fixtures/bridge/xstats-ports.json");

    #[test]
    fn the_mdb_lists_each_groups_member_ports() {
        let entries = parse_mdb(MDB, "br0").unwrap();
        let group: IpAddr = "239.1.2.3".parse().unwrap();
        let members: Vec<&str> = entries
            .iter()
            .filter(|e| e.group == group)
            .map(|e| e.port.as_str())
            .collect();
        assert_eq!(members, ["eth0", "eth1"]);
        assert!(entries.iter().all(|e| e.state == "temp" && e.source.is_none()));
        // The hosts' solicited-node groups (MLD) and the bridge's own.
        let own: Vec<&MdbEntry> = entries.iter().filter(|e| e.port == "br0").collect();
        assert_eq!(own.len(), 2);
        assert!(own.iter().all(|e| e.group.is_ipv6()));
        assert_eq!(parse_mdb(MDB, "br1").unwrap(), vec![], "another bridge's dump");
        assert_eq!(parse_mdb(r#"[{"mdb":[],"router":{}}]"#, "br0").unwrap(), vec![]);
    }

    #[test]
    fn a_source_specific_entry_keeps_its_source_and_layer_2_entries_are_left_out() {
        let text = r#"[{"mdb":[
            {"index":2,"dev":"br0","port":"eth2","grp":"232.1.1.1","src":"10.200.0.1","state":"temp","flags":[]},
            {"index":2,"dev":"br0","port":"eth2","grp":"01:00:5e:01:02:03","state":"permanent","flags":[]}
        ],"router":{}}]"#;
        let entries = parse_mdb(text, "br0").unwrap();
        assert_eq!(
            entries,
            vec![MdbEntry {
                port: "eth2".into(),
                group: "232.1.1.1".parse().unwrap(),
                source: Some("10.200.0.1".parse().unwrap()),
                state: "temp".into(),
            }]
        );
    }

    #[test]
    fn a_malformed_mdb_is_an_error_that_says_what_is_wrong() {
        let entry = |field: &str, value: &str| {
            let mut e =
                serde_json::json!({"index": 2, "dev": "br0", "port": "eth0", "grp": "239.1.2.3", "state": "temp"});
            e[field] = serde_json::from_str(value).unwrap();
            serde_json::json!([{"mdb": [e]}]).to_string()
        };
        for (field, value, expected) in [
            ("grp", r#""not-a-group""#, "no IP address"),
            ("grp", r#""10.0.0.1""#, "no multicast address"),
            ("port", r#""eth0; reboot""#, "no interface name"),
            ("port", r#""a-name-far-too-long""#, "no interface name"),
            ("state", r#""weird""#, "neither temp nor permanent"),
            ("src", r#""10.0.0.300""#, "no IP address"),
            ("grp", "7", "not a list of mdb dumps"),
        ] {
            let e = parse_mdb(&entry(field, value), "br0").unwrap_err();
            assert!(e.contains(expected), "{field}={value}: {e}");
        }
        for junk in ["", "{", "null", "{}", "[1]", r#"[{"router":{}}]"#] {
            assert!(parse_mdb(junk, "br0").is_err(), "{junk:?}");
        }
    }

    #[test]
    fn the_ports_and_the_settings_are_read_from_ips_json() {
        assert_eq!(parse_ports(PORTS).unwrap(), ["eth0", "eth1"]);
        assert_eq!(parse_ports("[]").unwrap(), Vec::<String>::new());
        assert!(parse_ports(r#"[{"ifname":"../x"}]"#).is_err());
        assert_eq!(
            parse_settings(DETAILS, "br0").unwrap(),
            Settings {
                snooping: true,
                stats_enabled: true
            }
        );
        let e = parse_settings(DETAILS, "br1").unwrap_err();
        assert!(e.contains("where br1 was asked for"), "{e}");
        let off = DETAILS.replace("\"mcast_stats_enabled\":1", "\"mcast_stats_enabled\":0");
        assert!(!parse_settings(&off, "br0").unwrap().stats_enabled);
        let odd = DETAILS.replace("\"mcast_snooping\":1", "\"mcast_snooping\":7");
        assert!(parse_settings(&odd, "br0").unwrap_err().contains("0 or 1"));
        let veth = r#"[{"ifname":"br0","linkinfo":{"info_kind":"veth"}}]"#;
        assert!(parse_settings(veth, "br0").unwrap_err().contains("not a bridge"));
        assert!(parse_settings("[]", "br0").is_err());
    }

    #[test]
    fn the_counters_add_every_version_up_each_way() {
        let own = parse_xstats(XSTATS_BRIDGE).unwrap();
        assert_eq!(own.len(), 1);
        assert_eq!(own[0].0, "br0");
        let ports = parse_xstats(XSTATS_PORTS).unwrap();
        let names: Vec<&str> = ports.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["eth0", "eth1"]);
        let (_, eth0) = ports[0];
        // As captured: host a's six IGMPv2 reports came in on eth0, and
        // the querier's six queries went out by it; MLD v1 and v2 added.
        assert_eq!(eth0.igmp_reports, Both { received: 6, sent: 1 });
        assert_eq!(eth0.igmp_queries, Both { received: 0, sent: 6 });
        assert_eq!(eth0.mld_reports, Both { received: 8, sent: 8 });
        assert_eq!(eth0.igmp_leaves, Both::default());
        assert_eq!(eth0.igmp_parse_errors, 0);
    }

    #[test]
    fn malformed_counters_are_an_error_that_says_what_is_wrong() {
        let mut doc: Value = serde_json::from_str(XSTATS_PORTS).unwrap();
        for (path, value, expected) in [
            ("/0/multicast/igmp_reports/rx_v2", "-1", "not a count"),
            ("/0/multicast/igmp_reports/rx_v2", "\"2\"", "not a count"),
            ("/0/multicast/igmp_leaves", "3", "no igmp_leaves"),
            ("/0/multicast/mld_parse_errors", "null", "no count mld_parse_errors"),
            ("/0/multicast", "null", "no multicast counters for eth0"),
            ("/0/ifname", "\"a/b\"", "no interface name"),
        ] {
            let mut broken = doc.clone();
            *broken.pointer_mut(path).unwrap() = serde_json::from_str(value).unwrap();
            let e = parse_xstats(&broken.to_string()).unwrap_err();
            assert!(e.contains(expected), "{path}={value}: {e}");
        }
        doc[0]["multicast"]["igmp_reports"]["odd_v9"] = 1.into();
        assert!(parse_xstats(&doc.to_string()).unwrap_err().contains("neither received"));
        let huge = XSTATS_BRIDGE.replace("\"tx_v2\":2", &format!("\"tx_v2\":{}", u64::MAX));
        let huge = huge.replace("\"tx_v3\":0}", "\"tx_v3\":1}");
        assert!(parse_xstats(&huge).unwrap_err().contains("past 2^64"), "{huge}");
        for junk in ["", "[", "{}", "[{}]"] {
            assert!(parse_xstats(junk).is_err(), "{junk:?}");
        }
    }

    #[test]
    fn names_that_are_no_plain_names_never_reach_a_command_line() {
        for (netns, bridge) in [("", "br0"), ("../x", "br0"), ("-n", "br0"), ("ns", "br0 x"), ("ns", "")] {
            assert!(
                matches!(mdb(netns, bridge), Err(BridgeError::Invalid(_))),
                "{netns:?} {bridge:?}"
            );
            assert!(
                matches!(counters(netns, bridge), Err(BridgeError::Invalid(_))),
                "{netns:?} {bridge:?}"
            );
        }
    }

    #[test]
    fn a_namespace_that_does_not_exist_is_a_failure_that_names_the_command() {
        match mdb("nicbench-no-such-namespace-4711", "br0") {
            Err(BridgeError::Failed { command, .. }) => assert!(command.starts_with("bridge -n"), "{command}"),
            // Without iproute2 the command cannot run at all.
            Err(BridgeError::Run { .. }) => crate::probe::skip_or_fail("iproute2's `bridge` is not installed"),
            other => panic!("{other:?}"),
        }
    }
}
