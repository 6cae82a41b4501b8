//! How a UDP result reads: what the sender pushed against what the
//! receiver got, the loss, and where it was lost; the verdict on loss.

use std::io::{self, Write};

use super::result::{UdpResult, KEY};
use crate::model::{TrialResult, Verdict};
use crate::units::Rate;

/// One UDP summary per direction that has one.
pub fn write_summary(trial: &TrialResult, out: &mut dyn Write) -> io::Result<()> {
    let flows = [
        ("client->agent", &trial.sum.client_to_agent),
        ("agent->client", &trial.sum.agent_to_client),
    ];
    for (name, flow) in flows {
        let Some(flow) = flow else { continue };
        if let Some(udp) = flow.extras.get::<UdpResult>(KEY) {
            udp_lines(name, &udp, flow.receiver.seconds, out)?;
            one_way_line(&udp, trial, out)?;
        }
    }
    Ok(())
}

/// The UDP summary of one direction: what the sender pushed against what
/// the receiver got, the loss, and where it was lost.
fn udp_lines(name: &str, u: &UdpResult, receiver_seconds: f64, out: &mut dyn Write) -> io::Result<()> {
    let per_second = |n: u64| {
        if receiver_seconds > 0.0 {
            format!("{:.0} datagrams/s", n as f64 / receiver_seconds)
        } else {
            "n/a".into()
        }
    };
    // What was asked beside what each end reached.
    let offered = match (u.offered_bits_per_second, u.percent_of_offer()) {
        (Some(offer), Some(percent)) => format!(
            "offered {}, sender reached {} = {percent:.0}% of it",
            Rate(offer),
            Rate(u.sender_bits_per_second)
        ),
        _ => format!("sender pushed {} (unpaced)", Rate(u.sender_bits_per_second)),
    };
    // Capitals only when something was lost.
    let lost = if u.lost_datagrams > 0 { "LOST" } else { "lost" };
    writeln!(
        out,
        "UDP {name}: {offered}, receiver got {} ({}); {lost} {:.2}% ({} of {} datagrams)",
        Rate(u.receiver_bits_per_second),
        per_second(u.received_datagrams),
        u.loss_percent,
        u.lost_datagrams,
        u.sent_datagrams
    )?;
    let drops = match (u.receiver_gro, u.receiver_socket_drops_measured) {
        (true, _) => format!(
            "{} coalesced GRO buffers dropped at the receiving socket (buffer full; each holds several \
             datagrams, so the split of the loss is unknown)",
            u.receiver_socket_drops
        ),
        // On the loss's basis: the datagrams sent after the warm-up.
        (false, Some(measured)) => {
            let in_socket = measured.min(u.lost_datagrams);
            let warmup = match u.receiver_socket_drops.saturating_sub(measured) {
                0 => String::new(),
                n => format!("; the warm-up, not counted above, lost {n} more at the socket"),
            };
            match u.lost_datagrams {
                0 => format!("none dropped at the receiving socket{warmup}"),
                lost => format!(
                    "of the lost, {in_socket} dropped at the receiving socket (buffer full, in the receiving \
                     host), {} before it (wire, NIC, router, host backlog){warmup}",
                    lost - in_socket
                ),
            }
        }
        (false, None) => format!(
            "{} dropped at the receiving socket (buffer full, in the receiving host; warm-up included), {} \
             lost before it (wire, NIC, router, host backlog)",
            u.receiver_socket_drops,
            u.lost_datagrams.saturating_sub(u.receiver_socket_drops)
        ),
    };
    // A count run's receiver knows the count, so it tells the tail apart.
    let tail = match u.lost_at_end_datagrams {
        Some(n) if n > 0 => format!("; {n} of the lost came after the last datagram that arrived (the count's tail)"),
        _ => String::new(),
    };
    writeln!(
        out,
        "    {drops}{tail}; out of order {}, duplicates {}, foreign {}, jitter {:.1} us",
        u.out_of_order_datagrams, u.duplicate_datagrams, u.malformed_datagrams, u.jitter_us
    )
}

/// The datagrams' one-way delay in this direction with the clocks' bound,
/// or why there is none when the clocks could not be compared.
fn one_way_line(u: &UdpResult, trial: &TrialResult, out: &mut dyn Write) -> io::Result<()> {
    match (
        &u.one_way,
        trial.clock_offset.as_ref().and_then(|c| c.problem.as_deref()),
    ) {
        (Some(delay), _) => writeln!(out, "    one-way delay {}", delay.text()),
        (None, Some(problem)) => writeln!(out, "    one-way delay not measured: {problem}"),
        (None, None) => Ok(()),
    }
}

/// The UDP findings of a trial: a sender below its offered rate, and
/// loss in the receiving socket or before it.
pub fn findings(trial: &TrialResult) -> Vec<Verdict> {
    offer_not_reached(trial)
        .into_iter()
        .chain(loss_verdict(trial))
        .collect()
}

/// A sender that did not reach the rate it was asked to offer: the
/// receiver then got less than asked however well the path carried it.
fn offer_not_reached(trial: &TrialResult) -> Option<Verdict> {
    let udp: UdpResult = trial.sum.extras.get(KEY)?;
    let (offer, percent) = (udp.offered_bits_per_second?, udp.percent_of_offer()?);
    (percent < super::result::OFFER_REACHED_PERCENT).then(|| {
        let mut v = Verdict::new(
            "offered_rate_not_reached",
            format!(
                "sender below its offered rate: offered {}, sender reached {} = {percent:.0}%",
                Rate(offer),
                Rate(udp.sender_bits_per_second)
            ),
        );
        v.side = Some("sender".into());
        v
    })
}

