//! Domains read as libvirt reads them (issue 31, D1–D3), with libvirt itself
//! as the judge: each reproducer is read (`report`), planned, patched
//! (`xml --patch`, `plan --out` with `domain_xml`), checked against libvirt's
//! schema (`virt-xml-validate`) and then defined through libvirt's test
//! driver (`test:///default`, in memory, one per `virsh` run), whose
//! `dumpxml` is read back. The test driver parses and checks a domain with
//! libvirt's own code: it numbers I/O threads, counts a missing `<vcpu>` as
//! one, and refuses an `<iothreadpin>` naming an I/O thread the domain does
//! not have (shown by [`the_judge_refuses_a_pin_to_a_missing_iothread`]),
//! which is why no live libvirtd is needed here.
//!
//! - D1 `domains/no-vcpu.xml`: no `<vcpu>`; libvirt counts 1 vCPU.
//! - D2 `libvirt-domains/qemu-iothreads-ids-partial.xml`: 4 I/O threads, 5
//!   and 6 named; libvirt has 1, 2, 5, 6.
//! - D3 `domains/iothread-id-8.xml`: one I/O thread, id 8; a plan with one I/O
//!   thread must pin 8.

use crate::util::{
    arg as s, cpuset, describe, fixture, pinplan, pinplan_json, text, validate_domain, TempDir,
};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

/// 4 cores of 2 threads (CPUs 0-7): fewer than the test driver's 16 host
/// CPUs, so every pin names a CPU libvirt's test host has.
const HOST: &str = "synthetic:package:1 core:4 pu:2";

/// `pinplan report --domains DOMAIN` on [`HOST`], as JSON.
fn report_of(domain: &Path) -> Value {
    pinplan_json(&[
        "report",
        "--domains",
        s(domain),
        "--source",
        HOST,
        "--format",
        "json",
    ])
}

/// What libvirt's test driver makes of `path`: its `dumpxml` once defined,
/// or virsh's complaint when libvirt refuses the domain.
pub(crate) fn define(path: &Path, name: &str) -> Result<String, String> {
    let script = format!("define --file '{}'; dumpxml --inactive {name}", s(path));
    let out = Command::new("virsh")
        .args(["-q", "-c", "test:///default", &script])
        .output()
        .map_err(|e| format!("cannot run virsh: {e}"))?;
    if out.status.success() && out.stderr.is_empty() {
        Ok(text(&out.stdout))
    } else {
        Err(format!(
            "virsh -c test:///default {script:?}: {}{}",
            text(&out.stdout),
            text(&out.stderr)
        ))
    }
}

/// The pinning of a domain as libvirt prints it.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Read {
    pub vcpus: u32,
    pub vcpupin: BTreeMap<u32, BTreeSet<u32>>,
    pub iothreadids: BTreeSet<u32>,
    pub iothreadpin: BTreeMap<u32, BTreeSet<u32>>,
}

/// The children of `n` named `name`.
fn child<'a, 'i>(n: roxmltree::Node<'a, 'i>, name: &str) -> Vec<roxmltree::Node<'a, 'i>> {
    n.children().filter(|c| c.has_tag_name(name)).collect()
}

pub(crate) fn read(xml: &str) -> Read {
    let doc = roxmltree::Document::parse(xml).unwrap_or_else(|e| panic!("{e}: {xml}"));
    let root = doc.root_element();
    let number =
        |n: roxmltree::Node<'_, '_>, a: &str| -> u32 { n.attribute(a).unwrap().parse().unwrap() };
    let mut r = Read::default();
    if let Some(v) = child(root, "vcpu").first() {
        r.vcpus = v.text().unwrap().trim().parse().unwrap();
    }
    for ids in child(root, "iothreadids") {
        r.iothreadids = child(ids, "iothread")
            .into_iter()
            .map(|t| number(t, "id"))
            .collect();
    }
    for tune in child(root, "cputune") {
        for p in child(tune, "vcpupin") {
            r.vcpupin
                .insert(number(p, "vcpu"), cpuset(p.attribute("cpuset").unwrap()));
        }
        for p in child(tune, "iothreadpin") {
            r.iothreadpin.insert(
                number(p, "iothread"),
                cpuset(p.attribute("cpuset").unwrap()),
            );
        }
    }
    r
}

