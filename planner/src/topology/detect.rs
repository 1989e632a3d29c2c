//! Tells what a topology file is by its content, and rejects what is not well
//! formed with the line and column of the problem. It does not read topologies.

use super::TopologyError;
use crate::text::line_col;
use crate::xmldoc::{self, NodeExt, Problem, XmlError};
use roxmltree::Node;
use std::path::Path;

/// The kinds of topology file pinplan reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceKind {
    /// `lstopo --of xml` (hwloc formats 1.x and 2.0).
    HwlocXml,
    /// `virsh capabilities`.
    LibvirtCapabilities,
}

/// The kind alone (tests).
#[cfg(test)]
pub(crate) fn sniff(path: &Path, text: &str) -> Result<SourceKind, TopologyError> {
    parse(path, text).map(|(kind, _)| kind)
}

/// Checks that `text` is one well-formed XML document, says which kind, and
/// keeps the parsed document for the readers' own checks.
pub(crate) fn parse<'t>(
    path: &Path,
    text: &'t str,
) -> Result<(SourceKind, roxmltree::Document<'t>), TopologyError> {
    looks_like_xml(path, text)?;
    let doc = xmldoc::parse(text).map_err(|e| malformed(path, e))?;
    let kind = kind_of(path, doc.root_element())?;
    Ok((kind, doc))
}

fn malformed(path: &Path, e: XmlError) -> TopologyError {
    let problem = match e.problem {
        Problem::Truncated { open, opened_line } => format!(
            "the file ends inside <{open}> (opened at line {opened_line}): it is truncated; \
             export it again"
        ),
        Problem::NoElement => "no XML element in the file".to_owned(),
        other => other.to_string(),
    };
    TopologyError::Malformed {
        path: path.to_owned(),
        line: e.line,
        column: e.column,
        problem,
    }
}

/// Refuses, before parsing, what is empty or does not start like XML.
fn looks_like_xml(path: &Path, text: &str) -> Result<(), TopologyError> {
    let first = text.trim_start_matches('\u{feff}').trim_start();
    let (offset, problem) = if first.is_empty() {
        (0, "the file is empty")
    } else if !first.starts_with('<') {
        (
            text.len() - first.len(),
            "this is neither XML nor pinplan's topology JSON (it starts with neither '<' nor '{')",
        )
    } else {
        return Ok(());
    };
    let (line, column) = line_col(text.as_bytes(), offset);
    Err(TopologyError::Malformed {
        path: path.to_owned(),
        line,
        column,
        problem: problem.to_owned(),
    })
}

/// The kind a root element names; hwloc XML only in a format hwloc 2 reads.
fn kind_of(path: &Path, root: Node) -> Result<SourceKind, TopologyError> {
    let wrong = |problem: &str| TopologyError::WrongKind {
        path: path.to_owned(),
        problem: problem.to_owned(),
    };
    match root.written_name().as_str() {
        "topology" => {
            if let Some(version) = root.attribute("version") {
                let major = version
                    .split('.')
                    .next()
                    .and_then(|m| m.trim().parse::<u32>().ok());
                if major.is_none_or(|m| m > 2) {
                    return Err(TopologyError::UnsupportedHwlocFormat {
                        path: path.to_owned(),
                        version: version.to_owned(),
                        linked: super::hwloc::linked_version(),
                    });
                }
            }
            Ok(SourceKind::HwlocXml)
        }
        "capabilities" => Ok(SourceKind::LibvirtCapabilities),
        "domain" => Err(wrong(
            "this is a libvirt domain XML (a VM's definition), not a host topology",
        )),
        "domainCapabilities" => Err(wrong(
            "this is libvirt domain capabilities (`virsh domcapabilities`), not host \
             capabilities (`virsh capabilities`)",
        )),
        "device" => Err(wrong(
            "this is a libvirt node device XML, not a host topology",
        )),
        other => Err(wrong(&format!(
            "the root element is <{other}>, which is neither hwloc XML (<topology>) nor \
             libvirt capabilities (<capabilities>)"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sniff_str(text: &str) -> Result<SourceKind, String> {
        sniff(Path::new("f.xml"), text).map_err(|e| e.to_string())
    }

    #[test]
    fn tells_kinds_apart() {
        let hwloc = "<?xml version=\"1.0\"?>\n<!DOCTYPE topology SYSTEM \"hwloc2.dtd\">\n<topology version=\"2.0\"><object type=\"Machine\"/></topology>\n";
        assert_eq!(sniff_str(hwloc), Ok(SourceKind::HwlocXml));
        assert_eq!(
            sniff_str("<topology><object/></topology>"),
            Ok(SourceKind::HwlocXml)
        );
        assert_eq!(
            sniff_str("<capabilities><host/></capabilities>"),
            Ok(SourceKind::LibvirtCapabilities)
        );
    }

    #[test]
    fn rejects_with_position() {
        for (text, expected) in [
            ("", "f.xml:1:1: the file is empty"),
            (
                "\n  hello",
                "f.xml:2:3: this is neither XML nor pinplan's topology JSON (it starts with neither '<' nor '{')",
            ),
            (
                "<topology version=\"2.0\">\n  <object type=\"Machine\">\n",
                "f.xml:3:1: the file ends inside <object> (opened at line 2): it is truncated; export it again",
            ),
            (
                "<domain type='kvm'><name>x</name></domain>",
                "f.xml: this is a libvirt domain XML (a VM's definition), not a host topology",
            ),
            (
                "<html></html>",
                "f.xml: the root element is <html>, which is neither hwloc XML (<topology>) nor libvirt capabilities (<capabilities>)",
            ),
        ] {
            assert_eq!(sniff_str(text), Err(expected.to_owned()), "{text:?}");
        }
        let mismatched = sniff_str("<topology>\n<a></b></topology>");
        assert!(
            mismatched
                .as_ref()
                .is_err_and(|e| e.starts_with("f.xml:2:")),
            "{mismatched:?}"
        );
        let v3 = sniff_str("<topology version=\"3.0\"></topology>");
        assert!(
            v3.as_ref().is_err_and(|e| e.contains("format 3.0")),
            "{v3:?}"
        );
    }

    #[test]
    fn an_unknown_entity_names_its_line() {
        let err = sniff_str("<topology version=\"2.0\">\n  <object type=\"&m;\"/>\n</topology>");
        assert!(
            err.as_ref()
                .is_err_and(|e| e.starts_with("f.xml:2:17: unknown entity &m;")),
            "{err:?}"
        );
    }
}
