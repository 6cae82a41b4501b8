//! Hosts lists for `nicbench mesh --hosts-file`: a plain list, the JSON of
//! `kubectl get nodes -o json`, or an Ansible INI inventory, told apart by
//! their content; and `dns:NAME[:PORT]`, every A/AAAA record of a name (a
//! Kubernetes headless Service). Existing fleets need no new list.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};

/// One host of the mesh.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MeshHost {
    /// The label in the matrix and in metrics (`src`, `dst`).
    pub name: String,
    /// Host name or IP address to reach the agent at.
    pub address: String,
    /// The agent's port, when the list names one.
    pub port: Option<u16>,
}

/// A hosts file or a `dns:` spec that cannot be used, and why.
#[derive(Debug, thiserror::Error)]
pub enum HostsError {
    #[error("cannot read the hosts file {path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{path}, line {line}: {message}")]
    Syntax {
        path: PathBuf,
        line: usize,
        message: String,
    },
    #[error("{path}: '{name}' is listed twice, on line {first} and line {second}; give each host once")]
    Duplicate {
        path: PathBuf,
        name: String,
        first: usize,
        second: usize,
    },
    #[error("{path}: {message}")]
    Invalid { path: PathBuf, message: String },
    #[error("{path}: lists no hosts; {allowed}")]
    Empty { path: PathBuf, allowed: &'static str },
    #[error("dns:{name}: {message}")]
    Dns { name: String, message: String },
}

const PLAIN_ALLOWED: &str =
    "a plain list has one 'HOST[:PORT] [NAME]' per line ([IPv6]:PORT with a port), # starts a comment";
const FORMATS: &str = "a hosts file is a plain list (HOST[:PORT] [NAME] per line), the JSON of \
                       'kubectl get nodes -o json', or an Ansible INI inventory";

/// Reads a hosts file in any of the three formats. `group` selects an
/// Ansible group (with its child groups); the other formats refuse it.
pub fn parse_hosts_file(path: &Path, group: Option<&str>) -> Result<Vec<MeshHost>, HostsError> {
    let text = std::fs::read_to_string(path).map_err(|source| HostsError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    parse_hosts(path, &text, group)
}

/// [`parse_hosts_file`] on text already read (`path` names it in errors).
pub fn parse_hosts(path: &Path, text: &str, group: Option<&str>) -> Result<Vec<MeshHost>, HostsError> {
    let format = detect(text);
    if group.is_some() && format != Format::Ansible {
        return Err(HostsError::Invalid {
            path: path.to_path_buf(),
            message: "--hosts-group selects a group of an Ansible inventory, and this file is not one".into(),
        });
    }
    let hosts = match format {
        Format::Kubectl => kubectl(path, text)?,
        Format::Ansible => ansible(path, text, group)?,
        Format::Plain => plain(path, text)?,
    };
    if hosts.is_empty() {
        return Err(HostsError::Empty {
            path: path.to_path_buf(),
            allowed: FORMATS,
        });
    }
    Ok(hosts)
}

#[derive(Debug, PartialEq, Eq)]
enum Format {
    Plain,
    Kubectl,
    Ansible,
}

fn detect(text: &str) -> Format {
    if text.trim_start().starts_with('{') {
        return Format::Kubectl;
    }
    let ansible = text
        .lines()
        .map(str::trim)
        .any(|l| is_section_header(l) || l.split_whitespace().skip(1).any(|w| w.starts_with("ansible_")));
    if ansible {
        Format::Ansible
    } else {
        Format::Plain
    }
}

/// `[name]`, `[name:vars]`, `[name:children]` (not `[::1]` or `[fd00::1]:5310`).
fn is_section_header(line: &str) -> bool {
    let Some(inner) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) else {
        return false;
    };
    let name = inner.split_once(':').map_or(inner, |(n, kind)| {
        if kind.chars().all(|c| c.is_ascii_alphabetic()) {
            n
        } else {
            ""
        }
    });
    name.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.')
}

/// Strips a comment: the whole line from `#` (plain list), or from `#`/`;`
/// after white space (Ansible).
fn strip_comment<'a>(line: &'a str, markers: &[char]) -> &'a str {
    let mut prev_space = true;
    for (i, c) in line.char_indices() {
        if markers.contains(&c) && prev_space {
            return &line[..i];
        }
        prev_space = c.is_whitespace();
    }
    line
}

