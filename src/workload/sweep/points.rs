//! The pure parts of a sweep: which sizes to run, how many exchanges each
//! point gets, and what the points add up to. No I/O, no clock.

use std::collections::BTreeSet;

use super::result::{SweepPoint, SweepStep, SweepSummary};

/// Never fewer timed exchanges per point than this (NetPIPE's TRIALS).
pub const MIN_EXCHANGES: u64 = 7;
/// Never more, whatever the estimate says (a runaway guard).
pub const MAX_EXCHANGES: u64 = 50_000_000;
/// The timed exchanges of a point are split into at least this many
/// batches over all its passes (NetPIPE's three trials); `best` is the
/// fastest batch, `mean` all of them together. Few long batches: the best
/// of many short ones is a lucky stretch, lower than NetPIPE's and less
/// repeatable.
pub const BATCHES: u64 = 3;

/// A point is marked wide when its batches spread over more than this
/// share of their median ((max - min) / median, in percent).
pub const WIDE_SPREAD_PERCENT: f64 = 25.0;
/// Wall time the sweep may spend on extra rounds after its passes, as a
/// share of its planned time (sizes x point time).
pub const EXTRA_BUDGET_SHARE: f64 = 0.3;
/// No point takes more than this share of the extra rounds' budget, so
/// that one scattered point cannot use it all.
pub const POINT_BUDGET_SHARE: f64 = 0.2;
/// A point's fastest two batches agree when the second is within this
/// share (percent) of the first: its figure was reached twice.
pub const AGREE_PERCENT: f64 = 2.0;
/// The sizes where the peak is decided: those whose best bandwidth is at
/// least this share of the sweep's best so far.
pub const PEAK_REGION_SHARE: f64 = 0.5;

/// The fastest, median and slowest of a point's batches (seconds per
/// exchange).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Spread {
    pub min: f64,
    pub median: f64,
    pub max: f64,
}

impl Spread {
    /// Min, median (the mean of the middle two for an even count) and max;
    /// None without values.
    pub fn of(values: &[f64]) -> Option<Spread> {
        let mut sorted: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
        if sorted.is_empty() {
            return None;
        }
        sorted.sort_by(f64::total_cmp);
        Some(Spread {
            min: sorted[0],
            median: crate::stats::median(&sorted),
            max: sorted[sorted.len() - 1],
        })
    }

    /// (max - min) / median, in percent.
    pub fn percent(&self) -> f64 {
        if self.median > 0.0 {
            100.0 * (self.max - self.min) / self.median
        } else {
            0.0
        }
    }

    /// The rule that marks a point wide (and runs it again while the
    /// sweep's budget lasts).
    pub fn is_wide(&self) -> bool {
        self.percent() > WIDE_SPREAD_PERCENT
    }
}

/// Whether the fastest two of `batch_each` (seconds per exchange) agree
/// within [`AGREE_PERCENT`]; false with fewer than two.
pub fn best_two_agree(batch_each: &[f64]) -> bool {
    let mut sorted: Vec<f64> = batch_each.iter().copied().filter(|v| v.is_finite()).collect();
    sorted.sort_by(f64::total_cmp);
    match sorted[..] {
        [first, second, ..] if first > 0.0 => 100.0 * (second - first) / first <= AGREE_PERCENT,
        _ => false,
    }
}

/// What the extra rounds' allocation knows of one point after the passes.
#[derive(Debug, Clone, PartialEq)]
pub struct ExtraCandidate {
    /// Seconds per exchange of every timed batch so far.
    pub batch_each: Vec<f64>,
    /// The point's best bandwidth so far.
    pub best_bits_per_second: f64,
    /// What one more round of it is expected to take (its rounds' mean).
    pub round_seconds: f64,
    /// Seconds its extra rounds took so far.
    pub spent_seconds: f64,
}

