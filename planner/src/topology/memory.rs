//! Memory of the live host's NUMA nodes from sysfs: free memory
//! (`nodeN/meminfo`) and the huge page pools
//! (`nodeN/hugepages/hugepages-SIZEkB/{nr,free}_hugepages`). hwloc knows the
//! sizes and totals but not what is free now.

use super::assemble::RawNode;
use crate::host::hugepages::{list_dir, read_pools};
use std::path::Path;

/// Fills `node`'s free memory and page pools from `nodes` (the
/// `/sys/devices/system/node` directory, or a copy of it); what cannot be
/// read stays as it was.
pub(crate) fn read_node_sysfs(nodes: &Path, node: &mut RawNode) {
    let dir = nodes.join(format!("node{}", node.id));
    if let Some(free) = std::fs::read_to_string(dir.join("meminfo"))
        .ok()
        .and_then(|text| mem_free_bytes(&text))
    {
        node.memory_free_bytes = Some(free);
    }
    let pools = read_pools(&dir.join("hugepages"), list_dir, |file| {
        std::fs::read_to_string(file).ok()
    });
    if !pools.is_empty() {
        node.hugepages = pools;
    }
}

/// `Node 0 MemFree:  123456 kB` → bytes.
fn mem_free_bytes(meminfo: &str) -> Option<u64> {
    meminfo.lines().find_map(|line| {
        let (key, value) = line.split_once(':')?;
        if !key.trim_end().ends_with("MemFree") {
            return None;
        }
        let kib: u64 = value.trim().strip_suffix("kB")?.trim().parse().ok()?;
        Some(kib.saturating_mul(1024))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::NodeId;
    use crate::topology::PagePool;

    #[test]
    fn reads_free_memory_and_page_pools() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let node = dir.path().join("node1");
        let pool = node.join("hugepages/hugepages-2048kB");
        std::fs::create_dir_all(&pool).unwrap_or_else(|e| panic!("{e}"));
        std::fs::create_dir_all(node.join("hugepages/hugepages-1048576kB"))
            .unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(
            node.join("meminfo"),
            "Node 1 MemTotal:       32768000 kB\nNode 1 MemFree:        1000 kB\n",
        )
        .unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(pool.join("nr_hugepages"), "512\n").unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(pool.join("free_hugepages"), "500\n").unwrap_or_else(|e| panic!("{e}"));
        let gig = node.join("hugepages/hugepages-1048576kB");
        std::fs::write(gig.join("nr_hugepages"), "4\n").unwrap_or_else(|e| panic!("{e}"));
        let mut raw = RawNode {
            id: NodeId(1),
            memory_bytes: None,
            memory_free_bytes: None,
            hugepages: Vec::new(),
            cpus: None,
            distances: Vec::new(),
        };
        read_node_sysfs(dir.path(), &mut raw);
        assert_eq!(raw.memory_free_bytes, Some(1_024_000));
        assert_eq!(
            raw.hugepages,
            [
                PagePool {
                    size_kib: 2048,
                    total: 512,
                    free: Some(500)
                },
                PagePool {
                    size_kib: 1_048_576,
                    total: 4,
                    free: None
                },
            ]
        );
    }
}
