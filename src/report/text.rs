//! The human summary: one line per stream when there are several, a SUM
//! line per direction, sender and receiver side by side, TCP_INFO, and CPU
//! cost with service demand for both ends. Every number has its unit.
//! Names a peer sent (host names, its version, interfaces) are shown
//! through `outside_text::terminal`, and every line passes
//! `outside_text::terminal_text` on its way out, so no control character
//! or bidi override reaches the terminal raw.

use std::io::{self, Write};

use super::Reporter;
use crate::model::{CpuReport, Flow, FlowTotal, RunResult, StreamResult, TcpInfo, TrialResult};
use crate::outside_text::{terminal, terminal_text};
use crate::units::{Bytes, Rate, Size};
use crate::workload::runner::IntervalTick;
use crate::workload::{Direction, TextView};

/// The default human-readable summary, fitted to the terminal: lines wider
/// than it wrap at a `;` or `,` with an indented continuation, and the
/// stream table drops its byte columns when it would not fit. `-v` and the
/// JSON document keep everything on one line.
pub struct Text;

/// Columns the text is fitted to when neither `COLUMNS` nor a terminal
/// says otherwise (output to a file or a pipe).
pub const DEFAULT_WIDTH: usize = 100;

/// Width of the stream table with its byte columns and TCP_INFO.
const FULL_TABLE_WIDTH: usize = 110;

impl Text {
    /// The width to fit: `COLUMNS`, else the terminal's, else
    /// [`DEFAULT_WIDTH`]; None (no limit) with `-v`.
    pub fn width() -> Option<usize> {
        if log::log_enabled!(log::Level::Info) {
            return None;
        }
        let columns = std::env::var("COLUMNS")
            .ok()
            .and_then(|c| c.trim().parse::<usize>().ok());
        Some(columns.or_else(terminal_width).unwrap_or(DEFAULT_WIDTH).max(40))
    }

    /// Renders fitted to `width` columns (None: no limit).
    pub fn render_fitted(&self, run: &RunResult, width: Option<usize>, out: &mut dyn Write) -> io::Result<()> {
        let layout = Layout {
            narrow: width.is_some_and(|w| w < FULL_TABLE_WIDTH),
        };
        let mut full = Vec::new();
        render_lines(run, layout, &mut full)?;
        let text = String::from_utf8_lossy(&full);
        for line in text.lines().map(terminal_text) {
            match width {
                Some(width) => {
                    for piece in wrap(&line, width) {
                        writeln!(out, "{piece}")?;
                    }
                }
                None => writeln!(out, "{line}")?,
            }
        }
        Ok(())
    }
}

impl Reporter for Text {
    fn render(&self, run: &RunResult, out: &mut dyn Write) -> io::Result<()> {
        self.render_fitted(run, Text::width(), out)
    }
}

/// Columns of stdout when it is a terminal.
fn terminal_width() -> Option<usize> {
    // SAFETY: TIOCGWINSZ fills a winsize; fd 1 may be anything, and a
    // non-terminal answers with an error that is handled.
    let mut size: libc::winsize = unsafe { std::mem::zeroed() };
    let ok = unsafe { libc::ioctl(1, libc::TIOCGWINSZ, &mut size) } == 0;
    (ok && size.ws_col > 0).then_some(usize::from(size.ws_col))
}

/// Splits a line wider than `width` at the last "; ", then ", ", then
/// blank that fits; continuation lines are indented four more columns
/// than the line. A word longer than the width stays whole.
pub fn wrap(line: &str, width: usize) -> Vec<String> {
    let indent = line.len() - line.trim_start().len() + 4;
    let mut pieces = Vec::new();
    let mut rest = line.to_string();
    while rest.chars().count() > width {
        let limit = rest.char_indices().nth(width).map_or(rest.len(), |(i, _)| i);
        let head = &rest[..limit];
        let cut = ["; ", ", ", " "]
            .iter()
            .find_map(|sep| head.rfind(sep).filter(|&i| i > indent).map(|i| i + sep.len()));
        let Some(cut) = cut else { break };
        pieces.push(rest[..cut].trim_end().to_string());
        rest = format!("{}{}", " ".repeat(indent), rest[cut..].trim_start());
    }
    pieces.push(rest);
    pieces
}

