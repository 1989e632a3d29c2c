//! The domain XML as the patcher sees it: the text, its element spans, the
//! document's indentation step, and splices (replace a byte range with new
//! text) applied from the end. Which elements change is decided elsewhere.

use super::PatchError;
use crate::libvirt::emit;
use crate::text::line_col;
use crate::xmldoc::spans::Span;
use quick_xml::events::Event;
use quick_xml::Reader;

/// A pending edit: replace `start..end` with `text`.
pub(super) struct Splice {
    pub start: usize,
    pub end: usize,
    pub text: String,
}

impl Splice {
    /// Inserts `text` at `offset`.
    pub fn insert(offset: usize, text: String) -> Splice {
        Splice {
            start: offset,
            end: offset,
            text,
        }
    }
}

pub(super) struct Doc<'a> {
    pub source_name: &'a str,
    pub text: &'a str,
    pub nodes: Vec<Span>,
    /// Indentation step of the document (from the root's first child).
    pub unit: String,
}

/// The whitespace that precedes `offset` on its line (the element's indentation).
fn indent_before(text: &str, offset: usize) -> String {
    let line_start = text[..offset].rfind('\n').map_or(0, |i| i + 1);
    let prefix = &text[line_start..offset];
    if prefix.chars().all(|c| c == ' ' || c == '\t') {
        prefix.to_owned()
    } else {
        String::new()
    }
}

/// Start of the line holding `offset` when only whitespace precedes it there
/// (so that removing an element removes its line), else `offset`.
fn line_start_if_blank(text: &str, offset: usize) -> usize {
    let line_start = text[..offset].rfind('\n').map_or(0, |i| i + 1);
    if text[line_start..offset]
        .chars()
        .all(|c| c == ' ' || c == '\t')
    {
        line_start
    } else {
        offset
    }
}

/// End of the line after `offset` (including the newline) when only
/// whitespace follows there, else `offset`.
fn line_end_if_blank(text: &str, offset: usize) -> usize {
    let rest = &text[offset..];
    let end = rest.find('\n').map_or(rest.len(), |i| i + 1);
    if rest[..end].trim().is_empty() {
        offset + end
    } else {
        offset
    }
}

/// The attributes of a start tag, unescaped, in document order.
fn attributes(tag: &str) -> Vec<(String, String)> {
    let mut reader = Reader::from_str(tag);
    match reader.read_event() {
        Ok(Event::Start(e) | Event::Empty(e)) => e
            .attributes()
            .flatten()
            .map(|a| {
                let value = a
                    .normalized_value(quick_xml::XmlVersion::Implicit1_0)
                    .map(|v| v.into_owned())
                    .unwrap_or_else(|_| a.value.clone().into_owned());
                (a.key.as_ref().to_owned(), value)
            })
            .collect(),
        _ => Vec::new(),
    }
}

