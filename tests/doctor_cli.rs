//! `pinplan doctor` end to end: real sysfs/procfs captures from
//! `tests/fixtures/doctor/` (unpacked into a temporary directory), small
//! trees built here for each failure, bad input (its messages compared with
//! snapshots), and this machine (`--root /`).

use crate::util::{self, fixture, pinplan, TempDir};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Command;
/// hwloc's capture of a 2-socket Supermicro box with 8 Vector Engines:
/// X722 PFs 0000:60:00.0/.1 (sriov_totalvfs 64, link 2.5 GT/s x1 of 8 GT/s
/// x1), ConnectX-4 InfiniBand at 8 GT/s x16, SMT on, no IOMMU groups.
const HWLOC_32INTEL64: &str = "32intel64-2p8co2t+8ve.tar.bz2";
/// prometheus/procfs: an E810 PF 0000:a2:00.0 on NUMA node 1, 16 GT/s x8.
const PROCFS_E810: &str = "procfs-fixtures-pci-subset.tar.gz";
/// ghw: a 2-node Xeon with bnx2 ports at numa_node -1 and igb ports on 0 and 1.
const GHW_2NODE: &str = "ghw-linux-amd64-8581cf3a529e5d8b97ea876eade2f60d.tar.gz";

/// A host's sys/ and proc/ in a scratch directory, built file by file as the
/// kernel lays them out, or unpacked from a capture.
struct Tree(TempDir);

impl Tree {
    fn new() -> Tree {
        Tree(TempDir::new())
    }

    fn path(&self) -> &Path {
        self.0.root()
    }

    /// Unpacks a fixture tarball here (GNU tar picks gzip or bzip2) and
    /// returns the directory holding its sys/ and proc/.
    fn unpack(tarball: &str, top: &str) -> (Tree, PathBuf) {
        let dir = Tree::new();
        let status = Command::new("tar")
            .arg("-xf")
            .arg(fixture("doctor").join(tarball))
            .arg("-C")
            .arg(dir.path())
            .status()
            .expect("cannot run tar");
        assert!(
            status.success(),
            "tar -xf {tarball} failed (is bzip2 installed?)"
        );
        let root = dir.path().join(top);
        (dir, root)
    }

    fn file(&self, rel: &str, text: &str) -> &Self {
        self.0.write(rel, text);
        self
    }

    fn link(&self, rel: &str, target: &str) -> &Self {
        let path = self.0.path(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).unwrap();
        }
        let _ = std::fs::remove_file(&path);
        std::os::unix::fs::symlink(target, &path)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        self
    }

    /// A PCI function laid out as the kernel does: the device under
    /// sys/devices, a relative link from sys/bus/pci/devices.
    fn device(&self, address: &str, class: &str, attrs: &[(&str, &str)]) -> &Self {
        let dev = format!("sys/devices/pci0000:00/{address}");
        self.file(&format!("{dev}/class"), &format!("{class}\n"));
        for (name, value) in attrs {
            self.file(&format!("{dev}/{name}"), &format!("{value}\n"));
        }
        self.link(
            &format!("sys/bus/pci/devices/{address}"),
            &format!("../../../devices/pci0000:00/{address}"),
        )
    }

    fn driver(&self, address: &str, driver: &str) -> &Self {
        self.file(&format!("sys/bus/pci/drivers/{driver}/bind"), "");
        self.link(
            &format!("sys/devices/pci0000:00/{address}/driver"),
            &format!("../../../bus/pci/drivers/{driver}"),
        )
    }

    fn group(&self, address: &str, group: u32, kind: &str) -> &Self {
        self.file(
            &format!("sys/kernel/iommu_groups/{group}/type"),
            &format!("{kind}\n"),
        );
        self.link(
            &format!("sys/kernel/iommu_groups/{group}/devices/{address}"),
            &format!("../../../../devices/pci0000:00/{address}"),
        );
        self.link(
            &format!("sys/devices/pci0000:00/{address}/iommu_group"),
            &format!("../../../kernel/iommu_groups/{group}"),
        )
    }

    fn net(&self, address: &str, name: &str, mbps: u64) -> &Self {
        self.file(
            &format!("sys/devices/pci0000:00/{address}/net/{name}/speed"),
            &format!("{mbps}\n"),
        );
        self.link(
            &format!("sys/class/net/{name}"),
            &format!("../../devices/pci0000:00/{address}/net/{name}"),
        )
    }

    /// Writes a plan.json: `vms` are (name, cpus, threads, guest threads, nic).
    fn plan(&self, reserved: &str, vms: &[(&str, &str, &str, u32, Option<&str>)]) -> String {
        let vms: Vec<Value> = vms
            .iter()
            .map(|(name, cpus, threads, guest_threads, nic)| {
                let mut vm = json!({
                    "name": name,
                    "vcpus": [],
                    "cores": [],
                    "cpus": cpus,
                    "emulator_cpus": reserved,
                    "iothreads": [],
                    "numa_nodes": [0],
                    "guest_cells": [],
                    "guest_topology": {"sockets": 1, "cores": 1, "threads": guest_threads},
                    "threads": threads,
                    "demand": null
                });
                if let Some(nic) = nic {
                    vm["nic"] = json!(nic);
                }
                vm
            })
            .collect();
        let plan = json!({
            "status": "optimal",
            "solver": "ilp",
            "host": {"source": "test", "reserved_cpus": reserved, "fingerprint": "test"},
            "vms": vms,
            "fixed": [],
            "unplaced": [],
            "explanations": [],
            "warnings": [],
            "objective": {"placed": 1, "placed_by_priority": [], "extra_numa_nodes": 0,
                          "nic_remote_cores": 0, "vm_l3_domains": 0, "partial_l3_domains": 0,
                          "cores_used": 0}
        });
        let path = self.0.write("plan.json", plan.to_string());
        path.display().to_string()
    }
}

