//! Log lines on stderr, with levels (`-v`, `-q`) and an optional JSON form
//! (`--log-format json`) for journald or log shippers. Nothing in a data
//! path logs.

use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u8)]
pub enum Level {
    Error = 0,
    Warn = 1,
    Info = 2,
    Debug = 3,
}

impl Level {
    fn as_str(self) -> &'static str {
        match self {
            Level::Error => "error",
            Level::Warn => "warn",
            Level::Info => "info",
            Level::Debug => "debug",
        }
    }
}

static LEVEL: AtomicU8 = AtomicU8::new(Level::Warn as u8);
static JSON: AtomicBool = AtomicBool::new(false);

/// Sets the most verbose level printed.
pub fn set_level(level: Level) {
    LEVEL.store(level as u8, Ordering::Relaxed);
}

/// Prints log lines as JSON objects instead of text.
pub fn set_json(json: bool) {
    JSON.store(json, Ordering::Relaxed);
}

pub fn enabled(level: Level) -> bool {
    level as u8 <= LEVEL.load(Ordering::Relaxed)
}

pub fn log(level: Level, message: &str) {
    if !enabled(level) {
        return;
    }
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    let line = if JSON.load(Ordering::Relaxed) {
        serde_json::json!({
            "time_unix_seconds": now.as_secs_f64(),
            "level": level.as_str(),
            "message": message,
        })
        .to_string()
    } else {
        format!("nicbench {}: {}", level.as_str(), message)
    };
    let _ = writeln!(std::io::stderr().lock(), "{line}");
}

pub fn error(message: &str) {
    log(Level::Error, message)
}
pub fn warn(message: &str) {
    log(Level::Warn, message)
}
pub fn info(message: &str) {
    log(Level::Info, message)
}
pub fn debug(message: &str) {
    log(Level::Debug, message)
}
