//! Huge page pools as sysfs lists them, per NUMA node:
//! `nodeN/hugepages/hugepages-SIZEkB/{nr,free}_hugepages`. The one reader of
//! that layout, for the topology (what the live host has) and for doctor
//! (what a captured tree has).

use super::fs::Fs;
use crate::ids::NodeId;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// The pages of one size on one NUMA node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PagePool {
    /// Page size in KiB (2048, 1048576).
    pub size_kib: u64,
    /// Pages in the pool.
    pub total: u64,
    /// Pages free now, when the source says.
    pub free: Option<u64>,
}

/// The pools under `dir` (a node's `hugepages` directory), smallest page
/// first: `list` gives a directory's entry names, `read` a file's trimmed
/// text. A pool without a readable `nr_hugepages` is left out; one without
/// `free_hugepages` has `free: None`.
pub fn read_pools(
    dir: &Path,
    list: impl Fn(&Path) -> Option<Vec<String>>,
    read: impl Fn(&Path) -> Option<String>,
) -> Vec<PagePool> {
    let mut pools: Vec<PagePool> = list(dir)
        .unwrap_or_default()
        .iter()
        .filter_map(|name| {
            let size_kib: u64 = name
                .strip_prefix("hugepages-")?
                .strip_suffix("kB")?
                .parse()
                .ok()?;
            let count = |file: &str| read(&dir.join(name).join(file))?.trim().parse().ok();
            Some(PagePool {
                size_kib,
                total: count("nr_hugepages")?,
                free: count("free_hugepages"),
            })
        })
        .collect();
    pools.sort_by_key(|p| p.size_kib);
    pools
}

/// The entry names of `dir` on the live host, unsorted; `None` when it
/// cannot be listed.
pub fn list_dir(dir: &Path) -> Option<Vec<String>> {
    let entries = std::fs::read_dir(dir).ok()?;
    Some(
        entries
            .filter_map(Result::ok)
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect(),
    )
}

impl Fs {
    /// Node `node`'s huge page pools under the root
    /// (`sys/devices/system/node/nodeN/hugepages/`).
    pub fn hugepage_pools(&self, node: NodeId) -> Vec<PagePool> {
        let dir = self.sys(&format!("devices/system/node/node{node}/hugepages"));
        read_pools(&dir, |d| self.list(d), |f| self.read(f))
    }
}
