//! Reading XML: whole documents (libvirt capabilities, node devices, domains,
//! the format sniff) into a `roxmltree` tree, the element look-ups their
//! readers share ([`NodeExt`]), element byte spans for the lossless patcher
//! ([`spans`]), and the one error type, which names line and column. What the
//! elements mean is the readers' business.

pub(crate) mod spans;

use crate::text::line_col;
use roxmltree::{Document, Node, ParsingOptions, TextPos};
use std::borrow::Cow;

/// Why a document could not be read, and where.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}, column {column}: {problem}")]
pub(crate) struct XmlError {
    /// 1-based line.
    pub line: usize,
    /// 1-based column, in bytes.
    pub column: usize,
    /// What is wrong.
    pub problem: Problem,
}

/// What is wrong with a document.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Problem {
    /// The parser's own words.
    #[error("not well-formed XML: {0}")]
    Syntax(String),
    /// `&name;` that neither XML nor the document's DTD defines.
    #[error(
        "unknown entity &{0};: neither XML (&lt; &gt; &amp; &apos; &quot;) nor a DTD in the \
         document defines it; write a literal & as &amp;"
    )]
    UnknownEntity(String),
    /// The text stops before element `open`, opened on `opened_line`, is closed.
    #[error("the document ends inside <{open}> (opened at line {opened_line}): it is truncated")]
    Truncated {
        /// The innermost open element.
        open: String,
        /// The line of its start tag.
        opened_line: usize,
    },
    /// Another element after the root element was closed.
    #[error("a second root element <{0}> after the document ended")]
    SecondRoot(String),
    /// Text after the root element was closed.
    #[error("text after the root element")]
    TextAfterRoot,
    /// Not one element.
    #[error("no XML element")]
    NoElement,
    /// `&#N;` naming a character XML cannot hold.
    #[error("character reference {0} names no character XML can hold")]
    BadCharRef(String),
}

impl XmlError {
    /// `problem` at byte `offset` of `text`.
    pub(crate) fn at(text: &str, offset: usize, problem: Problem) -> XmlError {
        let (line, column) = line_col(text.as_bytes(), offset);
        XmlError {
            line,
            column,
            problem,
        }
    }
}

/// Parses a whole document. DTDs are allowed (hwloc XML names one) and the
/// entities they declare expanded; an entity nobody declares is an error.
pub(crate) fn parse(text: &str) -> Result<Document<'_>, XmlError> {
    let options = ParsingOptions {
        allow_dtd: true,
        ..ParsingOptions::default()
    };
    let doc = Document::parse_with_options(text, options).map_err(|e| error(text, &e))?;
    check_char_refs(text)?;
    Ok(doc)
}

/// Every `&#N;` / `&#xN;` names a character of XML 1.0's `Char` production
/// (roxmltree lets some through that `xmllint` refuses, e.g. `&#x110000;`).
fn check_char_refs(text: &str) -> Result<(), XmlError> {
    let mut from = 0;
    while let Some(at) = text[from..].find("&#").map(|i| from + i) {
        // Comments and CDATA sections hold no references: skip them whole.
        if let Some((open, close)) = [("<!--", "-->"), ("<![CDATA[", "]]>")]
            .into_iter()
            .filter_map(|(o, c)| text[from..at].rfind(o).map(|i| (from + i, c)))
            .max()
        {
            if let Some(end) = text[open..].find(close).map(|i| open + i + close.len()) {
                if end > at {
                    from = end;
                    continue;
                }
            }
        }
        let rest = &text[at + 2..];
        let end = rest.find(';').unwrap_or(rest.len());
        let digits = &rest[..end];
        let value = match digits.strip_prefix('x') {
            Some(hex) => u32::from_str_radix(hex, 16).ok(),
            None => digits.parse::<u32>().ok(),
        };
        let allowed = value.and_then(char::from_u32).is_some_and(|c| {
            matches!(c, '\t' | '\n' | '\r')
                || ('\u{20}'..='\u{d7ff}').contains(&c)
                || ('\u{e000}'..='\u{fffd}').contains(&c)
                || c >= '\u{10000}'
        });
        if !allowed {
            let reference = format!("&#{};", digits.chars().take(12).collect::<String>());
            return Err(XmlError::at(text, at, Problem::BadCharRef(reference)));
        }
        from = at + 2;
    }
    Ok(())
}

