//! One-way delays. A packet's transit as its receiver reads it is the
//! receiver's real-time clock at arrival minus the sender's real-time stamp
//! in the packet. On one host that is the one-way delay; between two it is
//! the delay plus the offset of the receiver's clock from the sender's. The
//! receiver keeps the signed transits ([`TransitRecorder`]) and ships their
//! quantiles ([`Transit`]); the client takes the offset out with the
//! control connection's clock estimate (`clock_offset`, docs/CLOCKS.md) and
//! keeps the estimate's bound beside every figure ([`OneWayDelay`]).

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// Nanoseconds of the real-time clock: what every one-way stamp reads (a
/// datagram's send time, an rr responder's stamp), as the kernel's receive
/// timestamps (SO_TIMESTAMPNS) do.
#[inline]
pub fn realtime_nanos() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes into the timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The transit distribution one receiver saw, ns on "receiver's clock at
/// arrival minus sender's clock at send": signed, since the clocks' offset
/// is still in it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Transit {
    /// Datagrams timed (sent after the warm-up with a real-time stamp).
    pub datagrams: u64,
    pub min_ns: i64,
    pub p50_ns: i64,
    pub p90_ns: i64,
    pub p99_ns: i64,
    pub max_ns: i64,
}

/// Largest distance from the first transit kept apart; farther ones (a
/// clock stepped by an hour) are clamped to it.
const SPAN_NANOS: u64 = 3_600_000_000_000;

/// Records signed transits in two HDR histograms (3 significant digits):
/// the distances above and below the first one. A histogram of the raw
/// values would lose the microseconds to the offset's magnitude; the
/// distance from the first transit keeps the digits where the spread is.
#[derive(Debug)]
pub struct TransitRecorder {
    base: Option<i64>,
    above: Histogram<u64>,
    below: Histogram<u64>,
    min: i64,
    max: i64,
}

impl Default for TransitRecorder {
    fn default() -> Self {
        let histogram = || Histogram::new_with_bounds(1, SPAN_NANOS, 3).expect("valid histogram bounds");
        TransitRecorder {
            base: None,
            above: histogram(),
            below: histogram(),
            min: i64::MAX,
            max: i64::MIN,
        }
    }
}

impl TransitRecorder {
    /// One datagram sent at `send_nanos` on the sender's clock and
    /// received at `arrival_nanos` on ours. The stamp is the peer's word:
    /// any 64 bits, so the difference wraps rather than overflows.
    #[inline]
    pub fn record(&mut self, send_nanos: u64, arrival_nanos: u64) {
        let transit = (arrival_nanos as i64).wrapping_sub(send_nanos as i64);
        let base = *self.base.get_or_insert(transit);
        let distance = transit.wrapping_sub(base);
        let (histogram, magnitude) = match distance >= 0 {
            true => (&mut self.above, distance as u64),
            false => (&mut self.below, distance.unsigned_abs()),
        };
        histogram.saturating_record(magnitude.min(SPAN_NANOS));
        self.min = self.min.min(transit);
        self.max = self.max.max(transit);
    }

    /// Datagrams recorded.
    pub fn len(&self) -> u64 {
        self.above.len() + self.below.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The `q` quantile (0..=1), ns: the value below which a share `q` of
    /// the recorded transits lie, to the histograms' 3 digits.
    fn quantile(&self, q: f64) -> Option<i64> {
        let base = self.base?;
        let (below, above, n) = (self.below.len(), self.above.len(), self.len());
        // The rank of the value asked for, 1-based.
        let rank = ((q * n as f64).ceil() as u64).clamp(1, n);
        let value = if rank <= below {
            // Below the base the order turns over: the r-th smallest value
            // has the (below - r + 1)-th smallest distance.
            let k = below - rank + 1;
            base - self.below.value_at_quantile(k as f64 / below as f64) as i64
        } else {
            let k = rank - below;
            base + self.above.value_at_quantile(k as f64 / above as f64) as i64
        };
        Some(value.clamp(self.min, self.max))
    }

    /// The distribution's summary; None when nothing was recorded.
    pub fn summary(&self) -> Option<Transit> {
        Some(Transit {
            datagrams: self.len(),
            min_ns: (!self.is_empty()).then_some(self.min)?,
            p50_ns: self.quantile(0.50)?,
            p90_ns: self.quantile(0.90)?,
            p99_ns: self.quantile(0.99)?,
            max_ns: self.max,
        })
    }
}

/// One direction's one-way delay: the transit's quantiles with the clocks'
/// offset taken out, seconds, and how far off each may be.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct OneWayDelay {
    /// Packets timed.
    pub samples: u64,
    pub min_seconds: f64,
    pub p50_seconds: f64,
    pub p90_seconds: f64,
    pub p99_seconds: f64,
    pub max_seconds: f64,
    /// Every figure above is within this of the true delay, s: the clock
    /// offset's bound over the test (the estimate's own, widened by the
    /// drift possible over half the test). Zero cannot happen: the two ends
    /// read their clocks at different instants.
    pub clock_bound_seconds: f64,
}

