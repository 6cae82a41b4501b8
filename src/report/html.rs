//! The one-file HTML report of `nicbench report` (and of `demo`): inline
//! SVG charts, the comparison tables of `compare` (sortable by a click on
//! a header), every host's facts, each run's verdict, line-rate share and
//! the command that reproduces it. No network fetch, no external file: the
//! CSS and the few lines of JavaScript are in the page.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use super::chart::data::{self, ChartSpec, SelectError};
use super::chart::svg::escape;
use super::chart::{self, ChartError};
use super::compare::{col_label, Stat, Table};
use crate::model::facts::HostFacts;
use crate::store::cases::CaseBook;
use crate::store::compare::Dimension;
use crate::store::query::{DocumentParts, Filter, RunSummary};
use crate::store::{Store, StoreError};

/// What the report covers and how its tables are laid out.
#[derive(Debug, Clone)]
pub struct ReportSpec {
    pub title: String,
    /// Where the runs come from (the database's path), for the header.
    pub source: String,
    /// The filters as the user gave them, shown in the header.
    pub filters_text: String,
    /// Rows and columns of the comparison tables; the bars and the CPU
    /// chart group by the rows and colour by the columns.
    /// No columns: one column per host pair (client -> agent) when the
    /// runs span more than one, else one column of all runs.
    pub rows: Vec<Dimension>,
    pub cols: Vec<Dimension>,
    pub stat: Stat,
    /// The column (its label, as the tables head it) every other column
    /// of a table is compared with: a ratio column per other column.
    pub baseline: Option<String>,
    /// The cases of the plan runs among the runs that have no complete
    /// run, each with the reason (from the plans' summary files).
    pub plan_cells: Vec<PlanCell>,
    /// A table shown first, as the command that made the runs printed it
    /// (the demo's summary).
    pub lead: Option<LeadTable>,
    /// Tables of several figures per cell, each with its title (a plan's
    /// `[[report.tables]]`), shown before the one-figure tables.
    pub roundups: Vec<RoundupSpec>,
}

/// One table of several figures per cell.
#[derive(Debug, Clone)]
pub struct RoundupSpec {
    pub title: Option<String>,
    pub rows: Vec<Dimension>,
    pub cols: Vec<Dimension>,
    pub metrics: Vec<crate::store::compare::Metric>,
    pub stat: Stat,
    pub baseline: Option<String>,
    /// Only this workload's runs.
    pub workload: Option<String>,
}

/// A table of text cells: a caption, a header, rows.
#[derive(Debug, Clone, PartialEq)]
pub struct LeadTable {
    pub caption: String,
    pub header: Vec<String>,
    pub rows: Vec<Vec<String>>,
}

/// A plan case that was not measured: which, in which plan run, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct PlanCell {
    pub plan_run: String,
    pub case: String,
    /// `failed`, `interrupted`, `incomplete`, `not saved`.
    pub status: String,
    pub reason: String,
}

/// What was written, for the command's closing line.
#[derive(Debug, Clone, PartialEq)]
pub struct Written {
    pub runs: usize,
    pub charts: usize,
    pub tables: usize,
}

const SIZE: (u32, u32) = (900, 520);

