//! Statistics for trustworthy figures: summary statistics, the Student t
//! distribution (through the regularized incomplete beta function), the
//! confidence interval of a mean, and the repetition policies with their
//! stopping rule (`--repeat N --pick ...`, netperf's `-I LEVEL,WIDTH -i MAX,MIN`).
//!
//! Everything here is pure code: values in, decisions out.

use serde::{Deserialize, Serialize};

/// Arithmetic mean; NaN for no values.
pub fn mean(values: &[f64]) -> f64 {
    values.iter().sum::<f64>() / values.len() as f64
}

/// Sample standard deviation (n - 1 in the denominator); 0 for fewer than two values.
pub fn stddev(values: &[f64]) -> f64 {
    if values.len() < 2 {
        return 0.0;
    }
    let m = mean(values);
    let ss: f64 = values.iter().map(|v| (v - m) * (v - m)).sum();
    (ss / (values.len() - 1) as f64).sqrt()
}

/// Median (mean of the two middle values for an even count); NaN for none.
/// The one median of nicbench: compare tables, mesh outliers, sweep spreads
/// and repetition summaries all take theirs here.
pub fn median(values: &[f64]) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    if n % 2 == 1 {
        sorted[n / 2]
    } else {
        (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
    }
}

/// ln Γ(x) for x > 0 (Lanczos approximation, g = 7, 9 terms; ~1e-15 relative).
pub fn ln_gamma(x: f64) -> f64 {
    const G: f64 = 7.0;
    const C: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    if x < 0.5 {
        // Reflection: Γ(x)Γ(1-x) = π / sin(πx).
        let pi = std::f64::consts::PI;
        return (pi / (pi * x).sin()).ln() - ln_gamma(1.0 - x);
    }
    let x = x - 1.0;
    let mut a = C[0];
    let t = x + G + 0.5;
    for (i, c) in C.iter().enumerate().skip(1) {
        a += c / (x + i as f64);
    }
    0.5 * (2.0 * std::f64::consts::PI).ln() + (x + 0.5) * t.ln() - t + a.ln()
}

/// Continued fraction of the incomplete beta function (modified Lentz).
fn beta_continued_fraction(a: f64, b: f64, x: f64) -> f64 {
    const TINY: f64 = 1e-300;
    const EPS: f64 = 1e-15;
    let (qab, qap, qam) = (a + b, a + 1.0, a - 1.0);
    let mut c = 1.0;
    let mut d = 1.0 - qab * x / qap;
    if d.abs() < TINY {
        d = TINY;
    }
    d = 1.0 / d;
    let mut h = d;
    for m in 1..=1000 {
        let m = m as f64;
        let m2 = 2.0 * m;
        let aa = m * (b - m) * x / ((qam + m2) * (a + m2));
        d = 1.0 + aa * d;
        d = if d.abs() < TINY { TINY } else { d };
        c = 1.0 + aa / c;
        c = if c.abs() < TINY { TINY } else { c };
        d = 1.0 / d;
        h *= d * c;
        let aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2));
        d = 1.0 + aa * d;
        d = if d.abs() < TINY { TINY } else { d };
        c = 1.0 + aa / c;
        c = if c.abs() < TINY { TINY } else { c };
        d = 1.0 / d;
        let delta = d * c;
        h *= delta;
        if (delta - 1.0).abs() < EPS {
            break;
        }
    }
    h
}

/// The regularized incomplete beta function I_x(a, b), for a, b > 0 and 0 <= x <= 1.
pub fn incomplete_beta(a: f64, b: f64, x: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    if x >= 1.0 {
        return 1.0;
    }
    let ln_front = ln_gamma(a + b) - ln_gamma(a) - ln_gamma(b) + a * x.ln() + b * (1.0 - x).ln();
    let front = ln_front.exp();
    if x < (a + 1.0) / (a + b + 2.0) {
        front * beta_continued_fraction(a, b, x) / a
    } else {
        1.0 - front * beta_continued_fraction(b, a, 1.0 - x) / b
    }
}

