//! Several figures per cell: the comparison tables of one grouping, one per
//! metric (`compare --metric throughput,cpu,agent-cpu,service-demand`), as
//! one table whose rows hold a line per figure under the same columns — the
//! roundup a reviewer publishes (cards in columns, configurations in rows,
//! throughput and CPU side by side). One metric renders as the plain
//! comparison table. A figure that does not apply to a cell's runs (an rr
//! run has no throughput) stays empty there.

use std::collections::BTreeMap;
use std::io::{self, Write};

use serde::Serialize;

use super::compare::{col_label, natural, Cell, Spread, Stat, Table, SCHEMA};
use super::grid::Grid;
use crate::csv_out::Csv;

/// The tables of one grouping, one per metric, in the order asked.
#[derive(Debug, Clone, PartialEq)]
pub struct Roundup {
    pub tables: Vec<Table>,
    /// Every row and column of any of the tables, in order.
    pub rows: Vec<Vec<String>>,
    pub cols: Vec<Vec<String>>,
}

/// A metric of the document.
#[derive(Debug, Clone, PartialEq, Serialize)]
struct MetricHead<'a> {
    metric: &'a str,
    unit: &'a str,
    label: &'a str,
}

/// One figure of a cell in the document.
#[derive(Debug, Clone, PartialEq, Serialize)]
struct Figure {
    value: f64,
    runs: usize,
    trials: usize,
    min: f64,
    max: f64,
    low: f64,
    high: f64,
    spread: Spread,
    #[serde(skip_serializing_if = "Option::is_none")]
    level_percent: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    met: Option<bool>,
    unsettled: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    ratio: Option<f64>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    too_few_for_interval: bool,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    lower_middle: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
struct DocCell<'a> {
    row: &'a [String],
    col: &'a [String],
    cases: Vec<String>,
    /// By metric name; a metric that does not apply is absent.
    figures: BTreeMap<&'a str, Figure>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
struct DocUnsettled<'a> {
    metric: &'a str,
    row: &'a [String],
    col: &'a [String],
    other_row: &'a [String],
    other_col: &'a [String],
}

/// The document of `compare --format json` (docs/SCHEMA.md).
#[derive(Debug, Clone, PartialEq, Serialize)]
struct Document<'a> {
    schema: &'static str,
    stat: Stat,
    row_keys: &'a [String],
    col_keys: &'a [String],
    rows: &'a [Vec<String>],
    cols: &'a [Vec<String>],
    #[serde(skip_serializing_if = "Option::is_none")]
    baseline: Option<&'a str>,
    metrics: Vec<MetricHead<'a>>,
    cells: Vec<DocCell<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    unsettled: Vec<DocUnsettled<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    separate_by: Vec<String>,
}

impl Roundup {
    /// The tables, which share their row and column keys and statistic.
    pub fn new(tables: Vec<Table>) -> Roundup {
        let mut rows: Vec<Vec<String>> = tables.iter().flat_map(|t| t.rows.iter().cloned()).collect();
        let mut cols: Vec<Vec<String>> = tables.iter().flat_map(|t| t.cols.iter().cloned()).collect();
        for keys in [&mut rows, &mut cols] {
            keys.sort_by(|a, b| natural(a, b));
            keys.dedup();
        }
        Roundup { tables, rows, cols }
    }

    fn first(&self) -> &Table {
        &self.tables[0]
    }

    fn single(&self) -> Option<&Table> {
        match self.tables.as_slice() {
            [only] => Some(only),
            _ => None,
        }
    }

    /// The title: the figures, the statistic, what `n` and the range are.
    pub fn title(&self) -> String {
        if let Some(t) = self.single() {
            return t.title();
        }
        let first = self.first();
        let labels: Vec<&str> = self.tables.iter().map(|t| t.label.as_str()).collect();
        let base = first
            .baseline
            .as_ref()
            .map(|b| format!("; xR = ratio to {b}"))
            .unwrap_or_default();
        let even = self
            .tables
            .iter()
            .map(Table::even_median)
            .find(|e| !e.is_empty())
            .unwrap_or("");
        format!(
            "{}: {} in each cell{even} (n = trials; low-high: the stopping rule's interval, else the trials' \
             min-max){base}",
            labels.join(", "),
            match first.stat {
                Stat::Best | Stat::Worst => format!("{} of the trials", first.stat.name()),
                Stat::Median | Stat::Mean => format!("{} of the runs", first.stat.name()),
            }
        )
    }

