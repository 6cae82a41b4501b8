//! Reading one file of `src/` as the layering test needs it: its code
//! without comments and strings, every path in it that may name an item of
//! the crate (`crate::`, `super::`, `self::`, a child module's name), the
//! names its `use` declarations bind and the items it defines. Tokens are
//! enough for paths, so no parser crate is added for it.

/// `source` with comments and the insides of string and character
/// literals replaced by spaces; newlines are kept, so line numbers hold.
pub fn code_only(source: &str) -> String {
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

pub fn is_ident(c: Option<&char>) -> bool {
    c.is_some_and(|c| c.is_alphanumeric() || *c == '_')
}

/// One token of code: a word (identifier, keyword or number), `::`, or any
/// other single character.
#[derive(Debug, Clone, PartialEq)]
struct Token {
    text: String,
    line: usize,
}

fn tokens(code: &str) -> Vec<Token> {
    let chars: Vec<char> = code.chars().collect();
    let mut out = Vec::new();
    let mut line = 1;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '\n' {
            line += 1;
            i += 1;
        } else if c.is_whitespace() {
            i += 1;
        } else if is_ident(Some(&c)) {
            let word: String = chars[i..].iter().take_while(|c| is_ident(Some(c))).collect();
            i += word.chars().count();
            out.push(Token { text: word, line });
        } else if c == ':' && chars.get(i + 1) == Some(&':') {
            out.push(Token {
                text: "::".into(),
                line,
            });
            i += 2;
        } else {
            out.push(Token {
                text: c.to_string(),
                line,
            });
            i += 1;
        }
    }
    out
}

/// One path written in a file, e.g. `super::peer::Peer` or one leaf of a
/// `use crate::{a::b, c::{d, e as f}}` group.
#[derive(Debug, Clone, PartialEq)]
pub struct Written {
    /// The line its leaf begins on (a group's members on their own).
    pub line: usize,
    /// The module the path is written in, as an absolute path from the
    /// crate root: the file's module and the inline `mod` blocks around it.
    pub here: Vec<String>,
    /// The node of the file graph it is written in: the file's module, or
    /// the test module around it (`#[cfg(test)] mod tests { ... }`), which
    /// is a node of its own as it would be in a file of its own.
    pub node: Vec<String>,
    /// The segments as written, from `crate`, `super`, `self` or a child
    /// module's name; a `use` leaf `self` is dropped (it names its prefix).
    pub segments: Vec<String>,
    /// `use a::*`.
    pub glob: bool,
    /// A leaf of a `use` declaration of the file's own module (not inside
    /// a block or an inline `mod`): what the module imports, and so what a
    /// path into the module may find there.
    pub top_use: bool,
    /// For such a leaf, not a glob: the name it binds (`use a::B` binds B,
    /// `use a::B as C` binds C).
    pub binds: Option<String>,
}

/// What a file says for the layering test.
#[derive(Debug, Default)]
pub struct Read {
    /// Every path that starts with `crate::` (`root::` in a binary),
    /// `super::`, `self::` or the name of a module the file declares.
    pub paths: Vec<Written>,
    /// Items the file defines at its top (outside any block): fn, struct,
    /// enum, trait, type, const, static, union, mod, macro_rules.
    pub defines: Vec<String>,
    /// Its inline test modules (`#[cfg(test)] mod tests { ... }`).
    pub test_modules: Vec<String>,
    /// Modules it declares in files of their own (`mod name;`), with the
    /// `#[path]` given to each, if any.
    pub children: Vec<(String, Option<String>)>,
}

const ITEM_KEYWORDS: &[&str] = &[
    "fn", "struct", "enum", "trait", "type", "const", "static", "union", "mod",
];

/// An inline `mod name {` block open around the current token.
struct Inline {
    name: String,
    /// The brace depth it opened at.
    depth: usize,
    test: bool,
}

