//! The layering that docs/architecture.md promises, checked against the
//! code: the "Layers" table there is parsed (so the document and this test
//! cannot drift), every `planner/src/**/*.rs` is read for its imports
//! (`use crate::…` and `use super::…` lines, grouped and multi-line ones
//! among them, a `mod.rs`'s `use child::…`, and inline `crate::x::y` and
//! `super::x` paths), each import is mapped to the file it names, and the
//! test fails on an import the table forbids — naming the file, the line
//! and the arrow — or on a cycle between files, naming its files.
//!
//! Exempt, as the document says: `lib.rs`, `#[cfg(test)]` items, files
//! only tests compile (declared under `#[cfg(test)]`), and a `mod.rs`'s
//! uses of its own children (it is its folder's face).

use crate::util;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Arrows the document forbids that are known and owned by another part of
/// issue 29, in the words: (importing file, imported file or
/// folder, why). Emptied at merge; an entry whose arrow no longer exists
/// fails the test, so the list can only shrink.
const KNOWN_ARROWS: &[(&str, &str, &str)] = &[];

/// Cycles between files that are known and owned by another part of issue
/// 29: (their files, sorted; why). Same rule: a cycle that is gone, or has
/// other files now, fails the test.
const KNOWN_CYCLES: &[(&[&str], &str)] = &[];

/// One import of one file.
#[derive(Debug, Clone)]
struct Arrow {
    from: String,
    line: usize,
    to: String,
    path: String,
}

/// The "Layers" table: entries (a file, or a folder ending in `/`) and
/// their layer, and per layer what it may import.
struct Layers {
    entries: Vec<(String, u32)>,
    /// Per layer: the lower layers it may import, and whether its own.
    may_import: BTreeMap<u32, (BTreeSet<u32>, bool)>,
}

impl Layers {
    fn read(doc: &str) -> Layers {
        let section = doc
            .split("\n## Layers")
            .nth(1)
            .expect("docs/architecture.md has a \"## Layers\" section");
        let section = section.split("\n## ").next().unwrap_or(section);
        let mut layers = Layers {
            entries: Vec::new(),
            may_import: BTreeMap::new(),
        };
        for row in section.lines().filter(|l| l.starts_with('|')) {
            let cells: Vec<&str> = row.trim_matches('|').split('|').map(str::trim).collect();
            let Ok(layer) = cells[0].parse::<u32>() else {
                continue; // the header and its rule
            };
            assert_eq!(cells.len(), 3, "a Layers row has 3 cells: {row}");
            for name in cells[1].split('`').skip(1).step_by(2) {
                layers.entries.push((name.to_owned(), layer));
            }
            let rule = parse_may_import(cells[2]);
            assert!(
                rule.0.iter().all(|&l| l < layer),
                "layer {layer} may import only lower layers, the table says {:?}",
                cells[2]
            );
            layers.may_import.insert(layer, rule);
        }
        assert!(!layers.entries.is_empty(), "the Layers table is empty");
        layers
    }

    /// The layer of `file` (relative to planner/src): its most specific entry.
    fn of(&self, file: &str) -> Option<u32> {
        self.entries
            .iter()
            .filter(|(entry, _)| {
                if entry.ends_with('/') {
                    file.starts_with(entry.as_str())
                } else {
                    file == entry
                }
            })
            .max_by_key(|(entry, _)| entry.len())
            .map(|(_, layer)| *layer)
    }

    /// Why `arrow` is forbidden, or `None`.
    fn forbids(&self, arrow: &Arrow) -> Option<String> {
        let (Some(from), Some(to)) = (self.of(&arrow.from), self.of(&arrow.to)) else {
            return None; // reported as a file in no layer
        };
        let (lower, own) = &self.may_import[&from];
        let same_module = top_module(&arrow.from) == top_module(&arrow.to) && to <= from;
        if lower.contains(&to) || same_module || (*own && to == from) {
            return None;
        }
        Some(format!(
            "planner/src/{}:{}: {} (layer {from}) imports {} (layer {to}) through `{}`: layer {from} may import {}",
            arrow.from,
            arrow.line,
            arrow.from,
            arrow.to,
            arrow.path,
            describe(lower, *own)
        ))
    }
}

