//! No workload name outside `src/workload/` (docs/ARCHITECTURE.md): a path
//! that reaches into a workload's folder (`crate::workload::sweep::KEY`,
//! `use crate::workload::rr::RrParams`), a string literal that is a
//! registered workload's name (`"sweep"`), or an identifier that is the
//! name in UpperCamelCase (`Chart::Sweep`). The names come from the
//! registry itself (the library's `workload::names()`) and the folders from
//! the entries of `REGISTRY` in `src/workload/mod.rs`; no word list.
//!
//! The names still outside are counted per file in
//! `tests/cli/layers/workload_names.txt`. A file may name workloads no
//! more often than counted there, so a new name anywhere fails with its
//! line; a file that names them less often fails too until its count is
//! lowered, so the list only shrinks as the names move into their folders.

use std::collections::BTreeMap;
use std::path::Path;

use super::files::File;
use super::source;

/// One workload name outside `src/workload/`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leak {
    pub file: String,
    pub line: usize,
    pub what: String,
}

/// The module of each registered workload's folder, read from the entries
/// of `REGISTRY` (`&tcp_stream::TcpStream` is `tcp_stream`).
pub fn workload_modules(registry_source: &str) -> Vec<String> {
    let start = registry_source
        .find("pub static REGISTRY")
        .expect("src/workload/mod.rs defines REGISTRY");
    let body = &registry_source[start..];
    let open = body.find("= &[").expect("REGISTRY is a slice") + 4;
    let body = &body[open..body.find("];").expect("REGISTRY ends")];
    body.split(',')
        .filter_map(|entry| {
            let entry = entry.trim().trim_start_matches('&');
            entry.split_once("::").map(|(module, _)| module.trim().to_string())
        })
        .filter(|m| !m.is_empty())
        .collect()
}

/// Every string literal of `source` that is not in a comment, with its
/// line: normal, byte and raw strings, escapes left as written.
pub fn literals(source: &str) -> Vec<(usize, String)> {
    let chars: Vec<char> = source.chars().collect();
    let mut found = Vec::new();
    let (mut i, mut line) = (0, 1);
    let newlines = |from: usize, to: usize, chars: &[char]| chars[from..to].iter().filter(|&&c| c == '\n').count();
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '\n' {
            line += 1;
            i += 1;
        } else if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let (start, mut depth) = (i, 0);
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            line += newlines(start, i, &chars);
        } else if c == 'r' && matches!(next, Some('"' | '#')) && !source::is_ident(chars.get(i.wrapping_sub(1))) {
            let hashes = chars[i + 1..].iter().take_while(|&&h| h == '#').count();
            if chars.get(i + 1 + hashes) != Some(&'"') {
                i += 1;
                continue;
            }
            let start = i + 2 + hashes;
            let mut end = start;
            while end < chars.len()
                && !(chars[end] == '"' && chars[end + 1..].iter().take(hashes).filter(|&&h| h == '#').count() == hashes)
            {
                end += 1;
            }
            found.push((line, chars[start..end].iter().collect()));
            line += newlines(start, end.min(chars.len()), &chars);
            i = end + 1 + hashes;
        } else if c == '"' {
            let start = i + 1;
            let mut end = start;
            while end < chars.len() && chars[end] != '"' {
                end += if chars[end] == '\\' { 2 } else { 1 };
            }
            let end = end.min(chars.len());
            found.push((line, chars[start..end].iter().collect()));
            line += newlines(start, end, &chars);
            i = end + 1;
        } else if c == '\'' && (next == Some('\\') || chars.get(i + 2) == Some(&'\'')) {
            // A character literal ('"', '\n', '\''); a lifetime ('a) is code.
            i += if next == Some('\\') { 2 } else { 1 };
            while i < chars.len() && chars[i] != '\'' {
                i += 1;
            }
            i += 1;
        } else {
            i += 1;
        }
    }
    found
}

/// The lines of `source`'s inline test modules (`#[cfg(test)] mod x {
/// ... }`), first and last.
pub fn test_spans(source: &str) -> Vec<(usize, usize)> {
    let code = source::code_only(source);
    let line_at = |at: usize| code[..at].matches('\n').count() + 1;
    let mut spans = Vec::new();
    let mut from = 0;
    while let Some(found) = code[from..].find("#[cfg(test)]") {
        let start = from + found;
        from = start + 1;
        let rest = &code[start + "#[cfg(test)]".len()..];
        // Other attributes may stand between; a `mod x;` has no body here.
        let Some(module) = rest.find("mod ") else { break };
        let (Some(open), semicolon) = (rest[module..].find('{'), rest[module..].find(';')) else {
            continue;
        };
        if semicolon.is_some_and(|s| s < open) || !rest[..module].trim().chars().all(|c| c != '{' && c != ';') {
            continue;
        }
        let body = start + "#[cfg(test)]".len() + module + open;
        let mut depth = 0;
        for (offset, c) in code[body..].char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        spans.push((line_at(start), line_at(body + offset)));
                        from = body + offset;
                        break;
                    }
                }
                _ => {}
            }
        }
    }
    spans
}

