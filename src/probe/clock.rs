//! The clocks behind one-way figures (issue 70, docs/CLOCKS.md): how this
//! host's kernel says its clock is disciplined, and the offset of a peer's
//! clock estimated from timestamped exchanges, with the bound that no
//! asymmetry of the path can exceed.
//!
//! One exchange gives four readings of CLOCK_REALTIME: the client's send
//! `t1`, the agent's receipt `t2` and reply `t3`, the client's receipt
//! `t4`. Whatever the two legs of the path take, the agent's clock minus
//! the client's lies between `t3 - t4` (the reply took no time) and
//! `t2 - t1` (the request took none). NTP reports the middle of that
//! interval and trusts the path to be symmetric; this estimator keeps the
//! interval. Over many exchanges the offset is a line, `offset + drift x
//! time`, and every line that passes through all the intervals is
//! possible: the estimate is the middle of the range those lines give at
//! the time asked about, its bound half that range. An asymmetric path
//! widens the intervals, so it widens the bound; it never moves a
//! confident estimate away from the truth.

use std::fmt;

use crate::model::ClockSync;

/// The kernel's largest frequency correction (MAXFREQ, 500 ppm): no
/// disciplined or free-running clock the kernel keeps drifts faster, so
/// the drift searched is within it.
pub const MAX_DRIFT_PPM: f64 = 500.0;

/// This host's CLOCK_REALTIME now, ns since the epoch: the reading each end
/// of a clock exchange takes (`Message::ClockRequest`).
pub fn realtime_ns() -> i64 {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    i64::try_from(now.as_nanos()).unwrap_or(i64::MAX)
}

/// The resolution of this host's CLOCK_REALTIME, ns (clock_getres; 1 ns on
/// a kernel with high-resolution timers), or 1 µs where it cannot be read.
pub fn realtime_resolution_ns() -> f64 {
    let mut res = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_getres writes one timespec into the one we pass.
    let read = unsafe { libc::clock_getres(libc::CLOCK_REALTIME, &mut res) } == 0;
    match read {
        true => (res.tv_sec as f64 * 1e9 + res.tv_nsec as f64).max(1.0),
        false => 1_000.0,
    }
}

/// Daemons that discipline the clock, by process name.
const DAEMONS: [&str; 8] = [
    "chronyd",
    "ntpd",
    "ntpsec",
    "openntpd",
    "systemd-timesyn",
    "ptp4l",
    "phc2sys",
    "timemaster",
];

/// The kernel clock's discipline (adjtimex with no change requested) and
/// the time daemons running; None where adjtimex fails.
pub fn sync_state() -> Option<ClockSync> {
    // SAFETY: timex is plain data; modes = 0 reads and changes nothing.
    let mut timex: libc::timex = unsafe { std::mem::zeroed() };
    let state = unsafe { libc::adjtimex(&mut timex) };
    if state < 0 {
        return None;
    }
    Some(ClockSync {
        synchronized: timex.status & libc::STA_UNSYNC == 0 && state != libc::TIME_ERROR,
        estimated_error_us: timex.esterror as i64,
        maximum_error_us: timex.maxerror as i64,
        daemons: running_daemons(),
    })
}

/// The time daemons among the processes /proc shows.
fn running_daemons() -> Vec<String> {
    let mut found: Vec<String> = std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter(|entry| entry.file_name().to_string_lossy().bytes().all(|b| b.is_ascii_digit()))
        .filter_map(|entry| std::fs::read_to_string(entry.path().join("comm")).ok())
        .map(|comm| comm.trim().to_string())
        .filter(|comm| DAEMONS.contains(&comm.as_str()))
        .map(|comm| {
            if comm == "systemd-timesyn" {
                "systemd-timesyncd".into()
            } else {
                comm
            }
        })
        .collect();
    found.sort();
    found.dedup();
    found
}

/// One timestamped exchange, nanoseconds of CLOCK_REALTIME since the
/// epoch: `t1`, `t4` on the client's clock, `t2`, `t3` on the agent's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Exchange {
    pub client_sent_ns: i64,
    pub agent_received_ns: i64,
    pub agent_sent_ns: i64,
    pub client_received_ns: i64,
}

impl Exchange {
    /// The time the network held the exchange: the round trip less the
    /// agent's own time, ns.
    pub fn path_ns(&self) -> i64 {
        (self.client_received_ns - self.client_sent_ns) - (self.agent_sent_ns - self.agent_received_ns)
    }