/// `0–3, own layer` → ({0, 1, 2, 3}, true).
fn parse_may_import(cell: &str) -> (BTreeSet<u32>, bool) {
    let mut layers = BTreeSet::new();
    let mut own = false;
    for part in cell.split(',').map(str::trim) {
        if part == "own layer" {
            own = true;
        } else if let Some((a, b)) = part.split_once(['–', '-']) {
            let (a, b): (u32, u32) = (a.trim().parse().unwrap(), b.trim().parse().unwrap());
            layers.extend(a..=b);
        } else if !part.is_empty() {
            layers.insert(part.parse().unwrap_or_else(|_| panic!("{cell:?}")));
        }
    }
    (layers, own)
}

fn describe(lower: &BTreeSet<u32>, own: bool) -> String {
    let mut words: Vec<String> = lower.iter().map(|l| format!("layer {l}")).collect();
    if own {
        words.push("its own layer".to_owned());
    }
    words.push("its own module".to_owned());
    words.join(", ")
}

/// `report/live.rs` → `report`; `plan.rs` → `plan`.
fn top_module(file: &str) -> &str {
    let first = file.split('/').next().unwrap_or(file);
    first.strip_suffix(".rs").unwrap_or(first)
}

/// The module path of a file: `a/b.rs` → [a, b]; `a/mod.rs` → [a].
fn module_of(file: &str) -> Vec<String> {
    let mut parts: Vec<String> = file
        .trim_end_matches(".rs")
        .split('/')
        .map(str::to_owned)
        .collect();
    if parts.last().is_some_and(|p| p == "mod" || p == "lib") {
        parts.pop();
    }
    parts
}

/// The file of the longest prefix of module path `path` that is a file.
fn file_of(files: &BTreeSet<String>, path: &[String]) -> Option<String> {
    (1..=path.len()).rev().find_map(|n| {
        let stem = path[..n].join("/");
        [format!("{stem}.rs"), format!("{stem}/mod.rs")]
            .into_iter()
            .find(|f| files.contains(f))
    })
}

/// `src` with comments, string and character literals blanked to spaces
/// (newlines kept, so offsets and lines stay).
fn blank(src: &str) -> String {
    let chars: Vec<char> = src.chars().collect();
    let mut out = String::with_capacity(src.len());
    let mut i = 0;
    let keep = |c: char| if c == '\n' { '\n' } else { ' ' };
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        let ident_before = i > 0 && (chars[i - 1].is_alphanumeric() || chars[i - 1] == '_');
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
                    out.push(keep(chars[i]));
                    i += 1;
                }
            }
        } else if c == 'r' && !ident_before && matches!(next, Some('"') | Some('#')) {
            let mut j = i + 1;
            while chars.get(j) == Some(&'#') {
                j += 1;
            }
            if chars.get(j) != Some(&'"') {
                out.push(c);
                i += 1;
                continue;
            }
            let hashes = j - i - 1;
            out.extend(std::iter::repeat_n(' ', j - i + 1));
            i = j + 1;
            while i < chars.len() {
                let closes =
                    chars[i] == '"' && (0..hashes).all(|h| chars.get(i + 1 + h) == Some(&'#'));
                if closes {
                    out.extend(std::iter::repeat_n(' ', hashes + 1));
                    i += hashes + 1;
                    break;
                }
                out.push(keep(chars[i]));
                i += 1;
            }
        } else if c == '"' {
            out.push(' ');
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                if chars[i] == '\\' {
                    out.push(' ');
                    i += 1;
                }
                if i < chars.len() {
                    out.push(keep(chars[i]));
                    i += 1;
                }
            }
            out.push(' ');
            i += 1;
        } else if c == '\'' && (next == Some('\\') || chars.get(i + 2) == Some(&'\'')) {
            // A character literal, not a lifetime.
            out.push(' ');
            i += 1;
            while i < chars.len() && chars[i] != '\'' {
                if chars[i] == '\\' {
                    out.push(' ');
                    i += 1;
                }
                out.push(' ');
                i += 1;
            }
            out.push(' ');
            i += 1;
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

/// The byte range of the item that starts at `start`: up to its `;`, or
/// through the block its first `{` opens.
fn item_end(text: &str, start: usize) -> usize {
    let bytes = text.as_bytes();
    let mut depth = 0usize;
    for (i, &b) in bytes.iter().enumerate().skip(start) {
        match b {
            b';' if depth == 0 => return i + 1,
            b'{' => depth += 1,
            b'}' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return i + 1;
                }
            }
            _ => {}
        }
    }
    bytes.len()
}

