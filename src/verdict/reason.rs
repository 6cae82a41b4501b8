//! The reasoning step: from the findings the rules produced to one verdict.
//!
//! Every rule that holds gives a [`Finding`]: what held, on which end, how
//! strong its evidence is, in words. Findings are then ordered by what
//! explains what ([`explains`]):
//!
//! - a CPU-starved, throttled or CPU-bound end explains the drops at its
//!   own receiving socket or NIC, the retransmissions of the sender that
//!   sends to it, a receive window it kept closed, its own send buffer
//!   full (a starved sender writes in bursts), a sender's rate below
//!   what it was offered, the datagrams its pacer's catch-up bursts lost
//!   on the path, the workload's own limit on that end (and, with
//!   strong evidence, a files "link", the raw TCP rate it capped too), and
//!   a rate below the link;
//! - drops at a receiver explain the retransmissions of its sender;
//! - a full link (90% of the line rate or more, or a path shaper read over
//!   the trial whose queue overflowed) explains the sender's
//!   retransmissions and the datagrams lost on the path (a bottleneck
//!   drops what exceeds it), a sender held below its offer (a shaper
//!   pushes back), and a rate below the link (a shaper late to dequeue
//!   passes less than its rate);
//! - a sender below its offered rate explains a rate below the link;
//! - with both ends on one kernel, a receiver strongly short of CPU
//!   explains its sender below its offer (what the receiver has not taken
//!   in is still charged to the sender's socket, which then blocks).
//!
//! What nothing explains is a root. The verdict names one root, its chain
//! of consequences under it (`cause → consequence → ...`), and whatever
//! else held as "also":
//!
//! 1. a figure above the model, else at the line rate, is the link's: the
//!    link is the cause and any other root is "also";
//! 2. else the causes (an end's CPU, a window, a send buffer, a sender
//!    below its offer, the workload's own limit) with strong evidence: one
//!    is the verdict; both ends' CPU at once is "both ends"; two unrelated
//!    strong causes are `not_sure`, both shown;
//! 3. else one weak cause is the verdict, said to be weak, unless a strong
//!    symptom nothing explains stands beside it: then `not_sure`;
//! 4. else the symptoms (drops, loss, retransmissions): the first of them.
//!
//! A workload whose own finding answers the test's question (files: how
//! far from raw TCP, and why) speaks before rules 2-4, unless its finding
//! names no limit ("nothing stands out") and a strong cause does.

use crate::model::{Evidence, Party, Verdict};

/// What kind of thing a finding is, for the explanation order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// An end short of CPU (cgroup quota, waiting for a CPU, busy).
    Cpu,
    /// At or near the line rate.
    Link,
    /// Above the model: the assumed link speed is wrong.
    ModelExceeded,
    /// The receiver's window held the sender back.
    ReceiveWindow { receiver: Party },
    /// The sender's own send buffer held it back.
    SendBuffer,
    /// A sender below the rate it was asked to offer.
    OfferShort { sender: Party },
    /// A receiver dropped (socket buffer, NIC, datagrams lost at it).
    Drops { receiver: Party },
    /// Datagrams lost before the receiving socket.
    PathLoss,
    /// A sender retransmitted.
    Retransmits { sender: Party },
    /// The measured rate is below the link (only ever a consequence).
    BelowLink,
    /// The workload's own answer (files: what held the transfer back).
    Workload,
}

impl Class {
    /// Causes can be a verdict's root; symptoms are what a cause produces.
    fn is_cause(self) -> bool {
        !matches!(
            self,
            Class::Drops { .. } | Class::PathLoss | Class::Retransmits { .. } | Class::BelowLink
        )
    }

    /// Depth in a chain: a deeper explainer makes the longer chain.
    fn depth(self) -> u8 {
        match self {
            Class::Cpu | Class::Link | Class::ModelExceeded => 0,
            Class::OfferShort { .. } => 1,
            Class::Drops { .. } | Class::ReceiveWindow { .. } | Class::SendBuffer | Class::PathLoss => 2,
            Class::Retransmits { .. } | Class::Workload => 3,
            Class::BelowLink => 4,
        }
    }
}

