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

/// The first value past a u64 (2^64), as a float.
const PAST_U64: f64 = 18_446_744_073_709_551_616.0;

/// Splits `"64KiB"` into the number as written (`"64"`) and its unit in
/// lower case (`"kib"`).
fn split_number(input: &str) -> Option<(&str, String)> {
    let s = input.trim();
    let end = s.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(s.len());
    let number = &s[..end];
    if end == 0 || number.parse::<f64>().is_err() {
        return None;
    }
    Some((number, s[end..].trim().to_ascii_lowercase()))
}

/// A number as written times a whole multiplier.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Scaled {
    /// A whole number that fits a u64, exactly.
    Whole(u64),
    /// Written with a fraction; below 2^64.
    Fraction(f64),
    /// 2^64 or more (about this much): no u64 holds it.
    TooLarge(f64),
}

/// `number` (digits, perhaps a fraction) times `multiplier`, exact when
/// whole: never rounded to or clamped at the largest u64.
fn scale(number: &str, multiplier: u64) -> Scaled {
    let approximate = number.parse::<f64>().unwrap_or(f64::INFINITY) * multiplier as f64;
    if !number.contains('.') {
        let exact = number
            .parse::<u128>()
            .ok()
            .and_then(|n| n.checked_mul(u128::from(multiplier)))
            .and_then(|n| u64::try_from(n).ok());
        return match exact {
            Some(n) => Scaled::Whole(n),
            None => Scaled::TooLarge(approximate),
        };
    }
    if approximate >= PAST_U64 {
        Scaled::TooLarge(approximate)
    } else {
        Scaled::Fraction(approximate)
    }
}

/// The size `input` asks for: its number and unit's multiplier.
fn scaled_size(input: &str) -> Result<Scaled, UnitError> {
    const HINT: &str = "expected a size in bytes such as 1400, 64K, 8M or 1G (K/M/G = 1024-based; KB/MB/GB = SI)";
    let (number, suffix) = split_number(input).ok_or_else(|| unit_error("size", input, HINT))?;
    let multiplier: u64 = match suffix.as_str() {
        "" | "b" => 1,
        "k" | "kib" => 1 << 10,
        "m" | "mib" => 1 << 20,
        "g" | "gib" => 1 << 30,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        _ => return Err(unit_error("size", input, HINT)),
    };
    match scale(number, multiplier) {
        Scaled::TooLarge(bytes) => Err(unit_error(
            "size",
            input,
            format!("{bytes:.1e} bytes is more than the largest size, {} B", u64::MAX),
        )),
        scaled => Ok(scaled),
    }
}

/// Parses a byte size: `1400`, `64K`, `64KiB`, `1M`, `8MiB`, `1G`, `1500B`,
/// `10MB` (SI). A fraction must make whole bytes (`1.5K`); a size past the
/// largest u64 is refused as such, never clamped.
pub fn parse_size(input: &str) -> Result<u64, UnitError> {
    match scaled_size(input)? {
        Scaled::Whole(n) => Ok(n),
        Scaled::Fraction(v) if v.fract() == 0.0 => Ok(v as u64),
        _ => Err(unit_error("size", input, "the size must be a whole number of bytes")),
    }
}

/// Parses a byte size like [`parse_size`], rounding a fraction of a byte
/// (`1.9G` is 2040109466 bytes).
pub fn parse_size_rounded(input: &str) -> Result<u64, UnitError> {
    match scaled_size(input)? {
        Scaled::Whole(n) => Ok(n),
        // Below 2^64, so the rounded value fits (a float just below 2^64 is 2^64 - 2048).
        Scaled::Fraction(v) | Scaled::TooLarge(v) => Ok(v.round() as u64),
    }
}

/// Parses a rate in bits per second: `500M`, `2G`, `100mbit`, `1gbit`,
/// `10k`; a fraction is rounded to whole bits, a rate past the largest u64
/// is refused as such.
pub fn parse_rate(input: &str) -> Result<u64, UnitError> {
    const HINT: &str = "expected a rate in bits per second such as 100M, 2.5G, 100mbit or 1gbit (SI: M = 10^6)";
    let (number, suffix) = split_number(input).ok_or_else(|| unit_error("rate", input, HINT))?;
    let multiplier: u64 = match suffix.trim_end_matches("/s").trim_end_matches("ps") {
        "" | "bit" | "b" => 1,
        "k" | "kbit" | "kb" => 1_000,
        "m" | "mbit" | "mb" => 1_000_000,
        "g" | "gbit" | "gb" => 1_000_000_000,
        "t" | "tbit" | "tb" => 1_000_000_000_000,
        _ => return Err(unit_error("rate", input, HINT)),
    };
    let bits = match scale(number, multiplier) {
        Scaled::Whole(n) => n,
        Scaled::Fraction(v) => v.round() as u64,
        Scaled::TooLarge(v) => {
            return Err(unit_error(
                "rate",
                input,
                format!("{v:.1e} bit/s is more than the largest rate, {} bit/s", u64::MAX),
            ))
        }
    };
    if bits == 0 {
        return Err(unit_error("rate", input, "the rate must be at least 1 bit/s"));
    }
    Ok(bits)
}