/// `text` without its `#[cfg(test)]` items, and the names of the modules
/// such items declare (`#[cfg(test)] mod fuzz;`).
fn without_tests(text: &str) -> (String, Vec<String>) {
    let mut out = text.to_owned();
    let mut test_modules = Vec::new();
    let mut from = 0;
    while let Some(at) = out[from..].find("#[cfg(test)]").map(|i| i + from) {
        let end = item_end(&out, at);
        let item = &out[at + "#[cfg(test)]".len()..end];
        let words: Vec<&str> = item.split_whitespace().collect();
        if let Some(pos) = words.iter().position(|w| *w == "mod") {
            if let Some(name) = words.get(pos + 1) {
                if name.ends_with(';') {
                    test_modules.push(name.trim_end_matches(';').to_owned());
                }
            }
        }
        let blanked: String = out[at..end]
            .chars()
            .map(|c| if c == '\n' { '\n' } else { ' ' })
            .collect();
        out.replace_range(at..end, &blanked);
        from = end;
    }
    (out, test_modules)
}

/// The byte ranges of inline (non-test) `mod name { … }` blocks: `super`
/// inside one means another module than the file's, so it is not read.
fn inline_modules(text: &str) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    for (at, _) in text.match_indices("mod ") {
        let rest = &text[at + 4..];
        let name_len = rest
            .find(|c: char| !(c.is_alphanumeric() || c == '_'))
            .unwrap_or(rest.len());
        let after = rest[name_len..].trim_start();
        let word_start = at == 0 || !text.as_bytes()[at - 1].is_ascii_alphanumeric();
        if word_start && name_len > 0 && after.starts_with('{') {
            out.push((at, item_end(text, at)));
        }
    }
    out
}

/// The paths a use tree names: `a::{b, c::{d, e as f}}` → a::b, a::c::d, a::c::e.
fn use_paths(tree: &str) -> Vec<Vec<String>> {
    let tree: String = tree.split_whitespace().collect::<Vec<_>>().join(" ");
    let tree = tree.trim().trim_start_matches("::");
    let (head, group) = match tree.find('{') {
        Some(open) => {
            let close = tree.rfind('}').unwrap_or(tree.len());
            (&tree[..open], Some(&tree[open + 1..close]))
        }
        None => (tree, None),
    };
    let head = head.split(" as ").next().unwrap_or(head);
    let prefix: Vec<String> = head
        .split("::")
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect();
    let Some(group) = group else {
        return vec![prefix];
    };
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (i, c) in group.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&group[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&group[start..]);
    parts
        .into_iter()
        .filter(|p| !p.trim().is_empty())
        .flat_map(use_paths)
        .map(|tail| {
            let mut path = prefix.clone();
            path.extend(tail.into_iter().filter(|s| s != "self"));
            path
        })
        .collect()
}

/// A path as written in `file` → the module path it names, when it names
/// one of this crate (`crate::…`, `super::…`, `self::…`, a `mod.rs`'s child).
fn absolute(
    files: &BTreeSet<String>,
    file: &str,
    path: &[String],
    in_inline_module: bool,
) -> Option<Vec<String>> {
    let module = module_of(file);
    let first = path.first()?.as_str();
    match first {
        "crate" => Some(path[1..].to_vec()),
        "super" | "self" if in_inline_module => None,
        "super" => {
            let ups = path.iter().take_while(|s| *s == "super").count();
            let base = module.len().checked_sub(ups)?;
            let mut out = module[..base].to_vec();
            out.extend_from_slice(&path[ups..]);
            Some(out)
        }
        "self" => {
            let mut out = module.clone();
            out.extend_from_slice(&path[1..]);
            Some(out)
        }
        child => {
            let mut out = module.clone();
            out.push(child.to_owned());
            let is_child = file_of(files, &out).is_some_and(|f| module_of(&f) == out);
            is_child.then(|| {
                out.extend_from_slice(&path[1..]);
                out
            })
        }
    }
}

