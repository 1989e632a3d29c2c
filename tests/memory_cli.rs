//! Issue 16: memory and huge pages in the topology — total and free memory
//! and the huge page pools per NUMA node, from every source. Expected values
//! are read off the fixture files by hand (quoted in each test).

use crate::util::{self, pinplan, text};
use serde_json::{json, Value};

fn nodes(args: &[&str]) -> Vec<Value> {
    let mut all = vec!["topology"];
    all.extend_from_slice(args);
    all.extend(["--format", "json"]);
    let out = pinplan(&all);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    util::stdout_json(&out)["numa_nodes"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// vircaps-x86_64-basic.xml, cell 0: `<pages unit='KiB' size='2048'>4096`,
/// `size='1048576'>6144`; cell 3: 10240 and 12288. The 4 KiB line is the
/// memory itself, not a pool. A file says nothing of what is free.
#[test]
fn capabilities_cells_give_page_pools() {
    let nodes = nodes(&[
        "--source",
        "tests/fixtures/libvirt-caps/vircaps-x86_64-basic.xml",
    ]);
    assert_eq!(nodes.len(), 4);
    assert_eq!(
        nodes[0]["hugepages"],
        json!([{"size_kib": 2048, "total": 4096, "free": null},
               {"size_kib": 1048576, "total": 6144, "free": null}])
    );
    assert_eq!(nodes[3]["hugepages"][1]["total"], 12288);
    assert_eq!(nodes[0]["memory_free_bytes"], Value::Null);
    let out = pinplan([
        "topology",
        "--source",
        "tests/fixtures/libvirt-caps/vircaps-x86_64-basic.xml",
    ]);
    assert!(
        text(&out.stdout)
            .contains("node 0: cpus 0-3, 1.0 GiB; huge pages: 4096 × 2.0 MiB; 6144 × 1.0 GiB"),
        "{}",
        text(&out.stdout)
    );
}

/// linux-2i386-2t-hugepagesizecount.xml: `<page_type size="2097152"
/// count="1"/>` and `size="17179869184" count="1"` (16 GiB pages); the
/// `size="4096"` entry is the memory itself.
#[test]
fn hwloc_page_types_give_page_pools() {
    let nodes = nodes(&[
        "--source",
        "tests/fixtures/hwloc-xml/linux-2i386-2t-hugepagesizecount.xml",
    ]);
    assert_eq!(
        nodes[0]["hugepages"],
        json!([{"size_kib": 2048, "total": 1, "free": null},
               {"size_kib": 16777216, "total": 1, "free": null}])
    );
}

/// Puts node 0's 2 MiB pool back to its size when dropped.
struct Pool2M {
    path: std::path::PathBuf,
    was: String,
}

impl Drop for Pool2M {
    fn drop(&mut self) {
        let _ = std::fs::write(&self.path, &self.was);
    }
}

/// The live host (sysfs) and libvirt's node calls agree on this machine's
/// pools and both know free memory; checked against sysfs directly, with
/// four 2 MiB pages allocated on node 0 for the test when it may (root).
#[test]
fn live_host_and_libvirt_know_free_pages() {
    let sysfs = std::path::Path::new("/sys/devices/system/node/node0/hugepages");
    let nr = sysfs.join("hugepages-2048kB/nr_hugepages");
    let _pool = std::fs::read_to_string(&nr).ok().and_then(|was| {
        let more = was.trim().parse::<u64>().ok()? + 4;
        std::fs::write(&nr, more.to_string()).ok()?;
        Some(Pool2M {
            path: nr.clone(),
            was,
        })
    });
    let Ok(entries) = std::fs::read_dir(sysfs) else {
        return; // no NUMA sysfs here (not Linux, or a container without it)
    };
    let mut expected: Vec<(u64, u64, u64)> = entries
        .filter_map(Result::ok)
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let size = name
                .strip_prefix("hugepages-")?
                .strip_suffix("kB")?
                .parse()
                .ok()?;
            let read = |f: &str| -> Option<u64> {
                std::fs::read_to_string(e.path().join(f))
                    .ok()?
                    .trim()
                    .parse()
                    .ok()
            };
            Some((size, read("nr_hugepages")?, read("free_hugepages")?))
        })
        .collect();
    expected.sort_unstable();
    let pools = |nodes: &[Value]| -> Vec<(u64, u64, u64)> {
        nodes[0]["hugepages"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|p| {
                (
                    p["size_kib"].as_u64().unwrap_or(0),
                    p["total"].as_u64().unwrap_or(0),
                    p["free"].as_u64().unwrap_or(u64::MAX),
                )
            })
            .collect()
    };
    let live = nodes(&["--source", "host"]);
    assert_eq!(pools(&live), expected, "{live:?}");
    assert!(live[0]["memory_free_bytes"].as_u64() > Some(0), "{live:?}");
    if let Some(uri) = util::libvirt_uri("no live libvirt") {
        let via = nodes(&["--connect", &uri]);
        assert_eq!(pools(&via), expected, "{via:?}");
        assert!(via[0]["memory_free_bytes"].as_u64() > Some(0), "{via:?}");
    }
}
