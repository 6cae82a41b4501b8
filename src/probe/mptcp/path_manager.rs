//! The path manager of this network namespace: the `net.mptcp.*` sysctls, and
//! the limits and endpoints that iproute2's `ip -j mptcp` prints, parsed from
//! the JSON of newer iproute2 and the text of 6.1 and older.

use std::collections::BTreeMap;
use std::io;
use std::process::{Command, Stdio};

use super::SYSCTL_DIR;

pub use crate::model::{MptcpEndpoint as Endpoint, MptcpLimits as Limits, MptcpPathManager as PathManager};

/// The path manager's state in this thread's network namespace.
pub fn path_manager() -> PathManager {
    let mut state = PathManager {
        sysctls: mptcp_sysctls(),
        ..PathManager::default()
    };
    let mut unread = Vec::new();
    match run_ip(&["limits", "show"]).and_then(|out| parse_limits(&out)) {
        Ok(limits) => state.limits = Some(limits),
        Err(why) => unread.push(why),
    }
    match run_ip(&["endpoint", "show"]).and_then(|out| parse_endpoints(&out)) {
        Ok(endpoints) => state.endpoints = Some(endpoints),
        Err(why) => unread.push(why),
    }
    unread.dedup();
    state.unread = (!unread.is_empty()).then(|| unread.join("; "));
    state
}

/// Every readable file of /proc/sys/net/mptcp, trimmed.
fn mptcp_sysctls() -> BTreeMap<String, String> {
    let Ok(entries) = std::fs::read_dir(SYSCTL_DIR) else {
        return BTreeMap::new();
    };
    entries
        .flatten()
        .filter_map(|entry| {
            let value = std::fs::read_to_string(entry.path()).ok()?;
            Some((
                entry.file_name().to_string_lossy().into_owned(),
                value.trim().to_string(),
            ))
        })
        .collect()
}