/// Plans VM `name` (`vcpus`, `iothreads`, `more` spec lines) on [`HOST`]
/// with one reserved core: plan.json's path and the VM's entry.
fn plan(dir: &TempDir, name: &str, vcpus: u32, iothreads: u32, more: &str) -> (PathBuf, Value) {
    let spec = dir.write(
        &format!("{name}-{vcpus}-{iothreads}.toml"),
        format!(
            "[host]\nreserved_cores = 1\n\n[[vm]]\nname = \"{name}\"\nvcpus = {vcpus}\niothreads = {iothreads}\n{more}"
        ),
    );
    let out = dir.path(&format!("{name}-{vcpus}-{iothreads}"));
    let args = ["plan", s(&spec), "--source", HOST, "--out", s(&out)];
    let run = pinplan(args);
    assert_eq!(run.status.code(), Some(0), "{}", describe(&args, &run));
    let plan = out.join("plan.json");
    let json: Value = serde_json::from_str(&std::fs::read_to_string(&plan).unwrap()).unwrap();
    let vm = json["vms"][0].clone();
    (plan, vm)
}

/// `xml --plan PLAN --patch DOMAIN MORE…`, required to succeed; the output
/// is written to `dir/NAME` and must validate.
fn patched(dir: &TempDir, name: &str, plan: &Path, domain: &Path, more: &[&str]) -> PathBuf {
    let mut args = vec!["xml", "--plan", s(plan), "--patch", s(domain)];
    args.extend_from_slice(more);
    let out = pinplan(&args);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&args, &out));
    let path = dir.write(name, &out.stdout);
    validate_domain(&path).unwrap_or_else(|e| panic!("{e}"));
    path
}

/// The plan's vCPU pins, as libvirt's `<vcpupin>`s read them.
fn planned_vcpupins(vm: &Value) -> BTreeMap<u32, BTreeSet<u32>> {
    vm["vcpus"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| {
            let vcpu = u32::try_from(v["vcpu"].as_u64().unwrap()).unwrap();
            let cpu = u32::try_from(v["cpu"].as_u64().unwrap()).unwrap();
            (vcpu, BTreeSet::from([cpu]))
        })
        .collect()
}

/// The CPUs of the plan's I/O threads, which all share them here (the
/// emulator's, on the reserved core).
fn planned_iothread_cpus(vm: &Value) -> BTreeSet<u32> {
    let io = vm["iothreads"].as_array().unwrap();
    let sets: BTreeSet<BTreeSet<u32>> = io
        .iter()
        .map(|t| cpuset(t["cpus"].as_str().unwrap()))
        .collect();
    assert_eq!(sets.len(), 1, "the I/O threads do not share CPUs: {io:?}");
    sets.into_iter().next().unwrap()
}

/// The judge is a judge: libvirt's test driver refuses what D3 used to
/// write (`iothread='1'` for a domain whose only I/O thread is 8).
#[test]
fn the_judge_refuses_a_pin_to_a_missing_iothread() {
    let tmp = TempDir::new();
    let domain = std::fs::read_to_string(fixture("domains/iothread-id-8.xml")).unwrap();
    let broken = domain.replace(
        "  <os>",
        "  <cputune>\n    <iothreadpin iothread='1' cpuset='0'/>\n  </cputune>\n  <os>",
    );
    let path = tmp.write("broken.xml", broken);
    // The schema does not see it; libvirt does.
    validate_domain(&path).unwrap_or_else(|e| panic!("{e}"));
    let refused = define(&path, "iothread-id-8").err();
    assert!(
        refused
            .as_deref()
            .is_some_and(|e| e.contains("Cannot find 'iothread' : 1")),
        "{refused:?}"
    );
}

#[test]
fn issue_31_d1_a_domain_without_vcpu_has_one() {
    let tmp = TempDir::new();
    let domain = fixture("domains/no-vcpu.xml");
    // libvirt reads one vCPU (its dumpxml writes <vcpu>1</vcpu>), and so
    // does the report: one vCPU, unpinned, so on all 8 CPUs.
    assert_eq!(read(&define(&domain, "no-vcpu").unwrap()).vcpus, 1);
    let report = report_of(&domain);
    let vcpus = report["tenants"][0]["vcpus"].as_array().unwrap();
    assert_eq!(vcpus.len(), 1, "{report}");
    assert_eq!(vcpus[0]["cpus"], "0-7", "{report}");

    // One planned: patched without --set-vcpus; libvirt defines it with
    // one vCPU pinned where the plan says.
    let (one, vm) = plan(&tmp, "no-vcpu", 1, 0, "");
    let path = patched(&tmp, "one.xml", &one, &domain, &[]);
    let got = read(&define(&path, "no-vcpu").unwrap_or_else(|e| panic!("{e}")));
    assert_eq!(got.vcpus, 1);
    assert_eq!(got.vcpupin, planned_vcpupins(&vm));
    // The patcher is lossless: taking the new lines out gives the input.
    let input = std::fs::read_to_string(&domain).unwrap();
    let output = std::fs::read_to_string(&path).unwrap();
    assert_eq!(without_new_lines(&output, &input), input, "{output}");

    // Two planned: the domain's one vCPU is refused without --set-vcpus…
    let (two, vm) = plan(&tmp, "no-vcpu", 2, 0, "");
    let args = ["xml", "--plan", s(&two), "--patch", s(&domain)];
    let out = pinplan(args);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&args, &out));
    assert!(
        text(&out.stderr).contains("the domain has 1 vCPU but the plan gives no-vcpu 2"),
        "{}",
        describe(&args, &out)
    );
    // …and libvirt defines it with two when it is given.
    let path = patched(&tmp, "two.xml", &two, &domain, &["--set-vcpus"]);
    let got = read(&define(&path, "no-vcpu").unwrap_or_else(|e| panic!("{e}")));
    assert_eq!(got.vcpus, 2);
    assert_eq!(got.vcpupin, planned_vcpupins(&vm));
}

