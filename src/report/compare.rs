//! The comparison table of `nicbench compare`: runs grouped into rows and
//! columns, one statistic per cell with the trials behind it (how many, the
//! stopping rule's interval or their range, whether the rule was met),
//! cells whose spread overlaps their neighbour's marked, optional ratios
//! against a baseline column; rendered as aligned text, Markdown or CSV (one
//! line per cell). Several figures per cell, and the JSON document (one
//! figure's is a roundup of one table): [`super::roundup`]. Row and column keys
//! are stored values (host names from peers, imported strings): the text
//! and Markdown tables are [`super::grid`]'s, which escapes them; the CSV
//! goes through `csv_out`.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::io::{self, Write};

use serde::Serialize;

use super::grid::Grid;
use crate::csv_out::Csv;
use crate::store::cases::{self, Case};
use crate::store::compare::{Metric, Record};

/// How the runs of one cell are summed up: the best or worst of its
/// trials, the median or mean of its runs' reported figures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Stat {
    Best,
    Worst,
    Median,
    Mean,
}

impl Stat {
    pub fn name(self) -> &'static str {
        match self {
            Stat::Best => "best",
            Stat::Worst => "worst",
            Stat::Median => "median",
            Stat::Mean => "mean",
        }
    }

    /// What the statistic is taken over, for titles.
    fn over(self) -> &'static str {
        match self {
            Stat::Best | Stat::Worst => "trials",
            Stat::Median | Stat::Mean => "runs",
        }
    }
}

/// What a cell's `low`-`high` is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Spread {
    /// The stopping rule's confidence interval of the mean (one run whose
    /// trials were compared by this figure).
    Interval,
    /// The lowest and highest trial.
    Range,
}

/// One cell: the statistic, the runs and trials behind it and their spread.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Cell {
    pub row: Vec<String>,
    pub col: Vec<String>,
    pub value: f64,
    pub runs: usize,
    /// Trials of all its runs.
    pub trials: usize,
    /// The lowest and highest trial.
    pub min: f64,
    pub max: f64,
    /// The spread shown: the interval, or `min`-`max`.
    pub low: f64,
    pub high: f64,
    pub spread: Spread,
    /// The interval's confidence level, percent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub level_percent: Option<f64>,
    /// `--confidence`: whether every run's interval met the asked width.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub met: Option<bool>,
    /// Its spread overlaps a neighbour's (or the baseline's): the
    /// difference between them is not told apart (`~` in text).
    pub unsettled: bool,
    /// This cell over the baseline column's cell of the same row.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ratio: Option<f64>,
    /// The labels of the cases of its runs: one, unless the keys given
    /// pool unlike runs (then the table says which key separates them).
    pub cases: Vec<String>,
    /// Its one run had a stopping rule's interval, but of fewer trials
    /// than an interval means anything for
    /// ([`crate::stats::MIN_INTERVAL_TRIALS`]): the spread is the trials'
    /// min-max instead.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub too_few_for_interval: bool,
    /// Its one run ran an even number of trials with `--pick median`: its
    /// figure is the lower of the two middle trials, not a median.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub lower_middle: bool,
}

impl Cell {
    /// Whether the spreads of the two cells overlap: the difference between
    /// them is within what their trials vary by. Two cells without spread
    /// (one trial each, or trials all equal) are not judged.
    fn overlaps(&self, other: &Cell) -> bool {
        let spread = |c: &Cell| c.high > c.low;
        (spread(self) || spread(other)) && self.low <= other.high && other.low <= self.high
    }
}

/// Whether two rows' (or columns') keys differ in exactly one place: such
/// neighbours are compared (tcp 1500 with tcp 9000, not sweep 16128 with
/// tcp 1500).
fn one_apart(a: &[String], b: &[String]) -> bool {
    a.len() == b.len() && a.iter().zip(b).filter(|(x, y)| x != y).count() == 1
}

