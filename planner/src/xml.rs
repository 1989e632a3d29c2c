//! A small read-only XML element tree on top of quick-xml, for documents that
//! are read whole (libvirt capabilities, node devices). Each element remembers
//! its line so that errors can point at it. Lossless editing of domain XML is
//! not done here: that works on the byte stream.

use quick_xml::events::{BytesStart, Event};
use quick_xml::Reader;
use quick_xml::XmlVersion;

/// One element: name, attributes in document order, text, children, line.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Element {
    /// Qualified name as written (`qemu:commandline`).
    pub name: String,
    /// Attributes, unescaped.
    pub attrs: Vec<(String, String)>,
    /// Concatenated, unescaped text directly inside the element, trimmed.
    pub text: String,
    /// Child elements in order.
    pub children: Vec<Element>,
    /// 1-based line of the start tag.
    pub line: usize,
}

/// A parse failure with its position.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}, column {column}: {message}")]
pub struct XmlError {
    /// 1-based line.
    pub line: usize,
    /// 1-based column.
    pub column: usize,
    /// What is wrong.
    pub message: String,
}

impl Element {
    /// The value of an attribute.
    pub fn attr(&self, name: &str) -> Option<&str> {
        self.attrs
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// The first child with this name.
    pub fn child(&self, name: &str) -> Option<&Element> {
        self.children.iter().find(|c| c.name == name)
    }

    /// All children with this name.
    pub fn children_named<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a Element> + 'a {
        self.children.iter().filter(move |c| c.name == name)
    }

    /// Follows a path of child names (`["host", "topology", "cells"]`).
    pub fn path(&self, names: &[&str]) -> Option<&Element> {
        names.iter().try_fold(self, |e, name| e.child(name))
    }
}

pub use crate::text::line_col;

fn position_error(text: &str, offset: usize, message: String) -> XmlError {
    let (line, column) = line_col(text.as_bytes(), offset);
    XmlError {
        line,
        column,
        message,
    }
}

fn start_element(text: &str, e: &BytesStart, at: usize) -> Result<Element, XmlError> {
    let mut attrs = Vec::new();
    for attr in e.attributes() {
        let attr = attr.map_err(|err| position_error(text, at, format!("bad attribute: {err}")))?;
        let key = attr.key.as_ref().to_owned();
        let value = attr
            .normalized_value(XmlVersion::Implicit1_0)
            .map_err(|err| position_error(text, at, format!("bad attribute {key}: {err}")))?
            .into_owned();
        attrs.push((key, value));
    }
    Ok(Element {
        name: e.name().as_ref().to_owned(),
        attrs,
        line: line_col(text.as_bytes(), at).0,
        ..Element::default()
    })
}

/// Parses a whole document and returns its root element.
pub fn parse(text: &str) -> Result<Element, XmlError> {
    let mut reader = Reader::from_reader(text.as_bytes());
    reader.config_mut().check_end_names = true;
    let mut stack: Vec<Element> = Vec::new();
    let mut root: Option<Element> = None;
    loop {
        let at = usize::try_from(reader.buffer_position()).unwrap_or(usize::MAX);
        let event = reader.read_event().map_err(|e| {
            let pos = usize::try_from(reader.error_position()).unwrap_or(at);
            position_error(text, pos, format!("not well-formed XML: {e}"))
        })?;
        match event {
            Event::Start(e) => stack.push(start_element(text, &e, at)?),
            Event::Empty(e) => {
                let element = start_element(text, &e, at)?;
                match stack.last_mut() {
                    Some(parent) => parent.children.push(element),
                    None => root = root.or(Some(element)),
                }
            }
            Event::End(_) => {
                if let Some(mut done) = stack.pop() {
                    done.text = done.text.trim().to_owned();
                    match stack.last_mut() {
                        Some(parent) => parent.children.push(done),
                        None => root = root.or(Some(done)),
                    }
                }
            }
            Event::Text(t) => {
                if let Some(current) = stack.last_mut() {
                    current.text.push_str(&t.xml10_content());
                }
            }
            Event::GeneralRef(r) => {
                if let Some(current) = stack.last_mut() {
                    let name = r.xml10_content().into_owned();
                    let resolved = match name.as_str() {
                        "lt" => "<".to_owned(),
                        "gt" => ">".to_owned(),
                        "amp" => "&".to_owned(),
                        "apos" => "'".to_owned(),
                        "quot" => "\"".to_owned(),
                        _ => r
                            .resolve_char_ref()
                            .ok()
                            .flatten()
                            .map(String::from)
                            .unwrap_or_default(),
                    };
                    current.text.push_str(&resolved);
                }
            }
            Event::CData(c) => {
                if let Some(current) = stack.last_mut() {
                    current.text.push_str(&c.xml10_content());
                }
            }
            Event::Eof => break,
            _ => {}
        }
    }
    if let Some(open) = stack.last() {
        return Err(position_error(
            text,
            text.len(),
            format!(
                "the document ends inside <{}> (opened at line {}): it is truncated",
                open.name, open.line
            ),
        ));
    }
    root.ok_or_else(|| position_error(text, text.len(), "no XML element".to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builds_a_tree_with_lines() -> Result<(), XmlError> {
        let doc = parse("<a x='1 &amp; 2'>\n  <b>hi &lt;there&gt;</b>\n  <c/>\n</a>")?;
        assert_eq!(doc.attr("x"), Some("1 & 2"));
        assert_eq!(doc.child("b").map(|b| b.text.as_str()), Some("hi <there>"));
        assert_eq!(doc.child("c").map(|c| c.line), Some(3));
        assert_eq!(doc.path(&["b"]).map(|b| b.line), Some(2));
        Ok(())
    }

    #[test]
    fn line_and_column() {
        assert_eq!(line_col(b"ab\ncd", 4), (2, 2));
        assert_eq!(line_col(b"ab", 0), (1, 1));
    }

    #[test]
    fn reports_truncation() {
        let err = parse("<a>\n<b>").err();
        assert_eq!(err.map(|e| e.line), Some(2));
    }
}
