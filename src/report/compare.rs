//! The comparison table of `nicbench compare`: runs grouped into rows and
//! columns, one statistic per cell with the number of runs and their
//! range, optional ratios against a baseline column; rendered as aligned
//! text, Markdown, CSV (one line per cell) or JSON. Row and column keys
//! are stored values (host names from peers, imported strings): the text
//! shows them through `outside_text::terminal`, the Markdown through
//! `outside_text::markdown`, the CSV through `csv_out`.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::io::{self, Write};

use serde::Serialize;

use crate::csv_out::Csv;
use crate::outside_text::{self, terminal};
use crate::store::cases::{self, Case};
use crate::store::compare::{Metric, Record};

/// How the runs of one cell are summed up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Stat {
    Best,
    Median,
    Mean,
}

/// One cell: the statistic over its runs, how many, and their range.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Cell {
    pub row: Vec<String>,
    pub col: Vec<String>,
    pub value: f64,
    pub runs: usize,
    pub min: f64,
    pub max: f64,
    /// This cell over the baseline column's cell of the same row.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ratio: Option<f64>,
    /// The labels of the cases of its runs: one, unless the keys given
    /// pool unlike runs (then the table says which key separates them).
    pub cases: Vec<String>,
}

/// A cell's place: its row's and its column's key values.
type Place = (Vec<String>, Vec<String>);

/// The cases of a cell's runs, by key.
type CasesIn<'a> = BTreeMap<&'a str, &'a Case>;

/// The schema of `compare --format json` (docs/SCHEMA.md).
pub const SCHEMA: &str = "nicbench.compare/2";

/// The whole table.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Table {
    pub schema: &'static str,
    pub metric: String,
    pub unit: String,
    pub stat: Stat,
    pub row_keys: Vec<String>,
    pub col_keys: Vec<String>,
    pub rows: Vec<Vec<String>>,
    pub cols: Vec<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub baseline: Option<String>,
    pub cells: Vec<Cell>,
    /// When some cell pools runs of unlike cases: the `--rows`/`--cols`
    /// keys that would separate them (`streams`, or `case`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub separate_by: Vec<String>,
    #[serde(skip)]
    label: String,
}

/// Orders keys as people expect: numbers by value (1500 < 9000), then
/// text ([`natural_text`]).
pub fn natural(a: &[String], b: &[String]) -> Ordering {
    for (x, y) in a.iter().zip(b) {
        let o = match (x.parse::<f64>(), y.parse::<f64>()) {
            (Ok(p), Ok(q)) => p.partial_cmp(&q).unwrap_or(Ordering::Equal),
            _ => natural_text(x, y),
        };
        if o != Ordering::Equal {
            return o;
        }
    }
    a.len().cmp(&b.len())
}

/// Text with its runs of digits read as numbers and letters compared
/// without regard to case: `rr UDP` < `TCP, 4 streams` < `TCP, 16 streams`.
pub fn natural_text(a: &str, b: &str) -> Ordering {
    fn chunks(s: &str) -> Vec<(bool, &str)> {
        let mut out = Vec::new();
        let mut start = 0;
        let bytes = s.as_bytes();
        for i in 1..=bytes.len() {
            if i == bytes.len() || bytes[i].is_ascii_digit() != bytes[start].is_ascii_digit() {
                out.push((bytes[start].is_ascii_digit(), &s[start..i]));
                start = i;
            }
        }
        out
    }
    let (x, y) = (chunks(a), chunks(b));
    for ((dx, cx), (dy, cy)) in x.iter().zip(&y) {
        let o = match (dx, dy) {
            (true, true) => {
                let (p, q) = (cx.trim_start_matches('0'), cy.trim_start_matches('0'));
                p.len().cmp(&q.len()).then_with(|| p.cmp(q))
            }
            _ => cx.to_lowercase().cmp(&cy.to_lowercase()),
        };
        if o != Ordering::Equal {
            return o;
        }
    }
    x.len().cmp(&y.len()).then_with(|| a.cmp(b))
}

