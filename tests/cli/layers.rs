//! The layers of docs/ARCHITECTURE.md, checked on the source. Every
//! top-level module of `src/` has a floor; a module may name modules on
//! lower floors, and modules on its own floor only where no circle forms;
//! never one above it. The test reads every `crate::` path in the code of
//! `src/` (comments and string literals left out, `use crate::{a, b}` groups
//! opened) and prints each offending import as `file:line`.
//!
//! A new top-level module gets a floor here and in ARCHITECTURE.md, or the
//! test fails.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Floors, top (1) to bottom (9), as drawn in docs/ARCHITECTURE.md.
const FLOORS: &[(&str, u8)] = &[
    // The binary.
    ("main", 1),
    // The command line: one function per subcommand (presentation only),
    // and the clap definitions those functions are handed.
    ("cmd", 2),
    ("cli", 2),
    // What runs many tests: plans, meshes, the agent, the lab.
    ("plan", 3),
    ("agent", 3),
    ("lab", 3),
    // One test, client side; iperf3's protocol as an adapter over it.
    ("session", 4),
    ("iperf3", 4),
    // What a test's results become, and one side of a trial.
    ("repeat", 5),
    ("side_runner", 5),
    ("verdict", 5),
    ("report", 5),
    ("metrics", 5),
    ("store", 5),
    ("mesh", 5),
    // Traffic engines behind one trait, and the multi-link aggregate.
    ("workload", 6),
    ("multilink", 6),
    // Host probes, control messages, addresses as users write them.
    ("probe", 7),
    ("protocol", 7),
    ("address", 7),
    ("lab_env", 7),
    // Result types.
    ("model", 8),
    // Plain values and helpers that name nothing in the crate.
    ("units", 9),
    ("stats", 9),
    ("linerate", 9),
    ("logging", 9),
    ("shell", 9),
    ("csv_out", 9),
    ("outside_text", 9),
];

/// One `crate::` path in the code: where it is, and which top-level
/// modules it goes from and to.
#[derive(Debug, Clone)]
struct Import {
    from: String,
    to: String,
    file: String,
    line: usize,
    text: String,
}

fn floor(module: &str) -> Option<u8> {
    FLOORS.iter().find(|(name, _)| *name == module).map(|&(_, floor)| floor)
}

/// The top-level module a file under `src/` belongs to: `src/a.rs`,
/// `src/a/...` and `src/a_tests.rs` (a `#[path]` test module) are `a`;
/// None for `lib.rs`, which only declares the modules.
fn module_of(relative: &Path) -> Option<String> {
    let first = relative.components().next()?.as_os_str().to_str()?;
    let name = first.strip_suffix(".rs").unwrap_or(first);
    if name == "lib" {
        return None;
    }
    Some(name.strip_suffix("_tests").unwrap_or(name).to_string())
}

/// `source` with comments and the insides of string and character
/// literals replaced by spaces; newlines are kept, so line numbers hold.
fn code_only(source: &str) -> String {
    let chars: Vec<char> = source.chars().collect();
    let mut out = String::with_capacity(source.len());
    let blank = |c: char| if c == '\n' { '\n' } else { ' ' };
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                out.push(' ');
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    out.push(blank(chars[i]));
                    i += 1;
                }
            }
        } else if c == 'r' && (next == Some('"') || next == Some('#')) && !is_ident(chars.get(i.wrapping_sub(1))) {
            // A raw string: r"..." or r#"..."#.
            let hashes = chars[i + 1..].iter().take_while(|&&h| h == '#').count();
            if chars.get(i + 1 + hashes) != Some(&'"') {
                out.push(c);
                i += 1;
                continue;
            }
            out.push('"');
            i += 2 + hashes;
            while i < chars.len() {
                if chars[i] == '"' && chars[i + 1..].iter().take(hashes).filter(|&&h| h == '#').count() == hashes {
                    i += 1 + hashes;
                    break;
                }
                out.push(blank(chars[i]));
                i += 1;
            }
            out.push('"');
        } else if c == '"' {
            out.push('"');
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                if chars[i] == '\\' {
                    out.push(' ');
                    i += 1;
                }
                if i < chars.len() {
                    out.push(blank(chars[i]));
                    i += 1;
                }
            }
            out.push('"');
            i += 1;
        } else if c == '\'' && (next == Some('\\') || chars.get(i + 2) == Some(&'\'')) {
            // A character literal ('x', '\n', '\''); a lifetime ('a) is code.
            out.push('\'');
            i += 1;
            if chars.get(i) == Some(&'\\') {
                out.push(' ');
                i += 1;
            }
            while i < chars.len() && chars[i] != '\'' {
                out.push(' ');
                i += 1;
            }
            out.push('\'');
            i += 1;
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

fn is_ident(c: Option<&char>) -> bool {
    c.is_some_and(|c| c.is_alphanumeric() || *c == '_')
}

/// The top-level modules named by `crate::` paths in `code` (already
/// stripped by [`code_only`]), with the line each is on. `use crate::{a,
/// b::c}` names `a` and `b`, across lines. In `main.rs`, the library is
/// `nicbench::`.
fn crate_paths(code: &str, root: &str) -> Vec<(usize, String)> {
    let prefix = format!("{root}::");
    let line_of = |at: usize| code[..at].matches('\n').count() + 1;
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(at) = code[from..].find(&prefix) {
        let start = from + at;
        from = start + prefix.len();
        let before = code[..start].chars().next_back();
        if is_ident(before.as_ref()) {
            continue; // `foocrate::`, not ours.
        }
        let rest = &code[from..];
        if let Some(group) = rest.strip_prefix('{') {
            let mut depth = 1;
            let mut item_start = true;
            let mut offset = from + 1;
            for (i, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    ',' if depth == 1 => item_start = true,
                    c if item_start && depth == 1 && is_ident(Some(&c)) => {
                        let name: String = group[i..].chars().take_while(|c| is_ident(Some(c))).collect();
                        if name != "self" {
                            found.push((line_of(offset + i), name));
                        }
                        item_start = false;
                    }
                    _ => {}
                }
                if depth == 0 {
                    offset += i;
                    break;
                }
            }
            from = offset;
        } else {
            let name: String = rest.chars().take_while(|c| is_ident(Some(c))).collect();
            if !name.is_empty() {
                found.push((line_of(start), name));
            }
        }
    }
    found
}