    /// NTP's offset (agent minus client, ns): right only on a symmetric path.
    pub fn symmetric_offset_ns(&self) -> f64 {
        ((self.agent_received_ns - self.client_sent_ns) as f64 + (self.agent_sent_ns - self.client_received_ns) as f64)
            / 2.0
    }

    /// Why this exchange cannot be used, if it cannot.
    fn defect(&self) -> Option<&'static str> {
        if self.client_received_ns < self.client_sent_ns {
            Some("the client's clock went back during the exchange")
        } else if self.agent_sent_ns < self.agent_received_ns {
            Some("the agent's clock went back during the exchange")
        } else if self.path_ns() < 0 {
            Some("the agent held the exchange longer than the client waited for it")
        } else {
            None
        }
    }
}

/// The agent's clock against the client's at one moment.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Estimate {
    /// Agent minus client, ns: the middle of the offsets every exchange allows.
    pub offset_ns: f64,
    /// The true offset is within `offset_ns` plus or minus this, ns, however
    /// the path's delay splits between its directions.
    pub bound_ns: f64,
    /// The client time (ns since the epoch) the estimate is for.
    pub at_ns: i64,
    /// The agent's clock's rate against the client's, ppm (positive: the
    /// agent's runs fast), and its bound; None when the exchanges span too
    /// little time to narrow it below the kernel's 500 ppm.
    pub drift_ppm: Option<(f64, f64)>,
    /// Exchanges used; exchanges refused as impossible (a clock stepped back).
    pub used: usize,
    pub refused: usize,
}

impl fmt::Display for Estimate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "agent clock {:+.3} ms +/- {:.3} ms against the client's",
            self.offset_ns / 1e6,
            self.bound_ns / 1e6
        )?;
        if let Some((drift, bound)) = self.drift_ppm {
            write!(f, ", drifting {drift:+.1} +/- {bound:.1} ppm")?;
        }
        write!(f, " ({} exchanges", self.used)?;
        if self.refused > 0 {
            write!(f, ", {} refused", self.refused)?;
        }
        write!(f, ")")
    }
}

impl Estimate {
    /// The estimate as a run records it (`clock_offset`, µs and ppm).
    pub fn recorded(&self) -> crate::model::ClockOffset {
        crate::model::ClockOffset {
            agent_minus_client_us: Some(self.offset_ns / 1e3),
            bound_us: Some(self.bound_ns / 1e3),
            drift_ppm: self.drift_ppm.map(|(drift, _)| drift),
            drift_bound_ppm: self.drift_ppm.map(|(_, bound)| bound),
            exchanges: self.used as u32,
            refused: self.refused as u32,
            problem: None,
            one_clock: false,
        }
    }
}

/// What a run records of `exchanges`, estimated at client time `at_ns`:
/// the offset and its bound, or why there is none.
pub fn recorded(exchanges: &[Exchange], at_ns: i64) -> crate::model::ClockOffset {
    match estimate(exchanges, realtime_resolution_ns(), at_ns) {
        Ok(estimate) => estimate.recorded(),
        Err(error) => crate::model::ClockOffset {
            exchanges: match error {
                ClockError::Inconsistent { used } => used as u32,
                ClockError::NoExchange { .. } => 0,
            },
            refused: match error {
                ClockError::NoExchange { refused, .. } => refused as u32,
                ClockError::Inconsistent { .. } => 0,
            },
            problem: Some(error.to_string()),
            ..Default::default()
        },
    }
}

/// A trial's offset (agent minus client) and its bound, µs, anywhere in a
/// test of `seconds`: 0 exactly when both ends read one kernel's clock;
/// else the estimate, at the trial's middle, so its bound widens by the
/// drift still possible over half the test (the measured drift's bound,
/// or the kernel's 500 ppm when the bursts did not narrow it). None when
/// the exchanges fit no offset.
pub fn offset_within(c: &crate::model::ClockOffset, seconds: f64) -> Option<(f64, f64)> {
    if c.one_clock {
        return Some((0.0, 0.0));
    }
    let drift_bound = c.drift_bound_ppm.unwrap_or(MAX_DRIFT_PPM);
    // ppm x seconds = µs.
    Some((
        c.agent_minus_client_us?,
        c.bound_us? + drift_bound * seconds.max(0.0) / 2.0,
    ))
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ClockError {
    #[error("no clock exchange to estimate from{}", refused_words(.refused, .why))]
    NoExchange { refused: usize, why: &'static str },
    #[error(
        "the {used} clock exchanges fit no single offset with a steady drift within 500 ppm: a clock was stepped \
         (a time daemon's step, `date -s`) or slewed beyond the kernel's limit while they ran; run again, \
         and check the time daemons' logs on both hosts"
    )]
    Inconsistent { used: usize },
}