/// How wide the stream table may be.
#[derive(Debug, Clone, Copy)]
struct Layout {
    /// Rates only, without the byte columns.
    narrow: bool,
}

impl Layout {
    /// A row's sender and receiver cells, each figure in the unit of the
    /// larger of the two, so that a row never reads "999.87 Mbit/s" beside
    /// "1.00 Gbit/s".
    fn cells(self, sender: (u64, f64), receiver: (u64, f64)) -> String {
        let rates = Rate::in_one_unit(&[sender.1, receiver.1]);
        if self.narrow {
            return format!("{:>14}  {:>14}", rates[0], rates[1]);
        }
        let bytes = Bytes::in_one_unit(&[sender.0, receiver.0]);
        format!("{:>10} {:>14}  {:>10} {:>14}", bytes[0], rates[0], bytes[1], rates[1])
    }

    fn column(self) -> usize {
        if self.narrow {
            14
        } else {
            25
        }
    }
}

fn tcp_cells(s: &StreamResult) -> String {
    match &s.sender.tcp_info {
        Some(i) => format!(
            "{:>6} {:>9} {:>10} {:>7}",
            i.retransmits,
            format!("{} us", i.rtt_us),
            Size(u64::from(i.congestion_window_segments) * u64::from(i.send_mss_bytes)).to_string(),
            format!("{} B", i.send_mss_bytes),
        ),
        None => String::new(),
    }
}

/// Service demand with its unit: per transaction where transactions were
/// counted (per KB says little about 1-byte requests), else per KB moved.
pub fn service_demand(c: &CpuReport) -> String {
    match (c.service_demand_us_per_transaction, c.service_demand_us_per_kb) {
        (Some(t), _) => format!("{t:.2} us/transaction"),
        (None, Some(d)) => format!("{d:.3} us/KB"),
        (None, None) => "n/a".into(),
    }
}

fn cpu_line(name: &str, c: &CpuReport) -> String {
    if c.logical_cpus == 0 {
        // A peer that measures only its own process (iperf3).
        return format!(
            "CPU {name:<6} host-wide use not measured; its own process {:.2} s (user {:.2} s, sys {:.2} s), as the peer reported",
            c.process.user_seconds + c.process.system_seconds,
            c.process.user_seconds,
            c.process.system_seconds
        );
    }
    let demand = service_demand(c);
    let host_work = match (c.host_work_percent_of_core, c.host_work_service_demand_us_per_kb) {
        (Some(percent), Some(per_kb)) => {
            format!("; host's own work (its threads and napi threads) {percent:.1}% of a core, {per_kb:.3} us/KB")
        }
        (Some(percent), None) => format!("; host's own work (its threads and napi threads) {percent:.1}% of a core"),
        _ => String::new(),
    };
    format!(
        "CPU {name:<6} {:5.1}% of {} cores (user {:.1}%, sys {:.1}%, softirq {:.1}%, irq {:.1}%), \
         busiest core {} at {:.1}%; own threads {:.2} s; service demand {demand}{host_work}",
        c.utilization_percent,
        c.logical_cpus,
        c.user_percent,
        c.system_percent,
        c.softirq_percent,
        c.irq_percent,
        c.busiest_core.core,
        c.busiest_core.utilization_percent,
        c.process.user_seconds + c.process.system_seconds,
    )
}

