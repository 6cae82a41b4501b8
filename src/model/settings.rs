//! Host settings a plan changes between cases besides the MTU: offloads,
//! ring sizes, interrupt coalescing and the root qdisc. A setting names
//! only the fields it changes; the same type carries a plan's wish, the
//! `set_host` protocol message and the originals in a restore file. What is
//! in effect is read from [`NicFacts`], so [`HostSetting::current`] and
//! [`HostSetting::took`] are pure and tested here.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::facts::NicFacts;

/// The host-setting axes of a plan, in the order they appear in a case's name.
pub const HOST_AXES: [&str; 4] = ["offloads", "rings", "coalesce", "qdisc"];

/// Offload names a plan may switch, as `ethtool -K` spells them.
pub const OFFLOADS: [&str; 7] = ["tso", "gso", "gro", "lro", "sg", "rx-checksum", "tx-checksum"];

/// Ring keys: descriptors of the receive and the transmit ring.
pub const RING_KEYS: [&str; 2] = ["rx", "tx"];

/// Coalescing keys, as `ethtool -C` spells them.
pub const COALESCE_KEYS: [&str; 6] = [
    "rx-usecs",
    "tx-usecs",
    "rx-frames",
    "tx-frames",
    "adaptive-rx",
    "adaptive-tx",
];

/// Root qdiscs a plan may put on an interface: those that work without
/// parameters, so that the original can be put back by its kind alone.
pub const QDISCS: [&str; 13] = [
    "bfifo",
    "cake",
    "codel",
    "fq",
    "fq_codel",
    "fq_pie",
    "mq",
    "noqueue",
    "pfifo",
    "pfifo_fast",
    "pie",
    "prio",
    "sfq",
];

/// Most descriptors a ring size may ask for (the driver's own maximum is
/// checked when the setting is applied).
pub const MAX_RING: u32 = 65536;

/// One host setting, naming only the fields it changes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "setting", rename_all = "snake_case")]
pub enum HostSetting {
    /// Offload name (of [`OFFLOADS`]) -> on.
    Offloads { features: BTreeMap<String, bool> },
    /// Descriptors per ring.
    Rings {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        rx: Option<u32>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tx: Option<u32>,
    },
    /// Interrupt coalescing.
    Coalesce {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        rx_usecs: Option<u32>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tx_usecs: Option<u32>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        rx_frames: Option<u32>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tx_frames: Option<u32>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        adaptive_rx: Option<bool>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        adaptive_tx: Option<bool>,
    },
    /// The root qdisc, by kind (of [`QDISCS`]).
    Qdisc { kind: String },
}

fn on_off(key: &str, value: &str) -> Result<bool, String> {
    match value {
        "on" => Ok(true),
        "off" => Ok(false),
        other => Err(format!("{key}={other}: expected on or off")),
    }
}

/// "a=1,b=2" -> [(a, 1), (b, 2)], each key once.
fn pairs<'a>(text: &'a str, allowed: &[&str]) -> Result<Vec<(&'a str, &'a str)>, String> {
    let mut seen: Vec<&str> = Vec::new();
    let mut list = Vec::new();
    for item in text.split(',').map(str::trim) {
        let Some((key, value)) = item.split_once('=') else {
            return Err(format!(
                "'{item}' is not KEY=VALUE; keys: {} (e.g. \"{}=...\")",
                allowed.join(", "),
                allowed[0]
            ));
        };
        let (key, value) = (key.trim(), value.trim());
        if !allowed.contains(&key) {
            return Err(format!("unknown key '{key}': expected one of {}", allowed.join(", ")));
        }
        if seen.contains(&key) {
            return Err(format!("'{key}' is given twice"));
        }
        seen.push(key);
        list.push((key, value));
    }
    Ok(list)
}

fn number(key: &str, value: &str, low: u32, high: u32, what: &str) -> Result<u32, String> {
    value
        .parse::<u32>()
        .ok()
        .filter(|n| (low..=high).contains(n))
        .ok_or_else(|| format!("{key}={value}: expected a whole number of {what} from {low} to {high}"))
}