/// Splits `HOST[:PORT]`: `[v6]:port`, `[v6]`, a bare IPv6 address (no port), `name:port`.
fn split_host_port(spec: &str) -> Result<(String, Option<u16>), String> {
    let (host, port) = if let Some(rest) = spec.strip_prefix('[') {
        let (host, tail) = rest
            .split_once(']')
            .ok_or_else(|| format!("'{spec}' opens '[' without closing it"))?;
        match tail {
            "" => (host, None),
            t => (
                host,
                Some(
                    t.strip_prefix(':')
                        .ok_or_else(|| format!("'{spec}': expected ':PORT' after ']'"))?,
                ),
            ),
        }
    } else if spec.matches(':').count() > 1 {
        (spec, None)
    } else {
        match spec.split_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (spec, None),
        }
    };
    check_host(host).map_err(|why| format!("'{host}' {why}"))?;
    let port = port
        .map(|p| match p.parse::<u16>() {
            Ok(n) if n > 0 => Ok(n),
            _ => Err(format!("port '{p}' of '{spec}' is not 1 to 65535")),
        })
        .transpose()?;
    Ok((host.to_string(), port))
}

/// A host's label: it names the host in the matrix and in metric labels.
fn check_name(name: &str) -> Result<(), String> {
    if !name.is_empty() && name.len() <= 64 && name.chars().all(|c| c.is_ascii_alphanumeric() || "-_.:".contains(c)) {
        Ok(())
    } else {
        Err(format!(
            "name '{name}' must be 1 to 64 letters, digits, '-', '_', '.' or ':'"
        ))
    }
}

fn check_host(host: &str) -> Result<(), String> {
    if host.parse::<IpAddr>().is_ok() {
        return Ok(());
    }
    let ok = !host.is_empty()
        && host.len() <= 253
        && host.split('.').all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && !l.starts_with('-')
                && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        });
    if ok {
        Ok(())
    } else {
        Err("is not a host name or IP address".into())
    }
}

/// Adds a host, refusing a second one of the same name or address and port.
fn push_unique(path: &Path, hosts: &mut Vec<(MeshHost, usize)>, host: MeshHost, line: usize) -> Result<(), HostsError> {
    if let Some((other, first)) = hosts
        .iter()
        .find(|(h, _)| h.name == host.name || (h.address == host.address && h.port == host.port))
    {
        let name = if other.name == host.name {
            host.name.clone()
        } else {
            format!("{} (as {} and {})", host.address, other.name, host.name)
        };
        return Err(HostsError::Duplicate {
            path: path.to_path_buf(),
            name,
            first: *first,
            second: line,
        });
    }
    hosts.push((host, line));
    Ok(())
}

fn plain(path: &Path, text: &str) -> Result<Vec<MeshHost>, HostsError> {
    let mut hosts = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let words: Vec<&str> = strip_comment(raw, &['#']).split_whitespace().collect();
        let syntax = |message: String| HostsError::Syntax {
            path: path.to_path_buf(),
            line,
            message: format!("{message}; {PLAIN_ALLOWED}"),
        };
        let (spec, name) = match words.as_slice() {
            [] => continue,
            [spec] => (*spec, None),
            [spec, name] => (*spec, Some(*name)),
            _ => return Err(syntax(format!("{} words", words.len()))),
        };
        let (address, port) = split_host_port(spec).map_err(syntax)?;
        if let Some(name) = name {
            check_name(name).map_err(syntax)?;
        }
        let name = name.map_or_else(|| address.clone(), str::to_string);
        push_unique(path, &mut hosts, MeshHost { name, address, port }, line)?;
    }
    Ok(hosts.into_iter().map(|(h, _)| h).collect())
}

