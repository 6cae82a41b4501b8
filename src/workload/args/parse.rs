//! Typed value parsers for clap: `64K`, `10s`, `500M`, `0,2-3`.

use std::time::Duration;

use crate::units;

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

pub fn size(s: &str) -> Result<u64, String> {
    units::parse_size(s).map_err(|e| e.to_string())
}

pub fn positive_size(s: &str) -> Result<u64, String> {
    match size(s)? {
        0 => Err("must be at least 1 byte".into()),
        n => Ok(n),
    }
}

pub fn duration(s: &str) -> Result<Duration, String> {
    units::parse_duration(s).map_err(|e| e.to_string())
}

pub fn positive_duration(s: &str) -> Result<Duration, String> {
    match duration(s)? {
        d if d.is_zero() => Err("must be longer than 0 s".into()),
        d => Ok(d),
    }
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
    if !(2..=1000).contains(&max) || min < 1 || min > max {
        return Err(format!(
            "need 2 <= MAX <= 1000 and 1 <= MIN <= MAX (an interval needs two trials), got MAX {max}, MIN {min}"
        ));
    }
    Ok((max, min))
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn zero_is_refused_where_it_makes_no_sense() {
        assert!(positive_size("0").is_err());
        assert!(positive_duration("0").is_err());
        assert_eq!(positive_size("64K").unwrap(), 65536);
    }
}
