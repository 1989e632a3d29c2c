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

    /// pinplan's topology JSON: refused or read; what reads, reads back the same.
    #[test]
    fn topology_json(edits in edits()) {
        let seed = topology::load(&Source::File(repo("tests/fixtures/hwloc-xml/16em64t-4s2c2t-offlines.xml")))
            .unwrap_or_else(|e| panic!("{e}"))
            .to_json();
        let text = mutate(&seed, &edits);
        if let Ok(host) = crate::topology::json::read(Path::new("h.json"), &text) {
            let again = crate::topology::json::read(Path::new("h.json"), &host.to_json());
            prop_assert_eq!(again.ok(), Some(host));
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
        if let Ok(out) = crate::libvirt::patch::patch("vm1.xml", &text, &plan.vms[0], &options).map(|p| p.text) {
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
                let text = crate::host::journal::to_text(&j);
                let again = crate::isolate::journal::Journal::from_text(Path::new("j.json"), &text);
                prop_assert_eq!(again.ok(), Some(j));
            }
            // Refused with a typed error that names the journal: the
            // envelope's, or isolation's own check of what it names.
            Err(e) => {
                prop_assert!(
                    matches!(
                        e,
                        crate::isolate::IsolateError::ReadJournal(_)
                            | crate::isolate::IsolateError::BadJournal { .. }
                    ),
                    "{e:?}"
                );
                prop_assert!(e.to_string().starts_with("j.json"), "{e}");
                prop_assert!(crate::error::Diagnostic::hint(&e).is_some(), "{e}");
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

    /// A fleet plan directory's fleet.json and a fleet journal (version 1
    /// and the envelope): refused or read; a host name read never leaves the
    /// directory; a fleet journal read writes back to itself, one refused is
    /// refused naming its file.
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
        let path = dir.path().join("j.json");
        for start in [seed(FLEET_JOURNAL_V1), crate::host::journal::to_text(&fleet_journal())] {
            let text = mutate(&start, &edits);
            std::fs::write(&path, &text).unwrap_or_else(|e| panic!("{e}"));
            match crate::fleet::apply::FleetJournal::load_if(&path) {
                // Read: written back, it reads again as the same value.
                Ok(Some(j)) => {
                    let again = dir.path().join("again.json");
                    let _ = std::fs::remove_file(&again);
                    crate::host::journal::write(&again, &j, crate::host::journal::Write::New)
                        .unwrap_or_else(|e| panic!("{e}"));
                    let reread = crate::fleet::apply::FleetJournal::load_if(&again);
                    prop_assert_eq!(reread.ok().flatten(), Some(j));
                }
                // Not a fleet journal: the envelope's reader refuses it as one.
                Ok(None) => {
                    let read = crate::host::journal::read::<crate::fleet::apply::FleetJournal>(&path);
                    prop_assert!(read.is_err(), "{text}");
                }
                // Refused: the error names the file.
                Err(e) => {
                    let message = e.to_string();
                    prop_assert!(message.contains(&path.display().to_string()), "{message}");
                }
            }
        }
    }

    /// An apply journal, in version 1 (`"pinplan_journal": 1`) and in the
    /// envelope, mutated: read, it is written back and reads again as the
    /// same value in the current version; refused, the typed error names the
    /// file and says what to give instead.
    #[test]
    fn apply_journals_read_back_or_name_the_file(edits in edits()) {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let v1 = seed(APPLY_JOURNAL_V1);
        let journal: crate::libvirt::apply::Journal = crate::host::journal::parse(Path::new("seed.json"), &v1)
            .unwrap_or_else(|e| panic!("{e}"))
            .body;
        for start in [v1, crate::host::journal::to_text(&journal)] {
            read_back_or_refused::<crate::libvirt::apply::Journal>(dir.path(), &mutate(&start, &edits))?;
        }
    }

    /// Every tool's journal cut short anywhere is refused as not JSON,
    /// naming the file: never half read.
    #[test]
    fn a_journal_cut_short_is_refused(cut in any::<usize>()) {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join("cut.json");
        for journal in [APPLY_JOURNAL_V1, FLEET_JOURNAL_V1, ISOLATE_JOURNAL_V1].map(seed) {
            // Anything before the closing brace is unbalanced JSON.
            let end = journal.rfind('}').unwrap_or_default();
            std::fs::write(&path, &journal[..cut % end.max(1)]).unwrap_or_else(|e| panic!("{e}"));
            let errors = [
                crate::host::journal::read::<crate::libvirt::apply::Journal>(&path).err(),
                crate::host::journal::read::<crate::fleet::apply::FleetJournal>(&path).err(),
                crate::host::journal::read::<crate::isolate::journal::Journal>(&path).err(),
            ];
            for e in errors {
                prop_assert!(
                    matches!(&e, Some(crate::host::journal::ReadError::Parse { path: p, .. }) if *p == path),
                    "{e:?}"
                );
            }
        }
    }
}

fn fleet_journal() -> crate::fleet::apply::FleetJournal {
    crate::host::journal::parse(Path::new("seed.json"), &seed(FLEET_JOURNAL_V1))
        .unwrap_or_else(|e| panic!("{e}"))
        .body
}

/// The journals as version 1 of each wrote them.
const APPLY_JOURNAL_V1: &str = "tests/fixtures/journals/apply-v1.json";
const FLEET_JOURNAL_V1: &str = "tests/fixtures/journals/fleet-v1.json";
const ISOLATE_JOURNAL_V1: &str = "tests/fixtures/journals/isolate-v1.json";

/// `text`, read as `T`'s journal from a file: read, it is written back as
/// a new journal and reads again as the same value, in the current version;
/// refused, the typed error names the file and has a hint.
fn read_back_or_refused<T>(dir: &Path, text: &str) -> Result<(), TestCaseError>
where
    T: crate::host::journal::Body
        + serde::Serialize
        + serde::de::DeserializeOwned
        + PartialEq
        + std::fmt::Debug,
{
    use crate::host::journal::{read, write, Write};
    let path = dir.join("j.json");
    std::fs::write(&path, text).unwrap_or_else(|e| panic!("{e}"));
    match read::<T>(&path) {
        Ok(first) => {
            let again = dir.join("again.json");
            let _ = std::fs::remove_file(&again);
            write(&again, &first.body, Write::New).unwrap_or_else(|e| panic!("{e}"));
            let second = read::<T>(&again).map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!((second.tool, second.version), (T::TOOL, T::TOOL.version()));
            prop_assert_eq!(second.body, first.body);
        }
        Err(e) => {
            prop_assert!(e.to_string().contains(&path.display().to_string()), "{e}");
            prop_assert!(crate::error::Diagnostic::hint(&e).is_some(), "{e}");
        }
    }
    Ok(())
}