/// One rule that held.
#[derive(Debug, Clone, PartialEq)]
pub struct Finding {
    /// The verdict kind this finding gives when it speaks.
    pub kind: String,
    pub class: Class,
    /// The end it is about, when one.
    pub party: Option<Party>,
    /// The words for that end or place: `sender`, `receiver`, `client`,
    /// `agent`, `both`, `path`.
    pub side: Option<String>,
    pub strong: bool,
    /// The finding as a verdict line.
    pub summary: String,
    /// The finding as a link in a chain ("the sender retransmitted 4.3% of bytes").
    pub consequence: String,
    /// For an end short of CPU: the share of the time its threads were
    /// ready to run that they ran, in percent (schedstat), when measured.
    pub ran_percent_of_ready: Option<f64>,
    /// Both ends ran on one kernel (a lab, loopback): what a sender has
    /// sent stays charged to its socket until the receiver's packet work
    /// takes it in, so a receiver short of CPU holds a sender back.
    pub one_kernel: bool,
}

impl Finding {
    pub fn new(kind: &str, class: Class, party: Option<Party>, side: Option<&str>, summary: String) -> Finding {
        // The multi-link verdict reads the CPU class from the kind alone.
        debug_assert_eq!(
            class == Class::Cpu,
            Verdict::is_cpu_kind(kind),
            "finding {kind}: its class and Verdict::CPU_KINDS disagree"
        );
        Finding {
            kind: kind.into(),
            class,
            party,
            side: side.map(str::to_string),
            strong: true,
            consequence: summary.clone(),
            summary,
            ran_percent_of_ready: None,
            one_kernel: false,
        }
    }

    /// The share of their ready time the end's threads ran, in percent.
    pub fn ran_percent_of_ready(mut self, percent: f64) -> Finding {
        self.ran_percent_of_ready = Some(percent);
        self
    }

    pub fn weak(mut self) -> Finding {
        self.strong = false;
        self
    }

    pub fn strong_if(mut self, strong: bool) -> Finding {
        self.strong = strong;
        self
    }

    pub fn consequence(mut self, words: String) -> Finding {
        self.consequence = words;
        self
    }
}

/// Whether `a` explains `b` (the list in the module documentation).
pub fn explains(a: &Finding, b: &Finding, workload_first: bool) -> bool {
    match (a.class, b.class) {
        (Class::Cpu, Class::Retransmits { sender }) => a.party == Some(sender.other()),
        (Class::Cpu, Class::Drops { receiver }) => a.party == Some(receiver),
        (Class::Cpu, Class::ReceiveWindow { receiver }) => a.party == Some(receiver),
        // A starved sender writes in bursts when it runs and fills its
        // buffer: the buffer is not what held it back.
        (Class::Cpu, Class::SendBuffer) => a.party.is_some() && a.party == b.party,
        // On one kernel a strongly starved receiver holds the sender back
        // too: the datagrams it has not taken in are still the sender's
        // (seen in the lab: a UDP sender asleep in sendmsg 90% of a trial
        // into a host held to 2% of a core, its own threads not short).
        (Class::Cpu, Class::OfferShort { sender }) => {
            a.party == Some(sender) || (b.one_kernel && a.strong && a.party == Some(sender.other()))
        }
        // A starved sender's pacer wakes late and catches up in bursts that
        // overflow a queue on the path: loss of its own making.
        (Class::Cpu, Class::PathLoss) => a.party.is_some() && a.party == b.party,
        (Class::Cpu, Class::BelowLink) => true,
        // The workload's limit on the starved end itself (a files
        // transfer's disk writes); not a delay the path's queue holds. A
        // files "link" is the raw TCP rate on the same path, which a
        // starved end caps as well: strong starvation explains it.
        (Class::Cpu, Class::Workload) => {
            (b.party.is_some() && b.party == a.party) || (a.strong && b.kind.ends_with("_link"))
        }
        (Class::Drops { receiver }, Class::Retransmits { sender }) => receiver == sender.other(),
        // A link found full below the line rate (its shaper dropped) is
        // why the rate is below it.
        (Class::Link, Class::Retransmits { .. } | Class::PathLoss | Class::OfferShort { .. } | Class::BelowLink) => {
            true
        }
        (Class::Link, Class::Workload) => !workload_first && b.kind.ends_with("_link"),
        (Class::OfferShort { .. }, Class::BelowLink) => true,
        _ => false,
    }
}