/// `output` without the lines that are not in `input` (the patcher's new
/// elements, each on lines of its own here).
fn without_new_lines(output: &str, input: &str) -> String {
    let mut theirs = input.lines().peekable();
    let mut kept = String::new();
    for line in output.lines() {
        if theirs.peek() == Some(&line) {
            theirs.next();
            kept.push_str(line);
            kept.push('\n');
        }
    }
    kept
}

#[test]
fn issue_31_d2_iothreads_are_numbered_as_libvirt_numbers_them() {
    let tmp = TempDir::new();
    let domain = fixture("libvirt-domains/qemu-iothreads-ids-partial.xml");
    // <iothreads>4</iothreads>, ids 5 and 6 named: libvirt fills the count
    // with the lowest free ids, 1 and 2 (its test driver's dumpxml lists
    // them), and the report reads the same four.
    let libvirt = read(&define(&domain, "QEMUGuest1").unwrap()).iothreadids;
    assert_eq!(libvirt, BTreeSet::from([1, 2, 5, 6]));
    let report = report_of(&domain);
    let ids: BTreeSet<u32> = report["tenants"][0]["iothreads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| u32::try_from(t["iothread"].as_u64().unwrap()).unwrap())
        .collect();
    assert_eq!(ids, libvirt, "{report}");

    // Four planned: the pins name the domain's four ids, and libvirt
    // defines the result with those four pinned as planned.
    let (plan, vm) = plan(&tmp, "QEMUGuest1", 2, 4, "");
    let path = patched(&tmp, "partial.xml", &plan, &domain, &[]);
    let got = read(&define(&path, "QEMUGuest1").unwrap_or_else(|e| panic!("{e}")));
    let cpus = planned_iothread_cpus(&vm);
    let want: BTreeMap<u32, BTreeSet<u32>> = [1, 2, 5, 6]
        .into_iter()
        .map(|id| (id, cpus.clone()))
        .collect();
    assert_eq!(got.iothreadpin, want);
    assert_eq!(got.iothreadids, libvirt);
    assert_eq!(got.vcpupin, planned_vcpupins(&vm));
}

#[test]
fn issue_31_d3_the_plan_pins_the_domains_own_iothread() {
    let tmp = TempDir::new();
    let domain = fixture("domains/iothread-id-8.xml");
    let (plan_json, vm) = plan(&tmp, "iothread-id-8", 1, 1, "");
    // The plan numbers its one I/O thread 1; the domain's is 8.
    assert_eq!(vm["iothreads"][0]["iothread"], 1, "{vm}");
    let cpus = planned_iothread_cpus(&vm);
    let want = BTreeMap::from([(8, cpus)]);

    // xml --patch: libvirt defines it, I/O thread 8 pinned as planned.
    let path = patched(
        &tmp,
        "patched.xml",
        &plan_json,
        &domain,
        &["--vm", "iothread-id-8"],
    );
    let got = read(&define(&path, "iothread-id-8").unwrap_or_else(|e| panic!("{e}")));
    assert_eq!(got.iothreadpin, want);
    assert_eq!(got.iothreadids, BTreeSet::from([8]));

    // plan --out with the domain as domain_xml writes the same domain.
    let more = format!("domain_xml = \"{}\"\n", s(&domain));
    let (out_plan, _) = plan(&tmp, "iothread-id-8", 1, 1, &more);
    let written = out_plan.with_file_name("iothread-id-8.xml");
    validate_domain(&written).unwrap_or_else(|e| panic!("{e}"));
    let got = read(&define(&written, "iothread-id-8").unwrap_or_else(|e| panic!("{e}")));
    assert_eq!(got.iothreadpin, want);
}

/// `report --plan` names the domain's own I/O thread as apply pins it: the
/// move of I/O thread 8 from the VM's CPUs, not a new I/O thread 1.
#[test]
fn issue_31_d3_report_plan_moves_the_domains_own_iothread() {
    let tmp = TempDir::new();
    let domain = fixture("domains/iothread-id-8.xml");
    let (plan_json, vm) = plan(&tmp, "iothread-id-8", 1, 1, "");
    let cpus = planned_iothread_cpus(&vm);
    let args = [
        "report",
        "--domains",
        s(&domain),
        "--plan",
        s(&plan_json),
        "--source",
        HOST,
        "--format",
        "json",
    ];
    let report = pinplan_json(&args);
    let io: Vec<&Value> = report["moves"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["thread"] == "iothread")
        .collect();
    assert_eq!(io.len(), 1, "{report}");
    assert_eq!(io[0]["id"], 8, "{report}");
    // Unpinned now: on all 8 CPUs of the host.
    assert_eq!(io[0]["from"], "0-7", "{report}");
    assert_eq!(cpuset(io[0]["to"].as_str().unwrap()), cpus);
}

/// A domain naming more I/O threads than the plan has is refused: libvirt
/// would keep them all, and the ones the plan does not pin would float.
#[test]
fn issue_31_d3_more_named_iothreads_than_planned_are_refused() {
    let tmp = TempDir::new();
    let domain = fixture("libvirt-domains/qemu-iothreads-ids.xml");
    let (plan, _) = plan(&tmp, "QEMUGuest1", 2, 1, "");
    let args = ["xml", "--plan", s(&plan), "--patch", s(&domain)];
    let out = pinplan(args);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&args, &out));
    assert!(
        text(&out.stderr).contains(
            "the domain names 2 I/O threads in <iothreadids> (2, 4) but the plan gives QEMUGuest1 1: \
             plan with iothreads = 2, or remove ids from <iothreadids>"
        ),
        "{}",
        describe(&args, &out)
    );
    assert!(out.stdout.is_empty());
}