fn refused_words(refused: &usize, why: &&'static str) -> String {
    if *refused == 0 {
        String::new()
    } else {
        format!(": all {refused} were refused ({why})")
    }
}

/// One constraint: `low <= offset + drift * x <= high`, x in seconds from
/// the first exchange, offsets in ns and drift in ns per second (= ppb).
#[derive(Debug, Clone, Copy)]
struct Band {
    x: f64,
    low: f64,
    high: f64,
}

/// Estimates the agent's clock against the client's at client time `at_ns`
/// from `exchanges`, each reading exact to within `resolution_ns`.
pub fn estimate(exchanges: &[Exchange], resolution_ns: f64, at_ns: i64) -> Result<Estimate, ClockError> {
    let mut refused = 0;
    let mut why = "";
    let mut usable: Vec<&Exchange> = Vec::with_capacity(exchanges.len());
    for exchange in exchanges {
        match exchange.defect() {
            Some(defect) => {
                refused += 1;
                why = defect;
            }
            None => usable.push(exchange),
        }
    }
    let Some(first) = usable.first() else {
        return Err(ClockError::NoExchange { refused, why });
    };
    let origin = first.client_sent_ns;
    // The narrowest exchanges say the most; a few hundred bound the work
    // (every pair of band edges is tried against every band).
    usable.sort_by_key(|e| e.path_ns());
    usable.truncate(MAX_BANDS);
    let bands: Vec<Band> = usable
        .iter()
        .map(|e| Band {
            // The middle of the client's wait, where the offset is read.
            x: ((e.client_sent_ns - origin) as f64 + (e.client_received_ns - e.client_sent_ns) as f64 / 2.0) / 1e9,
            low: (e.agent_sent_ns - e.client_received_ns) as f64 - resolution_ns,
            high: (e.agent_received_ns - e.client_sent_ns) as f64 + resolution_ns,
        })
        .collect();
    let x_at = (at_ns - origin) as f64 / 1e9;
    let max_drift = MAX_DRIFT_PPM * 1e3; // ns per second
    let vertices = feasible_vertices(&bands, max_drift);
    if vertices.is_empty() {
        return Err(ClockError::Inconsistent { used: bands.len() });
    }
    let range = |f: &dyn Fn(&(f64, f64)) -> f64| {
        vertices
            .iter()
            .map(f)
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| (lo.min(v), hi.max(v)))
    };
    let (low, high) = range(&|(offset, drift)| offset + drift * x_at);
    let (drift_low, drift_high) = range(&|(_, drift)| *drift);
    let drift_ppm = (drift_high - drift_low < 2.0 * max_drift * 0.999)
        .then(|| ((drift_low + drift_high) / 2e3, (drift_high - drift_low) / 2e3));
    Ok(Estimate {
        offset_ns: (low + high) / 2.0,
        bound_ns: (high - low) / 2.0,
        at_ns,
        drift_ppm,
        used: bands.len(),
        refused,
    })
}

const MAX_BANDS: usize = 256;