/// The verdict the findings support. `workload_first`: the workload's own
/// finding answers the question the test exists for (files: against raw
/// TCP), so a full link is "also" beside it rather than its cause.
pub fn conclude(findings: Vec<Finding>, workload_first: bool) -> Verdict {
    let findings = merge_cpu(findings);
    let n = findings.len();
    // Each finding's explainer: the deepest one that explains it.
    let explained_by: Vec<Option<usize>> = (0..n)
        .map(|b| {
            (0..n)
                .filter(|&a| a != b && explains(&findings[a], &findings[b], workload_first))
                .max_by_key(|&a| findings[a].class.depth())
        })
        .collect();
    let roots: Vec<usize> = (0..n)
        .filter(|&i| explained_by[i].is_none() && findings[i].class != Class::BelowLink)
        .collect();
    if roots.is_empty() {
        return Verdict::new("none", "no bottleneck stands out".into());
    }
    let pick = |class: Class| roots.iter().copied().find(|&i| findings[i].class == class);
    let strong_causes: Vec<usize> = roots
        .iter()
        .copied()
        .filter(|&i| findings[i].class.is_cause() && findings[i].strong)
        .collect();
    let weak_causes: Vec<usize> = roots
        .iter()
        .copied()
        .filter(|&i| findings[i].class.is_cause() && !findings[i].strong)
        .collect();
    let strong_symptoms: Vec<usize> = roots
        .iter()
        .copied()
        .filter(|&i| !findings[i].class.is_cause() && findings[i].strong)
        .collect();
    let workload = roots.iter().copied().find(|&i| findings[i].class == Class::Workload);
    let tighter = tighter_end(&findings, &strong_causes);
    // Where the workload's own finding answers the question the test
    // exists for, of several strong causes the only one that explains that
    // finding: the others, however short of CPU, are not what the answer
    // shows (a files sender that needed 0.02 s of CPU and waited for most
    // of it, beside the receiver whose starvation is the per-file overhead
    // seen). Elsewhere a starved end's mark may be invisible (an unpaced
    // UDP sender just sends less), so the ready-time shares decide.
    let marked: Vec<usize> = match workload_first {
        true => strong_causes
            .iter()
            .copied()
            .filter(|&a| {
                (0..n).any(|b| {
                    findings[b].class == Class::Workload && explains(&findings[a], &findings[b], workload_first)
                })
            })
            .collect(),
        false => Vec::new(),
    };
    let primary: Result<usize, Vec<usize>> = if let Some(i) = pick(Class::ModelExceeded) {
        Ok(i)
    } else if let (true, Some(i)) = (
        workload_first,
        workload.filter(|&i| findings[i].strong || strong_causes.is_empty()),
    ) {
        Ok(i)
    } else if let Some(i) = pick(Class::Link) {
        Ok(i)
    } else if strong_causes.len() == 1 {
        Ok(strong_causes[0])
    } else if let [i] = marked[..] {
        Ok(i)
    } else if let Some((i, _)) = tighter {
        Ok(i)
    } else if strong_causes.len() > 1 {
        Err(strong_causes)
    } else if weak_causes.len() == 1 && strong_symptoms.is_empty() {
        Ok(weak_causes[0])
    } else if !weak_causes.is_empty() {
        Err(weak_causes.iter().chain(&strong_symptoms).copied().collect())
    } else {
        // Symptoms only: the first (the rules' order), strong before weak.
        Ok(strong_symptoms.first().copied().unwrap_or(roots[0]))
    };
    let mut findings = findings;
    if let (Ok(root), Some((tight, other))) = (&primary, tighter) {
        if *root == tight {
            let (ran, other_ran) = (
                findings[tight].ran_percent_of_ready.unwrap_or_default(),
                findings[other].ran_percent_of_ready.unwrap_or_default(),
            );
            let other_side = findings[other].side.clone().unwrap_or_else(|| "other end".into());
            let words = format!(
                " (the tighter end: its threads ran {ran:.0}% of the time they were ready, the {other_side}'s {other_ran:.0}%)"
            );
            findings[tight].summary.push_str(&words);
            findings[tight].consequence.push_str(&words);
        }
    }
    match primary {
        Ok(root) => one_cause(&findings, &explained_by, root),
        Err(candidates) if candidates.iter().all(|&i| findings[i].class == Class::Cpu) => {
            both_ends(&findings, &explained_by, &candidates)
        }
        Err(candidates) => not_sure(&findings, &explained_by, &candidates),
    }
}