const STYLE: &str = r#"
:root{--fg:#1b1f24;--muted:#57606a;--line:#d0d7de;--bg:#fff;--head:#f6f8fa;--accent:#0b5cad}
*{box-sizing:border-box}
body{margin:0;font:16px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;color:var(--fg);background:var(--bg)}
main{max-width:1240px;margin:0 auto;padding:1rem}
h1{font-size:1.6rem;margin:.2rem 0}
h2{font-size:1.25rem;margin-top:2rem;border-bottom:1px solid var(--line);padding-bottom:.2rem}
.meta{color:var(--muted);margin:.2rem 0 1rem}
.summary{display:flex;flex-wrap:wrap;gap:.6rem;padding:0;margin:0;list-style:none}
.summary li{flex:1 1 10rem;border:1px solid var(--line);border-radius:6px;padding:.5rem .7rem;background:var(--head)}
.summary b{display:block;font-size:1.2rem}
figure{margin:1rem 0;break-inside:avoid}
.metric{display:grid;grid-template-columns:minmax(0,1fr) minmax(0,1fr);gap:0 1.2rem;align-items:start;margin:1.2rem 0;padding-top:.4rem;border-top:1px solid var(--line)}
.metric.with-cpu>.scroll,.metric.with-cpu>.note,.metric.wide>.scroll,.metric.wide>.note{grid-column:1/-1}
.metric table{min-width:min(100%,36rem)}
.note{color:var(--muted);font-size:.9rem;margin:.2rem 0}
@media (max-width:900px){.metric{grid-template-columns:minmax(0,1fr)}}
figure svg{width:100%;height:auto;display:block}
.tip{position:absolute;display:none;z-index:9;max-width:24rem;background:#fff;border:1px solid var(--muted);border-radius:4px;padding:.3rem .5rem;font-size:.85rem;white-space:pre-line;pointer-events:none;box-shadow:0 2px 6px rgba(0,0,0,.2)}
[data-tip]:hover{opacity:.8}
.failed td:first-child{font-weight:600}
table.receivers tr.slowest>th{color:#d62728}
figcaption{color:var(--muted);font-size:.9rem}
.scroll{overflow-x:auto;max-width:100%}
table{border-collapse:collapse;margin:.5rem 0;font-size:.9rem}
caption{text-align:left;font-weight:600;padding:.3rem 0}
th,td{border:1px solid var(--line);padding:.25rem .5rem;vertical-align:top}
th{background:var(--head);text-align:left}
td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
table.roundup tr.first>*{border-top:2px solid var(--muted)}
td.unsettled{background:repeating-linear-gradient(135deg,transparent 0 4px,#f2e3c6 4px 6px)}
table.sortable th{cursor:pointer}
table.sortable th[aria-sort=ascending]::after{content:" \25B2"}
table.sortable th[aria-sort=descending]::after{content:" \25BC"}
th:focus{outline:2px solid var(--accent)}
code,pre{font-family:"DejaVu Sans Mono",ui-monospace,monospace;font-size:.85rem}
pre{white-space:pre-wrap;word-break:break-all;background:var(--head);padding:.4rem;border-radius:4px;margin:.3rem 0}
.facts{display:grid;grid-template-columns:repeat(auto-fill,minmax(20rem,1fr));gap:.8rem}
.facts table{width:100%}
details{border-bottom:1px solid var(--line);padding:.3rem 0}
summary{cursor:pointer}
.verdict{font-weight:600}
.above{color:#a04000;font-weight:600}
@media (max-width:640px){body{font-size:15px}main{padding:.5rem}td,th{padding:.2rem .3rem}}
@media print{main{max-width:none;padding:0}.scroll{overflow:visible}table.sortable th::after{content:none}
a{color:inherit;text-decoration:none}h2{break-after:avoid}details{break-inside:avoid}.tip{display:none!important}}
"#;

const SCRIPT: &str = r#"
document.querySelectorAll('table.sortable th').forEach(function (th) {
  th.tabIndex = 0;
  function sort() {
    var table = th.closest('table'), body = table.tBodies[0], i = th.cellIndex;
    var up = th.getAttribute('aria-sort') !== 'ascending';
    table.querySelectorAll('th').forEach(function (h) { h.removeAttribute('aria-sort'); });
    th.setAttribute('aria-sort', up ? 'ascending' : 'descending');
    function key(tr) { var c = tr.cells[i]; return c ? (c.dataset.v !== undefined ? c.dataset.v : c.textContent.trim()) : ''; }
    Array.from(body.rows).sort(function (a, b) {
      var x = key(a), y = key(b), p = parseFloat(x), q = parseFloat(y);
      var r = (!isNaN(p) && !isNaN(q)) ? p - q : x.localeCompare(y);
      return up ? r : -r;
    }).forEach(function (tr) { body.appendChild(tr); });
  }
  th.addEventListener('click', sort);
  th.addEventListener('keydown', function (e) { if (e.key === 'Enter' || e.key === ' ') { e.preventDefault(); sort(); } });
});
(function () {
  var tip = document.createElement('div');
  tip.className = 'tip'; tip.setAttribute('role', 'tooltip'); document.body.appendChild(tip);
  document.addEventListener('mouseover', function (e) {
    var mark = e.target.closest ? e.target.closest('[data-tip]') : null;
    if (!mark) { tip.style.display = 'none'; return; }
    tip.textContent = mark.getAttribute('data-tip'); tip.style.display = 'block';
  });
  document.addEventListener('mousemove', function (e) {
    if (tip.style.display !== 'block') return;
    var x = Math.min(e.pageX + 14, window.scrollX + document.documentElement.clientWidth - tip.offsetWidth - 4);
    tip.style.left = x + 'px'; tip.style.top = (e.pageY + 14) + 'px';
  });
})();
window.addEventListener('beforeprint', function () { document.querySelectorAll('details').forEach(function (d) { d.open = true; }); });
"#;

/// One run as the report reads it.
struct RunView {
    summary: RunSummary,
    command_line: String,
    verdict: Option<String>,
    line_rate_percent: Option<f64>,
}

/// What the report reads of each document: the verdict, the line-rate
/// share (of the measured throughput, or of a sweep's peak), both ends' facts.
const PATHS: [&str; 5] = [
    "$.verdict.summary",
    "$.line_rate.percent_of_theoretical_goodput",
    "$.streams[0].sender.sweep.summary.peak_line_rate_percent",
    "$.client.facts",
    "$.agent.facts",
];

/// The facts block of one host as (name, value) lines, from the text
/// writer of `nicbench host`.
fn fact_lines(facts: &HostFacts) -> Vec<(String, String)> {
    let mut text = Vec::new();
    let _ = super::facts::write_host(facts, &mut text);
    if let Some(nic) = &facts.interface {
        let _ = super::facts::write_nic(nic, &mut text);
    }
    String::from_utf8_lossy(&text)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| match l.split_once("  ") {
            Some((k, v)) if !k.starts_with(' ') => (k.trim().to_string(), v.trim().to_string()),
            _ => (String::new(), l.trim().to_string()),
        })
        .collect()
}

/// Writes the report of the runs matching `filter` into `out`: what
/// [`gather`] reads of them, as [`render`] lays it out.
pub fn write(store: &Store, filter: &Filter, spec: &ReportSpec, out: &mut String) -> Result<Written, ReportError> {
    let page = gather(store, filter, spec)?;
    Ok(render(&page, spec, out))
}

/// Everything a report shows, read from the store and drawn: plain data
/// that [`render`] lays out without the store (a test builds one in
/// memory).
pub struct Page {
    /// Every matching run, newest first.
    runs: Vec<RunView>,
    hosts: HostBook,
    /// One part per metric: its table, its bars, and CPU beside throughput.
    parts: Vec<MetricPart>,
    /// The curves: the CPU chart when no throughput table holds it, the
    /// workloads' charts, the timeline, the charts of one run, meshes.
    charts: Vec<Figure>,
    /// Which runs the charts of one run cover, when not all.
    per_run_notes: Vec<String>,
    /// One chart per fan-out test (its receivers side by side), newest
    /// first, each with its table under it.
    group_tests: Vec<Figure>,
    /// Which fan-out tests are drawn, when not all.
    group_tests_note: Option<String>,
    /// The plan's tables of several figures, in the order asked.
    roundups: Vec<RoundupPart>,
    /// The runs whose stored headline was above their line rate, read
    /// again from their documents.
    reread: Vec<super::runs::Reread>,
}

/// One of the plan's tables of several figures, or its title when no
/// complete run has its figures.
enum RoundupPart {
    Table(super::roundup::Roundup, Option<String>),
    Missing(Option<String>),
}

/// Reads and draws what the report of the runs matching `filter` shows.
pub fn gather(store: &Store, filter: &Filter, spec: &ReportSpec) -> Result<Page, ReportError> {
    let mut summaries = store.runs(&Filter {
        limit: None,
        ..filter.clone()
    })?;
    let reread = super::runs::reread_headlines(store, &mut summaries)?;
    if summaries.is_empty() {
        return Err(SelectError::from(ChartError::Empty(format!(
            "no run in {} matches the filters: `{}` lists them",
            store.path().display(),
            crate::store::given(store.path()).command(&["runs"])
        )))
        .into());
    }
    let ids: Vec<i64> = summaries.iter().map(|r| r.id).collect();
    let mut parts: std::collections::HashMap<i64, DocumentParts> = store
        .document_parts(&ids, &PATHS)?
        .into_iter()
        .map(|p| (p.id, p))
        .collect();
    let mut runs = Vec::with_capacity(summaries.len());
    let mut hosts = HostBook::default();
    let mut seen_facts = std::collections::HashSet::new();
    for summary in summaries {
        let Some(p) = parts.remove(&summary.id) else { continue };
        for (side, at) in [("client", 3), ("agent", 4)] {
            let Some(text) = p.text(at) else { continue };
            if !seen_facts.insert(text.to_string()) {
                continue;
            }
            if let Some(facts) = crate::model::from_text::<HostFacts>(text) {
                hosts.add(
                    &facts.hostname,
                    format!("{side} of run {}", summary.id),
                    fact_lines(&facts),
                );
            }
        }
        runs.push(RunView {
            verdict: p.text(0).map(String::from),
            line_rate_percent: p.number(1).or(p.number(2)),
            command_line: p.command_line,
            summary,
        });
    }
    // A headline read again: its share of the line rate is the new one's.
    for r in &reread {
        if let Some(run) = runs.iter_mut().find(|run| run.summary.id == r.id) {
            run.line_rate_percent = run.summary.headline_value.map(|v| r.share_percent * v / r.stored);
        }
    }
    // The cases of the complete runs, read once for every table and chart.
    let book = crate::store::cases::CaseBook::read(store, &data::complete(filter))?;
    let pairs = host_pairs(&runs);
    let cols = if spec.cols.is_empty() && pairs > 1 {
        host_pair_dimensions()
    } else {
        spec.cols.clone()
    };
    let complete: Vec<i64> = runs
        .iter()
        .filter(|r| r.summary.complete)
        .map(|r| r.summary.id)
        .collect();
    let scopes = super::cpu_scope::ScopeBook::read(store, &complete)?;
    let mut ids = 0..;
    let mut parts = metric_parts(store, filter, spec, &cols, &book, &scopes, &mut ids)?;
    check_baseline(spec, &parts)?;
    let mut charts = Vec::new();
    // CPU beside throughput: one stacked pair of bars per cell of the
    // throughput table (its rows and columns), else among the curves.
    // Only the cells the throughput table has (a sweep's runs have CPU
    // figures but no throughput): the two stand side by side.
    let cells: Option<Vec<String>> = (!spec.cols.is_empty())
        .then(|| parts.iter().find(|p| p.table.metric == THROUGHPUT))
        .flatten()
        .map(|p| {
            let t = &p.table;
            t.cells
                .iter()
                .map(|c| col_label(&[c.row.clone(), c.col.clone()].concat()))
                .collect()
        });
    let drawn = CpuDrawn {
        cells: cells.as_deref(),
        note: scopes.chart_note(&complete),
    };
    if let Some(cpu) = cpu_chart(store, filter, spec, &cols, &book, drawn, &mut ids)? {
        match parts.iter_mut().find(|p| p.table.metric == THROUGHPUT) {
            Some(part) => part.cpu = Some(cpu),
            None => charts.push(cpu),
        }
    }
    let (of_runs, per_run_notes) = charts_of_runs(store, filter, spec, &book, &mut ids)?;
    charts.extend(of_runs);
    let (tests, group_tests_note) = super::receivers::read(store, filter)?;
    let group_tests = tests
        .into_iter()
        .map(|test| svg_of(chart::Chart::Receivers(test), SIZE, &mut ids))
        .collect::<Result<Vec<_>, _>>()?;
    let roundups = roundups(store, filter, &spec.roundups, &book, &scopes)?;
    Ok(Page {
        runs,
        hosts,
        parts,
        charts,
        per_run_notes,
        group_tests,
        group_tests_note,
        roundups,
        reread,
    })
}

/// Lays out `page` as one HTML file into `out`.
pub fn render(page: &Page, spec: &ReportSpec, out: &mut String) -> Written {
    let Page {
        runs,
        hosts,
        parts,
        charts,
        per_run_notes,
        group_tests,
        group_tests_note,
        roundups,
        reread,
    } = page;
    let complete = runs.iter().filter(|r| r.summary.complete).count();
    let _ = writeln!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <meta name=\"generator\" content=\"nicbench {}\"><title>{}</title><style>{STYLE}</style></head>\n<body><main>",
        env!("CARGO_PKG_VERSION"),
        escape(&spec.title)
    );
    let _ = writeln!(
        out,
        "<header><h1>{}</h1><p class=\"meta\">Generated {} UTC by nicbench {} from {}{}</p></header>",
        escape(&spec.title),
        super::runs::utc(crate::store::now_unix_seconds()),
        env!("CARGO_PKG_VERSION"),
        escape(&spec.source),
        if spec.filters_text.is_empty() {
            String::new()
        } else {
            format!("; filters: <code>{}</code>", escape(&spec.filters_text))
        }
    );
    write_summary(out, runs, complete, spec.plan_cells.len());
    write_plan_cells(out, &spec.plan_cells);
    if let Some(lead) = &spec.lead {
        write_lead(out, lead);
    }
    let _ = writeln!(out, "<nav aria-label=\"Contents\"><p>{}<a href=\"#tables\">Tables and bars</a> · <a href=\"#charts\">Curves</a> · {}<a href=\"#runs\">Runs</a> · <a href=\"#facts\">Hosts</a> · <a href=\"#reproduce\">Reproduce</a></p></nav>", if spec.roundups.is_empty() { "" } else { "<a href=\"#roundup\">The plan's tables</a> · " }, if group_tests.is_empty() { "" } else { "<a href=\"#receivers\">Receivers</a> · " });

    write_roundups(out, roundups);
    out.push_str("<section id=\"tables\"><h2>Tables and bars</h2>\n");
    if parts.is_empty() {
        out.push_str("<p>No complete run to compare.</p>\n");
    }
    let mut figures = 0;
    for part in parts {
        write_part(out, part, spec.baseline.as_deref(), &mut figures);
    }
    out.push_str("</section>\n");
    if !charts.is_empty() {
        out.push_str("<section id=\"charts\"><h2>Curves</h2>\n");
        for figure in charts {
            write_figure(out, figure, &mut figures);
        }
        for note in per_run_notes {
            let _ = writeln!(out, "<p class=\"meta\">{}</p>", escape(note));
        }
        out.push_str("</section>\n");
    }
    write_group_tests(out, group_tests, group_tests_note.as_deref(), &mut figures);
    write_runs(out, runs, reread);
    out.push_str("<section id=\"facts\"><h2>Hosts</h2><div class=\"facts\">\n");
    for host in &hosts.0 {
        let _ = write!(out, "<table><caption>{}</caption><tbody>", escape(&host.caption()));
        for (k, values) in &host.lines {
            let _ = write!(
                out,
                "<tr><th scope=\"row\">{}</th><td>{}</td></tr>",
                escape(k),
                escape(&values.join(" · "))
            );
        }
        out.push_str("</tbody></table>\n");
    }
    out.push_str("</div></section>\n");
    write_reproduce(out, runs);
    let _ = writeln!(out, "</main><script>{SCRIPT}</script></body></html>");
    let drawn_with_tables: usize = parts
        .iter()
        .map(|p| p.bars.is_some() as usize + p.cpu.is_some() as usize)
        .sum();
    Written {
        runs: runs.len(),
        charts: charts.len() + group_tests.len() + drawn_with_tables,
        tables: parts.len(),
    }
}

/// Each host once, by name: its facts as first seen, and every other
/// value a fact took in later runs (a plan's MTU axis changes the MTU of
/// the same host from case to case).
#[derive(Default)]
struct HostBook(Vec<HostEntry>);

struct HostEntry {
    name: String,
    /// Where it was first seen: `agent of run 12`.
    first: String,
    /// Each fact with its values in the order seen.
    lines: Vec<(String, Vec<String>)>,
}

impl HostBook {
    fn add(&mut self, name: &str, seen: String, lines: Vec<(String, String)>) {
        // A host without a name (an imported file) is told apart by its facts.
        let same = |h: &&mut HostEntry| {
            h.name == name
                && (!name.is_empty()
                    || h.lines
                        .iter()
                        .map(|(k, v)| (k, &v[0]))
                        .eq(lines.iter().map(|(k, v)| (k, v))))
        };
        let Some(host) = self.0.iter_mut().find(same) else {
            self.0.push(HostEntry {
                name: name.into(),
                first: seen,
                lines: lines.into_iter().map(|(k, v)| (k, vec![v])).collect(),
            });
            return;
        };
        for (k, v) in lines {
            match host.lines.iter_mut().find(|(key, _)| *key == k) {
                Some((_, values)) if !values.contains(&v) => values.push(v),
                Some(_) => {}
                None => host.lines.push((k, vec![v])),
            }
        }
    }
}

impl HostEntry {
    /// `b (agent of run 3); differs between runs: interface`.
    fn caption(&self) -> String {
        let differs: Vec<&str> = self
            .lines
            .iter()
            .filter(|(_, v)| v.len() > 1)
            .map(|(k, _)| k.as_str())
            .collect();
        match differs.as_slice() {
            [] => format!("{} ({})", self.name, self.first),
            keys => format!(
                "{} ({}); differs between runs: {}",
                self.name,
                self.first,
                keys.join(", ")
            ),
        }
    }
}

/// When a run started, or "unknown" (an imported file without a time).
fn started(unix_seconds: f64) -> String {
    if has_start(unix_seconds) {
        super::runs::utc(unix_seconds)
    } else {
        "unknown".into()
    }
}

fn has_start(unix_seconds: f64) -> bool {
    unix_seconds.is_finite() && unix_seconds > 0.0
}

fn write_summary(out: &mut String, runs: &[RunView], complete: usize, plan_cells: usize) {
    let workloads: BTreeSet<&str> = runs.iter().map(|r| r.summary.workload.as_str()).collect();
    let timed: Vec<f64> = runs
        .iter()
        .map(|r| r.summary.started_at_unix_seconds)
        .filter(|t| has_start(*t))
        .collect();
    let untimed = runs.len() - timed.len();
    let range = match (
        timed.iter().copied().reduce(f64::min),
        timed.iter().copied().reduce(f64::max),
    ) {
        (Some(first), Some(last)) => format!(
            "<li>from<b>{}</b>to {}{}</li>",
            super::runs::utc(first),
            super::runs::utc(last),
            if untimed > 0 {
                format!("; {untimed} run(s) without a start time")
            } else {
                String::new()
            }
        ),
        _ => "<li>from<b>unknown</b>no run has a start time</li>".into(),
    };
    let cells = if plan_cells > 0 {
        format!("<li>plan cells not measured<b><a href=\"#plan-cells\">{plan_cells}</a></b>listed with the reason</li>")
    } else {
        String::new()
    };
    let _ = writeln!(
        out,
        "<section aria-label=\"Summary\"><ul class=\"summary\">\
         <li>runs<b>{}</b>{} complete</li><li>workloads<b>{}</b></li><li>hosts<b>{}</b></li>\
         {range}<li>verdicts<b>{}</b></li>{cells}</ul></section>",
        runs.len(),
        complete,
        escape(&workloads.into_iter().collect::<Vec<_>>().join(", ")),
        super::runs::host_count(runs.iter().map(|r| &r.summary)),
        escape(&super::runs::verdict_counts(runs.iter().map(|r| &r.summary))),
    );
}

/// The lead table: the first column names the row, the others are figures.
fn write_lead(out: &mut String, lead: &LeadTable) {
    let _ = write!(
        out,
        "<section id=\"lead\"><div class=\"scroll\"><table class=\"lead\"><caption>{}</caption><thead><tr>",
        escape(&lead.caption)
    );
    for h in &lead.header {
        let _ = write!(out, "<th scope=\"col\">{}</th>", escape(h));
    }
    out.push_str("</tr></thead><tbody>");
    for row in &lead.rows {
        out.push_str("<tr>");
        for (i, cell) in row.iter().enumerate() {
            if i == 0 {
                let _ = write!(out, "<th scope=\"row\">{}</th>", escape(cell));
            } else {
                let _ = write!(out, "<td class=\"num\">{}</td>", escape(cell));
            }
        }
        out.push_str("</tr>");
    }
    out.push_str("</tbody></table></div></section>\n");
}

/// The tables of several figures per cell the plan asks for, each with
/// its title.
fn roundups(
    store: &Store,
    filter: &Filter,
    specs: &[RoundupSpec],
    book: &CaseBook,
    scopes: &super::cpu_scope::ScopeBook,
) -> Result<Vec<RoundupPart>, ReportError> {
    let filter = data::complete(filter);
    let keys = |d: &[Dimension]| d.iter().map(Dimension::title).collect::<Vec<_>>();
    let mut parts = Vec::new();
    for spec in specs {
        let mut tables = Vec::new();
        let mut filter = filter.clone();
        if spec.workload.is_some() {
            filter.workload = spec.workload.clone();
        }
        for metric in &spec.metrics {
            let found = crate::store::compare::records_in(store, &filter, &spec.rows, &spec.cols, metric, book)?;
            if found.records.is_empty() {
                continue;
            }
            let mut table = Table::build(
                &found.records,
                metric,
                spec.stat,
                keys(&spec.rows),
                keys(&spec.cols),
                spec.baseline.as_deref(),
            )
            .map_err(ReportError::Baseline)?;
            table.scope_note = scopes.note(metric, &run_ids(&found.records));
            tables.push(table);
        }
        parts.push(match tables.is_empty() {
            true => RoundupPart::Missing(spec.title.clone()),
            false => RoundupPart::Table(super::roundup::Roundup::new(tables), spec.title.clone()),
        });
    }
    Ok(parts)
}

/// The plan's tables, each under its title; one whose figures no run has
/// says so.
fn write_roundups(out: &mut String, parts: &[RoundupPart]) {
    if parts.is_empty() {
        return;
    }
    out.push_str("<section id=\"roundup\"><h2>The plan's tables</h2>\n");
    for part in parts {
        match part {
            RoundupPart::Table(roundup, title) => roundup.write_html(out, title.as_deref()),
            RoundupPart::Missing(title) => {
                let _ = writeln!(
                    out,
                    "<p class=\"note\">{}: no complete run has these figures.</p>",
                    escape(title.as_deref().unwrap_or("A table"))
                );
            }
        }
    }
    out.push_str("</section>\n");
}

/// Every plan cell without a complete run, and why.
fn write_plan_cells(out: &mut String, cells: &[PlanCell]) {
    if cells.is_empty() {
        return;
    }
    let _ = write!(
        out,
        "<section id=\"plan-cells\"><h2>Plan cells not measured</h2><p>{} of the plan's cases have no complete run; \
         a resumed plan (<code>nicbench run PLAN</code>) runs them again.</p><div class=\"scroll\">\
         <table class=\"sortable plan-cells\"><caption>Failed and missing cells, with the reason</caption><thead><tr>\
         <th scope=\"col\">case</th><th scope=\"col\">status</th><th scope=\"col\">reason</th>\
         <th scope=\"col\">plan run</th></tr></thead><tbody>",
        cells.len()
    );
    for c in cells {
        let _ = write!(
            out,
            "<tr class=\"failed\"><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            escape(&c.case),
            escape(&c.status),
            escape(&c.reason),
            escape(&c.plan_run)
        );
    }
    out.push_str("</tbody></table></div></section>\n");
}

/// The metric of the table the CPU chart stands beside.
const THROUGHPUT: &str = "throughput";

/// The layout of a bar chart beside its table (half the page's width),
/// and of a curve or timeline (the page's width).
const BESIDE: (u32, u32) = (640, 440);

/// The CPU chart's layout beside the throughput bars: taller, for a name
/// per cell (case and column) written upright under its pair of bars.
const CPU_BESIDE: (u32, u32) = (640, 660);

/// A chart and its SVG.
type Figure = (chart::Chart, String);

/// One metric's part of the report: its table, its bar chart (a group per
/// row, a bar per column) and, beside throughput, the CPU chart.
struct MetricPart {
    table: Table,
    bars: Option<Figure>,
    cpu: Option<Figure>,
}

/// The dimensions of a host pair column: client, then agent.
fn host_pair_dimensions() -> Vec<Dimension> {
    ["client", "agent"]
        .iter()
        .map(|d| Dimension::parse(d).expect("a known column"))
        .collect()
}

/// How many host pairs (client host, agent host) the complete runs span.
fn host_pairs(runs: &[RunView]) -> usize {
    runs.iter()
        .filter(|r| r.summary.complete)
        .map(|r| (&r.summary.client_host, &r.summary.agent_host))
        .collect::<BTreeSet<_>>()
        .len()
}

/// A host pair column's values as one, "client -> agent".
fn pair_label(col: &[String]) -> Vec<String> {
    match col {
        [client, agent] => vec![format!("{client} -> {agent}")],
        other => other.to_vec(),
    }
}

/// Renames the two-key host pair columns of `table` (and of the records
/// it was built from) to one "client -> agent" column each.
fn as_host_pairs(table: &mut Table, records: &mut [crate::store::compare::Record]) {
    table.col_keys = vec!["client -> agent".into()];
    for col in &mut table.cols {
        *col = pair_label(col);
    }
    for cell in &mut table.cells {
        cell.col = pair_label(&cell.col);
    }
    for r in records {
        r.col = pair_label(&r.col);
    }
}

fn svg_of(chart: chart::Chart, size: (u32, u32), ids: &mut std::ops::RangeFrom<usize>) -> Result<Figure, SelectError> {
    let id = ids.next().unwrap_or_default();
    let svg = chart::render_svg_with_id(&chart, size, &format!("c{id}"))?;
    Ok((chart, svg))
}

/// Every metric some run has (throughput, the workloads' own stored
/// figures, then CPU): its comparison table and its bar chart.
fn metric_parts(
    store: &Store,
    filter: &Filter,
    spec: &ReportSpec,
    cols: &[Dimension],
    book: &CaseBook,
    scopes: &super::cpu_scope::ScopeBook,
    ids: &mut std::ops::RangeFrom<usize>,
) -> Result<Vec<MetricPart>, SelectError> {
    let filter = data::complete(filter);
    let keys = |d: &[Dimension]| d.iter().map(Dimension::title).collect::<Vec<_>>();
    let pairs = spec.cols.is_empty() && !cols.is_empty();
    let mut parts = Vec::new();
    let asked_only: Vec<&str> = crate::workload::Metric::THREADS.iter().map(|m| m.option).collect();
    for metric in crate::store::compare::all_metrics() {
        if asked_only.contains(&metric.name) {
            continue;
        }
        let mut found = crate::store::compare::records_in(store, &filter, &spec.rows, cols, &metric, book)?;
        if found.records.is_empty() {
            continue;
        }
        let mut table = Table::build(&found.records, &metric, spec.stat, keys(&spec.rows), keys(cols), None)
            .map_err(|e| SelectError::Chart(ChartError::Empty(e)))?;
        if pairs {
            as_host_pairs(&mut table, &mut found.records);
        }
        table.scope_note = scopes.note(&metric, &run_ids(&found.records));
        let bars = data::bars_of_table(&table, &found.records, metric.label, spec.stat);
        let bars = svg_of(chart::Chart::Bars(bars), BESIDE, ids)?;
        parts.push(MetricPart {
            table,
            bars: Some(bars),
            cpu: None,
        });
    }
    Ok(parts)
}

/// The runs a table was built from.
fn run_ids(records: &[crate::store::compare::Record]) -> Vec<i64> {
    records.iter().map(|r| r.run_id).collect()
}

/// A `--baseline` that no table has as a column is an error naming the
/// columns there are.
fn check_baseline(spec: &ReportSpec, parts: &[MetricPart]) -> Result<(), ReportError> {
    let Some(baseline) = &spec.baseline else {
        return Ok(());
    };
    let mut names: Vec<Vec<String>> = parts.iter().flat_map(|p| p.table.cols.iter().cloned()).collect();
    names.sort_by(|a, b| super::compare::natural(a, b));
    names.dedup();
    let names: Vec<String> = names.iter().map(|c| col_label(c)).collect();
    if names.iter().any(|n| n == baseline) {
        return Ok(());
    }
    Err(ReportError::Baseline(format!(
        "--baseline {baseline}: no table has such a column; the columns are: {} (give --cols to choose them)",
        names.join(", ")
    )))
}

/// What the CPU chart holds: the cells of the throughput table it stands
/// beside (when it does), and whose cores its figures are, for its title.
struct CpuDrawn<'a> {
    cells: Option<&'a [String]>,
    note: Option<String>,
}

/// The CPU chart: both ends' CPU per cell of the tables (rows, then
/// columns), when some run carries it.
fn cpu_chart(
    store: &Store,
    filter: &Filter,
    spec: &ReportSpec,
    cols: &[Dimension],
    book: &CaseBook,
    drawn: CpuDrawn,
    ids: &mut std::ops::RangeFrom<usize>,
) -> Result<Option<Figure>, SelectError> {
    let CpuDrawn { cells, note } = drawn;
    let mut chart_spec = ChartSpec::new("cpu");
    chart_spec.group = spec.rows.iter().chain(cols).cloned().collect();
    chart_spec.stat = spec.stat;
    match data::build_in(store, filter, &chart_spec, Some(book)) {
        Ok(mut chart) => {
            // Beside the throughput bars, its own throughput panel would
            // say the same again in half the room.
            if let chart::Chart::Cpu(cpu) = &mut chart {
                for group in &mut cpu.groups {
                    group.throughput_bits_per_second = None;
                }
                if let Some(cells) = cells.filter(|c| cpu.groups.iter().any(|g| c.contains(&g.name))) {
                    cpu.groups.retain(|g| cells.contains(&g.name));
                }
                cpu.title = format!(
                    "CPU load of both ends by {} (mean of the runs, % of all cores{})",
                    cpu.group_key,
                    note.map(|n| format!("; {n}")).unwrap_or_default()
                );
            }
            Ok(Some(svg_of(chart, CPU_BESIDE, ids)?))
        }
        Err(SelectError::Chart(ChartError::Empty(_))) => Ok(None),
        Err(e) => Err(e),
    }
}

/// The charts of runs rather than of cells: those the workloads declare
/// ([`crate::workload::ChartViews::chart_kinds`]: sweep curves, latency
/// percentiles), the newest stream run's timeline, the charts of one run
/// for each of the newest runs of a workload that draws them (and, when
/// there are more, a sentence saying which are drawn), the newest meshes.
fn charts_of_runs(
    store: &Store,
    filter: &Filter,
    spec: &ReportSpec,
    book: &CaseBook,
    ids: &mut std::ops::RangeFrom<usize>,
) -> Result<(Vec<Figure>, Vec<String>), SelectError> {
    let mut charts = Vec::new();
    let kinds = crate::workload::chart_kinds()
        .filter(|(_, k)| !k.data.is_per_run())
        .map(|(_, k)| k.name)
        .chain(["timeline"]);
    let mut seen = BTreeSet::new();
    for kind in kinds.filter(|k| seen.insert(*k)) {
        let mut chart_spec = ChartSpec::new(kind);
        chart_spec.group = spec.rows.clone();
        chart_spec.series = spec.cols.clone();
        chart_spec.stat = spec.stat;
        match data::build_in(store, filter, &chart_spec, Some(book)) {
            Ok(chart::Chart::SizeCurve(sweep)) if sweep.lines.len() > MAX_SWEEP_LINES => {
                match sweeps_per_column(store, filter, spec, &chart_spec, book)? {
                    Some(per_column) => {
                        for chart in per_column {
                            charts.push(svg_of(chart, SIZE, ids)?);
                        }
                    }
                    None => charts.push(svg_of(chart::Chart::SizeCurve(sweep), SIZE, ids)?),
                }
            }
            Ok(chart) => charts.push(svg_of(chart, SIZE, ids)?),
            // A kind without runs to draw is left out of the report.
            Err(SelectError::Chart(ChartError::Empty(_))) => {}
            Err(e) => return Err(e),
        }
    }
    // The workloads' charts of one run: the newest few, and which when more.
    let (per_run, notes) = chart::data::per_run_charts(store, filter, book, MAX_PER_RUN)?;
    for chart in per_run {
        let size = match &chart {
            chart::Chart::OfRun(c) => c.size_on_page(SIZE),
            _ => SIZE,
        };
        charts.push(svg_of(chart, size, ids)?);
    }
    for mesh in crate::mesh::stored::meshes(store, filter)?.iter().take(MAX_HEATMAPS) {
        charts.push(svg_of(chart::Chart::Heatmap(chart::Heatmap::of(mesh)), SIZE, ids)?);
    }
    Ok((charts, notes))
}

/// Most lines one sweep chart draws before the report draws one chart per
/// value of its column (a card) instead: past that the legend outgrows the
/// plot and colours repeat.
const MAX_SWEEP_LINES: usize = 6;

/// One sweep chart per value of the report's column when that is one tag
/// (`--cols tag:agent`: a chart per card, a line per MTU), each titled by
/// its value; None when the columns are not one tag, or give one value.
fn sweeps_per_column(
    store: &Store,
    filter: &Filter,
    spec: &ReportSpec,
    chart_spec: &ChartSpec,
    book: &CaseBook,
) -> Result<Option<Vec<chart::Chart>>, SelectError> {
    let [Dimension::Tag(key)] = spec.cols.as_slice() else {
        return Ok(None);
    };
    // The column's values among the runs of the workload that declares the
    // chart, read by its headline figure.
    let Some((workload, _)) = crate::workload::chart_kinds().find(|(_, k)| k.name == chart_spec.kind) else {
        return Ok(None);
    };
    let headline = crate::store::compare::Metric::of(&crate::workload::results_of(workload).headline());
    let mut runs = filter.clone();
    runs.workload = Some(workload.into());
    let found = crate::store::compare::records_in(store, &runs, &[], &spec.cols, &headline, book)?;
    let mut values: Vec<String> = found.records.iter().filter_map(|r| r.col.first().cloned()).collect();
    values.sort_by(|a, b| super::compare::natural_text(a, b));
    values.dedup();
    if values.len() < 2 {
        return Ok(None);
    }
    let mut charts = Vec::new();
    for value in values {
        let mut one = filter.clone();
        one.tags.push(crate::store::Tag {
            key: key.clone(),
            value: value.clone(),
        });
        match data::build_in(store, &one, chart_spec, Some(book)) {
            Ok(chart::Chart::SizeCurve(mut sweep)) => {
                sweep.title = format!("{}: {value}", sweep.title);
                charts.push(chart::Chart::SizeCurve(sweep));
            }
            Ok(other) => charts.push(other),
            Err(SelectError::Chart(ChartError::Empty(_))) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(Some(charts))
}

/// Runs of one workload drawn one at a time in one report (latency under
/// load: two charts each): the newest.
const MAX_PER_RUN: usize = 3;

/// Heat maps in one report: the newest mesh runs.
const MAX_HEATMAPS: usize = 4;

/// A chart with its caption; `number` counts the page's figures.
fn write_figure(out: &mut String, (chart, svg): &Figure, number: &mut usize) {
    *number += 1;
    let _ = writeln!(
        out,
        "<figure id=\"chart-{number}\">{svg}<figcaption>Figure {number}: {}</figcaption></figure>",
        escape(&chart.description())
    );
}

/// The fan-out tests' section: each test's chart of its receivers with
/// their table under it; none without such a test.
fn write_group_tests(out: &mut String, tests: &[Figure], note: Option<&str>, number: &mut usize) {
    if tests.is_empty() {
        return;
    }
    out.push_str(
        "<section id=\"receivers\"><h2>Receivers of group tests</h2><p>Each group test's receivers side by side: \
         the rate each received, its loss over its bar, the slowest in red, the sender's rate as a line.</p>\n",
    );
    for figure in tests {
        write_figure(out, figure, number);
        if let (chart::Chart::Receivers(test), _) = figure {
            super::receivers::write_table(out, test);
        }
    }
    if let Some(note) = note {
        let _ = writeln!(out, "<p class=\"meta\">{}</p>", escape(note));
    }
    out.push_str("</section>\n");
}

/// A metric's table with its bar chart beside it (and, for throughput,
/// the CPU chart beside the bars, the table over both).
fn write_part(out: &mut String, part: &MetricPart, baseline: Option<&str>, number: &mut usize) {
    // A table wider than half the page at 1280 px takes the whole width,
    // its chart under it, rather than scrolling sideways.
    let wide = match (part.cpu.is_some(), table_px(&part.table, baseline) > HALF_PAGE_PX) {
        (true, _) => " with-cpu",
        (false, true) => " wide",
        (false, false) => "",
    };
    let _ = write!(
        out,
        "<section class=\"metric{wide}\" data-metric=\"{}\">",
        escape(&part.table.metric)
    );
    write_table(out, &part.table, baseline);
    for figure in [&part.bars, &part.cpu].into_iter().flatten() {
        write_figure(out, figure, number);
    }
    out.push_str("</section>\n");
}

/// The room of one half of the page at 1280 px (the body's width less its
/// margins and the gap, halved).
const HALF_PAGE_PX: usize = 580;

/// About how wide a table is drawn: each column's widest text at the
/// table's font (0.9rem, about 7.5 px a character) and its padding, the
/// ratio columns of a baseline included.
fn table_px(table: &Table, baseline: Option<&str>) -> usize {
    let (header, body) = table.grid();
    let widest = |i: usize| {
        let head = header.get(i).map_or(0, |h| h.chars().count());
        body.iter()
            .filter_map(|line| line.get(i))
            .map(|c| c.chars().count())
            .fold(head, usize::max)
    };
    let ratios = baseline.map_or(0, |b| table.cols.len().saturating_sub(1) * (b.len() + 12));
    (0..header.len()).map(|i| widest(i) * 15 / 2 + 17).sum::<usize>() + ratios * 15 / 2
}

/// Each column's cells over the baseline column's of the same row: the
/// header and the cells (`1.23x`, or `-` without both figures) of one
/// ratio column per other column; none when the table lacks the baseline.
fn ratio_columns(table: &Table, baseline: &str) -> Option<(Vec<String>, Vec<Vec<String>>)> {
    let base = table.cols.iter().find(|c| col_label(c) == baseline)?;
    let value = |row: &Vec<String>, col: &Vec<String>| {
        table
            .cells
            .iter()
            .find(|c| &c.row == row && &c.col == col)
            .map(|c| c.value)
    };
    let others: Vec<&Vec<String>> = table.cols.iter().filter(|c| *c != base).collect();
    let header = others
        .iter()
        .map(|c| format!("{} vs {baseline}", col_label(c)))
        .collect();
    let body = table
        .rows
        .iter()
        .map(|row| {
            others
                .iter()
                .map(|col| match (value(row, col), value(row, base)) {
                    (Some(v), Some(b)) if b != 0.0 => format!("{:.2}x", v / b),
                    _ => "-".into(),
                })
                .collect()
        })
        .collect();
    Some((header, body))
}

fn write_table(out: &mut String, table: &Table, baseline: Option<&str>) {
    let (mut header, mut body) = table.grid();
    let mut caption = table.title();
    match baseline.map(|b| (b, ratio_columns(table, b))) {
        Some((b, Some((ratio_header, ratio_body)))) => {
            caption += &format!("; baseline {b}: the \"vs\" columns are each column's figure over {b}'s");
            header.extend(ratio_header);
            for (line, ratios) in body.iter_mut().zip(ratio_body) {
                line.extend(ratios);
            }
        }
        Some((b, None)) => caption += &format!("; no ratios: no run of baseline {b} has this figure"),
        None => {}
    }
    let keys = table.row_keys.len();
    let _ = write!(
        out,
        "<div class=\"scroll\"><table class=\"sortable compare\" data-metric=\"{}\"><caption>{}</caption><thead><tr>",
        escape(&table.metric),
        escape(&caption)
    );
    for h in &header {
        let _ = write!(out, "<th scope=\"col\">{}</th>", escape(h));
    }
    out.push_str("</tr></thead><tbody>");
    for line in &body {
        out.push_str("<tr>");
        for (i, cell) in line.iter().enumerate() {
            if i < keys {
                let _ = write!(out, "<th scope=\"row\">{}</th>", escape(cell));
            } else {
                let _ = write!(out, "<td class=\"num\">{}</td>", escape(cell));
            }
        }
        out.push_str("</tr>");
    }
    out.push_str("</tbody></table></div>\n");
    for note in table.notes() {
        let _ = writeln!(out, "<p class=\"note\">{}</p>", escape(&note));
    }
}

/// Most runs the Runs table and the Reproduce section list (the newest):
/// past that a page is too long to read and slow to open; the comparison
/// tables and charts still cover every run.
pub const MAX_LISTED_RUNS: usize = 500;

/// The line under a list cut at [`MAX_LISTED_RUNS`], saying how many runs
/// it leaves out and how to see them.
fn left_out(out: &mut String, runs: &[RunView]) {
    if runs.len() > MAX_LISTED_RUNS {
        let _ = writeln!(
            out,
            "<p class=\"left-out\">The newest {MAX_LISTED_RUNS} of {} runs are listed; {} older run(s) are left out \
             (the tables and charts above count them): narrow the report with <code>--tag KEY=VALUE</code>, \
             <code>--workload</code>, <code>--host</code> or <code>--since</code>, or list them with <code>nicbench runs</code>.</p>",
            runs.len(),
            runs.len() - MAX_LISTED_RUNS
        );
    }
}

fn write_runs(out: &mut String, runs: &[RunView], reread: &[super::runs::Reread]) {
    let caption = if runs.len() > MAX_LISTED_RUNS {
        "The newest runs: result, share of the line rate, verdict"
    } else {
        "Every run, newest first: result, share of the line rate, verdict"
    };
    let _ = writeln!(
        out,
        "<section id=\"runs\"><h2>Runs</h2><p>Click a column header to sort.</p><div class=\"scroll\">\
         <table class=\"sortable runs\"><caption>{caption}</caption><thead><tr>\
         <th scope=\"col\">id</th><th scope=\"col\">started (UTC)</th><th scope=\"col\">workload</th>\
         <th scope=\"col\">hosts</th><th scope=\"col\">tags</th><th scope=\"col\">result</th>\
         <th scope=\"col\">line rate</th><th scope=\"col\">verdict</th></tr></thead><tbody>",
    );
    for r in runs.iter().take(MAX_LISTED_RUNS) {
        let s = &r.summary;
        let result = match (s.headline_value, &s.headline_unit) {
            (Some(v), Some(unit)) => (format!("{v}"), escape(&super::runs::figure(v, unit))),
            _ => (String::new(), "-".to_string()),
        };
        // Markup of our own around a figure read again from its document.
        let result = match (reread.iter().find(|r| r.id == s.id), &s.headline_unit) {
            (Some(r), Some(unit)) => (
                result.0,
                format!(
                    "<span class=\"above\" title=\"{}\">{} *</span>",
                    escape(&super::runs::reread_note(r, unit)),
                    result.1
                ),
            ),
            _ => result,
        };
        let state = if s.complete {
            String::new()
        } else {
            format!(" ({})", super::runs::state(s))
        };
        // Above 100%: a shaper's burst (a sweep's fastest batch) or a link
        // speed that is not the path's; marked, never shown as if it fit.
        let rate = r
            .line_rate_percent
            .map(|p| {
                let shown = if p > 100.0 {
                    format!(
                        "<span class=\"above\" title=\"above the line rate: a shaper's burst (a sweep's fastest batch \
                         starts with the token bucket full), or a link speed that is not the path's\">{p:.1}% ▲</span>"
                    )
                } else {
                    format!("{p:.1}%")
                };
                (format!("{p}"), shown)
            })
            .unwrap_or_else(|| (String::new(), "-".into()));
        let tags: Vec<String> = s.tags.iter().map(|t| t.to_string()).collect();
        let verdict = match (&s.verdict_kind, &r.verdict) {
            (Some(kind), Some(text)) => format!("<span class=\"verdict\">{}</span>: {}", escape(kind), escape(text)),
            (Some(kind), None) => escape(kind),
            _ => "-".into(),
        };
        let _ = writeln!(
            out,
            "<tr><td class=\"num\" data-v=\"{id}\"><a href=\"#run-{id}\">{id}</a></td><td data-v=\"{}\">{}</td><td>{}</td><td>{}</td><td>{}</td>\
             <td class=\"num\" data-v=\"{}\">{}</td><td class=\"num\" data-v=\"{}\">{}</td><td>{verdict}{}</td></tr>",
            s.started_at_unix_seconds,
            started(s.started_at_unix_seconds),
            escape(&if s.source == "nicbench" {
                s.workload.clone()
            } else {
                format!("{} ({})", s.workload, s.source)
            }),
            escape(&super::runs::hosts(s)),
            escape(&tags.join(" ")),
            result.0,
            result.1,
            rate.0,
            // Markup of our own around a number.
            rate.1,
            escape(&state),
            id = s.id,
        );
    }
    out.push_str("</tbody></table></div>\n");
    left_out(out, runs);
    out.push_str("</section>\n");
}

fn write_reproduce(out: &mut String, runs: &[RunView]) {
    out.push_str(
        "<section id=\"reproduce\"><h2>Reproduce</h2><p>The exact command of each run, as it was typed.</p>\n",
    );
    for r in runs.iter().take(MAX_LISTED_RUNS) {
        let s = &r.summary;
        let _ = writeln!(
            out,
            "<details id=\"run-{}\"><summary>run {} · {} · {}</summary><pre><code>{}</code></pre>{}</details>",
            s.id,
            s.id,
            escape(&s.workload),
            started(s.started_at_unix_seconds),
            escape(&r.command_line),
            r.verdict
                .as_ref()
                .map(|v| format!("<p>Verdict: {}</p>", escape(v)))
                .unwrap_or_default()
        );
    }
    left_out(out, runs);
    out.push_str("</section>\n");
}

/// Writes the report to `path` (through a temporary file beside it, so a
/// reader never sees half a report).
pub fn write_file(
    store: &Store,
    filter: &Filter,
    spec: &ReportSpec,
    path: &std::path::Path,
) -> Result<Written, ReportError> {
    let mut page = String::with_capacity(256 * 1024);
    let written = write(store, filter, spec, &mut page)?;
    let tmp = path.with_extension("html.tmp");
    std::fs::write(&tmp, page.as_bytes())
        .and_then(|_| std::fs::rename(&tmp, path))
        .map_err(|source| ReportError::Write {
            path: path.to_path_buf(),
            source,
        })?;
    Ok(written)
}

/// Why no report was written.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error(transparent)]
    Select(#[from] SelectError),
    /// `--baseline` names a column no table has.
    #[error("{0}")]
    Baseline(String),
    #[error("cannot write the report {path}: {source}")]
    Write {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
}

impl From<StoreError> for ReportError {
    fn from(e: StoreError) -> Self {
        ReportError::Select(e.into())
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn a_host_is_listed_once_with_every_value_a_fact_took() {
        let facts = |mtu: &str| {
            vec![
                ("kernel".to_string(), "6.18".to_string()),
                ("interface".to_string(), format!("eth0, MTU {mtu} B")),
            ]
        };
        let mut book = HostBook::default();
        book.add("seeds-b", "agent of run 1".into(), facts("1500"));
        book.add("seeds-b", "agent of run 2".into(), facts("9000"));
        book.add("seeds-b", "agent of run 3".into(), facts("1500"));
        book.add("seeds-a", "client of run 1".into(), facts("1500"));
        // Two imports without a host name are two hosts unless their facts agree.
        book.add("", "agent of run 4".into(), facts("1500"));
        book.add("", "agent of run 5".into(), facts("9000"));
        assert_eq!(book.0.len(), 4);
        let b = &book.0[0];
        assert_eq!(b.lines[1].1, ["eth0, MTU 1500 B", "eth0, MTU 9000 B"]);
        assert_eq!(b.lines[0].1, ["6.18"]);
        assert_eq!(b.caption(), "seeds-b (agent of run 1); differs between runs: interface");
        assert_eq!(book.0[1].caption(), "seeds-a (client of run 1)");
    }
    use super::*;

    fn run(id: i64) -> RunView {
        RunView {
            summary: RunSummary {
                id,
                started_at_unix_seconds: 1.7e9 + id as f64,
                workload: "tcp".into(),
                client_host: Some("a".into()),
                agent_host: Some("b".into()),
                agent_address: None,
                headline_unit: Some("bit/s".into()),
                headline_value: Some(1e9),
                verdict_kind: None,
                trials_planned: Some(1),
                trials_saved: 1,
                complete: true,
                source: "nicbench".into(),
                tags: Vec::new(),
                listed: Vec::new(),
            },
            command_line: format!("nicbench tcp b # {id}"),
            verdict: None,
            line_rate_percent: None,
        }
    }

    fn spec() -> ReportSpec {
        ReportSpec {
            title: "MTU <roundup>".into(),
            source: "/tmp/runs.db".into(),
            filters_text: String::new(),
            rows: Vec::new(),
            cols: Vec::new(),
            stat: Stat::Median,
            baseline: None,
            plan_cells: Vec::new(),
            lead: None,
            roundups: Vec::new(),
        }
    }

    /// The page is laid out from plain data: one built in memory, with no
    /// store, shows each of its parts once, in the page's order (the
    /// plan's tables, the one-figure tables and their bars, the curves and
    /// the note on them, the runs, the hosts, the commands), escapes what
    /// it quotes, and counts what it wrote.
    #[test]
    fn a_page_built_without_a_store_renders_each_part_in_order() {
        use crate::store::cases::Case;
        use crate::store::compare::{Metric, Record};
        let metric = Metric::parse("throughput").unwrap();
        let record = |run_id: i64, col: &str, value: f64| Record {
            run_id,
            row: vec!["tcp".into()],
            col: vec![col.into()],
            value,
            case: Case {
                key: "mtu=".to_string() + col,
                label: "TCP".into(),
                parts: Vec::new(),
            },
            trials: vec![value],
            rule: None,
            pick: None,
        };
        let records = [record(1, "1500", 9.41e9), record(2, "9000", 9.89e9)];
        let keys = |k: &str| vec![k.to_string()];
        let table = Table::build(&records, &metric, Stat::Median, keys("workload"), keys("mtu"), None).unwrap();
        let mut ids = 0..;
        let mut bars = || {
            let bars = data::bars_of_table(&table, &records, metric.label, Stat::Median);
            svg_of(chart::Chart::Bars(bars), SIZE, &mut ids).unwrap()
        };
        let (with_table, curve) = (bars(), bars());
        let mut hosts = HostBook::default();
        hosts.add(
            "b<script>",
            "agent of run 2".into(),
            vec![("kernel".into(), "6.18".into())],
        );
        let page = Page {
            runs: vec![run(2), run(1)],
            hosts,
            parts: vec![MetricPart {
                table: table.clone(),
                bars: Some(with_table),
                cpu: None,
            }],
            charts: vec![curve],
            per_run_notes: vec!["Drawn for the newest 1 of 2 runs & no more.".into()],
            group_tests: Vec::new(),
            group_tests_note: None,
            roundups: vec![
                RoundupPart::Table(super::super::roundup::Roundup::new(vec![table]), Some("By MTU".into())),
                RoundupPart::Missing(Some("CPU <per> byte".into())),
            ],
            reread: Vec::new(),
        };
        let mut out = String::new();
        let written = render(&page, &spec(), &mut out);
        assert_eq!(
            written,
            Written {
                runs: 2,
                charts: 2,
                tables: 1
            }
        );
        let order = [
            "<title>MTU &lt;roundup&gt;</title>",
            "<section id=\"roundup\">",
            "By MTU",
            "CPU &lt;per&gt; byte: no complete run has these figures.",
            "<section id=\"tables\">",
            "9000",
            "<section id=\"charts\">",
            "Drawn for the newest 1 of 2 runs &amp; no more.",
            "<section id=\"runs\">",
            "<section id=\"facts\">",
            "b&lt;script&gt; (agent of run 2)",
            "<section id=\"reproduce\">",
            "nicbench tcp b # 1",
        ];
        let mut from = 0;
        for part in order {
            let at = out[from..]
                .find(part)
                .unwrap_or_else(|| panic!("{part:?} missing after byte {from}"));
            from += at + part.len();
        }
        assert_eq!(out.matches("<figure").count(), 2, "the table's bars and the curve");
        assert!(!out.contains("b<script>"), "a host name is escaped");
    }

    /// Past MAX_LISTED_RUNS the Runs table and Reproduce list the newest
    /// runs and say how many are left out and how to see them; up to it,
    /// every run and no such line.
    #[test]
    fn the_runs_lists_stop_at_the_newest_and_say_what_is_left_out() {
        let many: Vec<RunView> = (0..MAX_LISTED_RUNS as i64 + 7).rev().map(run).collect();
        let mut page = String::new();
        write_runs(&mut page, &many, &[]);
        write_reproduce(&mut page, &many);
        assert_eq!(page.matches("<tr><td class=\"num\"").count(), MAX_LISTED_RUNS);
        assert_eq!(page.matches("<details id=").count(), MAX_LISTED_RUNS);
        let newest = format!("id=\"run-{}\"", MAX_LISTED_RUNS + 6);
        assert!(page.contains(&newest));
        assert!(!page.contains("id=\"run-6\""), "the oldest runs are left out");
        assert_eq!(page.matches("7 older run(s) are left out").count(), 2);
        assert!(page.contains("--tag KEY=VALUE"));

        let few: Vec<RunView> = (0..3).rev().map(run).collect();
        let mut page = String::new();
        write_runs(&mut page, &few, &[]);
        write_reproduce(&mut page, &few);
        assert_eq!(page.matches("<details id=").count(), 3);
        assert!(page.contains("Every run, newest first"));
        assert!(!page.contains("left out"));
    }
}