/// `pinplan doctor --root ROOT --format json ARGS...`: (exit code, JSON).
fn doctor(root: &Path, args: &[&str]) -> (Option<i32>, Value) {
    let root = root.display().to_string();
    let mut all = vec!["doctor", "--root", &root, "--format", "json"];
    all.extend_from_slice(args);
    let out = pinplan(&all);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    (out.status.code(), util::stdout_json(&out))
}

/// The finding of check `id` about `subject`.
fn find<'v>(v: &'v Value, id: &str, subject: &str) -> &'v Value {
    v["checks"]
        .as_array()
        .and_then(|checks| {
            checks
                .iter()
                .find(|c| c["id"] == id && c["subject"] == subject)
        })
        .unwrap_or_else(|| panic!("no {id} check for {subject} in {v:#}"))
}

/// A finding's string field; "" when it has none.
fn str_at<'v>(c: &'v Value, key: &str) -> &'v str {
    c[key].as_str().unwrap_or("")
}

/// Asserts status and that the message contains every needle.
fn expect(c: &Value, status: &str, needles: &[&str]) {
    assert_eq!(c["status"], status, "{c:#}");
    for needle in needles {
        assert!(
            str_at(c, "message").contains(needle),
            "{needle:?} not in {c:#}"
        );
    }
}

// ---- captured real trees -------------------------------------------------

#[test]
fn hwloc_capture_x722_link_trained_down_fails() {
    let (_dir, root) = Tree::unpack(HWLOC_32INTEL64, "32intel64-2p8co2t+8ve");
    let (code, v) = doctor(&root, &[]);
    assert_eq!(code, Some(1), "{v:#}");
    // 2.5 GT/s x 1 lane x 8/10 = 2.0 Gb/s usable; 8 GT/s x 1 x 128/130 = 7.88.
    expect(
        find(&v, "pcie-link", "0000:60:00.0"),
        "fail",
        &[
            "link at 2.5 GT/s x1 of 8 GT/s x1: usable 2.0 of 7.9 Gb/s",
            "port enp96s0f0 at 1 Gb/s",
        ],
    );
    // The ConnectX-4 (InfiniBand, class 0x0207) at 8 GT/s x16: 8 x 16 x 128/130 = 126.0.
    expect(
        find(&v, "pcie-link", "0000:1a:00.0"),
        "pass",
        &["usable 126.0 of 126.0 Gb/s"],
    );
    expect(
        find(&v, "sriov-vfs", "0000:60:00.0"),
        "pass",
        &["0 of 64 VFs enabled"],
    );
    expect(
        find(&v, "nic-numa", "0000:60:00.1"),
        "pass",
        &["NUMA node 0"],
    );
    expect(find(&v, "smt", "host"), "pass", &["smt/control: on"]);
    let iommu = find(&v, "iommu-enabled", "host");
    expect(iommu, "warn", &["/sys/kernel/iommu_groups is absent"]);
    // /proc/cpuinfo says GenuineIntel: the Intel parameter only.
    assert!(
        str_at(iommu, "hint").contains("intel_iommu=on"),
        "{iommu:#}"
    );
    assert!(!str_at(iommu, "hint").contains("amd_iommu"), "{iommu:#}");
    // The IOMMU is off on this host: said once, not per NIC.
    expect(
        find(&v, "iommu-dma-mode", "nics"),
        "skip",
        &["the IOMMU is off"],
    );
    expect(find(&v, "isolation", "vms"), "skip", &["needs a plan"]);
}

#[test]
fn a_real_plan_for_the_captured_host_needs_a_vf_and_isolation() {
    // Plan with the hwloc XML hwloc made from this very capture, then check
    // the capture against that plan.
    let (dir, root) = Tree::unpack(HWLOC_32INTEL64, "32intel64-2p8co2t+8ve");
    let xml = fixture("hwloc-xml/gen29-32intel64-2p8co2t+8ve.xml");
    dir.file(
        "spec.toml",
        &format!(
            "[host]\nsource = {:?}\nreserved_cores = 1\n\n[[vm]]\nname = \"vm1\"\nvcpus = 8\nthreads = \"require\"\nnic = \"0000:60:00.0\"\nnic_affinity = \"required\"\n",
            xml.display().to_string()
        ),
    );
    let spec = dir.path().join("spec.toml").display().to_string();
    let out_dir = dir.path().join("out").display().to_string();
    let planned = pinplan(["plan", &spec, "--out", &out_dir]);
    assert_eq!(
        planned.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&planned.stderr)
    );
    let plan = dir.path().join("out/plan.json").display().to_string();
    let written: Value = serde_json::from_str(&std::fs::read_to_string(&plan).unwrap_or_default())
        .unwrap_or_default();
    assert_eq!(
        written["vms"][0]["nic"], "0000:60:00.0",
        "the plan keeps the VM's NIC"
    );
    assert_eq!(written["vms"][0]["cpus"], "1-4,17-20");

    let (code, v) = doctor(&root, &["--plan", &plan]);
    assert_eq!(code, Some(1), "{v:#}");
    let vfs = find(&v, "sriov-vfs", "0000:60:00.0");
    expect(vfs, "warn", &["0 of 64 VFs enabled", "vm1: 1 VF(s) needed"]);
    assert!(
        str_at(vfs, "hint").starts_with("echo 1 > /sys/bus/pci/devices/0000:60:00.0/sriov_numvfs"),
        "{vfs:#}"
    );
    // Only the plan's NIC is examined now.
    assert!(v["checks"]
        .as_array()
        .is_some_and(|c| c.iter().all(|c| c["subject"] != "0000:1a:00.0")));
    expect(
        find(&v, "smt", "host"),
        "pass",
        &["SMT is on", "vm1 (threads = require, guest threads = 2)"],
    );
    expect(
        find(&v, "isolation", "host"),
        "pass",
        &["the host's CPUs 0,16 are not isolated"],
    );
    let iso = find(&v, "isolation", "vm1");
    expect(iso, "warn", &["isolcpus= lacks 1-4,17-20"]);
    assert!(
        str_at(iso, "hint").ends_with(
            "isolcpus=managed_irq,domain,1-4,17-20 nohz_full=1-4,17-20 rcu_nocbs=1-4,17-20"
        ),
        "{iso:#}"
    );
    // hwloc's captures hold no /proc/irq.
    expect(find(&v, "irq-affinity", "irqs"), "skip", &["no /proc/irq"]);
}

