//! A mesh's matrix in each format through the report's writers, as
//! `compare` and the roundup use them: text and Markdown as a [`Grid`]
//! (senders down, receivers across), CSV with `csv_out`, one line per
//! ordered pair. The JSON is the document itself (`cmd::mesh`).

use crate::csv_out::Csv;
use crate::mesh::matrix::{shade, Cell, MeshResult};
use crate::mesh::outliers::{self, Better};
use crate::outside_text::terminal;

use super::grid::Grid;

/// The header's first cell: what the rows and columns are.
const CORNER: &str = "sender \\ receiver";

/// The matrix's cells, one row per sender: `number` writes a figure,
/// `same` is the diagonal, `down` a pair left out because a host was.
fn grid(m: &MeshResult, title: String, name: &dyn Fn(&str) -> String, cell: &dyn Fn(usize, usize) -> String) -> Grid {
    let n = m.hosts.len();
    let mut header = vec![CORNER.to_string()];
    header.extend(m.hosts.iter().map(|h| h.name.clone()));
    let body = (0..n)
        .map(|i| {
            let mut row = vec![name(&m.hosts[i].name)];
            row.extend((0..n).map(|j| cell(i, j)));
            row
        })
        .collect();
    Grid {
        title,
        header,
        body,
        keys: 1,
        notes: Vec::new(),
    }
}

/// The matrix as text: senders down, receivers across, each figure with
/// a shade for its share of the best, failures as `fail`, then the
/// legend, the failures and the outliers.
pub fn text(m: &MeshResult) -> String {
    let heading = format!(
        "Mesh '{}' run {}: {} over {} hosts, {} ({}), {} rounds in {:.1} s",
        m.mesh,
        m.mesh_run,
        m.workload,
        m.hosts.len(),
        m.unit_header(),
        match m.better() {
            Better::Higher => "higher is better",
            Better::Lower => "lower is better",
        },
        m.rounds,
        m.wall_seconds
    );
    let cell = |i: usize, j: usize| match m.cell(i, j) {
        _ if i == j => "-".to_string(),
        Some(Cell { value: Some(v), .. }) => format!("{} {}", m.number(*v), shade(m.share(*v))),
        Some(_) => "fail".to_string(),
        None if m.hosts[i].status != "ok" || m.hosts[j].status != "ok" => "down".to_string(),
        None => String::new(),
    };
    // An empty title is the blank line under the heading.
    let mut table = Vec::new();
    grid(m, String::new(), &|name| name.to_string(), &cell)
        .text(&mut table)
        .expect("writing to memory does not fail");
    let mut out = format!("{}\n{}", terminal(&heading), String::from_utf8_lossy(&table));
    out += &format!(
        "\nshade: share of the best cell ({}): █ 90% or more, ▓ 70%, ▒ 50%, ░ 25%, · below\n",
        m.best().map(|b| m.show(b)).unwrap_or_else(|| "none".into())
    );
    for h in m.hosts.iter().filter(|h| h.status != "ok") {
        out += &format!(
            "{} ({}) {}: {}\n",
            terminal(&h.name),
            terminal(&h.address),
            h.status,
            terminal(h.reason.as_deref().unwrap_or(""))
        );
    }
    for c in m.cells.iter().filter(|c| c.value.is_none()) {
        out += &format!(
            "{}->{} failed: {}\n",
            terminal(&m.hosts[c.src].name),
            terminal(&m.hosts[c.dst].name),
            terminal(c.error.as_deref().unwrap_or("no figure"))
        );
    }
    if m.hosts.len() < outliers::MIN_HOSTS {
        out += &format!("outliers: need {} hosts or more\n", outliers::MIN_HOSTS);
    } else if m.outliers.is_empty() {
        out += "outliers: none (every cell within the spread of the others)\n";
    } else {
        out += "outliers:\n";
        for o in &m.outliers {
            out += &format!("  {}\n", terminal(&o.words));
        }
    }
    out
}

/// GitHub-flavoured Markdown: the matrix (senders in bold), then the
/// outliers.
pub fn markdown(m: &MeshResult) -> String {
    let cell = |i: usize, j: usize| match m.cell(i, j) {
        _ if i == j => "—".to_string(),
        Some(Cell { value: Some(v), .. }) => m.number(*v),
        Some(_) => "fail".to_string(),
        None => "down".to_string(),
    };
    let title = format!("{} — {} ({CORNER})", m.workload, m.unit_header());
    let mut grid = grid(m, title, &|name| format!("**{name}**"), &cell);
    if !m.outliers.is_empty() {
        grid.notes.push("Outliers:".into());
        grid.notes.extend(m.outliers.iter().map(|o| format!("- {}", o.words)));
    }
    let mut out = Vec::new();
    grid.markdown(&mut out).expect("writing to memory does not fail");
    String::from_utf8_lossy(&out).into_owned()
}