/// `xml --plan PLAN --patch DOMAIN --set-vcpus` (and `--vm NAME`): the
/// output written to `dir/FILE` and its stderr (notes), or the refusal.
fn patched_with_notes(
    dir: &TempDir,
    file: &str,
    plan: &Path,
    domain: &Path,
    name: &str,
) -> Result<(PathBuf, String), String> {
    let args = [
        "xml",
        "--plan",
        s(plan),
        "--patch",
        s(domain),
        "--vm",
        name,
        "--set-vcpus",
    ];
    let out = pinplan(args);
    match out.status.code() {
        Some(0) => {
            let path = dir.write(file, &out.stdout);
            validate_domain(&path).unwrap_or_else(|e| panic!("{e}"));
            Ok((path, text(&out.stderr)))
        }
        Some(2) if out.stdout.is_empty() => Err(text(&out.stderr)),
        _ => panic!("{}", describe(&args, &out)),
    }
}

/// The `vcpus` sets of `<cputune>`'s children named `name` in libvirt's
/// dumpxml.
fn tune_sets(xml: &str, name: &str) -> Vec<BTreeSet<u32>> {
    let doc = roxmltree::Document::parse(xml).unwrap();
    let root = doc.root_element();
    child(root, "cputune")
        .into_iter()
        .flat_map(|t| child(t, name))
        .map(|n| cpuset(n.attribute("vcpus").unwrap()))
        .collect()
}

/// Guest cells in libvirt's dumpxml: id → (vCPUs, the other attributes).
fn cells(xml: &str) -> BTreeMap<u32, (BTreeSet<u32>, BTreeMap<String, String>)> {
    let doc = roxmltree::Document::parse(xml).unwrap();
    let root = doc.root_element();
    child(root, "cpu")
        .into_iter()
        .flat_map(|c| child(c, "numa"))
        .flat_map(|n| child(n, "cell"))
        .map(|c| {
            let others = c
                .attributes()
                .filter(|a| !matches!(a.name(), "id" | "cpus" | "memory" | "unit"))
                .map(|a| (a.name().to_owned(), a.value().to_owned()))
                .collect();
            let id = c.attribute("id").unwrap().parse().unwrap();
            (id, (cpuset(c.attribute("cpus").unwrap()), others))
        })
        .collect()
}