/// Every import of `file` (text already without comments and tests).
fn imports(files: &BTreeSet<String>, file: &str, text: &str) -> Vec<Arrow> {
    let inline = inline_modules(text);
    let inside = |at: usize| inline.iter().any(|&(a, b)| a < at && at < b);
    let line_of = |at: usize| text[..at].matches('\n').count() + 1;
    let mut found: Vec<(usize, Vec<String>)> = Vec::new();
    let mut use_ranges = Vec::new();
    for (at, _) in text.match_indices("use ") {
        let word_start = at == 0 || {
            let b = text.as_bytes()[at - 1];
            !(b.is_ascii_alphanumeric() || b == b'_')
        };
        if !word_start {
            continue;
        }
        let end = text[at..].find(';').map_or(text.len(), |e| at + e);
        use_ranges.push((at, end));
        for path in use_paths(&text[at + 4..end]) {
            found.push((at, path));
        }
    }
    for root in ["crate::", "super::"] {
        for (at, _) in text.match_indices(root) {
            let before = text[..at].chars().next_back();
            let starts_path = !before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':');
            if !starts_path || use_ranges.iter().any(|&(a, b)| a <= at && at < b) {
                continue;
            }
            let tail: String = text[at..]
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
                .collect();
            let path = tail
                .split("::")
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect();
            found.push((at, path));
        }
    }
    found
        .into_iter()
        .filter_map(|(at, path)| {
            let module_path = absolute(files, file, &path, inside(at))?;
            let to = file_of(files, &module_path)?;
            // A `mod.rs` is its folder's face: its uses of its own children
            // (to re-export them, or to run them in order) are not arrows.
            let own_child = file
                .strip_suffix("mod.rs")
                .is_some_and(|dir| to.starts_with(dir));
            (to != file && to != "lib.rs" && !own_child).then(|| Arrow {
                from: file.to_owned(),
                line: line_of(at),
                to,
                path: path.join("::"),
            })
        })
        .collect()
}

/// Every `.rs` file under `dir`, relative to `base`.
fn rust_files(base: &Path, dir: &Path, out: &mut BTreeSet<String>) {
    for entry in std::fs::read_dir(dir).unwrap().map(Result::unwrap) {
        let path = entry.path();
        if path.is_dir() {
            rust_files(base, &path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let rel = path.strip_prefix(base).unwrap();
            out.insert(rel.to_string_lossy().replace('\\', "/"));
        }
    }
}

/// The files of the strongly connected components of more than one file
/// (Tarjan's algorithm, iteratively small enough to recurse).
fn cycles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct State<'a> {
        graph: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        out: Vec<Vec<String>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a str) {
        let n = s.index.len();
        s.index.insert(v, n);
        s.low.insert(v, n);
        s.stack.push(v);
        s.on_stack.insert(v);
        for w in s.graph.get(v).into_iter().flatten() {
            if !s.index.contains_key(w.as_str()) {
                visit(s, w);
                let low = s.low[v].min(s.low[w.as_str()]);
                s.low.insert(v, low);
            } else if s.on_stack.contains(w.as_str()) {
                let low = s.low[v].min(s.index[w.as_str()]);
                s.low.insert(v, low);
            }
        }
        if s.low[v] == s.index[v] {
            let mut component = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                component.push(w.to_owned());
                if w == v {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort();
                s.out.push(component);
            }
        }
    }
    let mut state = State {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in graph.keys() {
        if !state.index.contains_key(v.as_str()) {
            visit(&mut state, v);
        }
    }
    state.out
}

/// Every file of the library, read: (file, text without comments, string
/// literals and tests); files only tests compile are left out.
fn library() -> (BTreeSet<String>, Vec<(String, String)>) {
    let src = util::repo().join("planner/src");
    let mut files = BTreeSet::new();
    rust_files(&src, &src, &mut files);
    let mut texts = Vec::new();
    let mut test_only: Vec<String> = Vec::new();
    for file in &files {
        let raw = std::fs::read_to_string(src.join(file)).unwrap();
        let (text, test_modules) = without_tests(&blank(&raw));
        let dir = match file.strip_suffix("mod.rs").or(file.strip_suffix("lib.rs")) {
            Some(dir) => dir.to_owned(),
            None => format!("{}/", file.trim_end_matches(".rs")),
        };
        for m in test_modules {
            test_only.push(format!("{dir}{m}.rs"));
            test_only.push(format!("{dir}{m}/"));
        }
        texts.push((file.clone(), text));
    }
    let exempt = |f: &str| {
        f == "lib.rs"
            || test_only
                .iter()
                .any(|t| f == t || (t.ends_with('/') && f.starts_with(t.as_str())))
    };
    texts.retain(|(f, _)| !exempt(f));
    let kept: BTreeSet<String> = files.iter().filter(|f| !exempt(f)).cloned().collect();
    (kept, texts)
}

