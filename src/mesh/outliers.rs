//! Naming the cells of a mesh that are far from the rest, and why.
//!
//! One bad cable or one misconfigured host hides among hundreds of good
//! paths; a fixed threshold ("below 900 Mbit/s") flags either everything on
//! a slow fabric or nothing on a fast one. The rule here is robust and
//! relative, in the log of the figure (so "half as fast" weighs the same at
//! 1 and at 100 Gbit/s):
//!
//! 1. The matrix is split by Tukey's median polish into an overall level,
//!    a sender effect per host (its row), a receiver effect per host (its
//!    column) and a residual per cell. Medians, not means: one slow host
//!    does not drag down the figures of everyone it met, and one slow path
//!    does not make its two hosts look slow.
//! 2. **Hosts.** The sender and receiver effects of all hosts get the
//!    modified z-score of Iglewicz and Hoaglin, `0.6745 (x - median) / MAD`;
//!    below -3.5 the host is slow in that role ("b receives slowly from
//!    everyone: b's receive side").
//! 3. **Paths.** The residuals of all cells get the same z-score; below
//!    -3.5 the path itself is slow ("a->c only: the path from a to c"),
//!    named once when both directions are. A cell whose sender is a slow
//!    sender or whose receiver is a slow receiver is explained by that host
//!    and is not named again as a path.
//!
//! The MAD has a floor of [`NOISE_FLOOR`] (5%): when every path agrees to
//! within a percent, a 2% dip is noise, not a finding. Only slow cells are
//! named; a faster-than-usual cell is not a fault. Fewer than
//! [`MIN_HOSTS`] hosts give no outliers (three medians say little).

use serde::Serialize;

use crate::stats::median;

/// The modified z-score below which a value is an outlier.
pub const Z_LIMIT: f64 = -3.5;
/// Relative deviation that is always noise (the MAD's floor).
pub const NOISE_FLOOR: f64 = 0.05;
/// Hosts needed before anything is called an outlier.
pub const MIN_HOSTS: usize = 4;
/// Sweeps of the median polish (it settles in a few).
const POLISH_SWEEPS: usize = 10;

pub use crate::workload::Better;

/// What was found, in the terms of the mesh.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Outlier {
    /// A host slow in one role or both: its row and/or column.
    Host {
        host: usize,
        sends: bool,
        receives: bool,
        /// The host's median against the median of all hosts, per role
        /// that is slow, as a fraction (0.4 = 40% of the usual).
        ratio: f64,
    },
    /// One path (or both directions of it) slow while its ends are fine
    /// with everyone else.
    Path {
        src: usize,
        dst: usize,
        both_ways: bool,
        /// The cell against what its ends achieve elsewhere.
        ratio: f64,
    },
}

impl Outlier {
    /// The finding in words, with host names.
    pub fn words(&self, names: &[String]) -> String {
        match *self {
            Outlier::Host {
                host,
                sends,
                receives,
                ratio,
            } => {
                let h = &names[host];
                let pct = ratio * 100.0;
                match (sends, receives) {
                    (true, true) => format!(
                        "{h} sends to and receives from everyone slowly ({pct:.0}% of the other hosts): \
                         {h} itself (CPU, NIC, driver, IRQ affinity, or its link)"
                    ),
                    (false, true) => {
                        format!("{h} receives slowly from everyone ({pct:.0}% of the other hosts): {h}'s receive side")
                    }
                    _ => format!("{h} sends slowly to everyone ({pct:.0}% of the other hosts): {h}'s send side"),
                }
            }
            Outlier::Path {
                src,
                dst,
                both_ways,
                ratio,
            } => {
                let (a, b) = (&names[src], &names[dst]);
                let pct = ratio * 100.0;
                if both_ways {
                    format!(
                        "{a}<->{b} only, both ways ({pct:.0}% of what both reach with others): \
                         the path between {a} and {b}"
                    )
                } else {
                    format!(
                        "{a}->{b} only ({pct:.0}% of what both reach with others; {b}->{a} is fine): \
                         the path from {a} to {b}"
                    )
                }
            }
        }
    }
}

/// Modified z-scores of `values` (None stays None), with the MAD floored.
fn z_scores(values: &[Option<f64>]) -> Vec<Option<f64>> {
    let present: Vec<f64> = values.iter().flatten().copied().collect();
    if present.is_empty() {
        return vec![None; values.len()];
    }
    let center = median(&present);
    let deviations: Vec<f64> = present.iter().map(|v| (v - center).abs()).collect();
    let mad = median(&deviations).max((1.0 + NOISE_FLOOR).ln());
    values.iter().map(|v| v.map(|v| 0.6745 * (v - center) / mad)).collect()
}

