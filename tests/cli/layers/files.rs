//! The files of `src/` as modules, and the imports between files of one
//! top-level module: the nodes and edges of the circle check inside a
//! module.
//!
//! Each file is a node. A file imports another when it names an item path
//! (`crate::`, `super::`, `self::` or a child module's name) that resolves
//! into it: to the file of the longest module prefix of the path, then
//! through `use` re-exports there (`pub use side::*` in `model/mod.rs`) to
//! the file that defines the item. A path into the file's own module root
//! or an ancestor's (a child's `super::Config`) is not an import: the root
//! is where a module keeps what its files share, and it names its children
//! (re-exports, a registry), so counting both ways would make every module
//! one circle. Declaring `mod child;` is not an import either. What is left
//! are the imports between siblings and cousins, and from a root into its
//! subtree; a circle among those is a circle between files.
//!
//! A test module is a node of its own, the child of its file, whether it
//! is inline (`#[cfg(test)] mod tests { ... }`) or a file (`#[path =
//! "x_tests.rs"] mod tests;`): moving a test out of its file must not
//! change what counts. So a test may build its fixtures from anywhere in
//! its module (an agent's tests start a whole agent); nothing but tests
//! names a test module, so its imports close no circle of the code.
//!
//! What a path cannot show is not seen: a name brought in by `use
//! super::*` and used bare, a method call. The code here has no such
//! imports outside tests; a file's `use` of a sibling module
//! (`use super::peer;`) is seen at that line.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::source::{self, Read, Written};
use super::Import;

/// One file of `src/`: where it is, the module it is, what it says.
pub struct File {
    pub path: PathBuf,
    /// Its absolute module path: `agent/peer.rs` is `agent::peer`, a
    /// module's `mod.rs` is the module, `lib.rs` is the crate root (empty).
    pub module: Vec<String>,
    pub read: Read,
    pub source: String,
}

impl File {
    /// The top-level module the file belongs to; None for `lib.rs`, which
    /// only declares the modules.
    pub fn top(&self) -> Option<&str> {
        self.module.first().map(String::as_str)
    }

    /// `src/...` and the trimmed text of one line, for messages.
    pub fn at(&self, line: usize) -> (String, String) {
        let text = self.source.lines().nth(line - 1).unwrap_or("").trim().to_string();
        (format!("src/{}", self.path.display()), text)
    }
}

/// The module a file is by its path alone.
fn module_by_path(relative: &Path) -> Vec<String> {
    let mut module: Vec<String> = relative
        .with_extension("")
        .components()
        .filter_map(|c| c.as_os_str().to_str().map(str::to_string))
        .collect();
    if module
        .last()
        .is_some_and(|last| last == "mod" || (module.len() == 1 && last == "lib"))
    {
        module.pop();
    }
    module
}

/// Every file of `files` (paths relative to `src/`, and their text) read
/// as a module. A file some module declares with `#[path = "x_tests.rs"]
/// mod tests;` is that module's `tests`, wherever it lies.
pub fn read_all(files: &[(PathBuf, String)]) -> Vec<File> {
    let read = |path: &Path, source: &str, module: Vec<String>| {
        let root = if module == ["main"] { "nicbench" } else { "crate" };
        File {
            path: path.to_path_buf(),
            read: source::read(source, &module, root),
            module,
            source: source.to_string(),
        }
    };
    let mut all: Vec<File> = files
        .iter()
        .map(|(path, source)| read(path, source, module_by_path(path)))
        .collect();
    let mut moved: BTreeMap<PathBuf, Vec<String>> = BTreeMap::new();
    for file in &all {
        for (name, path) in &file.read.children {
            if let Some(path) = path {
                let at = file.path.parent().unwrap_or(Path::new("")).join(path);
                moved.insert(at, file.module.iter().cloned().chain([name.clone()]).collect());
            }
        }
    }
    for file in &mut all {
        if let Some(module) = moved.remove(&file.path) {
            *file = read(&file.path, &file.source, module);
        }
    }
    all
}

/// The files by module path, to resolve paths in.
pub struct Tree<'a> {
    files: &'a [File],
    by_module: BTreeMap<&'a [String], usize>,
}

/// How many re-exports a path is followed through before the file that
/// holds it is taken as the item's (a circle of re-exports does not compile,
/// so this only bounds a test input).
const MOST_HOPS: usize = 8;

impl<'a> Tree<'a> {
    pub fn new(files: &'a [File]) -> Self {
        let by_module = files
            .iter()
            .enumerate()
            .map(|(i, f)| (f.module.as_slice(), i))
            .collect();
        Tree { files, by_module }
    }