fn kubectl(path: &Path, text: &str) -> Result<Vec<MeshHost>, HostsError> {
    let invalid = |message: String| HostsError::Invalid {
        path: path.to_path_buf(),
        message,
    };
    let doc: serde_json::Value = serde_json::from_str(text).map_err(|e| HostsError::Syntax {
        path: path.to_path_buf(),
        line: e.line(),
        message: format!("not valid JSON ({e}); {FORMATS}"),
    })?;
    let items: Vec<&serde_json::Value> = match doc.get("kind").and_then(|k| k.as_str()) {
        Some("Node") => vec![&doc],
        Some("List") | Some("NodeList") => doc
            .get("items")
            .and_then(|i| i.as_array())
            .ok_or_else(|| invalid("a List without 'items'".into()))?
            .iter()
            .collect(),
        other => {
            return Err(invalid(format!(
                "JSON of kind {}, expected the output of 'kubectl get nodes -o json' (kind List of Nodes)",
                other.map_or("(none)".to_string(), |k| format!("'{k}'"))
            )))
        }
    };
    let mut hosts = Vec::new();
    for (index, item) in items.iter().enumerate() {
        let kind = item.get("kind").and_then(|k| k.as_str()).unwrap_or("Node");
        if kind != "Node" {
            return Err(invalid(format!("item {} is a {kind}, not a Node", index + 1)));
        }
        let name = item
            .pointer("/metadata/name")
            .and_then(|n| n.as_str())
            .ok_or_else(|| invalid(format!("item {} (a Node) has no metadata.name", index + 1)))?;
        let address = item
            .pointer("/status/addresses")
            .and_then(|a| a.as_array())
            .into_iter()
            .flatten()
            .filter(|a| a.get("type").and_then(|t| t.as_str()) == Some("InternalIP"))
            .find_map(|a| a.get("address").and_then(|v| v.as_str()))
            .ok_or_else(|| {
                invalid(format!(
                    "node '{name}' has no InternalIP in status.addresses; list it by address in a plain hosts file \
                     or fix the node"
                ))
            })?;
        let host = MeshHost {
            name: name.to_string(),
            address: address.to_string(),
            port: None,
        };
        // Items are numbered in place of lines.
        push_unique(path, &mut hosts, host, index + 1).map_err(|e| match e {
            HostsError::Duplicate {
                name, first, second, ..
            } => invalid(format!(
                "node '{name}' is listed twice, as item {first} and item {second}"
            )),
            other => other,
        })?;
    }
    Ok(hosts.into_iter().map(|(h, _)| h).collect())
}

/// A host line of an inventory: its name and its own variables.
struct InventoryHost {
    name: String,
    vars: HashMap<String, String>,
    line: usize,
}

#[derive(Default)]
struct Group {
    hosts: Vec<String>,
    children: Vec<String>,
    vars: HashMap<String, String>,
}

/// What the lines under a section header list.
#[derive(Clone, Copy)]
enum Section {
    /// `[group]`: hosts, with their own variables.
    Hosts,
    /// `[group:vars]`: KEY=VALUE for every host of the group.
    Vars,
    /// `[group:children]`: groups whose hosts belong to the group too.
    Children,
}

/// An Ansible INI inventory as written: its groups, and its hosts in the
/// order of their first line.
#[derive(Default)]
struct Inventory {
    groups: BTreeMap<String, Group>,
    hosts: Vec<InventoryHost>,
    /// Where each host name sits in `hosts`.
    index: HashMap<String, usize>,
}

fn ansible(path: &Path, text: &str, select: Option<&str>) -> Result<Vec<MeshHost>, HostsError> {
    let inventory = Inventory::read(path, text)?;
    let selected = inventory.selection(path, select)?;
    let depth = depths(&inventory.groups);
    let mut out: Vec<(MeshHost, usize)> = Vec::new();
    for host in &inventory.hosts {
        if selected.as_ref().is_some_and(|s| !s.contains(&host.name)) {
            continue;
        }
        out.push((inventory.mesh_host(path, host, &depth)?, host.line));
    }
    // The same address and port under two names is two names for one host.
    let mut unique: Vec<(MeshHost, usize)> = Vec::new();
    for (host, line) in out {
        push_unique(path, &mut unique, host, line)?;
    }
    Ok(unique.into_iter().map(|(h, _)| h).collect())
}

