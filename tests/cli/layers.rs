//! The dependency rule of DESIGN.md, checked on the source: the bottom
//! layers (model, protocol, probes, units, stats, line rate) import nothing
//! from the layers that run tests (workloads, sessions, the agent, the plan
//! runner, commands). A cycle there once tied 21 files together.

use std::path::{Path, PathBuf};

/// Modules (paths under `src/`) and the crate paths they must not name.
const RULES: &[(&str, &[&str])] = &[
    ("model", ABOVE_MODEL),
    ("protocol", ABOVE_MODEL),
    ("probe", ABOVE_MODEL),
    ("units.rs", ABOVE_MODEL),
    ("stats.rs", ABOVE_MODEL),
    ("linerate.rs", ABOVE_MODEL),
];

const ABOVE_MODEL: &[&str] = &[
    "crate::workload",
    "crate::agent",
    "crate::session",
    "crate::cmd",
    "crate::cli",
    "crate::repeat",
    "crate::trial",
    "crate::report",
    "crate::verdict",
    "crate::lab",
];

fn rust_files(path: &Path, out: &mut Vec<PathBuf>) {
    if path.is_dir() {
        for entry in std::fs::read_dir(path).unwrap() {
            rust_files(&entry.unwrap().path(), out);
        }
    } else if path.extension().is_some_and(|e| e == "rs") {
        out.push(path.to_path_buf());
    }
}

#[test]
fn bottom_layers_import_nothing_from_above() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut violations = Vec::new();
    for (module, forbidden) in RULES {
        let mut files = Vec::new();
        rust_files(&src.join(module), &mut files);
        assert!(!files.is_empty(), "no source found for {module}");
        for file in files {
            let text = std::fs::read_to_string(&file).unwrap();
            for (number, line) in text.lines().enumerate() {
                let code = line.split("//").next().unwrap_or("");
                for path in *forbidden {
                    if code.contains(path) {
                        violations.push(format!("{}:{}: {}", file.display(), number + 1, line.trim()));
                    }
                }
            }
        }
    }
    assert!(
        violations.is_empty(),
        "the bottom layers import from above them:\n{}",
        violations.join("\n")
    );
}
