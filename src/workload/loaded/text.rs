//! How a `loaded` result reads: to the registry ([`LoadedResults`]'s
//! result traits: its figures, case, verdict questions and charts) and as
//! text: one line per phase (throughput, round trip percentiles, added
//! delay, RPM, when it was stable), then per phase the verdict and the
//! queues behind it. The figures and the verdict's sentence are the
//! result's ([`super::result`]); this file only reads them.

use std::io::{self, Write};
use std::sync::Arc;

use super::chart::LoadTimeline;
use super::chart_cdf::LoadCdf;
use super::result::{bytes, ms, phase_conclusion, summarize, BothEnds, CpuShare, LoadedResult, LoadedResults};
use super::{LoadedParams, KEY};
use crate::model::TrialResult;
use crate::units::Rate;
use crate::workload::{
    Better, ChartData, ChartKind, ChartViews, Figure, Figures, Metric, Stored, TextView, VerdictQuestions,
};

const RPM: Metric = Metric {
    name: "rpm",
    option: "rpm",
    label: "responsiveness under load (round trips per minute)",
    unit: "RPM",
    pointer: "/sum/loaded/rpm",
    divisor: 1.0,
    better: Better::Higher,
};

/// The delay the load adds to the idle round trip (the worst phase's median).
const ADDED_P50: Metric = Metric {
    name: "added_p50_seconds",
    option: "added",
    label: "delay added under load (median)",
    unit: "s",
    pointer: "/sum/loaded/added_p50_seconds",
    divisor: 1.0,
    better: Better::Lower,
};

const ADDED_P99: Metric = Metric {
    name: "added_p99_seconds",
    option: "added-p99",
    label: "delay added under load (99th percentile)",
    unit: "s",
    pointer: "/sum/loaded/added_p99_seconds",
    divisor: 1.0,
    better: Better::Lower,
};

const IDLE_RTT: Metric = Metric {
    name: "idle_rtt_p50_seconds",
    option: "idle-rtt",
    label: "idle round trip (median)",
    unit: "s",
    pointer: "/sum/loaded/idle/rtt_p50_seconds",
    divisor: 1.0,
    better: Better::Lower,
};

impl Figures for LoadedResults {
    fn figures(&self) -> &'static [Metric] {
        const FIGURES: [Metric; 6] = [
            RPM,
            ADDED_P50,
            ADDED_P99,
            IDLE_RTT,
            Metric::CLIENT_CPU,
            Metric::AGENT_CPU,
        ];
        &FIGURES
    }

    fn summarize(&self, trial: &mut TrialResult) {
        if let Some(total) = summarize(trial) {
            trial.sum.extras.set(KEY, &total);
        }
    }

    fn figure_of_merit(&self, trial: &TrialResult) -> Figure {
        let total: LoadedResult = trial.sum.extras.get(KEY).unwrap_or_default();
        Figure {
            metric: RPM.name,
            unit: RPM.unit,
            value: total.rpm.unwrap_or(0.0),
            qualifier: "",
        }
    }

    fn headline(&self) -> Metric {
        RPM
    }

    /// The delay the load adds to the idle round trip (the worst phase's median).
    fn mesh_figure(&self) -> Metric {
        ADDED_P50
    }
}

impl Stored for LoadedResults {
    /// The phases, the load (streams per direction, writes, window,
    /// congestion control, unsent limit) and the probe interval.
    fn case(&self, spec: &crate::model::TestSpec) -> Vec<crate::workload::CasePart> {
        use crate::workload::case;
        let p: LoadedParams = spec.params().unwrap_or_default();
        let phases: Vec<&str> = p.phases.iter().map(|p| p.as_str()).collect();
        let mut parts = vec![
            ("workload", "loaded".to_string()),
            ("phases", phases.join(",")),
            ("streams", format!("{} per direction", case::streams(spec.streams))),
            ("message", format!("{} writes", case::size(spec.message_bytes))),
        ];
        parts.extend(case::window(spec));
        if let Some(cc) = &p.tcp.congestion {
            parts.push(("congestion", format!("cc {cc}")));
        }
        if p.tcp.zerocopy {
            parts.push(("zerocopy", "zero-copy".into()));
        }
        if let Some(lowat) = p.notsent_lowat_bytes {
            parts.push(("notsent_lowat", format!("unsent at most {}", case::size(lowat))));
        }
        parts.push((
            "probe_interval",
            format!("probes every {} ms", p.probe_interval_seconds * 1e3),
        ));
        parts
    }
}

