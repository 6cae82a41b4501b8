//! The matrix expanded into cases: the cartesian product of the axes,
//! less the excluded cells, plus the included ones. Each case is a command
//! line of a measuring command, so what a plan runs is exactly what a
//! person could type, and the dry run can show it.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use super::file::{fanout_names, fans_out, tag, Agent, Plan};
use crate::model::TestSpec;
use crate::workload::{self, args::parse};

/// One cell of the matrix.
#[derive(Debug, Clone, PartialEq)]
pub struct Case {
    pub workload: String,
    /// The agent the case runs against; of a fan-out workload's case
    /// (`multicast`), the first of its [`Case::receivers`].
    pub agent: Agent,
    /// A fan-out workload's agents, all driven at once (the first N of the
    /// matrix's agents, N the `receivers` axis's value); None for a
    /// measuring command's case.
    pub receivers: Option<Vec<Agent>>,
    /// `--transport` (for a workload that takes it).
    pub transport: Option<String>,
    pub direction: Option<String>,
    pub streams: Option<u32>,
    pub message: Option<String>,
    /// The MTU both ends are set to before the case.
    pub mtu: Option<u32>,
    /// Host settings both ends are given before the case: (axis of
    /// [`crate::model::settings::HOST_AXES`], the value as the plan writes it).
    pub host: Vec<(String, String)>,
    /// The lab router's queue during the case, as the plan writes it
    /// ("200ms"); see [`super::queue`].
    pub queue: Option<String>,
    /// Further axes: (axis, value, the options the value adds).
    pub vary: Vec<(String, String, Vec<String>)>,
    /// Lab axes: (axis, value, the `lab set` options the value applies);
    /// see [`super::lab_axis`].
    pub lab: Vec<(String, String, Vec<String>)>,
}

impl Case {
    /// The case's name, stable across runs of the plan (tag `case`):
    /// "tcp agent=b direction=reverse streams=4 nodelay=on".
    pub fn key(&self) -> String {
        let mut parts = vec![self.workload.clone()];
        parts.extend(self.axis_tags().into_iter().map(|(k, v)| format!("{k}={v}")));
        parts.join(" ")
    }

    /// Every agent the case drives: its receivers, or its one agent. Host
    /// changes and path checks go to each.
    pub fn agents(&self) -> Vec<&Agent> {
        match &self.receivers {
            Some(receivers) => receivers.iter().collect(),
            None => vec![&self.agent],
        }
    }

    /// The axis values of this case as tags (workload is a column already).
    /// A fan-out case is tagged `receivers=N`, not `agent`: each of its
    /// runs is one agent's and carries that agent's label as `agent`.
    pub fn axis_tags(&self) -> Vec<(String, String)> {
        let mut tags = match &self.receivers {
            Some(receivers) => vec![("receivers".to_string(), receivers.len().to_string())],
            None => vec![("agent".to_string(), self.agent.label.clone())],
        };
        if let Some(t) = &self.transport {
            tags.push(("transport".into(), t.clone()));
        }
        if let Some(d) = &self.direction {
            tags.push(("direction".into(), d.clone()));
        }
        if let Some(s) = self.streams {
            tags.push(("streams".into(), s.to_string()));
        }
        if let Some(m) = &self.message {
            tags.push(("message".into(), m.clone()));
        }
        if let Some(m) = self.mtu {
            tags.push(("mtu".into(), m.to_string()));
        }
        tags.extend(self.host.iter().cloned());
        if let Some(q) = &self.queue {
            tags.push(("queue".into(), q.clone()));
        }
        for (axis, value, _) in self.vary.iter().chain(&self.lab) {
            tags.push((axis.clone(), value.clone()));
        }
        tags
    }

    fn value_of(&self, axis: &str) -> Option<String> {
        match axis {
            "workload" => Some(self.workload.clone()),
            "agent" if self.receivers.is_none() => Some(self.agent.label.clone()),
            "receivers" => self.receivers.as_ref().map(|r| r.len().to_string()),
            "transport" if self.transport.is_some() => self.transport.clone(),
            "direction" => self.direction.clone(),
            "streams" => self.streams.map(|s| s.to_string()),
            "message" => self.message.clone(),
            "mtu" => self.mtu.map(|m| m.to_string()),
            "queue" => self.queue.clone(),
            other if crate::model::settings::HOST_AXES.contains(&other) => {
                self.host.iter().find(|(a, _)| a == other).map(|(_, v)| v.clone())
            }
            other => self
                .vary
                .iter()
                .chain(&self.lab)
                .find(|(a, _, _)| a == other)
                .map(|(_, v, _)| v.clone()),
        }
    }