impl<'a> Doc<'a> {
    pub fn new(source_name: &'a str, text: &'a str, nodes: Vec<Span>) -> Doc<'a> {
        let unit = nodes
            .first()
            .and_then(|root| root.children.first())
            .map(|&c| indent_before(text, nodes[c].start))
            .filter(|u| !u.is_empty())
            .unwrap_or_else(|| "  ".to_owned());
        Doc {
            source_name,
            text,
            nodes,
            unit,
        }
    }

    /// A refusal at `offset`, about `element`.
    pub fn error(&self, offset: usize, element: &str, message: String) -> PatchError {
        PatchError {
            source_name: self.source_name.to_owned(),
            line: line_col(self.text.as_bytes(), offset).0,
            element: element.to_owned(),
            message,
            vcpu_counts: None,
        }
    }

    /// The 1-based line where `node` starts.
    pub fn line(&self, node: usize) -> usize {
        line_col(self.text.as_bytes(), self.nodes[node].start).0
    }

    pub fn child(&self, parent: usize, name: &str) -> Option<usize> {
        self.children_named(parent, name).next()
    }

    pub fn children_named<'n>(
        &'n self,
        parent: usize,
        name: &'n str,
    ) -> impl Iterator<Item = usize> + 'n {
        self.nodes[parent]
            .children
            .iter()
            .copied()
            .filter(move |&c| self.nodes[c].name == name)
    }

    pub fn inner_text(&self, node: usize) -> &str {
        let n = &self.nodes[node];
        &self.text[n.start_tag_end..n.end_tag_start]
    }

    /// An attribute's value, unescaped.
    pub fn attr(&self, node: usize, name: &str) -> Option<String> {
        let n = &self.nodes[node];
        attributes(&self.text[n.start..n.start_tag_end])
            .into_iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v)
    }

    /// The domain's guest NUMA cells (`<cpu><numa><cell>`), in order.
    pub fn guest_cells(&self, root: usize) -> Vec<usize> {
        self.child(root, "cpu")
            .and_then(|cpu| self.child(cpu, "numa"))
            .map(|numa| self.children_named(numa, "cell").collect())
            .unwrap_or_default()
    }

    /// The names of `node`'s attributes, in their order.
    pub fn attr_names(&self, node: usize) -> Vec<String> {
        let n = &self.nodes[node];
        attributes(&self.text[n.start..n.start_tag_end])
            .into_iter()
            .map(|(k, _)| k)
            .collect()
    }

    /// The start tag of an empty element without its `/>`, to be reopened
    /// with `>`.
    pub fn reopened(&self, node: usize) -> &str {
        let n = &self.nodes[node];
        self.text[n.start..n.start_tag_end]
            .trim_end_matches("/>")
            .trim_end()
    }

    /// `node`'s start tag with `set` first (in that order), then its other
    /// attributes as they were (re-quoted with single quotes).
    pub fn start_tag_with(&self, node: usize, set: &[(&str, String)]) -> String {
        let n = &self.nodes[node];
        let mut out = format!("<{}", n.name);
        for (k, v) in set {
            out.push_str(&format!(" {k}='{}'", emit::attr(v)));
        }
        for (k, v) in attributes(&self.text[n.start..n.start_tag_end]) {
            if !set.iter().any(|(s, _)| *s == k) {
                out.push_str(&format!(" {k}='{}'", emit::attr(&v)));
            }
        }
        out.push_str(if n.empty { "/>" } else { ">" });
        out
    }

    pub fn indent_of(&self, node: usize) -> String {
        indent_before(self.text, self.nodes[node].start)
    }

    /// Lines `children` as a block that closes at `indent`, each child one
    /// step deeper.
    pub fn block(&self, open: &str, children: &[String], close: &str, indent: &str) -> String {
        let mut s = String::from(open);
        for c in children {
            s.push('\n');
            s.push_str(indent);
            s.push_str(&self.unit);
            s.push_str(c);
        }
        s.push('\n');
        s.push_str(indent);
        s.push_str(close);
        s
    }

    /// Replaces the whole of `node`.
    pub fn replace(&self, node: usize, text: String) -> Splice {
        let n = &self.nodes[node];
        Splice {
            start: n.start,
            end: n.end,
            text,
        }
    }

    /// Removes `node`, with its lines when it stands alone on them, and puts
    /// `text` there.
    pub fn replace_lines(&self, node: usize, text: String) -> Splice {
        let n = &self.nodes[node];
        let start = line_start_if_blank(self.text, n.start);
        let end = if start < n.start {
            line_end_if_blank(self.text, n.end)
        } else {
            n.end
        };
        Splice { start, end, text }
    }

    /// Inserts `element` (already indented for its first line) after `node`.
    pub fn insert_after(&self, node: usize, element: &str) -> Splice {
        let indent = self.indent_of(node);
        Splice::insert(self.nodes[node].end, format!("\n{indent}{element}"))
    }

    /// Inserts `element` before `node`, on its own line.
    pub fn insert_before(&self, node: usize, element: &str) -> Splice {
        let indent = self.indent_of(node);
        Splice::insert(self.nodes[node].start, format!("{element}\n{indent}"))
    }

    /// Inserts `lines` (indented, each ending with a newline) before
    /// `offset`: at the start of its line when only whitespace precedes it
    /// there, else on a new line, followed by `indent` for what was at `offset`.
    pub fn insert_lines(&self, offset: usize, lines: String, indent: &str) -> Splice {
        let at = line_start_if_blank(self.text, offset);
        if at < offset {
            Splice::insert(at, lines)
        } else {
            Splice::insert(at, format!("\n{lines}{indent}"))
        }
    }

    /// The text with `splices` made; they never overlap.
    pub fn apply(&self, mut splices: Vec<Splice>) -> Result<String, PatchError> {
        // Stable: of two insertions at one offset, the first made goes first.
        splices.sort_by_key(|s| (s.start, s.end));
        let mut out = String::with_capacity(self.text.len() + 4096);
        let mut at = 0;
        for s in &splices {
            if s.start < at {
                return Err(self.error(
                    s.start,
                    "",
                    "internal error: overlapping edits".to_owned(),
                ));
            }
            out.push_str(&self.text[at..s.start]);
            out.push_str(&s.text);
            at = s.end;
        }
        out.push_str(&self.text[at..]);
        Ok(out)
    }
}
