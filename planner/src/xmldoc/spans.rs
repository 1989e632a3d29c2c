//! Where each element of a document starts and ends, in bytes, from one
//! quick-xml pass: what the lossless patcher splices, and what names the
//! element a truncated document ends inside. Values are not read here.

use super::{Problem, XmlError};
use quick_xml::events::Event;
use quick_xml::Reader;

/// One element's byte spans and place in the tree.
#[derive(Debug, Clone)]
pub(crate) struct Span {
    /// Qualified name as written (`qemu:commandline`).
    pub name: String,
    /// Offset of `<`.
    pub start: usize,
    /// Offset just after the start tag's `>`.
    pub start_tag_end: usize,
    /// Offset of the end tag's `<` (= `start_tag_end` for an empty element).
    pub end_tag_start: usize,
    /// Offset just after the element.
    pub end: usize,
    /// Indexes of the child elements, in order.
    pub children: Vec<usize>,
    /// Written as `<name/>`.
    pub empty: bool,
}

fn offset(position: u64) -> usize {
    usize::try_from(position).unwrap_or(usize::MAX)
}

/// The elements of `text` in document order: index 0 is the root. Fails on
/// what is not well formed, a second root element, a document that ends
/// inside an element, and one without any element.
pub(crate) fn scan(text: &str) -> Result<Vec<Span>, XmlError> {
    let mut reader = Reader::from_str(text);
    reader.config_mut().check_end_names = true;
    let mut spans: Vec<Span> = Vec::new();
    let mut open: Vec<usize> = Vec::new();
    loop {
        let before = offset(reader.buffer_position());
        let event = reader.read_event().map_err(|e| {
            let at = usize::try_from(reader.error_position()).unwrap_or(before);
            XmlError::at(text, at, Problem::Syntax(e.to_string()))
        })?;
        let after = offset(reader.buffer_position());
        let (e, empty) = match event {
            Event::Start(e) => (e, false),
            Event::Empty(e) => (e, true),
            Event::End(_) => {
                if let Some(i) = open.pop() {
                    spans[i].end_tag_start = before;
                    spans[i].end = after;
                }
                continue;
            }
            Event::Eof => break,
            _ => continue,
        };
        let name = e.name().as_ref().to_owned();
        let index = spans.len();
        match open.last() {
            Some(&parent) => spans[parent].children.push(index),
            None if index > 0 => return Err(XmlError::at(text, before, Problem::SecondRoot(name))),
            None => {}
        }
        spans.push(Span {
            name,
            start: before,
            start_tag_end: after,
            end_tag_start: after,
            end: after,
            children: Vec::new(),
            empty,
        });
        if !empty {
            open.push(index);
        }
    }
    if let Some(&inner) = open.last() {
        let opened_line = crate::text::line_col(text.as_bytes(), spans[inner].start).0;
        let open = spans[inner].name.clone();
        return Err(XmlError::at(
            text,
            text.len(),
            Problem::Truncated { open, opened_line },
        ));
    }
    if spans.is_empty() {
        return Err(XmlError::at(text, text.len(), Problem::NoElement));
    }
    Ok(spans)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_spans_and_structure_errors() -> Result<(), XmlError> {
        let text = "<a x='1'>\n  <b/>\n  <c>hi</c>\n</a>";
        let spans = scan(text)?;
        let names: Vec<(&str, &[usize], bool)> = spans
            .iter()
            .map(|s| (s.name.as_str(), s.children.as_slice(), s.empty))
            .collect();
        assert_eq!(
            names,
            [
                ("a", &[1, 2][..], false),
                ("b", &[], true),
                ("c", &[], false)
            ]
        );
        assert_eq!(&text[spans[2].start..spans[2].end], "<c>hi</c>");
        assert_eq!(&text[spans[2].start_tag_end..spans[2].end_tag_start], "hi");
        for (text, line, problem) in [
            (
                "<a>\n<b>",
                2,
                Problem::Truncated {
                    open: "b".to_owned(),
                    opened_line: 2,
                },
            ),
            ("<a/>\n<b/>", 2, Problem::SecondRoot("b".to_owned())),
            ("<!-- only -->\n", 2, Problem::NoElement),
        ] {
            assert_eq!(
                scan(text).err().map(|e| (e.line, e.problem)),
                Some((line, problem))
            );
        }
        Ok(())
    }
}
