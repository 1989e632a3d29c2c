//! Tells what a topology file is by its content, and rejects what is not well
//! formed with the line and column of the problem. It does not read topologies.

use super::TopologyError;
use crate::xml::line_col;
use quick_xml::events::Event;
use quick_xml::Reader;
use std::path::Path;

/// The kinds of topology file pinplan reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceKind {
    /// `lstopo --of xml` (hwloc formats 1.x and 2.0).
    HwlocXml,
    /// `virsh capabilities`.
    LibvirtCapabilities,
}

/// Checks that `text` is one well-formed XML document and says which kind.
pub(crate) fn sniff(path: &Path, text: &str) -> Result<SourceKind, TopologyError> {
    let malformed = |offset: usize, problem: String| {
        let (line, column) = line_col(text.as_bytes(), offset);
        TopologyError::Malformed {
            path: path.to_owned(),
            line,
            column,
            problem,
        }
    };
    let first = text.trim_start_matches('\u{feff}').trim_start();
    if first.is_empty() {
        return Err(malformed(0, "the file is empty".to_owned()));
    }
    if !first.starts_with('<') {
        let offset = text.len() - first.len();
        return Err(malformed(
            offset,
            "this is not XML (it does not start with '<')".to_owned(),
        ));
    }

    let mut reader = Reader::from_str(text);
    reader.config_mut().check_end_names = true;
    let mut open: Vec<(String, usize)> = Vec::new();
    let mut root: Option<(String, Option<String>)> = None;
    loop {
        let before = usize::try_from(reader.buffer_position()).unwrap_or(usize::MAX);
        let event = reader.read_event().map_err(|e| {
            let at = usize::try_from(reader.error_position()).unwrap_or(before);
            malformed(at, format!("not well-formed XML: {e}"))
        })?;
        match event {
            Event::Start(ref e) | Event::Empty(ref e) => {
                let name = e.name().as_ref().to_owned();
                if root.is_none() {
                    let version = e
                        .try_get_attribute("version")
                        .ok()
                        .flatten()
                        .map(|a| a.value.into_owned());
                    root = Some((name.clone(), version));
                } else if open.is_empty() {
                    return Err(malformed(
                        before,
                        format!("a second root element <{name}> after the document ended"),
                    ));
                }
                if matches!(event, Event::Start(_)) {
                    open.push((name, before));
                }
            }
            Event::End(_) => {
                open.pop();
            }
            Event::Text(ref t)
                if open.is_empty() && root.is_some() && !t.xml10_content().trim().is_empty() =>
            {
                return Err(malformed(before, "text after the root element".to_owned()));
            }
            Event::Eof => break,
            _ => {}
        }
    }
    if let Some((name, at)) = open.last() {
        let (line, _) = line_col(text.as_bytes(), *at);
        return Err(malformed(
            text.len(),
            format!(
                "the file ends inside <{name}> (opened at line {line}): it is truncated; \
                 export it again"
            ),
        ));
    }
    let Some((root, version)) = root else {
        return Err(malformed(
            text.len(),
            "no XML element in the file".to_owned(),
        ));
    };
    match root.as_str() {
        "topology" => {
            if let Some(version) = version {
                let major = version
                    .split('.')
                    .next()
                    .and_then(|m| m.trim().parse::<u32>().ok());
                if major.is_none_or(|m| m > 2) {
                    return Err(TopologyError::UnsupportedHwlocFormat {
                        path: path.to_owned(),
                        version,
                        linked: super::hwloc::linked_version(),
                    });
                }
            }
            Ok(SourceKind::HwlocXml)
        }
        "capabilities" => Ok(SourceKind::LibvirtCapabilities),
        "domain" => Err(TopologyError::WrongKind {
            path: path.to_owned(),
            problem: "this is a libvirt domain XML (a VM's definition), not a host topology"
                .to_owned(),
        }),
        "domainCapabilities" => Err(TopologyError::WrongKind {
            path: path.to_owned(),
            problem: "this is libvirt domain capabilities (`virsh domcapabilities`), not host \
                      capabilities (`virsh capabilities`)"
                .to_owned(),
        }),
        "device" => Err(TopologyError::WrongKind {
            path: path.to_owned(),
            problem: "this is a libvirt node device XML, not a host topology".to_owned(),
        }),
        other => Err(TopologyError::WrongKind {
            path: path.to_owned(),
            problem: format!(
                "the root element is <{other}>, which is neither hwloc XML (<topology>) nor \
                 libvirt capabilities (<capabilities>)"
            ),
        }),
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
            ("\n  hello", "f.xml:2:3: this is not XML (it does not start with '<')"),
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
}