/// P(T <= t) for Student's t with `df` degrees of freedom.
pub fn student_t_cdf(t: f64, df: f64) -> f64 {
    let tail = 0.5 * incomplete_beta(df / 2.0, 0.5, df / (df + t * t));
    if t >= 0.0 {
        1.0 - tail
    } else {
        tail
    }
}

/// The p-quantile of Student's t with `df` degrees of freedom (0 < p < 1):
/// the t with P(T <= t) = p, found by bisection on the CDF.
pub fn student_t_quantile(p: f64, df: f64) -> f64 {
    assert!(p > 0.0 && p < 1.0 && df > 0.0, "quantile({p}, {df}) is undefined");
    if p < 0.5 {
        return -student_t_quantile(1.0 - p, df);
    }
    let mut low = 0.0;
    let mut high = 1.0;
    while student_t_cdf(high, df) < p {
        low = high;
        high *= 2.0;
        if high > 1e12 {
            return high;
        }
    }
    for _ in 0..200 {
        let mid = 0.5 * (low + high);
        if student_t_cdf(mid, df) < p {
            low = mid;
        } else {
            high = mid;
        }
        if high - low <= 1e-12 * high {
            break;
        }
    }
    0.5 * (low + high)
}

/// The two-sided confidence interval of the mean of `values`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct MeanInterval {
    pub mean: f64,
    /// Confidence level in percent, e.g. 99.
    pub level_percent: f64,
    pub low: f64,
    pub high: f64,
    /// Full width of the interval as a percentage of the mean (netperf's
    /// measure: 5% means mean +-2.5%).
    pub width_percent: f64,
}

/// Fewest trials whose mean gets a confidence interval. With two, Student's
/// t has one degree of freedom (t(0.975, 1) = 12.7, t(0.995, 1) = 63.7): the
/// interval is 12.7 to 63.7 times as wide as the two trials are apart, and
/// says how few trials there were rather than where the mean lies (two
/// trials of 400 and 636 Mbit/s gave "95% ci -1450 to 2824"). Below this
/// count the trials' min-max is shown instead, and the stopping rule of
/// `--confidence` runs at least this many.
pub const MIN_INTERVAL_TRIALS: usize = 3;

/// The `level_percent` confidence interval of the mean; None for fewer than
/// [`MIN_INTERVAL_TRIALS`] values.
pub fn mean_interval(values: &[f64], level_percent: f64) -> Option<MeanInterval> {
    let n = values.len();
    if n < MIN_INTERVAL_TRIALS {
        return None;
    }
    let m = mean(values);
    let t = student_t_quantile(0.5 + level_percent / 200.0, (n - 1) as f64);
    let half = t * stddev(values) / (n as f64).sqrt();
    let width_percent = if m != 0.0 {
        200.0 * half / m.abs()
    } else {
        f64::INFINITY
    };
    Some(MeanInterval {
        mean: m,
        level_percent,
        low: m - half,
        high: m + half,
        width_percent,
    })
}

impl MeanInterval {
    /// The interval with its bounds kept within what the quantity can be
    /// (`floor`: 0 for a rate or a count). A t interval is symmetric and
    /// reaches below 0 when the trials vary by more than their mean; the
    /// part below the floor holds no possible value, so cutting it off keeps
    /// the interval's coverage. The width stays the t interval's (what the
    /// stopping rule compares); [`MeanInterval::clamped`] says whether a
    /// bound was cut.
    pub fn within(self, floor: f64) -> MeanInterval {
        MeanInterval {
            low: self.low.max(floor),
            high: self.high.max(floor),
            ..self
        }
    }

    /// Whether the interval is not symmetric about its mean: a bound was
    /// cut at what the quantity allows.
    pub fn clamped(&self) -> bool {
        let half_below = self.mean - self.low;
        let half_above = self.high - self.mean;
        (half_above - half_below).abs() > 1e-9 * half_above.abs().max(self.mean.abs()).max(1e-300)
    }
}