/// Loss worth a verdict: in the receiving socket, or before it.
pub fn loss_verdict(trial: &TrialResult) -> Option<Verdict> {
    let udp: UdpResult = trial.sum.extras.get(KEY)?;
    if udp.loss_percent < Verdict::LOSS_PERCENT || udp.lost_datagrams < 10 {
        return None;
    }
    let rates = format!(
        "sender pushed {}, receiver got {}",
        Rate(udp.sender_bits_per_second),
        Rate(udp.receiver_bits_per_second)
    );
    let in_socket = udp
        .receiver_socket_drops_measured
        .unwrap_or(udp.receiver_socket_drops)
        .min(udp.lost_datagrams);
    if udp.receiver_gro {
        // Drops then count coalesced buffers, so the split is unknown.
        return Some(Verdict::new(
            "udp_loss",
            format!("UDP losing {:.1}% of datagrams ({rates})", udp.loss_percent),
        ));
    }
    let share_of_sent = |n: u64| n as f64 * 100.0 / udp.sent_datagrams.max(1) as f64;
    Some(if in_socket * 2 >= udp.lost_datagrams {
        Verdict::new(
            "socket_buffer_drops",
            format!(
                "receiver dropping in the socket buffer: {:.1}% of datagrams ({rates})",
                share_of_sent(in_socket)
            ),
        )
    } else if let Some(burst) = pacer_burst(trial, &udp) {
        let mut v = Verdict::new(
            "pacer_burst_loss",
            format!(
                "UDP lost {:.1}% of datagrams before the receiving socket while the sender stayed below the \
                 line rate: {burst}, more at once than a queue on the path held ({rates})",
                share_of_sent(udp.lost_datagrams - in_socket)
            ),
        );
        v.side = Some("sender".into());
        v
    } else {
        Verdict::new(
            "path_loss",
            format!(
                "UDP lost {:.1}% of datagrams before the receiving socket — a slower link, router or NIC \
                 on the path ({rates})",
                share_of_sent(udp.lost_datagrams - in_socket)
            ),
        )
    })
}

/// Bursts of the sender's pacer longer than this (in seconds of its rate)
/// are catch-ups after a late wake-up, not its steady pace (about a
/// millisecond's worth per send).
pub const PACER_BURST_SECONDS: f64 = 0.002;

/// The sender's catch-up bursts, in words, when they explain loss on the
/// path better than a slower link does: the path's line rate is known and
/// the sender stayed below 90% of it (a link slower than the offer would
/// have capped the receiver at it), and the pacer sent more than
/// [`PACER_BURST_SECONDS`] of its rate at once. Without a line rate the
/// evidence does not tell the two apart.
fn pacer_burst(trial: &TrialResult, udp: &UdpResult) -> Option<String> {
    let burst = udp.sender_largest_burst_seconds.filter(|&b| b > PACER_BURST_SECONDS)?;
    let line = trial.line_rate.as_ref()?;
    let room = udp.sender_bits_per_second * 100.0 < 90.0 * line.theoretical_goodput_bits_per_second;
    room.then(|| {
        format!(
            "its pacer caught up after waking late in bursts of up to {:.1} ms of its rate ({} of {} \
             theoretical goodput)",
            burst * 1000.0,
            Rate(udp.sender_bits_per_second),
            Rate(line.theoretical_goodput_bits_per_second)
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(u: &UdpResult) -> String {
        let mut out = Vec::new();
        udp_lines("client->agent", u, 3.0, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    /// Regression (issue 43): "LOST 99.60% (11949 of 11997 datagrams)" beside
    /// "14970 dropped at the receiving socket" read as an error: the drops
    /// counted the warm-up. The split is now on the loss's basis, and the
    /// warm-up's drops are named apart.
    #[test]
    fn the_split_of_the_loss_is_on_the_basis_of_the_loss() {
        let mut u = UdpResult {
            sent_datagrams: 11_997,
            received_datagrams: 48,
            lost_datagrams: 11_949,
            loss_percent: 99.6,
            receiver_socket_drops: 14_970,
            receiver_socket_drops_measured: Some(11_900),
            ..UdpResult::default()
        };
        let text = lines(&u);
        assert!(text.contains("LOST 99.60% (11949 of 11997 datagrams)"), "{text}");
        assert!(
            text.contains("of the lost, 11900 dropped at the receiving socket")
                && text.contains("49 before it")
                && text.contains("the warm-up, not counted above, lost 3070 more at the socket"),
            "{text}"
        );
        // Nothing lost: nothing to split.
        (
            u.lost_datagrams,
            u.loss_percent,
            u.receiver_socket_drops,
            u.receiver_socket_drops_measured,
        ) = (0, 0.0, 0, Some(0));
        assert!(
            lines(&u).contains("none dropped at the receiving socket;"),
            "{}",
            lines(&u)
        );
        // A run from before the split (or an iperf3 peer's) says what its count covers.
        (
            u.lost_datagrams,
            u.receiver_socket_drops,
            u.receiver_socket_drops_measured,
        ) = (10, 30, None);
        assert!(lines(&u)
            .contains("30 dropped at the receiving socket (buffer full, in the receiving host; warm-up included)"));
        // A count run names its tail; a timed one cannot know it.
        assert!(!lines(&u).contains("tail"));
        u.lost_at_end_datagrams = Some(3);
        assert!(
            lines(&u).contains("; 3 of the lost came after the last datagram that arrived (the count's tail)"),
            "{}",
            lines(&u)
        );
    }
}
