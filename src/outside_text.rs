//! Text that came from outside nicbench (an agent's facts: host name, NIC
//! names, driver, kernel; imported documents; a peer's error messages and
//! version; stored command lines) made safe for each kind of output:
//!
//! - [`terminal`]: a control character (C0, DEL, C1) is shown escaped
//!   (`\x1b`, `\x07`, `\n`, `\u{9b}`), and so is a bidi override or
//!   isolate (U+202A-202E, U+2066-2069, shown as `\u{202e}`), so no byte a
//!   peer sends can move the cursor, retitle the terminal, ring its bell,
//!   break a line or turn the text around it right to left.
//!   [`terminal_text`] does the same for a whole rendered text and keeps
//!   its line breaks and tabs: the last guard of every text report.
//! - [`markdown`]: as [`terminal`], and `|` and `\` escaped, so a value
//!   stays in its table cell.
//! - [`xml`] (SVG and HTML): `& < > " '` as entities, characters XML 1.0
//!   forbids (C0 but tab, line feed and carriage return; U+FFFE, U+FFFF)
//!   dropped, bidi controls, DEL and C1 shown escaped as in [`terminal`].
//! - CSV: [`crate::csv_out`] writes every CSV; its cells get [`csv_field`]
//!   (as [`terminal`], but line breaks and tabs stay, the CSV quoting
//!   carries them) and then the formula guard.
//!
//! - JSON: [`write_json`] and [`write_json_pretty`] write every JSON
//!   nicbench prints; a string's DEL, C1 and bidi controls leave as
//!   `\uXXXX` escapes (JSON escapes C0 itself): a JSON reader gets the same
//!   data, a terminal no raw control.
//!
//! A string that holds none of these comes back borrowed, unchanged. This
//! module sits on the lowest floor and imports nothing from the crate, so
//! every layer that writes output may use it.

use std::borrow::Cow;
use std::fmt::Write as _;

/// A bidi override or isolate: U+202A-202E (LRE, RLE, PDF, LRO, RLO) and
/// U+2066-2069 (LRI, RLI, FSI, PDI).
pub fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// A character no output shows as it is: a control (C0, DEL, C1) or a
/// bidi control.
pub fn is_unsafe(c: char) -> bool {
    c.is_control() || is_bidi_control(c)
}

/// Appends how `c` reads escaped: `\n`, `\r`, `\t`, `\xNN` for the other
/// ASCII controls, `\u{NNNN}` beyond ASCII.
fn push_escaped(out: &mut String, c: char) {
    match c {
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        c if c.is_ascii() => {
            let _ = write!(out, "\\x{:02x}", c as u32);
        }
        c => {
            let _ = write!(out, "\\u{{{:x}}}", c as u32);
        }
    }
}

/// `text` with every character `escape` picks shown escaped.
fn escape_where(text: &str, escape: impl Fn(char) -> bool) -> Cow<'_, str> {
    if !text.chars().any(&escape) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if escape(c) {
            push_escaped(&mut out, c);
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// One value from outside, for a terminal or a text file: controls and
/// bidi controls shown escaped, a line break included.
pub fn terminal(text: &str) -> Cow<'_, str> {
    escape_where(text, is_unsafe)
}

/// A whole rendered text, for a terminal: as [`terminal`], but its line
/// breaks and tabs are kept.
pub fn terminal_text(text: &str) -> Cow<'_, str> {
    escape_where(text, |c| is_unsafe(c) && c != '\n' && c != '\t')
}

/// One cell's text as a CSV writer gets it: as [`terminal`], but line
/// breaks and tabs are kept (the CSV quoting carries them).
pub fn csv_field(text: &str) -> Cow<'_, str> {
    escape_where(text, |c| is_unsafe(c) && !matches!(c, '\n' | '\r' | '\t'))
}

