//! Which cores each lab host runs on (`lab up --cores`), where its
//! receive work is steered, and the kernel's two ways of writing a set of
//! cores (a list, `0-2,5`, and a mask, `27`).
//!
//! A host owns cores only where the machine has more cores than the lab
//! has hosts (`auto`), or when asked (`own`): on a smaller machine, one
//! core per host leaves every host alone with whatever else the machine
//! runs on its core (measured on 2 cores beside two `yes` hogs: both ends
//! of an unlimited test then waited for a CPU most of the time), while
//! sharing them all lets the kernel balance the hosts' work as on one
//! machine, which is what the figures then say they are. A host limited
//! below one core always gets a core of its own while one is left for the
//! others: its thief takes that core away from everything on it.

use super::state::{LabState, LinkState};
use super::LabError;

/// How `lab up --cores` places the hosts on the machine's cores.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CorePolicy {
    /// Own cores where the machine has more cores than the lab has hosts
    /// (one is left for the router and everything else), else shared.
    #[default]
    Auto,
    /// Each host an equal share of the cores, its own (shared where there
    /// are fewer cores than hosts).
    Own,
    /// Every host on every core (but a CPU-limited host's own core).
    Shared,
}

impl CorePolicy {
    pub const NAMES: [&'static str; 3] = ["auto", "own", "shared"];

    pub fn name(self) -> &'static str {
        match self {
            CorePolicy::Auto => "auto",
            CorePolicy::Own => "own",
            CorePolicy::Shared => "shared",
        }
    }
}

impl std::str::FromStr for CorePolicy {
    type Err = LabError;
    fn from_str(input: &str) -> Result<CorePolicy, LabError> {
        match input.trim().to_ascii_lowercase().as_str() {
            "auto" => Ok(CorePolicy::Auto),
            "own" => Ok(CorePolicy::Own),
            "shared" => Ok(CorePolicy::Shared),
            _ => Err(LabError::Invalid {
                option: "--cores",
                input: input.to_string(),
                hint: "expected auto, own or shared".into(),
            }),
        }
    }
}

/// Gives every host cores of `cpus` (the machine's, in order) as `policy`
/// says: its own (an equal share each, the rest left to the router and
/// the machine), or all of them, shared and said to be. A host limited
/// below one core (whose thief would slow every host on its core) gets one
/// of its own in either case while a core is left for the others, and the
/// others keep off it. The router runs on every core, shared.
pub fn assign_cores(state: &mut LabState, cpus: &[u32], policy: CorePolicy) {
    let hosts: Vec<usize> = (0..state.hosts.len()).filter(|&i| !state.hosts[i].router).collect();
    if cpus.is_empty() || hosts.is_empty() {
        return;
    }
    for host in state.hosts.iter_mut().filter(|h| h.router) {
        host.cores = cpus.to_vec();
        host.cores_shared = true;
    }
    let own = match policy {
        CorePolicy::Own => cpus.len() >= hosts.len(),
        CorePolicy::Auto => cpus.len() > hosts.len(),
        CorePolicy::Shared => false,
    };
    if own {
        let each = cpus.len() / hosts.len();
        for (n, &i) in hosts.iter().enumerate() {
            state.hosts[i].cores = cpus[n * each..(n + 1) * each].to_vec();
            state.hosts[i].cores_shared = false;
        }
        return;
    }
    let limited: Vec<usize> = hosts
        .iter()
        .copied()
        .filter(|&i| state.hosts[i].cpu_limit_percent.is_some_and(|p| p < 100.0))
        .collect();
    let owned = if limited.len() < cpus.len() { limited.len() } else { 0 };
    for (n, &i) in limited.iter().take(owned).enumerate() {
        state.hosts[i].cores = vec![cpus[n]];
        state.hosts[i].cores_shared = false;
    }
    let rest = &cpus[owned..];
    let sharing: Vec<usize> = hosts
        .iter()
        .copied()
        .filter(|i| owned == 0 || !limited.contains(i))
        .collect();
    for &i in &sharing {
        state.hosts[i].cores = rest.to_vec();
        state.hosts[i].cores_shared = sharing.len() > 1;
    }
}

/// The cores whose work is the receive work of `link`'s end `end`: its
/// host's, or at the router the host's on the link's other end (a packet a
/// host sends is carried through the router on that host's cores).
pub fn receive_cores(state: &LabState, link: &LinkState, end: usize) -> Vec<u32> {
    let owner = receive_owner(state, link, end);
    state.host(owner).map(|h| h.cores.clone()).unwrap_or_default()
}

/// The host whose cores carry `link`'s end `end`'s receive work (see
/// [`receive_cores`]).
pub fn receive_owner<'a>(state: &'a LabState, link: &'a LinkState, end: usize) -> &'a str {
    let here = &link.ends[end].host;
    match state.host(here) {
        Some(h) if h.router => &link.ends[1 - end].host,
        _ => here,
    }
}