/// How much less CPU, against its ready time, one end short of CPU must
/// have had than the other for it alone to be the cause: the rate is the
/// slower end's, and at half the other's share it is clearly the slower.
pub const TIGHTER_END_FACTOR: f64 = 0.5;

/// Of two ends short of CPU, the one whose threads ran at most
/// [`TIGHTER_END_FACTOR`] of the other's share of their ready time: it set
/// the rate (a host held to 2% of a core beside one the machine's other
/// work kept waiting half the time). None when the candidates are not two
/// such ends, or their shares are too close to tell.
fn tighter_end(findings: &[Finding], candidates: &[usize]) -> Option<(usize, usize)> {
    let [a, b] = candidates else {
        return None;
    };
    let (fa, fb) = (&findings[*a], &findings[*b]);
    if fa.class != Class::Cpu || fb.class != Class::Cpu || fa.party == fb.party {
        return None;
    }
    let (ra, rb) = (fa.ran_percent_of_ready?, fb.ran_percent_of_ready?);
    match () {
        _ if ra <= TIGHTER_END_FACTOR * rb => Some((*a, *b)),
        _ if rb <= TIGHTER_END_FACTOR * ra => Some((*b, *a)),
        _ => None,
    }
}

/// Both ends short of CPU at once (one CPU finding per end after
/// [`merge_cpu`]): one cause, both named.
fn both_ends(findings: &[Finding], explained_by: &[Option<usize>], ends: &[usize]) -> Verdict {
    let order = all_chains(findings, explained_by, ends);
    let strong = ends.iter().all(|&i| findings[i].strong);
    let words: Vec<String> = ends.iter().map(|&i| chain_words(findings, explained_by, i)).collect();
    let weak = if strong { "" } else { " (weak evidence)" };
    let role = |i: usize| match () {
        _ if ends.contains(&i) => "cause",
        _ if explained_by[i].is_some() => "consequence",
        _ => "also",
    };
    Verdict {
        kind: findings[ends[0]].kind.clone(),
        summary: format!("both ends short of CPU: {}{weak}", words.join("; ")),
        side: Some("both".into()),
        evidence: evidence(findings, explained_by, &order, role),
    }
}

/// The verdict of a paced test that delivered its offered rate: nothing
/// limited the figure; every finding is "also".
pub fn delivered(findings: Vec<Finding>) -> Verdict {
    let findings = merge_cpu(findings);
    let mut summary = "no bottleneck: the sender reached its offered rate and nothing was lost".to_string();
    let words: Vec<&str> = findings
        .iter()
        .filter(|f| f.class != Class::BelowLink)
        .map(|f| f.summary.as_str())
        .collect();
    if !words.is_empty() {
        summary.push_str("; also: ");
        summary.push_str(&words.join("; "));
    }
    let evidence = findings
        .iter()
        .map(|f| Evidence {
            kind: f.kind.clone(),
            side: f.side.clone(),
            strength: if f.strong { "strong" } else { "weak" }.into(),
            role: "also".into(),
            explained_by: None,
            summary: f.summary.clone(),
        })
        .collect();
    Verdict {
        kind: "none".into(),
        summary,
        side: None,
        evidence,
    }
}

/// One finding per end for its CPU: a throttled cgroup, waiting threads
/// and busy threads of the same end are one cause seen three ways. The
/// most specific kind names it (`cgroup_throttled`, then `cpu_starved`).
fn merge_cpu(findings: Vec<Finding>) -> Vec<Finding> {
    let mut out: Vec<Finding> = Vec::new();
    for f in findings {
        match out
            .iter_mut()
            .find(|o| o.class == Class::Cpu && f.class == Class::Cpu && o.party == f.party)
        {
            Some(o) => {
                o.summary = format!("{}; {}", o.summary, detail_of(&f.summary));
                o.consequence = o.summary.clone();
                o.strong |= f.strong;
                o.ran_percent_of_ready = match (o.ran_percent_of_ready, f.ran_percent_of_ready) {
                    (Some(x), Some(y)) => Some(x.min(y)),
                    (x, y) => x.or(y),
                };
            }
            None => out.push(f),
        }
    }
    out
}

/// A finding's words after its "receiver CPU-bound: " head, to add to
/// another finding about the same end.
fn detail_of(summary: &str) -> &str {
    summary.split_once(": ").map_or(summary, |(_, rest)| rest)
}