/// `[group]`, `[group:vars]` or `[group:children]`: the group, and what
/// the lines under it list.
fn section_header(text: &str) -> Result<(&str, Section), String> {
    let inner = text
        .strip_prefix('[')
        .and_then(|t| t.strip_suffix(']'))
        .filter(|_| is_section_header(text))
        .ok_or_else(|| format!("'{text}' is not a section header; use [group], [group:vars] or [group:children]"))?;
    match inner.split_once(':') {
        None => Ok((inner, Section::Hosts)),
        Some((name, "vars")) => Ok((name, Section::Vars)),
        Some((name, "children")) => Ok((name, Section::Children)),
        Some((_, other)) => Err(format!(
            "unknown section kind ':{other}'; use [group], [group:vars] or [group:children]"
        )),
    }
}

impl Inventory {
    /// Reads every line; an error names the file and the line.
    fn read(path: &Path, text: &str) -> Result<Inventory, HostsError> {
        let mut inventory = Inventory::default();
        inventory.groups.entry("ungrouped".into()).or_default();
        let mut section = ("ungrouped".to_string(), Section::Hosts);
        for (i, raw) in text.lines().enumerate() {
            let line = i + 1;
            let syntax = |message: String| HostsError::Syntax {
                path: path.to_path_buf(),
                line,
                message,
            };
            let text = strip_comment(raw, &['#', ';']).trim();
            if text.is_empty() {
                continue;
            }
            if text.starts_with('[') {
                let (name, kind) = section_header(text).map_err(syntax)?;
                inventory.groups.entry(name.to_string()).or_default();
                section = (name.to_string(), kind);
                continue;
            }
            let group = &section.0;
            match section.1 {
                Section::Vars => inventory.add_group_var(group, text),
                Section::Children => inventory.add_child(group, text),
                Section::Hosts => inventory.add_hosts(group, text, line),
            }
            .map_err(syntax)?;
        }
        Ok(inventory)
    }

    /// A `KEY=VALUE` line under `[group:vars]`.
    fn add_group_var(&mut self, group: &str, text: &str) -> Result<(), String> {
        let (key, value) = text
            .split_once('=')
            .ok_or_else(|| format!("'{text}' in [{group}:vars] is not KEY=VALUE"))?;
        self.groups
            .entry(group.to_string())
            .or_default()
            .vars
            .insert(key.trim().into(), unquote(value.trim()));
        Ok(())
    }

    /// A group name under `[group:children]`.
    fn add_child(&mut self, group: &str, text: &str) -> Result<(), String> {
        let child = text.split_whitespace().next().unwrap_or(text);
        if !is_section_header(&format!("[{child}]")) {
            return Err(format!("'{child}' in [{group}:children] is not a group name"));
        }
        self.groups.entry(child.to_string()).or_default();
        self.groups
            .entry(group.to_string())
            .or_default()
            .children
            .push(child.to_string());
        Ok(())
    }

    /// A host line of `group`: a name or a range (`web[01:03]`), then the
    /// hosts' own `KEY=VALUE` variables.
    fn add_hosts(&mut self, group: &str, text: &str, line: usize) -> Result<(), String> {
        let mut words = text.split_whitespace();
        let pattern = words.next().unwrap_or_default();
        let mut vars = HashMap::new();
        for word in words {
            let (key, value) = word
                .split_once('=')
                .ok_or_else(|| format!("'{word}' after the host is not KEY=VALUE"))?;
            vars.insert(key.to_string(), unquote(value));
        }
        for name in expand_range(pattern).map_err(|e| format!("host '{pattern}': {e}"))? {
            self.add_host(group, name, &vars, line);
        }
        Ok(())
    }

    /// One host of `group`, listed on `line`.
    fn add_host(&mut self, group: &str, name: String, vars: &HashMap<String, String>, line: usize) {
        match self.index.get(&name) {
            // A host in several groups is one host; its later lines add variables.
            Some(&at) => {
                for (k, v) in vars {
                    self.hosts[at].vars.entry(k.clone()).or_insert_with(|| v.clone());
                }
            }
            None => {
                self.index.insert(name.clone(), self.hosts.len());
                self.hosts.push(InventoryHost {
                    name: name.clone(),
                    vars: vars.clone(),
                    line,
                });
            }
        }
        let group = self.groups.entry(group.to_string()).or_default();
        if !group.hosts.contains(&name) {
            group.hosts.push(name);
        }
    }