/// Every line of the report, unfitted.
fn render_lines(run: &RunResult, layout: Layout, out: &mut dyn Write) -> io::Result<()> {
    let r = &run.result;
    let kind = crate::workload::results_of(&run.workload);
    header_lines(run, kind, out)?;
    if let Some(p) = &run.peer_protocol {
        writeln!(
            out,
            "  peer: {} {} {}; its side's figures are what it reported",
            terminal(&p.protocol),
            terminal(&p.peer_role),
            p.peer_version
                .as_deref()
                .map_or("(version not announced)".to_string(), |v| format!(
                    "version {}",
                    terminal(v)
                ))
        )?;
    }
    stream_table(r, kind, layout, out)?;
    sum_lines(r, kind, layout, out)?;
    for line in sender_limits(r) {
        writeln!(out, "{line}")?;
    }
    kind.write_summary(r, out)?;
    writeln!(out, "{}", cpu_line("client", &r.cpu.client))?;
    writeln!(out, "{}", cpu_line("agent", &r.cpu.agent))?;
    // One kernel (equal boot id: loopback, or namespaces of a lab).
    if run.shared_host() {
        let limits: Vec<String> = [("client", &run.client.facts), ("agent", &run.agent.facts)]
            .into_iter()
            .filter_map(|(name, f)| {
                let l = f.cpu_limit.as_ref()?;
                Some(format!("the {name}'s cgroup holds it to {:.3}", l.percent_of_one_core))
            })
            .map(|s| format!("{}% of one core", s.trim_end_matches('0').trim_end_matches('.')))
            .collect();
        match limits.is_empty() {
            true => writeln!(
                out,
                "  (client and agent share one kernel and no cgroup separates them: both CPU lines cover the \
                 same cores, and host-wide figures cannot be split between them)"
            )?,
            false => writeln!(
                out,
                "  (client and agent share one kernel: both CPU lines cover the whole machine's cores; {}: \
                 its own waits and throttling are in its Counters line)",
                limits.join(", ")
            )?,
        }
    }
    if r.overlapped_tests > 0 {
        writeln!(
            out,
            "  (the agent ran {} other test(s) during part of this one: it was shared, see --max-concurrent)",
            r.overlapped_tests
        )?;
    }
    kind.write_details(r, out)?;
    super::facts::write_run_tail(run, out)?;
    if let Some(r) = &run.repetition {
        repetition_lines(r, out)?;
    }
    Ok(())
}

/// Who measured what: endpoints, streams and length, socket buffers.
fn header_lines(run: &RunResult, kind: &dyn TextView, out: &mut dyn Write) -> io::Result<()> {
    let spec = &run.spec;
    writeln!(
        out,
        "nicbench {}: client {} ({}) -> agent {} ({})",
        terminal(&run.workload),
        terminal(&run.client.facts.hostname),
        run.client.address,
        terminal(&run.agent.facts.hostname),
        run.agent.address
    )?;
    let direction = match spec.direction {
        Direction::Forward => "client->agent",
        Direction::Reverse => "agent->client (reverse)",
        Direction::Bidir => "each way (bidir)",
    };
    // A sweep ends when its sizes are done; its duration is a limit.
    let limit = crate::workload::find(&spec.workload).is_ok_and(|w| w.command_line().time_is_limit());
    let length = match spec.bytes {
        Some(b) => format!("{} per direction", Bytes(b)),
        None if limit => format!("time limit {:.1} s", spec.duration_seconds),
        None => format!("{:.1} s", spec.duration_seconds),
    };
    let messages = kind.messages_text(spec).unwrap_or_else(|| {
        format!(
            "{}{} messages",
            if limit { "up to " } else { "" },
            Size(spec.message_bytes)
        )
    });
    // A workload that runs over a transport names it unless it is TCP.
    let over = crate::workload::transport_of(spec)
        .filter(|t| !t.is_tcp())
        .map_or(String::new(), |t| format!(" over {}", t.label()));
    writeln!(
        out,
        "  {} stream{} {direction}{over}, {length}{}, {messages}",
        spec.streams,
        if spec.streams == 1 { "" } else { "s" },
        if spec.omit_seconds > 0.0 {
            format!(" after {:.1} s warm-up", spec.omit_seconds)
        } else {
            String::new()
        },
    )?;
    if let Some(line) = super::interruption::line(run) {
        writeln!(out, "{line}")?;
    }
    let Some(s) = run.result.streams.first() else {
        return Ok(());
    };
    let asked = [&spec.client, &spec.agent]
        .iter()
        .any(|side| side.send_buffer_bytes.is_some() || side.receive_buffer_bytes.is_some());
    let (send, receive) = (
        s.sender.socket.send_buffer_bytes,
        s.receiver.socket.receive_buffer_bytes,
    );
    if send == 0 && receive == 0 {
        // No socket lasted to the end (rr --crr: one per transaction).
        return Ok(());
    }
    let buffers = format!(
        "  socket buffers at the end: sender {} send / receiver {} receive",
        Size(send),
        Size(receive)
    );
    match kind.default_buffers_note() {
        // The workload's own note is a sentence: on a line of its own, so
        // that fitting the width breaks it between its phrases.
        Some(note) if !asked && s.sender.tcp_info.is_none() => writeln!(out, "{buffers}\n    ({note})"),
        _ => {
            let why = if asked {
                "as granted by the kernel for the sizes asked"
            } else if s.sender.tcp_info.is_some() {
                "kernel autotuning"
            } else {
                // Only TCP autotunes its buffers; datagram sockets keep the defaults.
                "kernel defaults"
            };
            writeln!(out, "{buffers} ({why})")
        }
    }
}

