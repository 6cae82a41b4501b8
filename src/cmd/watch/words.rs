//! The words of a `watch` report. The result document keeps the schema's
//! parties (`client` = this host, `agent` = the peer), but a person reads
//! about this host and the peer by name, and about the two directions as
//! this host's interface counted them (transmitted, received) — never
//! "client->agent" for a command that may have moved data either way.

use crate::model::{Party, RunResult};

/// Share by which one direction must outweigh the other for its ends to be
/// called sender and receiver (the other direction carries only ACKs).
const DOMINANT: u64 = 10;

/// How this watch names its ends and directions.
pub struct Words {
    /// "this host vm".
    here: String,
    /// "peer b" (or "the other end" when no peer was sampled).
    peer: String,
    /// Which end sent most of the bytes, when one did.
    sender: Option<Party>,
    iface: String,
    peer_sampled: bool,
}

impl Words {
    pub fn of(run: &RunResult, iface: &str, peer_sampled: bool) -> Words {
        let name = |facts: &crate::model::HostFacts, address: &str| {
            if facts.hostname.is_empty() {
                address.to_string()
            } else {
                crate::outside_text::terminal(&facts.hostname).into_owned()
            }
        };
        let sum = &run.result.sum;
        let sent = sum.client_to_agent.as_ref().map_or(0, |f| f.sender.bytes);
        let received = sum.agent_to_client.as_ref().map_or(0, |f| f.receiver.bytes);
        let sender = if sent > 0 && sent >= received.saturating_mul(DOMINANT) {
            Some(Party::Client)
        } else if received > 0 && received >= sent.saturating_mul(DOMINANT) {
            Some(Party::Agent)
        } else {
            None
        };
        Words {
            here: format!("this host {}", name(&run.client.facts, &run.client.address)),
            peer: if peer_sampled || !run.agent.facts.hostname.is_empty() {
                format!("peer {}", name(&run.agent.facts, &run.agent.address))
            } else {
                "the other end".into()
            },
            sender,
            iface: iface.to_string(),
            peer_sampled,
        }
    }

    /// A party in words: "receiver (peer b)", "this host vm".
    fn party(&self, party: Party) -> String {
        let name = match party {
            Party::Client => &self.here,
            Party::Agent => &self.peer,
        };
        match self.sender {
            Some(s) if s == party => format!("sender ({name})"),
            Some(_) => format!("receiver ({name})"),
            None => name.clone(),
        }
    }

    /// The verdict with the parties named: "client"/"agent" as whole words
    /// become this host and the peer.
    pub fn verdict(&self, summary: &str) -> String {
        let summary = summary
            .replace("client's host", "client")
            .replace("agent's host", "agent")
            .replace("client->agent", &format!("transmitted by {}", self.here))
            .replace("agent->client", &format!("received by {}", self.here));
        let mut out = String::new();
        let mut word = String::new();
        let flush = |word: &mut String, out: &mut String| {
            match word.as_str() {
                "client" => out.push_str(&self.party(Party::Client)),
                "agent" => out.push_str(&self.party(Party::Agent)),
                w => out.push_str(w),
            }
            word.clear();
        };
        for c in summary.chars() {
            if c.is_alphanumeric() || c == '_' || c == '-' {
                word.push(c);
            } else {
                flush(&mut word, &mut out);
                out.push(c);
            }
        }
        flush(&mut word, &mut out);
        out
    }

    /// The text report with this host, the peer and the directions named.
    pub fn report(&self, text: &str) -> String {
        let mut out = String::new();
        // The continuation lines of a line left out or replaced whole.
        let mut skipping = false;
        for line in text.lines() {
            if skipping && line.starts_with("    ") {
                continue;
            }
            skipping = line.starts_with("  socket buffers at the end:")
                || (!self.peer_sampled && line.starts_with("CPU agent "));
            if let Some(line) = self.line(line) {
                out.push_str(&line);
                out.push('\n');
            }
        }
        out
    }