    /// The hosts of the group `select` and of its child groups; None
    /// for every host (no group, or `all`).
    fn selection(&self, path: &Path, select: Option<&str>) -> Result<Option<BTreeSet<String>>, HostsError> {
        match select {
            None | Some("all") => Ok(None),
            Some(g) if self.groups.contains_key(g) => Ok(Some(members(&self.groups, g))),
            Some(g) => {
                let known: Vec<&str> = self.groups.keys().map(String::as_str).collect();
                Err(HostsError::Invalid {
                    path: path.to_path_buf(),
                    message: format!("no group '{g}' in the inventory; its groups: all, {}", known.join(", ")),
                })
            }
        }
    }

    /// A host's variables: its groups' from the most general group to the
    /// most specific (`depth`), then its own.
    fn variables(&self, host: &InventoryHost, depth: &HashMap<String, usize>) -> HashMap<String, String> {
        let mut vars: HashMap<String, String> = self.groups.get("all").map(|g| g.vars.clone()).unwrap_or_default();
        let mut mine: Vec<(&String, usize)> = self
            .groups
            .iter()
            .filter(|(name, _)| members(&self.groups, name).contains(&host.name))
            .map(|(name, _)| (name, depth.get(name).copied().unwrap_or(0)))
            .collect();
        mine.sort_by_key(|&(name, d)| (d, name.clone()));
        for (name, _) in mine {
            vars.extend(self.groups[name].vars.clone());
        }
        vars.extend(host.vars.clone());
        vars
    }

    /// Where to reach `host`: its `ansible_host` (else its name) and
    /// `ansible_port`, checked.
    fn mesh_host(
        &self,
        path: &Path,
        host: &InventoryHost,
        depth: &HashMap<String, usize>,
    ) -> Result<MeshHost, HostsError> {
        let vars = self.variables(host, depth);
        let syntax = |message: String| HostsError::Syntax {
            path: path.to_path_buf(),
            line: host.line,
            message,
        };
        let address = vars.get("ansible_host").cloned().unwrap_or_else(|| host.name.clone());
        check_host(&address).map_err(|why| syntax(format!("ansible_host '{address}' of {} {why}", host.name)))?;
        let port = vars
            .get("ansible_port")
            .map(|p| {
                p.parse::<u16>()
                    .ok()
                    .filter(|&n| n > 0)
                    .ok_or_else(|| syntax(format!("ansible_port '{p}' of {} is not 1 to 65535", host.name)))
            })
            .transpose()?;
        Ok(MeshHost {
            name: host.name.clone(),
            address,
            port,
        })
    }
}

fn unquote(v: &str) -> String {
    v.trim_matches(|c| c == '"' || c == '\'').to_string()
}

/// The hosts of a group and of its child groups, however deep (cycles stop).
fn members(groups: &BTreeMap<String, Group>, name: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut seen = BTreeSet::new();
    let mut todo = vec![name.to_string()];
    while let Some(g) = todo.pop() {
        if !seen.insert(g.clone()) {
            continue;
        }
        if let Some(group) = groups.get(&g) {
            out.extend(group.hosts.iter().cloned());
            todo.extend(group.children.iter().cloned());
        }
    }
    out
}

/// How deep each group sits under the top (parents before children).
fn depths(groups: &BTreeMap<String, Group>) -> HashMap<String, usize> {
    let mut depth: HashMap<String, usize> = groups.keys().map(|g| (g.clone(), 0)).collect();
    // Relax at most as many times as there are groups: a cycle cannot loop.
    for _ in 0..groups.len() {
        let mut changed = false;
        for (name, group) in groups {
            let d = depth[name];
            for child in &group.children {
                if depth.get(child).is_some_and(|&c| c < d + 1) {
                    depth.insert(child.clone(), d + 1);
                    changed = true;
                }
            }
        }
        if !changed {
            break;
        }
    }
    depth
}

