//! The run listing of `nicbench runs`, the small formatting helpers the
//! store's commands share (UTC time, a figure with its unit), and what a
//! set of runs says about itself for a report's header: its time range
//! (runs without a start time are "unknown", not 1970), how many distinct
//! hosts, its verdicts in words with their counts. Every cell of the
//! listing is shown through `outside_text::terminal`: host names,
//! workloads and sources of imported runs come from outside.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{self, Write};

use crate::outside_text::terminal;
use crate::store::query::RunSummary;
use crate::units::Rate;

/// A figure with its unit: rates in Mbit/s or Gbit/s, sizes in whole
/// bytes, others with two decimals.
pub fn figure(value: f64, unit: &str) -> String {
    match unit {
        "bit/s" => Rate(value).to_string(),
        "B" => format!("{value:.0} B"),
        "" => format!("{value:.2}"),
        other => format!("{value:.2} {other}"),
    }
}

/// Seconds since the epoch as `YYYY-MM-DD HH:MM:SS` UTC.
pub fn utc(unix_seconds: f64) -> String {
    let secs = unix_seconds.max(0.0) as i64;
    let (days, rest) = (secs.div_euclid(86400), secs.rem_euclid(86400));
    // Howard Hinnant's days-to-civil.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02}",
        rest / 3600,
        rest / 60 % 60,
        rest % 60
    )
}

/// `client -> agent`, or the agent's address when the names are unknown.
pub fn hosts(run: &RunSummary) -> String {
    match (&run.client_host, &run.agent_host) {
        (Some(c), Some(a)) if !c.is_empty() && !a.is_empty() => format!("{c} -> {a}"),
        _ => run.agent_address.clone().unwrap_or_else(|| "-".into()),
    }
}

/// Widest tags cell of the listing, in characters; `show` has them whole.
pub const TAGS_WIDTH: usize = 48;

/// Widest single tag of the listing (a watch's command line as a tag).
const TAG_WIDTH: usize = 28;

/// When a run started, or `unknown` for an import whose format records
/// no time (NetPIPE), which holds 0.
pub fn started(run: &RunSummary) -> String {
    match has_start(run) {
        true => utc(run.started_at_unix_seconds),
        false => "unknown".into(),
    }
}

fn has_start(run: &RunSummary) -> bool {
    run.started_at_unix_seconds > 0.0 && run.started_at_unix_seconds.is_finite()
}

/// The span of time a set of runs was measured in: the first and last
/// start of the runs that have one, and how many have none.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TimeRange {
    pub first_unix_seconds: Option<f64>,
    pub last_unix_seconds: Option<f64>,
    /// Runs without a start time, left out of the range.
    pub unknown: usize,
}

impl TimeRange {
    pub fn of(runs: &[RunSummary]) -> TimeRange {
        let timed: Vec<f64> = runs
            .iter()
            .filter(|r| has_start(r))
            .map(|r| r.started_at_unix_seconds)
            .collect();
        TimeRange {
            first_unix_seconds: timed.iter().copied().reduce(f64::min),
            last_unix_seconds: timed.iter().copied().reduce(f64::max),
            unknown: runs.len() - timed.len(),
        }
    }

    /// `2026-11-24 10:00:00 to 2026-11-24 11:30:00 (1 run: unknown)`, or
    /// `unknown` when no run has a time.
    pub fn words(&self) -> String {
        let range = match (self.first_unix_seconds, self.last_unix_seconds) {
            (Some(a), Some(b)) if a == b => utc(a),
            (Some(a), Some(b)) => format!("{} to {}", utc(a), utc(b)),
            _ => return "unknown".into(),
        };
        match self.unknown {
            0 => range,
            1 => format!("{range} (1 run: unknown)"),
            n => format!("{range} ({n} runs: unknown)"),
        }
    }
}

