//! Quoting for a POSIX shell: a command line shown back to the user (the
//! stored `command`, the retry hint of a plan, a mesh's peer commands) so
//! it can be pasted and run as it stands; and the commands a hint names
//! ([`Given::command`]), with the options the user gave that decide what
//! they act on.

use std::path::PathBuf;

/// `arg` as one shell word: unchanged when it holds only characters no
/// shell treats specially, else in single quotes (an inner `'` written as
/// `'\''`).
pub fn quote(arg: &str) -> String {
    if !arg.is_empty()
        && arg
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:=,@%+".contains(c))
    {
        arg.to_string()
    } else {
        format!("'{}'", arg.replace('\'', r"'\''"))
    }
}

/// `args` as one line of shell words.
pub fn join<S: AsRef<str>>(args: impl IntoIterator<Item = S>) -> String {
    args.into_iter()
        .map(|a| quote(a.as_ref()))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The options a user gave that decide what a later command acts on: the
/// results database, the agent's port, the agent's key. A hint that names
/// a command renders it through [`Given::command`], so that following the
/// hint reaches the same database or agent ("`nicbench runs --db rev.db`
/// lists the ids", not "`nicbench runs`", which opens another one).
/// Each field is set only where the user's command gave it and the hinted
/// command takes it; `None` leaves the option out.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Given {
    /// `--db PATH`: a database other than the one a command opens by itself.
    pub db: Option<PathBuf>,
    /// `-p PORT`: the agent's port, when not the default one.
    pub port: Option<u16>,
    /// `--psk-file FILE`: the agent's key.
    pub psk_file: Option<PathBuf>,
}

impl Given {
    /// Only the database, when one was named.
    pub fn db(db: Option<PathBuf>) -> Given {
        Given { db, ..Given::default() }
    }

    /// `nicbench WORDS...` then the given options, as one line of shell
    /// words (each quoted as [`quote`] does). A word holding a placeholder
    /// (`ID`, `FILE`) is the caller's to write as it wants it shown.
    pub fn command(&self, words: &[&str]) -> String {
        let mut line: Vec<String> = vec!["nicbench".into()];
        line.extend(words.iter().map(|w| w.to_string()));
        if let Some(port) = self.port {
            line.extend(["-p".into(), port.to_string()]);
        }
        if let Some(key) = &self.psk_file {
            line.extend(["--psk-file".into(), key.display().to_string()]);
        }
        if let Some(db) = &self.db {
            line.extend(["--db".into(), db.display().to_string()]);
        }
        join(line)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hinted_command_carries_the_options_given() {
        let nothing = Given::default();
        assert_eq!(nothing.command(&["runs"]), "nicbench runs");
        let db = Given::db(Some("rev.db".into()));
        assert_eq!(db.command(&["runs"]), "nicbench runs --db rev.db");
        assert_eq!(db.command(&["rm", "7"]), "nicbench rm 7 --db rev.db");
        let agent = Given {
            port: Some(5400),
            psk_file: Some("/etc/my key.psk".into()),
            ..Given::default()
        };
        assert_eq!(
            agent.command(&["host", "--remote", "b"]),
            "nicbench host --remote b -p 5400 --psk-file '/etc/my key.psk'"
        );
    }

    #[test]
    fn plain_words_stay_as_they_are() {
        assert_eq!(quote("--repeat"), "--repeat");
        assert_eq!(quote("10.0.0.1:5310"), "10.0.0.1:5310");
        assert_eq!(quote("a=b,c@d%e+f"), "a=b,c@d%e+f");
    }

    #[test]
    fn spaces_empties_and_shell_characters_are_quoted() {
        assert_eq!(quote(""), "''");
        assert_eq!(quote("two words"), "'two words'");
        assert_eq!(quote("$HOME"), "'$HOME'");
        assert_eq!(quote("a;b"), "'a;b'");
    }

    #[test]
    fn a_single_quote_survives_a_round_trip_through_sh() {
        let arg = "it's";
        assert_eq!(quote(arg), r"'it'\''s'");
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!("printf %s {}", quote(arg)))
            .output()
            .expect("sh runs");
        assert_eq!(String::from_utf8_lossy(&out.stdout), arg);
    }

    #[test]
    fn join_quotes_each_word() {
        assert_eq!(join(["nicbench", "tcp", "a b"]), "nicbench tcp 'a b'");
    }
}