/// D4: `--set-vcpus` to fewer (and more) vCPUs rewrites every element that
/// names a vCPU: libvirt defines each result, and its dumpxml names no vCPU
/// the domain does not have. Before the fix libvirt refused all four at
/// the lower count (`vcpu id '3' is out of range`, `Number of CPUs in
/// <numa> exceeds the <vcpu> count`, …).
#[test]
fn issue_31_d4_set_vcpus_keeps_every_vcpu_reference_valid() {
    let tmp = TempDir::new();
    // (fixture, its name, vCPUs planned)
    for (file, name, count) in [
        ("generic-vcpus-individual.xml", "foobar", 3),
        ("generic-vcpus-individual.xml", "foobar", 5),
        ("qemu-cputune.xml", "QEMUGuest1", 2),
        ("generic-memorytune.xml", "QEMUGuest1", 2),
        ("generic-cachetune.xml", "QEMUGuest1", 2),
        ("qemu-hugepages-numa-default.xml", "fedora", 1),
        ("qemu-hugepages-numa-default.xml", "fedora", 3),
    ] {
        let domain = fixture(&format!("libvirt-domains/{file}"));
        let (plan, vm) = plan(&tmp, name, count, 0, "");
        let out = format!("{file}-{count}.xml");
        let (path, notes) = patched_with_notes(&tmp, &out, &plan, &domain, name)
            .unwrap_or_else(|e| panic!("{file} at {count}: {e}"));
        let xml = define(&path, name).unwrap_or_else(|e| panic!("{file} at {count}: {e}"));
        let got = read(&xml);
        assert_eq!(got.vcpus, count, "{file}: {xml}");
        assert_eq!(got.vcpupin, planned_vcpupins(&vm), "{file}");
        let all: BTreeSet<u32> = (0..count).collect();
        for tune in ["vcpusched", "cachetune", "memorytune"] {
            for set in tune_sets(&xml, tune) {
                assert!(set.is_subset(&all), "{file} at {count}: <{tune}> {set:?}");
            }
        }
        let cell_vcpus: BTreeSet<u32> = cells(&xml).values().flat_map(|c| c.0.clone()).collect();
        assert!(cell_vcpus.is_subset(&all), "{file} at {count}: {xml}");
        // Every change beyond the pins is said.
        assert!(
            notes.lines().all(|l| l.starts_with("note: ")),
            "{file}: {notes}"
        );
        match (file, count) {
            ("generic-vcpus-individual.xml", 3) => {
                assert!(
                    notes.contains("<vcpus> (line 7): the entries of vCPUs 3 and up removed"),
                    "{notes}"
                );
                // vCPUs 1 and 3 were online; 3 goes: one online, in the
                // patched file as in libvirt's reading of it.
                let written = std::fs::read_to_string(&path).unwrap();
                assert!(written.contains("current='1'>3</vcpu>"), "{written}");
                assert!(xml.contains("current='1'>3</vcpu>"), "{xml}");
            }
            ("generic-vcpus-individual.xml", 5) => {
                // The new vCPU is online: libvirt's current count is 3 (the
                // two enabled before and vCPU 4).
                assert!(
                    xml.contains("<vcpu id='4' enabled='yes' hotpluggable='no'/>"),
                    "{xml}"
                );
                assert!(xml.contains("current='3'>5</vcpu>"), "{xml}");
                let written = std::fs::read_to_string(&path).unwrap();
                assert!(written.contains("current='3'>5</vcpu>"), "{written}");
            }
            ("qemu-cputune.xml", 2) => {
                assert_eq!(tune_sets(&xml, "vcpusched").len(), 2, "{xml}");
                assert!(
                    notes.contains("<vcpusched vcpus='2-3'> (line 19) removed"),
                    "{notes}"
                );
            }
            ("generic-memorytune.xml", 2) => {
                // vcpus 3 and 2 go; 0-1 stay with both monitors.
                assert_eq!(
                    tune_sets(&xml, "memorytune"),
                    vec![BTreeSet::from([0, 1])],
                    "{xml}"
                );
                assert_eq!(xml.matches("<monitor").count(), 2, "{xml}");
            }
            ("generic-cachetune.xml", 2) => {
                assert_eq!(
                    tune_sets(&xml, "cachetune"),
                    vec![BTreeSet::from([0, 1])],
                    "{xml}"
                );
            }
            ("qemu-hugepages-numa-default.xml", 1) => {
                assert_eq!(cells(&xml)[&0].0, BTreeSet::from([0]), "{xml}");
                assert!(
                    notes.contains("guest NUMA cell 0 (line 16): vCPUs 0-1 become 0"),
                    "{notes}"
                );
            }
            ("qemu-hugepages-numa-default.xml", 3) => {
                assert_eq!(cells(&xml)[&0].0, BTreeSet::from([0, 1, 2]), "{xml}");
            }
            _ => unreachable!(),
        }
    }
    // One vCPU of a domain whose vCPU 0 is offline: none would be online.
    let domain = fixture("libvirt-domains/generic-vcpus-individual.xml");
    let (plan1, _) = plan(&tmp, "foobar", 1, 0, "");
    let refused = patched_with_notes(&tmp, "offline.xml", &plan1, &domain, "foobar").err();
    assert!(
        refused.as_deref().is_some_and(|e| e.contains(
            "generic-vcpus-individual.xml:7: <vcpus> has none of the vCPUs that a plan of 1 vCPU keeps (0) enabled: no vCPU would be online"
        )),
        "{refused:?}"
    );
    // A cell that would be left without a vCPU is refused, with the fix.
    let domain = fixture("libvirt-domains/qemu-hugepages-numa-default-2M.xml");
    let (plan, _) = plan(&tmp, "fedora", 1, 0, "");
    let refused = patched_with_notes(&tmp, "none.xml", &plan, &domain, "fedora").err();
    assert!(
        refused.as_deref().is_some_and(|e| e.contains(
            "qemu-hugepages-numa-default-2M.xml:20: guest NUMA cell 1 holds only vCPUs 1, which a plan of 1 vCPU removes: \
             the cell would have none; plan at least 2 vCPUs, or remove the cell from <cpu><numa>"
        )),
        "{refused:?}"
    );
}