impl VerdictQuestions for LoadedResults {
    fn line_rate_applies(&self) -> bool {
        // The run's average includes the idle phase and the gaps.
        false
    }

    /// The question of `loaded` is the delay the load adds and the queue
    /// that holds it: the run's verdict is the phases' conclusion.
    fn findings(&self, trial: &TrialResult) -> Vec<crate::model::Verdict> {
        trial
            .sum
            .extras
            .get::<LoadedResult>(KEY)
            .and_then(|total| phase_conclusion(&total))
            .into_iter()
            .collect()
    }

    fn own_verdict_before_the_link(&self) -> bool {
        true
    }
}

impl TextView for LoadedResults {
    /// The `[SUM]` line covers the whole run, idle and every phase at
    /// once: its average rate is no phase's (issue 72, item 9), so it
    /// gives the bytes alone, says what they cover, and points to the
    /// phases' own rates.
    fn sum_cells(&self, trial: &TrialResult, flow: crate::model::Flow) -> Option<String> {
        let total = match flow {
            crate::model::Flow::ClientToAgent => trial.sum.client_to_agent.as_ref(),
            crate::model::Flow::AgentToClient => trial.sum.agent_to_client.as_ref(),
        }?;
        Some(whole_run_cells(total.receiver.bytes))
    }

    fn write_summary(&self, trial: &TrialResult, out: &mut dyn std::io::Write) -> std::io::Result<()> {
        match trial.sum.extras.get::<LoadedResult>(KEY) {
            Some(total) => write(&total, out),
            None => Ok(()),
        }
    }
}

impl ChartViews for LoadedResults {
    /// The classic view of the test (throughput and round trips over
    /// time, the phases shaded) and the round trips' distribution per phase.
    fn chart_kinds(&self) -> &'static [ChartKind] {
        const NONE_FOUND: &str = "none is a latency-under-load run (nicbench loaded) with its probes: \
                                  add --workload loaded or change the filters";
        const SUBJECT: &str = "Latency under load";
        &[
            ChartKind {
                name: "loaded",
                help: "Throughput per direction and probe round trips over time, phases shaded, of one \
                       `nicbench loaded` run (the newest, or --id)",
                data: ChartData::PerRun {
                    draw: |doc, run| Some(Arc::new(LoadTimeline::of(doc, KEY, run)?)),
                    subject: SUBJECT,
                },
                none_found: NONE_FOUND,
            },
            ChartKind {
                name: "loaded-cdf",
                help: "The UDP probes' round-trip distribution, idle against each load phase, of one \
                       `nicbench loaded` run (the newest, or --id)",
                data: ChartData::PerRun {
                    draw: |doc, run| Some(Arc::new(LoadCdf::of(doc, KEY, run)?)),
                    subject: SUBJECT,
                },
                none_found: NONE_FOUND,
            },
        ]
    }
}

/// A `[SUM]` line's cells: the bytes received over idle and every phase.
fn whole_run_cells(received_bytes: u64) -> String {
    format!(
        "{} received over the whole run (idle and every phase; each phase's rate is on its LOADED line)",
        bytes(received_bytes as f64)
    )
}

fn signed_ms(seconds: Option<f64>) -> String {
    match seconds {
        Some(s) => format!("{:+.2} ms", s * 1e3),
        None => "-".into(),
    }
}

