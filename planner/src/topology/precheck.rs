//! What hwloc relies on in an XML topology and does not check itself: every
//! processor-side object (machine, package, cache, core, PU, group, NUMA
//! node) has a `cpuset` and a `complete_cpuset` that parse, and each child's
//! sets lie inside its parent's. libhwloc 2.9 crashes (SIGSEGV) importing a
//! PU without `complete_cpuset`; a file from another host must be refused
//! with the object's line before it reaches hwloc.

use super::TopologyError;
use crate::xmldoc::NodeExt;
use roxmltree::Node;
use std::path::Path;

/// hwloc object types without CPU sets: I/O and misc objects.
const NO_CPUSET: &[&str] = &["Bridge", "PCIDev", "OSDev", "Misc"];

/// The sets an object must carry.
const SETS: &[&str] = &["cpuset", "complete_cpuset"];

/// An hwloc bitmap: 32-bit words, least significant first; `infinite` when
/// written with the `0xf...f` prefix (every higher bit set).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Bitmap {
    words: Vec<u32>,
    infinite: bool,
}

impl Bitmap {
    /// `0x00000003`, `0x000000ff,0xffffffff`, `0xf...f,0x0000ffff`,
    /// `0x000000ff,,0x0` (an empty word is zero).
    fn parse(text: &str) -> Option<Bitmap> {
        let mut infinite = false;
        let mut words = Vec::new();
        for (i, part) in text.trim().split(',').enumerate() {
            if i == 0 && part == "0xf...f" {
                infinite = true;
                continue;
            }
            // hwloc leaves zero words out: `0x000000ff,,,0x000000ff`.
            if part.is_empty() && i > 0 {
                words.push(0);
                continue;
            }
            let hex = part.strip_prefix("0x")?;
            if hex.is_empty() || hex.len() > 8 {
                return None;
            }
            words.push(u32::from_str_radix(hex, 16).ok()?);
        }
        words.reverse();
        Some(Bitmap { words, infinite })
    }

    /// Whether every bit of `self` is in `outer`.
    fn is_subset(&self, outer: &Bitmap) -> bool {
        if outer.infinite {
            return true;
        }
        if self.infinite {
            return false;
        }
        self.words
            .iter()
            .enumerate()
            .all(|(i, w)| w & !outer.words.get(i).copied().unwrap_or(0) == 0)
    }
}

/// Checks every `<object>` under `root` (a `<topology>`).
pub(crate) fn hwloc(path: &Path, root: Node) -> Result<(), TopologyError> {
    check(path, root, None)
}

fn check(path: &Path, node: Node, parent: Option<&[Bitmap]>) -> Result<(), TopologyError> {
    for child in node.children().filter(|c| c.is("object")) {
        let kind = child.attribute("type").unwrap_or("");
        let sets = if NO_CPUSET.contains(&kind) {
            None
        } else {
            Some(object_sets(path, child, kind, parent)?)
        };
        check(path, child, sets.as_deref().or(parent))?;
    }
    Ok(())
}

/// An object's sets, parsed and inside its parent's.
fn object_sets(
    path: &Path,
    object: Node,
    kind: &str,
    parent: Option<&[Bitmap]>,
) -> Result<Vec<Bitmap>, TopologyError> {
    let bad = |problem: String| TopologyError::BadValue {
        path: path.to_owned(),
        line: object.line(),
        problem: format!(
            "<object type=\"{kind}\"{}> {problem}: hwloc cannot import this file safely; \
             export it again with `lstopo --of xml`",
            object
                .attribute("os_index")
                .map(|i| format!(" os_index=\"{i}\""))
                .unwrap_or_default()
        ),
    };
    let mut sets = Vec::new();
    for (i, name) in SETS.iter().enumerate() {
        let text = object
            .attribute(*name)
            .ok_or_else(|| bad(format!("has no {name}")))?;
        let set = Bitmap::parse(text)
            .ok_or_else(|| bad(format!("has {name}=\"{text}\", not an hwloc bitmap")))?;
        if let Some(outer) = parent.and_then(|p| p.get(i)) {
            if !set.is_subset(outer) {
                return Err(bad(format!("has a {name} outside its parent's")));
            }
        }
        sets.push(set);
    }
    Ok(sets)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bitmaps_read_as_hwloc_writes_them() {
        let b = Bitmap::parse("0x000000ff,0x00000001").unwrap_or_else(|| panic!("parse"));
        assert_eq!(b.words, [1, 0xff]);
        let low = Bitmap::parse("0x00000001").unwrap_or_else(|| panic!("parse"));
        assert!(low.is_subset(&b));
        assert!(!b.is_subset(&low));
        let all = Bitmap::parse("0xf...f,0x00000000").unwrap_or_else(|| panic!("parse"));
        assert!(b.is_subset(&all));
        let gaps = Bitmap::parse("0x000000ff,,,0x00000001").unwrap_or_else(|| panic!("parse"));
        assert_eq!(gaps.words, [1, 0, 0, 0xff]);
        assert!(Bitmap::parse("ff").is_none());
        assert!(Bitmap::parse(",0x1").is_none());
        assert!(Bitmap::parse("0x123456789").is_none());
    }

    /// Issue 14, defect 4: a PU without `complete_cpuset` crashed libhwloc;
    /// now it is an error naming the object's line.
    #[test]
    fn a_corrupted_hwloc_xml_kills_the_process_no_more() {
        let xml = "<?xml version=\"1.0\"?>\n<topology version=\"2.0\">\n\
            <object type=\"Machine\" os_index=\"0\" cpuset=\"0x00000003\" complete_cpuset=\"0x00000003\">\n\
            <object type=\"PU\" os_index=\"0\" cpuset=\"0x00000001\" complete_cpuset=\"0x00000001\"/>\n\
            <object type=\"PU\" os_index=\"1\" cpuset=\"0x00000002\"/>\n\
            <object type=\"PU\" os_index=\"2\" cpuset=\"0x00000004\" complete_cpuset=\"0x00000004\"/>\n\
            </object>\n</topology>\n";
        let doc = crate::xmldoc::parse(xml).unwrap_or_else(|e| panic!("{e}"));
        let e = hwloc(Path::new("x.xml"), doc.root_element())
            .err()
            .map(|e| e.to_string());
        assert_eq!(
            e.as_deref()
                .map(|e| e.split(':').take(3).collect::<Vec<_>>().join(":")),
            Some("x.xml:5: <object type=\"PU\" os_index=\"1\"> has no complete_cpuset".to_owned())
        );
        let fixed = xml.replace(
            "cpuset=\"0x00000002\"/>",
            "cpuset=\"0x00000002\" complete_cpuset=\"0x00000002\"/>",
        );
        let doc = crate::xmldoc::parse(&fixed).unwrap_or_else(|e| panic!("{e}"));
        let e = hwloc(Path::new("x.xml"), doc.root_element())
            .err()
            .map(|e| e.to_string());
        assert!(e.is_some_and(|e| e.starts_with("x.xml:6:") && e.contains("outside its parent's")));
    }
}