/// Two cells told apart by less than their spread.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Unsettled {
    pub row: Vec<String>,
    pub col: Vec<String>,
    pub other_row: Vec<String>,
    pub other_col: Vec<String>,
}

/// A cell's place: its row's and its column's key values.
type Place = (Vec<String>, Vec<String>);

/// The cases of a cell's runs, by key.
type CasesIn<'a> = BTreeMap<&'a str, &'a Case>;

/// The schema of `compare --format json` (docs/SCHEMA.md).
pub const SCHEMA: &str = "nicbench.compare/3";

/// The fields of a CSV line after the row and column keys.
pub const CSV_FIELDS: [&str; 16] = [
    "metric",
    "unit",
    "stat",
    "value",
    "runs",
    "trials",
    "min",
    "max",
    "low",
    "high",
    "spread",
    "level_percent",
    "met",
    "unsettled",
    "ratio",
    "cases",
];

/// The whole table.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Table {
    #[serde(skip)]
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
    /// The pairs of cells whose spreads overlap.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unsettled: Vec<Unsettled>,
    #[serde(skip)]
    pub label: String,
    /// For a CPU figure: whose cores it covers, when the runs say (a lab's
    /// hosts share one kernel: their host-wide CPU is the machine's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scope_note: Option<String>,
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

/// The cell of the runs `runs` at `row`, `col`.
fn cell_of(row: &[String], col: &[String], runs: &[&Record], metric: &Metric, stat: Stat, cases: Vec<String>) -> Cell {
    let mut trials: Vec<f64> = runs.iter().flat_map(|r| r.trials.iter().copied()).collect();
    trials.sort_by(|a, b| a.partial_cmp(b).unwrap_or(Ordering::Equal));
    let mut reported: Vec<f64> = runs.iter().map(|r| r.value).collect();
    reported.sort_by(|a, b| a.partial_cmp(b).unwrap_or(Ordering::Equal));
    let (min, max) = (trials[0], trials[trials.len() - 1]);
    let value = match stat {
        Stat::Best if metric.higher_is_better => max,
        Stat::Best => min,
        Stat::Worst if metric.higher_is_better => min,
        Stat::Worst => max,
        Stat::Median => crate::stats::median(&reported),
        Stat::Mean => reported.iter().sum::<f64>() / reported.len() as f64,
    };
    let rule = match runs {
        [only] => only.rule,
        _ => None,
    };
    // Two trials' interval is 12.7 (95%) to 63.7 (99%) times their distance
    // apart: their min-max says more. A figure of merit (the figure a rule
    // compares trials by) is a rate or a count: never below 0.
    let enough = trials.len() >= crate::stats::MIN_INTERVAL_TRIALS;
    let too_few_for_interval = rule.is_some() && !enough;
    let rule = rule.filter(|_| enough).map(|r| crate::store::compare::Rule {
        low: r.low.max(0.0),
        high: r.high.max(0.0),
        ..r
    });
    let lower_middle = match runs {
        [only] => only.pick == Some(crate::stats::Pick::Median) && only.trials.len() % 2 == 0,
        _ => false,
    };
    let met = if runs.iter().all(|r| r.rule.and_then(|rule| rule.met).is_some()) {
        Some(runs.iter().all(|r| r.rule.and_then(|rule| rule.met) == Some(true)))
    } else {
        None
    };
    let (low, high, spread, level_percent) = match rule {
        Some(r) => (r.low, r.high, Spread::Interval, Some(r.level_percent)),
        None => (min, max, Spread::Range, None),
    };
    Cell {
        row: row.to_vec(),
        col: col.to_vec(),
        value,
        runs: runs.len(),
        trials: trials.len(),
        min,
        max,
        low,
        high,
        spread,
        level_percent,
        met,
        unsettled: false,
        ratio: None,
        cases,
        too_few_for_interval,
        lower_middle,
    }
}