/// A host of three nodes of one core of two threads: with one core
/// reserved, a VM of 4 vCPUs spreads over two nodes (two guest cells).
const THREE_NODES: &str = "synthetic:package:3 numa:1 core:1 pu:2";

/// D5: the plan's two guest cells replace the domain's four. A memory DIMM
/// on a cell that stays is kept, and one on a cell that goes is refused
/// with the reason; cells' `memAccess` carries over when all had the same,
/// and differing ones are refused (no planned cell to put them on).
#[test]
fn issue_31_d5_guest_cell_changes_keep_devices_and_cell_settings_valid() {
    let tmp = TempDir::new();
    let original =
        std::fs::read_to_string(fixture("libvirt-domains/qemu-hugepages-memaccess.xml")).unwrap();
    let spec = |name: &str| {
        let path = tmp.write(
            &format!("{name}.toml"),
            // Memory in the spec: the plan writes the pages of its cells.
            "[host]\nreserved_cores = 1\n\n[[vm]]\nname = \"QEMUGuest1\"\nvcpus = 4\nnuma = \"spread\"\nmemory = \"4GiB\"\nhugepages = \"2M\"\n",
        );
        let out = tmp.path(name);
        let args = ["plan", s(&path), "--source", THREE_NODES, "--out", s(&out)];
        let run = pinplan(args);
        assert_eq!(run.status.code(), Some(0), "{}", describe(&args, &run));
        out.join("plan.json")
    };
    let plan = spec("spread");
    let json: Value = serde_json::from_str(&std::fs::read_to_string(&plan).unwrap()).unwrap();
    assert_eq!(
        json["vms"][0]["guest_cells"].as_array().unwrap().len(),
        2,
        "{json}"
    );
    // As libvirt ships it: cell 1 shared, cell 2 private.
    let domain = tmp.write("memaccess.xml", &original);
    let refused = patched_with_notes(&tmp, "a.xml", &plan, &domain, "QEMUGuest1").err();
    assert!(
        refused.as_deref().is_some_and(|e| e.contains(
            "memaccess.xml:27: the domain's guest NUMA cells differ in memAccess, and the plan gives QEMUGuest1 2 guest NUMA cells where the domain has 4"
        )),
        "{refused:?}"
    );
    // Every cell shared (as vhost-user needs), the DIMM on cell 1: kept.
    let shared = original
        .replace(" memAccess='private'", " memAccess='shared'")
        .replace(
            "unit='KiB'/>\n      <cell id='2'",
            "unit='KiB' memAccess='shared'/>\n      <cell id='2'",
        )
        .replace(
            "<cell id='0' cpus='0' memory='1048576' unit='KiB'/>",
            "<cell id='0' cpus='0' memory='1048576' unit='KiB' memAccess='shared'/>",
        )
        .replace(
            "<cell id='3' cpus='3' memory='1048576' unit='KiB'/>",
            "<cell id='3' cpus='3' memory='1048576' unit='KiB' memAccess='shared'/>",
        );
    assert_eq!(shared.matches("memAccess='shared'").count(), 4, "{shared}");
    let domain = tmp.write("shared.xml", &shared);
    // libvirt takes the input as it is.
    define(&domain, "QEMUGuest1").unwrap_or_else(|e| panic!("{e}"));
    let (path, _) = patched_with_notes(&tmp, "b.xml", &plan, &domain, "QEMUGuest1")
        .unwrap_or_else(|e| panic!("{e}"));
    let xml = define(&path, "QEMUGuest1").unwrap_or_else(|e| panic!("{e}"));
    let got = cells(&xml);
    assert_eq!(got.len(), 2, "{xml}");
    for (_, others) in got.values() {
        assert_eq!(
            others.get("memAccess").map(String::as_str),
            Some("shared"),
            "{xml}"
        );
    }
    assert!(xml.contains("<node>1</node>"), "{xml}");
    // Huge pages per cell (as pinplan writes them), cells 0-3 of 2 MiB: the
    // plan's two cells get theirs, and no page names a cell that went.
    let per_cell = shared.replace(
        "<page size='2048' unit='KiB' nodeset='1'/>\n      <page size='1048576' unit='KiB' nodeset='0,2-3'/>",
        "<page size='2048' unit='KiB' nodeset='0'/>\n      <page size='2048' unit='KiB' nodeset='1'/>\n      \
         <page size='2048' unit='KiB' nodeset='2'/>\n      <page size='2048' unit='KiB' nodeset='3'/>",
    );
    assert_eq!(
        per_cell.matches("<page size='2048'").count(),
        4,
        "{per_cell}"
    );
    let domain = tmp.write("per-cell.xml", &per_cell);
    define(&domain, "QEMUGuest1").unwrap_or_else(|e| panic!("{e}"));
    let (path, _) = patched_with_notes(&tmp, "d.xml", &plan, &domain, "QEMUGuest1")
        .unwrap_or_else(|e| panic!("{e}"));
    let xml = define(&path, "QEMUGuest1").unwrap_or_else(|e| panic!("{e}"));
    let doc = roxmltree::Document::parse(&xml).unwrap();
    let page_cells: BTreeSet<u32> = doc
        .descendants()
        .filter(|n| n.has_tag_name("page"))
        .flat_map(|p| cpuset(p.attribute("nodeset").unwrap_or("")))
        .collect();
    assert_eq!(page_cells, BTreeSet::from([0, 1]), "{xml}");
    // The DIMM on cell 3, which the plan drops: refused, naming it.
    let far = tmp.write(
        "far.xml",
        shared.replace("<node>1</node>", "<node>3</node>"),
    );
    define(&far, "QEMUGuest1").unwrap_or_else(|e| panic!("{e}"));
    let refused = patched_with_notes(&tmp, "c.xml", &plan, &far, "QEMUGuest1").err();
    assert!(
        refused.as_deref().is_some_and(|e| e.contains(
            "a memory device (<memory> at line 57) targets guest NUMA cell 3, but the plan gives QEMUGuest1 2 guest NUMA cells (0, 1)"
        )),
        "{refused:?}"
    );
}