/// How many distinct hosts took part in these runs: both ends' host names
/// (a loopback run is one host; a lab host has a name of its own), else
/// the agent's address when a run has no names (an import).
pub fn host_count<'a>(runs: impl IntoIterator<Item = &'a RunSummary>) -> usize {
    let mut hosts: BTreeSet<String> = BTreeSet::new();
    let mut unnamed_loopback = false;
    for run in runs {
        for name in [&run.client_host, &run.agent_host].into_iter().flatten() {
            if !name.is_empty() {
                hosts.insert(format!("name {name}"));
            }
        }
        if !run.agent_host.as_deref().unwrap_or("").is_empty() {
            continue;
        }
        let address = run
            .agent_address
            .as_deref()
            .and_then(|a| crate::address::split_host_port(a).ok())
            .map(|(host, _)| host);
        match address {
            // Loopback is the client's own host, named by another run.
            Some(ip) if ip == "localhost" || ip.parse::<std::net::IpAddr>().is_ok_and(|i| i.is_loopback()) => {
                unnamed_loopback = true;
            }
            Some(host) => {
                hosts.insert(format!("address {host}"));
            }
            None => {}
        }
    }
    hosts.len() + usize::from(unnamed_loopback && hosts.is_empty())
}

/// A verdict kind in words (`cpu_starved`: "starved of CPU").
pub fn verdict_words(kind: &str) -> String {
    if let Some(rest) = kind.strip_prefix("files_") {
        return format!("files: {}", verdict_words(rest));
    }
    let words = match kind {
        "none" => "no bottleneck",
        "cpu_bound" => "CPU-bound",
        "cpu_starved" => "starved of CPU",
        "cgroup_throttled" => "throttled by its cgroup",
        "link_bound" => "at line rate",
        "model_exceeded" => "above the line-rate model",
        "return_path_bound" => "the return path (ACKs)",
        "pacer_burst_loss" => "the sender's pacer bursts",
        "udp_loss" => "UDP loss",
        "path_loss" => "loss on the path",
        "socket_buffer_drops" => "socket buffer drops",
        "nic_drops" => "NIC drops",
        "retransmitting" => "retransmitting",
        "receive_window_limited" => "receive-window-limited",
        "send_buffer_limited" => "send-buffer-limited",
        "warmup_excluded" => "no bottleneck (warm-up excluded)",
        "link_slow" => "a link slower than the others",
        "links_at_line_rate" => "links at line rate",
        "mptcp_fallback" => "MPTCP fell back to TCP",
        "mptcp_subflow_missing" => "an MPTCP subflow missing",
        "mptcp_subflow_idle" => "an MPTCP path left idle",
        "cipher_bound" => "the cipher (TLS)",
        "per_file_overhead" => "per-file overhead",
        "sender_disk_reads" => "sender's disk reads",
        "receiver_disk_writes" => "receiver's disk writes",
        "sender_cpu" => "sender's CPU",
        "receiver_cpu" => "receiver's CPU",
        "link" => "the link",
        other => return other.replace('_', " "),
    };
    words.into()
}