/// The keys that separate the runs of cells that pool unlike cases: the
/// one key that tells every pooled cell's cases apart (`streams`), else
/// `case`; empty when no cell pools.
fn separating_keys<'a>(cells: impl Iterator<Item = &'a CasesIn<'a>>) -> Vec<String> {
    let mut keys: std::collections::BTreeSet<String> = std::collections::BTreeSet::new();
    let mut pooled = false;
    for cell in cells.filter(|c| c.len() > 1) {
        pooled = true;
        let all: Vec<&Case> = cell.values().copied().collect();
        let names: std::collections::BTreeSet<&str> = all
            .iter()
            .flat_map(|c| c.parts.iter().map(|(n, _)| n.as_str()))
            .collect();
        for name in names {
            let value = |c: &Case| c.parts.iter().find(|(n, _)| n == name).map(|(_, v)| v.clone());
            let values: std::collections::BTreeSet<Option<String>> = all.iter().map(|c| value(c)).collect();
            if values.len() > 1 {
                keys.insert(cases::separating_key(name));
            }
        }
    }
    match keys.len() {
        _ if !pooled => Vec::new(),
        1 => keys.into_iter().collect(),
        _ => vec!["case".into()],
    }
}

/// A column's label: its key values joined.
pub fn col_label(col: &[String]) -> String {
    if col.is_empty() {
        "all".into()
    } else {
        col.join(" / ")
    }
}

impl Table {
    /// Groups the records. `baseline` names a column (its label); an
    /// unknown one is an error listing the columns.
    pub fn build(
        records: &[Record],
        metric: &Metric,
        stat: Stat,
        row_keys: Vec<String>,
        col_keys: Vec<String>,
        baseline: Option<&str>,
    ) -> Result<Table, String> {
        let mut groups: BTreeMap<Place, Vec<f64>> = BTreeMap::new();
        let mut cases: BTreeMap<Place, CasesIn> = BTreeMap::new();
        for r in records {
            let at = (r.row.clone(), r.col.clone());
            cases.entry(at.clone()).or_default().insert(&r.case.key, &r.case);
            groups.entry(at).or_default().push(r.value);
        }
        let mut rows: Vec<Vec<String>> = groups.keys().map(|(r, _)| r.clone()).collect();
        let mut cols: Vec<Vec<String>> = groups.keys().map(|(_, c)| c.clone()).collect();
        for keys in [&mut rows, &mut cols] {
            keys.sort_by(|a, b| natural(a, b));
            keys.dedup();
        }
        let base_col = match baseline {
            None => None,
            Some(name) => Some(cols.iter().find(|c| col_label(c) == name).cloned().ok_or_else(|| {
                let names: Vec<String> = cols.iter().map(|c| col_label(c)).collect();
                format!(
                    "--baseline {name}: no such column; the columns are: {}",
                    names.join(", ")
                )
            })?),
        };
        let mut cells = Vec::new();
        for row in &rows {
            for col in &cols {
                let at = (row.clone(), col.clone());
                let Some(values) = groups.get(&at) else {
                    continue;
                };
                let mut labels: Vec<String> = cases[&at].values().map(|c| c.label.clone()).collect();
                labels.sort_by(|a, b| natural_text(a, b));
                let mut sorted = values.clone();
                sorted.sort_by(|a, b| a.partial_cmp(b).unwrap_or(Ordering::Equal));
                let (min, max) = (sorted[0], sorted[sorted.len() - 1]);
                let value = match stat {
                    Stat::Best if metric.higher_is_better => max,
                    Stat::Best => min,
                    Stat::Median => crate::stats::median(&sorted),
                    Stat::Mean => sorted.iter().sum::<f64>() / sorted.len() as f64,
                };
                cells.push(Cell {
                    row: row.clone(),
                    col: col.clone(),
                    value,
                    runs: sorted.len(),
                    min,
                    max,
                    ratio: None,
                    cases: labels,
                });
            }
        }
        if let Some(base) = &base_col {
            let base_values: BTreeMap<Vec<String>, f64> = cells
                .iter()
                .filter(|c| &c.col == base)
                .map(|c| (c.row.clone(), c.value))
                .collect();
            for cell in &mut cells {
                cell.ratio = base_values
                    .get(&cell.row)
                    .filter(|b| **b != 0.0)
                    .map(|b| cell.value / b);
            }
        }
        let separate_by = separating_keys(cases.values());
        Ok(Table {
            schema: SCHEMA,
            metric: metric.name.into(),
            unit: metric.unit.into(),
            stat,
            row_keys,
            col_keys,
            rows,
            cols,
            baseline: base_col.map(|c| col_label(&c)),
            cells,
            separate_by,
            label: metric.label.into(),
        })
    }

