//! The guest's CPU topology (issue 18, item 5): dies from the L3 domains a
//! `cache_aware` VM spans, `topoext` on AMD hosts when the guest has SMT
//! threads, `<cache mode='passthrough'/>`, and guest NUMA cell distances
//! from the host's, on real machines' topologies:
//! - `x86-AMD-17h-Zen-2xEpyc-7451.xml`: AuthenticAMD, 2 threads per core,
//!   8 nodes of 6 cores, each node two L3 domains (CCXs) of 3 cores — node 0
//!   is cores 0-5 (CPUs 0-5 and their siblings 48-53), L3 0 = CPUs 0-2,48-50,
//!   L3 1 = CPUs 3-5,51-53 (the file's `L3Cache` cpusets);
//! - `x86-Intel-Broadwell-2xXeon-E5-2650Lv4.xml`: GenuineIntel, 2 threads;
//! - `24em64t-2n6c2t-pci.xml`: 2 nodes, the file's `NUMALatency` matrix
//!   10 20 / 20 10.
//!
//! Every XML written is checked with `virt-xml-validate`, and with a libvirt
//! under test (`PINPLAN_TEST_LIBVIRT_URI`) also defined with `virsh define`.

use crate::util::{self, pinplan, text, TempDir};
use serde_json::Value;

const EPYC: &str = "hwloc-xml/x86-AMD-17h-Zen-2xEpyc-7451.xml";
const BROADWELL: &str = "hwloc-xml/x86-Intel-Broadwell-2xXeon-E5-2650Lv4.xml";
const TWO_NODES: &str = "hwloc-xml/24em64t-2n6c2t-pci.xml";

