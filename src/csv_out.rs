//! Every CSV nicbench writes goes through [`Csv`], so one quoting rule and
//! one guard hold for all of them.
//!
//! - **Quoting** is the `csv` crate's (RFC 4180): a cell is quoted when it
//!   holds a comma, a double quote, `\r` or `\n`, and a quote inside it is
//!   doubled. Records end in `\n`.
//! - **Formulas:** a spreadsheet runs a cell that starts with `=`, `+`,
//!   `-`, `@`, a tab or a carriage return as a formula, so a tag, a host
//!   name or an error text could run there. Such a text cell gets a single
//!   quote in front (`'=1+2`), which spreadsheets show and do not run. A
//!   number (`-3`, `+1.5e3`) stays as it is: it is not a formula.
//! - **Controls:** a cell is text from outside as often as not (a peer's
//!   host name, an imported string), and a CSV is read in a terminal too:
//!   control characters other than line breaks and tabs, and bidi
//!   overrides, are shown escaped (`\x1b`, `\u{202e}`), as
//!   [`crate::outside_text::csv_field`] says.
//!
//! This module sits on the lowest floor and imports only `outside_text`
//! (on the same floor), so every layer that writes CSV may use it.

use std::borrow::Cow;
use std::io::{self, Write};

/// A CSV writer: one record per [`Csv::row`], every cell made safe by
/// [`cell`]. Every record must have as many cells as the first one.
pub struct Csv<W: Write> {
    out: csv::Writer<W>,
}

impl<W: Write> Csv<W> {
    pub fn new(out: W) -> Csv<W> {
        Csv {
            out: csv::WriterBuilder::new().from_writer(out),
        }
    }

    /// Writes one record.
    pub fn row<I>(&mut self, cells: I) -> io::Result<()>
    where
        I: IntoIterator,
        I::Item: AsRef<str>,
    {
        self.out
            .write_record(cells.into_iter().map(|c| cell(c.as_ref()).into_owned()))
            .map_err(io_error)
    }

    /// Writes what is still buffered. Call it last: dropping the writer
    /// also flushes, but loses the error (a closed pipe, a full disk).
    pub fn finish(mut self) -> io::Result<()> {
        self.out.flush()
    }
}

/// The csv crate's error as the io error it wraps, so a closed pipe stays
/// a closed pipe (`nicbench export --format csv | head` ends quietly).
fn io_error(e: csv::Error) -> io::Error {
    if !e.is_io_error() {
        return io::Error::other(e);
    }
    match e.into_kind() {
        csv::ErrorKind::Io(e) => e,
        other => io::Error::other(format!("{other:?}")),
    }
}

impl Csv<Vec<u8>> {
    /// The records written, as text.
    pub fn into_string(self) -> String {
        let bytes = self.out.into_inner().expect("writing to memory does not fail");
        String::from_utf8(bytes).expect("every cell was a str")
    }
}

/// A cell as written: controls shown escaped, then a text a spreadsheet
/// would run as a formula gets a leading `'`; anything else, numbers
/// included, is unchanged.
pub fn cell(text: &str) -> Cow<'_, str> {
    let shown = crate::outside_text::csv_field(text);
    let formula = shown.starts_with(['=', '+', '-', '@', '\t', '\r']);
    if formula && shown.parse::<f64>().is_err() {
        Cow::Owned(format!("'{shown}"))
    } else {
        shown
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn written(rows: &[&[&str]]) -> String {
        let mut csv = Csv::new(Vec::new());
        for row in rows {
            csv.row(row.iter()).unwrap();
        }
        csv.into_string()
    }

    fn read_back(text: &str) -> Vec<Vec<String>> {
        csv::ReaderBuilder::new()
            .has_headers(false)
            .from_reader(text.as_bytes())
            .records()
            .map(|r| r.unwrap().iter().map(String::from).collect())
            .collect()
    }

    #[test]
    fn commas_quotes_and_line_breaks_round_trip_through_a_reader() {
        let tricky = ["a,b", "say \"hi\"", "two\r\nlines", "cr\ronly", "plain", ""];
        let text = written(&[&["h1", "h2", "h3", "h4", "h5", "h6"], &tricky]);
        assert_eq!(
            text,
            "h1,h2,h3,h4,h5,h6\n\"a,b\",\"say \"\"hi\"\"\",\"two\r\nlines\",\"cr\ronly\",plain,\n"
        );
        assert_eq!(read_back(&text)[1], tricky);
    }

    #[test]
    fn a_formula_is_neutralised_and_a_negative_number_is_not() {
        let cells = [
            "=1+2",
            "-2+3+cmd|' /C calc'!A0",
            "@SUM(A1)",
            "+x",
            "\tx",
            "-3",
            "-1.5e-3",
            "+7",
            "3",
        ];
        let text = written(&[&cells]);
        let back = &read_back(&text)[0];
        assert_eq!(
            back,
            &[
                "'=1+2",
                "'-2+3+cmd|' /C calc'!A0",
                "'@SUM(A1)",
                "'+x",
                "'\tx",
                "-3",
                "-1.5e-3",
                "+7",
                "3"
            ]
        );
    }

    #[test]
    fn a_leading_carriage_return_is_neutralised_and_quoted() {
        assert_eq!(written(&[&["\rx", "y"]]), "\"'\rx\",y\n");
    }

    #[test]
    fn controls_and_bidi_overrides_from_a_peer_are_shown_escaped() {
        let host = "evil\u{1b}]0;x\u{7}\u{202e}txt";
        let text = written(&[&[host, "=\u{1b}[2J"]]);
        assert!(!text.contains(['\u{1b}', '\u{7}', '\u{202e}']), "{text:?}");
        assert_eq!(read_back(&text)[0], [r"evil\x1b]0;x\x07\u{202e}txt", r"'=\x1b[2J"]);
    }

    #[test]
    fn rows_of_another_width_are_an_error() {
        let mut csv = Csv::new(Vec::new());
        csv.row(["a", "b"]).unwrap();
        assert!(csv.row(["c"]).is_err());
    }
}