/// Every import between two different top-level modules in `files`
/// (paths relative to `src/`, and their text).
fn imports(files: &[(PathBuf, String)]) -> Vec<Import> {
    let mut all = Vec::new();
    for (path, source) in files {
        let Some(from) = module_of(path) else { continue };
        let root = if from == "main" { "nicbench" } else { "crate" };
        let lines: Vec<&str> = source.lines().collect();
        for (line, to) in crate_paths(&code_only(source), root) {
            if to != from {
                all.push(Import {
                    from: from.clone(),
                    to,
                    file: format!("src/{}", path.display()),
                    line,
                    text: lines.get(line - 1).unwrap_or(&"").trim().to_string(),
                });
            }
        }
    }
    all
}

/// Everything wrong with the layers of `files`: modules without a floor,
/// imports from a lower floor to a higher one, and circles between
/// top-level modules (each with the imports that close it).
fn violations(files: &[(PathBuf, String)]) -> Vec<String> {
    let imports = imports(files);
    let mut problems = Vec::new();
    let modules: BTreeSet<String> = files.iter().filter_map(|(p, _)| module_of(p)).collect();
    for module in &modules {
        if floor(module).is_none() {
            problems.push(format!(
                "src/{module}: no floor; give it one in tests/cli/layers.rs and docs/ARCHITECTURE.md"
            ));
        }
    }
    for i in &imports {
        let (Some(from), Some(to)) = (floor(&i.from), floor(&i.to)) else {
            continue;
        };
        if to < from {
            problems.push(format!(
                "{}:{}: upward import: {} (floor {from}) names {} (floor {to}): {}",
                i.file, i.line, i.from, i.to, i.text
            ));
        }
    }
    for circle in circles(&imports) {
        let inside: Vec<String> = imports
            .iter()
            .filter(|i| circle.contains(&i.from) && circle.contains(&i.to))
            .map(|i| format!("  {}:{}: {} -> {}: {}", i.file, i.line, i.from, i.to, i.text))
            .collect();
        let names: Vec<&str> = circle.iter().map(String::as_str).collect();
        problems.push(format!("circle between {}:\n{}", names.join(", "), inside.join("\n")));
    }
    problems
}

/// The sets of top-level modules that import each other, directly or
/// around a longer loop (strongly connected components of two or more).
fn circles(imports: &[Import]) -> Vec<BTreeSet<String>> {
    let mut edges: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for i in imports {
        edges.entry(&i.from).or_default().insert(&i.to);
        edges.entry(&i.to).or_default();
    }
    let reaches = |start: &str| {
        let mut seen = BTreeSet::new();
        let mut todo = vec![start];
        while let Some(m) = todo.pop() {
            for &next in &edges[m] {
                if seen.insert(next) {
                    todo.push(next);
                }
            }
        }
        seen
    };
    let reach: BTreeMap<&str, BTreeSet<&str>> = edges.keys().map(|&m| (m, reaches(m))).collect();
    let mut found: Vec<BTreeSet<String>> = Vec::new();
    for (&m, from_m) in &reach {
        let circle: BTreeSet<String> = from_m
            .iter()
            .filter(|&&other| other != m && reach[other].contains(m))
            .chain(std::iter::once(&m))
            .map(|s| s.to_string())
            .collect();
        if circle.len() > 1 && !found.contains(&circle) {
            found.push(circle);
        }
    }
    found
}