/// D6: a domain whose cells are on different page sizes (2 MiB for cell 1,
/// 1 GiB for 0, 2-3) is not collapsed onto one size unsaid: without
/// `hugepages` in the spec the plan is refused with the choice to make; with
/// it, the plan warns and the patch says what changes; a domain already on
/// the planned size keeps its `<hugepages>` byte for byte.
#[test]
fn issue_31_d6_huge_pages_are_kept_per_cell_or_the_change_is_said() {
    let tmp = TempDir::new();
    let domain = fixture("libvirt-domains/qemu-hugepages-numa-nodeset.xml");
    let spec = |file: &str, more: &str| {
        tmp.write(
            file,
            format!(
                "[host]\nreserved_cores = 1\n\n[[vm]]\nname = \"QEMUGuest1\"\nvcpus = 4\ndomain_xml = \"{}\"\n{more}",
                s(&domain)
            ),
        )
    };
    let unsaid = spec("unsaid.toml", "");
    let out = tmp.path("unsaid");
    let args = ["plan", s(&unsaid), "--source", HOST, "--out", s(&out)];
    let run = pinplan(args);
    assert_eq!(run.status.code(), Some(2), "{}", describe(&args, &run));
    assert!(
        text(&run.stderr).contains(
            "unsaid.toml:4: QEMUGuest1: its domain_xml has 2 MiB pages for cell 1, 1 GiB pages for cells 0,2-3; \
             pinplan plans one page size per VM: set hugepages (e.g. hugepages = \"1G\") for QEMUGuest1 in the spec"
        ),
        "{}",
        describe(&args, &run)
    );
    assert!(!out.exists());

    let chosen = spec("chosen.toml", "hugepages = \"1G\"\n");
    let out = tmp.path("chosen");
    let args = ["plan", s(&chosen), "--source", HOST, "--out", s(&out)];
    let run = pinplan(args);
    assert_eq!(run.status.code(), Some(0), "{}", describe(&args, &run));
    let err = format!("{}{}", text(&run.stdout), text(&run.stderr));
    assert!(
        err.contains("warning: QEMUGuest1: the spec's hugepages (1 GiB pages) differ from its domain_xml's (2 MiB pages for cell 1, 1 GiB pages for cells 0,2-3)"),
        "{err}"
    );
    assert!(
        err.contains("QEMUGuest1.xml: huge pages: the domain's 2 MiB pages for cell 1, 1 GiB pages for cells 0,2-3 become 1 GiB pages for cells 0-3, as planned"),
        "{err}"
    );
    let written = out.join("QEMUGuest1.xml");
    validate_domain(&written).unwrap_or_else(|e| panic!("{e}"));
    let xml = define(&written, "QEMUGuest1").unwrap_or_else(|e| panic!("{e}"));
    let doc = roxmltree::Document::parse(&xml).unwrap();
    let sizes: BTreeSet<&str> = doc
        .descendants()
        .filter(|n| n.has_tag_name("page"))
        .map(|p| p.attribute("size").unwrap())
        .collect();
    assert_eq!(sizes, BTreeSet::from(["1048576"]), "{xml}");

    // One size, as planned: <hugepages> is the input's, byte for byte.
    let two_mib = fixture("libvirt-domains/qemu-hugepages-numa-default-2M.xml");
    let spec = tmp.write(
        "two.toml",
        format!(
            "[host]\nreserved_cores = 1\n\n[[vm]]\nname = \"fedora\"\nvcpus = 2\ndomain_xml = \"{}\"\n",
            s(&two_mib)
        ),
    );
    let out = tmp.path("two");
    let args = ["plan", s(&spec), "--source", HOST, "--out", s(&out)];
    let run = pinplan(args);
    assert_eq!(run.status.code(), Some(0), "{}", describe(&args, &run));
    assert!(
        !text(&run.stderr).contains("huge pages:"),
        "{}",
        describe(&args, &run)
    );
    let input = std::fs::read_to_string(&two_mib).unwrap();
    let output = std::fs::read_to_string(out.join("fedora.xml")).unwrap();
    let block = |x: &str| {
        x[x.find("<memoryBacking>").unwrap()..x.find("</memoryBacking>").unwrap()].to_owned()
    };
    assert_eq!(block(&output), block(&input));
}