    /// The cells that pool runs of unlike cases.
    pub fn pooled_cells(&self) -> usize {
        self.cells.iter().filter(|c| c.cases.len() > 1).count()
    }

    /// What to say under a table some of whose cells pool unlike cases.
    pub fn pooling_note(&self) -> Option<String> {
        if self.separate_by.is_empty() {
            return None;
        }
        Some(format!(
            "[N cases]: {} cell(s) pool runs of unlike cases; add {} to --rows or --cols to separate them",
            self.pooled_cells(),
            self.separate_by.join(" or ")
        ))
    }

    fn cell(&self, row: &[String], col: &[String]) -> Option<&Cell> {
        self.cells.iter().find(|c| c.row == row && c.col == col)
    }

    /// The unit shown and the divisor into it (bit/s scale to the table).
    fn display_unit(&self) -> (String, f64) {
        let top = self
            .cells
            .iter()
            .map(|c| c.max.abs().max(c.min.abs()))
            .fold(0.0, f64::max);
        // A delay under a second reads in ms (a loaded run's added delay).
        if self.unit == "s" && top < 1.0 {
            return ("ms".into(), 1e-3);
        }
        if self.unit != "bit/s" {
            return (self.unit.clone(), 1.0);
        }
        if top >= 1e9 {
            ("Gbit/s".into(), 1e9)
        } else if top >= 1e6 {
            ("Mbit/s".into(), 1e6)
        } else {
            ("kbit/s".into(), 1e3)
        }
    }

    fn number(&self, value: f64, divisor: f64) -> String {
        let v = value / divisor;
        match self.unit.as_str() {
            "transactions/s" => format!("{v:.0}"),
            "us/KB" => format!("{v:.3}"),
            "%" | "us" => format!("{v:.1}"),
            _ => format!("{v:.2}"),
        }
    }

    /// A cell as text: `9.41 (n=3, 9.35-9.44) x1.05`.
    fn cell_text(&self, cell: Option<&Cell>, divisor: f64) -> String {
        let Some(c) = cell else { return "-".into() };
        let mut s = self.number(c.value, divisor);
        if c.runs > 1 {
            s += &format!(
                " (n={}, {}-{})",
                c.runs,
                self.number(c.min, divisor),
                self.number(c.max, divisor)
            );
        } else {
            s += " (n=1)";
        }
        if let Some(r) = c.ratio {
            s += &format!(" x{r:.2}");
        }
        if c.cases.len() > 1 {
            s += &format!(" [{} cases]", c.cases.len());
        }
        s
    }

    /// The title line: metric, unit, statistic.
    pub fn title(&self) -> String {
        let (unit, _) = self.display_unit();
        let stat = match self.stat {
            Stat::Best => "best",
            Stat::Median => "median",
            Stat::Mean => "mean",
        };
        let base = self
            .baseline
            .as_ref()
            .map(|b| format!("; xR = ratio to {b}"))
            .unwrap_or_default();
        format!(
            "{} ({}), {unit}: {stat} of the runs in each cell (n = runs, min-max){base}",
            self.label, self.metric
        )
    }

