//! The mesh's result: an N x N matrix of one figure per ordered pair, with
//! what failed and the outliers; as a JSON document (`nicbench.mesh/1`,
//! docs/SCHEMA.md) and rendered as text with heat-map shading, Markdown or
//! CSV.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::outliers::{self, Better, Outlier};
use crate::csv_out::Csv;
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

    fn better(&self) -> Better {
        metric_of(&self.workload).2
    }

    /// A figure in the unit a person reads (Mbit/s, µs).
    fn show(&self, v: f64) -> String {
        match self.better() {
            Better::Lower => format!("{:.1} us", v * 1e6),
            Better::Higher => units::Rate(v).to_string(),
        }
    }

    /// The figure as a bare number for a table whose header carries the unit.
    fn number(&self, v: f64) -> String {
        match self.better() {
            Better::Lower => format!("{:.1}", v * 1e6),
            Better::Higher => format!("{:.2}", v / 1e6),
        }
    }

    fn unit_header(&self) -> &'static str {
        match self.better() {
            Better::Lower => "median round trip, us",
            Better::Higher => "receiver throughput, Mbit/s",
        }
    }

    /// The best figure of the matrix (the shading's 100%).
    fn best(&self) -> Option<f64> {
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

    fn cell(&self, src: usize, dst: usize) -> Option<&Cell> {
        self.cells.iter().find(|c| c.src == src && c.dst == dst)
    }

    /// The matrix as text: senders down, receivers across, each figure
    /// with a shade for its share of the best, failures as `fail`, then
    /// the legend, the failures and the outliers.
    pub fn text(&self) -> String {
        let n = self.hosts.len();
        let label = "sender \\ receiver";
        let name_width = self
            .hosts
            .iter()
            .map(|h| h.name.chars().count())
            .max()
            .unwrap_or(0)
            .max(label.len());
        let numbers: Vec<Vec<String>> = (0..n)
            .map(|i| {
                (0..n)
                    .map(|j| match self.cell(i, j) {
                        _ if i == j => "-".to_string(),
                        Some(Cell { value: Some(v), .. }) => format!("{} {}", self.number(*v), shade(self.share(*v))),
                        Some(_) => "fail".to_string(),
                        None if self.hosts[i].status != "ok" || self.hosts[j].status != "ok" => "down".to_string(),
                        None => "".to_string(),
                    })
                    .collect()
            })
            .collect();
        let col_width = (0..n)
            .map(|j| {
                numbers
                    .iter()
                    .map(|r| r[j].chars().count())
                    .chain([self.hosts[j].name.chars().count()])
                    .max()
                    .unwrap_or(1)
            })
            .collect::<Vec<_>>();
        let mut out = format!(
            "Mesh '{}' run {}: {} over {} hosts, {} ({}), {} rounds in {:.1} s\n\n",
            self.mesh,
            self.mesh_run,
            self.workload,
            n,
            self.unit_header(),
            match self.better() {
                Better::Higher => "higher is better",
                Better::Lower => "lower is better",
            },
            self.rounds,
            self.wall_seconds
        );
        out += &format!("{label:<name_width$}");
        for (j, h) in self.hosts.iter().enumerate() {
            out += &format!("  {:>w$}", h.name, w = col_width[j]);
        }
        out += "\n";
        for (i, h) in self.hosts.iter().enumerate() {
            out += &format!("{:<name_width$}", h.name);
            for j in 0..n {
                out += &format!("  {:>w$}", numbers[i][j], w = col_width[j]);
            }
            out += "\n";
        }
        out += &format!(
            "\nshade: share of the best cell ({}): █ 90% or more, ▓ 70%, ▒ 50%, ░ 25%, · below\n",
            self.best().map(|b| self.show(b)).unwrap_or_else(|| "none".into())
        );
        for h in self.hosts.iter().filter(|h| h.status != "ok") {
            out += &format!(
                "{} ({}) {}: {}\n",
                h.name,
                h.address,
                h.status,
                crate::outside_text::terminal(h.reason.as_deref().unwrap_or(""))
            );
        }
        for c in self.cells.iter().filter(|c| c.value.is_none()) {
            out += &format!(
                "{}->{} failed: {}\n",
                self.hosts[c.src].name,
                self.hosts[c.dst].name,
                crate::outside_text::terminal(c.error.as_deref().unwrap_or("no figure"))
            );
        }
        if n < outliers::MIN_HOSTS {
            out += &format!("outliers: need {} hosts or more\n", outliers::MIN_HOSTS);
        } else if self.outliers.is_empty() {
            out += "outliers: none (every cell within the spread of the others)\n";
        } else {
            out += "outliers:\n";
            for o in &self.outliers {
                out += &format!("  {}\n", o.words);
            }
        }
        out
    }

    /// GitHub-flavoured Markdown: the matrix, then the outliers as a list.
    pub fn markdown(&self) -> String {
        let n = self.hosts.len();
        let mut out = format!("{} — {} (sender \\ receiver)\n\n", self.workload, self.unit_header());
        out += "| sender \\ receiver |";
        for h in &self.hosts {
            out += &format!(" {} |", md_escape(&h.name));
        }
        out += "\n|---|";
        out += &"---:|".repeat(n);
        out += "\n";
        for i in 0..n {
            out += &format!("| **{}** |", md_escape(&self.hosts[i].name));
            for j in 0..n {
                let text = match self.cell(i, j) {
                    _ if i == j => "—".to_string(),
                    Some(Cell { value: Some(v), .. }) => self.number(*v),
                    Some(_) => "fail".to_string(),
                    None => "down".to_string(),
                };
                out += &format!(" {text} |");
            }
            out += "\n";
        }
        if !self.outliers.is_empty() {
            out += "\nOutliers:\n\n";
            for o in &self.outliers {
                out += &format!("- {}\n", md_escape(&o.words));
            }
        }
        out
    }

    /// One line per ordered pair: src,dst,value,unit,run_id,error.
    pub fn csv(&self) -> String {
        let mut csv = Csv::new(Vec::new());
        let header = [
            "src", "dst", "metric", "value", "unit", "run_id", "round", "verdict", "error",
        ];
        csv.row(header).expect("writing to memory does not fail");
        for c in &self.cells {
            csv.row([
                self.hosts[c.src].name.clone(),
                self.hosts[c.dst].name.clone(),
                self.metric.clone(),
                c.value.map(|v| format!("{v}")).unwrap_or_default(),
                self.unit.clone(),
                c.run_id.map(|v| v.to_string()).unwrap_or_default(),
                c.round.to_string(),
                c.verdict.clone().unwrap_or_default(),
                c.error.clone().unwrap_or_default(),
            ])
            .expect("writing to memory does not fail");
        }
        csv.into_string()
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

fn md_escape(s: &str) -> String {
    crate::outside_text::markdown(s).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mesh(values: &[&[Option<f64>]]) -> MeshResult {
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
    fn text_shows_every_cell_with_its_shade_and_the_failures() {
        let m = mesh(&[
            &[None, Some(95e6), Some(94e6), Some(95e6)],
            &[Some(95e6), None, Some(50e6), Some(95e6)],
            &[Some(94e6), Some(95e6), None, None],
            &[Some(20e6), Some(95e6), Some(95e6), None],
        ]);
        let text = m.text();
        assert!(text.contains("receiver throughput, Mbit/s"), "{text}");
        assert!(text.contains("95.00 █"), "{text}");
        assert!(text.contains("50.00 ▒"), "{text}");
        assert!(text.contains("20.00 ·"), "{text}");
        assert!(text.contains("h2->h3 failed: the agent at x is busy"), "{text}");
        assert!(text.lines().any(|l| l.starts_with("h3 ") && !l.contains("fail")));
    }

    #[test]
    fn markdown_and_csv_carry_the_same_cells() {
        let m = mesh(&[&[None, Some(1e9)], &[Some(5e8), None]]);
        let md = m.markdown();
        assert!(md.contains("| **h0** | — | 1000.00 |"), "{md}");
        assert!(md.contains("| **h1** | 500.00 | — |"), "{md}");
        let csv = m.csv();
        assert_eq!(csv.lines().count(), 3, "{csv}");
        assert!(
            csv.contains("h1,h0,receiver_bits_per_second,500000000,bit/s,2,0,,"),
            "{csv}"
        );
    }

    #[test]
    fn csv_quotes_line_breaks_and_carriage_returns_and_neutralises_formulas() {
        let mut m = mesh(&[&[None, Some(-1.5)], &[None, None]]);
        m.hosts[0].name = "rack 1, \"a\"".into();
        m.hosts[1].name = "=cmd".into();
        m.cells[1].error = Some("refused\r\nby b".into());
        let csv = m.csv();
        let rows: Vec<csv::StringRecord> = csv::Reader::from_reader(csv.as_bytes())
            .records()
            .map(Result::unwrap)
            .collect();
        let cells = |i: usize| rows[i].iter().map(String::from).collect::<Vec<_>>();
        assert_eq!(
            cells(0)[..4],
            ["rack 1, \"a\"", "'=cmd", "receiver_bits_per_second", "-1.5"],
            "{csv}"
        );
        assert_eq!(cells(1)[8], "refused\r\nby b", "{csv}");
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