/// The corners of the set of (offset, drift) lines that pass through every
/// band with |drift| <= `max_drift`: a convex polygon, so the extremes of
/// any linear figure over it are at these corners. Empty when no line fits.
fn feasible_vertices(bands: &[Band], max_drift: f64) -> Vec<(f64, f64)> {
    // Each edge is offset + drift * x = value; the drift limits are edges
    // offset * 0 + drift = +/- max_drift, written (a, b, value) as
    // a * offset + b * drift = value.
    let mut edges: Vec<(f64, f64, f64)> = Vec::with_capacity(2 * bands.len() + 2);
    for band in bands {
        edges.push((1.0, band.x, band.low));
        edges.push((1.0, band.x, band.high));
    }
    edges.push((0.0, 1.0, max_drift));
    edges.push((0.0, 1.0, -max_drift));
    // Tolerance for a point on an edge: a thousandth of a nanosecond over
    // the offsets' scale.
    let scale = bands.iter().map(|b| b.low.abs().max(b.high.abs())).fold(1.0, f64::max);
    let tolerance = 1e-3 + scale * 1e-12;
    let fits = |offset: f64, drift: f64| {
        drift.abs() <= max_drift * (1.0 + 1e-9)
            && bands.iter().all(|b| {
                let at = offset + drift * b.x;
                at >= b.low - tolerance && at <= b.high + tolerance
            })
    };
    let mut vertices = Vec::new();
    for (i, &(a1, b1, c1)) in edges.iter().enumerate() {
        for &(a2, b2, c2) in &edges[i + 1..] {
            let determinant = a1 * b2 - a2 * b1;
            if determinant.abs() < 1e-12 {
                continue;
            }
            let offset = (c1 * b2 - c2 * b1) / determinant;
            let drift = (a1 * c2 - a2 * c1) / determinant;
            if fits(offset, drift) {
                vertices.push((offset, drift));
            }
        }
    }
    vertices
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: i64 = 1_000_000_000;
    const START: i64 = 1_796_600_000 * SECOND;

    /// Exchanges from a model: the agent's clock reads `offset_ns + drift
    /// ppm` ahead of the client's; the request takes `up_ns`, the reply
    /// `down_ns` (each plus `jitter(i)`), the agent holds each 20 us.
    fn recorded(
        count: i64,
        every_ns: i64,
        offset_ns: f64,
        drift_ppm: f64,
        up_ns: i64,
        down_ns: i64,
        jitter: impl Fn(i64) -> (i64, i64),
    ) -> Vec<Exchange> {
        let agent =
            |client_ns: i64| client_ns + (offset_ns + drift_ppm * 1e-6 * (client_ns - START) as f64).round() as i64;
        (0..count)
            .map(|i| {
                let (extra_up, extra_down) = jitter(i);
                let t1 = START + i * every_ns;
                let arrives = t1 + up_ns + extra_up;
                let leaves = arrives + 20_000;
                let t4 = leaves + down_ns + extra_down;
                Exchange {
                    client_sent_ns: t1,
                    agent_received_ns: agent(arrives),
                    agent_sent_ns: agent(leaves),
                    client_received_ns: t4,
                }
            })
            .collect()
    }

    fn truth(offset_ns: f64, drift_ppm: f64, at_ns: i64) -> f64 {
        offset_ns + drift_ppm * 1e-6 * (at_ns - START) as f64
    }

    fn assert_within(estimate: &Estimate, true_ns: f64) {
        assert!(
            (estimate.offset_ns - true_ns).abs() <= estimate.bound_ns + 1.0,
            "the truth {true_ns} ns is outside {estimate}"
        );
    }

    #[test]
    fn one_clock_read_at_both_ends_is_bounded_around_zero() {
        // Loopback or two lab hosts: one clock, so the offset is 0 and the
        // bound must hold it whatever the delays.
        let exchanges = recorded(50, SECOND / 10, 0.0, 0.0, 30_000, 45_000, |i| {
            ((i * 7919) % 40_000, (i * 104_729) % 90_000)
        });
        let later = estimate(&exchanges, 1.0, START + 5 * SECOND).unwrap();
        assert_within(&later, 0.0);
        assert_eq!((later.used, later.refused), (50, 0));
        // At the first exchange (its path 75 us, the narrowest) the bound is
        // at most half that path.
        let first = estimate(&exchanges, 1.0, START + (30_000 + 20_000 + 45_000) / 2).unwrap();
        assert_within(&first, 0.0);
        assert!(first.bound_ns <= 75_000.0 / 2.0 + 2.0, "{first}");
    }

    #[test]
    fn a_known_offset_is_found_within_the_bound_on_a_symmetric_path() {
        let exchanges = recorded(40, SECOND / 4, 3_250_000.0, 0.0, 100_000, 100_000, |i| {
            ((i % 5) * 10_000, (i % 3) * 10_000)
        });
        let estimate = estimate(&exchanges, 1.0, START + 10 * SECOND).unwrap();
        assert_within(&estimate, 3_250_000.0);
        // The narrowest exchanges' paths are 200 us: the bound is near half
        // of that, not the 3 ms of the offset.
        assert!(estimate.bound_ns < 150_000.0, "{estimate}");
    }

    #[test]
    fn an_asymmetric_path_widens_the_bound_and_never_moves_it_off_the_truth() {
        // 5 ms up, 1 ms back: NTP's middle is 2 ms off the truth.
        let exchanges = recorded(40, SECOND / 4, -700_000.0, 0.0, 5_000_000, 1_000_000, |_| (0, 0));
        let ntp = exchanges[0].symmetric_offset_ns();
        assert!((ntp - -700_000.0 - 2_000_000.0).abs() < 1_000.0, "NTP's answer {ntp}");
        let estimate = estimate(&exchanges, 1.0, START + 5 * SECOND).unwrap();
        assert_within(&estimate, -700_000.0);
        assert!(estimate.bound_ns >= 2_000_000.0, "{estimate}");
    }

    #[test]
    fn a_steady_drift_is_measured_and_the_offset_followed_through_it() {
        // 40 ppm over 60 s: 2.4 ms of drift, far more than one exchange's bound.
        let exchanges = recorded(121, SECOND / 2, 1_000_000.0, 40.0, 200_000, 200_000, |i| {
            ((i % 4) * 50_000, (i % 7) * 30_000)
        });
        let end = START + 60 * SECOND;
        let estimate = estimate(&exchanges, 1.0, end).unwrap();
        assert_within(&estimate, truth(1_000_000.0, 40.0, end));
        let (drift, bound) = estimate.drift_ppm.expect("60 s of exchanges narrow the drift");
        assert!((drift - 40.0).abs() <= bound + 0.01, "{estimate}");
        assert!(bound < 20.0, "{estimate}");
        // Without the drift the offset at the end would be 2.4 ms off.
        assert!(estimate.bound_ns < 1_000_000.0, "{estimate}");
    }

    #[test]
    fn exchanges_within_a_moment_leave_the_drift_unknown_and_widen_with_time_asked_about() {
        let exchanges = recorded(10, SECOND / 1000, 0.0, 0.0, 50_000, 50_000, |_| (0, 0));
        let now = estimate(&exchanges, 1.0, START).unwrap();
        assert_eq!(now.drift_ppm, None);
        // An hour later the kernel's 500 ppm could have moved it 1.8 s.
        let later = estimate(&exchanges, 1.0, START + 3600 * SECOND).unwrap();
        assert!(
            later.bound_ns > 1.7e9 && later.bound_ns > now.bound_ns * 1000.0,
            "{later}"
        );
        assert_within(&later, 0.0);
    }

    #[test]
    fn a_stepped_clock_is_refused_instead_of_averaged() {
        let mut exchanges = recorded(20, SECOND / 10, 0.0, 0.0, 40_000, 40_000, |_| (0, 0));
        // The agent's clock jumps 50 ms forward half-way through.
        for e in &mut exchanges[10..] {
            e.agent_received_ns += 50_000_000;
            e.agent_sent_ns += 50_000_000;
        }
        let error = estimate(&exchanges, 1.0, START).unwrap_err();
        assert_eq!(error, ClockError::Inconsistent { used: 20 });
        assert!(error.to_string().contains("stepped"), "{error}");
    }

    #[test]
    fn impossible_exchanges_are_counted_and_an_estimate_needs_one_good_one() {
        let mut exchanges = recorded(5, SECOND / 10, 0.0, 0.0, 40_000, 40_000, |_| (0, 0));
        // Stepped back inside the exchange, on either side.
        exchanges[1].client_received_ns = exchanges[1].client_sent_ns - 1;
        exchanges[2].agent_sent_ns = exchanges[2].agent_received_ns - 1;
        let estimate = estimate(&exchanges, 1.0, START).unwrap();
        assert_eq!((estimate.used, estimate.refused), (3, 2));
        assert!(estimate.to_string().contains("2 refused"), "{estimate}");
        let error = super::estimate(&exchanges[1..3], 1.0, START).unwrap_err();
        assert!(matches!(error, ClockError::NoExchange { refused: 2, .. }), "{error}");
        assert!(error.to_string().contains("went back"), "{error}");
        assert!(matches!(
            super::estimate(&[], 1.0, START),
            Err(ClockError::NoExchange { refused: 0, .. })
        ));
    }

    #[test]
    fn the_resolution_of_the_readings_widens_the_bound() {
        let exchanges = recorded(10, SECOND / 10, 0.0, 0.0, 40_000, 40_000, |_| (0, 0));
        let exact = estimate(&exchanges, 0.0, START).unwrap();
        let coarse = estimate(&exchanges, 1_000.0, START).unwrap();
        // Every band is 1 us wider on each side: the range of offsets grows
        // by at least that much at each end.
        assert!(coarse.bound_ns >= exact.bound_ns + 1_000.0 - 1e-3, "{exact} / {coarse}");
    }

    #[test]
    fn this_hosts_clock_discipline_is_read() {
        let sync = sync_state().expect("adjtimex reads without privileges");
        // The kernel caps its maximum error at 16 s and never reports a negative one.
        assert!((0..=16_000_000).contains(&sync.maximum_error_us), "{sync:?}");
        assert!(sync.estimated_error_us >= 0, "{sync:?}");
        assert!(sync
            .daemons
            .iter()
            .all(|d| DAEMONS.contains(&d.as_str()) || d == "systemd-timesyncd"));
    }
}