fn rust_files(root: &Path, path: &Path, out: &mut Vec<(PathBuf, String)>) {
    if path.is_dir() {
        for entry in std::fs::read_dir(path).unwrap() {
            rust_files(root, &entry.unwrap().path(), out);
        }
    } else if path.extension().is_some_and(|e| e == "rs") {
        let text = std::fs::read_to_string(path).unwrap();
        out.push((path.strip_prefix(root).unwrap().to_path_buf(), text));
    }
}

fn source_tree() -> Vec<(PathBuf, String)> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &src, &mut files);
    files.sort();
    files
}

#[test]
fn every_module_imports_only_from_below_and_without_circles() {
    let problems = violations(&source_tree());
    assert!(problems.is_empty(), "the layers are broken:\n{}", problems.join("\n"));
}

#[test]
fn every_declared_module_has_a_floor_and_every_floor_a_module() {
    let lib = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("src/lib.rs")).unwrap();
    let declared: BTreeSet<&str> = lib
        .lines()
        .filter_map(|l| l.strip_prefix("pub mod ")?.strip_suffix(';'))
        .collect();
    let floors: BTreeSet<&str> = FLOORS.iter().map(|(m, _)| *m).filter(|m| *m != "main").collect();
    assert_eq!(
        declared, floors,
        "src/lib.rs and the floors here list different modules"
    );
}

/// The floors drawn in the code block of docs/ARCHITECTURE.md's "Layers":
/// a line `N names  description` opens floor N, a line `  names  description`
/// adds to it, a line indented further continues a description.
fn drawn_floors(map: &str) -> BTreeSet<(String, u8)> {
    let section = map
        .split("## Layers")
        .nth(1)
        .expect("docs/ARCHITECTURE.md has a Layers section");
    let block = section
        .split("```")
        .nth(1)
        .expect("the Layers section draws the floors in a code block");
    let mut floor = 0;
    let mut drawn = BTreeSet::new();
    for line in block.lines().skip(1) {
        let (head, rest) = line.split_at(line.len().min(2));
        if let Ok(n) = head.trim().parse::<u8>() {
            floor = n;
        } else if !head.trim().is_empty() || rest.starts_with(' ') || rest.is_empty() {
            continue;
        }
        let names = rest.split("  ").next().unwrap_or("");
        for name in names.split(',') {
            drawn.insert((name.trim().to_string(), floor));
        }
    }
    drawn
}

#[test]
fn the_map_draws_every_floor() {
    let map = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/ARCHITECTURE.md")).unwrap();
    let floors: BTreeSet<(String, u8)> = FLOORS.iter().map(|&(m, f)| (m.to_string(), f)).collect();
    assert_eq!(
        drawn_floors(&map),
        floors,
        "docs/ARCHITECTURE.md draws other floors than this test checks"
    );
}

fn file(path: &str, text: &str) -> (PathBuf, String) {
    (PathBuf::from(path), text.to_string())
}

#[test]
fn an_upward_import_is_named_with_its_line() {
    let files = [
        file(
            "model/run.rs",
            "use std::fmt;\nuse crate::units::Rate;\nuse crate::session::Target;\n",
        ),
        file("session.rs", "use crate::units::Bytes;\n"),
    ];
    assert_eq!(
        violations(&files),
        ["src/model/run.rs:3: upward import: model (floor 8) names session (floor 4): use crate::session::Target;"]
    );
}

#[test]
fn a_circle_on_one_floor_is_named_with_both_imports() {
    let files = [
        file("report/text.rs", "fn f() { crate::verdict::judge(); }\n"),
        file(
            "verdict.rs",
            "use crate::{\n    model::Verdict,\n    report::text,\n};\n",
        ),
    ];
    let problems = violations(&files);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(
        problems[0].starts_with("circle between report, verdict:"),
        "{}",
        problems[0]
    );
    assert!(
        problems[0].contains("src/report/text.rs:1: report -> verdict"),
        "{}",
        problems[0]
    );
    assert!(
        problems[0].contains("src/verdict.rs:3: verdict -> report"),
        "{}",
        problems[0]
    );
}

#[test]
fn comments_strings_and_other_crates_are_not_imports() {
    let files = [file(
        "model/a.rs",
        "//! Used by crate::session.\n\
         /* crate::agent /* nested */ crate::cmd */\n\
         const A: &str = \"crate::cli\";\n\
         const B: &str = r#\"crate::plan \" \"#;\n\
         const C: char = '\"';\n\
         fn f<'a>(x: &'a str) -> &'a str { x } // crate::trial\n\
         use othercrate::session;\n",
    )];
    assert_eq!(violations(&files), Vec::<String>::new());
}

#[test]
fn a_module_without_a_floor_is_named() {
    let files = [file("newthing/mod.rs", "")];
    assert_eq!(violations(&files).len(), 1);
}