#[test]
fn imports_follow_the_documented_layers_and_make_no_cycle() {
    let doc = std::fs::read_to_string(util::repo().join("docs/architecture.md")).unwrap();
    let layers = Layers::read(&doc);
    let (files, texts) = library();
    let mut failures = Vec::new();
    for file in &files {
        if layers.of(file).is_none() {
            failures.push(format!(
                "planner/src/{file} is in no layer of docs/architecture.md"
            ));
        }
    }
    let arrows: Vec<Arrow> = texts
        .iter()
        .flat_map(|(file, text)| imports(&files, file, text))
        .filter(|a| files.contains(&a.to))
        .collect();

    let mut known_used = BTreeSet::new();
    for arrow in &arrows {
        let Some(why) = layers.forbids(arrow) else {
            continue;
        };
        match KNOWN_ARROWS
            .iter()
            .position(|(from, to, _)| arrow.from == *from && arrow.to.starts_with(to))
        {
            Some(i) => {
                known_used.insert(i);
            }
            None => failures.push(why),
        }
    }
    for (i, (from, to, why)) in KNOWN_ARROWS.iter().enumerate() {
        if !known_used.contains(&i) {
            failures.push(format!(
                "the known exception {from} → {to} ({why}) no longer exists: take it off KNOWN_ARROWS"
            ));
        }
    }

    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for a in &arrows {
        graph
            .entry(a.from.clone())
            .or_default()
            .insert(a.to.clone());
    }
    let mut cycles_used = BTreeSet::new();
    for cycle in cycles(&graph) {
        if let Some(i) = KNOWN_CYCLES
            .iter()
            .position(|(files, _)| files.iter().copied().eq(cycle.iter().map(String::as_str)))
        {
            cycles_used.insert(i);
            continue;
        }
        let members: BTreeSet<&str> = cycle.iter().map(String::as_str).collect();
        let ties: Vec<String> = arrows
            .iter()
            .filter(|a| members.contains(a.from.as_str()) && members.contains(a.to.as_str()))
            .map(|a| {
                format!(
                    "    planner/src/{}:{}: → {} (`{}`)",
                    a.from, a.line, a.to, a.path
                )
            })
            .collect();
        failures.push(format!(
            "an import cycle between {} files: {}\n{}",
            cycle.len(),
            cycle.join(", "),
            ties.join("\n")
        ));
    }
    for (i, (files, why)) in KNOWN_CYCLES.iter().enumerate() {
        if !cycles_used.contains(&i) {
            failures.push(format!(
                "the known cycle {files:?} ({why}) no longer exists as listed: update KNOWN_CYCLES"
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "the layering of docs/architecture.md is broken:\n{}",
        failures.join("\n")
    );
}

#[test]
fn the_import_reader_reads_every_form() {
    let files: BTreeSet<String> = ["a/mod.rs", "a/b.rs", "a/c.rs", "d.rs", "e/mod.rs", "e/f.rs"]
        .into_iter()
        .map(str::to_owned)
        .collect();
    let src = "use crate::{d::X, e::{f::Y, self}};\nuse super::c::Z;\n\
               fn g() { crate::e::f::h(); let s = \"crate::d\"; }\n\
               // use crate::d;\nmod inner { use super::c; }\n\
               #[cfg(test)]\nmod tests { use crate::d::W; }\n";
    let (text, _) = without_tests(&blank(src));
    let found: Vec<(usize, String)> = imports(&files, "a/b.rs", &text)
        .into_iter()
        .map(|a| (a.line, a.to))
        .collect();
    assert_eq!(
        found,
        [
            (1, "d.rs".to_owned()),
            (1, "e/f.rs".to_owned()),
            (1, "e/mod.rs".to_owned()),
            (2, "a/c.rs".to_owned()),
            (3, "e/f.rs".to_owned()),
        ]
    );
    assert_eq!(parse_may_import("0–2, own layer"), ([0, 1, 2].into(), true));
}
