//! The live host read two ways — hwloc directly and libvirt's capabilities
//! through a running libvirtd — must give the same cores and CPUs.
//!
//! Needs a libvirtd: `scripts/test.sh` starts one and sets
//! `PINPLAN_TEST_LIBVIRT_URI`; then this test runs and must pass. Without the
//! variable (a plain `cargo test` on a laptop) it says so and does nothing.

use crate::util::{self, pinplan_json};
use serde_json::Value;

/// `(id, cpus)` of every core and `(cpu, core, online)` of every PU.
fn shape(topology: &Value) -> (Vec<String>, Vec<String>) {
    let cores = topology["cores"]
        .as_array()
        .map(|cores| {
            cores
                .iter()
                .map(|c| format!("core {} cpus {}", c["id"], c["cpus"]))
                .collect()
        })
        .unwrap_or_default();
    let pus = topology["pus"]
        .as_array()
        .map(|pus| {
            pus.iter()
                .map(|p| format!("cpu {} core {} online {}", p["cpu"], p["core"], p["online"]))
                .collect()
        })
        .unwrap_or_default();
    (cores, pus)
}

#[test]
fn hwloc_and_libvirt_agree_on_this_host() {
    let Some(uri) = util::libvirt_uri("not comparing with libvirt") else {
        return;
    };
    let hwloc = pinplan_json(&["topology", "--source", "host", "--format", "json"]);
    let libvirt = pinplan_json(&["topology", "--connect", &uri, "--format", "json"]);
    let (hwloc_cores, hwloc_pus) = shape(&hwloc);
    let (libvirt_cores, libvirt_pus) = shape(&libvirt);
    assert!(!hwloc_cores.is_empty(), "hwloc found no core");
    assert_eq!(
        hwloc_cores, libvirt_cores,
        "cores differ between hwloc and {uri}"
    );
    assert_eq!(
        hwloc_pus, libvirt_pus,
        "CPUs differ between hwloc and {uri}"
    );
    assert_eq!(
        hwloc["packages"].as_array().map(Vec::len),
        libvirt["packages"].as_array().map(Vec::len),
        "package count differs"
    );
    let node_ids = |t: &Value| -> Vec<String> {
        t["numa_nodes"]
            .as_array()
            .map(|n| {
                n.iter()
                    .map(|n| format!("{} {}", n["id"], n["cpus"]))
                    .collect()
            })
            .unwrap_or_default()
    };
    assert_eq!(node_ids(&hwloc), node_ids(&libvirt), "NUMA nodes differ");
}
