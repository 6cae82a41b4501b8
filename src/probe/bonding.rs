//! Bond and team devices: mode, slaves, their speeds and the transmit hash
//! policy, from `/proc/net/bonding/<bond>` (the bonding driver) and sysfs
//! (`/sys/class/net/<bond>/bonding/*`, and `master` links of slaves, which
//! a team device has too). The parser takes text, so it is tested on
//! fixtures; [`bonds`] reads the kernel.

use std::fs;
use std::path::Path;

use crate::model::{BondFacts, BondSlave};

/// Parses one `/proc/net/bonding/<name>` file.
pub fn parse_proc_bonding(name: &str, text: &str) -> BondFacts {
    let mut bond = BondFacts {
        name: name.to_string(),
        ..BondFacts::default()
    };
    let mut slave: Option<BondSlave> = None;
    for line in text.lines() {
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let (key, value) = (key.trim(), value.trim());
        match key {
            "Bonding Mode" if bond.mode.is_empty() => bond.mode = value.to_string(),
            "Transmit Hash Policy" => bond.transmit_hash_policy = Some(value.to_string()),
            "Slave Interface" => {
                bond.slaves.extend(slave.take());
                slave = Some(BondSlave {
                    name: value.to_string(),
                    ..BondSlave::default()
                });
            }
            "MII Status" => {
                if let Some(s) = slave.as_mut() {
                    s.mii_status = Some(value.to_string());
                }
            }
            "Speed" => {
                if let Some(s) = slave.as_mut() {
                    s.speed_bits_per_second = parse_speed(value);
                }
            }
            _ => {}
        }
    }
    bond.slaves.extend(slave);
    bond
}

/// `1000 Mbps` -> 1e9 bit/s; `Unknown` -> None.
fn parse_speed(value: &str) -> Option<u64> {
    let number: u64 = value.split_whitespace().next()?.parse().ok()?;
    Some(number * 1_000_000)
}

/// True when the policy hashes on layer 2 (MAC addresses) alone, or layer
/// 2+3 (MAC and IP): every flow between the same two hosts then takes the
/// same slave, however many streams run.
pub fn hash_puts_host_pair_on_one_slave(policy: &str) -> bool {
    let p = policy.to_ascii_lowercase();
    !(p.contains("layer3+4") || p.contains("encap3+4") || p.contains("vlan+srcmac"))
        && (p.starts_with("layer2") || p.starts_with("encap2+3"))
}

/// True when the mode spreads transmissions with a hash policy (balance-xor, 802.3ad).
pub fn mode_uses_hash(mode: &str) -> bool {
    let m = mode.to_ascii_lowercase();
    m.contains("802.3ad") || m.contains("xor")
}

/// Every bond of this host (`/proc/net/bonding`), and team devices seen
/// as the `master` of an interface in sysfs.
pub fn bonds(host: &str) -> Vec<BondFacts> {
    let mut found = Vec::new();
    if let Ok(dir) = fs::read_dir("/proc/net/bonding") {
        for entry in dir.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if let Ok(text) = fs::read_to_string(entry.path()) {
                let mut bond = parse_proc_bonding(&name, &text);
                bond.host = host.to_string();
                found.push(bond);
            }
        }
    }
    let net = Path::new("/sys/class/net");
    if let Ok(dir) = fs::read_dir(net) {
        for entry in dir.flatten() {
            let Ok(master) = fs::read_link(entry.path().join("master")) else {
                continue;
            };
            let Some(master) = master.file_name().map(|m| m.to_string_lossy().into_owned()) else {
                continue;
            };
            if found.iter().any(|b: &BondFacts| b.name == master) {
                continue;
            }
            let kind = fs::read_to_string(net.join(&master).join("uevent")).unwrap_or_default();
            if !kind.lines().any(|l| l == "DEVTYPE=team") {
                continue;
            }
            let slave = entry.file_name().to_string_lossy().into_owned();
            let speed = fs::read_to_string(entry.path().join("speed"))
                .ok()
                .and_then(|s| s.trim().parse::<i64>().ok())
                .filter(|s| *s > 0)
                .map(|s| s as u64 * 1_000_000);
            match found.iter_mut().find(|b| b.name == master) {
                Some(b) => b.slaves.push(BondSlave {
                    name: slave,
                    mii_status: None,
                    speed_bits_per_second: speed,
                }),
                None => found.push(BondFacts {
                    host: host.to_string(),
                    name: master,
                    mode: "team".into(),
                    transmit_hash_policy: None,
                    slaves: vec![BondSlave {
                        name: slave,
                        mii_status: None,
                        speed_bits_per_second: speed,
                    }],
                }),
            }
        }
    }
    found.sort_by(|a, b| a.name.cmp(&b.name));
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    const LACP: &str = "Ethernet Channel Bonding Driver: v5.15.0