impl OneWayDelay {
    /// The delays of `transit`, read by a receiver whose clock is
    /// `receiver_minus_sender_us` ahead of the sender's, known to within
    /// `bound_us`.
    pub fn of(transit: &Transit, receiver_minus_sender_us: f64, bound_us: f64) -> OneWayDelay {
        let seconds = |ns: i64| (ns as f64 - receiver_minus_sender_us * 1e3) / 1e9;
        OneWayDelay {
            samples: transit.datagrams,
            min_seconds: seconds(transit.min_ns),
            p50_seconds: seconds(transit.p50_ns),
            p90_seconds: seconds(transit.p90_ns),
            p99_seconds: seconds(transit.p99_ns),
            max_seconds: seconds(transit.max_ns),
            clock_bound_seconds: bound_us / 1e6,
        }
    }

    /// Whether the figures say something: the bound is narrower than the
    /// median delay. When it is not, a delay printed could be anything from
    /// nothing to twice itself. (A bound of 0: both ends read one clock.)
    pub fn telling(&self) -> bool {
        self.clock_bound_seconds < self.p50_seconds
    }

    /// The worst of several directions or streams, figure by figure (an
    /// upper bound of each quantile of them together, as jitter's sum is
    /// the largest); None for none.
    pub fn worst<'a>(delays: impl Iterator<Item = &'a OneWayDelay>) -> Option<OneWayDelay> {
        delays.cloned().reduce(|a, b| OneWayDelay {
            samples: a.samples + b.samples,
            min_seconds: a.min_seconds.min(b.min_seconds),
            p50_seconds: a.p50_seconds.max(b.p50_seconds),
            p90_seconds: a.p90_seconds.max(b.p90_seconds),
            p99_seconds: a.p99_seconds.max(b.p99_seconds),
            max_seconds: a.max_seconds.max(b.max_seconds),
            clock_bound_seconds: a.clock_bound_seconds.max(b.clock_bound_seconds),
        })
    }

    /// How the figures read: "p50 38 us, p99 120 us (min 21 us, max 1.20 ms;
    /// clocks +/- 9.0 us)", "...; one clock)" when both ends read one
    /// kernel's clock, or why there are none.
    pub fn text(&self) -> String {
        let bound = delay_text(self.clock_bound_seconds);
        let clocks = match self.clock_bound_seconds {
            0.0 => "one clock".to_string(),
            _ => format!("clocks +/- {bound}"),
        };
        if !self.telling() {
            return format!(
                "not shown: the clocks' offset is known to +/- {bound}, not less than the median delay ({})",
                delay_text(self.p50_seconds)
            );
        }
        format!(
            "p50 {}, p99 {} (min {}, max {}; {clocks})",
            delay_text(self.p50_seconds),
            delay_text(self.p99_seconds),
            delay_text(self.min_seconds),
            delay_text(self.max_seconds)
        )
    }
}

