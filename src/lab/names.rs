//! What a lab and its namespaces are called: a lab's name (checked, or
//! made unique per test process), and `nicbench-<lab>-<host>` for each
//! host's network namespace. Both a lab's spec and its state file name
//! things with these, so they sit below both.

use super::LabError;

/// Prefix of every network namespace the lab creates: `nicbench-<lab>-<host>`.
pub const NETNS_PREFIX: &str = "nicbench-";
/// Longest lab name (keeps every derived name short and readable).
pub const MAX_NAME_LEN: usize = 15;

/// Checks a lab name: 1 to 15 of `a-z 0-9 -`, starting with a letter or digit.
pub fn validate_name(name: &str) -> Result<(), LabError> {
    let ok = !name.is_empty()
        && name.len() <= MAX_NAME_LEN
        && name.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    if ok {
        Ok(())
    } else {
        Err(LabError::Invalid {
            option: "NAME",
            input: name.to_string(),
            hint: format!(
                "a lab name is 1 to {MAX_NAME_LEN} characters of a-z, 0-9 and '-', starting with a letter or digit"
            ),
        })
    }
}

/// A lab name unique to this process and call: `t<pid>-<counter>`.
pub fn unique_name() -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    format!("t{}-{}", std::process::id(), n)
}

/// The pid in an automatic lab name `t<pid>-<counter>` ([`unique_name`]),
/// so that the labs of a test process that died without tearing them down
/// can be found and removed; None for any other name.
pub fn auto_name_pid(name: &str) -> Option<u32> {
    let (pid, counter) = name.strip_prefix('t')?.split_once('-')?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    (digits(pid) && digits(counter)).then(|| pid.parse().ok()).flatten()
}

/// Network namespace of a host: `nicbench-<lab>-<host>`.
pub fn netns_name(lab: &str, host: &str) -> String {
    format!("{NETNS_PREFIX}{lab}-{host}")
}

/// Splits a namespace name made by [`netns_name`] into `(lab, host)`.
pub fn parse_netns_name(netns: &str) -> Option<(&str, &str)> {
    let rest = netns.strip_prefix(NETNS_PREFIX)?;
    let (lab, host) = rest.rsplit_once('-')?;
    let host_ok = !host.is_empty() && host.chars().all(|c| c.is_ascii_lowercase());
    (validate_name(lab).is_ok() && host_ok).then_some((lab, host))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unique_names_differ_and_fit_the_interface_name_limit() {
        let a = unique_name();
        let b = unique_name();
        assert_ne!(a, b);
        for n in [a, b] {
            assert!(n.len() <= 15, "{n}");
            validate_name(&n).unwrap();
        }
    }

    #[test]
    fn automatic_names_give_their_pid_and_no_other_name_does() {
        assert_eq!(auto_name_pid(&unique_name()), Some(std::process::id()));
        assert_eq!(auto_name_pid("t24342-0"), Some(24342));
        for other in ["demo", "t-1", "t12", "t12-", "t12-x", "tx-1", "t1-2-3", "a12-3"] {
            assert_eq!(auto_name_pid(other), None, "{other}");
        }
    }

    #[test]
    fn lab_names_are_checked() {
        for good in ["demo", "t123-4", "a", "0x-1"] {
            validate_name(good).unwrap();
        }
        for bad in ["", "-x", "Demo", "a b", "a/b", "sixteen-chars-xx"] {
            assert!(validate_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn netns_names_round_trip_even_with_dashes_in_the_lab_name() {
        let ns = netns_name("t42-7", "b");
        assert_eq!(ns, "nicbench-t42-7-b");
        assert_eq!(parse_netns_name(&ns), Some(("t42-7", "b")));
        assert_eq!(parse_netns_name("other-ns"), None);
        assert_eq!(parse_netns_name("nicbench-x"), None);
    }
}