/// Marks the cells whose spread overlaps that of their neighbour to the
/// right, below, or (with a baseline) the baseline's cell of their row;
/// returns the pairs.
fn mark_unsettled(
    cells: &mut [Cell],
    rows: &[Vec<String>],
    cols: &[Vec<String>],
    base: Option<&[String]>,
) -> Vec<Unsettled> {
    let at = |cells: &[Cell], row: &[String], col: &[String]| cells.iter().position(|c| c.row == row && c.col == col);
    let mut pairs: Vec<(usize, usize)> = Vec::new();
    for (r, row) in rows.iter().enumerate() {
        for (c, col) in cols.iter().enumerate() {
            let Some(here) = at(cells, row, col) else { continue };
            let mut others = Vec::new();
            match base {
                Some(base) if base != col.as_slice() => others.push(at(cells, row, base)),
                Some(_) => {}
                None => others.push(
                    cols.get(c + 1)
                        .filter(|next| one_apart(col, next))
                        .and_then(|next| at(cells, row, next)),
                ),
            }
            others.push(
                rows.get(r + 1)
                    .filter(|next| one_apart(row, next))
                    .and_then(|next| at(cells, next, col)),
            );
            for other in others.into_iter().flatten() {
                if cells[here].overlaps(&cells[other]) {
                    pairs.push((here, other));
                }
            }
        }
    }
    for &(a, b) in &pairs {
        cells[a].unsettled = true;
        cells[b].unsettled = true;
    }
    pairs
        .into_iter()
        .map(|(a, b)| Unsettled {
            row: cells[a].row.clone(),
            col: cells[a].col.clone(),
            other_row: cells[b].row.clone(),
            other_col: cells[b].col.clone(),
        })
        .collect()
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
        let mut groups: BTreeMap<Place, Vec<&Record>> = BTreeMap::new();
        let mut cases: BTreeMap<Place, CasesIn> = BTreeMap::new();
        for r in records {
            let at = (r.row.clone(), r.col.clone());
            cases.entry(at.clone()).or_default().insert(&r.case.key, &r.case);
            groups.entry(at).or_default().push(r);
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
                let Some(runs) = groups.get(&at) else {
                    continue;
                };
                let mut labels: Vec<String> = cases[&at].values().map(|c| c.label.clone()).collect();
                labels.sort_by(|a, b| natural_text(a, b));
                cells.push(cell_of(row, col, runs, metric, stat, labels));
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
        let unsettled = mark_unsettled(&mut cells, &rows, &cols, base_col.as_deref());
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
            unsettled,
            label: metric.label.into(),
            scope_note: None,
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
            // Sizes in whole bytes: n½ "32765.00 B" was no size.
            "transactions/s" | "B" => format!("{v:.0}"),
            "us/KB" => format!("{v:.3}"),
            "%" | "% of all cores" | "us" => format!("{v:.1}"),
            _ => format!("{v:.2}"),
        }
    }

    /// A cell as text: `9.41 (n=3, 9.35-9.44) x1.05`; `n` counts trials
    /// (`n=15 [3 runs]`), the range is the stopping rule's interval
    /// (`99% ci 9.30-9.52`, `not met` when it was not as narrow as asked)
    /// or the trials' min-max; `~` marks a cell not told apart from its
    /// neighbour.
    pub fn cell_text(&self, cell: Option<&Cell>, divisor: f64) -> String {
        let Some(c) = cell else { return "-".into() };
        let mut s = String::new();
        if c.unsettled {
            s.push('~');
        }
        s += &self.number(c.value, divisor);
        let n = match c.runs {
            1 => format!("n={}", c.trials),
            runs => format!("n={} [{runs} runs]", c.trials),
        };
        // "2.00-70.00", or "-9.85 to 40.61" when the interval reaches below 0.
        let range = |low: f64, high: f64| {
            let between = if low < 0.0 { " to " } else { "-" };
            format!("{}{between}{}", self.number(low, divisor), self.number(high, divisor))
        };
        let spread = match (c.spread, c.level_percent) {
            (Spread::Interval, Some(level)) => format!(", {level:.0}% ci {}", range(c.low, c.high)),
            _ if c.too_few_for_interval => format!(", min-max {}", range(c.low, c.high)),
            _ if c.trials > 1 => format!(", {}", range(c.low, c.high)),
            _ => String::new(),
        };
        let n = match c.lower_middle {
            true => format!("{n}, {}", crate::stats::Pick::Median.name_of(c.trials)),
            false => n,
        };
        let met = match c.met {
            Some(false) => ", not met",
            _ => "",
        };
        s += &format!(" ({n}{spread}{met})");
        if let Some(r) = c.ratio {
            s += &format!(" x{r:.2}");
        }
        if c.cases.len() > 1 {
            s += &format!(" [{} cases]", c.cases.len());
        }
        s
    }

    /// What to say under a table with cells not told apart: each pair
    /// (the first few), and what would separate them.
    pub fn unsettled_note(&self) -> Option<String> {
        if self.unsettled.is_empty() {
            return None;
        }
        // "mtu 1500 vs 9000 (tcp, card-a)": the key that differs, its two
        // values, and where (the other keys' values).
        fn pair(keys: &[String], a: &[String], b: &[String], place: &[String]) -> String {
            let at = a.iter().zip(b).position(|(x, y)| x != y).unwrap_or(0);
            // `tag:mtu` or a report's `MTU (B)`: the name, without its unit.
            let key = keys
                .get(at)
                .map(|k| k.strip_prefix("tag:").unwrap_or(k))
                .map(|k| k.split(" (").next().unwrap_or(k))
                .unwrap_or("");
            let context: Vec<&str> = a
                .iter()
                .enumerate()
                .filter(|(i, _)| *i != at)
                .map(|(_, v)| v.as_str())
                .chain(place.iter().map(String::as_str))
                .collect();
            let what = format!(
                "{key} {} vs {}",
                a.get(at).map_or("", |v| v),
                b.get(at).map_or("", |v| v)
            );
            match context.is_empty() {
                true => what.trim_start().to_string(),
                false => format!("{} ({})", what.trim_start(), context.join(", ")),
            }
        }
        const SHOWN: usize = 4;
        let pairs: Vec<String> = self
            .unsettled
            .iter()
            .take(SHOWN)
            .map(|u| {
                if u.row == u.other_row {
                    pair(&self.col_keys, &u.col, &u.other_col, &u.row)
                } else {
                    pair(&self.row_keys, &u.row, &u.other_row, &u.col)
                }
            })
            .collect();
        let more = match self.unsettled.len() {
            n if n > SHOWN => format!(" (and {} more pairs)", n - SHOWN),
            _ => String::new(),
        };
        Some(format!(
            "~: {}{more}: their spreads overlap; more trials or a longer -t would separate them",
            pairs.join("; ")
        ))
    }

    /// What to say under a table with a cell whose run's interval is not
    /// shown (too few trials), or whose run's figure is the lower of its
    /// two middle trials.
    pub fn trials_note(&self) -> Option<String> {
        let few: Vec<usize> = self
            .cells
            .iter()
            .filter(|c| c.too_few_for_interval)
            .map(|c| c.trials)
            .collect();
        let lower = self.cells.iter().any(|c| c.lower_middle);
        let mut parts = Vec::new();
        if let Some(n) = few.iter().max() {
            parts.push(format!(
                "min-max: {} cell(s) of {n} trial(s) or fewer show their trials' range, not the stopping rule's \
                 interval: it takes {} trials to mean anything (two trials' 95% interval is 12.7 times as wide \
                 as they are apart)",
                few.len(),
                crate::stats::MIN_INTERVAL_TRIALS
            ));
        }
        if lower {
            parts.push(
                "lower of 2, lower middle of N: the run picked the median of an even number of trials, which \
                 has no middle one; it reports the lower of the two (an odd --repeat has a median)"
                    .to_string(),
            );
        }
        (!parts.is_empty()).then(|| parts.join("; "))
    }

    /// The notes under the table: cells not told apart, pooled cases,
    /// cells with too few trials, and what the table says of its figure
    /// (`scope`: whose CPU it is).
    pub fn notes(&self) -> Vec<String> {
        self.unsettled_note()
            .into_iter()
            .chain(self.pooling_note())
            .chain(self.trials_note())
            .chain(self.scope_note.clone())
            .collect()
    }

    /// The title line: metric, unit, statistic.
    pub fn title(&self) -> String {
        let (unit, _) = self.display_unit();
        let base = self
            .baseline
            .as_ref()
            .map(|b| format!("; xR = ratio to {b}"))
            .unwrap_or_default();
        format!(
            "{} ({}), {unit}: {} of the {} in each cell{} (n = trials; low-high: the stopping rule's interval, \
             else the trials' min-max){base}",
            self.label,
            self.metric,
            self.stat.name(),
            self.stat.over(),
            self.even_median()
        )
    }

    /// What a median of an even number of runs is, when a cell has one:
    /// the mean of the middle two, said so.
    pub fn even_median(&self) -> &'static str {
        let even = self.cells.iter().any(|c| c.runs > 1 && c.runs % 2 == 0);
        match (self.stat, even) {
            (Stat::Median, true) => " (of an even number of runs, the mean of the middle two)",
            _ => "",
        }
    }

    /// The unit shown, as the title gives it, and the divisor into it.
    pub fn shown_unit(&self) -> (String, f64) {
        self.display_unit()
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

    /// The table to write: title, grid, notes.
    pub fn to_grid(&self) -> Grid {
        let (header, body) = self.grid();
        Grid {
            title: self.title(),
            header,
            body,
            keys: self.row_keys.len(),
            notes: self.notes(),
        }
    }

    /// Aligned text: keys left, figures right.
    pub fn text(&self, out: &mut dyn Write) -> io::Result<()> {
        self.to_grid().text(out)
    }

    /// A Markdown table under the title.
    pub fn markdown(&self, out: &mut dyn Write) -> io::Result<()> {
        self.to_grid().markdown(out)
    }

    /// One line per cell, in the metric's own unit (bit/s, not scaled).
    pub fn csv(&self, out: &mut dyn Write) -> io::Result<()> {
        let mut csv = Csv::new(out);
        csv.row(self.csv_header())?;
        for line in self.csv_lines() {
            csv.row(&line)?;
        }
        csv.finish()
    }

    /// The CSV's header: the row and column keys, then the cell's fields.
    pub fn csv_header(&self) -> Vec<String> {
        let mut header: Vec<String> = self.row_keys.iter().chain(&self.col_keys).cloned().collect();
        header.extend(CSV_FIELDS.map(String::from));
        header
    }

    /// The CSV's lines, one per cell.
    pub fn csv_lines(&self) -> Vec<Vec<String>> {
        let optional = |v: Option<f64>| v.map(|v| v.to_string()).unwrap_or_default();
        self.cells
            .iter()
            .map(|c| {
                let mut line: Vec<String> = c.row.iter().chain(&c.col).cloned().collect();
                line.extend([
                    self.metric.clone(),
                    self.unit.clone(),
                    self.stat.name().to_string(),
                    c.value.to_string(),
                    c.runs.to_string(),
                    c.trials.to_string(),
                    c.min.to_string(),
                    c.max.to_string(),
                    c.low.to_string(),
                    c.high.to_string(),
                    match c.spread {
                        Spread::Interval => "interval".into(),
                        Spread::Range => "range".into(),
                    },
                    optional(c.level_percent),
                    c.met.map(|m| m.to_string()).unwrap_or_default(),
                    c.unsettled.to_string(),
                    optional(c.ratio),
                    c.cases.join("; "),
                ]);
                line
            })
            .collect()
    }
}

#[cfg(test)]
#[path = "compare_tests.rs"]
mod tests;