/// What `apply` writes to a config with the plan's memory
/// (`Domain::patch_memory`) names guest cells in `<memnode>`: a domain
/// without cells gets the plan's cells too, or libvirt refuses it (`Argument
/// 'cellid' in memnode element must correspond to existing guest's NUMA
/// cell`, as it did before).
#[test]
fn issue_31_apply_memory_writes_the_cells_its_memnodes_name() {
    let tmp = TempDir::new();
    let name = "QEMUGuest1";
    let spec = tmp.write(
        "cells.toml",
        format!("[host]\nreserved_cores = 1\n\n[[vm]]\nname = \"{name}\"\nvcpus = 4\nnuma = \"spread\"\nmemory = \"1GiB\"\n"),
    );
    let out = tmp.path("cells");
    let args = ["plan", s(&spec), "--source", THREE_NODES, "--out", s(&out)];
    let run = pinplan(args);
    assert_eq!(run.status.code(), Some(0), "{}", describe(&args, &run));
    let plan = pinplan::plan::Plan::load(&out.join("plan.json")).unwrap();
    let vm = &plan.vms[0];
    assert_eq!(vm.guest_cells.len(), 2);
    // A domain of 4 vCPUs without guest cells.
    let input = std::fs::read_to_string(fixture("libvirt-domains/qemu-cputune.xml")).unwrap();
    assert!(!input.contains("<numa>") && input.contains(">4</vcpu>"));
    let domain = pinplan::libvirt::patch::Domain::read("qemu-cputune.xml", &input).unwrap();
    let patched = domain.patch_memory(vm).unwrap();
    let path = tmp.write("memory.xml", &patched.text);
    validate_domain(&path).unwrap_or_else(|e| panic!("{e}"));
    let xml = define(&path, name).unwrap_or_else(|e| panic!("{e}\n{}", patched.text));
    let got = cells(&xml);
    let want: BTreeMap<u32, BTreeSet<u32>> = vm
        .guest_cells
        .iter()
        .map(|c| (c.id, c.vcpus.iter().map(|v| v.0).collect()))
        .collect();
    assert_eq!(
        got.into_iter()
            .map(|(id, (v, _))| (id, v))
            .collect::<BTreeMap<_, _>>(),
        want,
        "{xml}"
    );
    assert_eq!(xml.matches("<memnode ").count(), 2, "{xml}");
}
