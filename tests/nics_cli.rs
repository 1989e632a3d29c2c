//! Several NICs per VM and `affinity = "socket"` (issue 18, item 4), on
//! real machines' topologies: `16intel64-manyVFs.xml` (2 packages, 2 nodes;
//! NICs 0000:02:00.0 on node 0 and 0000:88:00.0 on node 1, CPUs 0-7 and
//! 8-15) and `28intel64-2p2g7c-CoDgroups.v1.xml` (Cluster-on-Die: package 0
//! = nodes 0 and 1, CPUs 0-6 and 7-13; package 1 = nodes 2 and 3; NIC
//! 0000:06:00.0 on node 0). The node of each CPU below is read from those
//! files by hand (their `NUMANode` cpusets), not from pinplan.

use crate::util::{self, pinplan, text, TempDir};
use serde_json::Value;
use std::collections::BTreeSet;

const TWO_NODES: &str = "hwloc-xml/16intel64-manyVFs.xml";
const COD: &str = "hwloc-xml/28intel64-2p2g7c-CoDgroups.v1.xml";

fn spec(dir: &TempDir, fixture: &str, body: &str) -> String {
    let source = util::fixture(fixture);
    let text = format!(
        "[host]\nsource = {:?}\n{body}",
        source.display().to_string()
    );
    util::arg(&dir.write("spec.toml", text)).to_owned()
}

fn plan(spec: &str) -> Value {
    util::plan_json(0, &[spec])
}

/// Node of a CPU of 16intel64-manyVFs (node 0 = CPUs 0-7, node 1 = 8-15).
fn two_node_of(cpu: u32) -> u32 {
    u32::from(cpu >= 8)
}