    /// The measuring command line (without the program name), as a person
    /// would type it: workload, agent, the plan's defaults, the workload's
    /// options, the case's axes.
    pub fn command_line(&self, plan: &Plan) -> Vec<String> {
        let d = &plan.defaults;
        let mut argv = vec![self.workload.clone()];
        argv.extend(self.agents().iter().map(|a| a.address.clone()));
        // Where -t is a limit (a sweep's, of the whole sweep), not a test's
        // length, it comes from the workload's own [workloads.NAME] only.
        let duration_is_limit = workload::find(&self.workload).is_ok_and(|w| w.command_line().time_is_limit());
        // A workload that refuses -t (files: its set ends it) is not handed the default.
        let takes_time = workload::find(&self.workload).is_ok_and(|w| w.command_line().takes_time());
        if !duration_is_limit {
            if let (Some(t), true) = (&d.duration, takes_time) {
                argv.extend(["-t".into(), t.clone()]);
            }
            if let Some(o) = &d.omit {
                argv.extend(["-O".into(), o.clone()]);
            }
        }
        // A fan-out case is one test of every receiver at once: the
        // repetition defaults are not its options.
        if self.receivers.is_none() {
            if let Some(r) = d.repeat {
                argv.extend(["--repeat".into(), r.to_string()]);
                if let Some(p) = &d.pick {
                    argv.extend(["--pick".into(), p.clone()]);
                }
            }
            if let Some(c) = &d.confidence {
                argv.extend(["--confidence".into(), c.clone()]);
            }
            if let Some(i) = &d.iterations {
                argv.extend(["--iterations".into(), i.clone()]);
            }
        }
        if let Some(w) = &d.wait {
            argv.extend(["--wait".into(), w.clone()]);
        }
        // One key file for every agent of the case; receivers that name
        // different ones are refused by [`Case::checked`].
        if let Some(psk) = &self.agent.psk_file {
            argv.extend(["--psk-file".into(), psk.clone()]);
        }
        argv.extend(d.options.iter().cloned());
        if let Some(w) = plan.workloads.get(&self.workload) {
            argv.extend(w.options.iter().cloned());
        }
        if let Some(t) = self.transport.as_ref().filter(|_| takes_transport(&self.workload)) {
            argv.extend(["--transport".into(), t.clone()]);
        }
        match self.direction.as_deref() {
            Some("reverse") => argv.push("-R".into()),
            Some("bidir") => argv.push("--bidir".into()),
            _ => {}
        }
        if let Some(s) = self.streams {
            argv.extend(["-P".into(), s.to_string()]);
        }
        let message = self.message.as_ref().and_then(|m| {
            let workload = workload::find(&self.workload).ok()?;
            workload.command_line().message_option(m)
        });
        argv.extend(message.into_iter().flatten());
        for (_, _, options) in &self.vary {
            argv.extend(options.iter().cloned());
        }
        argv
    }

    /// Parses the case's command line with `grammar` (the CLI's, which
    /// the caller hands in: the command line is what users type) and builds
    /// its spec the way the command will: every option error is found
    /// before any traffic is sent.
    pub fn check(&self, plan: &Plan, grammar: &clap::Command) -> Result<TestSpec, String> {
        self.checked(plan, grammar).map(|c| c.spec)
    }

    /// The case's command line parsed with `grammar` (the CLI's), its port
    /// the address's whatever `$NICBENCH_PORT` says: what the command is
    /// built from when the case runs.
    pub fn matches(&self, plan: &Plan, grammar: &clap::Command) -> Result<clap::ArgMatches, String> {
        let argv = self.command_line(plan);
        without_port_default(grammar, &self.workload)
            .try_get_matches_from(std::iter::once("nicbench".to_string()).chain(argv))
            .map_err(|e| workload::args::first_line(&e.to_string()))
    }

    /// [`Case::check`], with the trials the command line asks for and the
    /// case's estimate from them.
    pub fn checked(&self, plan: &Plan, grammar: &clap::Command) -> Result<Checked, String> {
        if let Some(receivers) = &self.receivers {
            if let Some(other) = receivers.iter().find(|r| r.psk_file != self.agent.psk_file) {
                return Err(format!(
                    "agents {} and {} name different psk_file: a {} case gives one key to every receiver; \
                     give them the same key file",
                    self.agent.label, other.label, self.workload
                ));
            }
        }
        let matches = self.matches(plan, grammar)?;
        let Some((name, options)) = matches.subcommand() else {
            return Err(format!("'{}' is not a measuring command", self.workload));
        };
        let spec = workload::args::spec_of_matches(name, options).map_err(|e| e.to_string())?;
        workload::args::check(&spec).map_err(|e| e.to_string())?;
        let trials = trials_asked(options);
        let before = before_trials_seconds(options);
        Ok(Checked {
            estimate: estimate(&spec, trials, before),
            spec,
            trials,
        })
    }
}

/// A case whose command line parsed: its spec, the trials it asks for, and
/// about how long it takes.
#[derive(Debug, Clone)]
pub struct Checked {
    pub spec: TestSpec,
    pub trials: u32,
    pub estimate: Duration,
}

/// The trials a command line asks for, wherever its options came from (the
/// plan's defaults, a workload's options, a `vary` axis): `--repeat N`, or
/// the most `--iterations MAX,MIN` allows (10 with `--confidence` alone).
fn trials_asked(options: &clap::ArgMatches) -> u32 {
    let one = |id: &str| options.try_get_one::<u32>(id).ok().flatten().copied();
    if let Some((max, _)) = options.try_get_one::<(u32, u32)>("iterations").ok().flatten() {
        return *max;
    }
    if options.try_get_one::<(f64, f64)>("confidence").ok().flatten().is_some() {
        return 10;
    }
    one("repeat").unwrap_or(1).max(1)
}

/// Seconds a command runs once before its trials: the raw TCP trial of
/// `files` (`--raw-time`, 3 s unless told).
fn before_trials_seconds(options: &clap::ArgMatches) -> f64 {
    options
        .try_get_one::<Duration>("raw_time")
        .ok()
        .flatten()
        .map_or(0.0, Duration::as_secs_f64)
}

impl Case {
    /// Writes into the case's agent address (and each receiver's, of a
    /// fan-out case) the port its tests reach, so
    /// that the tests, the host changes and their restore all go to the
    /// same agent: the port in the address (`HOST:PORT`), else `-p/--port`
    /// in the case's options, else `$NICBENCH_PORT` (the lab's agent port,
    /// which `lab exec` sets), else 5310. An address's port and a `-p` that
    /// differ are refused, naming the agent and both ports. An address with
    /// a scheme (`iperf3://`) is left as it is.
    pub fn resolve_address(&mut self, plan: &Plan, grammar: &clap::Command) -> Result<(), String> {
        if self.agents().iter().all(|a| a.address.contains("://")) {
            return Ok(());
        }
        let argv = self.command_line(plan);
        let matches = without_port_default(grammar, &self.workload)
            .try_get_matches_from(std::iter::once("nicbench".to_string()).chain(argv))
            .map_err(|e| workload::args::first_line(&e.to_string()))?;
        let in_options = matches
            .subcommand()
            .and_then(|(_, options)| options.try_get_one::<u16>("port").ok().flatten().copied());
        let resolve = |agent: &mut Agent| -> Result<(), String> {
            let address = agent.address.clone();
            if address.contains("://") {
                return Ok(());
            }
            let (host, in_address) = crate::address::split_host_port(&address).map_err(|e| e.to_string())?;
            let port = match (in_address, in_options) {
                (Some(a), Some(o)) if a != o => {
                    return Err(format!(
                        "agent {}: its address \"{address}\" names port {a}, but the options give -p {o}; \
                         give the port once, in the address or in the options",
                        agent.label
                    ))
                }
                (Some(p), _) | (None, Some(p)) => p,
                (None, None) => environment_port()?.unwrap_or(crate::protocol::DEFAULT_PORT),
            };
            agent.address = crate::address::display(&host, port);
            Ok(())
        };
        resolve(&mut self.agent)?;
        for receiver in self.receivers.iter_mut().flatten() {
            resolve(receiver)?;
        }
        Ok(())
    }
}

