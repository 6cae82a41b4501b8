//! The plan file (TOML): agents, defaults, per-workload options, the
//! matrix with its include/exclude rules, commands around each case, and
//! the tables of the report. Parsing refuses unknown keys, naming the line
//! and what is allowed; the checks that need more than one key are in
//! [`Plan::check`].

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use serde::Deserialize;

use crate::workload::transport::Proto;
use crate::workload::{self, args::parse};

/// Whether a plan can run `name`: every registered workload can.
pub fn known_workload(name: &str) -> bool {
    workload::find(name).is_ok()
}

/// Whether `workload` drives several agents at once in one test (a
/// fan-out command: `multicast`), so that its cases take the `receivers`
/// axis instead of the `agent` axis.
pub fn fans_out(workload: &str) -> bool {
    workload::find(workload).is_ok_and(|w| !w.measuring_command())
}

/// The fan-out workloads, for messages: "multicast".
pub fn fanout_names() -> String {
    workload::names().filter(|w| fans_out(w)).collect::<Vec<_>>().join(", ")
}

/// The workloads a plan can run, for messages: "tcp, udp, ...".
pub fn workload_names() -> String {
    workload::names().collect::<Vec<_>>().join(", ")
}
/// The values of the `direction` axis.
pub const DIRECTIONS: [&str; 3] = ["forward", "reverse", "bidir"];

