//! Typed value parsers for clap: `64K`, `10s`, `500M`, `0,2-3`.

use std::time::Duration;

use crate::model::spec::{
    MAX_BUFFER_BYTES, MAX_DURATION_SECONDS, MAX_MESSAGE_BYTES, MIN_DURATION_SECONDS, MIN_INTERVAL_SECONDS,
};
use crate::protocol::MAX_WAIT_SECONDS;
use crate::units::{self, Size};

/// A whole number from `min` to `max`, with a message in words ("1 to
/// 128"), not Rust's range syntax.
pub fn between<T>(min: u64, max: u64) -> impl Fn(&str) -> Result<T, String> + Clone + Send + Sync + 'static
where
    T: TryFrom<u64>,
{
    move |s: &str| {
        let allowed = || format!("must be a whole number from {min} to {max}");
        let n: u64 = s.trim().parse().map_err(|_| allowed())?;
        if !(min..=max).contains(&n) {
            return Err(allowed());
        }
        T::try_from(n).map_err(|_| allowed())
    }
}

/// A port to connect to, 1 to 65535: 0 asks the system for any free
/// port, which only a listener can do (`nicbench serve -p 0`), so a client
/// given it would only fail to connect.
pub fn port_to_connect(s: &str) -> Result<u16, String> {
    match s.trim().parse::<u16>() {
        Ok(0) => Err(
            "0 is not a port to connect to (only a listener can take \"any free port\"): \
             give the port the agent listens on, 1 to 65535 (`nicbench serve` prints it; default 5310)"
                .into(),
        ),
        Ok(port) => Ok(port),
        Err(_) => Err("must be a port, a whole number from 1 to 65535".into()),
    }
}

/// A range in words: "from 1 B to 64 MiB", or "at least 1 B" when the
/// top is the type's.
fn range_in_words(min: String, max: Option<String>) -> String {
    match max {
        Some(max) => format!("from {min} to {max}"),
        None => format!("at least {min}"),
    }
}

/// A size in bytes, any (`0` to the largest u64; past it is refused as
/// overflow).
pub fn size(s: &str) -> Result<u64, String> {
    units::parse_size(s).map_err(|e| e.hint)
}

/// A size of at least 1 byte.
pub fn positive_size(s: &str) -> Result<u64, String> {
    size_in(1, u64::MAX)(s)
}

/// A size option's parser: `size_in(1, MAX_MESSAGE_BYTES)` takes 1 B to
/// 64 MiB and says that range when refusing (clap names the option).
pub fn size_in(min: u64, max: u64) -> impl Fn(&str) -> Result<u64, String> + Clone + Send + Sync + 'static {
    move |s: &str| {
        let n = size(s)?;
        if !(min..=max).contains(&n) {
            let top = (max != u64::MAX).then(|| Size(max).to_string());
            return Err(format!(
                "must be {} (got {})",
                range_in_words(Size(min).to_string(), top),
                Size(n)
            ));
        }
        Ok(n)
    }
}

/// A rate option's parser: bits per second from `min` to `max`.
pub fn rate_in(min: u64, max: u64) -> impl Fn(&str) -> Result<u64, String> + Clone + Send + Sync + 'static {
    move |s: &str| {
        let n = units::parse_rate(s).map_err(|e| e.hint)?;
        if !(min..=max).contains(&n) {
            let top = (max != u64::MAX).then(|| format!("{max} bit/s"));
            return Err(format!(
                "must be {} (got {n} bit/s)",
                range_in_words(format!("{min} bit/s"), top)
            ));
        }
        Ok(n)
    }
}

/// A duration in words: `24 h`, `10 min`, `1.5 s`, `50 ms`, `100 ns`.
pub fn duration_in_words(seconds: f64) -> String {
    let whole = |v: f64| v.fract() == 0.0;
    if seconds >= 3600.0 && whole(seconds / 3600.0) {
        format!("{} h", seconds / 3600.0)
    } else if seconds >= 60.0 && whole(seconds / 60.0) {
        format!("{} min", seconds / 60.0)
    } else if seconds >= 1.0 || seconds == 0.0 {
        format!("{seconds} s")
    } else if seconds >= 1e-3 {
        format!("{} ms", (seconds * 1e6).round() / 1e3)
    } else if seconds >= 1e-6 {
        format!("{} us", (seconds * 1e9).round() / 1e3)
    } else {
        format!("{} ns", (seconds * 1e9).round())
    }
}

/// A duration option's parser: from `min` to `max` seconds, said in words
/// when refused.
pub fn duration_in(min: f64, max: f64) -> impl Fn(&str) -> Result<Duration, String> + Clone + Send + Sync + 'static {
    move |s: &str| {
        let d = duration(s)?;
        let seconds = d.as_secs_f64();
        if !(min..=max).contains(&seconds) {
            return Err(format!(
                "must be {} (got {})",
                range_in_words(duration_in_words(min), Some(duration_in_words(max))),
                duration_in_words(seconds)
            ));
        }
        Ok(d)
    }
}