/// Which point gets the next extra round, if any. A point is a candidate
/// while its batches have not settled: they spread wide (any size), or
/// it is in the peak region ([`PEAK_REGION_SHARE`] of the best bandwidth:
/// the large sizes, where the peak is a maximum of noisy points) and its
/// fastest two batches do not agree. It must fit its own share of the
/// budget ([`POINT_BUDGET_SHARE`] of `budget_seconds`) and what is `left`
/// of it. Of the candidates, the one whose batches spread widest goes
/// first (the smaller size on a tie). None: the extra rounds are over.
pub fn next_extra_round(candidates: &[ExtraCandidate], budget_seconds: f64, left_seconds: f64) -> Option<usize> {
    let peak = candidates.iter().map(|c| c.best_bits_per_second).fold(0.0, f64::max);
    let point_cap = POINT_BUDGET_SHARE * budget_seconds;
    let mut chosen: Option<(usize, f64)> = None;
    for (i, c) in candidates.iter().enumerate() {
        let Some(spread) = Spread::of(&c.batch_each) else {
            continue;
        };
        let unsettled =
            spread.is_wide() || (c.best_bits_per_second >= PEAK_REGION_SHARE * peak && !best_two_agree(&c.batch_each));
        let fits =
            c.round_seconds > 0.0 && c.round_seconds <= left_seconds && c.spent_seconds + c.round_seconds <= point_cap;
        if unsettled && fits && chosen.map_or(true, |(_, widest)| spread.percent() > widest) {
            chosen = Some((i, spread.percent()));
        }
    }
    chosen.map(|(i, _)| i)
}

/// NetPIPE's size list: every power of two and the sizes `perturbation`
/// bytes below and above it, kept within `min..=max`, plus `min` and `max`
/// themselves; sorted, without duplicates.
pub fn size_list(min: u64, max: u64, perturbation: u64) -> Vec<u64> {
    let mut sizes = BTreeSet::new();
    if min == 0 || min > max {
        return Vec::new();
    }
    sizes.insert(min);
    sizes.insert(max);
    let mut power = 1u64;
    loop {
        let around = [
            power.checked_sub(perturbation),
            Some(power),
            power.checked_add(perturbation),
        ];
        for size in around.into_iter().flatten() {
            if size >= min && size <= max {
                sizes.insert(size);
            }
        }
        if power.saturating_sub(perturbation) > max {
            break;
        }
        match power.checked_mul(2) {
            Some(next) => power = next,
            None => break,
        }
    }
    sizes.into_iter().collect()
}

/// How many timed exchanges a point gets so that it takes about
/// `target_seconds`, given the estimated time of one exchange.
pub fn repetitions(target_seconds: f64, estimated_seconds_per_exchange: Option<f64>) -> u64 {
    match estimated_seconds_per_exchange {
        Some(each) if each > 0.0 && each.is_finite() => {
            let n = (target_seconds / each).ceil();
            if n.is_finite() {
                (n as u64).clamp(MIN_EXCHANGES, MAX_EXCHANGES)
            } else {
                MAX_EXCHANGES
            }
        }
        _ => MIN_EXCHANGES,
    }
}

/// How many batches one round of a point has when the sweep makes
/// `passes` passes: together at least [`BATCHES`], each about as long as
/// a one-pass sweep's (two per round for two passes, one from three on).
pub fn batches_per_round(passes: u32) -> u64 {
    BATCHES.div_ceil(u64::from(passes.max(1)))
}

/// Splits `exchanges` into at most `count` batches: (batches, exchanges
/// per batch); the total is rounded up to a multiple of the batch count.
pub fn batches(exchanges: u64, count: u64) -> (u64, u64) {
    let batches = count.max(1).min(exchanges.max(1));
    (batches, exchanges.div_ceil(batches))
}

/// The time one exchange of `size` will take, from the points measured so
/// far (size, seconds per exchange): a line through the last two, never
/// below the last time and never above it scaled by the size ratio.
pub fn estimate(previous: &[(u64, f64)], size: u64) -> Option<f64> {
    let &(s1, t1) = previous.last()?;
    let proportional = t1 * (size as f64 / s1 as f64).max(1.0);
    let linear = match previous.len() {
        n if n >= 2 => {
            let (s0, t0) = previous[n - 2];
            if s1 > s0 {
                let slope = ((t1 - t0) / (s1 - s0) as f64).max(0.0);
                t1 + slope * (size as f64 - s1 as f64)
            } else {
                t1
            }
        }
        _ => t1,
    };
    Some(linear.clamp(t1.min(proportional), proportional.max(t1)))
}

/// Whether `size` needs an untimed probe before its exchange count is
/// chosen: nothing measured yet, or more than twice the last size (too far
/// to extrapolate).
pub fn needs_probe(previous: &[(u64, f64)], size: u64) -> bool {
    match previous.last() {
        Some(&(last, _)) => size > last.saturating_mul(2),
        None => true,
    }
}

