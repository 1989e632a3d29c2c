//! Fuzzing every parser with proptest (a nightly toolchain for `cargo fuzz`
//! is not available here): seeds from `tests/fixtures/` and `examples/lab/`,
//! mutated by random byte edits, then handed to each reader. A reader may
//! refuse the input, never panic; the patcher's output parses whenever the
//! input does. `PINPLAN_FUZZ_CASES` sets the cases per target (default 64,
//! what `scripts/test.sh` runs); `docs/security.md` says how to run longer.

use crate::cpuset::CpuSet;
use crate::topology::{self, Source};
use proptest::prelude::*;
use std::path::{Path, PathBuf};

fn repo(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(rel)
}

fn seed(rel: &str) -> String {
    std::fs::read_to_string(repo(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

fn config() -> ProptestConfig {
    let cases = std::env::var("PINPLAN_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(64);
    ProptestConfig {
        cases,
        failure_persistence: None,
        max_shrink_iters: 64,
        ..ProptestConfig::default()
    }
}

/// One random edit: replace, insert or delete a byte range.
#[derive(Debug, Clone)]
enum Edit {
    Replace(usize, u8),
    Insert(usize, Vec<u8>),
    Delete(usize, usize),
}

fn edits() -> impl Strategy<Value = Vec<Edit>> {
    let one = prop_oneof![
        (any::<usize>(), any::<u8>()).prop_map(|(at, b)| Edit::Replace(at, b)),
        (
            any::<usize>(),
            prop_oneof![
                prop::collection::vec(any::<u8>(), 1..8),
                Just(b"&x;".to_vec()),
                Just(b"&#x110000;".to_vec()),
                Just(b"<".to_vec()),
                Just(b"\"".to_vec()),
                Just(b"]]".to_vec()),
            ]
        )
            .prop_map(|(at, v)| Edit::Insert(at, v)),
        (any::<usize>(), 1..64usize).prop_map(|(at, n)| Edit::Delete(at, n)),
    ];
    prop::collection::vec(one, 1..6)
}

/// `text` with `edits` applied, as a string (invalid UTF-8 replaced).
fn mutate(text: &str, edits: &[Edit]) -> String {
    let mut bytes = text.as_bytes().to_vec();
    for e in edits {
        let len = bytes.len().max(1);
        match e {
            Edit::Replace(at, b) => {
                if let Some(x) = bytes.get_mut(at % len) {
                    *x = *b;
                }
            }
            Edit::Insert(at, v) => {
                let at = at % (bytes.len() + 1);
                bytes.splice(at..at, v.iter().copied());
            }
            Edit::Delete(at, n) => {
                let at = at % len;
                let end = (at + n).min(bytes.len());
                if at < end {
                    bytes.drain(at..end);
                }
            }
        }
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

fn host() -> crate::HostTopology {
    topology::load(&Source::Synthetic("package:1 core:4 pu:2".into()))
        .unwrap_or_else(|e| panic!("{e}"))
}

proptest! {
    #![proptest_config(config())]

    /// hwloc XML: the format sniff and the structure check before hwloc.
    #[test]
    fn hwloc_xml_precheck(edits in edits()) {
        let text = mutate(&seed("tests/fixtures/hwloc-xml/16em64t-4s2c2t.xml"), &edits);
        if let Ok((_, doc)) = crate::topology::detect::parse(Path::new("f.xml"), &text) {
            let _ = crate::topology::precheck::hwloc(Path::new("f.xml"), doc.root_element());
        }
    }

    /// libvirt capabilities XML.
    #[test]
    fn capabilities_xml(edits in edits()) {
        let text = mutate(&seed("tests/fixtures/libvirt-caps/caps-qemu-kvm.xml"), &edits);
        let _ = crate::topology::caps::parse("caps.xml", &text);
    }

    /// Domain XML: the reader, and the patcher, whose output parses whenever
    /// it gives one.
    #[test]
    fn domain_xml(edits in edits()) {
        let text = mutate(&seed("examples/lab/vm1.xml"), &edits);
        let host = host();
        let _ = crate::libvirt::domain::tenant_from_domain("vm1.xml", &text, &host);
        let plan: crate::plan::Plan = serde_json::from_str(&seed("tests/fixtures/inputs/tab-vm-plan.json"))
            .unwrap_or_else(|e| panic!("{e}"));
        let options = crate::libvirt::patch::PatchOptions { set_vcpus: true, name_given: true };
        if let Ok(out) = crate::libvirt::patch::patch("vm1.xml", &text, &plan.vms[0], &options) {
            prop_assert!(crate::xmldoc::parse(&out).is_ok(), "malformed output from:\n{text}");
        }
    }

    /// Spec TOML.
    #[test]
    fn spec_toml(edits in edits()) {
        let text = mutate(&seed("examples/lab/b1.toml"), &edits);
        let _ = crate::spec::Spec::parse(&repo("examples/lab/b1.toml"), &text);
    }

    /// Throughput table CSV.
    #[test]
    fn table_csv(edits in edits()) {
        let text = mutate(&seed("examples/lab/b1-tx-cores.csv"), &edits);
        if let Ok(table) = crate::demand::Table::parse(Path::new("t.csv"), &text) {
            let _ = crate::demand::leave_one_out(&table, 100.0);
        }
    }

    /// Plan JSON.
    #[test]
    fn plan_json(edits in edits()) {
        let text = mutate(&seed("tests/fixtures/inputs/tab-vm-plan.json"), &edits);
        let _ = serde_json::from_str::<crate::plan::Plan>(&text);
    }

    /// CPU lists and the kernel command line, from arbitrary text.
    #[test]
    fn cpuset_and_cmdline(text in "[0-9,\\-^ \\t\\nx]{0,40}", cmdline in ".{0,80}") {
        let _ = text.parse::<CpuSet>();
        let all: CpuSet = "0-63".parse().unwrap_or_default();
        let c = crate::cmdline::KernelCmdline::parse(&cmdline);
        let _ = c.cpu_list("isolcpus", &all);
    }

    /// What `isolate` and `report` read from /proc and /sys, from arbitrary
    /// text: numa_maps, hex CPU masks, mount points; and a mutated isolate
    /// journal, which is refused with a typed error naming the journal, or
    /// names only files isolation changes and writes back to itself.
    #[test]
    fn kernel_files_and_journals(text in ".{0,200}", edits in edits()) {
        let _ = crate::libvirt::resident::parse_numa_maps(&text);
        if let Some(set) = CpuSet::from_hex_mask(&text) {
            prop_assert_eq!(CpuSet::from_hex_mask(&set.to_hex_mask()), Some(set));
        }
        let _ = crate::host::cgroup::unescape(&text);
        let seed = r#"{"tool": "pinplan isolate", "version": 1, "root": "/tmp/r", "cgroups": "cgroup-v1",
            "vms": ["vm1"], "vm_cpus": "1", "housekeeping": "0", "state": "applied", "changes": [
            {"kind": "write", "what": "IRQ 24", "path": "/tmp/r/proc/irq/24/smp_affinity_list", "before": "0-1", "after": "0", "status": "applied"},
            {"kind": "move", "tid": 5, "start": 9, "name": "sh", "from": "/tmp/r/sys/fs/cgroup/cpuset", "to": "/tmp/r/sys/fs/cgroup/cpuset/pinplan.housekeeping", "file": "tasks", "affinity": "0-1", "status": "applied"},
            {"kind": "systemd", "unit": "user.slice", "before": "", "after": "0", "status": "planned"}]}"#;
        // The seed itself is a journal undo would take.
        prop_assert!(crate::isolate::journal::Journal::from_text(Path::new("j.json"), seed).is_ok());
        let mutated = mutate(seed, &edits);
        match crate::isolate::journal::Journal::from_text(Path::new("j.json"), &mutated) {
            Ok(j) => {
                for entry in &j.changes {
                    if let crate::isolate::journal::Change::Write { path, .. } = &entry.change {
                        prop_assert!(path.starts_with(&j.root), "{}", path.display());
                        prop_assert!(!path.components().any(|c| c == std::path::Component::ParentDir));
                    }
                }
                // What was read is what is written back, and reads again as itself.
                let text = serde_json::to_string(&j).unwrap_or_default();
                let again = crate::isolate::journal::Journal::from_text(Path::new("j.json"), &text);
                prop_assert_eq!(again.ok(), Some(j));
            }
            // Refused with the typed error that names the journal.
            Err(e) => {
                prop_assert!(
                    matches!(e, crate::isolate::IsolateError::BadJournal { .. }),
                    "{e:?}"
                );
                prop_assert!(e.to_string().starts_with("j.json: "), "{e}");
            }
        }
    }

    /// A fleet spec: refused or read, never a panic.
    #[test]
    fn fleet_spec_toml(edits in edits()) {
        let text = mutate(&seed("examples/fleet.toml"), &edits);
        let _ = crate::spec::Spec::parse_any(&repo("examples/fleet.toml"), &text);
    }

    /// libvirt node-device XML, as a remote host may send it: a PF with
    /// its VFs, PCIe link and driver, and a network interface.
    #[test]
    fn nodedev_xml(edits in edits(), net_edits in edits()) {
        let pci = mutate(
            &seed("tests/fixtures/libvirt-nodedev/pci_0000_02_10_7_sriov_pf_vfs_all_header_type.xml"),
            &edits,
        );
        let net = mutate(&seed("tests/fixtures/libvirt-nodedev/net_00_13_02_b9_f9_d3.xml"), &net_edits);
        let nic: crate::topology::PciAddress = "0000:02:10.7".parse().unwrap_or_else(|e| panic!("{e}"));
        let devices = crate::libvirt::NodeDevices { pci: vec![pci], net: vec![net] };
        let _ = crate::doctor::host_facts_libvirt(&devices, &[nic]);
    }

    /// A fleet plan directory's fleet.json and a fleet journal: refused or
    /// read; a host name read never leaves the directory; a fleet journal
    /// read writes back to itself, one refused is refused naming its file.
    #[test]
    fn fleet_json_and_fleet_journal(edits in edits()) {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let fleet = r#"{"proven": true, "hosts": [{"name": "b1", "source": "b1.xml", "connect": "qemu:///system",
            "doctor_root": null, "vms": [], "cores_used": 0, "cores_free": 9, "error": null}], "vms": []}"#;
        std::fs::write(dir.path().join("fleet.json"), mutate(fleet, &edits)).unwrap_or_else(|e| panic!("{e}"));
        if let Ok(inventory) = crate::fleet::inventory::Inventory::from_dir(dir.path()) {
            for h in &inventory.hosts {
                prop_assert!(!h.name.contains('/') && !h.name.starts_with('.'), "{}", h.name);
            }
        }
        let journal = r#"{"pinplan_fleet_journal": 1, "fleet": "out", "hosts": [{"name": "b1", "uri": "qemu:///system", "journal": "j-b1.json"}]}"#;
        let path = dir.path().join("j.json");
        let text = mutate(journal, &edits);
        std::fs::write(&path, &text).unwrap_or_else(|e| panic!("{e}"));
        match crate::fleet::apply::FleetJournal::load_if(&path) {
            // Read: written back, it reads again as the same value.
            Ok(Some(j)) => {
                let again = dir.path().join("again.json");
                let back = serde_json::to_string(&j).unwrap_or_default();
                std::fs::write(&again, back).unwrap_or_else(|e| panic!("{e}"));
                let reread = crate::fleet::apply::FleetJournal::load_if(&again);
                prop_assert_eq!(reread.ok().flatten(), Some(j));
            }
            // Not a fleet journal: no JSON object with the fleet journal's key.
            Ok(None) => {
                let value = serde_json::from_str::<serde_json::Value>(&text).ok();
                let keyed = value
                    .as_ref()
                    .and_then(serde_json::Value::as_object)
                    .is_some_and(|o| o.contains_key("pinplan_fleet_journal"));
                prop_assert!(!keyed, "{text}");
            }
            // Refused: the error names the file.
            Err(e) => {
                let message = e.to_string();
                prop_assert!(message.contains(&path.display().to_string()), "{message}");
            }
        }
    }
}
