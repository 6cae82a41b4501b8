//! Parsing and formatting of the quantities a user types and reads: sizes
//! (`64K`, `1MiB`), rates (`500M`, `100mbit`), durations (`10s`, `500ms`),
//! and their display with an explicit unit (`Mbit/s`, `Gbit/s`, `MB`, `MiB`).
//!
//! Conventions (every output and option shares them):
//! - sizes: `K`/`KiB` = 1024, `M`/`MiB` = 2^20, `G`/`GiB` = 2^30 (buffer and
//!   message sizes are powers of two in practice); `KB`/`MB`/`GB` are SI.
//! - rates: SI, bits per second: `500M` = 500 * 10^6 bit/s, `2G`, `100mbit`.
//! - durations: seconds by default; `ms`, `s`, `m`, `h` suffixes.

use std::fmt;
use std::time::Duration;

/// A value that could not be parsed, with what was expected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid {what} '{input}': {hint}")]
pub struct UnitError {
    pub what: &'static str,
    pub input: String,
    pub hint: String,
}

fn unit_error(what: &'static str, input: &str, hint: impl Into<String>) -> UnitError {
    UnitError {
        what,
        input: input.to_string(),
        hint: hint.into(),
    }
}

/// Splits `"64KiB"` into `(64.0, "kib")`.
fn split_number(input: &str) -> Option<(f64, String)> {
    let s = input.trim();
    let end = s.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(s.len());
    if end == 0 {
        return None;
    }
    let number: f64 = s[..end].parse().ok()?;
    if !number.is_finite() {
        return None;
    }
    Some((number, s[end..].trim().to_ascii_lowercase()))
}

/// Parses a byte size: `1400`, `64K`, `64KiB`, `1M`, `8MiB`, `1G`, `1500B`, `10MB` (SI).
pub fn parse_size(input: &str) -> Result<u64, UnitError> {
    const HINT: &str = "expected a byte count such as 1400, 64K, 8M or 1G (K/M/G = 1024-based; KB/MB/GB = SI)";
    let (number, suffix) = split_number(input).ok_or_else(|| unit_error("size", input, HINT))?;
    let multiplier: f64 = match suffix.as_str() {
        "" | "b" => 1.0,
        "k" | "kib" => 1024.0,
        "m" | "mib" => 1024.0 * 1024.0,
        "g" | "gib" => 1024.0 * 1024.0 * 1024.0,
        "kb" => 1e3,
        "mb" => 1e6,
        "gb" => 1e9,
        _ => return Err(unit_error("size", input, HINT)),
    };
    let value = number * multiplier;
    if value.fract() != 0.0 || value > u64::MAX as f64 {
        return Err(unit_error("size", input, "the size must be a whole number of bytes"));
    }
    Ok(value as u64)
}

/// Parses a rate in bits per second: `500M`, `2G`, `100mbit`, `1gbit`, `10k`, `1e9`.
pub fn parse_rate(input: &str) -> Result<u64, UnitError> {
    const HINT: &str = "expected a rate in bits per second such as 100M, 2.5G, 100mbit or 1gbit (SI: M = 10^6)";
    let (number, suffix) = split_number(input).ok_or_else(|| unit_error("rate", input, HINT))?;
    let multiplier = match suffix.trim_end_matches("/s").trim_end_matches("ps") {
        "" | "bit" | "b" => 1.0,
        "k" | "kbit" | "kb" => 1e3,
        "m" | "mbit" | "mb" => 1e6,
        "g" | "gbit" | "gb" => 1e9,
        "t" | "tbit" | "tb" => 1e12,
        _ => return Err(unit_error("rate", input, HINT)),
    };
    let value = (number * multiplier).round();
    if value < 1.0 || value > u64::MAX as f64 {
        return Err(unit_error("rate", input, "the rate must be at least 1 bit/s"));
    }
    Ok(value as u64)
}

/// Parses a duration: `10` (seconds), `10s`, `2.5s`, `500ms`, `2m`, `1h`.
pub fn parse_duration(input: &str) -> Result<Duration, UnitError> {
    const HINT: &str = "expected a duration such as 10, 10s, 500ms, 2m or 1h";
    let (number, suffix) = split_number(input).ok_or_else(|| unit_error("duration", input, HINT))?;
    let seconds = match suffix.as_str() {
        "" | "s" | "sec" => number,
        "ms" => number / 1e3,
        "us" => number / 1e6,
        "m" | "min" => number * 60.0,
        "h" => number * 3600.0,
        _ => return Err(unit_error("duration", input, HINT)),
    };
    if seconds > 1e9 {
        return Err(unit_error("duration", input, "the duration is too long"));
    }
    Ok(Duration::from_secs_f64(seconds))
}