/// One line per ordered pair: src, dst, metric, value, unit, run_id,
/// round, verdict, error.
pub fn csv(m: &MeshResult) -> String {
    let mut csv = Csv::new(Vec::new());
    let header = [
        "src", "dst", "metric", "value", "unit", "run_id", "round", "verdict", "error",
    ];
    csv.row(header).expect("writing to memory does not fail");
    for c in &m.cells {
        csv.row([
            m.hosts[c.src].name.clone(),
            m.hosts[c.dst].name.clone(),
            m.metric.clone(),
            c.value.map(|v| format!("{v}")).unwrap_or_default(),
            m.unit.clone(),
            c.run_id.map(|v| v.to_string()).unwrap_or_default(),
            c.round.to_string(),
            c.verdict.clone().unwrap_or_default(),
            c.error.clone().unwrap_or_default(),
        ])
        .expect("writing to memory does not fail");
    }
    csv.into_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mesh::matrix::tests::mesh;

    #[test]
    fn text_shows_every_cell_with_its_shade_and_the_failures() {
        let m = mesh(&[
            &[None, Some(95e6), Some(94e6), Some(95e6)],
            &[Some(95e6), None, Some(50e6), Some(95e6)],
            &[Some(94e6), Some(95e6), None, None],
            &[Some(20e6), Some(95e6), Some(95e6), None],
        ]);
        let text = text(&m);
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].starts_with("Mesh 'lab' run r1: tcp over 4 hosts"), "{text}");
        assert!(lines[0].contains("receiver throughput, Mbit/s"), "{text}");
        assert_eq!(lines[1], "", "a blank line under the heading: {text}");
        assert!(
            lines[2].starts_with("sender \\ receiver") && lines[2].ends_with("h3"),
            "{text}"
        );
        assert!(text.contains("95.00 █"), "{text}");
        assert!(text.contains("50.00 ▒"), "{text}");
        assert!(text.contains("20.00 ·"), "{text}");
        assert!(text.contains("h2->h3 failed: the agent at x is busy"), "{text}");
        assert!(text.lines().any(|l| l.starts_with("h3 ") && !l.contains("fail")));
        // Figures right-aligned under their host, names left-aligned.
        let h0 = lines.iter().find(|l| l.starts_with("h0 ")).unwrap();
        assert_eq!(h0.chars().count(), lines[2].chars().count(), "{text}");
    }

    #[test]
    fn markdown_and_csv_carry_the_same_cells() {
        let m = mesh(&[&[None, Some(1e9)], &[Some(5e8), None]]);
        let md = markdown(&m);
        assert!(
            md.starts_with("tcp — receiver throughput, Mbit/s (sender \\ receiver)\n\n"),
            "{md}"
        );
        assert!(md.contains("| **h0** | — | 1000.00 |"), "{md}");
        assert!(md.contains("| **h1** | 500.00 | — |"), "{md}");
        assert!(md.contains("| --- | ---: | ---: |"), "{md}");
        let csv = csv(&m);
        assert_eq!(csv.lines().count(), 3, "{csv}");
        assert!(
            csv.contains("h1,h0,receiver_bits_per_second,500000000,bit/s,2,0,,"),
            "{csv}"
        );
    }

    /// A host's name is outside text: a `|` does not end its Markdown
    /// cell, and a control character reaches no terminal.
    #[test]
    fn hostile_names_neither_break_the_markdown_table_nor_reach_the_terminal() {
        let mut m = mesh(&[&[None, Some(1e9)], &[Some(5e8), None]]);
        m.hosts[0].name = "a|b\u{1b}[2J".into();
        let md = markdown(&m);
        assert!(md.contains("| **a\\|b\\x1b[2J** |"), "{md}");
        let text = text(&m);
        assert!(!text.contains('\u{1b}'), "{text}");
    }

    #[test]
    fn csv_quotes_line_breaks_and_carriage_returns_and_neutralises_formulas() {
        let mut m = mesh(&[&[None, Some(-1.5)], &[None, None]]);
        m.hosts[0].name = "rack 1, \"a\"".into();
        m.hosts[1].name = "=cmd".into();
        m.cells[1].error = Some("refused\r\nby b".into());
        let csv = csv(&m);
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
}