Bonding Mode: IEEE 802.3ad Dynamic link aggregation
Transmit Hash Policy: layer2 (0)
MII Status: up
MII Polling Interval (ms): 100
Up Delay (ms): 0
Down Delay (ms): 0

802.3ad info
LACP rate: slow
Aggregator selection policy (ad_select): stable

Slave Interface: enp1s0f0
MII Status: up
Speed: 10000 Mbps
Duplex: full
Link Failure Count: 0
Permanent HW addr: 3c:fd:fe:00:00:01
Slave queue ID: 0
Aggregator ID: 1

Slave Interface: enp1s0f1
MII Status: down
Speed: Unknown
Duplex: Unknown
Link Failure Count: 1
Permanent HW addr: 3c:fd:fe:00:00:02
Slave queue ID: 0
Aggregator ID: 2
";

    const ROUND_ROBIN: &str = "Ethernet Channel Bonding Driver: v3.7.1 (April 27, 2011)

Bonding Mode: load balancing (round-robin)
MII Status: up
MII Polling Interval (ms): 0

Slave Interface: eth1
MII Status: up
Speed: 1000 Mbps

Slave Interface: eth2
MII Status: up
Speed: 1000 Mbps
";

    #[test]
    fn an_lacp_bond_reads_with_its_slaves_and_hash_policy() {
        let bond = parse_proc_bonding("bond0", LACP);
        assert_eq!(bond.mode, "IEEE 802.3ad Dynamic link aggregation");
        assert_eq!(bond.transmit_hash_policy.as_deref(), Some("layer2 (0)"));
        assert_eq!(bond.slaves.len(), 2);
        assert_eq!(bond.slaves[0].name, "enp1s0f0");
        assert_eq!(bond.slaves[0].speed_bits_per_second, Some(10_000_000_000));
        assert_eq!(bond.slaves[1].mii_status.as_deref(), Some("down"));
        assert_eq!(bond.slaves[1].speed_bits_per_second, None);
        assert!(mode_uses_hash(&bond.mode));
        assert!(hash_puts_host_pair_on_one_slave(
            bond.transmit_hash_policy.as_deref().unwrap()
        ));
    }

    #[test]
    fn round_robin_has_no_hash_policy() {
        let bond = parse_proc_bonding("bond1", ROUND_ROBIN);
        assert_eq!(bond.mode, "load balancing (round-robin)");
        assert_eq!(bond.transmit_hash_policy, None);
        assert_eq!(
            bond.slaves.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(),
            ["eth1", "eth2"]
        );
        assert!(!mode_uses_hash(&bond.mode));
    }

    #[test]
    fn only_layer2_style_policies_pin_a_host_pair() {
        assert!(hash_puts_host_pair_on_one_slave("layer2 (0)"));
        assert!(hash_puts_host_pair_on_one_slave("layer2+3 (2)"));
        assert!(hash_puts_host_pair_on_one_slave("encap2+3 (3)"));
        assert!(!hash_puts_host_pair_on_one_slave("layer3+4 (1)"));
        assert!(!hash_puts_host_pair_on_one_slave("encap3+4 (4)"));
    }
}