/// Reads `source`, the file of module `module` (absolute, empty for the
/// crate root). `root` is how the crate names itself: `crate`, or the
/// library's name in the binary's `main.rs`.
pub fn read(source: &str, module: &[String], root: &str) -> Read {
    let code = code_only(source);
    let tokens = tokens(&code);
    let mut read = Read {
        children: declared_children(source, &tokens),
        ..Read::default()
    };
    let child_names: Vec<&str> = read.children.iter().map(|(name, _)| name.as_str()).collect();
    let mut inline: Vec<Inline> = Vec::new();
    let mut depth = 0;
    let mut i = 0;
    while i < tokens.len() {
        let text = tokens[i].text.as_str();
        let next = tokens.get(i + 1).map(|t| t.text.as_str());
        let before = i.checked_sub(1).map(|b| tokens[b].text.as_str());
        match text {
            "{" => {
                if i >= 2 && tokens[i - 2].text == "mod" {
                    let test = is_test(&tokens, i - 2);
                    let name = tokens[i - 1].text.clone();
                    if test && depth == 0 {
                        read.test_modules.push(name.clone());
                    }
                    inline.push(Inline { name, depth, test });
                }
                depth += 1;
            }
            "}" => {
                depth -= 1;
                if inline.last().is_some_and(|m| m.depth == depth) {
                    inline.pop();
                }
            }
            _ => {}
        }
        if depth == 0 {
            if ITEM_KEYWORDS.contains(&text) && next.is_some_and(|n| is_ident(n.chars().next().as_ref())) {
                read.defines.push(next.unwrap().to_string());
            } else if text == "macro_rules" && next == Some("!") {
                if let Some(name) = tokens.get(i + 2) {
                    read.defines.push(name.text.clone());
                }
            }
        }
        let starts = next == Some("::")
            && before != Some("::")
            && (text == root || text == "super" || text == "self" || child_names.contains(&text));
        if !starts {
            i += 1;
            continue;
        }
        let here: Vec<String> = module
            .iter()
            .cloned()
            .chain(inline.iter().map(|m| m.name.clone()))
            .collect();
        let node = match inline.iter().position(|m| m.test) {
            Some(test) => here[..module.len() + test + 1].to_vec(),
            None => module.to_vec(),
        };
        let top_use = before == Some("use") && depth == 0;
        let mut leaves = Vec::new();
        let end = use_tree(&tokens, i, Vec::new(), &mut leaves);
        for (line, mut segments, glob, alias) in leaves {
            if segments.first().is_some_and(|s| s == root) {
                segments[0] = "crate".into();
            }
            let binds = (top_use && !glob)
                .then(|| alias.or_else(|| segments.last().cloned()))
                .flatten();
            read.paths.push(Written {
                line,
                here: here.clone(),
                node: node.clone(),
                segments,
                glob,
                top_use,
                binds,
            });
        }
        i = end.max(i + 1);
    }
    read
}

/// Whether the item whose keyword is at `at` (`mod`) has a `#[cfg(...)]`
/// naming `test` among its attributes: `#[cfg(test)] pub(crate) mod x`.
fn is_test(tokens: &[Token], at: usize) -> bool {
    let text = |j: usize| tokens[j].text.as_str();
    let mut j = at;
    // Its visibility: `pub`, `pub(crate)`, `pub(in a::b)`.
    if j >= 1 && text(j - 1) == ")" {
        while j >= 1 && text(j - 1) != "(" {
            j -= 1;
        }
        j = j.saturating_sub(1);
    }
    if j >= 1 && text(j - 1) == "pub" {
        j -= 1;
    }
    while j >= 1 && text(j - 1) == "]" {
        let close = j - 1;
        let Some(open) = (0..close).rev().find(|&k| text(k) == "[") else {
            return false;
        };
        let attribute: Vec<&str> = (open + 1..close).map(text).collect();
        if attribute.first() == Some(&"cfg") && attribute.contains(&"test") {
            return true;
        }
        j = open.saturating_sub(1); // the `#`
    }
    false
}