#[test]
fn procfs_capture_e810_runs_at_its_capability() {
    let (_dir, root) = Tree::unpack(PROCFS_E810, "fixtures");
    let (code, v) = doctor(&root, &["--nic", "0000:a2:00.0"]);
    assert_eq!(code, Some(0), "{v:#}");
    // 16 GT/s x 8 lanes x 128/130 = 126.0 Gb/s, spelled "16.0 GT/s PCIe".
    expect(
        find(&v, "pcie-link", "0000:a2:00.0"),
        "pass",
        &["link at 16 GT/s x8 of 16 GT/s x8: usable 126.0 of 126.0 Gb/s"],
    );
    expect(
        find(&v, "nic-numa", "0000:a2:00.0"),
        "pass",
        &["NUMA node 1"],
    );
    expect(
        find(&v, "sriov-vfs", "0000:a2:00.0"),
        "pass",
        &["0 of 128 VFs enabled"],
    );
    // No cpuinfo in this capture: both parameters are named.
    let iommu = find(&v, "iommu-enabled", "host");
    assert!(
        str_at(iommu, "hint").contains("intel_iommu=on")
            && str_at(iommu, "hint").contains("amd_iommu=on"),
        "{iommu:#}"
    );
    expect(
        find(&v, "smt", "host"),
        "skip",
        &["no /sys/devices/system/cpu/smt/control"],
    );
}

#[test]
fn ghw_capture_unknown_nic_locality_warns_on_a_two_node_host() {
    let (_dir, root) = Tree::unpack(GHW_2NODE, "");
    let (code, v) = doctor(&root, &[]);
    assert_eq!(code, Some(0), "{v:#}");
    expect(
        find(&v, "nic-numa", "0000:01:00.0"),
        "warn",
        &[
            "NUMA node unknown (-1) on this 2-node host",
            "cannot honour NIC affinity",
        ],
    );
    expect(
        find(&v, "nic-numa", "0000:05:00.1"),
        "pass",
        &["NUMA node 1"],
    );
    let iommu = find(&v, "iommu-enabled", "host");
    assert!(
        str_at(iommu, "hint").contains("the CPU is GenuineIntel"),
        "{iommu:#}"
    );
}

// ---- small trees, one per failure and its passing twin -------------------

#[test]
fn iommu_enabled_pass_and_warn() {
    let on = Tree::new();
    on.device("0000:65:00.0", "0x020000", &[])
        .group("0000:65:00.0", 4, "DMA-FQ");
    let (_, v) = doctor(on.path(), &[]);
    expect(
        find(&v, "iommu-enabled", "host"),
        "pass",
        &["1 IOMMU group in "],
    );

    let off = Tree::new();
    off.device("0000:65:00.0", "0x020000", &[]).file(
        "proc/cpuinfo",
        "processor\t: 0\nvendor_id\t: AuthenticAMD\n",
    );
    let (code, v) = doctor(off.path(), &[]);
    assert_eq!(code, Some(0), "a warning is not a failure");
    let c = find(&v, "iommu-enabled", "host");
    expect(c, "warn", &["VFIO cannot pass SR-IOV VFs through"]);
    assert!(
        str_at(c, "hint").contains("amd_iommu=on") && !str_at(c, "hint").contains("intel_iommu"),
        "{c:#}"
    );
}

#[test]
fn strict_dma_type_warns_with_the_measured_cost() {
    let dir = Tree::new();
    dir.file("proc/cmdline", "BOOT_IMAGE=/vmlinuz ro iommu.strict=1\n")
        .device("0000:65:00.0", "0x020000", &[])
        .group("0000:65:00.0", 12, "DMA")
        .device("0000:65:00.1", "0x020000", &[])
        .group("0000:65:00.1", 13, "DMA-FQ");
    let (code, v) = doctor(dir.path(), &[]);
    assert_eq!(code, Some(0));
    let c = find(&v, "iommu-dma-mode", "0000:65:00.0");
    expect(
        c,
        "warn",
        &[
            "IOMMU group 12 is type DMA (strict",
            "up to 72 %",
            "233,465 vs 835,123 transactions/s",
            "kernel command line: iommu.strict=1",
        ],
    );
    assert!(
        str_at(c, "hint").contains("iommu.strict=0") && str_at(c, "hint").contains("iommu=pt"),
        "{c:#}"
    );
    expect(
        find(&v, "iommu-dma-mode", "0000:65:00.1"),
        "pass",
        &["type DMA-FQ (lazy"],
    );
}