    /// One line relabelled, or None to leave it out (socket buffers: there
    /// are no sockets of nicbench's own in a watch).
    fn line(&self, line: &str) -> Option<String> {
        let pad = |s: &str| format!("{s:<13}");
        if line.starts_with("nicbench watch:") {
            return Some(format!(
                "nicbench watch: {} <-> {}",
                self.here,
                if self.peer_sampled {
                    self.peer.clone()
                } else {
                    format!("{} (not sampled: give --peer HOST with an agent there)", self.peer)
                }
            ));
        }
        if line.starts_with("  socket buffers at the end:") {
            return None;
        }
        if line.starts_with("  1 stream each way") {
            let far = if self.peer_sampled {
                format!("; the other column is what {} counted", self.peer)
            } else {
                String::new()
            };
            return Some(format!(
                "  directions as counted on {} by {}: transmitted, received{far}",
                self.iface, self.here
            ));
        }
        if line.starts_with('[') {
            return Some(
                line.replace("client->agent", &pad("transmitted"))
                    .replace("agent->client", &pad("received")),
            );
        }
        if let Some(rest) = line.strip_prefix("CPU client ") {
            return Some(format!("CPU {}: {}", self.here, rest.trim_start()));
        }
        if let Some(rest) = line.strip_prefix("CPU agent ") {
            if !self.peer_sampled {
                return Some(format!(
                    "CPU {}: not sampled (give --peer HOST with an agent there)",
                    self.peer
                ));
            }
            return Some(format!("CPU {}: {}", self.peer, rest.trim_start()));
        }
        if let Some(rest) = line.strip_prefix("  (client and agent share one ") {
            return Some(format!("  ({} and {} share one {rest}", self.here, self.peer));
        }
        for party in [Party::Client, Party::Agent] {
            let name = if party == Party::Client { &self.here } else { &self.peer };
            // "Facts client vm: Debian ...": the host's name follows already.
            if let Some(rest) = line.strip_prefix(&format!("Facts {:<6} ", party.as_str())) {
                let role = if party == Party::Client { "this host" } else { "peer" };
                let role = if self.peer_sampled || party == Party::Client {
                    role
                } else {
                    "the other end:"
                };
                return Some(format!("Facts {role} {}", rest.trim_start()));
            }
            if let Some(rest) = line.strip_prefix(&format!("Counters {:<6} ", party.as_str())) {
                return Some(format!("Counters {name}: {}", rest.trim_start()));
            }
        }
        Some(line.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(sender: Option<Party>, peer_sampled: bool) -> Words {
        Words {
            here: "this host vm".into(),
            peer: if peer_sampled { "peer b" } else { "the other end" }.into(),
            sender,
            iface: "eth0".into(),
            peer_sampled,
        }
    }

    #[test]
    fn the_verdict_names_the_receiver_by_its_role_and_name() {
        let w = words(Some(Party::Client), true);
        assert_eq!(
            w.verdict("agent CPU-bound: core 1 at 100% (80% softirq)"),
            "receiver (peer b) CPU-bound: core 1 at 100% (80% softirq)"
        );
        assert_eq!(
            w.verdict("both ends CPU-bound: client its threads; agent core 0"),
            "both ends CPU-bound: sender (this host vm) its threads; receiver (peer b) core 0"
        );
        // Only whole words: "agents" or "client-side" stay as they are.
        assert_eq!(words(None, true).verdict("agents client-side"), "agents client-side");
    }

    #[test]
    fn directions_are_named_by_the_interface_never_client_to_agent() {
        let w = words(None, true);
        let text = "nicbench watch: client vm (10.0.0.1 (eth0)) -> agent b (10.0.0.2:5310)\n\
                    \x20 1 stream each way (bidir), 2.0 s, 1 B messages\n\
                    \x20 socket buffers at the end: sender 0 B send / receiver 0 B receive (kernel defaults)\n\
                    [SUM] client->agent     1.00 Gbit/s     0.99 Gbit/s\n\
                    [SUM] agent->client     1.00 Mbit/s     1.00 Mbit/s\n\
                    CPU client  10.0% of 2 cores\n\
                    CPU agent   90.0% of 4 cores\n\
                    Facts client vm: Debian\n\
                    Facts agent  b: Debian\n\
                    Counters agent  eth0: rx 5 / tx 6 packets\n";
        let out = w.report(text);
        assert!(!out.contains("client") && !out.contains("agent"), "{out}");
        assert!(!out.contains("socket buffers"), "{out}");
        assert!(out.contains("nicbench watch: this host vm <-> peer b"), "{out}");
        assert!(out.contains("[SUM] transmitted       1.00 Gbit/s"), "{out}");
        assert!(out.contains("[SUM] received          1.00 Mbit/s"), "{out}");
        assert!(out.contains("CPU peer b: 90.0% of 4 cores"), "{out}");
        assert!(out.contains("Counters peer b: eth0: rx 5"), "{out}");
        assert!(
            out.contains("Facts this host vm: Debian\nFacts peer b: Debian"),
            "{out}"
        );
        assert!(out.contains("counted on eth0 by this host vm"), "{out}");
        let alone =
            words(None, false).report("CPU agent  host-wide use not measured;\n    its own process 0.00 s\nLine\n");
        assert_eq!(
            alone,
            "CPU the other end: not sampled (give --peer HOST with an agent there)\nLine\n"
        );
    }
}