/// The longest duration [`parse_duration`] reads (about 31 years).
pub const MAX_DURATION_SECONDS: f64 = 1e9;

/// Parses a duration: `10` (seconds), `10s`, `2.5s`, `500ms`, `2m`, `1h`.
pub fn parse_duration(input: &str) -> Result<Duration, UnitError> {
    const HINT: &str = "expected a duration such as 10, 10s, 500ms, 2m or 1h";
    let (number, suffix) = split_number(input).ok_or_else(|| unit_error("duration", input, HINT))?;
    let number: f64 = number.parse().map_err(|_| unit_error("duration", input, HINT))?;
    let seconds = match suffix.as_str() {
        "" | "s" | "sec" => number,
        "ms" => number / 1e3,
        "us" => number / 1e6,
        "m" | "min" => number * 60.0,
        "h" => number * 3600.0,
        _ => return Err(unit_error("duration", input, HINT)),
    };
    if seconds > MAX_DURATION_SECONDS {
        return Err(unit_error(
            "duration",
            input,
            format!("{seconds:.1e} s is more than the longest duration, {MAX_DURATION_SECONDS:.0e} s"),
        ));
    }
    Ok(Duration::from_secs_f64(seconds))
}

/// A rate in bits per second, shown in Mbit/s below 1 Gbit/s and Gbit/s above.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rate(pub f64);

impl Rate {
    /// The unit (divisor, name) `bits` reads in.
    fn unit(bits: f64) -> (f64, &'static str) {
        if bits >= 1e9 {
            (1e9, "Gbit/s")
        } else if bits >= 1e6 || bits == 0.0 {
            (1e6, "Mbit/s")
        } else {
            (1e3, "kbit/s")
        }
    }

    /// Rates meant to be read against each other (a row's sender and
    /// receiver), all in the unit of the largest: "999.87 Mbit/s" beside
    /// "1.00 Gbit/s" reads as a contradiction, "1.00 Gbit/s" beside
    /// "1.00 Gbit/s" does not.
    pub fn in_one_unit(rates: &[f64]) -> Vec<String> {
        let (divisor, name) = Rate::unit(rates.iter().copied().fold(0.0, f64::max));
        rates.iter().map(|r| format!("{:.2} {name}", r / divisor)).collect()
    }
}

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (divisor, name) = Rate::unit(self.0);
        write!(f, "{:.2} {name}", self.0 / divisor)
    }
}

/// A byte count, shown in SI units (kB, MB, GB).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bytes(pub u64);