#[test]
fn a_group_with_a_second_device_on_another_driver_is_not_viable() {
    let dir = Tree::new();
    dir.device("0000:01:00.1", "0x020000", &[])
        .driver("0000:01:00.1", "vfio-pci")
        .group("0000:01:00.1", 1, "DMA-FQ")
        .device("0000:01:00.0", "0x020000", &[])
        .driver("0000:01:00.0", "mlx4_core")
        .group("0000:01:00.0", 1, "DMA-FQ")
        .device("0000:00:01.0", "0x060400", &[])
        .driver("0000:00:01.0", "pcieport")
        .group("0000:00:01.0", 1, "DMA-FQ");
    let (code, v) = doctor(dir.path(), &[]);
    assert_eq!(code, Some(1), "{v:#}");
    let c = find(&v, "vfio-group-viable", "0000:01:00.1");
    expect(
        c,
        "fail",
        &[
            "vfio error: 0000:01:00.1: group 1 is not viable: 0000:01:00.0 is bound to mlx4_core",
            "Please ensure all devices within the iommu_group are bound to their vfio bus driver.",
        ],
    );
    assert!(
        !str_at(c, "message").contains("0000:00:01.0"),
        "bridges do not count: {c:#}"
    );
    assert!(
        str_at(c, "hint")
            .contains("echo vfio-pci > /sys/bus/pci/devices/0000:01:00.0/driver_override")
            && str_at(c, "hint").contains("ACS"),
        "{c:#}"
    );

    // Bind the other function to vfio-pci too: viable.
    dir.driver("0000:01:00.0", "vfio-pci");
    let (code, v) = doctor(dir.path(), &[]);
    assert_eq!(code, Some(0), "{v:#}");
    for address in ["0000:01:00.0", "0000:01:00.1"] {
        expect(
            find(&v, "vfio-group-viable", address),
            "pass",
            &["IOMMU group 1: the 1 other endpoint(s)"],
        );
    }
}

#[test]
fn sriov_vfs_the_plan_needs() {
    let dir = Tree::new();
    dir.device(
        "0000:65:00.0",
        "0x020000",
        &[("sriov_totalvfs", "8"), ("sriov_numvfs", "0")],
    );
    let plan = dir.plan(
        "0",
        &[
            ("vm1", "1-2", "isolate", 1, Some("0000:65:00.0")),
            ("vm2", "3-4", "isolate", 1, Some("0000:65:00.0")),
        ],
    );
    let (_, v) = doctor(dir.path(), &["--plan", &plan]);
    let c = find(&v, "sriov-vfs", "0000:65:00.0");
    expect(
        c,
        "warn",
        &["0 of 8 VFs enabled", "to vm1, vm2: 2 VF(s) needed"],
    );
    assert!(
        str_at(c, "hint").starts_with("echo 2 > /sys/bus/pci/devices/0000:65:00.0/sriov_numvfs"),
        "{c:#}"
    );

    dir.file("sys/devices/pci0000:00/0000:65:00.0/sriov_numvfs", "2\n");
    let (_, v) = doctor(dir.path(), &["--plan", &plan]);
    expect(
        find(&v, "sriov-vfs", "0000:65:00.0"),
        "pass",
        &["2 of 8 VFs enabled; the plan needs 2"],
    );
}