/// Sizes within this share of each other form one group (a power of two
/// and its +-3 B perturbations) when steps are looked for.
const GROUP_SHARE: f64 = 0.01;
/// Smaller sizes are latency-bound; their steps are not looked for.
const STEP_MIN_BYTES: u64 = 1024;
/// A step is a fall of more than this share of the bandwidth.
pub const STEP_FALL_PERCENT: f64 = 20.0;

/// Where the best bandwidth falls by more than [`STEP_FALL_PERCENT`] from
/// one group of sizes to the next larger one, and every size of the larger
/// group is below every size of the one before: a fall that repeats at all
/// the sizes of a group is the path's; one that a single size shows is
/// noise. When the points carry several passes, every pass must show a
/// fall there too (of at least [`STEP_PASS_FALL_PERCENT`]): a step that one
/// pass shows and another does not was a slow stretch of the host.
pub fn steps(points: &[SweepPoint]) -> Vec<SweepStep> {
    let mut sorted: Vec<&SweepPoint> = points.iter().filter(|p| p.size_bytes >= STEP_MIN_BYTES).collect();
    sorted.sort_by_key(|p| p.size_bytes);
    let mut groups: Vec<Vec<&SweepPoint>> = Vec::new();
    for p in sorted {
        match groups.last_mut() {
            Some(g) if (p.size_bytes - g[0].size_bytes) as f64 <= GROUP_SHARE * g[0].size_bytes as f64 => g.push(p),
            _ => groups.push(vec![p]),
        }
    }
    groups
        .windows(2)
        .filter_map(|w| {
            let (before, after) = (&w[0], &w[1]);
            let best = |p: &SweepPoint| Some(p.best_bits_per_second);
            let (from, fall) = fall_between(before, after, best)?;
            let to_best = after.iter().map(|p| p.best_bits_per_second).fold(0.0, f64::max);
            if fall <= STEP_FALL_PERCENT || !every_pass_falls(before, after) {
                return None;
            }
            Some(SweepStep {
                from_size_bytes: from.size_bytes,
                from_bits_per_second: from.best_bits_per_second,
                to_min_size_bytes: after[0].size_bytes,
                to_max_size_bytes: after[after.len() - 1].size_bytes,
                to_bits_per_second: to_best,
                fall_percent: fall,
            })
        })
        .collect()
}

/// A pass must show a step's fall by at least this much (percent) for the
/// step to be named.
pub const STEP_PASS_FALL_PERCENT: f64 = 10.0;

/// The slowest point of `before` by `rate`, and how far (percent) the
/// fastest of `after` falls below it; None when a rate is missing or zero.
fn fall_between<'a>(
    before: &[&'a SweepPoint],
    after: &[&SweepPoint],
    rate: impl Fn(&SweepPoint) -> Option<f64>,
) -> Option<(&'a SweepPoint, f64)> {
    let mut from: Option<(&SweepPoint, f64)> = None;
    for p in before {
        let r = rate(p)?;
        if from.map_or(true, |(_, lowest)| r < lowest) {
            from = Some((p, r));
        }
    }
    let (from, from_rate) = from?;
    let mut to = 0.0f64;
    for p in after {
        to = to.max(rate(p)?);
    }
    (from_rate > 0.0).then(|| (from, 100.0 * (1.0 - to / from_rate)))
}

/// Whether every pass shows a fall from `before` to `after`: true when the
/// points do not all carry the same number (two or more) of passes.
fn every_pass_falls(before: &[&SweepPoint], after: &[&SweepPoint]) -> bool {
    let passes = before[0].pass_latency_us.len();
    let all = before.iter().chain(after);
    if passes < 2 || all.clone().any(|p| p.pass_latency_us.len() != passes) {
        return true;
    }
    (0..passes).all(|pass| {
        let rate = |p: &SweepPoint| {
            let us = p.pass_latency_us[pass];
            (us > 0.0).then(|| crate::units::bits_per_second(p.size_bytes, us * 1e-6))
        };
        fall_between(before, after, rate).is_some_and(|(_, fall)| fall >= STEP_PASS_FALL_PERCENT)
    })
}