/// A duration, 0 or more (up to [`units::MAX_DURATION_SECONDS`]).
pub fn duration(s: &str) -> Result<Duration, String> {
    units::parse_duration(s).map_err(|e| e.hint)
}

/// A duration of more than 0 s.
pub fn positive_duration(s: &str) -> Result<Duration, String> {
    match duration(s)? {
        d if d.is_zero() => Err("must be longer than 0 s".into()),
        d => Ok(d),
    }
}

/// A message (`-l`, rr's and sweep's sizes): 1 B to
/// [`MAX_MESSAGE_BYTES`].
pub fn message_size(s: &str) -> Result<u64, String> {
    size_in(1, MAX_MESSAGE_BYTES)(s)
}

/// A socket buffer (`-w`, `--sndbuf`, ...): 1 B to [`MAX_BUFFER_BYTES`].
pub fn buffer_size(s: &str) -> Result<u64, String> {
    size_in(1, MAX_BUFFER_BYTES)(s)
}

/// How long a test sends (`-t`): what the runner can measure
/// ([`MIN_DURATION_SECONDS`]) to a day.
pub fn test_duration(s: &str) -> Result<Duration, String> {
    duration_in(MIN_DURATION_SECONDS, MAX_DURATION_SECONDS)(s)
}

/// How long a client waits in an agent's queue (`--wait`): none to the
/// agent's longest wait ([`MAX_WAIT_SECONDS`]).
pub fn queue_wait(s: &str) -> Result<Duration, String> {
    duration_in(0.0, MAX_WAIT_SECONDS)(s)
}

/// A warm-up (`-O`): none to a day.
pub fn warmup(s: &str) -> Result<Duration, String> {
    duration_in(0.0, MAX_DURATION_SECONDS)(s)
}

/// An interval of samples (`-i`): the shortest the runner samples to a day.
pub fn interval(s: &str) -> Result<Duration, String> {
    duration_in(MIN_INTERVAL_SECONDS, MAX_DURATION_SECONDS)(s)
}

/// A list of cores (a newtype so clap takes it as one value).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuList(pub Vec<u32>);

/// A list of cores: `0`, `0,2`, `0-3`, `0-1,4`.
pub fn cpu_list(s: &str) -> Result<CpuList, String> {
    parse_cpu_list(s).map(CpuList)
}

fn parse_cpu_list(s: &str) -> Result<Vec<u32>, String> {
    let bad = || format!("invalid CPU list '{s}': expected core numbers such as 0, 0,2 or 0-3");
    let mut cores = Vec::new();
    for part in s.split(',') {
        let part = part.trim();
        match part.split_once('-') {
            Some((a, b)) => {
                let a: u32 = a.trim().parse().map_err(|_| bad())?;
                let b: u32 = b.trim().parse().map_err(|_| bad())?;
                if a > b || b - a > 4096 {
                    return Err(bad());
                }
                cores.extend(a..=b);
            }
            None => cores.push(part.parse().map_err(|_| bad())?),
        }
    }
    Ok(cores)
}

/// `--confidence LEVEL,WIDTH`: a level in percent (50..99.99) and an
/// interval width in percent of the mean.
pub fn confidence(s: &str) -> Result<(f64, f64), String> {
    let bad = || format!("invalid '{s}': expected LEVEL,WIDTH in percent, such as 99,5 or 95,2.5");
    let (level, width) = s.split_once(',').ok_or_else(bad)?;
    let level: f64 = level.trim().trim_end_matches('%').parse().map_err(|_| bad())?;
    let width: f64 = width.trim().trim_end_matches('%').parse().map_err(|_| bad())?;
    if !(50.0..=99.99).contains(&level) {
        return Err(format!("the confidence level must be 50 to 99.99 percent, got {level}"));
    }
    if !(width > 0.0 && width <= 100.0) {
        return Err(format!(
            "the interval width must be more than 0 and at most 100 percent, got {width}"
        ));
    }
    Ok((level, width))
}

/// `--iterations MAX,MIN`: at most MAX and at least MIN trials.
pub fn iterations(s: &str) -> Result<(u32, u32), String> {
    let bad = || format!("invalid '{s}': expected MAX,MIN trial counts, such as 10,3");
    let (max, min) = s.split_once(',').ok_or_else(bad)?;
    let max: u32 = max.trim().parse().map_err(|_| bad())?;
    let min: u32 = min.trim().parse().map_err(|_| bad())?;
    let least = crate::stats::MIN_INTERVAL_TRIALS as u32;
    if !(least..=1000).contains(&max) || min < 1 || min > max {
        return Err(format!(
            "need {least} <= MAX <= 1000 and 1 <= MIN <= MAX (an interval takes {least} trials to mean anything), \
             got MAX {max}, MIN {min}"
        ));
    }
    Ok((max, min))
}