#[test]
fn an_x8_link_on_an_x16_card_fails_below_the_port_rate() {
    let dir = Tree::new();
    fn link(width: &str) -> [(&'static str, &str); 4] {
        [
            ("current_link_speed", "8.0 GT/s PCIe"),
            ("current_link_width", width),
            ("max_link_speed", "8.0 GT/s PCIe"),
            ("max_link_width", "16"),
        ]
    }
    dir.device("0000:65:00.0", "0x020000", &link("8"))
        .net("0000:65:00.0", "ens1f0np0", 100_000);
    let (code, v) = doctor(dir.path(), &[]);
    assert_eq!(code, Some(1), "{v:#}");
    // 8 GT/s x 8 lanes x 128/130 = 63.0 Gb/s usable, x16 would give 126.0:
    // a 100 GbE port cannot reach line rate (the lab's card stalled at 86-88 G).
    let c = find(&v, "pcie-link", "0000:65:00.0");
    expect(
        c,
        "fail",
        &[
            "link at 8 GT/s x8 of 8 GT/s x16: usable 63.0 of 126.0 Gb/s",
            "port ens1f0np0 at 100 Gb/s — below the port's line rate",
        ],
    );
    assert!(str_at(c, "hint").contains("LnkCap and LnkSta"), "{c:#}");

    dir.device("0000:65:00.0", "0x020000", &link("16"));
    let (code, v) = doctor(dir.path(), &[]);
    assert_eq!(code, Some(0), "{v:#}");
    expect(
        find(&v, "pcie-link", "0000:65:00.0"),
        "pass",
        &["usable 126.0 of 126.0 Gb/s", "port ens1f0np0 at 100 Gb/s"],
    );
}

#[test]
fn nic_numa_unknown_warns_known_passes() {
    let dir = Tree::new();
    dir.file("sys/devices/system/node/node0/cpulist", "0-3\n")
        .file("sys/devices/system/node/node1/cpulist", "4-7\n")
        .device("0000:65:00.0", "0x020000", &[("numa_node", "-1")])
        .device("0000:b1:00.0", "0x020000", &[("numa_node", "1")]);
    let (_, v) = doctor(dir.path(), &[]);
    expect(
        find(&v, "nic-numa", "0000:65:00.0"),
        "warn",
        &["NUMA node unknown (-1) on this 2-node host"],
    );
    expect(
        find(&v, "nic-numa", "0000:b1:00.0"),
        "pass",
        &["NUMA node 1"],
    );
}

#[test]
fn smt_off_fails_a_plan_that_needs_siblings() {
    let dir = Tree::new();
    dir.file("sys/devices/system/cpu/smt/control", "off\n");
    let require = dir.plan("0,8", &[("vm1", "1-3,9-11", "require", 2, None)]);
    let (code, v) = doctor(dir.path(), &["--plan", &require]);
    assert_eq!(code, Some(1), "{v:#}");
    let c = find(&v, "smt", "host");
    expect(
        c,
        "fail",
        &[
            "SMT is off (smt/control: off)",
            "vm1 (threads = require, guest threads = 2)",
        ],
    );
    assert!(
        str_at(c, "hint").starts_with("echo on > /sys/devices/system/cpu/smt/control"),
        "{c:#}"
    );

    dir.file("sys/devices/system/cpu/smt/control", "on\n");
    let (code, v) = doctor(dir.path(), &["--plan", &require]);
    assert_eq!(code, Some(0), "{v:#}");
    expect(find(&v, "smt", "host"), "pass", &["SMT is on"]);
}

/// Issue 17, item 4: a host isolated at runtime through cgroups (what
/// `pinplan isolate` leaves on a cgroup v1 host: the root cgroup's user
/// processes moved into a cgroup on the host's CPUs) or by tuned's
/// cpu-partitioning profile is not reported "not isolated"; with the host
/// free to run anywhere it is.
#[test]
fn cgroup_and_tuned_isolation_are_recognised() {
    let dir = Tree::new();
    let plan = dir.plan("0-1", &[("vm1", "2-5", "isolate", 1, None)]);
    dir.file("proc/cmdline", "ro quiet\n")
        .file("sys/devices/system/cpu/online", "0-7\n")
        .file(
            "proc/mounts",
            "cgroup /sys/fs/cgroup/cpuset cgroup rw,relatime,cpuset 0 0\n",
        )
        .file("sys/fs/cgroup/cpuset/cpuset.cpus", "0-7\n")
        // Only a kernel thread (PF_KTHREAD) is left in the root cgroup.
        .file("sys/fs/cgroup/cpuset/tasks", "2\n")
        .file(
            "proc/2/stat",
            "2 (kthreadd) S 0 0 0 0 -1 2129984 0 0 0 0 0 0 0 0 20 0 1 0 11 0 0\n",
        )
        .file("sys/fs/cgroup/cpuset/machine/cpuset.cpus", "0-7\n")
        .file(
            "sys/fs/cgroup/cpuset/pinplan.housekeeping/cpuset.cpus",
            "0-1\n",
        );
    let (code, v) = doctor(dir.path(), &["--plan", &plan]);
    assert_eq!(code, Some(0), "{v:#}");
    expect(
        find(&v, "isolation", "vm1"),
        "pass",
        &[
            "CPUs 2-5 are kept from the host by cgroups (cgroup-v1 cgroups pinplan.housekeeping confined to CPUs 0-1)",
            "the timer tick still runs on 2-5",
        ],
    );
    // A user process back in the root cgroup runs anywhere: not isolated.
    dir.file("sys/fs/cgroup/cpuset/tasks", "2\n700\n").file(
        "proc/700/stat",
        "700 (sshd) S 1 700 700 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 900 0 0\n",
    );
    let (_, v) = doctor(dir.path(), &["--plan", &plan]);
    expect(
        find(&v, "isolation", "vm1"),
        "warn",
        &["are not all isolated"],
    );
    // tuned's cpu-partitioning covering the VM CPUs.
    dir.file("etc/tuned/active_profile", "cpu-partitioning\n")
        .file(
            "etc/tuned/cpu-partitioning-variables.conf",
            "# isolated\nisolated_cores=2-7\n",
        );
    let (_, v) = doctor(dir.path(), &["--plan", &plan]);
    expect(
        find(&v, "isolation", "vm1"),
        "pass",
        &["kept from the host by tuned's cpu-partitioning (isolated_cores=2-7)"],
    );
    // …and not covering them.
    dir.file(
        "etc/tuned/cpu-partitioning-variables.conf",
        "isolated_cores=4-7\n",
    );
    let (_, v) = doctor(dir.path(), &["--plan", &plan]);
    expect(
        find(&v, "isolation", "vm1"),
        "warn",
        &["are not all isolated"],
    );
}

/// Issue 18: the `realtime` check, for a plan with a real-time vCPU (vCPU 1
/// on CPU 3): RT throttling (a fail where RT group scheduling would refuse
/// FIFO in libvirt's cgroups, the failure measured on the test machine; a
/// warning with the stopped time otherwise), and a PREEMPT_RT kernel or
/// `nohz_full=` on the real-time vCPU's CPU.
#[test]
fn realtime_check_reads_throttling_and_the_tick() {
    let dir = Tree::new();
    let path = dir.plan("0-1", &[("rt", "2-3", "isolate", 1, None)]);
    let mut plan: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    plan["vms"][0]["vcpus"] =
        json!([{"vcpu": 0, "cpu": 2, "role": "main"}, {"vcpu": 1, "cpu": 3, "role": "pmd"}]);
    plan["vms"][0]["realtime_vcpus"] = json!("1");
    std::fs::write(&path, plan.to_string()).unwrap();
    dir.file("proc/cmdline", "ro quiet\n")
        .file("sys/devices/system/cpu/online", "0-7\n")
        .file("proc/sys/kernel/sched_rt_runtime_us", "950000\n")
        .file("proc/sys/kernel/sched_rt_period_us", "1000000\n")
        .file("proc/sys/kernel/version", "#1 SMP PREEMPT_DYNAMIC\n")
        .file("sys/fs/cgroup/cpu/cpu.rt_runtime_us", "950000\n");
    let (code, v) = doctor(dir.path(), &["--plan", &path]);
    assert_eq!(code, Some(1), "{v:#}");
    let c = find(&v, "realtime", "throttling");
    expect(
        c,
        "fail",
        &["RT group scheduling", "Cannot set scheduler parameters"],
    );
    assert!(str_at(c, "hint").starts_with("sysctl -w kernel.sched_rt_runtime_us=-1"));
    expect(
        find(&v, "realtime", "rt"),
        "warn",
        &["neither a PREEMPT_RT kernel nor nohz_full= on CPUs 3"],
    );
    assert!(str_at(find(&v, "realtime", "rt"), "hint").contains("nohz_full=3"));
    std::fs::remove_file(dir.path().join("sys/fs/cgroup/cpu/cpu.rt_runtime_us")).unwrap();
    let (_, v) = doctor(dir.path(), &["--plan", &path]);
    expect(
        find(&v, "realtime", "throttling"),
        "warn",
        &["stopped 50 ms of every 1000 ms"],
    );
    dir.file("proc/sys/kernel/sched_rt_runtime_us", "-1\n")
        .file("proc/cmdline", "ro nohz_full=2-3\n");
    let (_, v) = doctor(dir.path(), &["--plan", &path]);
    expect(
        find(&v, "realtime", "throttling"),
        "pass",
        &["not throttled"],
    );
    expect(
        find(&v, "realtime", "rt"),
        "pass",
        &["CPUs 3 are in nohz_full="],
    );
    dir.file("proc/cmdline", "ro\n")
        .file("proc/sys/kernel/version", "#1 SMP PREEMPT_RT\n");
    let (_, v) = doctor(dir.path(), &["--plan", &path]);
    expect(find(&v, "realtime", "rt"), "pass", &["PREEMPT_RT"]);
}

#[test]
fn vm_cpus_not_isolated_warn_host_cpus_isolated_fail() {
    let dir = Tree::new();
    let plan = dir.plan("0-1", &[("vm1", "2-5", "isolate", 1, None)]);
    dir.file(
        "proc/cmdline",
        "ro quiet isolcpus=domain,managed_irq,2-3 nohz_full=2-3\n",
    );
    // Issue 31: the hint names the plan file as given, not `PLAN.json`
    // (here with a `./` that a canonical path would drop).
    let typed = format!("{}/./plan.json", dir.path().display());
    let (code, v) = doctor(dir.path(), &["--plan", &typed]);
    assert_eq!(code, Some(0), "{v:#}");
    let c = find(&v, "isolation", "vm1");
    // rcu_nocbs is implied by nohz_full for 2-3.
    expect(
        c,
        "warn",
        &["isolcpus= lacks 4-5, nohz_full= lacks 4-5, rcu_nocbs= lacks 4-5"],
    );
    assert_eq!(
        str_at(c, "hint"),
        format!("now, without a reboot: pinplan isolate --plan {typed}; or at boot, add to the kernel command line (replacing any existing value): isolcpus=domain,managed_irq,2-5 nohz_full=2-5 rcu_nocbs=2-5")
    );

    dir.file(
        "proc/cmdline",
        "ro quiet isolcpus=domain,managed_irq,2-5 nohz_full=2-5 rcu_nocbs=2-5\n",
    );
    let (code, v) = doctor(dir.path(), &["--plan", &plan]);
    assert_eq!(code, Some(0), "{v:#}");
    expect(
        find(&v, "isolation", "vm1"),
        "pass",
        &["CPUs 2-5 are in isolcpus="],
    );
    expect(
        find(&v, "isolation", "host"),
        "pass",
        &["the host's CPUs 0-1 are not isolated"],
    );

    dir.file("proc/cmdline", "isolcpus=0-5\n");
    let (code, v) = doctor(dir.path(), &["--plan", &plan]);
    assert_eq!(code, Some(1), "{v:#}");
    let c = find(&v, "isolation", "host");
    expect(c, "fail", &["the host's reserved CPUs 0-1 are isolated"]);
    assert_eq!(
        str_at(c, "hint"),
        "on the kernel command line: isolcpus=2-5"
    );
}

#[test]
fn an_irq_on_a_vm_cpu_warns_with_the_command_to_move_it() {
    let dir = Tree::new();
    let plan = dir.plan("0", &[("vm1", "1-3", "isolate", 1, None)]);
    dir.file(
        "proc/interrupts",
        "           CPU0       CPU1       CPU2       CPU3\n  \
         30:         12          0          0          0   IO-APIC   4-edge      ttyS0\n  \
         42:          0       9001          0          0   IR-PCI-MSIX-0000:65:00.0    0-edge      ice-ens1f0-TxRx-0\n",
    )
    .file("proc/irq/30/smp_affinity_list", "0\n")
    .file("proc/irq/42/smp_affinity_list", "0-3\n");
    let (code, v) = doctor(dir.path(), &["--plan", &plan]);
    assert_eq!(code, Some(0), "{v:#}");
    let c = find(&v, "irq-affinity", "irqs");
    expect(
        c,
        "warn",
        &["1 of 2 IRQs may run on the VMs' CPUs 1-3: 42 (ice-ens1f0-TxRx-0) on 0-3"],
    );
    assert!(
        str_at(c, "hint").starts_with("echo 0 > /proc/irq/42/smp_affinity_list"),
        "{c:#}"
    );

    dir.file("proc/irq/42/smp_affinity_list", "0\n");
    let (_, v) = doctor(dir.path(), &["--plan", &plan]);
    expect(
        find(&v, "irq-affinity", "irqs"),
        "pass",
        &["none of 2 IRQs may run on the VMs' CPUs 1-3"],
    );
}

#[test]
fn issue_31_an_irq_the_kernel_refused_to_move_is_not_suggested_again() {
    let dir = Tree::new();
    let plan = dir.plan("0", &[("vm1", "1-3", "isolate", 1, None)]);
    dir.file(
        "proc/interrupts",
        "           CPU0       CPU1       CPU2       CPU3\n  \
         30:         12          0          0          0   IO-APIC   4-edge      ttyS0\n  \
         36:          0          5          0          0   PCI-MSI 49153-edge      virtio1-req.0\n  \
         42:          0       9001          0          0   IR-PCI-MSIX-0000:65:00.0    0-edge      ice-ens1f0-TxRx-0\n",
    )
    .file("proc/irq/30/smp_affinity_list", "0\n")
    .file("proc/irq/36/smp_affinity_list", "0-3\n")
    .file("proc/irq/42/smp_affinity_list", "0-3\n");
    // The isolation in effect: its journal (the format docs/isolate.md
    // gives) says the kernel refused IRQ 36's write; IRQ 42's was made, and
    // irqbalance has moved it back since.
    dir.file(
        "isolate-journal.json",
        r#"{"tool": "pinplan isolate", "version": 1, "root": "/", "cgroups": "none",
            "vms": ["vm1"], "vm_cpus": "1-3", "housekeeping": "0", "state": "applied",
            "changes": [
              {"kind": "write", "what": "IRQ 36 (virtio1-req.0)", "path": "/proc/irq/36/smp_affinity_list",
               "before": "0-3", "after": "0", "status": "refused", "reason": "Operation not permitted (os error 1)"},
              {"kind": "write", "what": "IRQ 42 (ice-ens1f0-TxRx-0)", "path": "/proc/irq/42/smp_affinity_list",
               "before": "0-3", "after": "0", "status": "applied"}]}"#,
    );
    let journal = dir.path().join("isolate-journal.json");
    dir.file("run/pinplan/active", &format!("{}\n", journal.display()));
    let (code, v) = doctor(dir.path(), &["--plan", &plan]);
    assert_eq!(code, Some(0), "{v:#}");
    let c = find(&v, "irq-affinity", "irqs");
    expect(
        c,
        "warn",
        &["2 of 3 IRQs may run on the VMs' CPUs 1-3: 36 (virtio1-req.0) on 0-3, 42 (ice-ens1f0-TxRx-0) on 0-3"],
    );
    assert_eq!(
        str_at(c, "hint"),
        "echo 0 > /proc/irq/42/smp_affinity_list (stop irqbalance or set IRQBALANCE_BANNED_CPULIST=1-3 so that it does not move them back; managed IRQs refuse the write: isolcpus=managed_irq keeps them off); \
         the kernel refused pinplan isolate's write to IRQ 36 (virtio1-req.0): Operation not permitted (os error 1), so it cannot be moved (managed and per-CPU IRQs refuse it): at boot, isolcpus=managed_irq,domain,1-3 on the kernel command line keeps managed IRQs off the VM CPUs"
    );

    // Only the refused IRQ left: no write is suggested at all.
    dir.file("proc/irq/42/smp_affinity_list", "0\n");
    let (_, v) = doctor(dir.path(), &["--plan", &plan]);
    let hint = str_at(find(&v, "irq-affinity", "irqs"), "hint");
    assert!(!hint.contains("echo"), "{hint}");
    assert!(
        hint.starts_with("the kernel refused pinplan isolate's write to IRQ 36 (virtio1-req.0)"),
        "{hint}"
    );
}