/// Modules declared in files of their own: `mod name;`, and the `#[path =
/// "..."]` among the attribute lines above it, read from the source (the
/// code has its strings blanked).
fn declared_children(source: &str, tokens: &[Token]) -> Vec<(String, Option<String>)> {
    let lines: Vec<&str> = source.lines().collect();
    let mut children = Vec::new();
    for window in tokens.windows(3) {
        if window[0].text == "mod" && window[2].text == ";" {
            // The attributes on the lines above it.
            let path = lines
                .get(..window[0].line - 1)
                .unwrap_or_default()
                .iter()
                .rev()
                .map(|l| l.trim())
                .take_while(|l| l.starts_with("#["))
                .find_map(|l| l.strip_prefix("#[path = \"")?.strip_suffix("\"]"))
                .map(str::to_string);
            children.push((window[1].text.clone(), path));
        }
    }
    children
}

/// One leaf of a use tree: its line, segments, whether it is a glob, and
/// the name after `as`.
type Leaf = (usize, Vec<String>, bool, Option<String>);

/// Reads the path or use tree starting at token `i`, below `prefix`, into
/// `leaves`; returns the index of the first token after it. An expression
/// path (`crate::a::f(x)`, `super::T::<U>::new`) ends at the first token
/// that is not a segment, which leaves the module part whole.
fn use_tree(tokens: &[Token], mut i: usize, prefix: Vec<String>, leaves: &mut Vec<Leaf>) -> usize {
    let mut segments = prefix;
    // The line of this leaf's first segment; a group member's own.
    let mut line = None;
    loop {
        let Some(token) = tokens.get(i) else {
            leaves.push((line.unwrap_or(0), segments, false, None));
            return i;
        };
        match token.text.as_str() {
            "{" => {
                i += 1;
                while i < tokens.len() && tokens[i].text != "}" {
                    i = use_tree(tokens, i, segments.clone(), leaves);
                    if tokens.get(i).is_some_and(|t| t.text == ",") {
                        i += 1;
                    } else if tokens.get(i).is_some_and(|t| t.text != "}") {
                        i += 1; // Not a use tree after all; step on.
                    }
                }
                return i + 1;
            }
            "*" => {
                leaves.push((*line.get_or_insert(token.line), segments, true, None));
                return i + 1;
            }
            word if is_ident(word.chars().next().as_ref()) => {
                line.get_or_insert(token.line);
                // `use a::{self, b}`: `self` in a group names the prefix.
                if word != "self" || segments.is_empty() {
                    segments.push(word.to_string());
                }
                i += 1;
                if tokens.get(i).is_some_and(|t| t.text == "::") {
                    i += 1;
                    continue;
                }
                let alias = (tokens.get(i).is_some_and(|t| t.text == "as"))
                    .then(|| tokens.get(i + 1).map(|t| t.text.clone()))
                    .flatten();
                if alias.is_some() {
                    i += 2;
                }
                leaves.push((line.unwrap_or(token.line), segments, false, alias));
                return i;
            }
            _ => {
                leaves.push((line.unwrap_or(token.line), segments, false, None));
                return i;
            }
        }
    }
}

/// The absolute path (from the crate root) a written path names, or None
/// when `super` climbs past the root.
pub fn absolute(written: &Written, file_module: &[String]) -> Option<Vec<String>> {
    let mut segments = written.segments.iter().peekable();
    let mut path: Vec<String> = match segments.peek().map(|s| s.as_str()) {
        Some("crate") => {
            segments.next();
            Vec::new()
        }
        Some("self") => {
            segments.next();
            written.here.clone()
        }
        Some("super") => {
            let mut path = written.here.clone();
            while segments.next_if(|s| *s == "super").is_some() {
                path.pop()?;
            }
            path
        }
        // A child module's name: the children a file declares are its own
        // module's, and a test block sees them through `use super::*`.
        _ => file_module.to_vec(),
    };
    path.extend(segments.cloned());
    Some(path)
}
