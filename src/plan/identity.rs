//! What a plan run measures, as a canonical description (its identity)
//! and a hash of it (its fingerprint): the agents' addresses and ports,
//! the matrix, the options and the defaults that shape a measurement.
//! Order does not count where it changes nothing measured (the values of
//! an axis, the keys of a table); it counts in option lists, where a later
//! option can override an earlier one. What does not change a measurement
//! is left out: the name, the description, the key files, `wait`, `pause`,
//! `allow_host_changes`, the commands and the report tables.
//!
//! `nicbench run` resumes only a plan run whose fingerprint is the plan's,
//! and names the differences otherwise ([`differences`]).

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::{Case, Plan};
use crate::workload::args::parse;

/// A plan's identity. Stored as JSON with each plan run (a field added
/// later must default, so that older records still read).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Identity {
    /// Agent label -> the addresses (`host:port`) its cases reach.
    pub agents: BTreeMap<String, BTreeSet<String>>,
    /// Axis -> its values: the built-in axes the matrix gives (agent: the
    /// labels it runs), then each `[matrix.vary]` axis.
    pub axes: BTreeMap<String, BTreeSet<String>>,
    /// `AXIS VALUE` of `[matrix.vary]` -> the options that value adds.
    pub vary_options: BTreeMap<String, Vec<String>>,
    /// `AXIS VALUE` of `[matrix.lab]` -> the `lab set` options that value
    /// applies (absent from plans without lab axes, whose fingerprints so
    /// stay what they were).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub lab_options: BTreeMap<String, Vec<String>>,
    /// `exclude`, `include` -> each rule as `axis=value|value ...`.
    pub rules: BTreeMap<String, BTreeSet<String>>,
    /// `[matrix.tags]`.
    pub tags: BTreeMap<String, String>,
    /// `[defaults] options`, `[workloads.NAME] options` -> the list.
    pub options: BTreeMap<String, Vec<String>>,
    /// The `[defaults]` that shape a measurement (durations in seconds).
    pub defaults: BTreeMap<String, String>,
}

impl Identity {
    /// The identity of `plan` whose cases are `cases`, each with the agent
    /// address in effect (host and the port the case reaches).
    pub fn of(plan: &Plan, cases: &[Case]) -> Identity {
        let m = &plan.matrix;
        let mut agents: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for agent in cases.iter().flat_map(Case::agents) {
            agents
                .entry(agent.label.clone())
                .or_default()
                .insert(agent.address.clone());
        }
        let set = |values: Vec<String>| values.into_iter().collect::<BTreeSet<String>>();
        let labels = if m.agent.is_empty() {
            plan.agents.iter().map(|a| a.label.clone()).collect()
        } else {
            m.agent.clone()
        };
        let mut axes = BTreeMap::new();
        for (axis, values) in [
            ("workload", m.workload.clone()),
            ("agent", labels),
            ("receivers", m.receivers.iter().map(u32::to_string).collect()),
            ("transport", m.transport.clone()),
            ("direction", m.direction.clone()),
            ("streams", m.streams.iter().map(u32::to_string).collect()),
            ("message", m.message.clone()),
            ("mtu", m.mtu.iter().map(u32::to_string).collect()),
            ("queue", m.queue.iter().map(|q| q.trim().to_string()).collect()),
        ] {
            if !values.is_empty() {
                axes.insert(axis.to_string(), set(values));
            }
        }
        for (axis, values) in plan.host_axes() {
            axes.insert(
                axis.to_string(),
                set(values.iter().map(|v| v.trim().to_string()).collect()),
            );
        }
        let mut vary_options = BTreeMap::new();
        for (axis, values) in &m.vary {
            axes.insert(axis.clone(), set(values.keys().cloned().collect()));
            for (value, options) in values {
                vary_options.insert(format!("{axis} {value}"), options.clone());
            }
        }
        let mut lab_options = BTreeMap::new();
        for (axis, values) in &m.lab {
            axes.insert(axis.clone(), set(values.keys().cloned().collect()));
            for (value, options) in values {
                lab_options.insert(format!("{axis} {value}"), options.clone());
            }
        }
        let mut rules = BTreeMap::new();
        for (name, list) in [("exclude", &m.exclude), ("include", &m.include)] {
            if !list.is_empty() {
                rules.insert(name.to_string(), list.iter().map(rule_text).collect());
            }
        }
        let mut options = BTreeMap::new();
        if !plan.defaults.options.is_empty() {
            options.insert("[defaults] options".to_string(), plan.defaults.options.clone());
        }
        for (w, o) in plan.workloads.iter().filter(|(_, o)| !o.options.is_empty()) {
            options.insert(format!("[workloads.{w}] options"), o.options.clone());
        }
        Identity {
            agents,
            axes,
            vary_options,
            lab_options,
            rules,
            tags: m.tags.clone(),
            options,
            defaults: defaults(plan),
        }
    }