/// A CPU mask as sysfs writes it (`rps_cpus`): hex words of 32 cores,
/// highest first, joined by commas (`3`, `1,00000000`).
pub fn cpu_mask(cores: &[u32]) -> String {
    let Some(&top) = cores.iter().max() else {
        return "0".into();
    };
    let mut words = vec![0u32; top as usize / 32 + 1];
    for &c in cores {
        words[c as usize / 32] |= 1 << (c % 32);
    }
    let mut out: Vec<String> = Vec::new();
    for (i, w) in words.iter().rev().enumerate() {
        out.push(if i == 0 { format!("{w:x}") } else { format!("{w:08x}") });
    }
    out.join(",")
}

/// Parses a cpu list as the kernel writes it (`0-3,8,10-11`).
pub fn parse_cpu_list(text: &str) -> Vec<u32> {
    let mut cpus = Vec::new();
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                if let (Ok(a), Ok(b)) = (a.parse::<u32>(), b.parse::<u32>()) {
                    cpus.extend(a..=b.min(a.saturating_add(4096)));
                }
            }
            None => cpus.extend(part.parse::<u32>().ok()),
        }
    }
    cpus
}

/// The list form of cores (`0-1,3`).
pub fn cpu_list(cores: &[u32]) -> String {
    let mut sorted = cores.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < sorted.len() {
        let mut j = i;
        while j + 1 < sorted.len() && sorted[j + 1] == sorted[j] + 1 {
            j += 1;
        }
        out.push(if i == j {
            sorted[i].to_string()
        } else {
            format!("{}-{}", sorted[i], sorted[j])
        });
        i = j + 1;
    }
    out.join(",")
}

#[cfg(test)]
mod tests {
    use super::super::spec::{layout, parse_cpu_limit, tests::spec, ROUTER};
    use super::super::Topology;
    use super::*;

    #[test]
    fn hosts_own_cores_where_there_are_enough_and_share_them_where_not() {
        let cores = |s: &LabState, h: &str| (s.host(h).unwrap().cores.clone(), s.host(h).unwrap().cores_shared);
        // Two hosts on two cores: shared, unless asked to own them.
        let mut two = layout(&spec(2, 1, Topology::ViaRouter)).unwrap();
        assign_cores(&mut two, &[0, 1], CorePolicy::Auto);
        assert_eq!(cores(&two, "a"), (vec![0, 1], true));
        assert_eq!(cores(&two, "b"), (vec![0, 1], true));
        assign_cores(&mut two, &[0, 1], CorePolicy::Own);
        assert_eq!(cores(&two, "a"), (vec![0], false));
        assert_eq!(cores(&two, "b"), (vec![1], false));
        assert_eq!(cores(&two, ROUTER), (vec![0, 1], true));
        // The router's end of a's link carries what a sends: on a's core.
        assert_eq!(receive_cores(&two, &two.links[0], 1), vec![0]);
        assert_eq!(receive_owner(&two, &two.links[1], 1), "b");
        // Three cores for two hosts: their own, one left for the rest.
        assign_cores(&mut two, &[0, 1, 2], CorePolicy::Auto);
        assert_eq!(cores(&two, "b"), (vec![1], false));
        assign_cores(&mut two, &[0, 1, 2], CorePolicy::Shared);
        assert_eq!(cores(&two, "b"), (vec![0, 1, 2], true));
        let mut three = layout(&spec(3, 1, Topology::Direct)).unwrap();
        assign_cores(&mut three, &[0, 1], CorePolicy::Own);
        assert_eq!(cores(&three, "c"), (vec![0, 1], true));
        // A host whose thief would slow its core's other hosts gets its own.
        let mut slow = spec(3, 1, Topology::Direct);
        slow.cpu_limits = vec![parse_cpu_limit("c=20%").unwrap()];
        let mut slow = layout(&slow).unwrap();
        assign_cores(&mut slow, &[0, 1], CorePolicy::Auto);
        assert_eq!(cores(&slow, "c"), (vec![0], false));
        assert_eq!(cores(&slow, "a"), (vec![1], true));
        assert_eq!(cores(&slow, "b"), (vec![1], true));
        let mut wide = layout(&spec(2, 1, Topology::Direct)).unwrap();
        assign_cores(&mut wide, &[0, 1, 2, 3, 4], CorePolicy::Auto);
        assert_eq!(cores(&wide, "a"), (vec![0, 1], false));
        assert_eq!(cores(&wide, "b"), (vec![2, 3], false));
    }

    #[test]
    fn cpu_masks_and_lists_read_as_the_kernel_writes_them() {
        assert_eq!(cpu_mask(&[0]), "1");
        assert_eq!(cpu_mask(&[0, 1]), "3");
        assert_eq!(cpu_mask(&[33]), "2,00000000");
        assert_eq!(cpu_mask(&[]), "0");
        assert_eq!(parse_cpu_list("0-2,5\n"), vec![0, 1, 2, 5]);
        assert_eq!(cpu_list(&[5, 0, 1, 2]), "0-2,5");
        assert_eq!(parse_cpu_list(&cpu_list(&[1, 3, 4])), vec![1, 3, 4]);
    }
}