/// Must show: a 2-NIC VM on a 2-node fixture gets one guest cell per NIC
/// node. It would fit on one node (4 vCPUs, 7 free cores on each), so the
/// second cell is the NICs' doing: the same VM with one of the NICs has one.
#[test]
fn a_two_nic_vm_gets_a_guest_cell_on_each_nic_node() {
    let dir = TempDir::new();
    let body = r#"reserved_cores_per_node = 1
[[vm]]
name = "twonic"
vcpus = 4
numa = "spread"
nics = [{ addr = "0000:02:00.0", affinity = "required" }, { addr = "0000:88:00.0", affinity = "required" }]
"#;
    let plan = plan(&spec(&dir, TWO_NODES, body));
    let vm = util::vm(&plan, "twonic");
    let cells: BTreeSet<u64> = vm["guest_cells"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["host_node"].as_u64().unwrap())
        .collect();
    assert_eq!(cells, BTreeSet::from([0, 1]), "{vm}");
    let cpu_nodes: BTreeSet<u32> = util::cpuset(vm["cpus"].as_str().unwrap())
        .into_iter()
        .map(two_node_of)
        .collect();
    assert_eq!(cpu_nodes, BTreeSet::from([0, 1]), "{vm}");
    assert_eq!(vm["nic"], "0000:02:00.0");
    assert_eq!(
        vm["nics"],
        serde_json::json!(["0000:02:00.0", "0000:88:00.0"])
    );
    // Each guest cell's vCPUs are pinned to CPUs of its host node.
    for cell in vm["guest_cells"].as_array().unwrap() {
        let node = u32::try_from(cell["host_node"].as_u64().unwrap()).unwrap();
        for vcpu in util::cpuset(cell["vcpus"].as_str().unwrap()) {
            let pin = vm["vcpus"]
                .as_array()
                .unwrap()
                .iter()
                .find(|p| p["vcpu"] == vcpu)
                .unwrap();
            let cpu = u32::try_from(pin["cpu"].as_u64().unwrap()).unwrap();
            assert_eq!(two_node_of(cpu), node, "vCPU {vcpu} on CPU {cpu}: {vm}");
        }
    }
    // emulator = "host" with reserved_cores_per_node: the reserved CPUs of
    // both its nodes (the lowest core of each: CPUs 0 and 8).
    assert_eq!(vm["emulator_cpus"], "0,8");

    let one = body.replace(r#", { addr = "0000:88:00.0", affinity = "required" }"#, "");
    let plan = self::plan(&spec(&dir, TWO_NODES, &one));
    let vm = util::vm(&plan, "twonic");
    assert_eq!(vm["guest_cells"], serde_json::json!([]), "{vm}");
    assert_eq!(vm["numa_nodes"], serde_json::json!([0]), "{vm}");
    assert!(vm.get("nics").is_none(), "one NIC: no nics list: {vm}");
}

/// The XML of a 2-NIC VM has a guest cell per NIC node and validates.
#[test]
fn the_two_nic_vms_xml_has_its_cells_and_validates() {
    let dir = TempDir::new();
    let body = r#"reserved_cores_per_node = 1
[[vm]]
name = "twonic"
vcpus = 4
memory = "4GiB"
numa = "spread"
nics = [{ addr = "0000:02:00.0", affinity = "required" }, { addr = "0000:88:00.0", affinity = "required" }]
"#;
    let spec = spec(&dir, TWO_NODES, body);
    let out_dir = dir.path("out");
    let out = pinplan(["plan", &spec, "--out", util::arg(&out_dir)]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let fragment = std::fs::read_to_string(out_dir.join("twonic.fragment.xml")).unwrap();
    for line in [
        "<memnode cellid='0' mode='strict' nodeset='0'/>",
        "<memnode cellid='1' mode='strict' nodeset='1'/>",
    ] {
        assert!(fragment.contains(line), "{line} not in:\n{fragment}");
    }
    // Patched into a real domain: two guest cells, 2 GiB each, and valid.
    let domain = util::guest_xml("kvm", "twonic", 4, "").replace(
        "<memory unit='MiB'>64</memory>",
        "<memory unit='GiB'>4</memory>",
    );
    let domain = dir.write("domain.xml", domain);
    let out = pinplan([
        "xml",
        "--plan",
        util::arg(&out_dir.join("plan.json")),
        "--patch",
        util::arg(&domain),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let patched = text(&out.stdout);
    assert_eq!(patched.matches("<cell ").count(), 2, "{patched}");
    let path = dir.write("twonic.xml", &out.stdout);
    util::validate_domain(&path).unwrap_or_else(|e| panic!("{e}"));
}

/// A strict VM whose required NICs are on two nodes cannot have both
/// local: refused, naming both NICs and their nodes, with the fix.
#[test]
fn a_strict_vm_with_required_nics_on_two_nodes_is_refused() {
    let dir = TempDir::new();
    let body = r#"reserved_cores = 1
[[vm]]
name = "split"
vcpus = 2
nics = [
  { addr = "0000:02:00.0", affinity = "required" },
  { addr = "0000:88:00.0", affinity = "required" },
]
"#;
    let out = pinplan(["plan", &spec(&dir, TWO_NODES, body)]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(err.contains(":9:"), "the second NIC's line: {err}");
    assert!(
        err.contains("split: its required NICs are on different NUMA nodes (0000:02:00.0 on node 0, 0000:88:00.0 on node 1), but numa = \"strict\" keeps it on one node"),
        "{err}"
    );
    assert!(err.contains("numa = \"spread\""), "{err}");
}

/// A VM with required NICs on two nodes gets a vCPU on each: two vCPUs are
/// placed one on each node (a guest cell each); one vCPU fits nowhere and
/// is left out, the plan going on.
#[test]
fn required_nics_on_two_nodes_take_a_vcpu_on_each() {
    let dir = TempDir::new();
    let body = |vcpus: u32| {
        format!(
            "reserved_cores = 1\n[[vm]]\nname = \"split\"\nvcpus = {vcpus}\nnuma = \"spread\"\n\
             nics = [\n  {{ addr = \"0000:02:00.0\", affinity = \"required\" }},\n  \
             {{ addr = \"0000:88:00.0\", affinity = \"required\" }},\n]\n"
        )
    };
    let out = pinplan(["plan", "--format", "json", &spec(&dir, TWO_NODES, &body(2))]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let plan: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        plan["vms"][0]["guest_cells"].as_array().map(Vec::len),
        Some(2),
        "{plan}"
    );
    let out = pinplan(["plan", "--format", "json", &spec(&dir, TWO_NODES, &body(1))]);
    let plan: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(plan["unplaced"][0], "split", "{plan}");
}

/// `nic` and `nics` together, and an address listed twice, are refused.
#[test]
fn nic_and_nics_together_and_a_repeated_nic_are_refused() {
    let dir = TempDir::new();
    for (body, wanted) in [
        (
            "[[vm]]\nname = \"a\"\nvcpus = 2\nemulator = \"isolate\"\nnic = \"0000:02:00.0\"\nnics = [{ addr = \"0000:88:00.0\" }]\n",
            "a: gives both nic and nics",
        ),
        (
            "[[vm]]\nname = \"a\"\nvcpus = 2\nemulator = \"isolate\"\nnics = [{ addr = \"0000:02:00.0\" }, { addr = \"02:00.0\" }]\n",
            "a: NIC 0000:02:00.0 is listed twice in nics",
        ),
        (
            "[[vm]]\nname = \"a\"\nvcpus = 2\nemulator = \"isolate\"\nnics = [{ addr = \"0000:02:00.0\", affinty = \"required\" }]\n",
            "unknown field `affinty`",
        ),
        (
            "[[vm]]\nname = \"a\"\nvcpus = 2\nemulator = \"isolate\"\nnics = [{ addr = \"0000:99:00.0\", affinity = \"socket\" }]\n",
            "a: NIC 0000:99:00.0 is not on",
        ),
    ] {
        let out = pinplan(["plan", &spec(&dir, TWO_NODES, body)]);
        assert_eq!(out.status.code(), Some(2), "{body}");
        let err = text(&out.stderr);
        assert!(err.contains(wanted), "{wanted:?} not in: {err}");
    }
}

/// A required NIC keeps a spread VM to its node; a preferred NIC on the
/// other node is then a warning, not a second cell.
#[test]
fn a_preferred_nic_off_the_required_nics_node_is_a_warning() {
    let dir = TempDir::new();
    let body = r#"reserved_cores = 1
[[vm]]
name = "mixed"
vcpus = 3
numa = "spread"
nics = [{ addr = "0000:02:00.0", affinity = "required" }, { addr = "0000:88:00.0", affinity = "preferred" }]
"#;
    let plan = plan(&spec(&dir, TWO_NODES, body));
    let vm = util::vm(&plan, "mixed");
    assert_eq!(vm["numa_nodes"], serde_json::json!([0]), "{vm}");
    let warnings = plan["warnings"].to_string();
    assert!(
        warnings.contains("mixed: preferred NIC 0000:88:00.0 (node 1) is off the node(s) its required NICs keep it to (node 0)"),
        "{warnings}"
    );
}

/// `affinity = "socket"` on a Cluster-on-Die host: with the NIC's node full,
/// the VM goes to the other node of the NIC's package (1), never to the
/// other package (nodes 2, 3); with `required` it is not placed.
#[test]
fn socket_affinity_keeps_the_vm_in_the_nics_package() {
    let dir = TempDir::new();
    let body = |affinity: &str| {
        format!(
            r#"reserved_cpus = "27"
[[fixed]]
name = "node0"
cpus = "0-6"
[[vm]]
name = "near"
vcpus = 4
nic = "0000:06:00.0"
nic_affinity = "{affinity}"
"#
        )
    };
    let plan = plan(&spec(&dir, COD, &body("socket")));
    let vm = util::vm(&plan, "near");
    assert_eq!(vm["numa_nodes"], serde_json::json!([1]), "{vm}");
    for cpu in util::cpuset(vm["cpus"].as_str().unwrap()) {
        assert!((7..=13).contains(&cpu), "CPU {cpu} is not on node 1: {vm}");
    }
    let plan = util::plan_json(1, &[&spec(&dir, COD, &body("required"))]);
    assert_eq!(plan["unplaced"], serde_json::json!(["near"]), "{plan}");
    // With node 1 full too, socket affinity leaves it unplaced rather than
    // on the other package.
    let full = body("socket").replace("cpus = \"0-6\"", "cpus = \"0-13\"");
    let plan = util::plan_json(1, &[&spec(&dir, COD, &full)]);
    assert_eq!(plan["unplaced"], serde_json::json!(["near"]), "{plan}");
}

/// The example specs outside `examples/lab` (which has tests of its own)
/// plan cleanly, every VM placed: they are what the docs point users to.
#[test]
fn the_example_specs_plan_every_vm() {
    let mut seen = Vec::new();
    for entry in std::fs::read_dir(util::repo().join("examples")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "toml") {
            continue;
        }
        let out = pinplan(["plan", util::arg(&path), "--format", "json"]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}: {}",
            path.display(),
            text(&out.stderr)
        );
        // Exit 0 is every VM placed, for one host or a fleet; the JSON is
        // a plan or fleet.json.
        let plan = util::stdout_json(&out);
        let unplaced = match plan.get("unplaced") {
            Some(list) => list.as_array().map_or(0, Vec::len),
            None => plan["vms"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|v| v["host"].is_null())
                .count(),
        };
        assert_eq!(unplaced, 0, "{}", path.display());
        seen.push(path.file_name().unwrap().to_string_lossy().into_owned());
    }
    seen.sort();
    assert!(seen.contains(&"two-nics.toml".to_owned()), "{seen:?}");
    assert!(seen.contains(&"nfv-roles.toml".to_owned()), "{seen:?}");
    assert!(seen.contains(&"amd-guest.toml".to_owned()), "{seen:?}");
    assert!(seen.contains(&"fleet.toml".to_owned()), "{seen:?}");
}