/// A rate in bits per second, shown in Mbit/s below 1 Gbit/s and Gbit/s above.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rate(pub f64);

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let bits = self.0;
        if bits >= 1e9 {
            write!(f, "{:.2} Gbit/s", bits / 1e9)
        } else if bits >= 1e6 || bits == 0.0 {
            write!(f, "{:.2} Mbit/s", bits / 1e6)
        } else {
            write!(f, "{:.2} kbit/s", bits / 1e3)
        }
    }
}

/// A byte count, shown in SI units (kB, MB, GB).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bytes(pub u64);

impl fmt::Display for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.0 as f64;
        if b >= 1e9 {
            write!(f, "{:.2} GB", b / 1e9)
        } else if b >= 1e6 {
            write!(f, "{:.2} MB", b / 1e6)
        } else if b >= 1e3 {
            write!(f, "{:.2} kB", b / 1e3)
        } else {
            write!(f, "{} B", self.0)
        }
    }
}

/// A buffer or message size, shown in binary units (KiB, MiB) when exact.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Size(pub u64);

impl fmt::Display for Size {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.0;
        let (unit, name) = if b >= 1 << 20 {
            (1u64 << 20, "MiB")
        } else if b >= 1 << 10 && (b % (1 << 10) == 0 || b >= 64 << 10) {
            (1 << 10, "KiB")
        } else {
            // Small sizes that are not whole KiB (a 1400-byte datagram) read best in bytes.
            return write!(f, "{b} B");
        };
        if b % unit == 0 {
            write!(f, "{} {name}", b / unit)
        } else {
            write!(f, "{:.2} {name}", b as f64 / unit as f64)
        }
    }
}

/// Bits per second from a byte count and seconds; 0 when no time passed.
pub fn bits_per_second(bytes: u64, seconds: f64) -> f64 {
    if seconds > 0.0 {
        bytes as f64 * 8.0 / seconds
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_use_binary_prefixes_and_si_with_b() {
        assert_eq!(parse_size("1400").unwrap(), 1400);
        assert_eq!(parse_size("64K").unwrap(), 65536);
        assert_eq!(parse_size("64k").unwrap(), 65536);
        assert_eq!(parse_size("8MiB").unwrap(), 8 << 20);
        assert_eq!(parse_size("1G").unwrap(), 1 << 30);
        assert_eq!(parse_size("10MB").unwrap(), 10_000_000);
        assert_eq!(parse_size("1.5K").unwrap(), 1536);
    }

    #[test]
    fn bad_sizes_explain_the_format() {
        for bad in ["", "K", "-1", "12Q", "0.5", "abc"] {
            let err = parse_size(bad).unwrap_err();
            assert!(err.to_string().contains("size"), "{bad}: {err}");
        }
    }

    #[test]
    fn rates_are_si_bits() {
        assert_eq!(parse_rate("500M").unwrap(), 500_000_000);
        assert_eq!(parse_rate("2G").unwrap(), 2_000_000_000);
        assert_eq!(parse_rate("100mbit").unwrap(), 100_000_000);
        assert_eq!(parse_rate("2.5G").unwrap(), 2_500_000_000);
        assert_eq!(parse_rate("10kbit/s").unwrap(), 10_000);
        assert!(parse_rate("0").is_err());
        assert!(parse_rate("fast").is_err());
    }

    #[test]
    fn durations_default_to_seconds() {
        assert_eq!(parse_duration("10").unwrap(), Duration::from_secs(10));
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_duration("2.5s").unwrap(), Duration::from_millis(2500));
        assert!(parse_duration("-1").is_err());
        assert!(parse_duration("10 parsecs").is_err());
    }

    #[test]
    fn display_carries_units() {
        assert_eq!(Rate(9.87e9).to_string(), "9.87 Gbit/s");
        assert_eq!(Rate(354.96e6).to_string(), "354.96 Mbit/s");
        assert_eq!(Bytes(12_340_000_000).to_string(), "12.34 GB");
        assert_eq!(Size(131072).to_string(), "128 KiB");
        assert_eq!(Size(1000).to_string(), "1000 B");
        assert_eq!(Size(1400).to_string(), "1400 B");
        assert_eq!(Size(69120).to_string(), "67.50 KiB");
        assert_eq!(Size(3939840).to_string(), "3.76 MiB");
    }
}