/// A spec on `fixture` with `body`, and the plan of it (`plan --out`).
fn planned(dir: &TempDir, fixture: &str, body: &str) -> (Value, std::path::PathBuf) {
    let source = util::fixture(fixture);
    let spec = dir.write(
        "spec.toml",
        format!(
            "[host]\nsource = {:?}\n{body}",
            source.display().to_string()
        ),
    );
    let out_dir = dir.path("out");
    let out = pinplan(["plan", util::arg(&spec), "--out", util::arg(&out_dir)]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let plan_path = out_dir.join("plan.json");
    let plan = serde_json::from_str(&std::fs::read_to_string(&plan_path).unwrap()).unwrap();
    (plan, plan_path)
}

/// `xml --patch` of a small real domain named `name` with `vcpus` vCPUs
/// and `cpu` (a `<cpu>` element, or "") — the patched text, validated, and
/// defined (then undefined) when a libvirt is under test.
fn patched(dir: &TempDir, plan: &std::path::Path, name: &str, vcpus: u32, cpu: &str) -> String {
    let mut domain = util::guest_xml("kvm", name, vcpus, "").replace(
        "<memory unit='MiB'>64</memory>",
        "<memory unit='MiB'>256</memory>",
    );
    if !cpu.is_empty() {
        domain = domain.replace("  <on_poweroff>", &format!("  {cpu}\n  <on_poweroff>"));
    }
    let input = dir.write(&format!("{name}-in.xml"), domain);
    let out = pinplan([
        "xml",
        "--plan",
        util::arg(plan),
        "--patch",
        util::arg(&input),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let path = dir.write(&format!("{name}.xml"), &out.stdout);
    util::validate_domain(&path).unwrap_or_else(|e| panic!("{e}"));
    if let Some(uri) = util::libvirt_uri("virsh define of the guest CPU XML") {
        util::virsh(&uri, &["define", util::arg(&path)]);
        util::virsh(&uri, &["undefine", name]);
    }
    text(&out.stdout)
}

/// Must show (item 5): on an AMD host with SMT, a cache-aware VM of 6 cores
/// on one node spans its node's two L3 domains, 3 cores each: the guest
/// sees 2 dies of 3 cores of 2 threads, and gets `topoext` (without it a
/// Linux guest on AMD ignores the threads) under `mode='host-passthrough'`,
/// the only mode a `<cpu>` without a model can carry a feature in.
#[test]
fn a_cache_aware_vm_on_amd_gets_dies_and_topoext() {
    let dir = TempDir::new();
    let (plan, plan_path) = planned(
        &dir,
        EPYC,
        "reserved_cpus = \"47,95\"\n[[vm]]\nname = \"pp-gc-ccx\"\nvcpus = 12\nthreads = \"require\"\ncache_aware = true\n",
    );
    let vm = &plan["vms"][0];
    // Its 6 cores are a whole node: CPUs 0-5 and 48-53 (node 0, the first).
    assert_eq!(vm["cpus"], "0-5,48-53", "{vm}");
    assert_eq!(
        vm["guest_topology"],
        serde_json::json!({"sockets": 1, "dies": 2, "cores": 3, "threads": 2, "topoext": true}),
        "{vm}"
    );
    // Guest vCPUs 0-5 are on L3 0 (host CPUs 0-2,48-50), 6-11 on L3 1.
    let l3_0 = util::cpuset("0-2,48-50");
    for pin in vm["vcpus"].as_array().unwrap() {
        let (vcpu, cpu) = (pin["vcpu"].as_u64().unwrap(), pin["cpu"].as_u64().unwrap());
        let on_first = l3_0.contains(&u32::try_from(cpu).unwrap());
        assert_eq!(on_first, vcpu < 6, "vCPU {vcpu} on CPU {cpu}");
    }
    let xml = patched(&dir, &plan_path, "pp-gc-ccx", 12, "");
    for line in [
        "<cpu mode='host-passthrough'>",
        "<topology sockets='1' dies='2' cores='3' threads='2'/>",
        "<feature policy='require' name='topoext'/>",
    ] {
        assert!(xml.contains(line), "{line} not in:\n{xml}");
    }
    // A domain with its own CPU model keeps it; topoext joins its features,
    // and an existing topoext is replaced rather than doubled.
    let xml = patched(
        &dir,
        &plan_path,
        "pp-gc-ccx",
        12,
        "<cpu mode='custom' match='exact'><model fallback='allow'>EPYC</model><feature policy='disable' name='topoext'/></cpu>",
    );
    assert!(
        xml.contains("<model fallback='allow'>EPYC</model>"),
        "{xml}"
    );
    assert!(!xml.contains("host-passthrough"), "{xml}");
    assert_eq!(xml.matches("name='topoext'").count(), 1, "{xml}");
    assert!(
        xml.contains("<feature policy='require' name='topoext'/>"),
        "{xml}"
    );
    // The fragment (no domain) says the same.
    let out = pinplan(["xml", "--plan", util::arg(&plan_path), "--vm", "pp-gc-ccx"]);
    let fragment = text(&out.stdout);
    assert!(
        fragment.contains("<cpu mode='host-passthrough'>"),
        "{fragment}"
    );
    assert!(fragment.contains("dies='2'"), "{fragment}");
}

/// Without `cache_aware` the same VM is one die; on an Intel host with SMT
/// there is no topoext and `<cpu>` gets no mode.
#[test]
fn dies_only_when_asked_and_topoext_only_on_amd() {
    let dir = TempDir::new();
    let (plan, _) = planned(
        &dir,
        EPYC,
        "reserved_cpus = \"47,95\"\n[[vm]]\nname = \"pp-gc-plain\"\nvcpus = 12\nthreads = \"require\"\n",
    );
    assert_eq!(
        plan["vms"][0]["guest_topology"],
        serde_json::json!({"sockets": 1, "cores": 6, "threads": 2, "topoext": true})
    );
    let (plan, plan_path) = planned(
        &dir,
        BROADWELL,
        "reserved_cores = 1\n[[vm]]\nname = \"pp-gc-intel\"\nvcpus = 4\nthreads = \"require\"\ncache_aware = true\n",
    );
    assert_eq!(
        plan["vms"][0]["guest_topology"],
        serde_json::json!({"sockets": 1, "cores": 2, "threads": 2})
    );
    let xml = patched(&dir, &plan_path, "pp-gc-intel", 4, "");
    assert!(xml.contains("<cpu>"), "{xml}");
    assert!(
        !xml.contains("topoext") && !xml.contains("<cpu mode"),
        "{xml}"
    );
}

/// A cache-aware VM whose cores split 3 + 1 over two L3 domains cannot
/// show them as dies: one die, and a warning that says why.
#[test]
fn uneven_l3_domains_stay_one_die_with_a_warning() {
    let dir = TempDir::new();
    let source = util::fixture(EPYC);
    let spec = dir.write(
        "spec.toml",
        format!(
            "[host]\nsource = {:?}\nreserved_cpus = \"47,95\"\n[[vm]]\nname = \"pp-gc-odd\"\nvcpus = 8\nthreads = \"require\"\ncache_aware = true\n",
            source.display().to_string()
        ),
    );
    let out = pinplan(["plan", util::arg(&spec), "--format", "json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let plan = util::stdout_json(&out);
    assert_eq!(plan["vms"][0]["guest_topology"]["cores"], 4);
    assert!(plan["vms"][0]["guest_topology"].get("dies").is_none());
    assert!(
        plan["warnings"].to_string().contains(
            "pp-gc-odd: cache_aware, but the 2 L3 domains its cores span (3 + 1 cores) are not equal runs of its vCPUs: the guest sees one die"
        ),
        "{}",
        plan["warnings"]
    );
}

/// `cache_passthrough`: `<cache mode='passthrough'/>` under host-passthrough;
/// a domain whose `<cpu>` has another mode is refused with the fix.
#[test]
fn cache_passthrough_needs_host_passthrough() {
    let dir = TempDir::new();
    let (plan, plan_path) = planned(
        &dir,
        BROADWELL,
        "reserved_cores = 1\n[[vm]]\nname = \"pp-gc-cached\"\nvcpus = 4\ncache_passthrough = true\n",
    );
    assert_eq!(plan["vms"][0]["guest_topology"]["cache_passthrough"], true);
    let xml = patched(&dir, &plan_path, "pp-gc-cached", 4, "");
    assert!(xml.contains("<cpu mode='host-passthrough'>"), "{xml}");
    assert!(xml.contains("<cache mode='passthrough'/>"), "{xml}");
    let xml = patched(
        &dir,
        &plan_path,
        "pp-gc-cached",
        4,
        "<cpu mode='host-passthrough' check='none'><cache mode='emulate' level='3'/></cpu>",
    );
    assert_eq!(xml.matches("<cache ").count(), 1, "{xml}");
    assert!(xml.contains("check='none'"), "{xml}");

    let input = dir.write(
        "host-model.xml",
        util::guest_xml("kvm", "pp-gc-cached", 4, "").replace(
            "  <on_poweroff>",
            "  <cpu mode='host-model'/>\n  <on_poweroff>",
        ),
    );
    let out = pinplan([
        "xml",
        "--plan",
        util::arg(&plan_path),
        "--patch",
        util::arg(&input),
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(
        err.contains("host-model.xml:8:")
            && err.contains("cache_passthrough needs <cpu mode='host-passthrough'>")
            && err.contains("mode='host-model'"),
        "{err}"
    );
}

/// A VM over two nodes gets guest cells whose distances are the host's
/// between their nodes (10 local, 20 remote in this file), in the fragment
/// and in a patched domain, old cells kept.
#[test]
fn guest_cells_carry_the_hosts_distances() {
    let dir = TempDir::new();
    let (plan, plan_path) = planned(
        &dir,
        TWO_NODES,
        "reserved_cores_per_node = 1\n[[vm]]\nname = \"pp-gc-wide\"\nvcpus = 12\nnuma = \"spread\"\nmemory = \"128MiB\"\n",
    );
    let cells = &plan["vms"][0]["guest_cells"];
    assert_eq!(
        cells[0]["distances"],
        serde_json::json!([10, 20]),
        "{cells}"
    );
    assert_eq!(
        cells[1]["distances"],
        serde_json::json!([20, 10]),
        "{cells}"
    );
    let xml = patched(&dir, &plan_path, "pp-gc-wide", 12, "");
    assert_eq!(xml.matches("<distances>").count(), 2, "{xml}");
    assert!(xml.contains("<sibling id='1' value='20'/>"), "{xml}");
    // A domain with two cells of its own (and a memAccess to keep): kept,
    // with the planned distances put in.
    let cpu = "<cpu>\n    <numa>\n      <cell id='0' cpus='0-5' memory='65536' unit='KiB' memAccess='shared'/>\n      <cell id='1' cpus='6-11' memory='65536' unit='KiB'>\n        <distances>\n          <sibling id='0' value='31'/>\n          <sibling id='1' value='10'/>\n        </distances>\n      </cell>\n    </numa>\n  </cpu>";
    let xml = patched(&dir, &plan_path, "pp-gc-wide", 12, cpu);
    assert!(xml.contains("memAccess='shared'"), "{xml}");
    assert!(!xml.contains("value='31'"), "{xml}");
    assert_eq!(
        xml.matches("<sibling id='0' value='20'/>").count(),
        1,
        "{xml}"
    );
    assert_eq!(xml.matches("<distances>").count(), 2, "{xml}");
}