    /// The notes under the table, each once (a figure's own prefixed with it).
    pub fn notes(&self) -> Vec<String> {
        if let Some(t) = self.single() {
            return t.notes();
        }
        let mut notes: Vec<String> = Vec::new();
        for t in &self.tables {
            if let Some(n) = t.unsettled_note() {
                notes.push(format!("{}: {n}", t.label));
            }
        }
        for t in &self.tables {
            for n in t.pooling_note().into_iter().chain(t.trials_note()) {
                if !notes.contains(&n) {
                    notes.push(n);
                }
            }
        }
        for t in &self.tables {
            if let Some(n) = &t.scope_note {
                let n = format!("{}: {n}", t.label);
                if !notes.contains(&n) {
                    notes.push(n);
                }
            }
        }
        notes
    }

    /// Header and body as cells of text: with several figures, a line per
    /// figure of each row (the row's keys on its first line), its name and
    /// unit in a `figure` column; a figure no cell of the row has is left out.
    pub fn grid(&self) -> (Vec<String>, Vec<Vec<String>>) {
        if let Some(t) = self.single() {
            return t.grid();
        }
        let first = self.first();
        let mut header = first.row_keys.clone();
        header.push("figure".into());
        header.extend(self.cols.iter().map(|c| col_label(c)));
        let mut body = Vec::new();
        for row in &self.rows {
            let mut first_line = true;
            for t in &self.tables {
                let cells: Vec<Option<&Cell>> = self
                    .cols
                    .iter()
                    .map(|col| t.cells.iter().find(|c| &c.row == row && &c.col == col))
                    .collect();
                if cells.iter().all(Option::is_none) {
                    continue;
                }
                let (unit, divisor) = t.shown_unit();
                let mut line: Vec<String> = if first_line {
                    row.clone()
                } else {
                    vec![String::new(); row.len()]
                };
                first_line = false;
                line.push(format!("{}, {unit}", t.label));
                line.extend(cells.into_iter().map(|c| t.cell_text(c, divisor)));
                body.push(line);
            }
        }
        (header, body)
    }

    /// How many leading columns of [`Roundup::grid`] are keys (left-aligned).
    pub fn key_columns(&self) -> usize {
        self.first().row_keys.len() + usize::from(self.single().is_none())
    }

    /// The table to write: title, grid, notes (one figure: its own table's).
    fn to_grid(&self) -> Grid {
        if let Some(t) = self.single() {
            return t.to_grid();
        }
        let (header, body) = self.grid();
        Grid {
            title: self.title(),
            header,
            body,
            keys: self.key_columns(),
            notes: self.notes(),
        }
    }

    /// Aligned text: keys left, figures right, notes under it.
    pub fn text(&self, out: &mut dyn Write) -> io::Result<()> {
        self.to_grid().text(out)
    }

    /// A Markdown table under the title.
    pub fn markdown(&self, out: &mut dyn Write) -> io::Result<()> {
        self.to_grid().markdown(out)
    }

    /// One line per cell and figure, in each metric's own unit.
    pub fn csv(&self, out: &mut dyn Write) -> io::Result<()> {
        let mut csv = Csv::new(out);
        csv.row(self.first().csv_header())?;
        for t in &self.tables {
            for line in t.csv_lines() {
                csv.row(&line)?;
            }
        }
        csv.finish()
    }

    /// The document: every cell with each of its figures.
    pub fn json(&self, out: &mut dyn Write) -> io::Result<()> {
        let first = self.first();
        let mut cells: Vec<DocCell> = Vec::new();
        for row in &self.rows {
            for col in &self.cols {
                let mut figures = BTreeMap::new();
                let mut cases: Vec<String> = Vec::new();
                for t in &self.tables {
                    let Some(c) = t.cells.iter().find(|c| &c.row == row && &c.col == col) else {
                        continue;
                    };
                    for case in &c.cases {
                        if !cases.contains(case) {
                            cases.push(case.clone());
                        }
                    }
                    figures.insert(
                        t.metric.as_str(),
                        Figure {
                            value: c.value,
                            runs: c.runs,
                            trials: c.trials,
                            min: c.min,
                            max: c.max,
                            low: c.low,
                            high: c.high,
                            spread: c.spread,
                            level_percent: c.level_percent,
                            met: c.met,
                            unsettled: c.unsettled,
                            ratio: c.ratio,
                            too_few_for_interval: c.too_few_for_interval,
                            lower_middle: c.lower_middle,
                        },
                    );
                }
                if !figures.is_empty() {
                    cases.sort_by(|a, b| super::compare::natural_text(a, b));
                    cells.push(DocCell {
                        row,
                        col,
                        cases,
                        figures,
                    });
                }
            }
        }
        let mut separate_by: Vec<String> = Vec::new();
        for t in &self.tables {
            for key in &t.separate_by {
                if !separate_by.contains(key) {
                    separate_by.push(key.clone());
                }
            }
        }
        let document = Document {
            schema: SCHEMA,
            stat: first.stat,
            row_keys: &first.row_keys,
            col_keys: &first.col_keys,
            rows: &self.rows,
            cols: &self.cols,
            baseline: first.baseline.as_deref(),
            metrics: self
                .tables
                .iter()
                .map(|t| MetricHead {
                    metric: &t.metric,
                    unit: &t.unit,
                    label: &t.label,
                })
                .collect(),
            cells,
            unsettled: self
                .tables
                .iter()
                .flat_map(|t| {
                    t.unsettled.iter().map(move |u| DocUnsettled {
                        metric: &t.metric,
                        row: &u.row,
                        col: &u.col,
                        other_row: &u.other_row,
                        other_col: &u.other_col,
                    })
                })
                .collect(),
            separate_by,
        };
        crate::outside_text::write_json_pretty(&mut *out, &document)?;
        writeln!(out)
    }
}