/// `$NICBENCH_PORT`, the default port of the measuring commands (`lab
/// exec` sets it to the lab's agent port).
fn environment_port() -> Result<Option<u16>, String> {
    match std::env::var("NICBENCH_PORT") {
        Err(_) => Ok(None),
        Ok(v) => match v.parse::<u16>() {
            Ok(p) if p > 0 => Ok(Some(p)),
            _ => Err(format!("$NICBENCH_PORT = \"{v}\" is not a port (1 to 65535)")),
        },
    }
}

/// The CLI's grammar with the workload's `--port` taking no value from
/// `$NICBENCH_PORT`: a case's port is its address's (see
/// [`Case::resolve_address`]), and the case is built from this grammar.
fn without_port_default(grammar: &clap::Command, workload: &str) -> clap::Command {
    let has_port = grammar
        .find_subcommand(workload)
        .is_some_and(|s| s.get_arguments().any(|a| a.get_id() == "port"));
    if has_port {
        grammar
            .clone()
            .mut_subcommand(workload, |s| s.mut_arg("port", |a| a.env(None)))
    } else {
        grammar.clone()
    }
}

/// An estimate of how long one case takes: `trials` of the workload's
/// estimate of its spec, and `before` seconds run once before them.
pub fn estimate(spec: &TestSpec, trials: u32, before: f64) -> Duration {
    let per_trial = workload::find(&spec.workload)
        .map(|w| w.estimated_seconds(spec))
        .unwrap_or(spec.duration_seconds + spec.omit_seconds);
    // Connection set-up, facts, CPU sampling, and the process itself.
    const OVERHEAD_PER_TRIAL: f64 = 0.6;
    const OVERHEAD_PER_CASE: f64 = 0.4;
    let before = if before > 0.0 { before + OVERHEAD_PER_TRIAL } else { 0.0 };
    Duration::from_secs_f64(f64::from(trials) * (per_trial + OVERHEAD_PER_TRIAL) + before + OVERHEAD_PER_CASE)
}

/// Every case of the plan, in the file's order (axes vary fastest at the
/// right: workload, agent, direction, streams, message, then `vary` axes
/// by name).
pub fn expand(plan: &Plan) -> Result<Vec<Case>, String> {
    check_size(plan)?;
    let m = &plan.matrix;
    let agents = matrix_agents(plan);
    if let Some(n) = m.receivers.iter().find(|n| **n as usize > agents.len()) {
        return Err(format!(
            "[matrix] receivers = {n}: the matrix has {} agent(s) ({}); a case's receivers are the first N of them",
            agents.len(),
            agents.iter().map(|a| a.label.as_str()).collect::<Vec<_>>().join(", ")
        ));
    }
    let mut cases = product(plan, &agents);
    // A sweep measures every size itself: the message axis does not apply
    // to it, and its cells that differ only in message are one case.
    for c in cases.iter_mut().filter(|c| !takes_message(&c.workload)) {
        c.message = None;
    }
    // Nor does the transport axis to a workload without --transport (udp).
    for c in cases.iter_mut().filter(|c| !takes_transport(&c.workload)) {
        c.transport = None;
    }
    let mut keys = BTreeSet::new();
    cases.retain(|c| keys.insert(c.key()));
    cases.retain(|c| !m.exclude.iter().any(|rule| matches(c, rule)));
    for (i, rule) in m.include.iter().enumerate() {
        for cell in include_cells(rule) {
            let case = included(plan, &cell, &agents).map_err(|e| format!("[[matrix.include]] #{}: {e}", i + 1))?;
            if !cases.iter().any(|c| c.key() == case.key()) {
                cases.push(case);
            }
        }
    }
    for c in &cases {
        let key = c.key();
        tag("case", &key).map_err(|e| format!("case '{key}': {e}"))?;
    }
    if cases.is_empty() {
        return Err("the matrix has no cases left after [[matrix.exclude]]".into());
    }
    Ok(cases)
}

/// The agents of the matrix's `agent` axis, or every agent of the plan.
fn matrix_agents(plan: &Plan) -> Vec<&Agent> {
    let m = &plan.matrix;
    if m.agent.is_empty() {
        plan.agents.iter().collect()
    } else {
        m.agent
            .iter()
            .map(|label| plan.agents.iter().find(|a| &a.label == label).expect("checked labels"))
            .collect()
    }
}

/// Each value of an axis, or one `None` when the matrix leaves it out.
fn each_or_unset<T: Clone>(values: &[T]) -> Vec<Option<T>> {
    if values.is_empty() {
        vec![None]
    } else {
        values.iter().cloned().map(Some).collect()
    }
}

