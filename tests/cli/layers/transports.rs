//! No transport named by a workload (issue 68): outside
//! `src/workload/transport/`, a workload's production code names no
//! transport's folder (`transport::tls::..`, `use super::transport::{quic,
//! ..}`) and none of `Proto`'s constants (`Proto::QUIC`). It gets what it
//! needs through the `Transport` trait. The transports' names come from
//! the library's own registry (`workload::transport::REGISTRY`); no word
//! list.
//!
//! The names still there are counted per file in
//! `tests/cli/layers/transport_names.txt`, as `workload_names.txt` counts
//! workload names outside `src/workload/`: a file may name transports no
//! more often than counted, and a file that names them less often fails
//! until its count is lowered, so the list only shrinks.

use std::collections::BTreeMap;

use super::files::File;
use super::names::{test_spans, Leak};
use super::source;

/// The registered transports' names (`tcp`, `quic`), which are also their
/// modules under `workload/transport/`.
pub fn registry() -> Vec<String> {
    nicbench::workload::transport::REGISTRY
        .iter()
        .map(|t| t.name().to_string())
        .collect()
}

/// Whether `text` holds `written` as a path segment of its own: not the
/// tail of a longer name before it, nor the head of one after it.
fn names_path(text: &str, written: &str) -> bool {
    text.match_indices(written).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + written.len()..].chars().next();
        !source::is_ident(before.as_ref()) && !source::is_ident(after.as_ref())
    })
}

/// Every line of a workload's production code in `files` that names one
/// of `transports`: a path into its folder (through `crate::`, `super::`,
/// a `use` group, or a name bound to `workload::transport`) or its `Proto`
/// constant. Test code is left out.
pub fn leaks(files: &[File], transports: &[String]) -> Vec<Leak> {
    let mut all = Vec::new();
    let workload = |f: &&File| {
        f.top() == Some("workload")
            && f.module.get(1).is_some_and(|m| m != "transport")
            && !f.module.iter().any(|m| m == "tests")
    };
    for file in files.iter().filter(workload) {
        let tests = test_spans(&file.source);
        let in_tests = |line: usize| tests.iter().any(|&(first, last)| (first..=last).contains(&line));
        let mut seen: BTreeMap<usize, ()> = BTreeMap::new();
        let mut push = |line: usize, what: String| {
            if seen.insert(line, ()).is_none() {
                let (at, text) = file.at(line);
                all.push(Leak {
                    file: at,
                    line,
                    what: format!("{what}: {text}"),
                });
            }
        };
        for written in file.read.paths.iter().filter(|w| !in_tests(w.line)) {
            let Some(path) = source::absolute(written, &file.module) else {
                continue;
            };
            if path.len() > 2 && path[..2] == ["workload", "transport"] && transports.contains(&path[2]) {
                push(written.line, format!("path into transport::{}", path[2]));
            }
        }
        let code = source::code_only(&file.source);
        for (index, text) in code.lines().enumerate() {
            let line = index + 1;
            if in_tests(line) {
                continue;
            }
            for name in transports {
                if names_path(text, &format!("transport::{name}")) {
                    push(line, format!("path into transport::{name}"));
                }
                if names_path(text, &format!("Proto::{}", name.to_uppercase())) {
                    push(line, format!("the constant Proto::{}", name.to_uppercase()));
                }
            }
        }
    }
    all.sort_by(|a, b| (&a.file, a.line).cmp(&(&b.file, b.line)));
    all
}

/// What is wrong with `found` against the counts: a file over its count
/// (every line listed, the new one among them), a file under it.
pub fn against(found: &[Leak], counts: &BTreeMap<String, usize>) -> Vec<String> {
    let mut by_file: BTreeMap<&str, Vec<&Leak>> = BTreeMap::new();
    for leak in found {
        by_file.entry(&leak.file).or_default().push(leak);
    }
    let mut problems = Vec::new();
    for (file, leaks) in &by_file {
        let allowed = counts.get(*file).copied().unwrap_or(0);
        if leaks.len() > allowed {
            let lines: Vec<String> = leaks
                .iter()
                .map(|l| format!("  {}:{}: {}", l.file, l.line, l.what))
                .collect();
            problems.push(format!(
                "{file} names a transport on {} line(s), {allowed} counted in tests/cli/layers/transport_names.txt; \
                 ask the Transport trait instead (refuse, write_details, serve/dial):\n{}",
                leaks.len(),
                lines.join("\n")
            ));
        }
    }
    for (file, &allowed) in counts {
        let now = by_file.get(file.as_str()).map_or(0, Vec::len);
        if now < allowed {
            problems.push(format!(
                "{file} names a transport on {now} line(s), fewer than the {allowed} counted: lower its count in \
                 tests/cli/layers/transport_names.txt{}",
                if now == 0 { " (remove its line)" } else { "" }
            ));
        }
    }
    problems
}
