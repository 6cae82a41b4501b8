//! The mesh's result: an N x N matrix of one figure per ordered pair, with
//! what failed and the outliers, as a JSON document (`nicbench.mesh/1`,
//! docs/SCHEMA.md). `report::mesh` renders it as text with heat-map
//! shading, Markdown or CSV.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::outliers::{self, Better, Outlier};
use crate::model::RunResult;
use crate::units;

/// Schema name of the mesh document.
pub const SCHEMA: &str = "nicbench.mesh/1";

/// A host of the mesh as the coordinator saw it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MeshHost {
    /// Its label (the name in the hosts list, else the host as given).
    pub name: String,
    /// HOST:PORT of its agent, as the coordinator and the other agents reach it.
    pub address: String,
    /// `ok`, or `down` / `refused` when it was left out of every test.
    pub status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// One ordered pair.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Cell {
    /// Index of the sending host (the client, which ran the test).
    pub src: usize,
    /// Index of the receiving host (the agent it tested toward).
    pub dst: usize,
    /// The figure (`metric`, in `unit`); absent when the test failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<f64>,
    /// The run in the results database.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<i64>,
    /// The run's verdict, in one line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdict: Option<String>,
    /// The verdict's kind (`cpu_bound`, `retransmitting`, ... `none`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdict_kind: Option<String>,
    /// Why there is no figure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// When the test started (Unix seconds).
    pub started_at_unix_seconds: f64,
    /// How long the peer test took as the coordinator saw it: the test
    /// itself plus both handshakes, facts, and the result's way back.
    pub seconds: f64,
    /// Its round (0-based): the tests of a round ran at once.
    pub round: usize,
}

/// An outlier with its words.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NamedOutlier {
    #[serde(flatten)]
    pub outlier: Outlier,
    pub words: String,
}

/// The whole mesh run.
#[derive(Debug, Clone, Serialize)]
pub struct MeshResult {
    pub schema: String,
    /// The mesh's name (`--name`; tag `mesh` on every run).
    pub mesh: String,
    /// This run of the mesh (tag `mesh_run` on every run).
    pub mesh_run: String,
    pub workload: String,
    /// The workload's mesh figure: `receiver_bits_per_second`, `rtt_p50_seconds`.
    pub metric: String,
    pub unit: String,
    pub started_at_unix_seconds: f64,
    pub wall_seconds: f64,
    /// How many rounds of concurrent tests it took.
    pub rounds: usize,
    /// Seconds of one test (warm-up included), for the 2(N-1) estimate.
    pub test_seconds: f64,
    pub hosts: Vec<MeshHost>,
    pub cells: Vec<Cell>,
    pub outliers: Vec<NamedOutlier>,
}

/// The figure a workload's matrix shows ([`crate::workload::Figures::mesh_figure`]):
/// its name, unit, and which way is better.
pub fn metric_of(workload: &str) -> (&'static str, &'static str, Better) {
    let m = crate::workload::results_of(workload).mesh_figure();
    (m.name, m.unit, m.better)
}

/// The matrix figure of one run, as its workload declares it: receiver
/// throughput, the median round trip in seconds.
pub fn value_of(run: &RunResult) -> Option<f64> {
    let trial = serde_json::to_value(&run.result).ok()?;
    figure_in(&run.workload, &trial)
}

/// The matrix figure of a run of `workload` in its (trial's) document;
/// None for a run without it or with nothing measured.
pub fn figure_in(workload: &str, doc: &Value) -> Option<f64> {
    let v = crate::workload::results_of(workload).mesh_figure().read(doc)?;
    (v > 0.0).then_some(v)
}

impl MeshResult {
    /// `cells[src][dst]` as a square of figures.
    pub fn square(&self) -> Vec<Vec<Option<f64>>> {
        let n = self.hosts.len();
        let mut m = vec![vec![None; n]; n];
        for c in &self.cells {
            if c.src < n && c.dst < n {
                m[c.src][c.dst] = c.value;
            }
        }
        m
    }

    /// Finds and words the outliers of the matrix.
    pub fn find_outliers(&mut self) {
        let (_, _, better) = metric_of(&self.workload);
        let names: Vec<String> = self.hosts.iter().map(|h| h.name.clone()).collect();
        self.outliers = outliers::find(&self.square(), better)
            .into_iter()
            .map(|o| NamedOutlier {
                // A host's runs agree on why it is slow; a path's one or
                // two runs are named by the path itself.
                words: match o {
                    Outlier::Host { .. } => o.words(&names) + &self.verdicts_of(&o),
                    Outlier::Path { .. } => o.words(&names),
                },
                outlier: o,
            })
            .collect();
    }