/// Ansible host ranges: `web[01:03]` (zero-padded numbers kept),
/// `db-[a:c]`, `node[0:10:5]` (a stride); several ranges multiply.
pub fn expand_range(pattern: &str) -> Result<Vec<String>, String> {
    let Some(open) = pattern.find('[') else {
        return Ok(vec![pattern.to_string()]);
    };
    let close = pattern[open..].find(']').map(|c| open + c).ok_or("'[' without ']'")?;
    let (prefix, inner, suffix) = (&pattern[..open], &pattern[open + 1..close], &pattern[close + 1..]);
    let parts: Vec<&str> = inner.split(':').collect();
    let (start, end, stride) = match parts.as_slice() {
        [a, b] => (*a, *b, 1usize),
        [a, b, s] => (
            *a,
            *b,
            s.parse()
                .ok()
                .filter(|&s| s > 0)
                .ok_or(format!("stride '{s}' is not a positive number"))?,
        ),
        _ => return Err(format!("range '[{inner}]' must be [START:END] or [START:END:STRIDE]")),
    };
    let items: Vec<String> = if let (Ok(a), Ok(b)) = (start.parse::<u64>(), end.parse::<u64>()) {
        if a > b {
            return Err(format!("range [{inner}] runs backwards"));
        }
        if (b - a) / stride as u64 > 10_000 {
            return Err(format!("range [{inner}] names more than 10000 hosts"));
        }
        let width = if start.starts_with('0') && start.len() > 1 {
            start.len()
        } else {
            0
        };
        (a..=b).step_by(stride).map(|n| format!("{n:0width$}")).collect()
    } else if start.len() == 1
        && end.len() == 1
        && start.chars().all(|c| c.is_ascii_lowercase())
        && end.chars().all(|c| c.is_ascii_lowercase())
    {
        let (a, b) = (start.as_bytes()[0], end.as_bytes()[0]);
        if a > b {
            return Err(format!("range [{inner}] runs backwards"));
        }
        (a..=b).step_by(stride).map(|c| (c as char).to_string()).collect()
    } else {
        return Err(format!(
            "range [{inner}]: both ends must be numbers, or single letters a to z"
        ));
    };
    let mut out = Vec::new();
    for rest in expand_range(suffix)? {
        for item in &items {
            out.push(format!("{prefix}{item}{rest}"));
        }
    }
    Ok(out)
}

/// A `dns:NAME[:PORT]` host spec: Some((NAME, PORT)), None for any other spec.
pub fn parse_dns_spec(spec: &str) -> Result<Option<(String, Option<u16>)>, HostsError> {
    let Some(rest) = spec.strip_prefix("dns:") else {
        return Ok(None);
    };
    let (name, port) = split_host_port(rest).map_err(|message| HostsError::Dns {
        name: rest.to_string(),
        message: format!("{message}; write dns:NAME or dns:NAME:PORT"),
    })?;
    Ok(Some((name, port)))
}

/// Every A and AAAA record of `name` as a host (named by its address),
/// e.g. the pods behind a Kubernetes headless Service.
pub fn expand_dns(name: &str, port: Option<u16>) -> Result<Vec<MeshHost>, HostsError> {
    expand_dns_with(name, port, |n| (n, 0).to_socket_addrs().map(|a| a.collect()))
}

