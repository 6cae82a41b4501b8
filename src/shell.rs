//! Quoting for a POSIX shell: a command line shown back to the user (the
//! stored `command`, the retry hint of a plan, a mesh's peer commands) so
//! it can be pasted and run as it stands.

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

#[cfg(test)]
mod tests {
    use super::*;

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