    /// The file that holds the item `path` (absolute) names: the file of
    /// its longest module prefix, or, when that file only imports the
    /// item's name, the file it imports it from. None when no file is a
    /// prefix (another crate's path).
    pub fn holder(&self, path: &[String]) -> Option<usize> {
        self.holder_within(path, 0)
    }

    fn holder_within(&self, path: &[String], hops: usize) -> Option<usize> {
        let (length, file) = (0..=path.len())
            .rev()
            .find_map(|n| self.by_module.get(&path[..n]).map(|&file| (n, file)))?;
        let Some(name) = path.get(length) else {
            return Some(file);
        };
        let holder = &self.files[file];
        if hops >= MOST_HOPS || holder.read.defines.contains(name) {
            return Some(file);
        }
        let rest = &path[length + 1..];
        let follow = |from: &Written, name: Option<&String>| {
            let mut target = source::absolute(from, &holder.module)?;
            target.extend(name.cloned());
            target.extend(rest.iter().cloned());
            self.holder_within(&target, hops + 1)
        };
        if let Some(import) = holder.read.paths.iter().find(|w| w.binds.as_ref() == Some(name)) {
            return follow(import, None).or(Some(file));
        }
        for glob in holder.read.paths.iter().filter(|w| w.glob && w.top_use) {
            let exporter =
                source::absolute(glob, &holder.module).and_then(|m| self.by_module.get(m.as_slice()).copied());
            if exporter.is_some_and(|e| self.files[e].exports(name)) {
                return follow(glob, Some(name)).or(Some(file));
            }
        }
        Some(file)
    }
}

impl File {
    /// Whether the file's module has `name`: defines it or imports it.
    fn exports(&self, name: &String) -> bool {
        self.read.defines.contains(name) || self.read.paths.iter().any(|w| w.binds.as_ref() == Some(name))
    }
}

/// Every import between two nodes of one top-level module, as defined at
/// the top of this file; `from` and `to` name the nodes: a file
/// (`src/agent/peer.rs`), or a test module in one
/// (`src/agent/peer.rs::tests`).
pub fn imports(files: &[File]) -> Vec<Import> {
    let tree = Tree::new(files);
    let mut all = Vec::new();
    for file in files {
        let Some(top) = file.top() else { continue };
        for written in &file.read.paths {
            let Some(path) = source::absolute(written, &file.module) else {
                continue;
            };
            if path.first().map(String::as_str) != Some(top) {
                continue; // Between top-level modules: the floors' business.
            }
            let Some(to) = tree.holder(&path) else { continue };
            let target = &files[to];
            if target.top() != Some(top) {
                continue; // Re-exported from another top-level module.
            }
            let mut to_node = target.module.clone();
            if let Some(test) = path
                .strip_prefix(target.module.as_slice())
                .and_then(|rest| rest.first())
                .filter(|name| target.read.test_modules.contains(name))
            {
                to_node.push(test.clone());
            }
            if written.node.starts_with(&to_node) {
                continue; // Itself, or its own module's root or an ancestor's.
            }
            let (path, text) = file.at(written.line);
            all.push(Import {
                from: node_name(file, &written.node),
                to: node_name(target, &to_node),
                file: path,
                line: written.line,
                text,
            });
        }
    }
    all
}

/// Where a file in module `under` (`workload::transport`) names a file of
/// its top-level module that is neither in `under` nor in one of `allowed`
/// (`workload::base`): a floor inside a module, as `file:line: -> file:
/// text`. Test modules stand above their file and are left out.
pub fn reaches_outside(files: &[File], under: &[&str], allowed: &[&[&str]]) -> Vec<String> {
    let tree = Tree::new(files);
    let within = |module: &[String], prefix: &[&str]| {
        module.len() >= prefix.len() && module.iter().zip(prefix).all(|(m, p)| m == p)
    };
    let mut problems = Vec::new();
    for file in files {
        if !within(&file.module, under) || file.module.iter().any(|m| m == "tests") {
            continue;
        }
        for written in file.read.paths.iter().filter(|w| w.node == file.module) {
            let Some(path) = source::absolute(written, &file.module) else {
                continue;
            };
            let Some(target) = tree.holder(&path).map(|to| &files[to]) else {
                continue;
            };
            if target.top() != file.top()
                || within(&target.module, under)
                || allowed.iter().any(|a| within(&target.module, a))
            {
                continue;
            }
            let (at, text) = file.at(written.line);
            problems.push(format!(
                "{at}:{}: -> src/{}: {text}",
                written.line,
                target.path.display()
            ));
        }
    }
    problems.dedup(); // The leaves of one `use` group name one file once.
    problems
}

/// `src/...` of the file, and `::tests` when the node is a test module in it.
fn node_name(file: &File, node: &[String]) -> String {
    let mut name = format!("src/{}", file.path.display());
    for inner in &node[file.module.len()..] {
        name.push_str("::");
        name.push_str(inner);
    }
    name
}