fn on_off_text(on: bool) -> &'static str {
    if on {
        "on"
    } else {
        "off"
    }
}

impl HostSetting {
    /// Parses a plan's value of one of the [`HOST_AXES`].
    pub fn parse(axis: &str, text: &str) -> Result<HostSetting, String> {
        let text = text.trim();
        match axis {
            "offloads" => {
                let mut features = BTreeMap::new();
                for (key, value) in pairs(text, &OFFLOADS).map_err(|e| format!("offloads: {e}"))? {
                    features.insert(key.to_string(), on_off(key, value)?);
                }
                Ok(HostSetting::Offloads { features })
            }
            "rings" => {
                let (mut rx, mut tx) = (None, None);
                for (key, value) in pairs(text, &RING_KEYS).map_err(|e| format!("rings: {e}"))? {
                    let n = number(key, value, 1, MAX_RING, "descriptors")?;
                    *(if key == "rx" { &mut rx } else { &mut tx }) = Some(n);
                }
                Ok(HostSetting::Rings { rx, tx })
            }
            "coalesce" => {
                let mut c = HostSetting::Coalesce {
                    rx_usecs: None,
                    tx_usecs: None,
                    rx_frames: None,
                    tx_frames: None,
                    adaptive_rx: None,
                    adaptive_tx: None,
                };
                let HostSetting::Coalesce {
                    rx_usecs,
                    tx_usecs,
                    rx_frames,
                    tx_frames,
                    adaptive_rx,
                    adaptive_tx,
                } = &mut c
                else {
                    unreachable!("built above")
                };
                for (key, value) in pairs(text, &COALESCE_KEYS).map_err(|e| format!("coalesce: {e}"))? {
                    match key {
                        "rx-usecs" => *rx_usecs = Some(number(key, value, 0, 1_000_000, "microseconds")?),
                        "tx-usecs" => *tx_usecs = Some(number(key, value, 0, 1_000_000, "microseconds")?),
                        "rx-frames" => *rx_frames = Some(number(key, value, 0, 65536, "frames")?),
                        "tx-frames" => *tx_frames = Some(number(key, value, 0, 65536, "frames")?),
                        "adaptive-rx" => *adaptive_rx = Some(on_off(key, value)?),
                        _ => *adaptive_tx = Some(on_off(key, value)?),
                    }
                }
                Ok(c)
            }
            "qdisc" => {
                if QDISCS.contains(&text) {
                    Ok(HostSetting::Qdisc { kind: text.to_string() })
                } else {
                    Err(format!(
                        "unknown qdisc kind '{text}': expected one of {} (root qdiscs that need no parameters)",
                        QDISCS.join(", ")
                    ))
                }
            }
            other => Err(format!(
                "'{other}' is not a host setting; expected one of {}",
                HOST_AXES.join(", ")
            )),
        }
    }

