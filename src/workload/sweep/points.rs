//! The pure parts of a sweep: which sizes to run, how many exchanges each
//! point gets, and what the points add up to. No I/O, no clock.

use std::collections::BTreeSet;

use super::result::{SweepPoint, SweepSummary};

/// Never fewer timed exchanges per point than this (NetPIPE's TRIALS).
pub const MIN_EXCHANGES: u64 = 7;
/// Never more, whatever the estimate says (a runaway guard).
pub const MAX_EXCHANGES: u64 = 50_000_000;
/// The timed exchanges of a point are split into this many batches (at
/// most); `best` is the fastest batch, `mean` all of them together.
pub const BATCHES: u64 = 7;

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

/// Splits `exchanges` into batches: (batches, exchanges per batch); the
/// total is rounded up to a multiple of the batch count.
pub fn batches(exchanges: u64) -> (u64, u64) {
    let batches = BATCHES.min(exchanges.max(1));
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

/// The summary of a sweep from the best figures of its points.
pub fn summarize(points: &[SweepPoint], link_speed_bits_per_second: Option<f64>) -> SweepSummary {
    let Some(first) = points.iter().min_by_key(|p| p.size_bytes) else {
        return SweepSummary::default();
    };
    let peak = points
        .iter()
        .max_by(|a, b| a.best_bits_per_second.total_cmp(&b.best_bits_per_second))
        .expect("not empty");
    let peak_bps = peak.best_bits_per_second;
    let first_reaching = |share: f64| {
        let mut sorted: Vec<&SweepPoint> = points.iter().collect();
        sorted.sort_by_key(|p| p.size_bytes);
        sorted
            .into_iter()
            .find(|p| p.best_bits_per_second >= share * peak_bps)
            .map(|p| p.size_bytes)
            .unwrap_or(peak.size_bytes)
    };
    SweepSummary {
        small_message_size_bytes: first.size_bytes,
        small_message_latency_us: first.best_latency_us,
        peak_bits_per_second: peak_bps,
        peak_size_bytes: peak.size_bytes,
        half_peak_size_bytes: first_reaching(0.5),
        ninety_percent_peak_size_bytes: first_reaching(0.9),
        peak_line_rate_percent: link_speed_bits_per_second
            .filter(|l| *l > 0.0)
            .map(|l| 100.0 * peak_bps / l),
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
        assert_eq!(batches(7), (7, 1));
        assert_eq!(batches(100), (7, 15));
        assert_eq!(batches(3), (3, 1));
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
        }
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
        assert_eq!(s.small_message_latency_us, 20.0);
        assert_eq!(s.peak_bits_per_second, 1e10);
        assert_eq!(s.peak_size_bytes, 1 << 20);
        assert_eq!(s.half_peak_size_bytes, 65536);
        assert_eq!(s.ninety_percent_peak_size_bytes, 262144);
        assert_eq!(s.peak_line_rate_percent, Some(25.0));
        assert_eq!(summarize(&[], None), SweepSummary::default());
    }
}