// What counts as a circle between files, on small trees.

fn file(path: &str, text: &str) -> (PathBuf, String) {
    (PathBuf::from(path), text.to_string())
}

#[test]
fn a_circle_between_files_is_named_with_each_import() {
    let files = [
        file("agent/mod.rs", "mod control;\nmod peer;\n"),
        file("agent/control.rs", "use super::peer::Peer;\n"),
        file(
            "agent/peer.rs",
            "fn f() {\n    crate::agent::control::stream_closed();\n}\n",
        ),
    ];
    assert_eq!(
        super::violations(&files),
        ["circle between files src/agent/control.rs, src/agent/peer.rs:\n  \
          src/agent/control.rs:1: -> src/agent/peer.rs: use super::peer::Peer;\n  \
          src/agent/peer.rs:2: -> src/agent/control.rs: crate::agent::control::stream_closed();"]
    );
}

#[test]
fn a_child_naming_its_root_and_the_root_naming_it_is_no_circle() {
    let files = [
        file(
            "workload/mod.rs",
            "mod tcp;\npub use tcp::Tcp;\npub trait Workload {}\nconst REGISTRY: &[&dyn Workload] = &[&tcp::Tcp];\n",
        ),
        file(
            "workload/tcp.rs",
            "use super::Workload;\nuse crate::workload::REGISTRY;\npub struct Tcp;\n",
        ),
    ];
    assert_eq!(super::violations(&files), Vec::<String>::new());
}

#[test]
fn a_circle_through_re_exports_of_the_root_is_found() {
    let files = [
        file(
            "model/mod.rs",
            "mod side;\nmod trial;\npub use side::*;\npub use trial::Verdict;\n",
        ),
        file("model/side.rs", "pub struct Side {\n    verdict: super::Verdict,\n}\n"),
        file("model/trial.rs", "use crate::model::Side;\npub struct Verdict;\n"),
    ];
    let problems = super::violations(&files);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(
        problems[0].contains("src/model/side.rs:2: -> src/model/trial.rs"),
        "{}",
        problems[0]
    );
    assert!(
        problems[0].contains("src/model/trial.rs:1: -> src/model/side.rs"),
        "{}",
        problems[0]
    );
}

#[test]
fn super_self_and_child_paths_resolve_to_their_files_at_any_depth() {
    let files = [
        file("report/mod.rs", "mod chart;\nmod text;\n"),
        file("report/chart/mod.rs", "mod bars;\nmod data;\n"),
        file("report/chart/bars.rs", "use super::super::text::line;\n"),
        file(
            "report/chart/data.rs",
            "use crate::report::chart::bars::{self, Bars};\n",
        ),
        file(
            "report/text.rs",
            "mod inner {\n    pub fn x() {}\n}\nuse self::inner::x;\nfn f() {\n    super::chart::data::select();\n}\n",
        ),
    ];
    let problems = super::violations(&files);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(
        problems[0].starts_with(
            "circle between files src/report/chart/bars.rs, src/report/chart/data.rs, src/report/text.rs:"
        ),
        "{}",
        problems[0]
    );
    assert!(
        problems[0].contains("src/report/text.rs:6: -> src/report/chart/data.rs"),
        "{}",
        problems[0]
    );
}

#[test]
fn a_nested_root_is_in_a_circle_through_the_children_it_names() {
    let files = [
        file(
            "report/chart/mod.rs",
            "mod loaded;\npub fn render() {\n    loaded::draw();\n}\n",
        ),
        file("report/chart/loaded.rs", "use crate::report::html::page;\n"),
        file("report/html.rs", "use super::chart::render;\n"),
    ];
    let problems = super::violations(&files);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(
        problems[0].contains("src/report/chart/mod.rs:3: -> src/report/chart/loaded.rs: loaded::draw();"),
        "{}",
        problems[0]
    );
}

#[test]
fn a_test_module_stands_above_its_file_inline_or_in_a_file_of_its_own() {
    let files = [
        file("lab/spec.rs", "use super::state::LabState;\npub fn layout() {}\n"),
        file(
            "lab/state.rs",
            "pub struct LabState;\n#[cfg(test)]\nmod tests {\n    use super::super::spec::layout;\n}\n",
        ),
        file(
            "lab/build.rs",
            "use super::state::LabState;\n#[cfg(test)]\n#[path = \"build_tests.rs\"]\nmod tests;\n",
        ),
        file("lab/build_tests.rs", "use super::super::spec::layout;\nuse super::*;\n"),
        file("lab/spec_more.rs", "use super::build::tests::fixture;\n"),
    ];
    assert_eq!(super::violations(&files), Vec::<String>::new());
}