/// The cartesian product of the axes, in the file's order.
fn product(plan: &Plan, agents: &[&Agent]) -> Vec<Case> {
    let m = &plan.matrix;
    let transports = each_or_unset(&m.transport);
    let directions = each_or_unset(&m.direction);
    let streams = each_or_unset(&m.streams);
    let messages = each_or_unset(&m.message);
    let mtus = each_or_unset(&m.mtu);
    let queues = each_or_unset(&m.queue);
    let mut cases = Vec::new();
    for workload in &m.workload {
        for ((agent, receivers), transport) in targets(plan, workload, agents)
            .into_iter()
            .flat_map(|a| transports.iter().map(move |t| (a.clone(), t)))
        {
            for direction in &directions {
                for s in &streams {
                    for (message, mtu) in messages.iter().flat_map(|l| mtus.iter().map(move |u| (l, u))) {
                        for queue in &queues {
                            let base = Case {
                                workload: workload.clone(),
                                agent: agent.clone(),
                                receivers: receivers.clone(),
                                transport: transport.clone(),
                                direction: direction.clone(),
                                streams: *s,
                                message: message.clone(),
                                mtu: *mtu,
                                host: Vec::new(),
                                queue: queue.clone(),
                                vary: Vec::new(),
                                lab: Vec::new(),
                            };
                            cases.extend(with_host_and_vary_axes(plan, base));
                        }
                    }
                }
            }
        }
    }
    cases
}

/// What `workload`'s cases run against: each agent, one case each; or, for
/// a fan-out workload, the first N agents at once for each value N of the
/// `receivers` axis (every agent when the matrix has none).
fn targets(plan: &Plan, workload: &str, agents: &[&Agent]) -> Vec<(Agent, Option<Vec<Agent>>)> {
    if !fans_out(workload) {
        return agents.iter().map(|a| ((*a).clone(), None)).collect();
    }
    let counts = match plan.matrix.receivers.is_empty() {
        true => vec![agents.len()],
        false => plan.matrix.receivers.iter().map(|n| *n as usize).collect(),
    };
    counts
        .into_iter()
        .map(|n| {
            let receivers: Vec<Agent> = agents[..n.min(agents.len())].iter().map(|a| (*a).clone()).collect();
            (receivers[0].clone(), Some(receivers))
        })
        .collect()
}

/// `base` once per combination of the host axes', the `vary` axes' and the
/// lab axes' values.
fn with_host_and_vary_axes(plan: &Plan, base: Case) -> Vec<Case> {
    let mut partial = vec![base];
    for (axis, values) in plan.host_axes() {
        partial = partial
            .into_iter()
            .flat_map(|c| {
                values.iter().map(move |value| {
                    let mut c = c.clone();
                    c.host.push((axis.to_string(), value.trim().to_string()));
                    c
                })
            })
            .collect();
    }
    partial = with_named_axes(partial, &plan.matrix.vary, |c| &mut c.vary);
    with_named_axes(partial, &plan.matrix.lab, |c| &mut c.lab)
}

/// Named axes (`[matrix.vary]`, `[matrix.lab]`): each case once per value of
/// each axis, the value and its options pushed onto the list `field` picks.
type Named = Vec<(String, String, Vec<String>)>;
fn with_named_axes(
    mut partial: Vec<Case>,
    axes: &BTreeMap<String, BTreeMap<String, Vec<String>>>,
    field: fn(&mut Case) -> &mut Named,
) -> Vec<Case> {
    for (axis, values) in axes {
        partial = partial
            .into_iter()
            .flat_map(|c| {
                values.iter().map(move |(value, options)| {
                    let mut c = c.clone();
                    field(&mut c).push((axis.clone(), value.clone(), options.clone()));
                    c
                })
            })
            .collect();
    }
    partial
}

/// The cells of one `[[matrix.include]]` rule: a list value is one cell
/// per element (the product over the keys).
fn include_cells(rule: &BTreeMap<String, toml::Value>) -> Vec<BTreeMap<String, toml::Value>> {
    let mut cells = vec![BTreeMap::new()];
    for (axis, value) in rule {
        let values = match value {
            toml::Value::Array(values) => values.clone(),
            v => vec![v.clone()],
        };
        cells = cells
            .into_iter()
            .flat_map(|r| {
                values.iter().map(move |v| {
                    let mut r = r.clone();
                    r.insert(axis.clone(), v.clone());
                    r
                })
            })
            .collect();
    }
    cells
}

/// The most cases a plan may have: more would take longer than anyone
/// could wait for, and listing them alone takes minutes and gigabytes.
pub const MAX_CASES: u128 = 100_000;

/// Refuses a matrix of more than [`MAX_CASES`] cells before building any:
/// the product of the axes' lengths (each `[[matrix.include]]` adds the
/// product of its lists), with the axes that made it.
pub fn check_size(plan: &Plan) -> Result<(), String> {
    let m = &plan.matrix;
    let agents = if m.agent.is_empty() {
        plan.agents.len()
    } else {
        m.agent.len()
    };
    let mut axes: Vec<(String, usize)> = vec![
        ("workload".into(), m.workload.len()),
        ("agent".into(), agents),
        ("receivers".into(), m.receivers.len()),
        ("transport".into(), m.transport.len()),
        ("direction".into(), m.direction.len()),
        ("streams".into(), m.streams.len()),
        ("message".into(), m.message.len()),
        ("mtu".into(), m.mtu.len()),
        ("queue".into(), m.queue.len()),
    ];
    axes.extend(plan.host_axes().into_iter().map(|(a, v)| (a.to_string(), v.len())));
    axes.extend(m.vary.iter().chain(&m.lab).map(|(a, v)| (a.clone(), v.len())));
    axes.retain(|(_, n)| *n > 1);
    let product = axes.iter().fold(1u128, |p, (_, n)| p.saturating_mul(*n as u128));
    let included = m.include.iter().fold(0u128, |sum, rule| {
        let cells = rule.values().fold(1u128, |p, v| match v {
            toml::Value::Array(values) => p.saturating_mul(values.len() as u128),
            _ => p,
        });
        sum.saturating_add(cells)
    });
    let total = product.saturating_add(included);
    if total <= MAX_CASES {
        return Ok(());
    }
    let mut made_of: Vec<String> = axes.iter().map(|(a, n)| format!("{a} {n}")).collect();
    if included > 0 {
        made_of.push(format!("+ {included} from [[matrix.include]]"));
    }
    Err(format!(
        "the matrix has {total} cases ({}), more than {MAX_CASES}: split the plan, or drop values from the \
         largest axes",
        made_of.join(" x ").replace(" x +", " +")
    ))
}