/// The CPU units a title may name, as the words say them, and the unit
/// each is: a share of every core of the host (the whole machine's where
/// hosts share a kernel), or of one core (a process's own threads).
const CPU_UNIT_WORDS: [(&str, &str); 7] = [
    ("of one core", "% of a core"),
    ("of a core", "% of a core"),
    ("of 1 core", "% of a core"),
    ("of a single core", "% of a core"),
    ("of all cores", "% of all cores"),
    ("of every core", "% of all cores"),
    ("of the machine", "% of all cores"),
];

/// Where a hand-written table title names a CPU unit that one of the
/// table's figures is not in ("Agent CPU, % of one core" over `agent-cpu`,
/// which is percent of all the host's cores): what is wrong and what to
/// do. The table writes each figure's unit from the figure itself; a title
/// need not name one.
pub fn title_contradiction(title: &str, metrics: &[crate::store::compare::Metric]) -> Option<String> {
    let lower = title.to_lowercase();
    let (words, said) = CPU_UNIT_WORDS.iter().find(|(w, _)| lower.contains(w))?;
    let wrong = metrics.iter().find(|m| m.unit.starts_with("% of") && m.unit != *said)?;
    let instead = match wrong.unit {
        "% of all cores" => format!(
            " (the whole host's cores: in a lab, whose hosts share one kernel, the machine's); for the process's own \
             threads, % of a core, use {}",
            wrong.name.replace("cpu", "threads-cpu")
        ),
        _ => String::new(),
    };
    Some(format!(
        "the title \"{title}\" says \"{words}\", but {} ({}) is {}{instead}: leave the unit out of the title (the \
         table names each figure's own) or name the right one",
        wrong.name, wrong.label, wrong.unit
    ))
}

impl Roundup {
    /// The table as HTML: the caption (`title`, else the figures and the
    /// statistic) wraps, the figures' lines sit under their row's keys, and
    /// the notes follow under the table.
    pub fn write_html(&self, out: &mut String, title: Option<&str>) {
        use std::fmt::Write as _;
        let escape = super::chart::svg::escape;
        let caption = match title {
            Some(t) => format!("{t}: {}", self.title()),
            None => self.title(),
        };
        let (header, body) = self.grid();
        let keys = self.key_columns();
        let _ = write!(
            out,
            "<div class=\"scroll\"><table class=\"roundup\"><caption>{}</caption><thead><tr>",
            escape(&caption)
        );
        for h in &header {
            let _ = write!(out, "<th scope=\"col\">{}</th>", escape(h));
        }
        out.push_str("</tr></thead><tbody>");
        for line in &body {
            // A row's first line (its keys filled) opens a group.
            let first = line.first().is_some_and(|k| !k.is_empty()) || keys == 0;
            out.push_str(if first { "<tr class=\"first\">" } else { "<tr>" });
            for (i, cell) in line.iter().enumerate() {
                if i < keys {
                    let _ = write!(out, "<th scope=\"row\">{}</th>", escape(cell));
                } else {
                    let class = if cell.starts_with('~') { "num unsettled" } else { "num" };
                    let _ = write!(out, "<td class=\"{class}\">{}</td>", escape(cell));
                }
            }
            out.push_str("</tr>");
        }
        out.push_str("</tbody></table></div>\n");
        for note in self.notes() {
            let _ = writeln!(out, "<p class=\"note\">{}</p>", escape(&note));
        }
    }
}
