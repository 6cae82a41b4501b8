//! Log lines on stderr, with levels (`-v`, `-q`) and an optional JSON form
//! (`--log-format json`) for journald or log shippers. Nothing in a data
//! path logs.
//!
//! The code logs through the `log` crate's macros (`log::warn!(...)`),
//! which format a message only when its level is on; [`init`] installs
//! the one logger here, which writes
//! `nicbench LEVEL: message` or `{"time_unix_seconds":...,"level":...,"message":...}`.
//! Records from other crates are shown only at `-vv`, so a dependency that
//! logs does not speak at the default level.

use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use log::{Level, LevelFilter, Log, Metadata, Record};

/// What the crate's `println!`, `print!`, `eprintln!` and `eprint!` write
/// (lib.rs routes them here): std's, except that a closed pipe (`nicbench
/// run plan.toml 2>&1 | head -3`) ends the output instead of panicking,
/// and a failed write is not worth ending the command for either.
pub fn print_text(to_stderr: bool, text: std::fmt::Arguments) {
    let _ = if to_stderr {
        std::io::stderr().lock().write_fmt(text)
    } else {
        std::io::stdout().lock().write_fmt(text)
    };
}

/// How log lines look.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `nicbench warn: message`
    Text,
    /// One JSON object per line.
    Json,
}

/// Installs the stderr logger (once per process; a later call changes the
/// level and format) and makes `level` the most verbose one printed.
pub fn init(level: LevelFilter, format: Format) {
    LOGGER.level.store(level as u8, Ordering::Relaxed);
    LOGGER.json.store(format == Format::Json, Ordering::Relaxed);
    // Err only when a logger is already set: ours, from an earlier call.
    let _ = log::set_logger(&LOGGER);
    log::set_max_level(level);
}

static LOGGER: StderrLogger = StderrLogger {
    level: AtomicU8::new(LevelFilter::Warn as u8),
    json: AtomicBool::new(false),
};

/// The logger [`init`] installs.
struct StderrLogger {
    /// A `LevelFilter` as a number.
    level: AtomicU8,
    json: AtomicBool,
}

impl Log for StderrLogger {
    fn enabled(&self, metadata: &Metadata) -> bool {
        let ours = metadata.target() == "nicbench" || metadata.target().starts_with("nicbench::");
        let most = self.level.load(Ordering::Relaxed);
        metadata.level() as u8 <= most && (ours || most >= LevelFilter::Debug as u8)
    }

    fn log(&self, record: &Record) {
        if !self.enabled(record.metadata()) {
            return;
        }
        let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
        let line = line(
            record.level(),
            &record.args().to_string(),
            now.as_secs_f64(),
            self.json.load(Ordering::Relaxed),
        );
        let _ = writeln!(std::io::stderr().lock(), "{line}");
    }

    fn flush(&self) {}
}

/// One log line, without its newline.
fn line(level: Level, message: &str, time_unix_seconds: f64, json: bool) -> String {
    let level = level.as_str().to_ascii_lowercase();
    if json {
        serde_json::json!({
            "time_unix_seconds": time_unix_seconds,
            "level": level,
            "message": message,
        })
        .to_string()
    } else {
        // A message may quote a peer (its host name, its error): one line,
        // controls and bidi overrides shown escaped.
        format!("nicbench {level}: {}", crate::outside_text::terminal(message))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn metadata(level: Level, target: &str) -> Metadata<'_> {
        Metadata::builder().level(level).target(target).build()
    }

    #[test]
    fn text_and_json_lines_keep_their_form() {
        assert_eq!(line(Level::Warn, "a \"b\"", 1.5, false), "nicbench warn: a \"b\"");
        assert_eq!(
            line(Level::Info, "a \"b\"", 1.5, true),
            r#"{"time_unix_seconds":1.5,"level":"info","message":"a \"b\""}"#
        );
    }

    #[test]
    fn a_text_line_shows_a_peers_control_characters_escaped() {
        assert_eq!(
            line(
                Level::Warn,
                "agent evil\u{1b}]0;x\u{7}\nnicbench info: forged",
                0.0,
                false
            ),
            r"nicbench warn: agent evil\x1b]0;x\x07\nnicbench info: forged"
        );
    }

    #[test]
    fn levels_follow_the_filter_and_other_crates_wait_for_debug() {
        let logger = StderrLogger {
            level: AtomicU8::new(LevelFilter::Warn as u8),
            json: AtomicBool::new(false),
        };
        assert!(logger.enabled(&metadata(Level::Warn, "nicbench::agent")));
        assert!(logger.enabled(&metadata(Level::Error, "nicbench")));
        assert!(!logger.enabled(&metadata(Level::Info, "nicbench::agent")));
        assert!(!logger.enabled(&metadata(Level::Warn, "nicbenchmark")));
        assert!(!logger.enabled(&metadata(Level::Error, "rusqlite")));
        logger.level.store(LevelFilter::Info as u8, Ordering::Relaxed);
        assert!(!logger.enabled(&metadata(Level::Warn, "rusqlite")));
        logger.level.store(LevelFilter::Debug as u8, Ordering::Relaxed);
        assert!(logger.enabled(&metadata(Level::Warn, "rusqlite")));
        assert!(!logger.enabled(&metadata(Level::Trace, "nicbench")));
    }
}