/// Which trial of several is reported (`--pick`: `cli::measure::PickArg`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Pick {
    /// The best trial (highest throughput).
    Best,
    /// The median trial; an even count has no middle trial, and the lower
    /// of the two middle ones is reported and named so ("the lower middle
    /// of 4", "the lower of 2"), never "median".
    Median,
    /// The mean over trials; the trial nearest the mean is shown in full.
    Mean,
}

impl Pick {
    /// What the reported one of `n` trials is called: `best`, `mean`, and
    /// `median` only where there is a middle trial; for an even count the
    /// lower of the two middle ones, `lower of 2`, `lower middle of 4`.
    pub fn name_of(self, n: usize) -> String {
        match self {
            Pick::Best => "best".into(),
            Pick::Mean => "mean".into(),
            Pick::Median if n % 2 == 1 => "median".into(),
            Pick::Median if n == 2 => "lower of 2".into(),
            Pick::Median => format!("lower middle of {n}"),
        }
    }
}

/// How many trials a case runs, and which figure it reports.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "policy", rename_all = "snake_case")]
pub enum Policy {
    /// Exactly `trials` trials, then pick one.
    Repeat { trials: u32, pick: Pick },
    /// netperf's rule: at least `min_trials`, at most `max_trials`, until
    /// the `level_percent` interval of the mean is at most `width_percent` wide.
    Confidence {
        level_percent: f64,
        width_percent: f64,
        max_trials: u32,
        min_trials: u32,
    },
}

impl Policy {
    /// One trial, nothing to summarize.
    pub const SINGLE: Policy = Policy::Repeat {
        trials: 1,
        pick: Pick::Median,
    };

    /// Most trials this policy may run (for progress display).
    pub fn max_trials(&self) -> u32 {
        match *self {
            Policy::Repeat { trials, .. } => trials,
            Policy::Confidence { max_trials, .. } => max_trials,
        }
    }
}

/// What to do after a trial.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// Run another trial.
    Continue,
    /// Stop: the policy is satisfied.
    Done,
    /// Stop: MAX trials ran and the interval is still wider than asked;
    /// `width_percent` is what was achieved.
    GaveUp { width_percent: f64 },
}

/// The stopping rule: given the figure of every trial so far, run another?
pub fn decide(policy: &Policy, values: &[f64]) -> Decision {
    let n = values.len() as u32;
    match *policy {
        Policy::Repeat { trials, .. } => {
            if n < trials {
                Decision::Continue
            } else {
                Decision::Done
            }
        }
        Policy::Confidence {
            level_percent,
            width_percent,
            max_trials,
            min_trials,
        } => {
            if n < min_trials.max(MIN_INTERVAL_TRIALS as u32) && n < max_trials {
                return Decision::Continue;
            }
            let achieved = mean_interval(values, level_percent)
                .map(|i| i.width_percent)
                .unwrap_or(f64::INFINITY);
            if achieved <= width_percent {
                Decision::Done
            } else if n >= max_trials {
                Decision::GaveUp {
                    width_percent: achieved,
                }
            } else {
                Decision::Continue
            }
        }
    }
}

