//! How a request/response result reads: transactions, the latency
//! distribution, and with several flows each flow's rate and tail.

use std::io::{self, Write};

use super::result::{RrEnd, RrResult, ShaperBucket, KEY};
use super::RrParams;
use crate::model::{Role, TrialResult};
use crate::units::{Bytes, Rate, Size};

/// The header's description of the messages: both sizes, and a connection
/// per transaction with `--crr`.
pub fn messages(p: &RrParams) -> String {
    format!(
        "{} requests, {} responses{}{}",
        Size(p.request_bytes),
        Size(p.response_bytes),
        match p.crr {
            true => format!(", a new {} connection per transaction", p.proto.label()),
            false => String::new(),
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
    one_way_lines(&rr, trial, out)?;
    if let Some(bucket) = &rr.shaper_bucket {
        shaper_line(&rr, bucket, out)?;
    }
    if let Some(placement) = &rr.placement {
        writeln!(out, "Placement: {placement}")?;
    }
    if let Some(w) = &rr.cross_core_wakeup {
        writeln!(out, "Host: {}; a round trip on two cores pays two", w.describe())?;
    }
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

/// `--one-way`: each leg's delay with the clocks' bound, or why there is
/// none when the requesters timed the legs but the clocks could not be
/// compared.
fn one_way_lines(rr: &RrResult, trial: &TrialResult, out: &mut dyn Write) -> io::Result<()> {
    for (leg, delay) in [
        ("request  client->agent", &rr.one_way_request),
        ("response agent->client", &rr.one_way_response),
    ] {
        if let Some(delay) = delay {
            writeln!(out, "    one-way {leg}: {}", delay.text())?;
        }
    }
    let timed = trial
        .streams
        .iter()
        .filter_map(|s| s.sender.extras.get::<RrEnd>(KEY))
        .any(|e| e.request_transit.is_some());
    if timed && rr.one_way_request.is_none() {
        let why = trial
            .clock_offset
            .as_ref()
            .and_then(|c| c.problem.clone())
            .unwrap_or_else(|| {
                "the agent gave no clock estimate (an agent older than this client: update it to time the legs)".into()
            });
        writeln!(out, "    one-way not measured: {why}")?;
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

/// What a shaper's bucket did to the round trips: they are shorter than a
/// wire of its rate allows, or could be by as much as the wire's time.
pub fn shaper_line(rr: &RrResult, bucket: &ShaperBucket, out: &mut dyn Write) -> io::Result<()> {
    let p50 = rr.latency.as_ref().map_or(0.0, |l| l.p50_us);
    let shaper = match (&bucket.shaper_name, bucket.burst_bytes) {
        (Some(name), Some(b)) => format!("the token bucket ({}) of the shaper at {name}", Bytes(b)),
        (Some(name), None) => format!("the token bucket of the shaper at {name}"),
        (None, Some(b)) => format!("the shaper's token bucket ({})", Bytes(b)),
        (None, None) => "the shaper's token bucket".into(),
    };
    let wire = format!("a {} wire", Rate(bucket.link_bits_per_second));
    if bucket.faster_than_wire {
        writeln!(
            out,
            "    shaper: the round trip (p50 {p50:.1} us) is shorter than {wire} needs for one request and \
             its response ({:.1} us at least): {shaper} refills while its direction idles and passes what it \
             holds at the hosts' speed",
            bucket.wire_round_trip_us
        )
    } else {
        writeln!(
            out,
            "    shaper: {shaper} holds a whole request and response and passes them at the hosts' speed; \
             {wire} would add at least {:.1} us to every round trip ({:.0}% of the p50)",
            bucket.wire_round_trip_us,
            bucket.wire_round_trip_us * 100.0 / p50.max(f64::MIN_POSITIVE)
        )
    }
}