/// The chain under `root`: its consequences, depth first.
fn chain(findings: &[Finding], explained_by: &[Option<usize>], root: usize, order: &mut Vec<usize>) {
    order.push(root);
    let mut children: Vec<usize> = (0..findings.len()).filter(|&i| explained_by[i] == Some(root)).collect();
    children.sort_by_key(|&i| findings[i].class.depth());
    for child in children {
        chain(findings, explained_by, child, order);
    }
}

fn evidence(
    findings: &[Finding],
    explained_by: &[Option<usize>],
    order: &[usize],
    role_of: impl Fn(usize) -> &'static str,
) -> Vec<Evidence> {
    let position = |i: usize| order.iter().position(|&o| o == i);
    order
        .iter()
        .map(|&i| {
            let f = &findings[i];
            Evidence {
                kind: f.kind.clone(),
                side: f.side.clone(),
                strength: if f.strong { "strong" } else { "weak" }.into(),
                role: role_of(i).into(),
                explained_by: explained_by[i].and_then(position),
                summary: f.summary.clone(),
            }
        })
        .collect()
}

/// Every finding in chains: those of `roots` first, then the rest.
fn all_chains(findings: &[Finding], explained_by: &[Option<usize>], roots: &[usize]) -> Vec<usize> {
    let mut order = Vec::new();
    for &r in roots {
        chain(findings, explained_by, r, &mut order);
    }
    for i in 0..findings.len() {
        if explained_by[i].is_none() && !order.contains(&i) {
            chain(findings, explained_by, i, &mut order);
        }
    }
    order
}

fn chain_words(findings: &[Finding], explained_by: &[Option<usize>], root: usize) -> String {
    let mut order = Vec::new();
    chain(findings, explained_by, root, &mut order);
    let mut words = findings[root].summary.clone();
    for &i in &order[1..] {
        words.push_str(" → ");
        words.push_str(&findings[i].consequence);
    }
    words
}

fn one_cause(findings: &[Finding], explained_by: &[Option<usize>], root: usize) -> Verdict {
    let mut in_chain = Vec::new();
    chain(findings, explained_by, root, &mut in_chain);
    let order = all_chains(findings, explained_by, &[root]);
    let f = &findings[root];
    let mut summary = chain_words(findings, explained_by, root);
    if !f.strong {
        summary.push_str(" (weak evidence)");
    }
    let also: Vec<String> = order
        .iter()
        .filter(|&&i| !in_chain.contains(&i) && explained_by[i].is_none() && findings[i].class != Class::BelowLink)
        .map(|&i| chain_words(findings, explained_by, i))
        .collect();
    if !also.is_empty() {
        summary.push_str("; also: ");
        summary.push_str(&also.join("; "));
    }
    let role = |i: usize| match () {
        _ if i == root => "cause",
        _ if in_chain.contains(&i) => "consequence",
        _ if explained_by[i].is_some() => "consequence",
        _ => "also",
    };
    Verdict {
        kind: f.kind.clone(),
        summary,
        side: f.side.clone(),
        evidence: evidence(findings, explained_by, &order, role),
    }
}

