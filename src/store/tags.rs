//! User tags on a run: `--tag nic=pro1000mt --tag mtu=9000`.

use std::fmt;
use std::str::FromStr;

/// The tags a fan-out test (`nicbench multicast`) puts on the run it
/// saves for each agent: the test they share, the agent as the command
/// line named it, and whether it is the one the test reports (`true` or
/// `false`). The report puts a test's runs back together by them.
pub const FANOUT_RUN: &str = "fanout_run";
pub const FANOUT_AGENT: &str = "agent";
pub const FANOUT_SLOWEST: &str = "slowest";

/// One `key=value` tag. Keys: a letter, then letters, digits, `_`, `-`,
/// `.` (at most 64); values: 1 to 256 printable characters.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Tag {
    pub key: String,
    pub value: String,
}

impl FromStr for Tag {
    type Err = String;

    fn from_str(s: &str) -> Result<Tag, String> {
        let (key, value) = s
            .split_once('=')
            .ok_or_else(|| format!("invalid tag '{s}': expected KEY=VALUE, e.g. nic=pro1000mt"))?;
        Tag::from_key(key).map_err(|e| format!("{e} (in '{s}')"))?;
        if value.is_empty() || value.chars().count() > 256 || value.chars().any(char::is_control) {
            return Err(format!(
                "invalid tag value in '{s}': expected 1 to 256 characters without control characters"
            ));
        }
        Ok(Tag {
            key: key.to_string(),
            value: value.to_string(),
        })
    }
}

impl Tag {
    /// Checks a tag key alone (`compare --rows tag:KEY`).
    pub fn from_key(key: &str) -> Result<(), String> {
        let key_ok = key.len() <= 64
            && key.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
            && key.chars().all(|c| c.is_ascii_alphanumeric() || "_-.".contains(c));
        if key_ok {
            Ok(())
        } else {
            Err(format!(
                "invalid tag key '{key}': a key starts with a letter and holds only letters, \
                 digits, '_', '-' and '.' (at most 64)"
            ))
        }
    }
}

/// `key=value`, the value in double quotes when it holds a blank or a
/// quote (`case="TCP, 256 KiB writes"`): in a list of tags split by
/// blanks, an unquoted `case=TCP, 256 KiB writes` made its words look
/// like other tags.
impl fmt::Display for Tag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.value.chars().any(|c| c.is_whitespace() || c == '"' || c == '\'') {
            let quoted = self.value.replace('\\', "\\\\").replace('"', "\\\"");
            write!(f, "{}=\"{quoted}\"", self.key)
        } else {
            write!(f, "{}={}", self.key, self.value)
        }
    }
}

/// Refuses the same key twice on one run.
pub fn check_unique(tags: &[Tag]) -> Result<(), String> {
    for (i, tag) in tags.iter().enumerate() {
        if tags[..i].iter().any(|t| t.key == tag.key) {
            return Err(format!(
                "tag key '{}' given twice: a run has one value per key",
                tag.key
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_parse_and_bad_ones_say_why() {
        let t: Tag = "nic=pro1000mt".parse().unwrap();
        assert_eq!((t.key.as_str(), t.value.as_str()), ("nic", "pro1000mt"));
        assert_eq!("note=a=b".parse::<Tag>().unwrap().value, "a=b");
        assert!("nic".parse::<Tag>().unwrap_err().contains("expected KEY=VALUE"));
        assert!("9nic=x".parse::<Tag>().unwrap_err().contains("starts with a letter"));
        assert!("nic=".parse::<Tag>().unwrap_err().contains("1 to 256"));
        assert!(check_unique(&["a=1".parse().unwrap(), "a=2".parse().unwrap()]).is_err());
    }

    #[test]
    fn a_value_with_blanks_or_quotes_is_shown_quoted() {
        let tag = |s: &str| s.parse::<Tag>().unwrap().to_string();
        assert_eq!(tag("nic=pro1000mt"), "nic=pro1000mt");
        assert_eq!(tag("case=TCP, 256 KiB writes"), r#"case="TCP, 256 KiB writes""#);
        assert_eq!(tag(r#"note=say "hi""#), r#"note="say \"hi\"""#);
        assert_eq!(tag(r"path=a\b c"), r#"path="a\\b c""#);
    }
}