/// What held the TCP senders back, per direction, from TCP_INFO at the end
/// of each stream (as `ss -i` shows it): of the time with data in flight,
/// the share the receiver's window and the share the sender's own buffer
/// held it back, and the kernel's pacing and delivery rates, summed over
/// the direction's streams. Nothing for runs without those fields (UDP, an
/// older kernel, documents written before they were recorded).
pub fn sender_limits(r: &TrialResult) -> Vec<String> {
    let mut lines = Vec::new();
    let mut arrows = Vec::new();
    for s in &r.streams {
        if !arrows.contains(&s.flow.arrow()) {
            arrows.push(s.flow.arrow());
        }
    }
    for arrow in arrows {
        let infos: Vec<&TcpInfo> = r
            .streams
            .iter()
            .filter(|s| s.flow.arrow() == arrow)
            .filter_map(|s| s.sender.tcp_info.as_ref())
            .filter(|i| i.busy_us.is_some_and(|b| b > 0))
            .collect();
        if infos.is_empty() {
            continue;
        }
        let total = |f: fn(&TcpInfo) -> Option<u64>| infos.iter().filter_map(|i| f(i)).sum::<u64>() as f64;
        let busy = total(|i| i.busy_us);
        let share = |us: f64| format!("{:.1}%", 100.0 * us / busy);
        let rate = |f: fn(&TcpInfo) -> Option<f64>| {
            let rates: Vec<f64> = infos.iter().filter_map(|i| f(i)).collect();
            (!rates.is_empty()).then(|| Rate(rates.iter().sum()).to_string())
        };
        let in_flight = match infos.len() {
            1 => format!("{:.2} s", busy / 1e6),
            n => format!("{:.2} s each (mean of {n} streams)", busy / 1e6 / n as f64),
        };
        let mut line = format!(
            "TCP {arrow} sender{}: data in flight {in_flight}; held back by the receive window {}, by the send buffer {} of it",
            if infos.len() == 1 { "" } else { "s" },
            share(total(|i| i.rwnd_limited_us)),
            share(total(|i| i.sndbuf_limited_us)),
        );
        let rates: Vec<String> = [
            rate(|i| i.pacing_rate_bits_per_second).map(|r| format!("pacing rate {r}")),
            rate(|i| i.delivery_rate_bits_per_second).map(|r| format!("last delivery rate {r}")),
        ]
        .into_iter()
        .flatten()
        .collect();
        if !rates.is_empty() {
            line.push_str(&format!(";\n    {} at the end", rates.join(", ")));
        }
        lines.push(line);
    }
    lines
}