/// A datagram sender's offered rate: bits per second, or as fast as possible.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bitrate {
    Max,
    BitsPerSecond(u64),
}

/// Parses `-b`: `500M`, `2G`, `100mbit` or `max`; zero is refused.
pub fn bitrate(s: &str) -> Result<Bitrate, String> {
    if s.trim().eq_ignore_ascii_case("max") {
        return Ok(Bitrate::Max);
    }
    match crate::units::parse_rate(s) {
        Ok(0) => Err("the rate must be above 0; use e.g. 100M, or 'max' for as fast as possible".into()),
        Ok(r) => Ok(Bitrate::BitsPerSecond(r)),
        Err(e) => Err(format!("{e}, or 'max' for as fast as possible")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn port_zero_is_refused_as_a_port_to_connect_to() {
        assert_eq!(port_to_connect("5310"), Ok(5310));
        assert!(port_to_connect("0")
            .unwrap_err()
            .contains("0 is not a port to connect to"));
        assert!(port_to_connect("70000").unwrap_err().contains("1 to 65535"));
    }

    #[test]
    fn confidence_and_iterations() {
        assert_eq!(confidence("99,5").unwrap(), (99.0, 5.0));
        assert_eq!(confidence("95%, 2.5%").unwrap(), (95.0, 2.5));
        assert!(confidence("99").is_err());
        assert!(confidence("100,5").is_err());
        assert!(confidence("99,0").is_err());
        assert_eq!(iterations("10,3").unwrap(), (10, 3));
        assert!(iterations("3,10").unwrap_err().contains("MIN <= MAX"));
        assert!(iterations("1,1").is_err());
        // Two trials make no interval: a MAX of 2 could never be met.
        assert!(iterations("2,2").unwrap_err().contains("3 <= MAX"));
        assert!(iterations("x").is_err());
    }

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpu_list("0").unwrap(), vec![0]);
        assert_eq!(parse_cpu_list("0,2").unwrap(), vec![0, 2]);
        assert_eq!(parse_cpu_list("0-2,5").unwrap(), vec![0, 1, 2, 5]);
        assert!(parse_cpu_list("3-1").is_err());
        assert!(parse_cpu_list("a").is_err());
        assert!(parse_cpu_list("").is_err());
    }

    #[test]
    fn ranges_are_said_in_words() {
        let streams = between::<u32>(1, 128);
        assert_eq!(streams("4").unwrap(), 4);
        for bad in ["0", "129", "x", "-1"] {
            assert_eq!(streams(bad).unwrap_err(), "must be a whole number from 1 to 128");
        }
    }

    #[test]
    fn each_kind_of_quantity_states_its_real_range() {
        let message = size_in(1, 64 << 20);
        assert_eq!(message("64M").unwrap(), 64 << 20);
        assert_eq!(message("65M").unwrap_err(), "must be from 1 B to 64 MiB (got 65 MiB)");
        assert_eq!(message("0").unwrap_err(), "must be from 1 B to 64 MiB (got 0 B)");
        assert_eq!(
            message("99999999999G").unwrap_err(),
            "1.1e20 bytes is more than the largest size, 18446744073709551615 B"
        );
        assert_eq!(positive_size("0").unwrap_err(), "must be at least 1 B (got 0 B)");
        let rate = rate_in(1000, 1_000_000);
        assert_eq!(rate("1M").unwrap(), 1_000_000);
        assert!(rate("2M").unwrap_err().contains("from 1000 bit/s to 1000000 bit/s"));
        assert_eq!(
            test_duration("0.0000001").unwrap_err(),
            format!(
                "must be from {} to 24 h (got 100 ns)",
                duration_in_words(MIN_DURATION_SECONDS)
            )
        );
        assert!(test_duration("25h").unwrap_err().contains("to 24 h (got 25 h)"));
        assert_eq!(warmup("0").unwrap(), Duration::ZERO);
        assert!(interval("10ms").unwrap_err().contains("from 50 ms to 24 h"));
        assert_eq!(duration_in_words(600.0), "10 min");
        assert_eq!(duration_in_words(1.5), "1.5 s");
    }

    #[test]
    fn zero_is_refused_where_it_makes_no_sense() {
        assert!(positive_size("0").is_err());
        assert!(positive_duration("0").is_err());
        assert_eq!(positive_size("64K").unwrap(), 65536);
    }
}
