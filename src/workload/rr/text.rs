//! How a request/response result reads: transactions, the latency
//! distribution, and with several flows each flow's rate and tail.

use std::io::{self, Write};

use super::result::{RrEnd, RrResult, KEY};
use super::RrParams;
use crate::model::{Role, TrialResult};
use crate::units::Size;

/// The header's description of the messages: both sizes, and a connection
/// per transaction with `--crr`.
pub fn messages(p: &RrParams) -> String {
    format!(
        "{} requests, {} responses{}{}",
        Size(p.request_bytes),
        Size(p.response_bytes),
        if p.crr {
            ", a new TCP connection per transaction"
        } else {
            ""
        },
        match p.interval_us {
            Some(us) => format!(
                ", one transaction every {} per flow",
                crate::workload::args::parse::duration_in_words(us as f64 / 1e6)
            ),
            None => String::new(),
        }
    )
}

/// The stream table's columns: transactions and their rate.
pub fn table_head() -> String {
    format!("{:>12}  {:>16}", "transactions", "transactions/s")
}

/// A row's or a `[SUM]` line's figures under [`table_head`].
pub fn cells(transactions: u64, per_second: f64) -> String {
    format!("{transactions:>12}  {per_second:>16.1}")
}

/// Totals and latency, then one line per flow when there are several.
pub fn write_summary(trial: &TrialResult, out: &mut dyn Write) -> io::Result<()> {
    let Some(rr) = trial.sum.extras.get::<RrResult>(KEY) else {
        return Ok(());
    };
    rr_lines(&rr, out)?;
    // With several flows, each one's rate and tail: an unfair split shows here.
    if trial.streams.len() > 1 {
        for s in trial.streams.iter().filter(|s| s.sender.role == Role::Sender) {
            if let Some(e) = s.sender.extras.get::<RrEnd>(KEY) {
                flow_rr_line(s.stream_id, &e, out)?;
            }
        }
    }
    Ok(())
}

/// Transactions and the latency distribution of a request/response test.
pub fn rr_lines(rr: &RrResult, out: &mut dyn Write) -> io::Result<()> {
    writeln!(
        out,
        "RR  {} transactions, {:.1} transactions/s; lost {}",
        rr.transactions, rr.transactions_per_second, rr.lost_transactions
    )?;
    if let Some(l) = &rr.latency {
        writeln!(
            out,
            "    round trip: mean {:.1} us, min {:.1} us, p50 {:.1} us, p90 {:.1} us, p99 {:.1} us, \
             p99.9 {:.1} us, max {:.1} us ({} samples)",
            l.mean_us, l.min_us, l.p50_us, l.p90_us, l.p99_us, l.p99_9_us, l.max_us, l.samples
        )?;
    }
    Ok(())
}

/// One flow of a request/response test, from its requester's end.
pub fn flow_rr_line(id: u32, e: &RrEnd, out: &mut dyn Write) -> io::Result<()> {
    let latency = e.latency.as_ref().map_or(String::new(), |l| {
        format!(
            ", p50 {:.1} us, p99 {:.1} us, max {:.1} us",
            l.p50_us, l.p99_us, l.max_us
        )
    });
    writeln!(
        out,
        "    flow {id}: {} transactions, {:.1} transactions/s{latency}; lost {}",
        e.transactions, e.transactions_per_second, e.lost_transactions
    )
}