impl Bytes {
    /// Byte counts meant to be read against each other, all in the unit of
    /// the largest (as [`Rate::in_one_unit`]).
    pub fn in_one_unit(counts: &[u64]) -> Vec<String> {
        let largest = counts.iter().copied().max().unwrap_or(0) as f64;
        let (divisor, name) = if largest >= 1e9 {
            (1e9, "GB")
        } else if largest >= 1e6 {
            (1e6, "MB")
        } else if largest >= 1e3 {
            (1e3, "kB")
        } else {
            return counts.iter().map(|&b| format!("{b} B")).collect();
        };
        counts
            .iter()
            .map(|&b| format!("{:.2} {name}", b as f64 / divisor))
            .collect()
    }
}

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

    /// Regression (issue 43): one row read "999.87 Mbit/s  1.00 Gbit/s".
    #[test]
    fn figures_read_against_each_other_share_the_largests_unit() {
        assert_eq!(Rate::in_one_unit(&[999.87e6, 1.0e9]), ["1.00 Gbit/s", "1.00 Gbit/s"]);
        assert_eq!(Rate::in_one_unit(&[999.87e6, 0.0]), ["999.87 Mbit/s", "0.00 Mbit/s"]);
        assert_eq!(Rate::in_one_unit(&[5e3, 2e3]), ["5.00 kbit/s", "2.00 kbit/s"]);
        assert_eq!(
            Bytes::in_one_unit(&[999_870_000, 1_000_000_000]),
            ["1.00 GB", "1.00 GB"]
        );
        assert_eq!(Bytes::in_one_unit(&[999, 12]), ["999 B", "12 B"]);
        assert_eq!(Bytes::in_one_unit(&[1_500, 999]), ["1.50 kB", "1.00 kB"]);
        assert!(Rate::in_one_unit(&[]).is_empty());
        // Alone, each keeps its own unit.
        assert_eq!(Rate(999.87e6).to_string(), "999.87 Mbit/s");
    }

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
    fn sizes_past_the_largest_u64_are_refused_as_overflow_never_clamped() {
        assert_eq!(parse_size("18446744073709551615").unwrap(), u64::MAX);
        for (input, said) in [
            (
                "99999999999G",
                "1.1e20 bytes is more than the largest size, 18446744073709551615 B",
            ),
            ("18446744073709551616", "1.8e19 bytes is more than the largest size"),
            ("16777216T", "size"),
            (
                "99999999999999999999999999999999999999999",
                "more than the largest size",
            ),
            ("20000000000.5G", "more than the largest size"),
        ] {
            let err = parse_size(input).unwrap_err().to_string();
            assert!(err.contains(said), "{input}: {err}");
        }
        assert!(parse_size_rounded("99999999999G")
            .unwrap_err()
            .to_string()
            .contains("largest size"));
        assert_eq!(parse_size_rounded("1.9G").unwrap(), 2_040_109_466);
    }

    #[test]
    fn rates_past_the_largest_u64_are_refused_as_overflow() {
        assert_eq!(parse_rate("18446744073709551615").unwrap(), u64::MAX);
        for input in ["18446744073709551616", "99999999999T", "20000000000.5G"] {
            let err = parse_rate(input).unwrap_err().to_string();
            assert!(err.contains("more than the largest rate"), "{input}: {err}");
        }
        assert!(parse_rate("0.4").unwrap_err().to_string().contains("at least 1 bit/s"));
        assert!(parse_duration("99999999999h")
            .unwrap_err()
            .to_string()
            .contains("longest duration"));
    }

    proptest::proptest! {
        /// A whole number with a unit is exactly the number times the
        /// unit, or refused as more than the largest size: never rounded
        /// or clamped. Sizes count K, M, G in powers of 2 and KB, MB, GB in powers of
        /// 10; rates are SI throughout (K = 10^3 bit/s, as iperf3 reads
        /// them). Small numbers, where both fit, are drawn as often as
        /// any u64.
        #[test]
        fn whole_sizes_are_exact_or_refused_as_overflow(
            n in proptest::prop_oneof![0u64..1_000_000, 0u64..=u64::MAX],
            unit in 0usize..7,
        ) {
            let (suffix, multiplier, rate_multiplier) = [("", 1u128, 1u128), ("K", 1 << 10, 1_000),
                ("M", 1 << 20, 1_000_000), ("G", 1 << 30, 1_000_000_000), ("KB", 1_000, 1_000),
                ("MB", 1_000_000, 1_000_000), ("GB", 1_000_000_000, 1_000_000_000)][unit];
            let exact = u128::from(n) * multiplier;
            let exact_rate = u128::from(n) * rate_multiplier;
            match parse_size(&format!("{n}{suffix}")) {
                Ok(bytes) => proptest::prop_assert_eq!(u128::from(bytes), exact),
                Err(e) => {
                    proptest::prop_assert!(exact > u128::from(u64::MAX), "{}", e);
                    proptest::prop_assert!(e.to_string().contains("more than the largest size"), "{}", e);
                }
            }
            match parse_rate(&format!("{n}{suffix}")) {
                Ok(bits) => proptest::prop_assert_eq!(u128::from(bits), exact_rate),
                Err(e) => proptest::prop_assert!(exact_rate == 0 || exact_rate > u128::from(u64::MAX), "{}", e),
            }
        }

        /// Nothing typed makes the parsers panic, and what they accept
        /// reads back as itself.
        #[test]
        fn any_input_is_parsed_or_refused_with_a_reason(input in "[0-9.]{0,25}[a-zA-Z/]{0,5}") {
            if let Ok(bytes) = parse_size(&input) {
                proptest::prop_assert_eq!(parse_size(&bytes.to_string()).unwrap(), bytes);
            }
            let _ = parse_size_rounded(&input);
            if let Ok(bits) = parse_rate(&input) {
                proptest::prop_assert!(bits >= 1);
            }
            let _ = parse_duration(&input);
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