fn not_sure(findings: &[Finding], explained_by: &[Option<usize>], candidates: &[usize]) -> Verdict {
    let order = all_chains(findings, explained_by, candidates);
    let words: Vec<String> = candidates
        .iter()
        .map(|&i| {
            let weak = if findings[i].strong { "" } else { " (weak evidence)" };
            format!("{}{weak}", chain_words(findings, explained_by, i))
        })
        .collect();
    let role = |i: usize| match () {
        _ if candidates.contains(&i) => "candidate",
        _ if explained_by[i].is_some() => "consequence",
        _ => "also",
    };
    Verdict {
        kind: "not_sure".into(),
        summary: format!(
            "not sure: {} (each holds, and nothing measured says which explains the other)",
            words.join("; or ")
        ),
        side: None,
        evidence: evidence(findings, explained_by, &order, role),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cpu(party: Party, side: &str, strong: bool) -> Finding {
        Finding::new(
            "cpu_starved",
            Class::Cpu,
            Some(party),
            Some(side),
            format!("{side} CPU-starved: waited"),
        )
        .strong_if(strong)
    }

    fn retransmits(sender: Party) -> Finding {
        Finding::new(
            "retransmitting",
            Class::Retransmits { sender },
            Some(sender),
            Some("sender"),
            "retransmitting: 4.3%".into(),
        )
        .consequence("the sender retransmitted 4.3%".into())
    }

    #[test]
    fn a_starved_receiver_explains_the_senders_retransmissions() {
        let v = conclude(
            vec![retransmits(Party::Client), cpu(Party::Agent, "receiver", true)],
            false,
        );
        assert_eq!((v.kind.as_str(), v.side.as_deref()), ("cpu_starved", Some("receiver")));
        assert_eq!(
            v.summary,
            "receiver CPU-starved: waited → the sender retransmitted 4.3%"
        );
        assert_eq!(v.evidence[0].role, "cause");
        assert_eq!(
            (
                v.evidence[1].kind.as_str(),
                v.evidence[1].role.as_str(),
                v.evidence[1].explained_by
            ),
            ("retransmitting", "consequence", Some(0))
        );
    }

    #[test]
    fn a_starved_sender_does_not_explain_its_own_retransmissions() {
        let v = conclude(
            vec![retransmits(Party::Client), cpu(Party::Client, "sender", true)],
            false,
        );
        assert_eq!(v.kind, "cpu_starved");
        assert!(v.summary.contains("; also: retransmitting"), "{}", v.summary);
        assert_eq!(v.evidence[1].role, "also");
    }

    #[test]
    fn two_unrelated_strong_causes_are_not_sure_and_both_shown() {
        let window = Finding::new(
            "send_buffer_limited",
            Class::SendBuffer,
            Some(Party::Client),
            Some("sender"),
            "send-buffer-limited".into(),
        );
        let v = conclude(vec![cpu(Party::Agent, "receiver", true), window], false);
        assert_eq!((v.kind.as_str(), v.side), ("not_sure", None));
        assert!(v.summary.contains("receiver CPU-starved") && v.summary.contains("send-buffer-limited"));
        assert!(v.evidence.iter().all(|e| e.role == "candidate"));
    }

    #[test]
    fn a_weak_cause_beside_a_strong_unexplained_symptom_is_not_sure() {
        let v = conclude(
            vec![retransmits(Party::Client), cpu(Party::Client, "sender", false)],
            false,
        );
        assert_eq!(v.kind, "not_sure");
        let v = conclude(vec![cpu(Party::Client, "sender", false)], false);
        assert_eq!(v.kind, "cpu_starved");
        assert!(v.summary.ends_with("(weak evidence)"), "{}", v.summary);
    }

    #[test]
    fn the_link_explains_retransmissions_and_outranks_a_starved_end() {
        let link = Finding::new("link_bound", Class::Link, None, Some("path"), "link-bound: 99%".into());
        let v = conclude(
            vec![link, retransmits(Party::Client), cpu(Party::Client, "sender", true)],
            false,
        );
        assert_eq!((v.kind.as_str(), v.side.as_deref()), ("link_bound", Some("path")));
        assert!(
            v.summary.starts_with("link-bound: 99% → the sender retransmitted"),
            "{}",
            v.summary
        );
        assert!(v.summary.contains("also: sender CPU-starved"), "{}", v.summary);
    }

    #[test]
    fn one_ends_cgroup_and_waiting_threads_are_one_cause() {
        let throttled = Finding::new(
            "cgroup_throttled",
            Class::Cpu,
            Some(Party::Agent),
            Some("receiver"),
            "receiver CPU-bound: its cgroup throttled it".into(),
        );
        let v = conclude(vec![throttled, cpu(Party::Agent, "receiver", true)], false);
        assert_eq!(v.kind, "cgroup_throttled");
        assert_eq!(v.summary, "receiver CPU-bound: its cgroup throttled it; waited");
        assert_eq!(v.evidence.len(), 1);
    }

    #[test]
    fn of_two_starved_ends_the_one_that_ran_far_less_is_the_cause() {
        // A host held to 2% of a core (its threads ran 4% of their ready
        // time) beside a sender the machine's other work kept waiting
        // (it ran 35%): the receiver set the rate; the sender is "also".
        let sender = cpu(Party::Client, "sender", true).ran_percent_of_ready(35.0);
        let receiver = cpu(Party::Agent, "receiver", true).ran_percent_of_ready(4.0);
        let v = conclude(vec![sender.clone(), receiver.clone()], false);
        assert_eq!((v.kind.as_str(), v.side.as_deref()), ("cpu_starved", Some("receiver")));
        assert!(
            v.summary
                .contains("the tighter end: its threads ran 4% of the time they were ready, the sender's 35%"),
            "{}",
            v.summary
        );
        assert!(v.summary.contains("; also: sender CPU-starved"), "{}", v.summary);
        let roles: Vec<(&str, &str)> = v
            .evidence
            .iter()
            .map(|e| (e.side.as_deref().unwrap_or(""), e.role.as_str()))
            .collect();
        assert_eq!(roles, [("receiver", "cause"), ("sender", "also")]);
        // Too close to tell (more than half of the other's share): both.
        let close = conclude(vec![sender.ran_percent_of_ready(7.0), receiver.clone()], false);
        assert_eq!(close.side.as_deref(), Some("both"));
        // Without the shares measured on both ends: both, as before.
        let unmeasured = conclude(vec![cpu(Party::Client, "sender", true), receiver], false);
        assert_eq!(unmeasured.side.as_deref(), Some("both"));
    }

    #[test]
    fn of_two_starved_ends_the_one_whose_starvation_shows_is_the_cause() {
        // Seen under a busy suite: small files, the sender's threads ran 8%
        // of their ready time (0.02 s in all), the receiver's 21%; the
        // result is the receiver's per-file overhead, which only the
        // receiver's starvation explains. The ready-time shares alone would
        // name the sender.
        let sender = cpu(Party::Client, "sender", true).ran_percent_of_ready(8.0);
        let receiver = cpu(Party::Agent, "receiver", true).ran_percent_of_ready(21.0);
        let files = Finding::new(
            "files_per_file_overhead",
            Class::Workload,
            Some(Party::Agent),
            Some("receiver"),
            "files: 5% of raw TCP; limited by: per-file overhead".into(),
        )
        .strong_if(true);
        let v = conclude(vec![sender, receiver, files], true);
        assert_eq!(
            (v.kind.as_str(), v.side.as_deref()),
            ("cpu_starved", Some("receiver")),
            "{v:?}"
        );
        let roles: Vec<(&str, &str, &str)> = v
            .evidence
            .iter()
            .map(|e| (e.kind.as_str(), e.side.as_deref().unwrap_or(""), e.role.as_str()))
            .collect();
        assert_eq!(
            roles,
            [
                ("cpu_starved", "receiver", "cause"),
                ("files_per_file_overhead", "receiver", "consequence"),
                ("cpu_starved", "sender", "also")
            ]
        );
    }

    #[test]
    fn on_one_kernel_a_starved_receiver_holds_its_sender_below_the_offer() {
        let short = || {
            Finding::new(
                "offered_rate_not_reached",
                Class::OfferShort { sender: Party::Client },
                Some(Party::Client),
                Some("sender"),
                "sender below its offered rate".into(),
            )
        };
        let receiver = cpu(Party::Agent, "receiver", true);
        let mut one = short();
        one.one_kernel = true;
        let v = conclude(vec![receiver.clone(), one], false);
        assert_eq!((v.kind.as_str(), v.side.as_deref()), ("cpu_starved", Some("receiver")));
        assert_eq!(v.evidence[1].role, "consequence");
        // Across two kernels the receiver's CPU holds no sender back.
        let v = conclude(vec![receiver.clone(), short()], false);
        assert_eq!(v.kind, "not_sure");
        // Nor does weak starvation.
        let mut one = short();
        one.one_kernel = true;
        let v = conclude(vec![cpu(Party::Agent, "receiver", false), one], false);
        assert_ne!(v.side.as_deref(), Some("receiver"));
    }

    #[test]
    fn both_ends_starved_at_once_is_one_cause_naming_both() {
        let v = conclude(
            vec![cpu(Party::Client, "sender", true), cpu(Party::Agent, "receiver", true)],
            false,
        );
        assert_eq!((v.kind.as_str(), v.side.as_deref()), ("cpu_starved", Some("both")));
        assert_eq!(
            v.summary,
            "both ends short of CPU: sender CPU-starved: waited; receiver CPU-starved: waited"
        );
    }

    #[test]
    fn nothing_found_is_none_and_a_rate_below_the_link_alone_is_nothing() {
        assert_eq!(conclude(vec![], false).kind, "none");
        let below = Finding::new("below_line_rate", Class::BelowLink, None, Some("path"), "60%".into());
        assert_eq!(conclude(vec![below], false).kind, "none");
    }
}