    /// Header and body as cells of text (the text and Markdown tables,
    /// and the HTML report's).
    pub fn grid(&self) -> (Vec<String>, Vec<Vec<String>>) {
        let (_, divisor) = self.display_unit();
        let mut header = self.row_keys.clone();
        header.extend(self.cols.iter().map(|c| col_label(c)));
        let body = self
            .rows
            .iter()
            .map(|row| {
                let mut line = row.clone();
                line.extend(self.cols.iter().map(|col| self.cell_text(self.cell(row, col), divisor)));
                line
            })
            .collect();
        (header, body)
    }

    /// Aligned text: keys left, figures right.
    pub fn text(&self, out: &mut dyn Write) -> io::Result<()> {
        writeln!(out, "{}", terminal(&self.title()))?;
        let (header, body) = self.grid();
        let shown = |line: Vec<String>| -> Vec<String> { line.iter().map(|c| terminal(c).into_owned()).collect() };
        let (header, body): (Vec<String>, Vec<Vec<String>>) = (shown(header), body.into_iter().map(shown).collect());
        let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
        for line in &body {
            for (w, cell) in widths.iter_mut().zip(line) {
                *w = (*w).max(cell.chars().count());
            }
        }
        let keys = self.row_keys.len();
        for line in std::iter::once(&header).chain(&body) {
            let cells: Vec<String> = line
                .iter()
                .enumerate()
                .map(|(i, c)| {
                    if i < keys {
                        format!("{c:<w$}", w = widths[i])
                    } else {
                        format!("{c:>w$}", w = widths[i])
                    }
                })
                .collect();
            writeln!(out, "{}", cells.join("  ").trim_end())?;
        }
        if let Some(note) = self.pooling_note() {
            writeln!(out, "{note}")?;
        }
        Ok(())
    }

    /// A Markdown table under the title.
    pub fn markdown(&self, out: &mut dyn Write) -> io::Result<()> {
        writeln!(out, "{}\n", terminal(&self.title()))?;
        let (header, body) = self.grid();
        let escape = |s: &String| outside_text::markdown(s).into_owned();
        writeln!(out, "| {} |", header.iter().map(escape).collect::<Vec<_>>().join(" | "))?;
        let align: Vec<&str> = (0..header.len())
            .map(|i| if i < self.row_keys.len() { "---" } else { "---:" })
            .collect();
        writeln!(out, "| {} |", align.join(" | "))?;
        for line in &body {
            writeln!(out, "| {} |", line.iter().map(escape).collect::<Vec<_>>().join(" | "))?;
        }
        if let Some(note) = self.pooling_note() {
            writeln!(out, "\n{}", escape(&note))?;
        }
        Ok(())
    }

    /// One line per cell, in the metric's own unit (bit/s, not scaled).
    pub fn csv(&self, out: &mut dyn Write) -> io::Result<()> {
        let mut csv = Csv::new(out);
        let mut header: Vec<String> = self.row_keys.iter().chain(&self.col_keys).cloned().collect();
        header.extend(
            [
                "metric", "unit", "stat", "value", "runs", "min", "max", "ratio", "cases",
            ]
            .map(String::from),
        );
        csv.row(&header)?;
        for c in &self.cells {
            let mut line: Vec<String> = c.row.iter().chain(&c.col).cloned().collect();
            line.push(self.metric.clone());
            line.push(self.unit.clone());
            line.push(
                serde_json::to_value(self.stat)
                    .map(|v| v.as_str().unwrap_or("").to_string())
                    .unwrap_or_default(),
            );
            line.extend([
                c.value.to_string(),
                c.runs.to_string(),
                c.min.to_string(),
                c.max.to_string(),
            ]);
            line.push(c.ratio.map(|r| r.to_string()).unwrap_or_default());
            line.push(c.cases.join("; "));
            csv.row(&line)?;
        }
        csv.finish()
    }

    pub fn json(&self, out: &mut dyn Write) -> io::Result<()> {
        serde_json::to_writer_pretty(&mut *out, self)?;
        writeln!(out)
    }
}

#[cfg(test)]
#[path = "compare_tests.rs"]
mod tests;