/// The standard output of `ip -j mptcp ARGS`, or why there is none.
fn run_ip(args: &[&str]) -> Result<String, String> {
    let command = format!("ip -j mptcp {}", args.join(" "));
    let out = Command::new("ip")
        .args(["-j", "mptcp"])
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| match e.kind() {
            io::ErrorKind::NotFound => "`ip` is not installed, so the MPTCP limits and endpoints are unknown: \
                 install iproute2 (5.8+ has `ip mptcp`)"
                .to_string(),
            _ => format!("cannot run `{command}`: {e}"),
        })?;
    if !out.status.success() {
        return Err(format!(
            "`{command}` failed ({}): {}; iproute2 5.8+ has `ip mptcp`, and the kernel needs \
             MPTCP's path manager (CONFIG_MPTCP)",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// `ip -j mptcp limits show`: a JSON object in newer iproute2, while 6.1 and
/// older print their text form (`add_addr_accepted 0 subflows 2`) even with -j.
pub fn parse_limits(text: &str) -> Result<Limits, String> {
    let pairs: BTreeMap<String, u32> = match serde_json::from_str::<serde_json::Value>(text) {
        Ok(serde_json::Value::Object(map)) => map
            .into_iter()
            .filter_map(|(k, v)| Some((k, u32::try_from(v.as_u64()?).ok()?)))
            .collect(),
        _ => {
            let words: Vec<&str> = text.split_whitespace().collect();
            words
                .chunks(2)
                .filter_map(|pair| Some((pair.first()?.to_string(), pair.get(1)?.parse().ok()?)))
                .collect()
        }
    };
    match (pairs.get("subflows"), pairs.get("add_addr_accepted")) {
        (Some(&subflows), Some(&add_addr_accepted)) => Ok(Limits {
            subflows,
            add_addr_accepted,
        }),
        _ => Err(format!(
            "`ip -j mptcp limits show` printed {:?}, without `subflows` and `add_addr_accepted`: \
             report this iproute2 version's output",
            text.trim()
        )),
    }
}

/// `ip -j mptcp endpoint show`: a JSON array of objects, one per endpoint,
/// each flag a `true` member.
pub fn parse_endpoints(text: &str) -> Result<Vec<Endpoint>, String> {
    let unreadable = |why: String| {
        format!(
            "`ip -j mptcp endpoint show` printed what this cannot read ({why}): {:?}; report \
             this iproute2 version's output",
            text.trim()
        )
    };
    // No endpoints: iproute2 prints an empty array, or nothing at all.
    if text.trim().is_empty() {
        return Ok(Vec::new());
    }
    let value: serde_json::Value = serde_json::from_str(text).map_err(|e| unreadable(e.to_string()))?;
    let items = value.as_array().ok_or_else(|| unreadable("not an array".into()))?;
    items
        .iter()
        .map(|item| {
            let object = item
                .as_object()
                .ok_or_else(|| unreadable("an item is not an object".into()))?;
            let mut endpoint = Endpoint::default();
            for (key, value) in object {
                match (key.as_str(), value) {
                    ("address", v) => endpoint.address = v.as_str().unwrap_or_default().to_string(),
                    ("id", v) => endpoint.id = v.as_u64().unwrap_or_default() as u32,
                    ("port", v) => endpoint.port = v.as_u64().and_then(|p| u16::try_from(p).ok()),
                    ("dev", v) => endpoint.device = v.as_str().map(str::to_string),
                    ("signal", v) => endpoint.signal = v.as_bool() == Some(true),
                    ("subflow", v) => endpoint.subflow = v.as_bool() == Some(true),
                    ("backup", v) => endpoint.backup = v.as_bool() == Some(true),
                    ("fullmesh", v) => endpoint.fullmesh = v.as_bool() == Some(true),
                    (flag, serde_json::Value::Bool(true)) => endpoint.other_flags.push(flag.to_string()),
                    (flag, serde_json::Value::String(s)) => endpoint.other_flags.push(format!("{flag} {s}")),
                    _ => {}
                }
            }
            match endpoint.address.is_empty() {
                true => Err(unreadable("an endpoint without an address".into())),
                false => Ok(endpoint),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe::mptcp::test_support::{assert_sums, in_new_namespace, ip, mptcp_here, print_figures, transfer};
    use std::net::IpAddr;

    #[test]
    fn three_subflows_over_two_subflow_endpoints_sum_to_the_connection() {
        if !mptcp_here() {
            return;
        }
        let outcome = in_new_namespace(|| {
            ip(&["mptcp", "limits", "set", "subflows", "2", "add_addr_accepted", "0"])?;
            ip(&["mptcp", "endpoint", "add", "127.0.0.2", "dev", "lo", "subflow"])?;
            ip(&["mptcp", "endpoint", "add", "127.0.0.3", "dev", "lo", "subflow"])?;
            Ok::<_, String>((path_manager(), transfer(3)))
        });
        let Some(outcome) = outcome else { return };
        let (pm, t) = outcome.unwrap_or_else(|why| panic!("setting up the namespace's path manager: {why}"));
        eprintln!("path manager: {}", serde_json::to_string(&pm).unwrap());
        assert_eq!(
            pm.limits,
            Some(Limits {
                subflows: 2,
                add_addr_accepted: 0
            })
        );
        let endpoints = pm.endpoints.expect("ip lists the endpoints");
        let addresses: Vec<&str> = endpoints.iter().map(|e| e.address.as_str()).collect();
        assert_eq!(addresses, ["127.0.0.2", "127.0.0.3"]);
        assert!(endpoints
            .iter()
            .all(|e| e.subflow && !e.signal && e.device.as_deref() == Some("lo")));
        assert_eq!(pm.sysctls.get("enabled").map(String::as_str), Some("1"));

        print_figures("namespace with 2 subflow endpoints", &t);
        assert_sums(&t);
        assert_eq!(t.client_end.subflows.len(), 3);
        assert_eq!(t.client_end.extra_subflows, 2);
        assert_eq!(t.client_end.subflows_total, Some(3));
        assert_eq!(t.client_end.local_addr_max, Some(2), "two subflow endpoints");
        let mut locals: Vec<IpAddr> = t.client_end.subflows.iter().map(|s| s.local.ip()).collect();
        locals.sort();
        let expected: Vec<IpAddr> = ["127.0.0.1", "127.0.0.2", "127.0.0.3"]
            .map(|a| a.parse().unwrap())
            .into();
        assert_eq!(locals, expected, "the initial subflow and one from each endpoint");
        for s in &t.client_end.subflows {
            assert_eq!(s.remote, t.server, "every subflow goes to the listener");
        }
        for s in &t.server_end.subflows {
            assert_eq!(s.local, t.server);
            assert!(s.remote.ip().is_loopback(), "{s:?}");
        }
    }
    #[test]
    fn limits_read_from_json_and_from_iproute2_6_1s_text() {
        let expected = Limits {
            subflows: 2,
            add_addr_accepted: 0,
        };
        assert_eq!(parse_limits("add_addr_accepted 0 subflows 2 \n"), Ok(expected));
        assert_eq!(parse_limits(r#"{"add_addr_accepted":0,"subflows":2}"#), Ok(expected));
        let e = parse_limits("Error: unknown\n").unwrap_err();
        assert!(e.contains("without `subflows` and `add_addr_accepted`"), "{e}");
    }

    #[test]
    fn endpoints_read_with_their_flags() {
        // `ip -j mptcp endpoint show` of iproute2 6.1.
        let text = r#"[{"address":"127.0.0.2","id":1,"subflow":true,"dev":"lo"},{"address":"10.1.2.3","id":7,"signal":true,"backup":true},{"address":"::1","id":8,"subflow":true,"fullmesh":true},{"address":"127.0.0.5","port":5555,"id":9,"signal":true,"implicit":true,"rawflags":"40"}]"#;
        let endpoints = parse_endpoints(text).unwrap();
        assert_eq!(endpoints.len(), 4);
        assert_eq!(
            endpoints[0],
            Endpoint {
                address: "127.0.0.2".into(),
                id: 1,
                subflow: true,
                device: Some("lo".into()),
                ..Endpoint::default()
            }
        );
        assert!(endpoints[1].signal && endpoints[1].backup && !endpoints[1].subflow);
        assert!(endpoints[2].fullmesh);
        assert_eq!(
            (endpoints[3].port, endpoints[3].other_flags.clone()),
            (Some(5555), vec!["implicit".into(), "rawflags 40".into()])
        );
        assert_eq!(parse_endpoints("[]\n"), Ok(vec![]));
        assert_eq!(parse_endpoints(""), Ok(vec![]));
        assert!(parse_endpoints("{")
            .unwrap_err()
            .contains("report this iproute2 version's output"));
    }
}