/// The table head and one row per stream when there are several.
fn stream_table(r: &TrialResult, kind: &dyn TextView, layout: Layout, out: &mut dyn Write) -> io::Result<()> {
    // TCP_INFO columns only where a stream has TCP_INFO (not for UDP).
    let tcp_header = if r.streams.iter().any(|s| s.sender.tcp_info.is_some()) {
        format!("  {:>6} {:>9} {:>10} {:>7}", "retr", "rtt", "cwnd", "mss")
    } else {
        String::new()
    };
    let column = layout.column();
    if let Some(head) = kind.table_head() {
        // The workload's own columns (rr's transactions), rows included.
        writeln!(out, "[ ID] {:<14} {head}", "flow")?;
        if r.streams.len() > 1 {
            for s in &r.streams {
                if let Some(cells) = kind.stream_cells(s) {
                    writeln!(out, "[{:>3}] {:<14} {cells}", s.stream_id, s.flow.arrow())?;
                }
            }
        }
        return Ok(());
    }
    writeln!(
        out,
        "[ ID] {:<14} {:>column$}  {:>column$}{tcp_header}",
        "flow", "sender", "receiver"
    )?;
    if r.streams.len() > 1 {
        for s in &r.streams {
            let line = format!(
                "[{:>3}] {:<14} {}  {}",
                s.stream_id,
                s.flow.arrow(),
                layout.cells(
                    (s.sender.bytes, s.sender.bits_per_second),
                    (s.receiver.bytes, s.receiver.bits_per_second)
                ),
                tcp_cells(s)
            );
            // No TCP columns (UDP, rr over UDP): no trailing blanks either.
            writeln!(out, "{}", line.trim_end())?;
        }
    }
    Ok(())
}

/// A `[SUM]` line per direction: bytes and rates of both ends, or the
/// workload's own figures where those mean nothing (transactions, a sweep).
fn sum_lines(r: &TrialResult, kind: &dyn TextView, layout: Layout, out: &mut dyn Write) -> io::Result<()> {
    let flows: [(Flow, &Option<FlowTotal>); 2] = [
        (Flow::ClientToAgent, &r.sum.client_to_agent),
        (Flow::AgentToClient, &r.sum.agent_to_client),
    ];
    for (flow, total) in flows {
        let Some(total) = total else { continue };
        let cells = match kind.sum_cells(r, flow) {
            Some(cells) => cells,
            None => {
                let tcp = if r.streams.len() == 1 {
                    tcp_cells(&r.streams[0])
                } else {
                    String::new()
                };
                let (sender, receiver) = (&total.sender, &total.receiver);
                format!(
                    "{}  {tcp}",
                    layout.cells(
                        (sender.bytes, sender.bits_per_second),
                        (receiver.bytes, receiver.bits_per_second)
                    )
                )
            }
        };
        let line = format!("[SUM] {:<14} {cells}", flow.arrow());
        writeln!(out, "{}", line.trim_end())?;
    }
    Ok(())
}