/// A plan file, as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Plan {
    /// The plan's name (tag `plan`); default: the file name without `.toml`.
    pub name: Option<String>,
    pub description: Option<String>,
    #[serde(default)]
    pub defaults: Defaults,
    #[serde(default, rename = "agents")]
    pub agents: Vec<Agent>,
    /// Options of each workload, as on its command line.
    #[serde(default)]
    pub workloads: BTreeMap<String, WorkloadOptions>,
    pub matrix: Matrix,
    #[serde(default)]
    pub commands: Vec<Command>,
    #[serde(default)]
    pub report: Report,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Defaults {
    /// `-t`: "10s", "1m".
    pub duration: Option<String>,
    /// `-O`: the warm-up.
    pub omit: Option<String>,
    /// `--repeat N`.
    pub repeat: Option<u32>,
    /// `--pick best|median|mean`.
    pub pick: Option<String>,
    /// `--confidence LEVEL,WIDTH`, e.g. "99,5".
    pub confidence: Option<String>,
    /// `--iterations MAX,MIN`, e.g. "10,3".
    pub iterations: Option<String>,
    /// `--wait`: how long a case waits for a busy agent.
    pub wait: Option<String>,
    /// A pause between cases.
    pub pause: Option<String>,
    /// Options given to every case, as on the command line.
    #[serde(default)]
    pub options: Vec<String>,
    /// The plan may change this host's settings (the mtu, offloads, rings,
    /// coalesce and qdisc axes); needs root.
    #[serde(default)]
    pub allow_host_changes: bool,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Agent {
    /// The name used in the matrix and as tag `agent`.
    pub label: String,
    /// HOST, HOST:PORT or [V6]:PORT.
    pub address: String,
    /// `--psk-file`.
    pub psk_file: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkloadOptions {
    #[serde(default)]
    pub options: Vec<String>,
}

/// The axes; every case is one value of each.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Matrix {
    pub workload: Vec<String>,
    /// Agent labels (default: every agent).
    #[serde(default)]
    pub agent: Vec<String>,
    /// How many agents a fan-out workload's case (`multicast`) drives at
    /// once: N is the first N of the `agent` axis (default: every one).
    /// Other workloads run against one agent and ignore it.
    #[serde(default)]
    pub receivers: Vec<u32>,
    /// What the workloads that take `--transport` (tcp, rr, sweep, files)
    /// run over: tcp, tls, quic, mptcp (default: each workload's own). A
    /// workload without the option (udp) is one case whatever the value.
    #[serde(default)]
    pub transport: Vec<String>,
    /// forward, reverse, bidir (default: forward).
    #[serde(default)]
    pub direction: Vec<String>,
    /// `-P` (default: the workload's own).
    #[serde(default)]
    pub streams: Vec<u32>,
    /// Message size: `-l` for tcp and udp, `-r SIZE,SIZE` for rr; a sweep
    /// covers sizes itself, so the axis does not apply to it.
    #[serde(default)]
    pub message: Vec<String>,
    /// The MTU of both ends' interfaces on the path, set before each case
    /// (needs `allow_host_changes` here and `--allow-host-changes` on the agent).
    #[serde(default)]
    pub mtu: Vec<u32>,
    /// Offloads on both ends, each value "tso=off,gro=on" (names of
    /// [`crate::model::settings::OFFLOADS`]); as `mtu`, needs host changes allowed.
    #[serde(default)]
    pub offloads: Vec<String>,
    /// Ring sizes on both ends: "rx=256,tx=256".
    #[serde(default)]
    pub rings: Vec<String>,
    /// Interrupt coalescing on both ends: "rx-usecs=0,adaptive-rx=off".
    #[serde(default)]
    pub coalesce: Vec<String>,
    /// The root qdisc on both ends: "pfifo_fast", "fq", "noqueue".
    #[serde(default)]
    pub qdisc: Vec<String>,
    /// The lab router's queue on every shaped link, as `lab set --queue`
    /// takes it: "5ms", "200ms", "default". Set before each case and put
    /// back after it; only in a lab (`nicbench lab exec LAB HOST nicbench run PLAN`).
    #[serde(default)]
    pub queue: Vec<String>,
    /// Further axes: a name, and for each value the options it adds:
    /// `[matrix.vary.nodelay] on = ["-N"]  off = []`.
    #[serde(default)]
    pub vary: BTreeMap<String, BTreeMap<String, Vec<String>>>,
    /// Axes that change the lab the plan runs in, as `nicbench lab set`
    /// would: a name, and for each value the `lab set` options it applies:
    /// `[matrix.lab.card] slow = ["--rate", "2=500mbit", "--cpu-limit", "b=25%"]`.
    /// Made before each case and put back after it; only in a lab.
    #[serde(default)]
    pub lab: BTreeMap<String, BTreeMap<String, Vec<String>>>,
    /// Tags on every case's runs.
    #[serde(default)]
    pub tags: BTreeMap<String, String>,
    /// Cells removed: every key given must match.
    #[serde(default)]
    pub exclude: Vec<BTreeMap<String, toml::Value>>,
    /// Cells added: the keys given, the first value of every other axis.
    #[serde(default)]
    pub include: Vec<BTreeMap<String, toml::Value>>,
}

/// A command run around each case.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Command {
    /// before, after, or alongside (started before the case, stopped after it).
    pub when: When,
    /// The program and its arguments (no shell: `["sh", "-c", "..."]` for one).
    pub run: Vec<String>,
    /// A failure (non-zero exit, not found) fails the case.
    #[serde(default)]
    pub essential: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum When {
    Before,
    After,
    Alongside,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Report {
    /// Comparison tables printed at the end.
    #[serde(default)]
    pub tables: Vec<ReportTable>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReportTable {
    pub title: Option<String>,
    /// As `compare --rows`: "workload,tag:direction".
    #[serde(default = "default_rows")]
    pub rows: String,
    /// As `compare --cols`: "tag:mtu".
    #[serde(default)]
    pub cols: String,
    /// As `compare --metric`: one figure or several, as a list
    /// (`["throughput", "cpu"]`) or comma-separated.
    #[serde(default = "default_metric", deserialize_with = "metric_list")]
    pub metric: String,
    /// As `compare --stat`.
    pub stat: Option<String>,
    /// As `compare --baseline`.
    pub baseline: Option<String>,
    /// As `compare --workload`: only this workload's runs (a roundup's TCP
    /// table without the sweeps' rows).
    pub workload: Option<String>,
}

fn default_rows() -> String {
    "case".into()
}

fn default_metric() -> String {
    "throughput".into()
}

/// A table's `metric`: a string (`"throughput,cpu"`) or a list of them,
/// kept as the comma-separated string `compare --metric` takes.
fn metric_list<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum OneOrMany {
        One(String),
        Many(Vec<String>),
    }
    Ok(match OneOrMany::deserialize(d)? {
        OneOrMany::One(s) => s,
        OneOrMany::Many(list) => list.join(","),
    })
}

impl ReportTable {
    /// The figures of the table, in order.
    pub fn metrics(&self) -> impl Iterator<Item = &str> {
        self.metric.split(',').map(str::trim).filter(|m| !m.is_empty())
    }
}

/// A plan that cannot be used, with what to do about it.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    #[error("cannot read the plan {path}: {source}")]
    Read { path: String, source: std::io::Error },
    #[error("{path}: {message}")]
    Invalid { path: String, message: String },
}

impl Plan {
    /// Reads and checks a plan file.
    pub fn load(path: &Path) -> Result<Plan, PlanError> {
        let text = std::fs::read_to_string(path).map_err(|source| PlanError::Read {
            path: path.display().to_string(),
            source,
        })?;
        Plan::parse(&text, path)
    }

    /// Parses plan text; `path` names it in errors and gives the default name.
    pub fn parse(text: &str, path: &Path) -> Result<Plan, PlanError> {
        let invalid = |message: String| PlanError::Invalid {
            path: path.display().to_string(),
            message,
        };
        let mut plan: Plan = toml::from_str(text).map_err(|e| invalid(toml_message(&e, text)))?;
        if plan.name.is_none() {
            plan.name = path.file_stem().map(|s| s.to_string_lossy().into_owned());
        }
        plan.check().map_err(invalid)?;
        plan.check_host_axes(text).map_err(invalid)?;
        Ok(plan)
    }

    pub fn name(&self) -> &str {
        self.name.as_deref().unwrap_or("plan")
    }

    /// The checks that span keys: names, values, references.
    fn check(&self) -> Result<(), String> {
        let name = self.name();
        check_name(name).map_err(|e| format!("name = {name:?}: {e}"))?;
        tag("plan", name).map_err(|e| format!("name: {e}"))?;
        self.check_runner_options()?;
        check_defaults(&self.defaults)?;
        let labels = self.check_agents()?;
        self.check_workload_sections()?;
        check_matrix(&self.matrix, &labels)?;
        self.check_commands()?;
        self.check_report_tables()
    }

    /// The agents' labels (unique, valid as tags) and addresses; at least one
    /// agent. Returns the labels.
    fn check_agents(&self) -> Result<Vec<&str>, String> {
        let mut labels = Vec::new();
        for (i, a) in self.agents.iter().enumerate() {
            tag("agent", &a.label).map_err(|e| format!("[[agents]] #{} label: {e}", i + 1))?;
            if labels.contains(&a.label.as_str()) {
                return Err(format!("[[agents]]: the label '{}' is used twice", a.label));
            }
            if a.address.trim().is_empty() {
                return Err(format!("[[agents]] '{}': address is empty", a.label));
            }
            labels.push(a.label.as_str());
        }
        if self.agents.is_empty() {
            return Err(
                "no [[agents]]: name at least one, e.g.\n  [[agents]]\n  label = \"b\"\n  address = \"10.0.0.2\""
                    .into(),
            );
        }
        Ok(labels)
    }

    /// Every `[workloads.NAME]` names a known workload.
    fn check_workload_sections(&self) -> Result<(), String> {
        for w in self.workloads.keys() {
            if !known_workload(w) {
                return Err(format!(
                    "[workloads.{w}]: unknown workload; expected one of {}",
                    workload_names()
                ));
            }
        }
        Ok(())
    }

    /// Every `[[commands]]` has a command to run.
    fn check_commands(&self) -> Result<(), String> {
        for (i, c) in self.commands.iter().enumerate() {
            if c.run.is_empty() || c.run[0].is_empty() {
                return Err(format!(
                    "[[commands]] #{}: run is empty; e.g. run = [\"ethtool\", \"-S\", \"eth0\"]",
                    i + 1
                ));
            }
        }
        Ok(())
    }

    /// Every `[[report.tables]]`: its statistic, metric and dimensions.
    fn check_report_tables(&self) -> Result<(), String> {
        for (i, t) in self.report.tables.iter().enumerate() {
            if let Some(s) = &t.stat {
                if !["best", "worst", "median", "mean"].contains(&s.as_str()) {
                    return Err(format!(
                        "[[report.tables]] #{} stat = \"{s}\": expected best, worst, median or mean",
                        i + 1
                    ));
                }
            }
            let mut metrics = Vec::new();
            for metric in t.metrics() {
                metrics.push(
                    crate::store::compare::Metric::parse(metric)
                        .map_err(|e| format!("[[report.tables]] #{} metric: {e}", i + 1))?,
                );
            }
            if let Some(wrong) = t
                .title
                .as_deref()
                .and_then(|title| crate::report::roundup::title_contradiction(title, &metrics))
            {
                return Err(format!("[[report.tables]] #{}: {wrong}", i + 1));
            }
            if let Some(w) = &t.workload {
                let names: Vec<&str> = crate::workload::names().collect();
                if !names.contains(&w.as_str()) {
                    return Err(format!(
                        "[[report.tables]] #{} workload = \"{w}\": expected one of {}",
                        i + 1,
                        names.join(", ")
                    ));
                }
            }
            for d in t
                .rows
                .split(',')
                .chain(t.cols.split(','))
                .map(str::trim)
                .filter(|d| !d.is_empty())
            {
                crate::store::compare::Dimension::parse(d).map_err(|e| format!("[[report.tables]] #{}: {e}", i + 1))?;
            }
        }
        Ok(())
    }

    /// The values of the host-setting axes, by axis (only the axes given).
    pub fn host_axes(&self) -> Vec<(&'static str, &[String])> {
        let m = &self.matrix;
        crate::model::settings::HOST_AXES
            .into_iter()
            .zip([&m.offloads, &m.rings, &m.coalesce, &m.qdisc])
            .filter(|(_, values)| !values.is_empty())
            .map(|(axis, values)| (axis, values.as_slice()))
            .collect()
    }

    /// Every value of the host-setting axes parses; an error names the
    /// line of the plan, the key and what is allowed.
    fn check_host_axes(&self, text: &str) -> Result<(), String> {
        for (axis, values) in self.host_axes() {
            let mut seen = Vec::new();
            for v in values {
                let setting = crate::model::HostSetting::parse(axis, v).map_err(|e| {
                    format!(
                        "{}[matrix] {axis} = \"{v}\": {e}",
                        line_of(text, axis, v)
                            .map(|l| format!("line {l}: "))
                            .unwrap_or_default()
                    )
                })?;
                if seen.contains(&setting) {
                    return Err(format!("[matrix] {axis}: \"{v}\" is given twice"));
                }
                seen.push(setting);
                tag(axis, v).map_err(|e| format!("[matrix] {axis} = \"{v}\": {e}"))?;
            }
        }
        Ok(())
    }

    pub fn duration(&self, v: &Option<String>) -> Option<Duration> {
        v.as_deref().and_then(|s| parse::duration(s).ok())
    }
}

/// The longest plan name: it names files and directories (summary, report,
/// restore file) under the plans directory.
pub const MAX_NAME_BYTES: usize = 100;

/// A plan's name is one file-name component under the plans directory:
/// nothing that leaves it, hides, or cannot be a file name.
pub fn check_name(name: &str) -> Result<(), String> {
    let refuse = |why: &str| Err(format!("{why}; a plan name names files in the plans directory"));
    if name.is_empty() {
        return refuse("it is empty");
    }
    if name.len() > MAX_NAME_BYTES {
        return refuse(&format!("it is {} bytes long, more than {MAX_NAME_BYTES}", name.len()));
    }
    if name.contains('/') {
        return refuse("it holds '/', which would put files outside that directory");
    }
    if name.contains("..") {
        return refuse("it holds '..', which could lead outside that directory");
    }
    if name.contains('\0') {
        return refuse("it holds a NUL byte, which no file name can");
    }
    if let Some(c) = name.chars().find(|c| c.is_control()) {
        return refuse(&format!("it holds the control character {c:?}"));
    }
    if name.starts_with('.') {
        return refuse("it starts with '.', which would hide its files");
    }
    Ok(())
}

/// Options the plan runner gives every case itself (or that contradict what
/// it gives), refused in a plan's `options` with why.
const RUNNER_OPTIONS: [(&str, &str); 5] = [
    (
        "--db",
        "the runner passes its own --db so that every case saves where `nicbench run` looks for it",
    ),
    (
        "--no-save",
        "the runner finds measured cases in the database: an unsaved case would be measured again on every resume",
    ),
    ("--json", CASES_PRINT_NOTHING),
    ("--json-stream", CASES_PRINT_NOTHING),
    ("--csv", CASES_PRINT_NOTHING),
];

/// Why a case takes no output format.
const CASES_PRINT_NOTHING: &str = "a case runs in the plan's process and prints nothing (the plan shows its \
     progress and saves its run), so --json, --json-stream and --csv would shape no output: read the runs with \
     `nicbench export --tag plan_run=ID`";

impl Plan {
    /// No `options` list (of `[defaults]`, `[workloads.NAME]` or a
    /// `[matrix.vary]` value) holds an option the runner owns, nor a
    /// `--tag` whose key the runner sets.
    fn check_runner_options(&self) -> Result<(), String> {
        let mut lists: Vec<(String, &[String])> = vec![("[defaults] options".into(), &self.defaults.options)];
        for (w, o) in &self.workloads {
            lists.push((format!("[workloads.{w}] options"), &o.options));
        }
        for (axis, values) in &self.matrix.vary {
            for (value, options) in values {
                lists.push((format!("[matrix.vary.{axis}] {value}"), options));
            }
        }
        let owned_tags: Vec<&str> = RESERVED_TAGS
            .iter()
            .chain(AXES.iter().filter(|a| **a != "workload"))
            .copied()
            .chain(self.matrix.vary.keys().map(String::as_str))
            .chain(self.matrix.tags.keys().map(String::as_str))
            .collect();
        for (section, options) in lists {
            for (i, option) in options.iter().enumerate() {
                let (flag, inline) = match option.split_once('=') {
                    Some((f, v)) if f.starts_with("--") => (f, Some(v)),
                    _ => (option.as_str(), None),
                };
                if let Some((_, why)) = RUNNER_OPTIONS.iter().find(|(o, _)| *o == flag) {
                    return Err(format!("{section}: \"{option}\" is not allowed: {why}"));
                }
                if flag == "--tag" {
                    let value = inline.or(options.get(i + 1).map(String::as_str)).unwrap_or("");
                    let key = value.split('=').next().unwrap_or("");
                    if owned_tags.contains(&key) {
                        return Err(format!(
                            "{section}: \"--tag {value}\" is not allowed: the runner sets the tag '{key}' itself \
                             (tags it sets: {})",
                            owned_tags.join(", ")
                        ));
                    }
                }
            }
        }
        Ok(())
    }
}

/// `[defaults]`: durations, repeat and pick, or confidence and iterations.
fn check_defaults(d: &Defaults) -> Result<(), String> {
    for (key, value) in [("duration", &d.duration), ("wait", &d.wait), ("pause", &d.pause)] {
        if let Some(v) = value {
            parse::duration(v).map_err(|e| format!("[defaults] {key} = \"{v}\": {e}"))?;
        }
    }
    if let Some(v) = &d.duration {
        parse::positive_duration(v).map_err(|e| format!("[defaults] duration = \"{v}\": {e}"))?;
    }
    if let Some(v) = &d.omit {
        parse::duration(v).map_err(|e| format!("[defaults] omit = \"{v}\": {e}"))?;
    }
    if let Some(r) = d.repeat {
        if !(1..=1000).contains(&r) {
            return Err(format!("[defaults] repeat = {r}: expected 1 to 1000"));
        }
    }
    if let Some(p) = &d.pick {
        if !["best", "median", "mean"].contains(&p.as_str()) {
            return Err(format!("[defaults] pick = \"{p}\": expected best, median or mean"));
        }
        if d.repeat.is_none() {
            return Err("[defaults] pick needs repeat (the number of trials to pick from)".into());
        }
    }
    if d.repeat.is_some() && (d.confidence.is_some() || d.iterations.is_some()) {
        return Err("[defaults]: repeat/pick and confidence/iterations are two policies: choose one".into());
    }
    if let Some(c) = &d.confidence {
        parse::confidence(c).map_err(|e| format!("[defaults] confidence = \"{c}\": {e}"))?;
    }
    if let Some(i) = &d.iterations {
        parse::iterations(i).map_err(|e| format!("[defaults] iterations = \"{i}\": {e}"))?;
    }
    Ok(())
}

/// The `receivers` axis: counts from 1 to the agents there are, for a
/// matrix that runs a fan-out workload (else it would change nothing).
fn check_receivers_axis(m: &Matrix, labels: &[&str]) -> Result<(), String> {
    if m.receivers.is_empty() {
        return Ok(());
    }
    let agents = if m.agent.is_empty() {
        labels.len()
    } else {
        m.agent.len()
    };
    for n in &m.receivers {
        if *n == 0 || *n as usize > agents {
            return Err(format!(
                "[matrix] receivers = {n}: expected 1 to {agents} (a case's receivers are the first N of the matrix's agents)"
            ));
        }
    }
    let included = m.include.iter().filter_map(|rule| rule.get("workload"));
    let named = m.workload.iter().cloned().chain(included.flat_map(|v| match v {
        toml::Value::Array(values) => values.iter().filter_map(|v| v.as_str().map(String::from)).collect(),
        v => v.as_str().map(String::from).into_iter().collect::<Vec<_>>(),
    }));
    if !named.into_iter().any(|w| fans_out(&w)) {
        return Err(format!(
            "[matrix] receivers: no workload of the matrix drives several agents at once; the axis is for {}",
            fanout_names()
        ));
    }
    Ok(())
}

/// `[matrix]`: every axis's values, then its own axes (vary), tags and
/// include/exclude rules; `labels` are the agents'.
fn check_matrix(m: &Matrix, labels: &[&str]) -> Result<(), String> {
    if m.workload.is_empty() {
        return Err(format!(
            "[matrix] workload is empty: name at least one of {}",
            workload_names()
        ));
    }
    for w in &m.workload {
        if !known_workload(w) {
            return Err(format!(
                "[matrix] workload \"{w}\": expected one of {}",
                workload_names()
            ));
        }
    }
    for a in &m.agent {
        if !labels.contains(&a.as_str()) {
            return Err(format!(
                "[matrix] agent \"{a}\": no [[agents]] entry has that label (labels: {})",
                labels.join(", ")
            ));
        }
    }
    check_receivers_axis(m, labels)?;
    check_transport_axis(m)?;
    for d in &m.direction {
        if !DIRECTIONS.contains(&d.as_str()) {
            return Err(format!(
                "[matrix] direction \"{d}\": expected one of {}",
                DIRECTIONS.join(", ")
            ));
        }
    }
    for s in &m.streams {
        if !(1..=crate::model::spec::MAX_STREAMS).contains(s) {
            return Err(format!(
                "[matrix] streams = {s}: expected 1 to {}",
                crate::model::spec::MAX_STREAMS
            ));
        }
    }
    for l in &m.message {
        parse::positive_size(l).map_err(|e| format!("[matrix] message \"{l}\": {e}"))?;
    }
    for mtu in &m.mtu {
        if !(68..=65535).contains(mtu) {
            return Err(format!("[matrix] mtu = {mtu}: expected 68 to 65535"));
        }
    }
    check_queue_axis(m)?;
    check_vary(m)?;
    check_lab_axes(m)?;
    check_matrix_tags(m)?;
    check_rules(m)
}

/// `[matrix] queue`: each value a queue length the lab takes, given once.
fn check_queue_axis(m: &Matrix) -> Result<(), String> {
    let mut seen = Vec::new();
    for v in &m.queue {
        let seconds = super::queue::parse(v).map_err(|e| format!("[matrix] queue = \"{v}\": {e}"))?;
        if seen.contains(&seconds) {
            return Err(format!("[matrix] queue: \"{v}\" is given twice"));
        }
        seen.push(seconds);
        tag("queue", v).map_err(|e| format!("[matrix] queue = \"{v}\": {e}"))?;
    }
    Ok(())
}

/// `[matrix] transport`: each value a transport's name, given once; and
/// the axis given once, built in or as a `[matrix.vary.transport]` (whose
/// values may be any options: plans before the built-in axis wrote it so).
fn check_transport_axis(m: &Matrix) -> Result<(), String> {
    for (i, t) in m.transport.iter().enumerate() {
        Proto::by_name(t).map_err(|e| format!("[matrix] transport = \"{t}\": {e}"))?;
        if m.transport[..i].contains(t) {
            return Err(format!("[matrix] transport: \"{t}\" is given twice"));
        }
    }
    if !m.transport.is_empty() && m.vary.contains_key("transport") {
        return Err(
            "[matrix] transport and [matrix.vary.transport] are the same axis: give it once (the built-in axis \
             takes transport names, the vary axis any options)"
                .into(),
        );
    }
    Ok(())
}

/// `[matrix.vary.AXIS]`: a new axis's name and its values' names.
fn check_vary(m: &Matrix) -> Result<(), String> {
    for (axis, values) in &m.vary {
        // A vary axis named transport is the older spelling of the built-in
        // axis (see check_transport_axis).
        if AXES.contains(&axis.as_str()) && axis != "transport" {
            return Err(format!(
                "[matrix.vary.{axis}]: '{axis}' is a built-in axis; use [matrix] {axis} = [...]"
            ));
        }
        tag(axis, "x").map_err(|e| format!("[matrix.vary.{axis}]: {e}"))?;
        if values.is_empty() {
            return Err(format!(
                "[matrix.vary.{axis}]: give at least one value, e.g. on = [\"-N\"]"
            ));
        }
        for v in values.keys() {
            tag(axis, v).map_err(|e| format!("[matrix.vary.{axis}] {v}: {e}"))?;
        }
    }
    Ok(())
}

/// `[matrix.lab.AXIS]`: a new axis's name (no other axis's), its values'
/// names, and each value's `lab set` options.
fn check_lab_axes(m: &Matrix) -> Result<(), String> {
    for (axis, values) in &m.lab {
        if AXES.contains(&axis.as_str()) || m.vary.contains_key(axis) {
            return Err(format!(
                "[matrix.lab.{axis}]: '{axis}' is already an axis of this plan; give the lab axis another name"
            ));
        }
        tag(axis, "x").map_err(|e| format!("[matrix.lab.{axis}]: {e}"))?;
        if values.is_empty() {
            return Err(format!(
                "[matrix.lab.{axis}]: give at least one value, e.g. slow = [\"--rate\", \"2=100mbit\"]"
            ));
        }
        for (v, options) in values {
            tag(axis, v).map_err(|e| format!("[matrix.lab.{axis}] {v}: {e}"))?;
            super::lab_axis::LabChange::parse(options).map_err(|e| format!("[matrix.lab.{axis}] {v}: {e}"))?;
        }
    }
    Ok(())
}

/// `[matrix.tags]`: valid tags, none the plan sets itself.
fn check_matrix_tags(m: &Matrix) -> Result<(), String> {
    for (key, value) in &m.tags {
        tag(key, value).map_err(|e| format!("[matrix.tags] {key}: {e}"))?;
        if RESERVED_TAGS.contains(&key.as_str())
            || AXES.contains(&key.as_str())
            || m.vary.contains_key(key)
            || m.lab.contains_key(key)
        {
            return Err(format!(
                "[matrix.tags] {key}: that tag is set by the plan itself; choose another key"
            ));
        }
    }
    Ok(())
}

/// `[[matrix.exclude]]`, `[[matrix.include]]`: each matches known axes.
fn check_rules(m: &Matrix) -> Result<(), String> {
    for (rules, section) in [(&m.exclude, "exclude"), (&m.include, "include")] {
        for (i, rule) in rules.iter().enumerate() {
            if rule.is_empty() {
                return Err(format!(
                    "[[matrix.{section}]] #{}: empty; give the axes it matches",
                    i + 1
                ));
            }
            for key in rule.keys() {
                if !AXES.contains(&key.as_str()) && !m.vary.contains_key(key) && !m.lab.contains_key(key) {
                    let known: Vec<&str> = AXES
                        .iter()
                        .copied()
                        .chain(m.vary.keys().map(String::as_str))
                        .chain(m.lab.keys().map(String::as_str))
                        .collect();
                    return Err(format!(
                        "[[matrix.{section}]] #{}: unknown axis '{key}'; expected one of {}",
                        i + 1,
                        known.join(", ")
                    ));
                }
            }
        }
    }
    Ok(())
}

/// The built-in axes, in the order they appear in a case's name.
pub const AXES: [&str; 13] = [
    "workload",
    "agent",
    "receivers",
    "transport",
    "direction",
    "streams",
    "message",
    "mtu",
    "offloads",
    "rings",
    "coalesce",
    "qdisc",
    "queue",
];
/// Tags the plan sets on every run.
pub const RESERVED_TAGS: [&str; 4] = ["plan", "plan_run", "case", "plan_seed"];

/// A tag, checked as `--tag KEY=VALUE` would be.
pub fn tag(key: &str, value: &str) -> Result<crate::store::Tag, String> {
    format!("{key}={value}").parse()
}

/// The line of `text` where the value `value` of key `key` is written:
/// the first line quoting it at or after the key's line.
fn line_of(text: &str, key: &str, value: &str) -> Option<usize> {
    let quoted = format!("\"{value}\"");
    let start = text.lines().position(|l| {
        let l = l.trim_start();
        l.strip_prefix(key)
            .is_some_and(|rest| rest.trim_start().starts_with('='))
    })?;
    text.lines()
        .enumerate()
        .skip(start)
        .find(|(_, l)| l.contains(&quoted))
        .map(|(i, _)| i + 1)
}

/// toml's message, with the line's text when the message lacks it.
fn toml_message(e: &toml::de::Error, text: &str) -> String {
    let message = e.message().trim_end().to_string();
    match e.span() {
        Some(span) => {
            let line = text[..span.start.min(text.len())].matches('\n').count() + 1;
            let source = text.lines().nth(line - 1).unwrap_or("").trim();
            // One line: the error chain is printed with its control
            // characters escaped, which showed a newline here as `\n`.
            format!("line {line}: {message} (line {line}: `{source}`)")
        }
        None => message,
    }
}

#[cfg(test)]
mod name_tests {
    use super::*;

    #[test]
    fn a_plan_name_is_one_visible_file_name_of_at_most_100_bytes() {
        for good in ["nightly", "mtu-sweep_2", "é", &"n".repeat(100)] {
            assert!(check_name(good).is_ok(), "{good}");
        }
        for (bad, why) in [
            ("../x", "'/'"),
            ("/tmp/x", "'/'"),
            ("..", "'..'"),
            ("a\0b", "NUL"),
            ("a\u{1b}[31m", "control character"),
            (".x", "starts with '.'"),
            ("", "empty"),
        ] {
            let e = check_name(bad).unwrap_err();
            assert!(e.contains(why), "{bad:?}: {e}");
        }
        assert!(check_name(&"n".repeat(101)).unwrap_err().contains("101 bytes"));
    }

    fn plan(options: &str) -> Result<Plan, PlanError> {
        Plan::parse(
            &format!(
                "[defaults]\noptions = {options}\n[[agents]]\nlabel = \"b\"\naddress = \"h\"\n[matrix]\nworkload = [\"tcp\"]\n"
            ),
            Path::new("p.toml"),
        )
    }

    #[test]
    fn options_the_runner_sets_are_refused_and_others_pass() {
        assert!(plan("[\"-N\", \"--tag\", \"nic=x\"]").is_ok());
        for (options, named) in [
            ("[\"--no-save\"]", "\"--no-save\" is not allowed"),
            ("[\"--json-stream\"]", "\"--json-stream\" is not allowed"),
            ("[\"--csv\"]", "\"--csv\" is not allowed"),
            ("[\"--tag=case=x\"]", "\"--tag case=x\" is not allowed"),
            ("[\"--tag\", \"streams=2\"]", "the tag 'streams'"),
        ] {
            let e = plan(options).unwrap_err().to_string();
            assert!(
                e.contains("[defaults] options: ") && e.contains(named),
                "{options}: {e}"
            );
        }
    }
}