/// Every workload name in `files` outside `src/workload/`: paths into a
/// folder of `modules`, literals equal to one of `names`. Test code is
/// left out (a test module, inline or in a file of its own): a fixture
/// has to be some workload's run.
pub fn leaks(files: &[File], modules: &[String], names: &[String]) -> Vec<Leak> {
    let mut all = Vec::new();
    let product = |f: &&File| f.top() != Some("workload") && !f.module.iter().any(|m| m == "tests");
    for file in files.iter().filter(product) {
        let tests = test_spans(&file.source);
        let in_tests = |line: usize| tests.iter().any(|&(first, last)| (first..=last).contains(&line));
        let mut seen_lines = BTreeMap::new();
        for written in file.read.paths.iter().filter(|w| !in_tests(w.line)) {
            let Some(path) = source::absolute(written, &file.module) else {
                continue;
            };
            if path.first().is_some_and(|m| m == "workload") && path.get(1).is_some_and(|m| modules.contains(m)) {
                // `use crate::workload::rr::{a, b}` is one name on its line.
                if seen_lines.insert((written.line, path[1].clone()), ()).is_none() {
                    let (at, text) = file.at(written.line);
                    all.push(Leak {
                        file: at,
                        line: written.line,
                        what: format!("path into workload::{}: {text}", path[1]),
                    });
                }
            }
        }
        // Through a name a `use` binds to the workload module itself (`use
        // crate::workload;`, `use crate::workload::{self, ..}`):
        // `workload::files::Storage`.
        let aliases: Vec<&str> = file
            .read
            .paths
            .iter()
            .filter(|w| w.top_use)
            .filter(|w| source::absolute(w, &file.module).is_some_and(|p| p == ["workload"]))
            .filter_map(|w| w.binds.as_deref())
            .collect();
        let code = source::code_only(&file.source);
        for (index, text) in code.lines().enumerate() {
            let line = index + 1;
            if in_tests(line) {
                continue;
            }
            // A type or variant named after a workload (`Chart::Sweep`):
            // the name in UpperCamelCase as a whole identifier, not a part
            // of one (`SweepLine` names a shape, `TcpInfo` a kernel struct).
            for (module, name) in modules.iter().zip(names) {
                let camel = upper_camel(name);
                let named = text
                    .split(|c: char| !(c.is_alphanumeric() || c == '_'))
                    .any(|id| id == camel);
                if named && seen_lines.insert((line, module.clone()), ()).is_none() {
                    let (at, text) = file.at(line);
                    all.push(Leak {
                        file: at,
                        line,
                        what: format!("the identifier {camel}: {text}"),
                    });
                }
            }
            for alias in &aliases {
                for module in modules {
                    let written = format!("{alias}::{module}::");
                    let named = text.match_indices(&written).any(|(at, _)| {
                        let before = text[..at].chars().next_back();
                        !source::is_ident(before.as_ref()) && before != Some(':')
                    });
                    if named && seen_lines.insert((line, module.clone()), ()).is_none() {
                        let (at, text) = file.at(line);
                        all.push(Leak {
                            file: at,
                            line,
                            what: format!("path into workload::{module}: {text}"),
                        });
                    }
                }
            }
        }
        for (line, literal) in literals(&file.source) {
            if names.contains(&literal) && !in_tests(line) {
                let (at, text) = file.at(line);
                all.push(Leak {
                    file: at,
                    line,
                    what: format!("the literal \"{literal}\": {text}"),
                });
            }
        }
    }
    all.sort_by(|a, b| (&a.file, a.line).cmp(&(&b.file, b.line)));
    all
}

/// A workload's name as a type is written: `loaded` is `Loaded`,
/// `loaded-cdf` would be `LoadedCdf`.
pub fn upper_camel(name: &str) -> String {
    name.split(['_', '-'])
        .map(|part| {
            let mut chars = part.chars();
            chars
                .next()
                .map(|first| first.to_uppercase().chain(chars).collect::<String>())
                .unwrap_or_default()
        })
        .collect()
}

/// The counts of `workload_names.txt`: `src/path.rs COUNT` per line, `#`
/// comments and blank lines ignored.
pub fn counted(text: &str) -> BTreeMap<String, usize> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| {
            let (file, count) = l
                .rsplit_once(' ')
                .unwrap_or_else(|| panic!("'{l}': want `src/FILE COUNT`"));
            (
                file.trim().to_string(),
                count.parse().unwrap_or_else(|_| panic!("'{l}': a count")),
            )
        })
        .collect()
}

/// What is wrong with `found` against the counts: a file over its count
/// (every name in it listed, the new one among them), a file under it.
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
                "{file} names a workload {} time(s), {allowed} counted in tests/cli/layers/workload_names.txt; \
                 move what names it into src/workload/ (a hook of the workload, a figure it declares):\n{}",
                leaks.len(),
                lines.join("\n")
            ));
        }
    }
    for (file, &allowed) in counts {
        let now = by_file.get(file.as_str()).map_or(0, Vec::len);
        if now < allowed {
            problems.push(format!(
                "{file} names a workload {now} time(s), fewer than the {allowed} counted: lower its count in \
                 tests/cli/layers/workload_names.txt{}",
                if now == 0 { " (remove its line)" } else { "" }
            ));
        }
    }
    problems
}

/// The registry's names and folders, as the crate has them.
pub fn registry() -> (Vec<String>, Vec<String>) {
    let mod_rs = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("src/workload/mod.rs")).unwrap();
    let modules = workload_modules(&mod_rs);
    let names: Vec<String> = nicbench::workload::names().map(str::to_string).collect();
    assert_eq!(
        modules.len(),
        names.len(),
        "one folder per registered workload: {modules:?} {names:?}"
    );
    (modules, names)
}
