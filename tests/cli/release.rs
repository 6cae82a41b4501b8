//! What contrib/release.sh builds for hosts without Rust (issue 47): the
//! binary for glibc 2.17 and later asks for no newer symbol version and is
//! the version this crate is; the Debian package holds that binary, a
//! manual page per subcommand, the completions, the unit with its
//! hardening drop-in, the options file as a conffile and the scripts that
//! make the key. Installing it is checked by contrib/debian/check-install.sh,
//! which .ci/run runs as root on its clean machine.
//! Without the artifacts (contrib/release.sh not run) each test says so and
//! returns, and fails under CI, whose .ci/run builds them first.

use std::path::PathBuf;
use std::process::Command;

use super::common::*;

const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The artifact `name` in target/release-artifacts, or None (skipped,
/// failed under CI) when contrib/release.sh has not made it.
fn artifact(name: &str) -> Option<PathBuf> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("target/release-artifacts")
        .join(name);
    if path.is_file() {
        return Some(path);
    }
    skip_or_fail(&format!(
        "{} is missing: contrib/release.sh builds it (needs cargo-zigbuild and zig)",
        path.display()
    ));
    None
}

fn run(program: &str, args: &[&str]) -> String {
    let out = Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{program}: {e}"));
    assert!(out.status.success(), "{program} {args:?}: {}", stderr(&out));
    String::from_utf8(out.stdout).unwrap()
}

/// Every GLIBC_x.y version the binary's dynamic symbols need.
fn glibc_versions(binary: &str) -> Vec<Vec<u32>> {
    let symbols = run("objdump", &["-T", binary]);
    let mut versions: Vec<Vec<u32>> = symbols
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '.'))
        .filter_map(|word| word.strip_prefix("GLIBC_"))
        .map(|v| v.split('.').map(|n| n.parse().unwrap()).collect())
        .collect();
    versions.sort();
    versions.dedup();
    versions
}

#[test]
fn the_compat_binary_needs_no_glibc_newer_than_2_17() {
    let Some(binary) = artifact(&format!("nicbench-{VERSION}-x86_64-linux-gnu")) else {
        return;
    };
    let binary = binary.to_str().unwrap();
    let versions = glibc_versions(binary);
    let highest = versions.last().expect("a glibc binary names GLIBC_ versions");
    assert!(
        *highest <= vec![2, 17],
        "{binary} needs GLIBC_{}: {versions:?}",
        highest.iter().map(u32::to_string).collect::<Vec<_>>().join(".")
    );
    assert_eq!(run(binary, &["--version"]).trim(), format!("nicbench {VERSION}"));
    // The binary the tests run is the newer glibc's: the check can fail.
    let native = glibc_versions(BIN);
    assert!(native.last().unwrap() > &vec![2, 17], "{native:?}");
}

#[test]
fn the_package_holds_the_binary_its_manual_completions_unit_and_key_scripts() {
    let Some(deb) = artifact(&format!("nicbench_{VERSION}_amd64.deb")) else {
        return;
    };
    let deb = deb.to_str().unwrap();
    let field = |name: &str| run("dpkg-deb", &["-f", deb, name]).trim().to_string();
    assert_eq!(field("Package"), "nicbench");
    assert_eq!(field("Version"), VERSION);
    assert_eq!(field("Architecture"), "amd64");
    assert_eq!(field("Depends"), "libc6 (>= 2.17)", "the compat binary's floor");
    let files: Vec<String> = run("dpkg-deb", &["-c", deb])
        .lines()
        .map(|l| l.rsplit(' ').next().unwrap().trim_start_matches('.').to_string())
        .collect();
    for want in [
        "/usr/bin/nicbench",
        "/usr/share/man/man1/nicbench.1.gz",
        "/usr/share/bash-completion/completions/nicbench",
        "/usr/share/zsh/vendor-completions/_nicbench",
        "/usr/share/fish/vendor_completions.d/nicbench.fish",
        "/usr/lib/systemd/system/nicbench.service",
        "/usr/lib/systemd/system/nicbench.service.d/hardening.conf",
        "/etc/default/nicbench",
        "/usr/share/doc/nicbench/copyright",
        "/usr/share/doc/nicbench/changelog.gz",
        "/usr/share/lintian/overrides/nicbench",
    ] {
        assert!(files.iter().any(|f| f == want), "{want} not in {deb}: {files:?}");
    }
    // A page per subcommand, as `nicbench man --out` writes them.
    let pages = tempfile::tempdir().unwrap();
    let out = Command::new(BIN)
        .args(["man", "--out"])
        .arg(pages.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    for page in std::fs::read_dir(pages.path()).unwrap() {
        let name = page.unwrap().file_name().to_string_lossy().into_owned();
        let packaged = format!("/usr/share/man/man1/{name}.gz");
        assert!(files.contains(&packaged), "{packaged} not in {deb}");
    }
    // The unit starts the agent only with the key the postinst makes.
    let unpacked = tempfile::tempdir().unwrap();
    let dir = unpacked.path().to_str().unwrap();
    run("dpkg-deb", &["-R", deb, dir]);
    let unit = std::fs::read_to_string(unpacked.path().join("usr/lib/systemd/system/nicbench.service")).unwrap();
    assert!(unit.contains("LoadCredential=psk:/etc/nicbench/psk"), "{unit}");
    assert!(
        unit.contains("ExecStart=/usr/bin/nicbench serve") && unit.contains("--psk-file %d/psk"),
        "{unit}"
    );
    let postinst = std::fs::read_to_string(unpacked.path().join("DEBIAN/postinst")).unwrap();
    assert!(
        postinst.contains("/etc/nicbench/psk") && postinst.contains("0600"),
        "{postinst}"
    );
    assert_eq!(
        std::fs::read_to_string(unpacked.path().join("DEBIAN/conffiles")).unwrap(),
        "/etc/default/nicbench\n"
    );
    // The packaged binary is the compat one.
    let packaged = unpacked.path().join("usr/bin/nicbench");
    let versions = glibc_versions(packaged.to_str().unwrap());
    assert!(*versions.last().unwrap() <= vec![2, 17], "{versions:?}");
}