fn error(text: &str, e: &roxmltree::Error) -> XmlError {
    use roxmltree::Error as E;
    match e {
        E::UnknownEntityReference(name, pos) => XmlError::at(
            text,
            offset(text, *pos),
            Problem::UnknownEntity(name.clone()),
        ),
        E::UnclosedRootNode | E::UnexpectedEndOfStream | E::NoRootNode | E::UnknownToken(_) => {
            outside_the_elements(text, e)
        }
        _ => XmlError::at(text, offset(text, e.pos()), syntax(e)),
    }
}

/// roxmltree tells neither where a truncated document stops nor what stands
/// after the root element (an "unknown token"); the span scan, which follows
/// the elements, says which element is open or that a second root begins.
fn outside_the_elements(text: &str, e: &roxmltree::Error) -> XmlError {
    let ends_early = !matches!(e, roxmltree::Error::UnknownToken(_));
    let at = if ends_early {
        text.len()
    } else {
        offset(text, e.pos())
    };
    match spans::scan(text) {
        Err(found) if ends_early || !matches!(found.problem, Problem::Syntax(_)) => found,
        Ok(elements) if !ends_early && elements.first().is_some_and(|root| at >= root.end) => {
            XmlError::at(text, at, Problem::TextAfterRoot)
        }
        _ => XmlError::at(text, at, syntax(e)),
    }
}

/// roxmltree's message without its own ` at LINE:COLUMN` (ours is in front).
fn syntax(e: &roxmltree::Error) -> Problem {
    Problem::Syntax(e.to_string().replace(&format!(" at {}", e.pos()), ""))
}

/// The byte offset of a roxmltree position (whose column counts characters).
fn offset(text: &str, pos: TextPos) -> usize {
    let row = usize::try_from(pos.row).unwrap_or(usize::MAX);
    let col = usize::try_from(pos.col).unwrap_or(usize::MAX);
    let line_start: usize = text
        .split_inclusive('\n')
        .take(row.saturating_sub(1))
        .map(str::len)
        .sum();
    let line = &text[line_start..];
    line_start
        + line
            .char_indices()
            .nth(col.saturating_sub(1))
            .map_or(line.len(), |(i, _)| i)
}

/// Look-ups on elements, by name as written without a prefix: `child("cpu")`
/// finds `<cpu>` (in no namespace or the default one), not `<foo:cpu>`.
pub(crate) trait NodeExt<'a, 'input: 'a>: Sized {
    /// Whether this is the element `<name>`.
    fn is(self, name: &str) -> bool;
    /// The first child element `<name>`.
    fn child(self, name: &str) -> Option<Node<'a, 'input>>;
    /// The child elements `<name>`, in order.
    fn children_named(self, name: &str) -> impl Iterator<Item = Node<'a, 'input>>;
    /// Follows child names (`["host", "topology", "cells"]`).
    fn path(self, names: &[&str]) -> Option<Node<'a, 'input>>;
    /// The text directly inside the element (not its children's), trimmed.
    fn inner_text(self) -> Cow<'a, str>;
    /// The name as written, with its prefix (for messages).
    fn written_name(self) -> String;
    /// The 1-based line of the start tag.
    fn line(self) -> usize;
}