// ---- output and bad input ---------------------------------------------------

#[test]
fn text_output_is_a_table_with_hints() {
    let dir = Tree::new();
    dir.device("0000:65:00.0", "0x020000", &[("numa_node", "0")]);
    let root = dir.path().display().to_string();
    let out = pinplan(["doctor", "--root", &root]);
    assert_eq!(out.status.code(), Some(0));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let mut lines = stdout.lines();
    assert_eq!(
        lines
            .next()
            .map(str::split_whitespace)
            .map(Iterator::collect::<Vec<_>>),
        Some(vec!["status", "check", "subject", "message", "/", "hint"])
    );
    assert!(stdout.contains("\nWARN   iommu-enabled "), "{stdout}");
    assert!(
        stdout.contains("hint: enable the IOMMU in the firmware setup"),
        "{stdout}"
    );
    assert!(
        stdout.contains("\nPASS   nic-numa          0000:65:00.0 NUMA node 0\n"),
        "{stdout}"
    );
    assert!(
        stdout.ends_with("\n1 pass, 1 warn, 0 fail, 8 skip\n"),
        "{stdout}"
    );
    // Same input, same bytes.
    assert_eq!(pinplan(["doctor", "--root", &root]).stdout, out.stdout);
}

#[test]
fn bad_input_exits_2() {
    let empty = Tree::new();
    let root = empty.path().display().to_string();
    let out = pinplan(["doctor", "--root", &root]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("has neither sys/ nor proc/") && stderr.contains("hint: --root takes"),
        "{stderr}"
    );
    insta::assert_snapshot!("empty-root", util::redact(&stderr));

    let dir = Tree::new();
    dir.device("0000:65:00.0", "0x020000", &[])
        .file("bad.json", "{\"status\": ");
    let root = dir.path().display().to_string();
    let bad_plan = dir.path().join("bad.json").display().to_string();
    for (snapshot, args, needle) in [
        (
            "plan-not-json",
            vec!["--plan", bad_plan.as_str()],
            "not a pinplan plan",
        ),
        (
            "plan-missing",
            vec!["--plan", "/nonexistent/plan.json"],
            "cannot read the plan",
        ),
        (
            "nic-not-an-address",
            vec!["--nic", "65:00"],
            "is not a PCI address",
        ),
        (
            "nic-not-on-the-host",
            vec!["--nic", "0000:66:00.0"],
            "0000:66:00.0 (--nic) is not a PCI device",
        ),
    ] {
        let mut all = vec!["doctor", "--root", root.as_str()];
        all.extend(args.iter().copied());
        let out = pinplan(&all);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
        assert!(out.stdout.is_empty(), "{args:?}");
        insta::assert_snapshot!(snapshot, util::redact(&stderr));
    }
    let out = pinplan(["doctor", "--root", &root, "--nic", "0000:66:00.0"]);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("hint: network devices there: 0000:65:00.0")
    );

    // A plan naming a NIC the host does not have.
    let plan = dir.plan("0", &[("vm1", "1", "isolate", 1, Some("0000:99:00.0"))]);
    let out = pinplan(["doctor", "--root", &root, "--plan", &plan]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("0000:99:00.0 (the plan's VM vm1)"),
        "{stderr}"
    );
    insta::assert_snapshot!("plan-nic-not-on-the-host", util::redact(&stderr));
}