    /// The identity as stored: JSON, keys in order.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("an identity is plain data")
    }

    pub fn from_json(text: &str) -> Result<Identity, String> {
        serde_json::from_str(text).map_err(|e| format!("not a plan identity of this version: {e}"))
    }

    /// A hash of the canonical JSON: 16 hex digits.
    pub fn fingerprint(&self) -> String {
        let digest = Sha256::digest(self.to_json().as_bytes());
        digest[..8].iter().map(|b| format!("{b:02x}")).collect()
    }
}

/// `[defaults]` keys that change what a case measures, canonical.
fn defaults(plan: &Plan) -> BTreeMap<String, String> {
    let d = &plan.defaults;
    let seconds = |v: &Option<String>| {
        v.as_deref().map(|s| match parse::duration(s) {
            Ok(d) => format!("{} s", d.as_secs_f64()),
            Err(_) => s.to_string(),
        })
    };
    [
        ("duration", seconds(&d.duration)),
        ("omit", seconds(&d.omit)),
        ("repeat", d.repeat.map(|r| r.to_string())),
        ("pick", d.pick.clone()),
        ("confidence", d.confidence.clone()),
        ("iterations", d.iterations.clone()),
    ]
    .into_iter()
    .filter_map(|(k, v)| Some((k.to_string(), v?)))
    .collect()
}