    /// What the verdicts of an outlier's runs say, when most agree:
    /// "; its runs' verdict: receiver CPU-bound (4 of 4)".
    fn verdicts_of(&self, o: &Outlier) -> String {
        let mine = |c: &&Cell| match *o {
            Outlier::Host {
                host, sends, receives, ..
            } => (sends && c.src == host) || (receives && c.dst == host),
            Outlier::Path {
                src, dst, both_ways, ..
            } => (c.src == src && c.dst == dst) || (both_ways && c.src == dst && c.dst == src),
        };
        let cells: Vec<&Cell> = self.cells.iter().filter(mine).filter(|c| c.value.is_some()).collect();
        let mut counts: Vec<(&str, usize)> = Vec::new();
        for v in cells.iter().filter_map(|c| c.verdict_kind.as_deref()) {
            match counts.iter_mut().find(|(k, _)| *k == v) {
                Some((_, n)) => *n += 1,
                None => counts.push((v, 1)),
            }
        }
        counts.sort_by_key(|c| std::cmp::Reverse(c.1));
        match counts.first() {
            Some(&(kind, n)) if kind != "none" && n * 2 > cells.len() => {
                format!(
                    "; its runs' verdict: {} ({n} of {})",
                    kind.replace('_', " "),
                    cells.len()
                )
            }
            _ => String::new(),
        }
    }

    pub fn better(&self) -> Better {
        metric_of(&self.workload).2
    }

    /// A figure in the unit a person reads (Mbit/s, µs).
    pub fn show(&self, v: f64) -> String {
        match self.better() {
            Better::Lower => format!("{:.1} us", v * 1e6),
            Better::Higher => units::Rate(v).to_string(),
        }
    }

    /// The figure as a bare number for a table whose header carries the unit.
    pub fn number(&self, v: f64) -> String {
        match self.better() {
            Better::Lower => format!("{:.1}", v * 1e6),
            Better::Higher => format!("{:.2}", v / 1e6),
        }
    }

    pub fn unit_header(&self) -> &'static str {
        match self.better() {
            Better::Lower => "median round trip, us",
            Better::Higher => "receiver throughput, Mbit/s",
        }
    }

    /// The best figure of the matrix (the shading's 100%).
    pub fn best(&self) -> Option<f64> {
        let values = self.cells.iter().filter_map(|c| c.value);
        match self.better() {
            Better::Higher => values.reduce(f64::max),
            Better::Lower => values.reduce(f64::min),
        }
    }

    /// A cell's share of the best figure, 0..1 (for latency: best / value).
    pub fn share(&self, v: f64) -> f64 {
        match (self.best(), self.better()) {
            (Some(b), Better::Higher) if b > 0.0 => v / b,
            (Some(b), Better::Lower) if v > 0.0 => b / v,
            _ => 0.0,
        }
    }

    pub fn cell(&self, src: usize, dst: usize) -> Option<&Cell> {
        self.cells.iter().find(|c| c.src == src && c.dst == dst)
    }
}

/// A block character for a share of the best figure.
pub fn shade(share: f64) -> char {
    match share {
        s if s >= 0.9 => '█',
        s if s >= 0.7 => '▓',
        s if s >= 0.5 => '▒',
        s if s >= 0.25 => '░',
        _ => '·',
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A mesh of `values` (row: sender, column: receiver; None: failed).
    pub(crate) fn mesh(values: &[&[Option<f64>]]) -> MeshResult {
        let n = values.len();
        let mut cells = Vec::new();
        for (i, row) in values.iter().enumerate() {
            for (j, v) in row.iter().enumerate() {
                if i != j {
                    cells.push(Cell {
                        src: i,
                        dst: j,
                        value: *v,
                        run_id: v.map(|_| (i * n + j) as i64),
                        verdict: None,
                        verdict_kind: None,
                        error: v.is_none().then(|| "the agent at x is busy".to_string()),
                        started_at_unix_seconds: 0.0,
                        seconds: 0.0,
                        round: 0,
                    });
                }
            }
        }
        let mut m = MeshResult {
            schema: SCHEMA.into(),
            mesh: "lab".into(),
            mesh_run: "r1".into(),
            workload: "tcp".into(),
            metric: "receiver_bits_per_second".into(),
            unit: "bit/s".into(),
            started_at_unix_seconds: 0.0,
            wall_seconds: 12.0,
            rounds: 6,
            test_seconds: 2.0,
            hosts: (0..n)
                .map(|i| MeshHost {
                    name: format!("h{i}"),
                    address: format!("10.0.0.{i}:5310"),
                    status: "ok".into(),
                    reason: None,
                })
                .collect(),
            cells,
            outliers: Vec::new(),
        };
        m.find_outliers();
        m
    }

    #[test]
    fn shades_follow_the_share_of_the_best() {
        assert_eq!(shade(1.0), '█');
        assert_eq!(shade(0.75), '▓');
        assert_eq!(shade(0.55), '▒');
        assert_eq!(shade(0.3), '░');
        assert_eq!(shade(0.1), '·');
    }
}
