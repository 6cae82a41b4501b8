//! A table of figures as the reports write it, one writer per format: a
//! title, a header, rows whose first columns are keys (left-aligned in
//! text, `---` in Markdown) and whose others are figures (right-aligned,
//! `---:`), and notes under it. `compare`'s table and the roundup of
//! several figures build a [`Grid`] and hand it here; their CSV is the
//! `csv_out` writer's, one line per cell.

use std::io::{self, Write};

use crate::outside_text::{self, terminal};

/// What a table shows, as text cells.
pub struct Grid {
    pub title: String,
    pub header: Vec<String>,
    pub body: Vec<Vec<String>>,
    /// How many leading columns are keys.
    pub keys: usize,
    pub notes: Vec<String>,
}

impl Grid {
    /// Aligned text: keys left, figures right, notes under it. Cells come
    /// from outside (tags, names) and are shown through
    /// `outside_text::terminal`.
    pub fn text(&self, out: &mut dyn Write) -> io::Result<()> {
        writeln!(out, "{}", terminal(&self.title))?;
        let shown = |line: &Vec<String>| -> Vec<String> { line.iter().map(|c| terminal(c).into_owned()).collect() };
        let lines: Vec<Vec<String>> = std::iter::once(&self.header).chain(&self.body).map(shown).collect();
        let mut widths = vec![0; self.header.len()];
        for line in &lines {
            for (w, cell) in widths.iter_mut().zip(line) {
                *w = (*w).max(cell.chars().count());
            }
        }
        for line in &lines {
            let cells: Vec<String> = line
                .iter()
                .enumerate()
                .map(|(i, c)| match i < self.keys {
                    true => format!("{c:<w$}", w = widths[i]),
                    false => format!("{c:>w$}", w = widths[i]),
                })
                .collect();
            writeln!(out, "{}", cells.join("  ").trim_end())?;
        }
        for note in &self.notes {
            writeln!(out, "{}", terminal(note))?;
        }
        Ok(())
    }

    /// A Markdown table under the title, its cells escaped
    /// (`outside_text::markdown`), the notes after it.
    pub fn markdown(&self, out: &mut dyn Write) -> io::Result<()> {
        writeln!(out, "{}\n", terminal(&self.title))?;
        let escape = |s: &String| outside_text::markdown(s).into_owned();
        let row = |line: &Vec<String>| line.iter().map(escape).collect::<Vec<_>>().join(" | ");
        writeln!(out, "| {} |", row(&self.header))?;
        let align: Vec<&str> = (0..self.header.len())
            .map(|i| if i < self.keys { "---" } else { "---:" })
            .collect();
        writeln!(out, "| {} |", align.join(" | "))?;
        for line in &self.body {
            writeln!(out, "| {} |", row(line))?;
        }
        for note in &self.notes {
            writeln!(out, "\n{}", escape(note))?;
        }
        Ok(())
    }
}