// ---- this machine ---------------------------------------------------------

#[test]
fn this_machine_runs_to_completion() {
    let (code, v) = doctor(Path::new("/"), &[]);
    assert!(matches!(code, Some(0 | 1)), "exit {code:?}: {v:#}");
    let checks = v["checks"].as_array().cloned().unwrap_or_default();
    let ids = [
        "iommu-enabled",
        "iommu-dma-mode",
        "vfio-group-viable",
        "sriov-vfs",
        "pcie-link",
        "nic-numa",
        "smt",
        "isolation",
        "irq-affinity",
        "hugepages",
    ];
    for id in ids {
        assert!(checks.iter().any(|c| c["id"] == id), "no {id} in {v:#}");
    }
    for c in &checks {
        assert!(ids.contains(&str_at(c, "id")), "{c:#}");
        assert!(
            ["pass", "warn", "fail", "skip"].contains(&str_at(c, "status")),
            "{c:#}"
        );
        assert!(!str_at(c, "message").is_empty(), "{c:#}");
        assert!(!str_at(c, "subject").is_empty(), "{c:#}");
        assert!(
            c["hint"].is_null() || !str_at(c, "hint").is_empty(),
            "{c:#}"
        );
    }
    assert_eq!(
        code == Some(1),
        checks.iter().any(|c| c["status"] == "fail")
    );
}