/// The repetition summary: policy, reported figure, spread, interval.
/// "median" is said only of a middle trial or value (an even count's
/// median is the mean of the middle two, and two trials have none worth
/// naming); the interval only of three trials or more, never below 0 (a
/// figure of merit is a rate or a count). A stored summary is read by the
/// same rules, whatever the build that wrote it printed.
fn repetition_lines(r: &crate::model::RepetitionSummary, out: &mut dyn Write) -> io::Result<()> {
    use crate::stats::{Policy, MIN_INTERVAL_TRIALS};
    use crate::workload::format_figure;
    let f = |v: f64| format_figure(v, &r.unit);
    let n = r.values.len();
    let how = match r.policy {
        Policy::Repeat { pick, .. } => pick.name_of(n),
        Policy::Confidence { .. } => "mean".into(),
    };
    writeln!(
        out,
        "Repetitions: {n} trial{}, reported {how} by {}: {} (full detail above: trial {})",
        if n == 1 { "" } else { "s" },
        r.metric,
        f(r.reported_value),
        r.picked_trial
    )?;
    let median = match n {
        2 => String::new(),
        n if n % 2 == 0 => format!(" median {} (the mean of the middle two),", f(r.median)),
        _ => format!(" median {},", f(r.median)),
    };
    writeln!(
        out,
        "  min {},{median} max {}, mean {}, stddev {}",
        f(r.min),
        f(r.max),
        f(r.mean),
        f(r.stddev)
    )?;
    let interval = r.interval.filter(|_| n >= MIN_INTERVAL_TRIALS).map(|i| i.within(0.0));
    match &interval {
        Some(i) if i.clamped() => writeln!(
            out,
            "  {}% confidence interval of the mean: {} to {} (mean {} +- {}, cut at 0: the figure is never \
             negative; width {:.1}% of the mean)",
            i.level_percent,
            f(i.low),
            f(i.high),
            f(i.mean),
            f(i.high - i.mean),
            i.width_percent
        )?,
        Some(i) => writeln!(
            out,
            "  {}% confidence interval of the mean: {} +- {} (width {:.1}% of the mean)",
            i.level_percent,
            f(i.mean),
            f((i.high - i.low) / 2.0),
            i.width_percent
        )?,
        None if n > 1 => writeln!(
            out,
            "  no confidence interval: {n} trials are too few (it takes {MIN_INTERVAL_TRIALS}); the trials \
             range from {} to {}",
            f(r.min),
            f(r.max)
        )?,
        None => {}
    }
    if let Policy::Confidence {
        level_percent,
        width_percent,
        max_trials,
        ..
    } = r.policy
    {
        match (r.width_met, &interval) {
            (Some(true), Some(_)) => writeln!(
                out,
                "  confidence met: the {level_percent}% interval is within the asked {width_percent}% after {n} trials"
            )?,
            (_, interval) => writeln!(
                out,
                "  CONFIDENCE NOT MET: after {n} of at most {max_trials} trials the {level_percent}% interval is \
                 still {} (asked: at most {width_percent}%)",
                interval
                    .map(|i| format!("{:.1}% of the mean wide", i.width_percent))
                    .unwrap_or_else(|| format!("undefined: it takes {MIN_INTERVAL_TRIALS} trials"))
            )?,
        }
    }
    if r.interrupted {
        writeln!(out, "  (interrupted: fewer trials than the policy asked for)")?;
    }
    Ok(())
}

/// The column header of the live interval lines, aligned with
/// [`interval_lines`]'s columns; `tcp` adds a TCP sender's columns.
pub fn interval_header(tcp: bool) -> String {
    let tcp = match tcp {
        true => format!(" {:>6} {:>10} {:>9}", "retr", "cwnd", "rtt"),
        false => String::new(),
    };
    format!("[ ID] {:<15} {:>10} {:>14}{tcp}  end", "interval", "transfer", "rate")
}

/// Whether an interval's lines carry a TCP sender's columns.
pub fn interval_has_tcp(tick: &IntervalTick) -> bool {
    tick.streams.iter().any(|s| s.tcp.is_some())
}