/// An include/exclude rule as text, order-insensitive:
/// `direction=bidir|reverse workload=udp`.
fn rule_text(rule: &BTreeMap<String, toml::Value>) -> String {
    let value = |v: &toml::Value| match v {
        toml::Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    rule.iter()
        .map(|(axis, v)| {
            let mut values: Vec<String> = match v {
                toml::Value::Array(list) => list.iter().map(value).collect(),
                v => vec![value(v)],
            };
            values.sort();
            values.dedup();
            format!("{axis}={}", values.join("|"))
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// What changed from `old` to `new`, one phrase each: "the matrix
/// changed: mtu axis added", "agent b's address changed: 10.0.0.2:5310 ->
/// 10.0.0.3:5310". Empty when they are equal.
pub fn differences(old: &Identity, new: &Identity) -> Vec<String> {
    let mut out = Vec::new();
    for label in keys(&old.agents, &new.agents) {
        match (old.agents.get(label), new.agents.get(label)) {
            (Some(a), Some(b)) if a != b => {
                out.push(format!("agent {label}'s address changed: {} -> {}", list(a), list(b)))
            }
            (None, Some(b)) => out.push(format!("agent {label} ({}) added", list(b))),
            (Some(a), None) => out.push(format!("agent {label} ({}) removed", list(a))),
            _ => {}
        }
    }
    for axis in keys(&old.axes, &new.axes) {
        match (old.axes.get(axis), new.axes.get(axis)) {
            (Some(a), Some(b)) if a != b => {
                out.push(format!("the matrix changed: {axis} values {} -> {}", list(a), list(b)))
            }
            (None, Some(_)) => out.push(format!("the matrix changed: {axis} axis added")),
            (Some(_), None) => out.push(format!("the matrix changed: {axis} axis removed")),
            _ => {}
        }
    }
    for (section, old, new) in [
        ("vary", &old.vary_options, &new.vary_options),
        ("lab", &old.lab_options, &new.lab_options),
    ] {
        for key in keys(old, new) {
            if let (Some(a), Some(b)) = (old.get(key), new.get(key)) {
                if a != b {
                    let (axis, value) = key.split_once(' ').unwrap_or((key, ""));
                    out.push(format!(
                        "[matrix.{section}.{axis}] {value} changed: {} -> {}",
                        options(a),
                        options(b)
                    ));
                }
            }
        }
    }
    for name in keys(&old.rules, &new.rules) {
        let (a, b) = (old.rules.get(name), new.rules.get(name));
        if a != b {
            out.push(format!(
                "[[matrix.{name}]] changed: {} -> {}",
                a.map_or("none".into(), list),
                b.map_or("none".into(), list)
            ));
        }
    }
    if old.tags != new.tags {
        let tags = |t: &BTreeMap<String, String>| {
            if t.is_empty() {
                "none".to_string()
            } else {
                t.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(", ")
            }
        };
        out.push(format!(
            "[matrix] tags changed: {} -> {}",
            tags(&old.tags),
            tags(&new.tags)
        ));
    }
    for key in keys(&old.options, &new.options) {
        let (a, b) = (old.options.get(key), new.options.get(key));
        if a != b {
            let show = |o: Option<&Vec<String>>| o.map_or("none".to_string(), |o| options(o));
            out.push(format!("{key} changed: {} -> {}", show(a), show(b)));
        }
    }
    for key in keys(&old.defaults, &new.defaults) {
        let (a, b) = (old.defaults.get(key), new.defaults.get(key));
        if a != b {
            let show = |v: Option<&String>| v.cloned().unwrap_or_else(|| "unset".into());
            out.push(format!("[defaults] {key} changed: {} -> {}", show(a), show(b)));
        }
    }
    out
}

fn keys<'a, V>(a: &'a BTreeMap<String, V>, b: &'a BTreeMap<String, V>) -> BTreeSet<&'a String> {
    a.keys().chain(b.keys()).collect()
}

fn list(values: &BTreeSet<String>) -> String {
    values.iter().cloned().collect::<Vec<_>>().join(", ")
}

fn options(o: &[String]) -> String {
    if o.is_empty() {
        "none".into()
    } else {
        crate::shell::join(o.iter().map(String::as_str))
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    const AGENTS: &str = "[[agents]]\nlabel = \"a\"\naddress = \"10.0.0.1\"\n\
                          [[agents]]\nlabel = \"b\"\naddress = \"10.0.0.2\"\n";

    fn identity(text: &str) -> Identity {
        let plan = Plan::parse(text, Path::new("p.toml")).unwrap_or_else(|e| panic!("{e}"));
        let cases = super::super::expand(&plan).unwrap();
        Identity::of(&plan, &cases)
    }

    #[test]
    fn the_order_of_axis_values_agents_and_tables_does_not_change_the_fingerprint() {
        let one = identity(&format!(
            "{AGENTS}[defaults]\nduration = \"5s\"\n[matrix]\nworkload = [\"tcp\", \"udp\"]\nstreams = [1, 4]\n\
             tags = {{ nic = \"x\", rack = \"2\" }}\n[matrix.vary.cc]\ncubic = [\"-C\", \"cubic\"]\nbbr = [\"-C\", \"bbr\"]\n"
        ));
        let two = identity(
            "[[agents]]\nlabel = \"b\"\naddress = \"10.0.0.2\"\n[[agents]]\nlabel = \"a\"\naddress = \"10.0.0.1\"\n\
             [defaults]\nduration = \"5000ms\"\n[matrix]\nworkload = [\"udp\", \"tcp\"]\nstreams = [4, 1]\n\
             tags = { rack = \"2\", nic = \"x\" }\n[matrix.vary.cc]\nbbr = [\"-C\", \"bbr\"]\ncubic = [\"-C\", \"cubic\"]\n"
        );
        assert_eq!(one, two);
        assert_eq!(one.fingerprint(), two.fingerprint());
        assert_eq!(one.fingerprint().len(), 16);
        assert_eq!(Identity::from_json(&one.to_json()).unwrap(), one);
    }

    #[test]
    fn a_changed_plan_names_each_difference() {
        let old = identity(&format!(
            "{AGENTS}[defaults]\nduration = \"5s\"\noptions = [\"-w\", \"4M\"]\n[matrix]\nworkload = [\"tcp\"]\n"
        ));
        let new = identity(&format!(
            "{}[defaults]\nduration = \"10s\"\noptions = [\"-w\", \"8M\"]\n[matrix]\nworkload = [\"tcp\"]\nmtu = [1500, 9000]\n",
            AGENTS.replace("10.0.0.2", "10.0.0.3")
        ));
        assert_ne!(old.fingerprint(), new.fingerprint());
        assert_eq!(
            differences(&old, &new),
            [
                "agent b's address changed: 10.0.0.2 -> 10.0.0.3",
                "the matrix changed: mtu axis added",
                "[defaults] options changed: -w 4M -> -w 8M",
                "[defaults] duration changed: 5 s -> 10 s",
            ]
        );
        assert!(differences(&new, &new).is_empty());
    }

    #[test]
    fn what_does_not_change_a_measurement_does_not_change_the_fingerprint() {
        let one = identity(&format!("{AGENTS}[matrix]\nworkload = [\"tcp\"]\n"));
        let two = identity(&format!(
            "name = \"other\"\ndescription = \"x\"\n{}[defaults]\nwait = \"1m\"\npause = \"2s\"\n\
             [matrix]\nworkload = [\"tcp\"]\n[[report.tables]]\nrows = \"workload\"\n",
            AGENTS.replace("address = \"10.0.0.1\"", "address = \"10.0.0.1\"\npsk_file = \"/k\"")
        ));
        assert_eq!(one.fingerprint(), two.fingerprint());
    }
}