/// `doctor --connect URI` (issue 19): a host reached through libvirt's own
/// transport is checked from its PCI node devices. This machine through
/// `qemu+ssh://` (the sshd scripts/test.sh starts) must get, check by check
/// and subject by subject, the verdicts `doctor --root /` gets from its
/// sysfs for the PCI checks; the checks of the kernel's settings are
/// skipped and say why.
#[test]
fn doctor_through_libvirt_agrees_with_sysfs() {
    if util::libvirt_uri("doctor --connect").is_none() {
        return;
    }
    let remote = std::env::var("PINPLAN_TEST_SSH_URI")
        .expect("PINPLAN_TEST_SSH_URI: scripts/test.sh starts an sshd for qemu+ssh://");
    let run = |args: &[&str]| {
        let mut all = vec!["doctor", "--format", "json"];
        all.extend_from_slice(args);
        let out = pinplan(all);
        assert_ne!(out.status.code(), Some(2), "{}", util::text(&out.stderr));
        util::stdout_json(&out)
    };
    let tree = run(&["--root", "/"]);
    let libvirt = run(&["--connect", &remote]);
    let verdicts = |report: &Value, ids: &[&str]| -> Vec<(String, String, String)> {
        report["checks"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| ids.contains(&c["id"].as_str().unwrap()))
            .map(|c| {
                (
                    str_at(c, "id").to_owned(),
                    str_at(c, "subject").to_owned(),
                    str_at(c, "status").to_owned(),
                )
            })
            .collect()
    };
    let pci = [
        "iommu-enabled",
        "vfio-group-viable",
        "sriov-vfs",
        "pcie-link",
        "nic-numa",
    ];
    let from_tree = verdicts(&tree, &pci);
    // Not only the host-wide check: at least one PCI function compared.
    assert!(
        from_tree
            .iter()
            .any(|(_, subject, _)| subject.parse::<pinplan::topology::PciAddress>().is_ok()),
        "{from_tree:?}"
    );
    assert_eq!(verdicts(&libvirt, &pci), from_tree);
    for id in [
        "iommu-dma-mode",
        "smt",
        "isolation",
        "irq-affinity",
        "hugepages",
        "realtime",
    ] {
        let c = find(&libvirt, id, "host");
        expect(c, "skip", &["not visible through libvirt"]);
    }
}

/// A named SR-IOV PF with VFs: `vfio-group-viable` says whether one of its
/// VFs can be passed through, as the fleet plan's facts do (issue 19). The
/// lab's trees: on B1 each VF has a group of its own; on JY both VFs share
/// group 1 with the PF on mlx4_core.
#[test]
fn a_named_pf_passes_when_one_vf_is_viable() {
    let nic = ["--nic", "0000:65:00.0"];
    let (_, b1) = doctor(&fixture("fleet/b1"), &nic);
    expect(
        find(&b1, "vfio-group-viable", "0000:65:00.0"),
        "pass",
        &["one of its VFs sits in an IOMMU group VFIO can take whole"],
    );
    let (code, jy) = doctor(&fixture("fleet/jy"), &nic);
    assert_eq!(code, Some(1), "{jy:#}");
    expect(
        find(&jy, "vfio-group-viable", "0000:65:00.0"),
        "fail",
        &[
            "no VF of 0000:65:00.0 can be passed through",
            "0000:65:00.1's IOMMU group 1 is not viable (0000:65:00.0 is bound to mlx4_core)",
        ],
    );
}