/// Finds the outliers of an N x N matrix of figures (`cells[src][dst]`,
/// None where not measured, the diagonal ignored).
pub fn find(cells: &[Vec<Option<f64>>], better: Better) -> Vec<Outlier> {
    let n = cells.len();
    if n < MIN_HOSTS {
        return Vec::new();
    }
    // Log of the goodness: bigger is better in both polarities.
    let x: Vec<Vec<Option<f64>>> = (0..n)
        .map(|i| {
            (0..n)
                .map(|j| {
                    let v = cells[i]
                        .get(j)
                        .copied()
                        .flatten()
                        .filter(|v| *v > 0.0 && v.is_finite())?;
                    (i != j).then(|| match better {
                        Better::Higher => v.ln(),
                        Better::Lower => -v.ln(),
                    })
                })
                .collect()
        })
        .collect();
    // Tukey's median polish: x[i][j] = overall + sender[i] + receiver[j]
    // + residual[i][j], each effect a median, so that one slow host does
    // not drag the medians of everyone it met.
    let mut residual = x.clone();
    let (mut sends, mut receives) = (vec![0.0; n], vec![0.0; n]);
    for _ in 0..POLISH_SWEEPS {
        for (i, effect) in sends.iter_mut().enumerate() {
            let row: Vec<f64> = residual[i].iter().flatten().copied().collect();
            if !row.is_empty() {
                let m = median(&row);
                *effect += m;
                residual[i].iter_mut().flatten().for_each(|v| *v -= m);
            }
        }
        for (j, effect) in receives.iter_mut().enumerate() {
            let col: Vec<f64> = residual.iter().filter_map(|r| r[j]).collect();
            if !col.is_empty() {
                let m = median(&col);
                *effect += m;
                residual.iter_mut().for_each(|r| {
                    if let Some(v) = r[j].as_mut() {
                        *v -= m;
                    }
                });
            }
        }
    }
    let present = |i: usize, by_row: bool| (0..n).any(|k| if by_row { x[i][k] } else { x[k][i] }.is_some());
    let sends: Vec<Option<f64>> = (0..n).map(|i| present(i, true).then_some(sends[i])).collect();
    let receives: Vec<Option<f64>> = (0..n).map(|j| present(j, false).then_some(receives[j])).collect();
    let (zs, zr) = (z_scores(&sends), z_scores(&receives));
    // NaN without values, and so a NaN ratio, as for a missing figure.
    let center = |v: &[Option<f64>]| median(&v.iter().flatten().copied().collect::<Vec<_>>());
    let (cs, cr) = (center(&sends), center(&receives));

    let mut out = Vec::new();
    let (mut slow_sender, mut slow_receiver) = (vec![false; n], vec![false; n]);
    for h in 0..n {
        let s = zs[h].is_some_and(|z| z < Z_LIMIT);
        let r = zr[h].is_some_and(|z| z < Z_LIMIT);
        if !(s || r) {
            continue;
        }
        (slow_sender[h], slow_receiver[h]) = (s, r);
        let ratio_of = |v: Option<f64>, c: f64| v.map(|v| (v - c).exp()).unwrap_or(f64::NAN);
        let ratio = match (s, r) {
            (true, true) => ratio_of(sends[h], cs).min(ratio_of(receives[h], cr)),
            (true, false) => ratio_of(sends[h], cs),
            _ => ratio_of(receives[h], cr),
        };
        out.push(Outlier::Host {
            host: h,
            sends: s,
            receives: r,
            ratio,
        });
    }

    let flat: Vec<Option<f64>> = residual.iter().flatten().copied().collect();
    let z = z_scores(&flat);
    let slow = |i: usize, j: usize| z[i * n + j].is_some_and(|z| z < Z_LIMIT);
    for (i, row) in residual.iter().enumerate() {
        for (j, cell) in row.iter().enumerate() {
            // A slow host explains its own cells (a CPU-starved host's
            // figures also scatter more): a path is named only between
            // hosts that are fine in the roles it uses.
            let explained = |i: usize, j: usize| slow_sender[i] || slow_receiver[j];
            if i == j || !slow(i, j) || explained(i, j) {
                continue;
            }
            let both_ways = slow(j, i) && !explained(j, i);
            if both_ways && j < i {
                continue; // named once, from the lower index
            }
            let ratio = cell.map(f64::exp).unwrap_or(f64::NAN);
            out.push(Outlier::Path {
                src: i,
                dst: j,
                both_ways,
                ratio: if both_ways {
                    ratio.max(residual[j][i].map(f64::exp).unwrap_or(f64::NAN))
                } else {
                    ratio
                },
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A matrix of `n` hosts at `base`, with a deterministic ±1% ripple.
    fn uniform(n: usize, base: f64) -> Vec<Vec<Option<f64>>> {
        (0..n)
            .map(|i| {
                (0..n)
                    .map(|j| (i != j).then(|| base * (1.0 + 0.01 * (((i * 7 + j * 3) % 5) as f64 - 2.0) / 2.0)))
                    .collect()
            })
            .collect()
    }

    fn names(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("h{i}")).collect()
    }

    #[test]
    fn a_healthy_mesh_has_no_outliers() {
        for n in 4..=12 {
            assert!(find(&uniform(n, 95e6), Better::Higher).is_empty(), "n = {n}");
            assert!(find(&uniform(n, 40e-6), Better::Lower).is_empty(), "n = {n}");
        }
    }

    #[test]
    fn a_slow_receiver_is_named_as_a_host_not_as_paths() {
        let mut m = uniform(6, 95e6);
        for (i, row) in m.iter_mut().enumerate() {
            if i != 2 {
                row[2] = Some(30e6);
            }
        }
        let found = find(&m, Better::Higher);
        assert_eq!(found.len(), 1, "{found:?}");
        match found[0] {
            Outlier::Host {
                host, sends, receives, ..
            } => assert_eq!((host, sends, receives), (2, false, true)),
            ref other => panic!("{other:?}"),
        }
        assert!(found[0].words(&names(6)).contains("h2 receives slowly from everyone"));
    }

    #[test]
    fn a_slow_host_both_ways_and_a_slow_path_are_named_apart() {
        let n = 5;
        let mut m = uniform(n, 95e6);
        for k in (0..n).filter(|&k| k != 1) {
            m[1][k] = Some(40e6);
            m[k][1] = Some(35e6);
        }
        m[0][3] = Some(25e6);
        let found = find(&m, Better::Higher);
        assert_eq!(found.len(), 2, "{found:?}");
        assert!(matches!(
            found[0],
            Outlier::Host {
                host: 1,
                sends: true,
                receives: true,
                ..
            }
        ));
        assert!(matches!(
            found[1],
            Outlier::Path {
                src: 0,
                dst: 3,
                both_ways: false,
                ..
            }
        ));
        let words = found[1].words(&names(n));
        assert!(words.starts_with("h0->h3 only"), "{words}");
    }

    #[test]
    fn a_path_slow_both_ways_is_named_once() {
        let mut m = uniform(6, 95e6);
        m[1][4] = Some(20e6);
        m[4][1] = Some(22e6);
        let found = find(&m, Better::Higher);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].words(&names(6)).starts_with("h1<->h4 only, both ways"));
    }

    #[test]
    fn latency_outliers_are_the_slow_ones_not_the_fast_ones() {
        let mut m = uniform(6, 50e-6);
        m[2][5] = Some(400e-6); // slow path
        m[3][0] = Some(10e-6); // faster than usual: not a fault
        let found = find(&m, Better::Lower);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(matches!(found[0], Outlier::Path { src: 2, dst: 5, .. }));
    }

    #[test]
    fn small_dips_and_small_meshes_are_not_outliers() {
        let mut m = uniform(6, 95e6);
        m[0][1] = Some(90e6); // 5% low: noise
        assert!(find(&m, Better::Higher).is_empty());
        let mut small = uniform(3, 95e6);
        small[0][1] = Some(1e6);
        assert!(find(&small, Better::Higher).is_empty());
    }

    #[test]
    fn missing_cells_are_ignored() {
        let mut m = uniform(6, 95e6);
        m[0][1] = None;
        m[3][2] = None;
        m[4][5] = Some(10e6);
        let found = find(&m, Better::Higher);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(matches!(found[0], Outlier::Path { src: 4, dst: 5, .. }));
    }

    #[test]
    fn a_slow_hosts_scattered_cells_are_not_named_as_paths() {
        let mut m = uniform(5, 950e6);
        // d (3) starved: everything to and from it slow and scattered.
        for (k, v) in [(0, 400e6), (1, 510e6), (2, 240e6), (4, 420e6)] {
            m[k][3] = Some(v);
            m[3][k] = Some(v * 0.9);
        }
        let found = find(&m, Better::Higher);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(matches!(found[0], Outlier::Host { host: 3, .. }));
    }
}