fn rpm(value: Option<f64>) -> String {
    value.map_or("-".into(), |r| format!("{r:.0}"))
}

fn percent(value: Option<f64>) -> String {
    value.map_or("-".into(), |l| format!("{l:.1}%"))
}

/// The text lines of a result.
pub fn write(total: &LoadedResult, out: &mut dyn Write) -> io::Result<()> {
    let idle = &total.idle;
    writeln!(
        out,
        "LOADED {:<13} {:>15}  rtt p50 {:>9}  p99 {:>9}  {:>19}  RPM {:>6}  loss {}",
        "idle",
        "",
        ms(idle.rtt_p50_seconds),
        ms(idle.rtt_p99_seconds),
        "",
        rpm(idle.rpm),
        percent(idle.probe_loss_percent)
    )?;
    for p in &total.phases {
        writeln!(
            out,
            "LOADED {:<13} {:>15}  rtt p50 {:>9}  p99 {:>9}  added {:>10} {:>10}  RPM {:>6}  loss {}  stable {}{}",
            p.name.as_str(),
            Rate(p.receiver_bits_per_second).to_string(),
            ms(p.rtt_p50_seconds),
            ms(p.rtt_p99_seconds),
            signed_ms(p.added_p50_seconds),
            signed_ms(p.added_p99_seconds),
            rpm(p.rpm),
            percent(p.probe_loss_percent),
            match p.stable_after_seconds {
                Some(s) if s <= p.seconds / 2.0 => format!("after {s:.2} s"),
                Some(s) => format!("after {s:.2} s (second half used)"),
                None => "never (second half used)".into(),
            },
            cpu_text(&p.cpu),
        )?;
    }
    if let Some(offset) = idle.clock_offset_seconds {
        match (idle.clock_offset_bound_seconds, idle.clock_offset_from.as_deref()) {
            (Some(bound), from) => writeln!(
                out,
                "LOADED one-way delays stand on the clocks' offset {} +/- {:.2} ms ({})",
                signed_ms(Some(offset)),
                bound * 1e3,
                match from {
                    Some("control_connection") => "the control connection's clock exchanges before and after",
                    Some("one_clock") => "both ends read one kernel's clock",
                    _ => "the idle probes as clock exchanges",
                }
            )?,
            // A document of a build before the bound.
            (None, _) => writeln!(
                out,
                "LOADED one-way delays stand on the clocks' offset estimated while idle: {}",
                signed_ms(Some(offset))
            )?,
        }
    }
    for p in &total.phases {
        // The verdict's clauses one to a line, so no terminal cuts them.
        let mut clauses = p.verdict.split("; ");
        writeln!(out, "{}: {}", p.name.as_str(), clauses.next().unwrap_or_default())?;
        for clause in clauses {
            writeln!(out, "  {clause}")?;
        }
        for q in p.queues.iter().filter(|q| q.bytes >= 1.0) {
            match q.seconds {
                Some(s) => writeln!(out, "  queue: {} {} ({})", q.name, bytes(q.bytes), ms(Some(s)))?,
                None => writeln!(out, "  queue: {} {}", q.name, bytes(q.bytes))?,
            }
        }
        if let (Some(up), Some(down)) = (p.up_delay_p50_seconds, p.down_delay_p50_seconds) {
            writeln!(out, "{}", one_way_line(p, up, down, idle.clock_offset_bound_seconds))?;
        }
    }
    Ok(())
}