/// [`expand_dns`] with the resolver given (tests).
pub fn expand_dns_with(
    name: &str,
    port: Option<u16>,
    resolve: impl Fn(&str) -> std::io::Result<Vec<SocketAddr>>,
) -> Result<Vec<MeshHost>, HostsError> {
    let addresses = resolve(name).map_err(|e| HostsError::Dns {
        name: name.to_string(),
        message: format!("cannot resolve it: {e}"),
    })?;
    let ips: BTreeSet<IpAddr> = addresses.iter().map(|a| a.ip()).collect();
    if ips.is_empty() {
        return Err(HostsError::Dns {
            name: name.to_string(),
            message: "resolves to no address; for a Kubernetes headless Service check that its pods are ready \
                      (kubectl get endpoints)"
                .into(),
        });
    }
    Ok(ips
        .into_iter()
        .map(|ip| MeshHost {
            name: ip.to_string(),
            address: ip.to_string(),
            port,
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> PathBuf {
        PathBuf::from(format!("{}/tests/fixtures/hosts/{name}", env!("CARGO_MANIFEST_DIR")))
    }

    fn host(name: &str, address: &str, port: Option<u16>) -> MeshHost {
        MeshHost {
            name: name.into(),
            address: address.into(),
            port,
        }
    }

    fn err(text: &str, group: Option<&str>) -> String {
        parse_hosts(Path::new("hosts.txt"), text, group)
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn a_plain_list_with_names_ports_ipv6_and_comments() {
        let hosts = parse_hosts_file(&fixture("plain.txt"), None).unwrap();
        assert_eq!(
            hosts,
            [
                host("stor-a", "10.20.0.11", None),
                host("stor-b", "10.20.0.12", Some(5400)),
                host("stor-c.lab.example", "stor-c.lab.example", None),
                host("stor-d", "fd00:20::13", Some(5310)),
                host("stor-e", "fd00:20::14", None),
            ]
        );
    }

    #[test]
    fn plain_list_errors_name_file_line_and_what_is_allowed() {
        let e = err("a\nb:0\n", None);
        assert!(
            e.contains("hosts.txt, line 2") && e.contains("port '0'") && e.contains("HOST[:PORT] [NAME]"),
            "{e}"
        );
        let e = err("a x y\n", None);
        assert!(e.contains("line 1: 3 words"), "{e}");
        let e = err("a b!c\n", None);
        assert!(e.contains("line 1: name 'b!c' must be"), "{e}");
        let e = err("x_y.example\nh%t\n", None);
        assert!(e.contains("line 2") && e.contains("'h%t' is not a host name"), "{e}");
        let e = err("10.0.0.1 a\n# comment\n10.0.0.2 a\n", None);
        assert!(e.contains("'a' is listed twice, on line 1 and line 3"), "{e}");
        let e = err("10.0.0.1 a\n10.0.0.1 b\n", None);
        assert!(
            e.contains("on line 1 and line 2") && e.contains("10.0.0.1 (as a and b)"),
            "{e}"
        );
        assert!(err("# nothing\n\n", None).contains("lists no hosts"));
        assert!(err("a\n", Some("web")).contains("--hosts-group selects a group of an Ansible inventory"));
    }

    #[test]
    fn kubectl_nodes_by_name_at_their_internal_ip() {
        let hosts = parse_hosts_file(&fixture("nodes.json"), None).unwrap();
        assert_eq!(
            hosts,
            [
                host("cp-1", "172.18.0.2", None),
                host("worker-1", "172.18.0.3", None),
                host("worker-2", "172.18.0.4", None),
            ]
        );
        let e = parse_hosts_file(&fixture("nodes-no-ip.json"), None)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("nodes-no-ip.json") && e.contains("node 'worker-2' has no InternalIP"),
            "{e}"
        );
        let e = err("{\"kind\": \"List\", \"items\": [\n  {\"kind\": \"Node\"\n", None);
        assert!(e.contains("line 3") && e.contains("not valid JSON"), "{e}");
        let e = err("{\"kind\": \"PodList\", \"items\": []}", None);
        assert!(
            e.contains("kind 'PodList'") && e.contains("kubectl get nodes -o json"),
            "{e}"
        );
    }

    #[test]
    fn an_ansible_inventory_with_ranges_vars_and_children() {
        let hosts = parse_hosts_file(&fixture("inventory.ini"), None).unwrap();
        assert_eq!(
            hosts,
            [
                host("bastion.lab.example", "192.0.2.1", None),
                host("web01.lab.example", "web01.lab.example", None),
                host("web02.lab.example", "web02.lab.example", None),
                host("web03.lab.example", "web03.lab.example", None),
                // The host's own ansible_port beats [backend:vars].
                host("db-primary", "10.0.1.10", Some(2222)),
                host("db-replica", "10.0.1.11", Some(5400)),
                host("stor-a.lab.example", "stor-a.lab.example", Some(5400)),
                host("stor-b.lab.example", "stor-b.lab.example", Some(5400)),
            ]
        );
        let backend = parse_hosts_file(&fixture("inventory.ini"), Some("backend")).unwrap();
        let names: Vec<&str> = backend.iter().map(|h| h.name.as_str()).collect();
        assert_eq!(
            names,
            ["db-primary", "db-replica", "stor-a.lab.example", "stor-b.lab.example"]
        );
        let web = parse_hosts_file(&fixture("inventory.ini"), Some("web")).unwrap();
        assert_eq!(web.len(), 3);
        let e = parse_hosts_file(&fixture("inventory.ini"), Some("nope"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("no group 'nope'") && e.contains("backend, db"), "{e}");
    }

    #[test]
    fn ansible_errors_name_the_line() {
        let e = err("[web]\nweb[3:1]\n", None);
        assert!(e.contains("line 2") && e.contains("runs backwards"), "{e}");
        let e = err("[web:hosts]\na\n", None);
        assert!(
            e.contains("line 1") && e.contains("unknown section kind ':hosts'"),
            "{e}"
        );
        let e = err("[web:vars]\nansible_port\n", None);
        assert!(e.contains("line 2") && e.contains("KEY=VALUE"), "{e}");
        let e = err("[web]\na ansible_port=http\n", None);
        assert!(e.contains("line 2") && e.contains("ansible_port 'http'"), "{e}");
        let e = err("[web]\na ansible_host=10.0.0.1\nb ansible_host=10.0.0.1\n", None);
        assert!(e.contains("line 2 and line 3"), "{e}");
        // A host in two groups is one host, not a duplicate.
        let hosts = parse_hosts(Path::new("i"), "[a]\nx ansible_host=10.0.0.9\n[b]\nx\n", None).unwrap();
        assert_eq!(hosts, [host("x", "10.0.0.9", None)]);
        // Children that loop do not hang.
        let hosts = parse_hosts(Path::new("i"), "[a:children]\nb\n[b:children]\na\n[b]\ny\n", Some("a")).unwrap();
        assert_eq!(hosts, [host("y", "y", None)]);
    }

    #[test]
    fn host_ranges_expand_like_ansible() {
        assert_eq!(expand_range("web[01:03]").unwrap(), ["web01", "web02", "web03"]);
        assert_eq!(expand_range("n[0:10:5].x").unwrap(), ["n0.x", "n5.x", "n10.x"]);
        assert_eq!(expand_range("db-[a:c]").unwrap(), ["db-a", "db-b", "db-c"]);
        assert_eq!(expand_range("r[1:2]n[1:2]").unwrap(), ["r1n1", "r2n1", "r1n2", "r2n2"]);
        assert!(expand_range("w[1:100000]").unwrap_err().contains("more than 10000"));
        assert!(expand_range("w[1:2").is_err());
        assert!(expand_range("w[a:10]").is_err());
    }

    #[test]
    fn the_format_is_told_by_content() {
        assert_eq!(detect("[fd00::1]:5310 a\n[::1]\n"), Format::Plain);
        assert_eq!(detect("# x\n[web]\na\n"), Format::Ansible);
        assert_eq!(detect("a ansible_host=1.2.3.4\n"), Format::Ansible);
        assert_eq!(detect("  {\"kind\": \"List\"}"), Format::Kubectl);
    }

    #[test]
    fn dns_specs_expand_to_every_address() {
        assert_eq!(
            parse_dns_spec("dns:agents.ns.svc.cluster.local:5310").unwrap(),
            Some(("agents.ns.svc.cluster.local".into(), Some(5310)))
        );
        assert_eq!(parse_dns_spec("dns:agents").unwrap(), Some(("agents".into(), None)));
        assert_eq!(parse_dns_spec("10.0.0.1").unwrap(), None);
        assert!(parse_dns_spec("dns:a:0")
            .unwrap_err()
            .to_string()
            .contains("dns:NAME:PORT"));
        let resolver = |_: &str| {
            Ok(vec![
                "10.244.1.7:0".parse().unwrap(),
                "10.244.2.9:0".parse().unwrap(),
                "10.244.1.7:0".parse().unwrap(),
            ])
        };
        let hosts = expand_dns_with("agents", Some(5310), resolver).unwrap();
        assert_eq!(
            hosts,
            [
                host("10.244.1.7", "10.244.1.7", Some(5310)),
                host("10.244.2.9", "10.244.2.9", Some(5310))
            ]
        );
        let e = expand_dns_with("agents", None, |_| Ok(vec![])).unwrap_err().to_string();
        assert!(
            e.contains("dns:agents: resolves to no address") && e.contains("headless Service"),
            "{e}"
        );
        // localhost resolves from /etc/hosts, without a DNS server.
        let local = expand_dns("localhost", None).unwrap();
        assert!(
            local.iter().any(|h| h.address == "127.0.0.1" || h.address == "::1"),
            "{local:?}"
        );
    }
}