    /// The axis this setting belongs to.
    pub fn axis(&self) -> &'static str {
        match self {
            HostSetting::Offloads { .. } => "offloads",
            HostSetting::Rings { .. } => "rings",
            HostSetting::Coalesce { .. } => "coalesce",
            HostSetting::Qdisc { .. } => "qdisc",
        }
    }

    /// The setting as a plan writes it ("tso=off,gro=on"): parses back to itself.
    pub fn text(&self) -> String {
        let mut parts: Vec<String> = Vec::new();
        match self {
            HostSetting::Offloads { features } => {
                for name in OFFLOADS {
                    if let Some(&on) = features.get(name) {
                        parts.push(format!("{name}={}", on_off_text(on)));
                    }
                }
            }
            HostSetting::Rings { rx, tx } => {
                for (key, v) in [("rx", rx), ("tx", tx)] {
                    if let Some(v) = v {
                        parts.push(format!("{key}={v}"));
                    }
                }
            }
            HostSetting::Coalesce {
                rx_usecs,
                tx_usecs,
                rx_frames,
                tx_frames,
                adaptive_rx,
                adaptive_tx,
            } => {
                for (key, v) in [
                    ("rx-usecs", rx_usecs),
                    ("tx-usecs", tx_usecs),
                    ("rx-frames", rx_frames),
                    ("tx-frames", tx_frames),
                ] {
                    if let Some(v) = v {
                        parts.push(format!("{key}={v}"));
                    }
                }
                for (key, v) in [("adaptive-rx", adaptive_rx), ("adaptive-tx", adaptive_tx)] {
                    if let Some(v) = v {
                        parts.push(format!("{key}={}", on_off_text(*v)));
                    }
                }
            }
            HostSetting::Qdisc { kind } => parts.push(kind.clone()),
        }
        parts.join(",")
    }

    /// "offloads tso=off" / "qdisc pfifo", for messages.
    pub fn describe(&self) -> String {
        format!("{} {}", self.axis(), self.text())
    }

    /// The values now in effect on `nic` of exactly the fields this setting
    /// names; Err when the facts do not show them (the driver reports none).
    pub fn current(&self, nic: &NicFacts) -> Result<HostSetting, String> {
        let driver = nic.driver.as_deref().unwrap_or("of this interface");
        match self {
            HostSetting::Offloads { features } => {
                let o = nic
                    .offloads
                    .as_ref()
                    .ok_or_else(|| format!("{}: the driver {driver} reports no offload features", nic.name))?;
                let mut now = BTreeMap::new();
                for name in features.keys() {
                    let state = match name.as_str() {
                        "tso" => o.tso,
                        "gso" => o.gso,
                        "gro" => o.gro,
                        "lro" => o.lro,
                        "sg" => o.scatter_gather,
                        "rx-checksum" => o.rx_checksum,
                        "tx-checksum" => o.tx_checksum,
                        other => return Err(format!("unknown offload '{other}'")),
                    };
                    let state = state
                        .ok_or_else(|| format!("{}: the driver {driver} does not have the offload {name}", nic.name))?;
                    now.insert(name.clone(), state);
                }
                Ok(HostSetting::Offloads { features: now })
            }
            HostSetting::Rings { rx, tx } => {
                let r = nic.rings.as_ref().ok_or_else(|| {
                    format!(
                        "{}: the driver {driver} does not support ring sizes (it reports none)",
                        nic.name
                    )
                })?;
                Ok(HostSetting::Rings {
                    rx: rx.map(|_| r.rx_descriptors),
                    tx: tx.map(|_| r.tx_descriptors),
                })
            }
            HostSetting::Coalesce {
                rx_usecs,
                tx_usecs,
                rx_frames,
                tx_frames,
                adaptive_rx,
                adaptive_tx,
            } => {
                let c = nic.coalescing.as_ref().ok_or_else(|| {
                    format!(
                        "{}: the driver {driver} does not support interrupt coalescing (it reports none)",
                        nic.name
                    )
                })?;
                Ok(HostSetting::Coalesce {
                    rx_usecs: rx_usecs.map(|_| c.rx_usecs),
                    tx_usecs: tx_usecs.map(|_| c.tx_usecs),
                    rx_frames: rx_frames.map(|_| c.rx_max_frames),
                    tx_frames: tx_frames.map(|_| c.tx_max_frames),
                    adaptive_rx: adaptive_rx.map(|_| c.adaptive_rx),
                    adaptive_tx: adaptive_tx.map(|_| c.adaptive_tx),
                })
            }
            HostSetting::Qdisc { .. } => {
                let kind = nic
                    .qdisc
                    .clone()
                    .ok_or_else(|| format!("{}: its root qdisc is unknown", nic.name))?;
                Ok(HostSetting::Qdisc { kind })
            }
        }
    }

    /// Ok when `nic` shows this setting in effect; Err says what it reads instead.
    pub fn took(&self, nic: &NicFacts) -> Result<(), String> {
        let now = self.current(nic)?;
        if &now == self {
            Ok(())
        } else {
            Err(format!(
                "{} did not take on {} (reads {})",
                self.describe(),
                nic.name,
                now.text()
            ))
        }
    }

    /// Adds to an original the fields of `other` (an original of a later
    /// change of the same setting) that it does not hold yet: the first
    /// value seen of every field is the one to put back.
    pub fn merge_original(&mut self, other: &HostSetting) {
        fn keep<T: Copy>(mine: &mut Option<T>, theirs: &Option<T>) {
            if mine.is_none() {
                *mine = *theirs;
            }
        }
        match (self, other) {
            (HostSetting::Offloads { features }, HostSetting::Offloads { features: more }) => {
                for (name, &on) in more {
                    features.entry(name.clone()).or_insert(on);
                }
            }
            (HostSetting::Rings { rx, tx }, HostSetting::Rings { rx: rx2, tx: tx2 }) => {
                keep(rx, rx2);
                keep(tx, tx2);
            }
            (
                HostSetting::Coalesce {
                    rx_usecs,
                    tx_usecs,
                    rx_frames,
                    tx_frames,
                    adaptive_rx,
                    adaptive_tx,
                },
                HostSetting::Coalesce {
                    rx_usecs: a,
                    tx_usecs: b,
                    rx_frames: c,
                    tx_frames: d,
                    adaptive_rx: e,
                    adaptive_tx: f,
                },
            ) => {
                keep(rx_usecs, a);
                keep(tx_usecs, b);
                keep(rx_frames, c);
                keep(tx_frames, d);
                keep(adaptive_rx, e);
                keep(adaptive_tx, f);
            }
            // A qdisc's original is its first kind; other pairs never meet.
            _ => {}
        }
    }

    /// Checks a setting that came over the wire (the agent never trusts it).
    pub fn validate(&self) -> Result<(), String> {
        HostSetting::parse(self.axis(), &self.text()).and_then(|again| {
            if &again == self && !self.text().is_empty() {
                Ok(())
            } else {
                Err(format!("'{}' is not a valid {} setting", self.text(), self.axis()))
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Coalescing, Offloads, Rings};

    #[test]
    fn plan_values_parse_and_print_back_the_same() {
        for (axis, text) in [
            ("offloads", "tso=off,gro=on,tx-checksum=off"),
            ("rings", "rx=256,tx=512"),
            ("rings", "tx=64"),
            ("coalesce", "rx-usecs=0,rx-frames=1,adaptive-rx=off"),
            ("qdisc", "pfifo_fast"),
        ] {
            let s = HostSetting::parse(axis, text).unwrap();
            assert_eq!(s.axis(), axis);
            assert_eq!(HostSetting::parse(axis, &s.text()).unwrap(), s, "{text}");
            s.validate().unwrap();
            let json = serde_json::to_string(&s).unwrap();
            assert_eq!(serde_json::from_str::<HostSetting>(&json).unwrap(), s, "{json}");
        }
        // The order of the plan's text does not matter: one canonical form.
        assert_eq!(
            HostSetting::parse("offloads", "gro=on, tso=off").unwrap().text(),
            "tso=off,gro=on"
        );
    }

    #[test]
    fn bad_values_say_what_is_allowed() {
        let e = HostSetting::parse("offloads", "tsoo=off").unwrap_err();
        assert!(
            e.contains("unknown key 'tsoo'") && e.contains("tso, gso, gro, lro"),
            "{e}"
        );
        let e = HostSetting::parse("offloads", "tso=maybe").unwrap_err();
        assert!(e.contains("tso=maybe: expected on or off"), "{e}");
        let e = HostSetting::parse("rings", "rx=-256").unwrap_err();
        assert!(e.contains("rx=-256") && e.contains("from 1 to 65536"), "{e}");
        let e = HostSetting::parse("rings", "rx=0").unwrap_err();
        assert!(e.contains("from 1 to 65536"), "{e}");
        let e = HostSetting::parse("rings", "256").unwrap_err();
        assert!(e.contains("not KEY=VALUE") && e.contains("rx, tx"), "{e}");
        let e = HostSetting::parse("coalesce", "rx-usecs=5,rx-usecs=6").unwrap_err();
        assert!(e.contains("given twice"), "{e}");
        let e = HostSetting::parse("qdisc", "fifo").unwrap_err();
        assert!(
            e.contains("unknown qdisc kind 'fifo'") && e.contains("pfifo_fast"),
            "{e}"
        );
        let e = HostSetting::parse("qdisc", "tbf").unwrap_err();
        assert!(e.contains("need no parameters"), "{e}");
    }

    #[test]
    fn a_setting_from_the_wire_is_checked_like_a_plan_value() {
        let bad = HostSetting::Rings { rx: Some(0), tx: None };
        assert!(bad.validate().is_err());
        let empty = HostSetting::Offloads {
            features: BTreeMap::new(),
        };
        assert!(empty.validate().is_err());
        let unknown = HostSetting::Qdisc { kind: "tbf".into() };
        assert!(unknown.validate().is_err());
        let json = r#"{"setting":"offloads","features":{"rm -rf":true}}"#;
        let s: HostSetting = serde_json::from_str(json).unwrap();
        assert!(s.validate().is_err());
    }

    fn nic() -> NicFacts {
        NicFacts {
            name: "eth1".into(),
            driver: Some("veth".into()),
            offloads: Some(Offloads {
                tso: Some(true),
                gso: Some(true),
                gro: Some(false),
                lro: None,
                ..Offloads::default()
            }),
            qdisc: Some("noqueue".into()),
            ..NicFacts::default()
        }
    }

    #[test]
    fn the_current_values_are_those_of_the_fields_the_setting_names() {
        let want = HostSetting::parse("offloads", "tso=off,gro=off").unwrap();
        assert_eq!(
            want.current(&nic()).unwrap(),
            HostSetting::parse("offloads", "tso=on,gro=off").unwrap()
        );
        let e = want.took(&nic()).unwrap_err();
        assert_eq!(
            e,
            "offloads tso=off,gro=off did not take on eth1 (reads tso=on,gro=off)"
        );
        assert!(HostSetting::parse("offloads", "tso=on").unwrap().took(&nic()).is_ok());
        let e = HostSetting::parse("offloads", "lro=off")
            .unwrap()
            .current(&nic())
            .unwrap_err();
        assert!(e.contains("does not have the offload lro"), "{e}");
        let e = HostSetting::parse("rings", "rx=256")
            .unwrap()
            .current(&nic())
            .unwrap_err();
        assert_eq!(e, "eth1: the driver veth does not support ring sizes (it reports none)");
        let e = HostSetting::parse("coalesce", "rx-usecs=0")
            .unwrap()
            .current(&nic())
            .unwrap_err();
        assert!(e.contains("does not support interrupt coalescing"), "{e}");
        let mut with = nic();
        with.rings = Some(Rings {
            rx_descriptors: 512,
            rx_max_descriptors: 4096,
            tx_descriptors: 1024,
            tx_max_descriptors: 4096,
        });
        with.coalescing = Some(Coalescing {
            rx_usecs: 8,
            adaptive_rx: true,
            ..Coalescing::default()
        });
        assert_eq!(
            HostSetting::parse("rings", "tx=64").unwrap().current(&with).unwrap(),
            HostSetting::Rings {
                rx: None,
                tx: Some(1024)
            }
        );
        assert_eq!(
            HostSetting::parse("coalesce", "rx-usecs=0,adaptive-rx=off")
                .unwrap()
                .current(&with)
                .unwrap()
                .text(),
            "rx-usecs=8,adaptive-rx=on"
        );
        assert_eq!(
            HostSetting::parse("qdisc", "pfifo")
                .unwrap()
                .current(&with)
                .unwrap()
                .text(),
            "noqueue"
        );
    }

    #[test]
    fn an_original_keeps_the_first_value_of_every_field() {
        let mut first = HostSetting::parse("offloads", "tso=on").unwrap();
        first.merge_original(&HostSetting::parse("offloads", "tso=off,gro=on").unwrap());
        assert_eq!(first.text(), "tso=on,gro=on");
        let mut rings = HostSetting::parse("rings", "rx=512").unwrap();
        rings.merge_original(&HostSetting::parse("rings", "rx=256,tx=128").unwrap());
        assert_eq!(rings.text(), "rx=512,tx=128");
        let mut q = HostSetting::parse("qdisc", "noqueue").unwrap();
        q.merge_original(&HostSetting::parse("qdisc", "pfifo").unwrap());
        assert_eq!(q.text(), "noqueue");
    }
}