/// The summary of a sweep from the best figures of its points.
/// Smallest sizes whose fastest batches make the small-message latency
/// (those up to 8 times the smallest): one point is one sample of a noisy
/// figure (a 1-byte point read 150 us where rr read 17 us on the same
/// host), and five sizes of a few bytes cost the same on the wire.
pub const SMALL_SIZES: usize = 5;

/// The points a wire of the line rate could carry: those at or below it.
/// A size read faster (a shaper's token bucket passes what fits at the
/// hosts' speed; a ping-pong lets it refill every half round trip) stays in
/// the points, marked, but makes no peak or n-1/2: a sweep through a
/// 1 Gbit/s lab link "peaked" at 31.3 Gbit/s. When no size is within it
/// (a line rate that is not the path's), every point counts.
pub fn carried(points: &[SweepPoint], link_speed_bits_per_second: Option<f64>) -> Vec<&SweepPoint> {
    let within: Vec<&SweepPoint> = match link_speed_bits_per_second.filter(|l| *l > 0.0) {
        Some(link) => points.iter().filter(|p| p.best_bits_per_second <= link).collect(),
        None => points.iter().collect(),
    };
    match within.is_empty() {
        true => points.iter().collect(),
        false => within,
    }
}

pub fn summarize(points: &[SweepPoint], link_speed_bits_per_second: Option<f64>) -> SweepSummary {
    let Some(first) = points.iter().min_by_key(|p| p.size_bytes) else {
        return SweepSummary::default();
    };
    let pool = carried(points, link_speed_bits_per_second);
    let peak = *pool
        .iter()
        .max_by(|a, b| a.best_bits_per_second.total_cmp(&b.best_bits_per_second))
        .expect("not empty");
    let peak_bps = peak.best_bits_per_second;
    let first_reaching = |share: f64| {
        let mut sorted: Vec<&SweepPoint> = pool.clone();
        sorted.sort_by_key(|p| p.size_bytes);
        sorted
            .into_iter()
            .find(|p| p.best_bits_per_second >= share * peak_bps)
            .map(|p| p.size_bytes)
            .unwrap_or(peak.size_bytes)
    };
    let mut by_size: Vec<&SweepPoint> = points.iter().collect();
    by_size.sort_by_key(|p| p.size_bytes);
    // Small means within 8 times the smallest: 1..7 B of NetPIPE's list.
    let small: Vec<&SweepPoint> = by_size
        .iter()
        .copied()
        .take_while(|p| p.size_bytes <= first.size_bytes.saturating_mul(8))
        .take(SMALL_SIZES)
        .collect();
    let latencies: Vec<f64> = small.iter().map(|p| p.best_latency_us).collect();
    let median = crate::stats::median(&latencies);
    SweepSummary {
        small_message_size_bytes: first.size_bytes,
        small_message_latency_us: median,
        small_message_largest_size_bytes: small.last().map(|p| p.size_bytes),
        peak_bits_per_second: peak_bps,
        peak_size_bytes: peak.size_bytes,
        half_peak_size_bytes: first_reaching(0.5),
        ninety_percent_peak_size_bytes: first_reaching(0.9),
        peak_line_rate_percent: link_speed_bits_per_second
            .filter(|l| *l > 0.0)
            .map(|l| 100.0 * peak_bps / l),
        steps: steps(points),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_powers_of_two_with_perturbations() {
        let sizes = size_list(1, 64, 3);
        assert_eq!(sizes, vec![1, 2, 4, 5, 7, 8, 11, 13, 16, 19, 29, 32, 35, 61, 64]);
        // 1-3 and 2-3 fall below the minimum; 64+3 above the maximum.
    }

    #[test]
    fn default_list_is_sorted_unique_and_in_bounds() {
        let max = 8 << 20;
        let sizes = size_list(1, max, 3);
        assert!(sizes.windows(2).all(|w| w[0] < w[1]), "sorted, no duplicates");
        assert_eq!(sizes.first(), Some(&1));
        assert_eq!(sizes.last(), Some(&max));
        assert!(sizes.iter().all(|&s| (1..=max).contains(&s)));
        for k in 0..=23 {
            assert!(sizes.contains(&(1u64 << k)), "2^{k} missing");
        }
        assert!(sizes.contains(&((1 << 20) - 3)) && sizes.contains(&((1 << 20) + 3)));
        // {1, 2, 4, 5, 7} from 1, 2 and 4; 8 adds 8 and 11; 16 .. 4 MiB add
        // three each (19 powers); 8 MiB adds 8 MiB - 3 and itself.
        assert_eq!(sizes.len(), 5 + 2 + 19 * 3 + 2, "{sizes:?}");
    }

    #[test]
    fn bounds_that_are_not_powers_are_included() {
        let sizes = size_list(100, 1000, 0);
        assert_eq!(sizes, vec![100, 128, 256, 512, 1000]);
        assert_eq!(size_list(5, 5, 3), vec![5]);
        assert!(size_list(10, 5, 3).is_empty());
        assert_eq!(size_list(1, u64::MAX, 0).len(), 65);
    }

    #[test]
    fn repetitions_follow_the_target_and_never_drop_below_seven() {
        assert_eq!(repetitions(0.1, Some(1e-5)), 10_000);
        assert_eq!(repetitions(0.1, Some(0.05)), MIN_EXCHANGES);
        assert_eq!(repetitions(0.1, None), MIN_EXCHANGES);
        assert_eq!(repetitions(0.1, Some(0.0)), MIN_EXCHANGES);
        assert_eq!(repetitions(1.0, Some(1e-12)), MAX_EXCHANGES);
        assert_eq!(repetitions(0.1, Some(0.03)), MIN_EXCHANGES);
        assert_eq!(repetitions(1.0, Some(0.09)), 12);
    }

    #[test]
    fn batches_cover_every_exchange() {
        assert_eq!(batches(7, 3), (3, 3));
        assert_eq!(batches(100, 3), (3, 34));
        assert_eq!(batches(3, 3), (3, 1));
        assert_eq!(batches(2, 3), (2, 1));
        assert_eq!(batches(100, 2), (2, 50));
        assert_eq!(batches(100, 0), (1, 100));
    }

    #[test]
    fn passes_share_the_batches() {
        assert_eq!(batches_per_round(1), 3);
        assert_eq!(batches_per_round(2), 2);
        assert_eq!(batches_per_round(3), 1);
        assert_eq!(batches_per_round(10), 1);
        assert_eq!(batches_per_round(0), 3);
    }

    #[test]
    fn estimates_extrapolate_within_bounds() {
        assert_eq!(estimate(&[], 10), None);
        assert_eq!(estimate(&[(8, 2e-5)], 16), Some(2e-5));
        // Latency-bound: flat line stays flat.
        assert_eq!(estimate(&[(4, 2e-5), (8, 2e-5)], 16), Some(2e-5));
        // Bandwidth-bound: time doubles with size.
        let e = estimate(&[(1 << 20, 1e-3), (2 << 20, 2e-3)], 4 << 20).unwrap();
        assert!((e - 4e-3).abs() < 1e-12, "{e}");
        // A noisy negative slope is ignored; a steep one is capped by the size ratio.
        assert_eq!(estimate(&[(4, 3e-5), (8, 2e-5)], 16), Some(2e-5));
        let capped = estimate(&[(8, 1e-6), (9, 1e-3)], 16).unwrap();
        assert!((capped - 1e-3 * 16.0 / 9.0).abs() < 1e-15, "{capped}");
    }

    #[test]
    fn far_jumps_are_probed() {
        assert!(needs_probe(&[], 1));
        assert!(!needs_probe(&[(4, 1e-5)], 8));
        assert!(needs_probe(&[(4, 1e-5)], 9));
        assert!(needs_probe(&[(1, 1e-5)], 262144));
    }

    fn point(size: u64, latency_us: f64, bits_per_second: f64) -> SweepPoint {
        SweepPoint {
            size_bytes: size,
            exchanges: 7,
            batches: 7,
            seconds: 0.1,
            best_latency_us: latency_us,
            mean_latency_us: latency_us,
            best_bits_per_second: bits_per_second,
            mean_bits_per_second: bits_per_second,
            lost: 0,
            median_latency_us: None,
            max_latency_us: None,
            spread_percent: None,
            rounds: None,
            wide: false,
            pass_latency_us: Vec::new(),
            placement: None,
            together_latency_us: None,
            scheduler_latency_us: None,
        }
    }

    #[test]
    fn spread_is_min_median_max_and_the_wide_rule_is_fixed() {
        let s = Spread::of(&[3.0, 1.0, 2.0]).unwrap();
        assert_eq!((s.min, s.median, s.max), (1.0, 2.0, 3.0));
        assert_eq!(s.percent(), 100.0);
        assert!(s.is_wide());
        let even = Spread::of(&[10.0, 11.0, 12.0, 13.0]).unwrap();
        assert_eq!(even.median, 11.5);
        assert!(even.min <= even.median && even.median <= even.max);
        // 3 / 11.5 = 26% > 25%: wide; 2 / 10.75 = 19%: not.
        assert!(even.is_wide());
        assert!(!Spread::of(&[10.0, 10.5, 11.0, 12.0]).unwrap().is_wide());
        assert!(!Spread::of(&[5.0]).unwrap().is_wide());
        assert_eq!(Spread::of(&[]), None);
        assert_eq!(Spread::of(&[f64::NAN]), None);
    }

    #[test]
    fn a_step_counts_when_every_size_of_the_group_shows_it() {
        let mib = 1u64 << 20;
        let group = |center: u64, rates: [f64; 3]| {
            [center - 3, center, center + 3]
                .into_iter()
                .zip(rates)
                .map(|(s, r)| point(s, 1.0, r))
                .collect::<Vec<_>>()
        };
        // 512 KiB at 60-66 Gbit/s, 1 MiB at 30-40: all three fell, a step.
        let mut points = group(mib / 2, [60e9, 66e9, 64e9]);
        points.extend(group(mib, [30e9, 40e9, 35e9]));
        // 2 MiB: one size fell, the others did not: noise, no step.
        points.extend(group(2 * mib, [20e9, 39e9, 38e9]));
        let found = steps(&points);
        assert_eq!(found.len(), 1, "{found:?}");
        let s = &found[0];
        assert_eq!(s.from_size_bytes, mib / 2 - 3);
        assert_eq!((s.to_min_size_bytes, s.to_max_size_bytes), (mib - 3, mib + 3));
        assert_eq!(s.to_bits_per_second, 40e9);
        assert!((s.fall_percent - 100.0 / 3.0).abs() < 1e-9);
        // Small sizes are latency-bound: not looked at.
        assert!(steps(&[point(512, 1.0, 1e9), point(1000, 1.0, 1e8)]).is_empty());
        assert_eq!(summarize(&points, None).steps, found);
    }

    #[test]
    fn a_step_that_one_pass_does_not_show_is_not_named() {
        let mib = 1u64 << 20;
        // Bandwidth from a latency: size / latency.
        let at = |size: u64, passes_us: &[f64]| {
            let best = passes_us.iter().copied().fold(f64::INFINITY, f64::min);
            let mut p = point(size, best, crate::units::bits_per_second(size, best * 1e-6));
            p.pass_latency_us = passes_us.to_vec();
            p
        };
        let group = |center: u64, passes_us: &[f64]| {
            [center - 3, center, center + 3]
                .into_iter()
                .map(|s| at(s, passes_us))
                .collect::<Vec<_>>()
        };
        // Both passes: 512 KiB in 80 us, 1 MiB in 250 us (a 36% fall): a step.
        let mut repeated = group(mib / 2, &[80.0, 82.0]);
        repeated.extend(group(mib, &[250.0, 240.0]));
        assert_eq!(steps(&repeated).len(), 1);
        // The second pass ran 512 KiB slowly (130 us) and 1 MiB at the same
        // rate per byte (260 us): the best figures still fall 36%, but one
        // pass shows no fall: no step.
        let mut once = group(mib / 2, &[80.0, 130.0]);
        once.extend(group(mib, &[250.0, 260.0]));
        let best_fall = fall_between(
            &once.iter().take(3).collect::<Vec<_>>(),
            &once.iter().skip(3).collect::<Vec<_>>(),
            |p| Some(p.best_bits_per_second),
        )
        .unwrap()
        .1;
        assert!(best_fall > STEP_FALL_PERCENT, "{best_fall}");
        assert!(steps(&once).is_empty(), "{:?}", steps(&once));
        // Points of different pass counts (a sweep stopped in its second
        // pass): judged by the best figure alone.
        let mut mixed = group(mib / 2, &[80.0, 82.0]);
        mixed.extend(group(mib, &[250.0]));
        assert_eq!(steps(&mixed).len(), 1);
    }

    /// Runs the extra rounds' allocation on synthetic points: `next_batches`
    /// gives the batches of a point's next round. Returns each point's extra
    /// rounds and the seconds they took.
    fn allocate(
        candidates: &mut [ExtraCandidate],
        budget: f64,
        mut next_batches: impl FnMut(usize, u32) -> Vec<f64>,
    ) -> (Vec<u32>, f64) {
        let mut rounds = vec![0u32; candidates.len()];
        let mut left = budget;
        while let Some(i) = next_extra_round(candidates, budget, left) {
            let c = &mut candidates[i];
            assert!(c.round_seconds <= left, "a round must fit what is left");
            c.batch_each.extend(next_batches(i, rounds[i]));
            c.spent_seconds += c.round_seconds;
            left -= c.round_seconds;
            rounds[i] += 1;
            assert!(rounds.iter().sum::<u32>() < 10_000, "the allocation must end");
        }
        (rounds, budget - left)
    }

    fn candidate(batch_each: &[f64], size_bytes: u64, round_seconds: f64) -> ExtraCandidate {
        let best = batch_each.iter().copied().fold(f64::INFINITY, f64::min);
        ExtraCandidate {
            batch_each: batch_each.to_vec(),
            best_bits_per_second: crate::units::bits_per_second(size_bytes, best),
            round_seconds,
            spent_seconds: 0.0,
        }
    }

    #[test]
    fn extra_rounds_go_where_the_batches_scatter_and_stop_when_they_agree() {
        let mib = 1u64 << 20;
        let mut points = vec![
            // 0: latency-bound 64 B, 10% apart but not wide: not where the peak is.
            candidate(&[20e-6, 22e-6, 21e-6, 20.5e-6], 64, 0.065),
            // 1: 4 MiB, fastest two 10% apart: scattered, runs again.
            candidate(&[1.0e-3, 1.1e-3, 1.2e-3, 1.15e-3], 4 * mib, 0.065),
            // 2: 8 MiB, fastest two 1% apart: agree, no extra round.
            candidate(&[2.0e-3, 2.02e-3, 2.2e-3, 2.3e-3], 8 * mib, 0.065),
            // 3: 2 MiB, scattered until its second extra round lands by its best.
            candidate(&[0.6e-3, 0.66e-3, 0.7e-3, 0.72e-3], 2 * mib, 0.065),
        ];
        let budget = 1.0;
        let (rounds, spent) = allocate(&mut points, budget, |i, round| match (i, round) {
            // Point 1 never settles: every round 8-9% slower than its best.
            (1, _) => vec![1.08e-3, 1.09e-3],
            // Point 3: one more scattered round, then one at 0.605 ms (within 2% of 0.6).
            (3, 0) => vec![0.68e-3, 0.69e-3],
            (3, _) => vec![0.605e-3, 0.7e-3],
            _ => vec![9.9e-3, 9.9e-3],
        });
        assert_eq!(rounds[0], 0, "outside the peak region, not wide");
        assert_eq!(rounds[2], 0, "its batches agree");
        assert_eq!(rounds[3], 2, "stops once its fastest two agree");
        // Point 1 runs until its share of the budget (0.2 s, three 65 ms rounds) is used.
        assert_eq!(rounds[1], 3);
        assert!(points[1].spent_seconds <= POINT_BUDGET_SHARE * budget);
        assert!(spent <= budget);
    }

    #[test]
    fn extra_rounds_never_exceed_the_budget() {
        // Ten scattered peak-region points whose rounds never settle, costs
        // of 30-120 ms, a budget smaller than their shares together.
        let mut points: Vec<ExtraCandidate> = (0..10u64)
            .map(|k| candidate(&[1.0e-3, 1.2e-3], 1 << 20, 0.03 + 0.01 * k as f64))
            .collect();
        for budget in [0.0, 0.05, 0.5, 1.3] {
            for p in &mut points {
                p.spent_seconds = 0.0;
                p.batch_each.truncate(2);
            }
            let (rounds, spent) = allocate(&mut points, budget, |_, _| vec![1.3e-3, 1.5e-3]);
            assert!(spent <= budget + 1e-12, "budget {budget}: spent {spent}");
            for p in &points {
                assert!(p.spent_seconds <= POINT_BUDGET_SHARE * budget + 1e-12);
            }
            if POINT_BUDGET_SHARE * budget < 0.03 {
                // No round fits a point's share.
                assert!(rounds.iter().all(|&r| r == 0), "{budget}: {rounds:?}");
            } else {
                // Something fit, and the rounds went to more than one point.
                assert!(rounds.iter().filter(|&&r| r > 0).count() >= 2, "{budget}: {rounds:?}");
            }
        }
        // Wide points run again at any size, as before.
        let wide = [
            candidate(&[20e-6, 30e-6, 40e-6], 64, 0.065),
            candidate(&[1e-3, 1.001e-3], 1 << 20, 0.065),
        ];
        assert_eq!(next_extra_round(&wide, 1.0, 1.0), Some(0));
        assert!(!best_two_agree(&[1.0]) && best_two_agree(&[1.0, 1.019]) && !best_two_agree(&[1.0, 1.03]));
    }

    /// Issue 42: a sweep's headline read 150 us from one noisy 1-byte
    /// point where rr read a 17 us round trip; the median of the smallest
    /// sizes' fastest batches does not follow one point.
    #[test]
    fn one_noisy_small_point_does_not_make_the_headline() {
        let points = [
            point(1, 150.0, 5e4),
            point(2, 9.0, 2e6),
            point(3, 9.2, 3e6),
            point(4, 8.9, 4e6),
            point(5, 9.1, 5e6),
            point(7, 30.0, 2e6),
        ];
        let s = summarize(&points, None);
        assert_eq!(s.small_message_latency_us, 9.1);
        assert_eq!(
            (s.small_message_size_bytes, s.small_message_largest_size_bytes),
            (1, Some(5))
        );
        // Fewer points than SMALL_SIZES: the median of those there are.
        let s = summarize(&points[..2], None);
        assert_eq!(s.small_message_latency_us, (150.0 + 9.0) / 2.0);
        assert_eq!(s.small_message_largest_size_bytes, Some(2));
    }

    #[test]
    fn summary_names_latency_peak_and_half_peak() {
        let points = [
            point(1, 20.0, 4e5),
            point(1024, 25.0, 3e8),
            point(65536, 60.0, 5e9),
            point(262144, 200.0, 9.5e9),
            point(1 << 20, 800.0, 1e10),
        ];
        let s = summarize(&points, Some(4e10));
        assert_eq!(s.small_message_size_bytes, 1);
        // Only 1 B is within 8 times the smallest: its latency alone.
        assert_eq!(s.small_message_latency_us, 20.0);
        assert_eq!(s.small_message_largest_size_bytes, Some(1));
        assert_eq!(s.peak_bits_per_second, 1e10);
        assert_eq!(s.peak_size_bytes, 1 << 20);
        assert_eq!(s.half_peak_size_bytes, 65536);
        assert_eq!(s.ninety_percent_peak_size_bytes, 262144);
        assert_eq!(s.peak_line_rate_percent, Some(25.0));
        assert_eq!(summarize(&[], None), SweepSummary::default());
    }

    /// Issue 66: sweeps through 1 Gbit/s lab links "peaked" at 2.77 to 31.3
    /// Gbit/s, sizes a shaper's bucket passed at the hosts' speed. Peak,
    /// n-1/2 and 90% of the peak come from the sizes the wire could carry;
    /// the others stay in the points.
    #[test]
    fn sizes_above_the_line_rate_make_no_peak_or_half_peak() {
        let points = [
            point(1, 20.0, 4e5),
            point(1024, 25.0, 3e8),
            point(16384, 30.0, 31.3e9),
            point(65536, 60.0, 2.77e9),
            point(262144, 200.0, 0.7e9),
            point(1 << 20, 800.0, 0.95e9),
        ];
        let s = summarize(&points, Some(1e9));
        assert_eq!((s.peak_bits_per_second, s.peak_size_bytes), (0.95e9, 1 << 20));
        assert_eq!(s.half_peak_size_bytes, 262144);
        assert_eq!(s.ninety_percent_peak_size_bytes, 1 << 20);
        assert!(s.peak_line_rate_percent.unwrap() <= 100.0);
        assert_eq!(carried(&points, Some(1e9)).len(), 4);
        // Without a line rate every size counts, as before.
        assert_eq!(summarize(&points, None).peak_bits_per_second, 31.3e9);
        // No size within it: the line rate is not the path's; all count.
        assert_eq!(summarize(&points[2..4], Some(1e9)).peak_bits_per_second, 31.3e9);
    }
}
