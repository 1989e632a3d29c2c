//! Which page size backs each guest NUMA cell of a domain, by libvirt's
//! rule for `<memoryBacking><hugepages>`: the `<page>` whose `nodeset`
//! names the cell, else the `<page>` without a `nodeset`, else normal pages;
//! an empty `<hugepages/>` is the default huge page (2 MiB on x86); no
//! `<hugepages>`, normal pages. The domain reader (`spec`) and the patcher
//! read the elements; the rule is here, once.

use crate::cpuset::CpuSet;
use crate::ids::CpuId;
use std::collections::BTreeMap;

/// The default huge page size, in KiB, when `<hugepages/>` names none.
pub const DEFAULT_HUGE_KIB: u64 = 2048;

/// One `<page>` of `<hugepages>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageRule {
    /// Its size in KiB.
    pub kib: u64,
    /// The guest cells it is for (`nodeset`), or every other cell.
    pub cells: Option<CpuSet>,
}

/// The page size (KiB) of guest cell `cell` (`None`: a domain without guest
/// cells) under `hugepages` (`None`: the domain has no `<hugepages>`).
pub fn page_of(hugepages: Option<&[PageRule]>, cell: Option<u32>) -> u64 {
    let Some(rules) = hugepages else {
        return super::NORMAL_PAGE_KIB;
    };
    if rules.is_empty() {
        return DEFAULT_HUGE_KIB;
    }
    let named = cell.and_then(|c| {
        rules
            .iter()
            .find(|r| r.cells.as_ref().is_some_and(|s| s.contains(CpuId(c))))
    });
    let general = || rules.iter().find(|r| r.cells.is_none());
    match (named.or_else(general), cell) {
        (Some(rule), _) => rule.kib,
        // Without guest cells the first page's size is the VM's.
        (None, None) => rules[0].kib,
        (None, Some(_)) => super::NORMAL_PAGE_KIB,
    }
}

/// The cells of each page size (KiB): `cells` empty is a domain without
/// guest cells, then the whole VM is on the one size (under cell set `{}`).
pub fn layout(hugepages: Option<&[PageRule]>, cells: &[u32]) -> BTreeMap<u64, CpuSet> {
    let mut out: BTreeMap<u64, CpuSet> = BTreeMap::new();
    if cells.is_empty() {
        out.insert(page_of(hugepages, None), CpuSet::new());
    }
    for &c in cells {
        out.entry(page_of(hugepages, Some(c)))
            .or_default()
            .insert(CpuId(c));
    }
    out
}

/// A page size in words (`2 MiB pages`, `normal pages`).
pub fn size_words(kib: u64) -> String {
    if kib <= super::NORMAL_PAGE_KIB {
        "normal pages".to_owned()
    } else {
        let size = match kib {
            k if k % (1024 * 1024) == 0 => format!("{} GiB", k / (1024 * 1024)),
            k if k % 1024 == 0 => format!("{} MiB", k / 1024),
            k => format!("{k} KiB"),
        };
        format!("{size} pages")
    }
}

/// A layout in words: `2 MiB pages for cell 1, 1 GiB pages for cells 0,2-3`.
pub fn describe(layout: &BTreeMap<u64, CpuSet>) -> String {
    let parts: Vec<String> = layout
        .iter()
        .map(|(&kib, cells)| match cells.len() {
            0 => size_words(kib),
            1 => format!("{} for cell {cells}", size_words(kib)),
            _ => format!("{} for cells {cells}", size_words(kib)),
        })
        .collect();
    parts.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(kib: u64, cells: Option<&str>) -> PageRule {
        PageRule {
            kib,
            cells: cells.map(|c| c.parse().unwrap_or_default()),
        }
    }

    #[test]
    fn each_cell_takes_its_page_then_the_general_one_then_normal_pages() {
        // qemu-hugepages-numa-nodeset: 2 MiB for cell 1, 1 GiB for 0,2-3.
        let mixed = [rule(2048, Some("1")), rule(1_048_576, Some("0,2-3"))];
        let got = layout(Some(&mixed), &[0, 1, 2, 3]);
        assert_eq!(
            describe(&got),
            "2 MiB pages for cell 1, 1 GiB pages for cells 0,2-3"
        );
        // qemu-hugepages-numa-nodeset-part: cell 0 is on normal pages.
        let part = [rule(1_048_576, Some("1"))];
        assert_eq!(page_of(Some(&part), Some(0)), 4);
        assert_eq!(page_of(Some(&part), Some(1)), 1_048_576);
        // A page without nodeset covers the cells no other names.
        let general = [rule(2048, None), rule(1_048_576, Some("1"))];
        assert_eq!(page_of(Some(&general), Some(0)), 2048);
        assert_eq!(page_of(Some(&general), Some(1)), 1_048_576);
        // <hugepages/>: the default; no <hugepages>: normal pages.
        assert_eq!(page_of(Some(&[]), Some(3)), DEFAULT_HUGE_KIB);
        assert_eq!(page_of(None, None), 4);
        assert_eq!(describe(&layout(None, &[])), "normal pages");
    }
}