/// One value for a Markdown table cell: as [`terminal`], and `|` and `\`
/// escaped (`\|`, `\\`), so neither ends the cell.
pub fn markdown(text: &str) -> Cow<'_, str> {
    if !text.chars().any(|c| is_unsafe(c) || c == '|' || c == '\\') {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '|' => out.push_str("\\|"),
            '\\' => out.push_str("\\\\"),
            c if is_unsafe(c) => push_escaped(&mut out, c),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// True for a character XML 1.0 does not allow in a document at all.
fn xml_forbidden(c: char) -> bool {
    (c < ' ' && !matches!(c, '\t' | '\n' | '\r')) || matches!(c, '\u{fffe}' | '\u{ffff}')
}

/// One value for SVG or HTML text or a quoted attribute: `& < > " '` as
/// entities, characters XML forbids dropped, bidi controls, DEL and C1
/// shown escaped.
pub fn xml(text: &str) -> Cow<'_, str> {
    let special = |c: char| matches!(c, '&' | '<' | '>' | '"' | '\'') || is_unsafe(c) || xml_forbidden(c);
    if !text.chars().any(special) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c if xml_forbidden(c) => {}
            '\t' | '\n' | '\r' => out.push(c),
            c if is_unsafe(c) => push_escaped(&mut out, c),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// A serde_json formatter (compact or pretty, `F`) that writes, besides
/// what JSON escapes itself (C0 controls, `"`, `\`), every other character
/// [`is_unsafe`] finds as a `\uXXXX` escape: DEL, C1 (`\u009b`, a CSI to
/// some terminals) and the bidi controls. All of them lie in the BMP, so
/// one escape each.
struct SafeJson<F>(F);

macro_rules! delegate {
    ($($name:ident($($arg:ident: $ty:ty),*);)*) => {
        $(fn $name<W: ?Sized + std::io::Write>(&mut self, writer: &mut W $(, $arg: $ty)*) -> std::io::Result<()> {
            self.0.$name(writer $(, $arg)*)
        })*
    };
}

impl<F: serde_json::ser::Formatter> serde_json::ser::Formatter for SafeJson<F> {
    fn write_string_fragment<W: ?Sized + std::io::Write>(
        &mut self,
        writer: &mut W,
        fragment: &str,
    ) -> std::io::Result<()> {
        let mut rest = fragment;
        while let Some((at, c)) = rest.char_indices().find(|&(_, c)| is_unsafe(c)) {
            writer.write_all(&rest.as_bytes()[..at])?;
            write!(writer, "\\u{:04x}", c as u32)?;
            rest = &rest[at + c.len_utf8()..];
        }
        writer.write_all(rest.as_bytes())
    }

    // What PrettyFormatter does of its own; CompactFormatter keeps the
    // trait's defaults, which it gets through these too.
    delegate! {
        begin_array();
        end_array();
        begin_array_value(first: bool);
        end_array_value();
        begin_object();
        end_object();
        begin_object_key(first: bool);
        begin_object_value();
        end_object_value();
    }
}

/// `value` as compact JSON on `writer`, through [`SafeJson`].
pub fn write_json<W: std::io::Write, T: ?Sized + serde::Serialize>(writer: W, value: &T) -> serde_json::Result<()> {
    let mut serializer = serde_json::Serializer::with_formatter(writer, SafeJson(serde_json::ser::CompactFormatter));
    value.serialize(&mut serializer)
}

/// `value` as indented JSON on `writer`, through [`SafeJson`].
pub fn write_json_pretty<W: std::io::Write, T: ?Sized + serde::Serialize>(
    writer: W,
    value: &T,
) -> serde_json::Result<()> {
    let formatter = SafeJson(serde_json::ser::PrettyFormatter::new());
    let mut serializer = serde_json::Serializer::with_formatter(writer, formatter);
    value.serialize(&mut serializer)
}

/// [`write_json_pretty`] into a string.
pub fn json_pretty<T: ?Sized + serde::Serialize>(value: &T) -> serde_json::Result<String> {
    let mut out = Vec::new();
    write_json_pretty(&mut out, value)?;
    // serde_json writes UTF-8 only.
    Ok(String::from_utf8(out).expect("JSON is UTF-8"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_escapes_every_control_and_bidi_character_and_reads_back_the_same() {
        let value = serde_json::json!({"host": HOSTILE, "del": "a\u{7f}b", "plain": "שרת"});
        for text in [json_pretty(&value).unwrap(), {
            let mut out = Vec::new();
            write_json(&mut out, &value).unwrap();
            String::from_utf8(out).unwrap()
        }] {
            assert!(!text.chars().any(|c| is_unsafe(c) && c != '\n'), "{text:?}");
            assert!(
                text.contains(r"\u001b]0;pwned\u0007\u202egpj.exe\nnext\u009b2J"),
                "{text}"
            );
            assert!(text.contains(r"a\u007fb") && text.contains("שרת"), "{text}");
            let back: serde_json::Value = serde_json::from_str(&text).unwrap();
            assert_eq!(back, value);
        }
        assert_eq!(
            json_pretty(&value).unwrap(),
            serde_json::to_string_pretty(&value)
                .unwrap()
                .replace('\u{202e}', "\\u202e")
                .replace('\u{9b}', "\\u009b")
                .replace('\u{7f}', "\\u007f"),
            "indented as serde_json indents"
        );
    }

    /// ESC ] 0 ; (retitle), BEL, RLO, a line break, CSI as one C1 byte.
    const HOSTILE: &str = "evil\u{1b}]0;pwned\u{7}\u{202e}gpj.exe\nnext\u{9b}2J";

    #[test]
    fn a_terminal_sees_every_control_and_bidi_character_escaped() {
        assert_eq!(terminal(HOSTILE), r"evil\x1b]0;pwned\x07\u{202e}gpj.exe\nnext\u{9b}2J");
        assert_eq!(terminal("a\tb\rc\u{7f}\u{2066}"), r"a\tb\rc\x7f\u{2066}");
        assert!(terminal(HOSTILE).chars().all(|c| !is_unsafe(c)));
    }

    #[test]
    fn plain_text_and_other_scripts_come_back_unchanged_and_borrowed() {
        for plain in [
            "vm-1.example.org",
            "Intel(R) Xeon(R) 8375C",
            "שרת",
            "サーバー",
            "a\\b",
            "",
        ] {
            assert!(matches!(terminal(plain), Cow::Borrowed(_)), "{plain}");
            assert!(matches!(xml(plain), Cow::Borrowed(_)), "{plain}");
        }
    }

    #[test]
    fn a_whole_text_keeps_its_lines_and_tabs() {
        assert_eq!(
            terminal_text("a\u{1b}[31m\n\tb\u{202e}\n"),
            "a\\x1b[31m\n\tb\\u{202e}\n"
        );
    }

    #[test]
    fn a_markdown_cell_cannot_be_left_by_a_pipe_a_backslash_or_a_line_break() {
        assert_eq!(markdown("a|b"), r"a\|b");
        // `a\|b` escaped only at the pipe would read `a\\|b`: an escaped
        // backslash, then a pipe that ends the cell.
        assert_eq!(markdown(r"a\|b"), r"a\\\|b");
        assert_eq!(markdown("one\ntwo\u{1b}"), r"one\ntwo\x1b");
        assert!(!markdown(HOSTILE).contains('\n'));
    }

    #[test]
    fn xml_drops_what_xml_forbids_escapes_markup_and_shows_bidi() {
        assert_eq!(xml(HOSTILE), "evil]0;pwned\\u{202e}gpj.exe\nnext\\u{9b}2J");
        assert_eq!(
            xml("<a href=\"x\">&'</a>"),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;&lt;/a&gt;"
        );
        assert_eq!(xml("a\u{0}\u{fffe}\u{ffff}b\tc"), "ab\tc");
    }

    #[test]
    fn a_csv_field_keeps_line_breaks_and_tabs_for_the_quoting() {
        assert_eq!(csv_field("a\r\n\tb\u{1b}\u{202e}"), "a\r\n\tb\\x1b\\u{202e}");
    }
}
