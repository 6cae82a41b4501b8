//! Typed value parsers for clap: `64K`, `10s`, `500M`, `0,2-3`.

use std::time::Duration;

use crate::units;

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

#[cfg(test)]
mod tests {
    use super::*;

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
    fn zero_is_refused_where_it_makes_no_sense() {
        assert!(positive_size("0").is_err());
        assert!(positive_duration("0").is_err());
        assert_eq!(positive_size("64K").unwrap(), 65536);
    }
}