/// The verdicts of these runs in words with their counts, most frequent
/// first: `CPU-bound (3), no bottleneck (2)`; `-` when none has one.
pub fn verdict_counts<'a>(runs: impl IntoIterator<Item = &'a RunSummary>) -> String {
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for kind in runs.into_iter().filter_map(|r| r.verdict_kind.as_deref()) {
        *counts.entry(verdict_words(kind)).or_default() += 1;
    }
    if counts.is_empty() {
        return "-".into();
    }
    let mut counts: Vec<(String, usize)> = counts.into_iter().collect();
    counts.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    counts
        .iter()
        .map(|(w, n)| format!("{w} ({n})"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The run's result as listed: its headline, or the figures its workload
/// lists in its place (a watch: `transmitted 11.57 Gbit/s, received ...`).
pub fn result(run: &RunSummary) -> String {
    if !run.listed.is_empty() {
        return run
            .listed
            .iter()
            .map(|f| format!("{} {}", f.name, figure(f.value, f.unit)))
            .collect::<Vec<_>>()
            .join(", ");
    }
    match (run.headline_value, run.headline_unit.as_deref()) {
        (Some(v), unit) => figure(v, unit.unwrap_or("")),
        (None, _) => "-".into(),
    }
}

/// Cuts `text` to `width` characters, the last one an ellipsis.
fn truncated(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        return text.to_string();
    }
    let mut cut: String = text.chars().take(width.saturating_sub(1)).collect();
    cut.push('\u{2026}');
    cut
}

/// The tags that fit [`TAGS_WIDTH`], each whole unless it alone is longer
/// than [`TAG_WIDTH`] (a watch's command line would widen every row), then
/// how many more there are: `agent=b direction=forward mtu=9000 +2`. A tag
/// is never cut in the middle of its name (`directio…`).
fn tags_cell(tags: &[String]) -> String {
    // A tag alone may take the whole cell.
    let width = if tags.len() == 1 { TAGS_WIDTH } else { TAG_WIDTH };
    let shown: Vec<String> = tags.iter().map(|t| truncated(&terminal(t), width)).collect();
    let mut cell = String::new();
    for (i, tag) in shown.iter().enumerate() {
        let more = shown.len() - i - 1;
        let room = TAGS_WIDTH - if more > 0 { format!(" +{more}").len() } else { 0 };
        let next = if cell.is_empty() {
            tag.clone()
        } else {
            format!("{cell} {tag}")
        };
        if next.chars().count() > room && !cell.is_empty() {
            return format!("{cell} +{}", shown.len() - i);
        }
        cell = next;
    }
    cell
}

/// What the run's state and verdict say, in a few words.
pub fn state(run: &RunSummary) -> String {
    let verdict = run.verdict_kind.clone().unwrap_or_else(|| "-".into());
    if run.complete {
        return verdict;
    }
    let planned = run.trials_planned.map(|n| format!(" of {n}")).unwrap_or_default();
    format!("INCOMPLETE ({}{planned} trials saved)", run.trials_saved)
}

/// Where a document holds the share of the line rate its figure reached:
/// the measured throughput's, or a sweep's peak's.
pub const LINE_RATE_SHARE_PATHS: [&str; 2] = [
    "$.line_rate.percent_of_theoretical_goodput",
    "$.streams[0].sender.sweep.summary.peak_line_rate_percent",
];

/// A headline read again from its run's document: the figure of merit as
/// this build computes it, where the stored one is above the run's line
/// rate (a sweep saved before 2026-12-06 counted sizes a shaper's bucket
/// passed above it in its peak).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Reread {
    pub id: i64,
    /// What the store held.
    pub stored: f64,
    pub share_percent: f64,
}

/// Reads again the headline of each run whose stored headline is above its
/// line rate, from its document, and puts the figure of merit this build
/// computes in its place (a figure a wire of the line rate could carry);
/// returns what changed. Only those runs' documents are read.
pub fn reread_headlines(
    store: &crate::store::Store,
    runs: &mut [RunSummary],
) -> Result<Vec<Reread>, crate::store::StoreError> {
    let ids: Vec<i64> = runs
        .iter()
        .filter(|r| r.headline_value.is_some())
        .map(|r| r.id)
        .collect();
    let above: BTreeMap<i64, f64> = store
        .document_parts(&ids, &LINE_RATE_SHARE_PATHS)?
        .into_iter()
        .filter_map(|p| Some((p.id, p.number(1).or(p.number(0))?)))
        .filter(|(_, share)| *share > 100.0)
        .collect();
    let mut changed = Vec::new();
    for run in runs.iter_mut().filter(|r| above.contains_key(&r.id)) {
        let Ok(result) = <crate::model::RunResult as serde::Deserialize>::deserialize(&store.run(run.id)?.document)
        else {
            continue;
        };
        let figure = crate::workload::results_of(&run.workload).figure_of_merit(&result.result);
        let Some(stored) = run.headline_value else { continue };
        if figure.value.is_finite() && (figure.value - stored).abs() > 1e-9 * stored.abs() {
            run.headline_value = Some(figure.value);
            changed.push(Reread {
                id: run.id,
                stored,
                share_percent: above[&run.id],
            });
        }
    }
    Ok(changed)
}

/// The line under a listing for each headline read again.
pub fn reread_note(r: &Reread, unit: &str) -> String {
    format!(
        "* run {}: re-read from its document; the stored {} ({:.0}% of its line rate) counted figures above the \
         line rate, which a shaper's bucket passed and no wire of that rate carries (saved before 2026-12-06)",
        r.id,
        figure(r.stored, unit),
        r.share_percent
    )
}

/// One line per run, under a header, columns aligned; a headline read
/// again ([`reread_headlines`]) marked `*` and explained under the list.
pub fn render(runs: &[RunSummary], reread: &[Reread], out: &mut dyn Write) -> io::Result<()> {
    let mut rows = vec![[
        "id".to_string(),
        "started (UTC)".into(),
        "workload".into(),
        "hosts".into(),
        "tags".into(),
        "result".into(),
        "verdict".into(),
    ]];
    for run in runs {
        let tags: Vec<String> = run.tags.iter().map(|t| t.to_string()).collect();
        let mut result = result(run);
        if reread.iter().any(|r| r.id == run.id) {
            result.push('*');
        }
        let row = [
            run.id.to_string(),
            started(run),
            if run.source == "nicbench" {
                run.workload.clone()
            } else {
                format!("{} ({})", run.workload, run.source)
            },
            hosts(run),
            if tags.is_empty() { "-".into() } else { tags_cell(&tags) },
            result,
            state(run),
        ]
        .map(|cell| terminal(&cell).into_owned());
        rows.push(row);
    }
    let mut widths = [0usize; 7];
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    for row in &rows {
        let mut line = format!("{:>w$}", row[0], w = widths[0]);
        for (i, cell) in row.iter().enumerate().skip(1) {
            // The result column is right-aligned so the figures line up.
            if i == 5 {
                line += &format!("  {cell:>w$}", w = widths[i]);
            } else {
                line += &format!("  {cell:<w$}", w = widths[i]);
            }
        }
        writeln!(out, "{}", line.trim_end())?;
    }
    for r in reread {
        let unit = runs
            .iter()
            .find(|run| run.id == r.id)
            .and_then(|run| run.headline_unit.clone())
            .unwrap_or_default();
        writeln!(out, "{}", terminal(&reread_note(r, &unit)))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {

    #[test]
    fn tags_are_listed_whole_and_the_rest_counted() {
        let tags = |t: &[&str]| t.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(tags_cell(&tags(&["mtu=9000"])), "mtu=9000");
        let many = tags(&[
            "agent=card-500M-quartercpu",
            "direction=forward",
            "mtu=16128",
            "plan=roundup",
        ]);
        let cell = tags_cell(&many);
        assert_eq!(cell, "agent=card-500M-quartercpu direction=forward +2");
        assert!(cell.chars().count() <= TAGS_WIDTH, "{cell}");
        // One tag longer than a tag may be is cut, and the rest still counted.
        let long = tags(&["command=nicbench watch -- sh -c 'iperf3 -c host -t 30'", "a=b"]);
        assert_eq!(tags_cell(&long), format!("{}\u{2026} a=b", &long[0][..TAG_WIDTH - 1]));
    }
    use super::*;

    #[test]
    fn sizes_are_whole_bytes_and_rates_take_their_unit() {
        assert_eq!(figure(32765.0, "B"), "32765 B");
        assert_eq!(figure(2.26e9, "bit/s"), "2.26 Gbit/s");
        assert_eq!(figure(17.514, "us"), "17.51 us");
    }

    #[test]
    fn utc_dates_are_civil() {
        assert_eq!(utc(0.0), "1970-01-01 00:00:00");
        assert_eq!(utc(951_782_400.0), "2000-02-29 00:00:00");
        assert_eq!(utc(1_700_000_000.0), "2023-11-14 22:13:20");
    }

    #[test]
    fn host_names_from_a_peer_are_listed_escaped() {
        let run = RunSummary {
            id: 1,
            started_at_unix_seconds: 0.0,
            workload: "tcp".into(),
            client_host: Some("a".into()),
            agent_host: Some("evil\u{1b}]0;x\u{7}\u{202e}\nb".into()),
            agent_address: None,
            headline_unit: Some("bit/s".into()),
            headline_value: Some(9.41e9),
            verdict_kind: None,
            trials_planned: None,
            trials_saved: 1,
            complete: true,
            source: "nicbench".into(),
            tags: vec![],
            listed: vec![],
        };
        let mut out = Vec::new();
        render(&[run], &[], &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert_eq!(text.lines().count(), 2, "{text}");
        assert!(text.contains(r"a -> evil\x1b]0;x\x07\u{202e}\nb"), "{text}");
    }

    #[test]
    fn an_incomplete_run_says_how_far_it_got() {
        let run = RunSummary {
            id: 3,
            started_at_unix_seconds: 0.0,
            workload: "tcp".into(),
            client_host: Some("a".into()),
            agent_host: Some("b".into()),
            agent_address: None,
            headline_unit: Some("bit/s".into()),
            headline_value: Some(9.41e9),
            verdict_kind: None,
            trials_planned: Some(5),
            trials_saved: 2,
            complete: false,
            source: "nicbench".into(),
            tags: vec!["nic=igb".parse().unwrap()],
            listed: vec![],
        };
        let mut out = Vec::new();
        render(&[run], &[], &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.contains("a -> b  nic=igb  9.41 Gbit/s  INCOMPLETE (2 of 5 trials saved)"),
            "{text}"
        );
    }

    fn run(id: i64, started: f64, client: &str, agent: &str, verdict: Option<&str>) -> RunSummary {
        RunSummary {
            id,
            started_at_unix_seconds: started,
            workload: "tcp".into(),
            client_host: (!client.is_empty()).then(|| client.into()),
            agent_host: (!agent.is_empty()).then(|| agent.into()),
            agent_address: Some("127.0.0.1:5201".into()),
            headline_unit: Some("bit/s".into()),
            headline_value: Some(1e9),
            verdict_kind: verdict.map(String::from),
            trials_planned: Some(1),
            trials_saved: 1,
            complete: true,
            source: "nicbench".into(),
            tags: vec![],
            listed: vec![],
        }
    }

    /// Issue 29: an imported NetPIPE run (no time) made the report say
    /// "from 1970-01-01"; loopback runs counted 3 hosts.
    #[test]
    fn an_untimed_run_is_unknown_and_left_out_of_the_time_range() {
        let runs = [
            run(1, 1_700_000_000.0, "vm", "vm", Some("cpu_bound")),
            run(2, 0.0, "", "", None),
            run(3, 1_700_003_600.0, "vm", "vm", Some("cpu_bound")),
        ];
        let range = TimeRange::of(&runs);
        assert_eq!(range.first_unix_seconds, Some(1_700_000_000.0));
        assert_eq!(
            range.words(),
            "2023-11-14 22:13:20 to 2023-11-14 23:13:20 (1 run: unknown)"
        );
        assert_eq!(started(&runs[1]), "unknown");
        assert_eq!(TimeRange::of(&runs[1..2]).words(), "unknown");
    }

    #[test]
    fn hosts_are_counted_once_by_name_and_loopback_is_the_clients_host() {
        let loopback = [
            run(1, 1.0, "vm", "vm", None),
            run(2, 1.0, "vm", "vm", None),
            run(3, 0.0, "", "", None),
        ];
        assert_eq!(host_count(&loopback), 2 - 1);
        let lab = [
            run(1, 1.0, "demo-a", "demo-b", None),
            run(2, 1.0, "demo-b", "demo-a", None),
        ];
        assert_eq!(host_count(&lab), 2);
        let mut far = run(3, 1.0, "", "", None);
        far.agent_address = Some("10.0.0.9:5201".into());
        assert_eq!(host_count(&[lab[0].clone(), far]), 3);
    }

    #[test]
    fn verdicts_read_in_words_with_their_counts() {
        let runs = [
            run(1, 1.0, "a", "b", Some("cpu_starved")),
            run(2, 1.0, "a", "b", Some("files_per_file_overhead")),
            run(3, 1.0, "a", "b", Some("cpu_starved")),
            run(4, 1.0, "a", "b", None),
        ];
        assert_eq!(
            verdict_counts(&runs),
            "starved of CPU (2), files: per-file overhead (1)"
        );
        assert_eq!(verdict_counts(&runs[3..]), "-");
    }

    /// Issue 29: a watch's command line as a tag made rows 190 columns
    /// wide; issue 32: a watch listed transmitted plus received.
    #[test]
    fn long_tags_are_cut_and_a_watch_lists_both_directions_apart() {
        let mut watch = run(5, 1.0, "a", "a", None);
        watch.workload = "watch".into();
        watch.tags = vec![crate::store::Tag {
            key: "command".into(),
            value: "iperf3 -c 127.0.0.1 -p 5201 -t 30 --bidir --json --logfile /tmp/a-long-file-name.json".into(),
        }];
        watch.headline_value = Some(23.14e9);
        watch.listed = vec![
            crate::store::query::ListedFigure {
                name: "transmitted",
                unit: "bit/s",
                value: 11.57e9,
            },
            crate::store::query::ListedFigure {
                name: "received",
                unit: "bit/s",
                value: 11.57e9,
            },
        ];
        let mut out = Vec::new();
        render(&[watch], &[], &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let row = text.lines().nth(1).unwrap();
        assert!(
            row.contains("command=\"iperf3 -c 127.0.0.1 -p 5201 -t 30 --bi\u{2026}"),
            "{text}"
        );
        assert!(
            row.contains("transmitted 11.57 Gbit/s, received 11.57 Gbit/s"),
            "{text}"
        );
        assert!(!row.contains("23.14"), "{text}");
    }

    crate::store::testing::store_test!(
    /// A sweep stored with a summary that counted sizes above its line
    /// rate (as builds before 2026-12-06 saved it): `runs` headlined a run
    /// through a 1 Gbit/s lab link "31.28 Gbit/s". Its headline is read
    /// again from the sizes a wire of the line rate carries, marked, and
    /// the stored figure named under the list.
    fn a_stored_headline_above_the_line_rate_is_read_again_from_the_points(store) {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/run-sweep.json");
        let mut doc: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let line_rate = 1.2e9;
        let sweep = &mut doc["streams"][0]["sender"]["sweep"];
        sweep["link_speed_bits_per_second"] = line_rate.into();
        sweep["link_speed_source"] = "lab".into();
        let stored = sweep["summary"]["peak_bits_per_second"].as_f64().unwrap();
        assert!(stored > 3.0 * line_rate);
        sweep["summary"]["peak_line_rate_percent"] = (100.0 * stored / line_rate).into();
        let carried = sweep["points"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["best_bits_per_second"].as_f64().unwrap())
            .filter(|v| *v <= line_rate)
            .fold(0.0, f64::max);
        let mut store = store;
        for document in [
            doc.clone(),
            serde_json::from_str(
                &std::fs::read_to_string(
                    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/run-tcp.json"),
                )
                .unwrap(),
            )
            .unwrap(),
        ] {
            let meta = crate::store::RunMeta {
                command_line: "nicbench sweep b".into(),
                tags: Vec::new(),
                trials_planned: Some(1),
                source: None,
            };
            let mut writer = crate::store::RunWriter::new(store, meta);
            writer.finish_document(&document, None).unwrap();
            store = writer.into_store();
        }
        let mut runs = store.runs(&crate::store::query::Filter::default()).unwrap();
        let sweep_run = runs
            .iter()
            .find(|r| r.headline_value == Some(stored))
            .map(|r| r.id)
            .unwrap();
        let reread = reread_headlines(&store, &mut runs).unwrap();
        assert_eq!(reread.len(), 1, "the tcp run stays as stored: {reread:?}");
        assert_eq!((reread[0].id, reread[0].stored), (sweep_run, stored));
        let run = runs.iter().find(|r| r.id == sweep_run).unwrap();
        assert_eq!(run.headline_value, Some(carried));
        let mut out = Vec::new();
        render(&runs, &reread, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains(&format!("{}*", figure(carried, "bit/s"))), "{text}");
        assert!(
            !text
                .lines()
                .any(|l| l.starts_with(&format!("{sweep_run:>2} ")) && l.contains("4.53")),
            "{text}"
        );
        assert!(
            text.contains(&format!(
                "* run {sweep_run}: re-read from its document; the stored {} (377% of its line rate)",
                figure(stored, "bit/s")
            )),
            "{text}"
        );
    });
}