/// Whether the message axis applies to the workload (a sweep picks its
/// sizes itself).
fn takes_message(workload: &str) -> bool {
    workload::find(workload).is_ok_and(|w| w.command_line().message_option("1").is_some())
}

/// Whether the transport axis applies to the workload (it takes
/// `--transport`, under that name or as another's alias).
fn takes_transport(workload: &str) -> bool {
    workload::find(workload).is_ok_and(|w| w.command_line().takes_transport())
}

/// A rule value as text (integers for streams, strings elsewhere).
fn text(v: &toml::Value) -> String {
    match v {
        toml::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn matches(case: &Case, rule: &std::collections::BTreeMap<String, toml::Value>) -> bool {
    rule.iter().all(|(axis, value)| {
        let wanted: Vec<String> = match value {
            toml::Value::Array(values) => values.iter().map(text).collect(),
            v => vec![text(v)],
        };
        case.value_of(axis).is_some_and(|have| wanted.contains(&have))
    })
}

fn included(
    plan: &Plan,
    rule: &std::collections::BTreeMap<String, toml::Value>,
    agents: &[&Agent],
) -> Result<Case, String> {
    let m = &plan.matrix;
    let get = |axis: &str| rule.get(axis).map(text);
    let workload = get("workload").unwrap_or_else(|| m.workload[0].clone());
    if !super::file::known_workload(&workload) {
        return Err(format!(
            "workload \"{workload}\": expected one of {}",
            super::file::workload_names()
        ));
    }
    let fanout = fans_out(&workload);
    let receivers = match (fanout, rule.get("receivers")) {
        (false, None) => None,
        (false, Some(_)) => {
            return Err(format!(
                "receivers: {workload} runs against one agent; the receivers axis is for {}",
                fanout_names()
            ))
        }
        (true, _) if rule.contains_key("agent") => {
            return Err(format!(
                "agent: a {workload} case runs against its receivers, the first N agents; give receivers = N"
            ))
        }
        (true, Some(toml::Value::Integer(n))) if *n >= 1 && *n as usize <= agents.len() => Some(*n as usize),
        (true, Some(v)) => {
            return Err(format!(
                "receivers = {v}: expected a number from 1 to {} (the matrix's agents)",
                agents.len()
            ))
        }
        (true, None) => Some(m.receivers.first().map_or(agents.len(), |n| *n as usize)),
    }
    .map(|n| agents[..n].iter().map(|a| (*a).clone()).collect::<Vec<Agent>>());
    let agent = match get("agent") {
        _ if receivers.is_some() => receivers.as_ref().expect("some")[0].clone(),
        Some(label) => plan
            .agents
            .iter()
            .find(|a| a.label == label)
            .ok_or_else(|| format!("agent \"{label}\": no [[agents]] entry has that label"))?
            .clone(),
        None => agents[0].clone(),
    };
    // A rule naming a [matrix.vary.transport] value is that axis's (below).
    let transport = get("transport")
        .filter(|_| !m.vary.contains_key("transport"))
        .or_else(|| m.transport.first().cloned())
        .filter(|_| takes_transport(&workload));
    if let Some(t) = &transport {
        crate::workload::transport::Proto::by_name(t).map_err(|e| format!("transport \"{t}\": {e}"))?;
    }
    let direction = get("direction").or_else(|| m.direction.first().cloned());
    if let Some(d) = &direction {
        if !super::file::DIRECTIONS.contains(&d.as_str()) {
            return Err(format!(
                "direction \"{d}\": expected one of {}",
                super::file::DIRECTIONS.join(", ")
            ));
        }
    }
    let streams = match rule.get("streams") {
        Some(toml::Value::Integer(n)) if *n >= 1 && *n <= crate::model::spec::MAX_STREAMS as i64 => Some(*n as u32),
        Some(v) => {
            return Err(format!(
                "streams = {v}: expected a number from 1 to {}",
                crate::model::spec::MAX_STREAMS
            ))
        }
        None => m.streams.first().copied(),
    };
    let mtu = match rule.get("mtu") {
        Some(toml::Value::Integer(n)) if (68..=65535).contains(n) => Some(*n as u32),
        Some(v) => return Err(format!("mtu = {v}: expected a number from 68 to 65535")),
        None => m.mtu.first().copied(),
    };
    let message = get("message")
        .or_else(|| m.message.first().cloned())
        .filter(|_| takes_message(&workload));
    if let Some(l) = &message {
        parse::positive_size(l).map_err(|e| format!("message \"{l}\": {e}"))?;
    }
    let queue = get("queue").or_else(|| m.queue.first().cloned());
    if let Some(q) = &queue {
        super::queue::parse(q).map_err(|e| format!("queue = \"{q}\": {e}"))?;
    }
    let mut host = Vec::new();
    for (axis, values) in plan.host_axes() {
        let value = get(axis).unwrap_or_else(|| values[0].clone());
        crate::model::HostSetting::parse(axis, &value).map_err(|e| format!("{axis} = \"{value}\": {e}"))?;
        host.push((axis.to_string(), value.trim().to_string()));
    }
    // An include may name a host axis the matrix does not list.
    for axis in crate::model::settings::HOST_AXES {
        if let (Some(value), false) = (get(axis), host.iter().any(|(a, _)| a == axis)) {
            crate::model::HostSetting::parse(axis, &value).map_err(|e| format!("{axis} = \"{value}\": {e}"))?;
            host.push((axis.to_string(), value.trim().to_string()));
        }
    }
    host.sort_by_key(|(a, _)| crate::model::settings::HOST_AXES.iter().position(|h| h == a));
    // A `vary` axis the rule does not name is not applied to the cell (its
    // options may not even exist for the cell's workload); a lab axis it
    // does not name leaves the lab as it is.
    let vary = named_values(&m.vary, "vary", &get)?;
    let lab = named_values(&m.lab, "lab", &get)?;
    Ok(Case {
        workload,
        agent,
        receivers,
        transport,
        direction,
        streams,
        message,
        mtu,
        host,
        queue,
        vary,
        lab,
    })
}

/// The values an include rule (`get`) names of the named axes `axes`
/// (`[matrix.SECTION.AXIS]`), with their options; an axis it does not
/// name is left out.
fn named_values(
    axes: &BTreeMap<String, BTreeMap<String, Vec<String>>>,
    section: &str,
    get: &dyn Fn(&str) -> Option<String>,
) -> Result<Named, String> {
    let mut named = Vec::new();
    for (axis, values) in axes {
        let Some(value) = get(axis) else { continue };
        let options = values.get(&value).ok_or_else(|| {
            format!(
                "{axis} = \"{value}\": not a value of [matrix.{section}.{axis}] (values: {})",
                values.keys().cloned().collect::<Vec<_>>().join(", ")
            )
        })?;
        named.push((axis.clone(), value, options.clone()));
    }
    Ok(named)
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    fn plan(text: &str) -> Plan {
        Plan::parse(text, Path::new("p.toml")).unwrap_or_else(|e| panic!("{e}"))
    }

    const AGENTS: &str = "[[agents]]\nlabel = \"a\"\naddress = \"127.0.0.1:5999\"\n[[agents]]\nlabel = \"b\"\naddress = \"[::1]:5998\"\n";

    #[test]
    fn the_product_of_the_axes_less_the_excluded_plus_the_included() {
        let p = plan(&format!(
            "{AGENTS}[matrix]\nworkload = [\"tcp\", \"udp\"]\nagent = [\"a\"]\ndirection = [\"forward\", \"reverse\"]\n\
             streams = [1, 4]\n[matrix.vary.cc]\ncubic = [\"-C\", \"cubic\"]\nreno = [\"-C\", \"reno\"]\n\
             [[matrix.exclude]]\nworkload = \"udp\"\nstreams = 4\n\
             [[matrix.exclude]]\ncc = \"reno\"\ndirection = [\"reverse\"]\n\
             [[matrix.include]]\nworkload = \"rr\"\nagent = \"b\"\n"
        ));
        let cases = expand(&p).unwrap();
        let keys: Vec<String> = cases.iter().map(Case::key).collect();
        // 2 workloads x 2 directions x 2 stream counts x 2 cc = 16; udp with
        // 4 streams removes 4, reno with reverse removes 3 more (one of them
        // already gone); rr on b is added with every other built-in axis's
        // first value, and without the cc axis it does not name.
        assert_eq!(cases.len(), 16 - 4 - 3 + 1, "{keys:#?}");
        assert!(keys.contains(&"tcp agent=a direction=forward streams=4 cc=reno".to_string()));
        assert!(!keys.iter().any(|k| k.starts_with("udp") && k.contains("streams=4")));
        assert!(!keys.iter().any(|k| k.contains("reverse") && k.contains("cc=reno")));
        assert!(
            keys.contains(&"rr agent=b direction=forward streams=1".to_string()),
            "{keys:#?}"
        );
        let tcp = cases
            .iter()
            .find(|c| c.key() == "tcp agent=a direction=reverse streams=4 cc=cubic")
            .unwrap();
        assert_eq!(
            tcp.command_line(&p),
            ["tcp", "127.0.0.1:5999", "-R", "-P", "4", "-C", "cubic"]
                .map(String::from)
                .to_vec()
        );
        let keys_unique: std::collections::BTreeSet<&String> = keys.iter().collect();
        assert_eq!(keys_unique.len(), keys.len(), "case names are unique");
    }

    #[test]
    fn bad_plans_name_the_line_the_key_and_what_is_allowed() {
        let bad = |text: &str| match Plan::parse(text, Path::new("bad.toml")) {
            Ok(_) => panic!("accepted:\n{text}"),
            Err(e) => e.to_string(),
        };
        let e = bad(&format!("{AGENTS}[matrix]\nworkload = [\"tcp\"]\nstreem = [1]\n"));
        assert!(
            e.contains("bad.toml: line 9") && e.contains("streem") && e.contains("streams"),
            "{e}"
        );
        let e = bad(&format!("{AGENTS}[matrix]\nworkload = [\"tpc\"]\n"));
        assert!(e.contains("\"tpc\"") && e.contains("tcp, udp, rr, sweep, files"), "{e}");
        let e = bad(&format!("{AGENTS}[matrix]\nworkload = [\"tcp\"]\nagent = [\"c\"]\n"));
        assert!(e.contains("agent \"c\"") && e.contains("labels: a, b"), "{e}");
        let e = bad(&format!(
            "{AGENTS}[defaults]\nduration = \"ten\"\n[matrix]\nworkload = [\"tcp\"]\n"
        ));
        assert!(e.contains("duration = \"ten\""), "{e}");
        let e = bad(&format!(
            "{AGENTS}[defaults]\npick = \"best\"\n[matrix]\nworkload = [\"tcp\"]\n"
        ));
        assert!(e.contains("pick needs repeat"), "{e}");
        let e = bad(&format!(
            "{AGENTS}[matrix]\nworkload = [\"tcp\"]\n[[matrix.exclude]]\nmru = 9000\n"
        ));
        assert!(e.contains("unknown axis 'mru'") && e.contains("workload, agent"), "{e}");
        let e = bad(&format!(
            "{AGENTS}[matrix]\nworkload = [\"tcp\"]\nmtu = [1500, 99000]\n"
        ));
        assert!(e.contains("mtu = 99000") && e.contains("68 to 65535"), "{e}");
        let e = bad(&format!("{AGENTS}[matrix]\nworkload = [\"tcp\"]\nstreams = [0]\n"));
        assert!(e.contains("streams = 0") && e.contains("1 to 128"), "{e}");
        let e = bad("[matrix]\nworkload = [\"tcp\"]\n");
        assert!(e.contains("no [[agents]]"), "{e}");
        let e = bad(&format!(
            "{AGENTS}[matrix]\nworkload = [\"tcp\"]\ntags = {{ plan_run = \"x\" }}\n"
        ));
        assert!(e.contains("set by the plan itself"), "{e}");
        let e = bad(&format!(
            "{AGENTS}[matrix]\nworkload = [\"tcp\"]\n[[report.tables]]\nmetric = \"speed\"\n"
        ));
        assert!(e.contains("[[report.tables]] #1 metric"), "{e}");
        let e = bad(&format!(
            "{AGENTS}[matrix]\nworkload = [\"tcp\"]\n[[report.tables]]\nworkload = \"tcpp\"\n"
        ));
        assert!(
            e.contains("[[report.tables]] #1 workload = \"tcpp\": expected one of") && e.contains("sweep"),
            "{e}"
        );
        let e = bad(&format!("{AGENTS}[matrix]\nworkload = \"tcp\"\n"));
        assert!(e.contains("line 8"), "{e}");
        // Issue 66: examples/slow-host.toml titled `agent-cpu`, % of all the
        // host's cores (in a lab, the machine's), "% of one core".
        let e = bad(&format!(
            "{AGENTS}[matrix]\nworkload = [\"tcp\"]\n[[report.tables]]\ntitle = \"Agent CPU, % of one core\"\n\
             metric = \"agent-cpu\"\n"
        ));
        assert!(
            e.contains(
                "[[report.tables]] #1: the title \"Agent CPU, % of one core\" says \"of one core\", but agent-cpu"
            ) && e.contains("is % of all cores")
                && e.contains("use agent-threads-cpu"),
            "{e}"
        );
        // The same words over the threads' figure, or no unit at all, stand.
        for table in [
            "title = \"Agent CPU, % of one core\"\nmetric = \"agent-threads-cpu\"",
            "title = \"Agent CPU\"\nmetric = [\"agent-cpu\", \"agent-threads-cpu\"]",
        ] {
            plan(&format!(
                "{AGENTS}[matrix]\nworkload = [\"tcp\"]\n[[report.tables]]\n{table}\n"
            ));
        }
    }

    #[test]
    fn host_setting_axes_multiply_the_cases_and_are_tags() {
        let p = plan(&format!(
            "{AGENTS}[defaults]\nallow_host_changes = true\n[matrix]\nworkload = [\"tcp\"]\nagent = [\"a\"]\n\
             offloads = [\"tso=off,gro=off\", \"tso=on\"]\nqdisc = [\"pfifo_fast\", \"noqueue\"]\n\
             [[matrix.exclude]]\noffloads = \"tso=on\"\nqdisc = \"noqueue\"\n\
             [[matrix.include]]\nrings = \"rx=256\"\n"
        ));
        let keys: Vec<String> = expand(&p).unwrap().iter().map(Case::key).collect();
        assert_eq!(
            keys,
            [
                "tcp agent=a offloads=tso=off,gro=off qdisc=pfifo_fast",
                "tcp agent=a offloads=tso=off,gro=off qdisc=noqueue",
                "tcp agent=a offloads=tso=on qdisc=pfifo_fast",
                "tcp agent=a offloads=tso=off,gro=off rings=rx=256 qdisc=pfifo_fast",
            ]
        );
        // The settings are not options of the measuring command.
        let c = &expand(&p).unwrap()[0];
        assert_eq!(c.command_line(&p), ["tcp", "127.0.0.1:5999"].map(String::from).to_vec());
        assert!(c.axis_tags().contains(&("qdisc".into(), "pfifo_fast".into())));
    }

    #[test]
    fn the_transport_axis_applies_to_the_workloads_that_take_it() {
        let p = plan(&format!(
            "{AGENTS}[matrix]\nworkload = [\"tcp\", \"udp\", \"rr\"]\nagent = [\"a\"]\n\
             transport = [\"tcp\", \"tls\", \"quic\"]\n\
             [[matrix.exclude]]\nworkload = \"rr\"\ntransport = \"quic\"\n\
             [[matrix.include]]\nworkload = \"sweep\"\ntransport = \"tls\"\n"
        ));
        let cases = expand(&p).unwrap();
        let lines: Vec<String> = cases.iter().map(|c| c.command_line(&p).join(" ")).collect();
        // tcp over each transport; udp takes no --transport, so it is one
        // case; rr (whose --proto is also --transport) less its QUIC cell;
        // the included sweep over TLS.
        assert_eq!(
            lines,
            [
                "tcp 127.0.0.1:5999 --transport tcp",
                "tcp 127.0.0.1:5999 --transport tls",
                "tcp 127.0.0.1:5999 --transport quic",
                "udp 127.0.0.1:5999",
                "rr 127.0.0.1:5999 --transport tcp",
                "rr 127.0.0.1:5999 --transport tls",
                "sweep 127.0.0.1:5999 --transport tls",
            ]
        );
        assert_eq!(cases[2].key(), "tcp agent=a transport=quic");
        assert_eq!(cases[3].key(), "udp agent=a");
        assert!(cases[1].axis_tags().contains(&("transport".into(), "tls".into())));
        // That each line is a command the CLI takes is checked on
        // examples/encrypted.toml (cmd's every_example_plan_is_valid_in_every_cell).
    }

    #[test]
    fn bad_transport_axes_say_what_is_allowed() {
        let bad = |extra: &str| match Plan::parse(
            &format!("{AGENTS}[matrix]\nworkload = [\"tcp\"]\n{extra}"),
            Path::new("bad.toml"),
        ) {
            Ok(_) => panic!("accepted: {extra}"),
            Err(e) => e.to_string(),
        };
        let e = bad("transport = [\"tcp\", \"tlss\"]\n");
        assert!(
            e.contains("[matrix] transport = \"tlss\": unknown transport 'tlss'") && e.contains("tls, quic"),
            "{e}"
        );
        let e = bad("transport = [\"tls\", \"tls\"]\n");
        assert!(e.contains("\"tls\" is given twice"), "{e}");
        let e = bad("transport = [\"tls\"]\n[matrix.vary.transport]\nlinks2 = [\"--links\", \"2\"]\n");
        assert!(e.contains("the same axis: give it once"), "{e}");
        // The older spelling, a vary axis named transport, still works alone.
        let p = plan(&format!(
            "{AGENTS}[matrix]\nworkload = [\"tcp\"]\nagent = [\"a\"]\n[matrix.vary.transport]\n\
             mptcp = [\"--transport\", \"mptcp\"]\n[[matrix.exclude]]\ntransport = \"mptcp\"\n\
             [[matrix.include]]\ntransport = \"mptcp\"\n"
        ));
        let cases = expand(&p).unwrap();
        assert_eq!(cases.len(), 1);
        assert_eq!(cases[0].key(), "tcp agent=a transport=mptcp");
    }

    #[test]
    fn bad_host_settings_name_the_line_the_key_and_what_is_allowed() {
        let bad = |extra: &str| match Plan::parse(
            &format!("{AGENTS}[matrix]\nworkload = [\"tcp\"]\n{extra}"),
            Path::new("bad.toml"),
        ) {
            Ok(_) => panic!("accepted: {extra}"),
            Err(e) => e.to_string(),
        };
        let e = bad("offloads = [\"tso=off\",\n  \"tcp-segmentation=off\"]\n");
        assert!(
            e.contains("bad.toml: line 10: [matrix] offloads = \"tcp-segmentation=off\"")
                && e.contains("unknown key 'tcp-segmentation'")
                && e.contains("tso, gso, gro, lro, sg, rx-checksum, tx-checksum"),
            "{e}"
        );
        let e = bad("rings = [\"rx=-1\"]\n");
        assert!(
            e.contains("line 9: [matrix] rings = \"rx=-1\"") && e.contains("from 1 to 65536"),
            "{e}"
        );
        let e = bad("qdisc = [\"fq\", \"fifo\"]\n");
        assert!(
            e.contains("line 9: [matrix] qdisc = \"fifo\": unknown qdisc kind 'fifo'") && e.contains("pfifo_fast"),
            "{e}"
        );
        let e = bad("coalesce = [\"rx-usecs=fast\"]\n");
        assert!(
            e.contains("rx-usecs=fast: expected a whole number of microseconds"),
            "{e}"
        );
        let e = bad("qdisc = [\"fq\", \"fq\"]\n");
        assert!(e.contains("given twice"), "{e}");
        let e = bad("qdisc = \"fq\"\n");
        assert!(e.contains("line 9"), "{e}");
    }

    #[test]
    fn an_include_with_an_unknown_value_is_refused() {
        let p = plan(&format!(
            "{AGENTS}[matrix]\nworkload = [\"tcp\"]\n[matrix.vary.nodelay]\non = [\"-N\"]\n\
             [[matrix.include]]\nnodelay = \"maybe\"\n"
        ));
        let e = expand(&p).unwrap_err();
        assert!(e.contains("[[matrix.include]] #1") && e.contains("values: on"), "{e}");
    }

    /// A fan-out workload's cases take the receivers axis (the first N
    /// agents at once) instead of the agent axis; the others ignore it.
    #[test]
    fn a_fanout_case_drives_the_first_n_agents_and_is_named_by_their_count() {
        let p = plan(&format!(
            "{AGENTS}[defaults]\nrepeat = 3\n[matrix]\nworkload = [\"multicast\", \"tcp\"]\nreceivers = [1, 2]\n\
             [[matrix.exclude]]\nworkload = \"tcp\"\nagent = \"b\"\n\
             [[matrix.include]]\nworkload = \"multicast\"\nreceivers = 2\nstreams = 1\n"
        ));
        let cases = expand(&p).unwrap();
        let keys: Vec<String> = cases.iter().map(Case::key).collect();
        assert_eq!(
            keys,
            [
                "multicast receivers=1",
                "multicast receivers=2",
                "tcp agent=a",
                "multicast receivers=2 streams=1"
            ]
        );
        let labels = |c: &Case| c.agents().iter().map(|a| a.label.clone()).collect::<Vec<_>>();
        assert_eq!(labels(&cases[0]), ["a"]);
        assert_eq!(labels(&cases[1]), ["a", "b"]);
        assert_eq!(labels(&cases[2]), ["a"]);
        assert_eq!(labels(&cases[3]), ["a", "b"]);
        assert_eq!(cases[1].value_of("agent"), None, "a fan-out case has no one agent");
        assert_eq!(cases[1].value_of("receivers").as_deref(), Some("2"));
        assert_eq!(cases[2].value_of("receivers"), None);
        assert!(cases[1].axis_tags().iter().all(|(k, _)| k != "agent"));
        // Every receiver on the command line; no repetition options.
        assert_eq!(
            cases[1].command_line(&p),
            ["multicast", "127.0.0.1:5999", "[::1]:5998"].map(String::from)
        );
        assert_eq!(
            cases[2].command_line(&p),
            ["tcp", "127.0.0.1:5999", "--repeat", "3"].map(String::from)
        );
        // Without the axis: one case of every agent.
        let p = plan(&format!("{AGENTS}[matrix]\nworkload = [\"multicast\"]\n"));
        let cases = expand(&p).unwrap();
        assert_eq!(
            cases.iter().map(Case::key).collect::<Vec<_>>(),
            ["multicast receivers=2"]
        );
        // More receivers than the matrix's agents.
        let p = plan(&format!(
            "{AGENTS}[matrix]\nworkload = [\"multicast\"]\n[[matrix.include]]\nworkload = \"multicast\"\nreceivers = 3\n"
        ));
        let e = expand(&p).unwrap_err();
        assert!(e.contains("receivers = 3: expected a number from 1 to 2"), "{e}");
    }
}