/// A delay in a unit that fits it: "7.2 us", "38 us", "1.20 ms", "2.05 s".
pub fn delay_text(seconds: f64) -> String {
    let a = seconds.abs();
    if a < 10e-6 {
        format!("{:.1} us", seconds * 1e6)
    } else if a < 1e-3 {
        format!("{:.0} us", seconds * 1e6)
    } else if a < 1.0 {
        format!("{:.2} ms", seconds * 1e3)
    } else {
        format!("{seconds:.2} s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The exact quantile of a sorted sample, as [`TransitRecorder`] means it.
    fn exact(sorted: &[i64], q: f64) -> i64 {
        let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
        sorted[rank - 1]
    }

    fn close(got: i64, want: i64) -> bool {
        // 3 significant digits of the distance from the first value.
        (got - want).abs() <= (want.abs() / 500).max(2)
    }

    #[test]
    fn nothing_recorded_has_no_summary() {
        assert_eq!(TransitRecorder::default().summary(), None);
    }

    #[test]
    fn quantiles_of_signed_transits_match_the_sorted_sample() {
        // A clock 5 s behind the sender's: every transit is negative; the
        // first one sits in the middle, so both histograms are used.
        let offset = -5_000_000_000i64;
        let mut r = TransitRecorder::default();
        let mut sample = Vec::new();
        for i in 0..10_000i64 {
            let delay = 40_000 + (i * 7919 % 10_000) * 13; // 40 µs .. 170 µs, scrambled
            let send = 1_700_000_000_000_000_000u64 + i as u64 * 1000;
            r.record(send, (send as i64 + delay + offset) as u64);
            sample.push(delay + offset);
        }
        sample.sort_unstable();
        let s = r.summary().unwrap();
        assert_eq!(s.datagrams, 10_000);
        assert_eq!((s.min_ns, s.max_ns), (sample[0], sample[9_999]));
        for (got, q) in [(s.p50_ns, 0.5), (s.p90_ns, 0.9), (s.p99_ns, 0.99)] {
            let want = exact(&sample, q);
            assert!(close(got - offset, want - offset), "q {q}: {got} against {want}");
        }
    }

    #[test]
    fn one_datagram_is_every_quantile() {
        let mut r = TransitRecorder::default();
        r.record(1_000, 251_000);
        let s = r.summary().unwrap();
        assert_eq!(
            (s.min_ns, s.p50_ns, s.p99_ns, s.max_ns, s.datagrams),
            (250_000, 250_000, 250_000, 250_000, 1)
        );
    }

    #[test]
    fn any_stamp_a_peer_sends_is_recorded_without_overflow() {
        let mut r = TransitRecorder::default();
        for send in [u64::MAX, 0, u64::MAX / 2, 1 << 63, 12_345] {
            r.record(send, 1_000);
        }
        let s = r.summary().unwrap();
        assert_eq!(s.datagrams, 5);
        assert!(
            s.min_ns <= s.p50_ns && s.p50_ns <= s.p99_ns && s.p99_ns <= s.max_ns,
            "{s:?}"
        );
    }

    #[test]
    fn the_offset_comes_out_and_the_bound_stays_beside() {
        // The receiver's clock runs 2 ms ahead: transits read 2.05 ms for 50 µs.
        let t = Transit {
            datagrams: 10,
            min_ns: 2_040_000,
            p50_ns: 2_050_000,
            p90_ns: 2_060_000,
            p99_ns: 2_070_000,
            max_ns: 2_100_000,
        };
        let d = OneWayDelay::of(&t, 2_000.0, 9.0);
        assert!((d.p50_seconds - 50e-6).abs() < 1e-12, "{d:?}");
        assert!((d.min_seconds - 40e-6).abs() < 1e-12);
        assert!((d.clock_bound_seconds - 9e-6).abs() < 1e-12);
        assert_eq!(
            d.text(),
            "p50 50 us, p99 70 us (min 40 us, max 100 us; clocks +/- 9.0 us)"
        );
        let one = OneWayDelay::of(&t, 2_000.0, 0.0);
        assert_eq!(one.text(), "p50 50 us, p99 70 us (min 40 us, max 100 us; one clock)");
        // The same transits read by a client the agent is 2 ms behind.
        let back = OneWayDelay::of(&t, -2_000.0, 9.0);
        assert!((back.p50_seconds - 4.05e-3).abs() < 1e-12);
    }

    #[test]
    fn a_bound_wider_than_the_median_shows_no_figure() {
        let t = Transit {
            datagrams: 1,
            min_ns: 30_000,
            p50_ns: 30_000,
            p90_ns: 30_000,
            p99_ns: 30_000,
            max_ns: 30_000,
        };
        let d = OneWayDelay::of(&t, 0.0, 45.0);
        assert!(!d.telling());
        assert_eq!(
            d.text(),
            "not shown: the clocks' offset is known to +/- 45 us, not less than the median delay (30 us)"
        );
    }

    #[test]
    fn the_worst_of_two_takes_each_figure_s_worst() {
        let a = OneWayDelay {
            samples: 1,
            min_seconds: 1.0,
            p50_seconds: 2.0,
            p90_seconds: 3.0,
            p99_seconds: 4.0,
            max_seconds: 9.0,
            clock_bound_seconds: 0.1,
        };
        let b = OneWayDelay {
            samples: 2,
            min_seconds: 0.5,
            p50_seconds: 3.0,
            p90_seconds: 3.5,
            p99_seconds: 3.9,
            max_seconds: 5.0,
            clock_bound_seconds: 0.2,
        };
        let w = OneWayDelay::worst([a, b].iter()).unwrap();
        assert_eq!(
            (
                w.samples,
                w.min_seconds,
                w.p50_seconds,
                w.p99_seconds,
                w.max_seconds,
                w.clock_bound_seconds
            ),
            (3, 0.5, 3.0, 4.0, 9.0, 0.2)
        );
        assert_eq!(OneWayDelay::worst(std::iter::empty()), None);
    }
}