/// One live interval line per stream, and a SUM line with several
/// streams; with `tcp`, a TCP sender's retransmits in the interval, its
/// congestion window and round trip at its end (as iperf3's lines carry
/// them), `-` where a stream has none.
pub fn interval_lines(host: &str, tick: &IntervalTick, tcp: bool, out: &mut dyn Write) -> io::Result<()> {
    let seconds = tick.end_seconds - tick.start_seconds;
    let mark = if tick.omitted { " (omitted)" } else { "" };
    let mut sum = 0;
    let mut retransmits = None;
    let rates: Vec<f64> = tick
        .streams
        .iter()
        .map(|s| crate::units::bits_per_second(s.bytes, seconds))
        .collect();
    for (s, rate) in tick.streams.iter().zip(&rates) {
        sum += s.bytes;
        let cells = match (tcp, s.tcp) {
            (false, _) => String::new(),
            (true, None) => format!(" {:>6} {:>10} {:>9}", "-", "-", "-"),
            (true, Some(t)) => {
                *retransmits.get_or_insert(0) += t.retransmits;
                format!(
                    " {:>6} {:>10} {:>9}",
                    t.retransmits,
                    Bytes(t.congestion_window_bytes).to_string(),
                    format!("{} us", t.rtt_us)
                )
            }
        };
        writeln!(
            out,
            "[{:>3}] {:6.2}-{:<6.2} s {:>10} {:>14}{cells}  {host} {}{mark}",
            s.stream_id,
            tick.start_seconds,
            tick.end_seconds,
            Bytes(s.bytes).to_string(),
            Rate(*rate).to_string(),
            match s.role {
                crate::model::Role::Sender => "sent",
                crate::model::Role::Receiver => "received",
            }
        )?;
    }
    if tick.streams.len() > 1 {
        let cells = match (tcp, retransmits) {
            (false, _) => String::new(),
            (true, Some(r)) => format!(" {r:>6} {:>10} {:>9}", "", ""),
            (true, None) => format!(" {:>6} {:>10} {:>9}", "-", "", ""),
        };
        let line = format!(
            "[SUM] {:6.2}-{:<6.2} s {:>10} {:>14}{cells}  {host}{mark}",
            tick.start_seconds,
            tick.end_seconds,
            Bytes(sum).to_string(),
            Rate(crate::units::bits_per_second(sum, seconds)).to_string()
        );
        writeln!(out, "{line}")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{wrap, Text};
    use crate::model::RunResult;

    fn rendered(run: &RunResult) -> String {
        let mut out = Vec::new();
        Text.render_fitted(run, None, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    /// The senders' limits: shares of the time with data in flight, summed
    /// over a direction's streams; pacing only where the kernel limited it.
    #[test]
    fn what_held_the_senders_back_is_said_per_direction() {
        let mut run: RunResult = serde_json::from_str(include_str!("../../tests/fixtures/run-tcp.json")).unwrap();
        // A document written before the fields were recorded: no line.
        assert!(super::sender_limits(&run.result).is_empty());
        assert!(!rendered(&run).contains("held back"));
        let trial = &mut run.result;
        for (s, (busy, rwnd, sndbuf)) in trial
            .streams
            .iter_mut()
            .zip([(2_000_000, 500_000, 0), (1_000_000, 250_000, 300_000)])
        {
            let info = s.sender.tcp_info.as_mut().unwrap();
            (info.busy_us, info.rwnd_limited_us, info.sndbuf_limited_us) = (Some(busy), Some(rwnd), Some(sndbuf));
            info.delivery_rate_bits_per_second = Some(1e9);
        }
        let lines = super::sender_limits(trial);
        assert_eq!(lines.len(), 1, "{lines:?}");
        let line = lines[0].replace('\n', " ");
        // 750 of 3000 ms by the window, 300 of 3000 ms by the buffer.
        for part in [
            "TCP client->agent senders:",
            "data in flight 1.50 s each (mean of 2 streams)",
            "receive window 25.0%",
            "send buffer 10.0%",
            "last delivery rate 2.00 Gbit/s",
        ] {
            assert!(line.contains(part), "{part:?} in {line}");
        }
        assert!(!line.contains("pacing"), "{line}");
        assert!(rendered(&run).contains("held back by the receive window 25.0%"));
    }

    #[test]
    fn a_peers_host_name_and_interface_reach_the_terminal_escaped() {
        let mut run: RunResult = serde_json::from_str(include_str!("../../tests/fixtures/run-tcp.json")).unwrap();
        let clean = rendered(&run).lines().count();
        let hostile = "evil\u{1b}]0;pwned\u{7}\u{202e}gpj\nnext\u{9b}2J";
        run.agent.facts.hostname = hostile.into();
        run.agent.facts.kernel = hostile.into();
        if let Some(nic) = run.agent.facts.interface.as_mut() {
            nic.name = hostile.into();
        }
        let text = rendered(&run);
        assert!(!text.contains(['\u{1b}', '\u{7}', '\u{202e}', '\u{9b}']), "{text:?}");
        assert!(
            text.contains(r"evil\x1b]0;pwned\x07\u{202e}gpj\nnext\u{9b}2J"),
            "{text}"
        );
        assert_eq!(
            text.lines().count(),
            clean,
            "a line break in a name must not add a line:\n{text}"
        );
    }

    #[test]
    fn a_long_line_wraps_at_semicolons_then_commas_with_an_indent() {
        let line = "Counters client lo: rx 82796 / tx 82796 packets, 0 dropped, 0 errors; interrupts n/a; TCP 2 of 82796 segments retransmitted (0.00%)";
        let pieces = wrap(line, 60);
        assert!(pieces.len() > 1);
        assert!(pieces.iter().all(|p| p.chars().count() <= 60), "{pieces:#?}");
        assert!(pieces[1..].iter().all(|p| p.starts_with("    ")));
        assert_eq!(pieces[0], "Counters client lo: rx 82796 / tx 82796 packets, 0 dropped,");
        let joined: String = pieces.iter().map(|p| p.trim()).collect::<Vec<_>>().join(" ");
        assert_eq!(joined, line);
    }

    #[test]
    fn short_lines_and_unbreakable_words_stay_whole() {
        assert_eq!(wrap("  short", 60), vec!["  short"]);
        let word = "x".repeat(80);
        assert_eq!(wrap(&word, 60), vec![word.clone()]);
    }

    /// A summary as the build before 2026-12-06 stored it for `--repeat 2`
    /// (issue 72: "reported median 518.19" beside "median 686.38", and a
    /// 95% interval from -1450.75 to 2823.52 Mbit/s).
    fn stored_summary(values: &[f64], pick: crate::stats::Pick) -> crate::model::RepetitionSummary {
        let policy = crate::stats::Policy::Repeat {
            trials: values.len() as u32,
            pick,
        };
        let mean = crate::stats::mean(values);
        let half = 2168.0e6;
        crate::model::RepetitionSummary {
            policy,
            metric: "receiver_bits_per_second".into(),
            unit: "bit/s".into(),
            picked_trial: 1,
            reported_value: values[0],
            values: values.to_vec(),
            min: values.iter().copied().fold(f64::INFINITY, f64::min),
            median: crate::stats::median(values),
            max: values.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            mean,
            stddev: crate::stats::stddev(values),
            interval: Some(crate::stats::MeanInterval {
                mean,
                level_percent: 95.0,
                low: mean - half,
                high: mean + half,
                width_percent: 200.0 * half / mean,
            }),
            width_met: None,
            interrupted: false,
        }
    }

    fn repetition_text(r: &crate::model::RepetitionSummary) -> String {
        let mut out = Vec::new();
        super::repetition_lines(r, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn two_trials_are_no_median_and_make_no_interval() {
        let text = repetition_text(&stored_summary(&[518.19e6, 854.57e6], crate::stats::Pick::Median));
        assert!(
            text.contains("reported lower of 2 by receiver_bits_per_second: 518.19 Mbit/s"),
            "{text}"
        );
        assert!(!text.contains("median"), "{text}");
        assert!(!text.contains("confidence interval of the mean"), "{text}");
        assert!(
            text.contains("no confidence interval: 2 trials are too few (it takes 3); the trials range from 518.19 Mbit/s to 854.57 Mbit/s"),
            "{text}"
        );
    }

    #[test]
    fn an_even_count_names_its_median_and_an_interval_stops_at_zero() {
        let four = stored_summary(&[400e6, 500e6, 700e6, 900e6], crate::stats::Pick::Median);
        let text = repetition_text(&four);
        assert!(text.contains("reported lower middle of 4"), "{text}");
        assert!(
            text.contains("median 600.00 Mbit/s (the mean of the middle two)"),
            "{text}"
        );
        // 625 +- 2168 Mbit/s: shown from 0, not from -1543.
        assert!(
            text.contains("confidence interval of the mean: 0.00 Mbit/s to 2.79 Gbit/s"),
            "{text}"
        );
        assert!(!text.contains("-1"), "{text}");
        let three = stored_summary(&[400e6, 500e6, 700e6], crate::stats::Pick::Median);
        let text = repetition_text(&three);
        assert!(text.contains("reported median by"), "{text}");
        assert!(text.contains(" median 500.00 Mbit/s, max"), "{text}");
    }
}