impl<'a, 'input: 'a> NodeExt<'a, 'input> for Node<'a, 'input> {
    fn is(self, name: &str) -> bool {
        let tag = self.tag_name();
        self.is_element() && tag.name() == name && tag.namespace() == self.default_namespace()
    }

    fn child(self, name: &str) -> Option<Node<'a, 'input>> {
        self.children().find(|c| c.is(name))
    }

    fn children_named(self, name: &str) -> impl Iterator<Item = Node<'a, 'input>> {
        self.children().filter(move |c| c.is(name))
    }

    fn path(self, names: &[&str]) -> Option<Node<'a, 'input>> {
        names.iter().try_fold(self, |e, name| e.child(name))
    }

    fn inner_text(self) -> Cow<'a, str> {
        let mut texts = self
            .children()
            .filter_map(|c| c.is_text().then(|| c.text()).flatten());
        match (texts.next(), texts.next()) {
            (None, _) => Cow::Borrowed(""),
            (Some(only), None) => Cow::Borrowed(only.trim()),
            (Some(first), Some(second)) => {
                let joined: String = [first, second].into_iter().chain(texts).collect();
                Cow::Owned(joined.trim().to_owned())
            }
        }
    }

    fn written_name(self) -> String {
        let tag = self.tag_name();
        match tag.namespace().and_then(|uri| self.lookup_prefix(uri)) {
            Some(prefix) if tag.namespace() != self.default_namespace() => {
                format!("{prefix}:{}", tag.name())
            }
            _ => tag.name().to_owned(),
        }
    }

    fn line(self) -> usize {
        line_col(self.document().input_text().as_bytes(), self.range().start).0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_names_text_and_lines() -> Result<(), XmlError> {
        let text = "<a x='1 &amp; 2' xmlns:q='urn:q'>\n  <q:b>no</q:b>\n  <b>hi &lt;<!-- -->there&gt;<c/> <![CDATA[&]]></b>\n  <c/>\n</a>";
        let doc = parse(text)?;
        let a = doc.root_element();
        assert_eq!(a.attribute("x"), Some("1 & 2"));
        assert_eq!(
            a.child("b").map(|b| b.inner_text()),
            Some("hi <there> &".into())
        );
        assert_eq!(a.child("b").map(|b| b.line()), Some(3));
        assert_eq!(a.path(&["c"]).map(|c| c.line()), Some(4));
        let names: Vec<String> = a
            .children()
            .filter(|c| c.is_element())
            .map(|c| c.written_name())
            .collect();
        assert_eq!(names, ["q:b", "b", "c"]);
        Ok(())
    }

    #[test]
    fn errors_name_line_and_column() {
        for (text, line, column, problem) in [
            ("<a>\n  <b>&foo;</b></a>", 2, 6, "unknown entity &foo;"),
            ("<a>\n<b x='&bar;'/></a>", 2, 7, "unknown entity &bar;"),
            (
                "<a>\n<b>",
                2,
                4,
                "the document ends inside <b> (opened at line 2)",
            ),
            (
                "<a>\n</b>",
                2,
                1,
                "not well-formed XML: expected 'a' tag, not 'b'",
            ),
            ("<a/>\n<b/>", 2, 1, "a second root element <b>"),
            ("<a/>\ntext", 2, 1, "text after the root element"),
            ("<!-- é -->\n", 2, 1, "no XML element"),
            ("<é>\n</ü>", 2, 1, "not well-formed XML"),
            ("<é>é\n&x;</é>", 2, 1, "unknown entity &x;"),
            ("<a>é &x;</a>", 1, 7, "unknown entity &x;"),
        ] {
            let err = parse(text).err();
            assert_eq!(
                err.as_ref().map(|e| (e.line, e.column)),
                Some((line, column)),
                "{text:?}: {err:?}"
            );
            assert!(
                err.as_ref()
                    .is_some_and(|e| e.problem.to_string().starts_with(problem)),
                "{text:?}: {err:?}"
            );
        }
    }

    #[test]
    fn character_references_name_xml_characters() {
        for bad in ["&#x110000;", "&#0;", "&#xFFFE;", "&#xD800;", "&#x;"] {
            let text = format!("<a>\n<b>{bad}</b></a>");
            // roxmltree refuses some itself, the check after it the others.
            let e = parse(&text).map(drop).err();
            assert_eq!(e.as_ref().map(|e| e.line), Some(2), "{bad}: {e:?}");
        }
        for good in [
            "&#x41;",
            "&#10;",
            "&#x10FFFF;",
            "<!-- &#0; -->",
            "<![CDATA[&#0;]]>",
        ] {
            let text = format!("<a><b>{good}</b></a>");
            assert!(parse(&text).is_ok(), "{good}");
        }
    }

    #[test]
    fn a_dtd_declares_entities() -> Result<(), XmlError> {
        let text = "<!DOCTYPE a [ <!ENTITY n 'seven'> ]>\n<a>&n;</a>";
        assert_eq!(parse(text)?.root_element().inner_text(), "seven");
        Ok(())
    }
}