/// A phase's one-way medians with the clocks' bound, and which direction
/// holds the delay the load added. Medians the bound is wider than are
/// not printed: they would mean nothing.
fn one_way_line(p: &super::result::PhaseFigures, up: f64, down: f64, bound: Option<f64>) -> String {
    let rates = format!(
        "download {}, upload {}",
        Rate(p.download_bits_per_second),
        Rate(p.upload_bits_per_second)
    );
    let Some(bound) = bound else {
        return format!(
            "  one-way p50: client->agent {}, agent->client {}; {rates}",
            ms(Some(up)),
            ms(Some(down))
        );
    };
    let mut line = if bound >= up.max(down) {
        format!(
            "  one-way p50: not shown, the clocks' offset is known to +/- {:.2} ms, more than either delay",
            bound * 1e3
        )
    } else {
        format!(
            "  one-way p50: client->agent {}, agent->client {} (+/- {:.2} ms)",
            ms(Some(up)),
            ms(Some(down)),
            bound * 1e3
        )
    };
    if let (Some(added_up), Some(added_down)) = (p.added_up_p50_seconds, p.added_down_p50_seconds) {
        line.push_str(&format!(
            "; added one-way: client->agent {}, agent->client {}",
            signed_ms(Some(added_up)),
            signed_ms(Some(added_down))
        ));
        if let Some(name) = super::result::delayed_direction(p, bound) {
            line.push_str(&format!(": the delay is {name}'s"));
        }
    }
    format!("{line}; {rates}")
}

/// A phase's CPU on both hosts, as the run's CPU lines say it:
/// "  CPU client 41.0% (user 3.1%, sys 30.2%, softirq 7.7%), agent ...".
fn cpu_text(cpu: &BothEnds) -> String {
    let one = |name: &str, c: &Option<CpuShare>| {
        c.map(|c| {
            format!(
                "{name} {:.1}% (user {:.1}%, sys {:.1}%, softirq {:.1}%)",
                c.utilization_percent, c.user_percent, c.system_percent, c.softirq_percent
            )
        })
    };
    let ends: Vec<String> = [one("client", &cpu.client), one("agent", &cpu.agent)]
        .into_iter()
        .flatten()
        .collect();
    match ends.is_empty() {
        true => String::new(),
        false => format!("  CPU {}", ends.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::loaded::result::PhaseFigures;

    /// The first phase of a real loopback run (tests/fixtures), its
    /// one-way figures set as a test needs them.
    fn phase(up: f64, down: f64, added_up: f64, added_down: f64) -> PhaseFigures {
        let doc: serde_json::Value =
            serde_json::from_str(include_str!("../../../tests/fixtures/loaded-loopback.json")).unwrap();
        let mut phase: PhaseFigures = serde::Deserialize::deserialize(&doc["sum"]["loaded"]["phases"][0]).unwrap();
        phase.download_bits_per_second = 95e6;
        phase.upload_bits_per_second = 94e6;
        (phase.added_up_p50_seconds, phase.added_down_p50_seconds) = (Some(added_up), Some(added_down));
        (phase.up_delay_p50_seconds, phase.down_delay_p50_seconds) = (Some(up), Some(down));
        phase
    }

    #[test]
    fn the_one_way_line_names_the_direction_that_holds_the_added_delay() {
        let p = phase(0.172, 0.003, 0.1719, 0.0029);
        assert_eq!(
            one_way_line(&p, 0.172, 0.003, Some(0.0004)),
            "  one-way p50: client->agent 172.00 ms, agent->client 3.00 ms (+/- 0.40 ms); added one-way: \
             client->agent +171.90 ms, agent->client +2.90 ms: the delay is client->agent (upload)'s; \
             download 95.00 Mbit/s, upload 94.00 Mbit/s"
        );
    }

    #[test]
    fn one_way_medians_inside_the_clocks_bound_are_not_printed_and_no_direction_is_named() {
        let p = phase(0.00004, 0.00003, 0.00001, 0.00002);
        let line = one_way_line(&p, 0.00004, 0.00003, Some(0.0002));
        assert!(
            line.starts_with(
                "  one-way p50: not shown, the clocks' offset is known to +/- 0.20 ms, more than either delay"
            ),
            "{line}"
        );
        assert!(!line.contains("the delay is"), "{line}");
        // A document from before the bound: the medians as they were.
        assert!(one_way_line(&p, 0.00004, 0.00003, None).starts_with("  one-way p50: client->agent 0.04 ms"));
    }
}
