//! `nicbench man` and `nicbench completions`: generated from the same
//! definitions as --help, so they name every subcommand and option.

use std::process::Command;

use super::common::*;

const SUBCOMMANDS: [&str; 9] = ["serve", "tcp", "sweep", "udp", "rr", "demo", "host", "linerate", "lab"];

fn stdout_of(args: &[&str]) -> String {
    let out = nicbench(args);
    assert!(out.status.success(), "nicbench {args:?}: {}", stderr(&out));
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn man_prints_a_roff_page_naming_every_subcommand() {
    let page = stdout_of(&["man"]);
    assert!(page.contains(".TH nicbench 1"), "{page}");
    assert!(page.contains(".SH SUBCOMMANDS"), "{page}");
    for sub in SUBCOMMANDS {
        assert!(page.contains(&format!("nicbench\\-{sub}(1)")), "{sub} missing");
    }
    // The global options are there too.
    assert!(page.contains("\\-\\-verbose"), "{page}");
}

#[test]
fn man_out_writes_one_page_per_subcommand_with_its_options() {
    let dir = tempfile::tempdir().unwrap();
    let listed = stdout_of(&["man", "--out", dir.path().to_str().unwrap()]);
    for sub in SUBCOMMANDS {
        let path = dir.path().join(format!("nicbench-{sub}.1"));
        assert!(path.exists(), "{} missing; listed:\n{listed}", path.display());
        assert!(listed.contains(path.to_str().unwrap()), "{listed}");
    }
    assert!(dir.path().join("nicbench.1").exists());
    assert!(
        dir.path().join("nicbench-lab-up.1").exists(),
        "nested subcommands get pages"
    );
    let tcp = std::fs::read_to_string(dir.path().join("nicbench-tcp.1")).unwrap();
    assert!(tcp.contains(".TH nicbench-tcp 1"), "{tcp}");
    for option in ["\\-\\-link\\-speed", "\\-\\-link\\-overhead", "\\-\\-json"] {
        assert!(tcp.contains(option), "{option} missing from nicbench-tcp.1");
    }
    // man(1) itself reads what was written: last, as require! ends the test.
    require!(crate::common::tool("man", &["--version"], "apt-get install man-db"));
    let out = Command::new("man")
        .arg("-l")
        .arg(dir.path().join("nicbench-tcp.1"))
        .env("MANPAGER", "cat")
        .output()
        .unwrap();
    assert!(out.status.success(), "man -l: {}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("link-overhead"), "{text}");
}

#[test]
fn completions_for_bash_zsh_and_fish_name_subcommands_and_options() {
    for shell in ["bash", "zsh", "fish"] {
        let script = stdout_of(&["completions", shell]);
        for sub in SUBCOMMANDS {
            assert!(script.contains(sub), "{shell}: {sub} missing");
        }
        assert!(script.contains("link-overhead"), "{shell}: --link-overhead missing");
    }
    assert!(stdout_of(&["completions", "bash"]).contains("complete -F _nicbench"));
    assert!(stdout_of(&["completions", "zsh"]).starts_with("#compdef nicbench"));
    assert!(stdout_of(&["completions", "fish"]).contains("complete -c nicbench"));
    let out = nicbench(&["completions", "ksh"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("bash, zsh, fish"), "{}", stderr(&out));
}

#[test]
fn bash_accepts_the_completion_script() {
    let script = stdout_of(&["completions", "bash"]);
    let Ok(out) = Command::new("bash")
        .args(["-c", "source /dev/stdin && complete -p nicbench"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write;
            child.stdin.take().unwrap().write_all(script.as_bytes())?;
            child.wait_with_output()
        })
    else {
        panic!("bash is part of the base system here and must run");
    };
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("_nicbench"));
}