/// The index of the trial to report for `pick` (values: higher is better).
pub fn pick_index(values: &[f64], pick: Pick) -> Option<usize> {
    if values.is_empty() {
        return None;
    }
    let mut order: Vec<usize> = (0..values.len()).collect();
    order.sort_by(|&a, &b| values[a].total_cmp(&values[b]));
    Some(match pick {
        Pick::Best => *order.last().expect("not empty"),
        Pick::Median => order[(values.len() - 1) / 2],
        Pick::Mean => {
            let m = mean(values);
            (0..values.len())
                .min_by(|&a, &b| (values[a] - m).abs().total_cmp(&(values[b] - m).abs()))
                .expect("not empty")
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, tolerance: f64) -> bool {
        (a - b).abs() <= tolerance
    }

    #[test]
    fn t_quantiles_match_the_table() {
        // Two-sided critical values from a standard t table (3 decimals).
        let table = [
            (0.995, 1.0, 63.657),
            (0.995, 9.0, 3.250),
            (0.975, 4.0, 2.776),
            (0.975, 1.0, 12.706),
            (0.95, 10.0, 1.812),
            (0.975, 30.0, 2.042),
            (0.995, 2.0, 9.925),
            (0.9, 5.0, 1.476),
        ];
        for (p, df, expected) in table {
            let t = student_t_quantile(p, df);
            assert!(close(t, expected, 0.0006), "t({p}, {df}) = {t}, table says {expected}");
        }
        // Large df approaches the normal quantile 2.5758.
        assert!(close(student_t_quantile(0.995, 1e6), 2.5758, 0.001));
        assert!(close(student_t_quantile(0.025, 4.0), -2.776, 0.0006));
    }

    #[test]
    fn t_cdf_is_symmetric_and_exact_for_one_degree() {
        // With 1 degree of freedom t is Cauchy: CDF = 1/2 + atan(t)/pi.
        for t in [-3.0, -0.5, 0.0, 0.7, 10.0] {
            let exact = 0.5 + f64::atan(t) / std::f64::consts::PI;
            assert!(close(student_t_cdf(t, 1.0), exact, 1e-12), "{t}");
        }
        assert!(close(student_t_cdf(1.3, 7.0) + student_t_cdf(-1.3, 7.0), 1.0, 1e-12));
    }

    #[test]
    fn ln_gamma_of_known_values() {
        assert!(close(ln_gamma(1.0), 0.0, 1e-13));
        assert!(close(ln_gamma(5.0), 24f64.ln(), 1e-12));
        assert!(close(ln_gamma(0.5), std::f64::consts::PI.sqrt().ln(), 1e-12));
    }

    #[test]
    fn summary_statistics() {
        let v = [2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0];
        assert_eq!(mean(&v), 5.0);
        // Sample variance 32/7.
        assert!(close(stddev(&v), (32.0f64 / 7.0).sqrt(), 1e-12));
        assert_eq!(median(&v), 4.5);
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(stddev(&[1.0]), 0.0);
    }

    #[test]
    fn interval_by_hand() {
        // n = 5, mean 10, s = sqrt(2.5) = 1.5811; t(0.975, 4) = 2.7764;
        // half width = 2.7764 * 1.5811 / sqrt(5) = 1.9632; width 39.26% of 10.
        let i = mean_interval(&[8.0, 9.0, 10.0, 11.0, 12.0], 95.0).unwrap();
        assert_eq!(i.mean, 10.0);
        assert!(close(i.high - 10.0, 1.9632, 1e-3), "{i:?}");
        assert!(close(i.low, 10.0 - 1.9632, 1e-3));
        assert!(close(i.width_percent, 39.26, 0.02), "{i:?}");
        assert!(mean_interval(&[1.0], 95.0).is_none());
    }

    fn confidence(max: u32, min: u32) -> Policy {
        Policy::Confidence {
            level_percent: 99.0,
            width_percent: 5.0,
            max_trials: max,
            min_trials: min,
        }
    }

    #[test]
    fn stopping_rule_runs_at_least_min_and_stops_when_narrow() {
        let p = confidence(10, 3);
        assert_eq!(decide(&p, &[100.0]), Decision::Continue);
        // Identical values: zero width, but MIN is 3.
        assert_eq!(decide(&p, &[100.0, 100.0]), Decision::Continue);
        assert_eq!(decide(&p, &[100.0, 100.0, 100.0]), Decision::Done);
        // 99% interval of {100, 101, 99}: s = 1, t(0.995, 2) = 9.925,
        // half = 5.73, width 11.5% > 5%: keep going.
        assert_eq!(decide(&p, &[100.0, 101.0, 99.0]), Decision::Continue);
    }

    #[test]
    fn stopping_rule_gives_up_at_max_with_the_width_achieved() {
        let p = confidence(4, 2);
        let spread = [100.0, 150.0, 80.0, 120.0];
        match decide(&p, &spread) {
            Decision::GaveUp { width_percent } => {
                let expected = mean_interval(&spread, 99.0).unwrap().width_percent;
                assert!(close(width_percent, expected, 1e-9));
                assert!(width_percent > 5.0);
            }
            other => panic!("expected GaveUp, got {other:?}"),
        }
        assert_eq!(decide(&p, &spread[..3]), Decision::Continue);
        // MAX 1 stops after one trial even though no interval exists.
        assert!(matches!(decide(&confidence(1, 1), &[5.0]), Decision::GaveUp { .. }));
    }

    #[test]
    fn repeat_runs_exactly_n() {
        let p = Policy::Repeat {
            trials: 3,
            pick: Pick::Best,
        };
        assert_eq!(decide(&p, &[1.0, 2.0]), Decision::Continue);
        assert_eq!(decide(&p, &[1.0, 2.0, 3.0]), Decision::Done);
    }

    /// Two trials gave `95% ci -1450.75 to 2823.52` Mbit/s: no interval is
    /// made of fewer than three, and the stopping rule runs a third even
    /// when the first two agree.
    #[test]
    fn two_trials_make_no_interval_and_the_rule_runs_a_third() {
        assert!(mean_interval(&[518.19, 854.57], 95.0).is_none());
        assert!(mean_interval(&[5.0, 6.0, 7.0], 95.0).is_some());
        let p = confidence(10, 2);
        assert_eq!(decide(&p, &[100.0, 100.0]), Decision::Continue);
        assert_eq!(decide(&p, &[100.0, 100.0, 100.0]), Decision::Done);
        // MAX 2 cannot meet any width: it gives up, width unknown.
        match decide(&confidence(2, 2), &[100.0, 100.0]) {
            Decision::GaveUp { width_percent } => assert!(width_percent.is_infinite()),
            other => panic!("expected GaveUp, got {other:?}"),
        }
    }

    /// A rate cannot be negative: the interval of three trials that vary by
    /// more than their mean stops at 0, its width still the t interval's.
    #[test]
    fn an_interval_is_kept_within_what_the_quantity_allows() {
        let wide = mean_interval(&[8.25e9, 20.64e9, 11.32e9], 95.0).unwrap();
        assert!(wide.low < 0.0, "{wide:?}");
        assert!(!wide.clamped());
        let kept = wide.within(0.0);
        assert_eq!((kept.low, kept.high), (0.0, wide.high));
        assert_eq!(kept.width_percent, wide.width_percent);
        assert!(kept.clamped());
        let narrow = mean_interval(&[9.0, 10.0, 11.0], 95.0).unwrap();
        assert_eq!(narrow.within(0.0), narrow);
        assert!(!narrow.within(0.0).clamped());
    }

    #[test]
    fn median_is_said_only_where_there_is_a_middle_trial() {
        assert_eq!(Pick::Median.name_of(3), "median");
        assert_eq!(Pick::Median.name_of(1), "median");
        assert_eq!(Pick::Median.name_of(2), "lower of 2");
        assert_eq!(Pick::Median.name_of(4), "lower middle of 4");
        assert_eq!(Pick::Best.name_of(2), "best");
    }

    #[test]
    fn picks() {
        let v = [5.0, 9.0, 1.0, 7.0];
        assert_eq!(pick_index(&v, Pick::Best), Some(1));
        // Sorted 1, 5, 7, 9: the lower middle is 5 (index 0).
        assert_eq!(pick_index(&v, Pick::Median), Some(0));
        // Mean 5.5: nearest is 5.0.
        assert_eq!(pick_index(&v, Pick::Mean), Some(0));
        assert_eq!(pick_index(&[], Pick::Best), None);
    }
}
