//! `pinplan report --domains` on a real machine's topology with siblings N
//! and N+28 (x86-Intel-Broadwell-2xXeon-E5-2650Lv4.xml): sibling sharing is
//! found by core, not by CPU-number adjacency.

use crate::util::{self, arg, stdout_json as json, text, TempDir};
use serde_json::Value;
use std::process::{Command, Output};

const HOST: &str = "tests/fixtures/hwloc-xml/x86-Intel-Broadwell-2xXeon-E5-2650Lv4.xml";

/// Writes domain `name` into `dir`: its vCPUs pinned one each to `pins`, the
/// emulator to `emulator`. Returns its path.
fn domain(dir: &TempDir, name: &str, pins: &[u32], emulator: &str) -> String {
    let mut cputune = String::new();
    for (i, cpu) in pins.iter().enumerate() {
        cputune.push_str(&format!("    <vcpupin vcpu='{i}' cpuset='{cpu}'/>\n"));
    }
    let text = format!(
        "<domain type='kvm'>\n  <name>{name}</name>\n  <vcpu placement='static'>{}</vcpu>\n  <cputune>\n{cputune}    <emulatorpin cpuset='{emulator}'/>\n  </cputune>\n</domain>\n",
        pins.len()
    );
    arg(&dir.write(&format!("{name}.xml"), text)).to_owned()
}

fn report(args: &[&str]) -> Output {
    util::pinplan(["report"].iter().chain(args))
}

/// The first conflict of `kind` in a JSON report.
fn conflict(report: &Value, kind: &str) -> Value {
    report["conflicts"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["kind"] == kind))
        .cloned()
        .unwrap_or_else(|| panic!("no {kind} conflict: {report}"))
}

/// `report` of domains `a` and `b` on the Broadwell host, whose CPUs 0 and
/// 28 (core 0) are the host's.
fn report_two(a: &str, b: &str, extra: &[&str]) -> Output {
    let mut args = vec!["--domains", a, b, "--source", HOST, "--host-cpus", "0,28"];
    args.extend_from_slice(extra);
    report(&args)
}

#[test]
fn siblings_n_and_n_plus_28_are_one_core() {
    let dir = TempDir::new();
    // CPU 1's sibling is 29 (cores pair N and N+28), CPU 2's is 30.
    let a = domain(&dir, "vm1", &[1, 2], "0");
    let b = domain(&dir, "vm2", &[29, 30], "0");
    let out = report_two(&a, &b, &["--format", "json"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let v = json(&out);
    let conflicts = v["conflicts"].as_array().cloned().unwrap_or_default();
    assert_eq!(conflicts.len(), 1, "{conflicts:?}");
    assert_eq!(conflicts[0]["kind"], "core-shared");
    assert_eq!(conflicts[0]["severity"], "error");
    assert_eq!(conflicts[0]["cpus"], "1-2,29-30");
    assert_eq!(conflicts[0]["tenants"], serde_json::json!(["vm1", "vm2"]));

    // Adjacent CPU numbers (1 and 2) are different cores: no conflict.
    let a = domain(&dir, "vm1", &[1], "0");
    let b = domain(&dir, "vm2", &[2], "0");
    let out = report_two(&a, &b, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stdout));
}

#[test]
fn same_cpu_and_host_overlap_are_errors() {
    let dir = TempDir::new();
    let a = domain(&dir, "vm1", &[3, 4], "0");
    let b = domain(&dir, "vm2", &[4, 28], "0");
    let out = report_two(&a, &b, &["--format", "json"]);
    assert_eq!(out.status.code(), Some(1));
    let kinds: Vec<String> = json(&out)["conflicts"]
        .as_array()
        .map(|c| {
            c.iter()
                .map(|c| format!("{} {}", c["kind"], c["cpus"]))
                .collect()
        })
        .unwrap_or_default();
    assert!(
        kinds.contains(&"\"cpu-shared\" \"4\"".to_owned()),
        "{kinds:?}"
    );
    assert!(
        kinds.contains(&"\"host-overlap\" \"28\"".to_owned()),
        "{kinds:?}"
    );
}

#[test]
fn bad_input_is_exit_2() {
    let dir = TempDir::new();
    let bad = dir.write(
        "bad.xml",
        "<domain><name>x</name>\n<vcpu>two</vcpu></domain>",
    );
    let bad = arg(&bad);
    for (snapshot, args) in [
        ("bad-vcpu-count", vec!["--domains", bad, "--source", HOST]),
        (
            "missing-domain",
            vec!["--domains", "/nonexistent.xml", "--source", HOST],
        ),
        (
            "reversed-host-cpus",
            vec!["--domains", bad, "--source", HOST, "--host-cpus", "3-1"],
        ),
    ] {
        let out = report(&args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.starts_with("error: "), "{stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
        assert!(out.stdout.is_empty());
        insta::assert_snapshot!(snapshot, util::redact(&stderr));
    }
}

#[test]
fn live_guests_pinned_to_one_cpu_conflict_until_repinned() {
    let Some(uri) = util::libvirt_uri("no live guests") else {
        return;
    };
    let _turn = crate::util::live_guests_turn();
    let dir = TempDir::new();
    let pid = std::process::id();
    let guests = util::Guests {
        uri: uri.clone(),
        names: vec![
            format!("pinplan-report-a-{pid}"),
            format!("pinplan-report-b-{pid}"),
        ],
    };
    for name in &guests.names {
        // Tiny diskless TCG guests, both pinned on purpose to CPU 0.
        let cputune = "  <cputune>\n    <vcpupin vcpu='0' cpuset='0'/>\n    <emulatorpin cpuset='0'/>\n  </cputune>\n";
        let path = dir.write(
            &format!("{name}.xml"),
            util::guest_xml("qemu", name, 1, cputune),
        );
        util::virsh(&uri, &["define", arg(&path)]);
        util::virsh(&uri, &["start", name]);
    }
    let (a, b) = (&guests.names[0], &guests.names[1]);
    let out = report(&["--connect", &uri, "--format", "json"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let v = json(&out);
    let shared = conflict(&v, "cpu-shared");
    assert_eq!(shared["tenants"], serde_json::json!([a, b]));
    assert_eq!(shared["cpus"], "0");

    // Re-pin b live (vCPU and emulator) onto another CPU: no more errors.
    let other = if std::thread::available_parallelism().map_or(1, usize::from) > 1 {
        "1"
    } else {
        "0"
    };
    if other == "1" {
        util::virsh(&uri, &["vcpupin", b, "0", "1", "--live"]);
        util::virsh(&uri, &["emulatorpin", b, "1", "--live"]);
        let out = report(&["--connect", &uri, "--format", "json"]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stdout)
        );
    }
}

const LAB_HOST: &str = "examples/lab/b1-host.xml";
const LAB_NOW: [&str; 2] = ["examples/lab/now/vm1.xml", "examples/lab/now/vm2.xml"];

/// Plans the lab example into `dir` and returns the plan.json path.
fn lab_plan(dir: &TempDir) -> String {
    util::pinplan_ok(&["plan", "examples/lab/b1.toml", "--out", arg(dir.root())]);
    arg(&dir.path("plan.json")).to_owned()
}

/// The lab as it was pinned by hand (examples/lab/now/) against pinplan's
/// plan. The snapshots were checked by hand against b1's cores (core c =
/// CPUs c and c+10): vm1 on 0-13 takes the host's core 0 (CPUs 0,10) and
/// shares CPUs 12-13 with vm2; vm2's 14-15 are the siblings of vm1's 4-5, so
/// cores 2-5 are shared; unpinned vm1 emulator threads float over 0-19; the
/// plan moves vm1 to cores 1-7 and vm2 to cores 8-9 (pinplan plan's own
/// figures) and so removes all six conflicts.
#[test]
fn lab_snapshots_text_and_json() {
    let dir = TempDir::new();
    let plan = lab_plan(&dir);
    let args = [
        "--domains",
        LAB_NOW[0],
        LAB_NOW[1],
        "--source",
        LAB_HOST,
        "--plan",
        &plan,
    ];
    // Exit 0: the plan removes every error (issue 15, item 4: with --plan
    // the errors after the plan count; here six now, none after).
    let text = report(&args);
    assert_eq!(text.status.code(), Some(0));
    insta::assert_snapshot!("report-lab.txt", String::from_utf8_lossy(&text.stdout));
    let mut json_args = args.to_vec();
    json_args.extend(["--format", "json"]);
    let out = report(&json_args);
    assert_eq!(out.status.code(), Some(0));
    insta::assert_snapshot!("report-lab.json", String::from_utf8_lossy(&out.stdout));
    // The JSON contract's fields, independent of the snapshot.
    let v = json(&out);
    let shared = conflict(&v, "core-shared");
    assert_eq!(shared["severity"], "error");
    assert_eq!(shared["tenants"], serde_json::json!(["vm1", "vm2"]));
    assert_eq!(shared["cpus"], "2-5,12-15");
    assert_eq!(v["plan"]["resolved"].as_array().map(Vec::len), Some(6));
    assert_eq!(v["plan"]["introduced"].as_array().map(Vec::len), Some(0));
    // Same input, same bytes.
    assert_eq!(report(&json_args).stdout, out.stdout);
}

#[test]
fn plan_moves_name_new_vms_and_bad_plans_are_exit_2() {
    let dir = TempDir::new();
    let plan = lab_plan(&dir);
    // Only vm2 is defined now: vm1's threads come from nowhere.
    let out = report(&[
        "--domains",
        LAB_NOW[1],
        "--source",
        LAB_HOST,
        "--plan",
        &plan,
        "--format",
        "json",
    ]);
    let v = json(&out);
    let moves = v["moves"].as_array().cloned().unwrap_or_default();
    let vm1: Vec<_> = moves.iter().filter(|m| m["vm"] == "vm1").collect();
    assert_eq!(vm1.len(), 15, "14 vCPUs and the emulator: {moves:?}");
    assert!(vm1.iter().all(|m| m["from"].is_null()), "{vm1:?}");
    let vm2_vcpu0 = moves
        .iter()
        .find(|m| m["vm"] == "vm2" && m["thread"] == "vcpu" && m["id"] == 0)
        .unwrap_or_else(|| panic!("{moves:?}"));
    assert_eq!(vm2_vcpu0["from"], "12");
    assert_eq!(vm2_vcpu0["to"], "8");

    let bad = dir.write("bad-plan.json", "{\"status\": \"optimal\"}");
    let out = report(&[
        "--domains",
        LAB_NOW[1],
        "--source",
        LAB_HOST,
        "--plan",
        arg(&bad),
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("bad-plan.json"), "{stderr}");
    insta::assert_snapshot!("bad-plan", util::redact(&stderr));

    // The same domain twice is refused, not counted as two tenants.
    let out = report(&["--domains", LAB_NOW[1], LAB_NOW[1], "--source", LAB_HOST]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("already given"), "{stderr}");
    insta::assert_snapshot!("domain-twice", util::redact(&stderr));
}

#[test]
fn nic_remote_uses_the_nics_node_or_its_slots() {
    // Real topology with eth0 at 0000:81:00.0 on node 1 (CPUs 8-15,24-31).
    const HOST2: &str = "tests/fixtures/hwloc-xml/32em64t-2n8c2t-pci-wholeio.xml";
    let dir = TempDir::new();
    let with_nic = |name: &str, cpu: u32, nic_function: u32| {
        let text = format!(
            "<domain type='kvm'><name>{name}</name><vcpu>1</vcpu><cputune><vcpupin vcpu='0' cpuset='{cpu}'/><emulatorpin cpuset='16'/></cputune><devices><hostdev mode='subsystem' type='pci'><source><address domain='0x0000' bus='0x81' slot='0x00' function='{nic_function:#x}'/></source></hostdev></devices></domain>"
        );
        arg(&dir.write(&format!("{name}.xml"), text)).to_owned()
    };
    let remote = with_nic("remote", 1, 0);
    let local = with_nic("local", 9, 0);
    // Function 3 is not in the topology (a VF): its slot's node counts.
    let vf_remote = with_nic("vfremote", 2, 3);
    let out = report(&[
        "--domains",
        &remote,
        &local,
        &vf_remote,
        "--source",
        HOST2,
        "--format",
        "json",
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "warnings only: {}",
        text(&out.stdout)
    );
    let v = json(&out);
    let found: Vec<(String, String)> = v["conflicts"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .filter(|c| c["kind"] == "nic-remote")
        .map(|c| {
            assert_eq!(c["severity"], "warning");
            (
                c["tenants"][0].as_str().unwrap_or("").to_owned(),
                c["cpus"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect();
    assert_eq!(
        found,
        [
            ("remote".to_owned(), "1".to_owned()),
            ("vfremote".to_owned(), "2".to_owned())
        ]
    );
}

#[test]
fn colour_only_on_a_terminal_without_no_color() {
    let args = ["--domains", LAB_NOW[0], LAB_NOW[1], "--source", LAB_HOST];
    // Piped: plain.
    let piped = report(&args);
    assert!(!piped.stdout.contains(&0x1b), "escape codes in a pipe");
    let mut forced = args.to_vec();
    forced.extend(["--color", "always"]);
    let coloured = String::from_utf8_lossy(&report(&forced).stdout).into_owned();
    // CPU 12 is shared by vm1 and vm2: white on red.
    assert!(
        coloured.contains("12:\x1b[1;97;41mvm1/12+vm2/0!\x1b[0m"),
        "{coloured}"
    );
    // On a real terminal (script(1) gives one), colour unless NO_COLOR.
    let on_tty = |no_color: Option<&str>| {
        let bin = env!("CARGO_BIN_EXE_pinplan");
        let mut cmd = Command::new("script");
        cmd.args([
            "-qec",
            &format!("{bin} report {}", args.join(" ")),
            "/dev/null",
        ])
        .current_dir(util::repo())
        .env_remove("NO_COLOR");
        if let Some(v) = no_color {
            cmd.env("NO_COLOR", v);
        }
        let out = cmd.output().expect("cannot run script");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    assert!(on_tty(None).contains("\x1b[1;97;41m"), "{}", on_tty(None));
    assert!(!on_tty(Some("1")).contains('\x1b'), "{}", on_tty(Some("1")));
}

/// The SVG picture of the lab: well-formed, one cell per CPU with the
/// conflicted ones outlined, rendered to PNG by librsvg without error, and
/// the same as the picture in docs/report.md (docs/report-lab.svg).
#[test]
fn svg_is_well_formed_renders_to_png_and_matches_the_docs() {
    let out = report(&[
        "--domains",
        LAB_NOW[0],
        LAB_NOW[1],
        "--source",
        LAB_HOST,
        "--host-cpus",
        "0,10",
        "--format",
        "svg",
    ]);
    assert_eq!(out.status.code(), Some(1), "errors in the lab: exit 1");
    let svg = String::from_utf8_lossy(&out.stdout).into_owned();
    let doc = roxmltree::Document::parse(&svg).expect("the SVG is XML");
    assert_eq!(doc.root_element().tag_name().name(), "svg");
    let cells: Vec<_> = doc
        .descendants()
        .filter_map(|n| n.attribute("id"))
        .filter(|id| id.starts_with("cpu-"))
        .collect();
    assert_eq!(cells.len(), 20, "b1 has 20 CPUs: {cells:?}");
    // CPU 12 (vm1 and vm2) is in an error conflict, CPU 16 (free) is not.
    let class_of = |id: &str| {
        doc.descendants()
            .find(|n| n.attribute("id") == Some(id))
            .and_then(|n| n.attribute("class"))
            .unwrap_or("")
            .to_owned()
    };
    assert!(
        class_of("cpu-12").contains("conflict-error"),
        "{}",
        class_of("cpu-12")
    );
    assert!(
        !class_of("cpu-16").contains("conflict"),
        "{}",
        class_of("cpu-16")
    );

    let dir = TempDir::new();
    let svg_path = dir.write("lab.svg", &svg);
    let png_path = dir.path("lab.png");
    let render = Command::new("rsvg-convert")
        .arg("-o")
        .arg(&png_path)
        .arg(&svg_path)
        .output()
        .expect("cannot run rsvg-convert (apt install librsvg2-bin)");
    assert!(
        render.status.success() && render.stderr.is_empty(),
        "rsvg-convert: {}",
        String::from_utf8_lossy(&render.stderr)
    );
    let png = std::fs::read(&png_path).unwrap();
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    // IHDR: width and height, big-endian, after the 8-byte signature and 8-byte chunk header.
    let width = u32::from_be_bytes([png[16], png[17], png[18], png[19]]);
    let height = u32::from_be_bytes([png[20], png[21], png[22], png[23]]);
    assert!(width >= 400 && height >= 200, "{width}x{height}");

    // The docs show this very picture: same bytes.
    let docs = util::repo().join("docs/report-lab.svg");
    assert!(
        std::fs::read_to_string(&docs).unwrap() == svg,
        "{} is not the current picture: pinplan report --domains {} {} --source {LAB_HOST} \
         --host-cpus 0,10 --format svg > docs/report-lab.svg (and check it)",
        docs.display(),
        LAB_NOW[0],
        LAB_NOW[1],
    );
}

/// Issue 14, defect 11: `--host-cpus` naming CPUs the host does not have was
/// accepted (and host-overlap could then never be found).
#[test]
fn host_cpus_the_host_does_not_have_are_refused() {
    let args = [
        "report",
        "--domains",
        "examples/lab/now/vm1.xml",
        "--source",
        "examples/lab/b1-host.xml",
        "--host-cpus",
        "0,999",
    ];
    let out = util::pinplan(args);
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        util::describe(&args, &out)
    );
    let stderr = util::text(&out.stderr);
    assert!(
        stderr.contains("--host-cpus names CPUs 999 that"),
        "{stderr}"
    );
}

/// Issue 14, defect 11: `--source ''` said "cannot read " and no name.
#[test]
fn an_empty_source_is_named() {
    let out = util::pinplan(["topology", "--source", ""]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = util::text(&out.stderr);
    assert!(stderr.contains("an empty topology source"), "{stderr}");
}

/// A 3-CPU host without SMT, as a topology source and a plan spec's.
const THREE: &str = "synthetic:package:1 core:3 pu:1";

/// Issue 27: a running VM that can run on a CPU another tenant holds is an
/// error (exit 1) — a floating VM beside a pinned one, a VM floating over
/// the host's CPUs when they are known — one finding per floating VM naming
/// whom it floats over; two floating VMs with nothing pinned stay a
/// warning. The host map draws a floating VM on every CPU it may run on
/// (`b~`), never as free.
#[test]
fn a_floating_vm_beside_pinned_ones_is_an_error_issue_27() {
    let dir = TempDir::new();
    // a: vCPU on 1, emulator on the host's CPU 0. b, c: no pin at all.
    let a = domain(&dir, "a", &[1], "0");
    let floating = |name: &str| {
        let text = format!(
            "<domain type='kvm'>\n  <name>{name}</name>\n  <vcpu placement='static'>1</vcpu>\n</domain>\n"
        );
        arg(&dir.write(&format!("{name}.xml"), text)).to_owned()
    };
    let (b, c) = (floating("b"), floating("c"));
    let fix = "pin it (pinplan plan --connect, then apply) or stop it";
    for (case, domains, host_cpus, status, expected) in [
        (
            "beside a pinned VM and the host",
            vec![&a, &b],
            Some("0"),
            1,
            vec![(
                "error",
                vec!["b", "a", "host"],
                "0-1".to_owned(),
                format!("b is not pinned: it can run on CPUs 0-1, which a (cpus 1) and the host (cpus 0) own; {fix}"),
            )],
        ),
        (
            "beside a pinned VM, the host's CPUs unknown",
            vec![&a, &b],
            None,
            1,
            vec![(
                "error",
                vec!["b", "a"],
                "1".to_owned(),
                format!("b is not pinned: it can run on CPUs 1, which a (cpus 1) owns; {fix}"),
            )],
        ),
        (
            "over the host's CPUs alone",
            vec![&b],
            Some("0"),
            1,
            vec![(
                "error",
                vec!["b", "host"],
                "0".to_owned(),
                format!("b is not pinned: it can run on CPUs 0, which the host (cpus 0) owns; {fix}"),
            )],
        ),
        (
            "two floating VMs with nothing pinned",
            vec![&b, &c],
            None,
            0,
            ["b", "c"]
                .iter()
                .map(|n| {
                    (
                        "warning",
                        vec![*n],
                        "0-2".to_owned(),
                        format!("{n} is not pinned: its vCPUs can run on any CPU, next to anyone"),
                    )
                })
                .collect(),
        ),
    ] {
        let mut args = vec!["--domains"];
        args.extend(domains.iter().map(|d| d.as_str()));
        args.extend(["--source", THREE, "--format", "json"]);
        if let Some(cpus) = host_cpus {
            args.extend(["--host-cpus", cpus]);
        }
        let out = report(&args);
        assert_eq!(out.status.code(), Some(status), "{case}: {}", text(&out.stdout));
        let v = json(&out);
        let found: Vec<(String, Vec<String>, String, String)> = v["conflicts"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|c| c["kind"] == "floating")
            .map(|c| {
                (
                    c["severity"].as_str().unwrap_or("").to_owned(),
                    serde_json::from_value(c["tenants"].clone()).unwrap_or_default(),
                    c["cpus"].as_str().unwrap_or("").to_owned(),
                    c["message"].as_str().unwrap_or("").to_owned(),
                )
            })
            .collect();
        let expected: Vec<(String, Vec<String>, String, String)> = expected
            .into_iter()
            .map(|(s, t, cpus, m)| {
                (s.to_owned(), t.iter().map(|t| (*t).to_owned()).collect(), cpus, m)
            })
            .collect();
        assert_eq!(found, expected, "{case}");
        // Every tenant carries its state.
        assert!(
            v["tenants"]
                .as_array()
                .into_iter()
                .flatten()
                .all(|t| t["state"] == "running"),
            "{case}: {v}"
        );
    }

    // The map: b on every CPU it may run on, the CPUs it floats over
    // marked as an error; no "not pinned" footnote.
    let out = report(&["--domains", &a, &b, "--source", THREE, "--host-cpus", "0"]);
    let map = text(&out.stdout);
    for cell in ["0:host+a/emu+b~!", "1:a/0+b~!", "2:b~"] {
        assert!(map.contains(cell), "{cell}: {map}");
    }
    assert!(map.contains("~ = may run there, not pinned"), "{map}");
    assert!(!map.contains("on no CPU above"), "{map}");
}

/// Issue 27: `report --plan` gates a floating VM as it gates any error — a
/// plan that pins it removes the error (exit 0), one that leaves it out
/// leaves it (exit 1), so `report --plan && apply` no longer passes a host
/// where a VM floats over the planned ones.
#[test]
fn a_plan_that_pins_the_floating_vm_removes_the_error_issue_27() {
    let dir = TempDir::new();
    let a = domain(&dir, "a", &[1], "0");
    let b = arg(&dir.write(
        "b.xml",
        "<domain type='kvm'>\n  <name>b</name>\n  <vcpu placement='static'>1</vcpu>\n</domain>\n",
    ))
    .to_owned();
    let plan = |vms: &[&str]| {
        let mut spec = format!("[host]\nsource = {THREE:?}\nreserved_cores = 1\n");
        for vm in vms {
            spec.push_str(&format!("[[vm]]\nname = {vm:?}\nvcpus = 1\n"));
        }
        let name = vms.join("-");
        let spec = dir.write(&format!("{name}.toml"), spec);
        let out = dir.path(&name);
        util::pinplan_ok(&["plan", arg(&spec), "--out", arg(&out)]);
        arg(&out.join("plan.json")).to_owned()
    };
    for (vms, status, fate) in [
        (&["a", "b"][..], 0, "resolved"),
        (&["a"][..], 1, "remaining"),
    ] {
        let plan = plan(vms);
        let out = report(&[
            "--domains",
            &a,
            &b,
            "--source",
            THREE,
            "--plan",
            &plan,
            "--format",
            "json",
        ]);
        assert_eq!(
            out.status.code(),
            Some(status),
            "{vms:?}: {}",
            text(&out.stdout)
        );
        let v = json(&out);
        // Now: b floats over a's CPU and the plan's reserved CPU 0.
        let now = conflict(&v, "floating");
        assert_eq!(now["severity"], "error", "{v}");
        let listed = v["plan"][fate]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|c| c["kind"] == "floating" && c["tenants"][0] == "b")
            .count();
        assert_eq!(listed, 1, "{vms:?}: b's floating is {fate}: {v}");
        assert_eq!(
            v["plan"]["introduced"].as_array().map(Vec::len),
            Some(0),
            "{vms:?}: {v}"
        );
    }
}

/// Issue 27: a shut-off domain (as `--connect` reads one) is not
/// `floating` and takes part in no conflict of now; its config on a running
/// tenant's core is a `shut-off-overlap` warning, and the text lists it on
/// its own line. Files given with `--domains` say what runs, so this is the
/// library's report of tenants read as through a connection.
#[test]
fn shut_off_domains_are_not_floating_issue_27() {
    use pinplan::report::Report;
    use pinplan::tenant::{host_tenant, TenantState};
    use pinplan::topology::{self, Source};
    let host = topology::load(&Source::Synthetic("package:1 core:3 pu:1".into())).unwrap();
    let read = |xml: &str, running: bool| {
        let mut t = pinplan::libvirt::domain::tenant_from_domain("x.xml", xml, &host).unwrap();
        if !running {
            t.state = TenantState::ShutOff;
        }
        t
    };
    let a = read(
        "<domain><name>a</name><vcpu>1</vcpu><cputune><vcpupin vcpu='0' cpuset='1'/>\
         <emulatorpin cpuset='0'/></cputune></domain>",
        true,
    );
    let off_floating = read("<domain><name>c</name><vcpu>1</vcpu></domain>", false);
    let off_pinned = read(
        "<domain><name>d</name><vcpu>1</vcpu><cputune><vcpupin vcpu='0' cpuset='1'/>\
         <emulatorpin cpuset='0'/></cputune></domain>",
        false,
    );
    let tenants = vec![
        host_tenant(&"0".parse().unwrap()),
        a,
        off_floating,
        off_pinned,
    ];
    let r = Report::new(&host, tenants, None);
    let found: Vec<(String, String, Vec<String>, String)> = r
        .conflicts
        .iter()
        .map(|c| {
            (
                c.kind.to_string(),
                format!("{:?}", c.severity),
                c.tenants.clone(),
                c.message.clone(),
            )
        })
        .collect();
    assert_eq!(
        found,
        [
            (
                "shut-off-overlap".to_owned(),
                "Warning".to_owned(),
                vec!["c".to_owned(), "a".to_owned(), "host".to_owned()],
                "c (shut off) is not pinned in its config: when it starts it can run on CPUs \
                 0-1, which a (cpus 1) and the host (cpus 0) own"
                    .to_owned()
            ),
            (
                "shut-off-overlap".to_owned(),
                "Warning".to_owned(),
                vec!["d".to_owned(), "a".to_owned()],
                "d (shut off) is pinned in its config onto CPUs 1, which a (cpus 1) owns: they \
                 would share a core when d starts"
                    .to_owned()
            ),
        ]
    );
    assert!(!r.has_errors());
    let text = r.to_text(&host, false);
    assert!(
        text.starts_with("4 tenants (2 shut off), 0 errors, 2 warnings\n"),
        "{text}"
    );
    assert!(
        text.contains("  shut off, not on the map: c (config: not pinned), d (config: cpus 1)\n"),
        "{text}"
    );
    // Not on the map: CPU 2 is free, CPU 1 a's alone.
    assert!(text.contains(" 2:-\n"), "{text}");
    assert!(text.contains(" 1:a/0?\n"), "{text}");
    let json: serde_json::Value = serde_json::from_str(&r.to_json()).unwrap();
    let states: Vec<&str> = json["tenants"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["state"].as_str())
        .collect();
    assert_eq!(states, ["running", "running", "shut-off", "shut-off"]);
}

/// Issue 27, the trial that found it, on the live host: after pinning, a
/// guest that floats could still run on the pinned guest's CPU and on the
/// host's, and `report --connect` said "0 errors". Now it exits 1 naming
/// the floating guest; that guest's threads are not "stray host threads"
/// (`isolate` would not move them); a shut-off guest is not `floating`.
#[test]
fn live_floating_guest_beside_a_pinned_one_is_an_error_issue_27() {
    let Some(uri) = util::libvirt_uri("no live guests") else {
        return;
    };
    if std::thread::available_parallelism().map_or(1, usize::from) < 2 {
        eprintln!("one CPU: nothing to pin a guest apart from the host on");
        return;
    }
    let _turn = crate::util::live_guests_turn();
    let dir = TempDir::new();
    let pid = std::process::id();
    let guests = util::Guests {
        uri: uri.clone(),
        names: ["a", "b", "c"]
            .iter()
            .map(|n| format!("rpt-{n}-{pid}"))
            .collect(),
    };
    let (a, b, c) = (&guests.names[0], &guests.names[1], &guests.names[2]);
    let domain_type = util::guest_type(&uri);
    let pinned = "  <cputune>\n    <vcpupin vcpu='0' cpuset='1'/>\n    <emulatorpin cpuset='0'/>\n  </cputune>\n";
    // a pinned and running, b floating and running, c pinned and shut off.
    for (name, cputune, start) in [(a, pinned, true), (b, "", true), (c, pinned, false)] {
        let path = dir.write(
            &format!("{name}.xml"),
            util::guest_xml(domain_type, name, 1, cputune),
        );
        util::virsh(&uri, &["define", arg(&path)]);
        if start {
            util::virsh(&uri, &["start", name]);
        }
    }
    let out = report(&[
        "--connect",
        &uri,
        "--host-cpus",
        "0",
        "--top",
        "100000",
        "--format",
        "json",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let v = json(&out);
    let conflicts = v["conflicts"].as_array().cloned().unwrap_or_default();
    let about = |kind: &str, name: &str| -> Vec<Value> {
        conflicts
            .iter()
            .filter(|x| x["kind"] == kind && x["tenants"][0] == name)
            .cloned()
            .collect()
    };
    // Other engineers' guests may be on this libvirtd too: b floats over a's
    // CPU 1 and the host's CPU 0 at least.
    let b_floats = about("floating", b);
    assert_eq!(b_floats.len(), 1, "{v}");
    assert_eq!(b_floats[0]["severity"], "error", "{v}");
    assert_eq!(b_floats[0]["cpus"], "0-1", "{v}");
    let names: Vec<&str> = b_floats[0]["tenants"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        names.contains(&a.as_str()) && names.contains(&"host"),
        "{v}"
    );
    // c is shut off: not floating, in no conflict of now, but its config
    // lands on a's CPU.
    assert!(about("floating", c).is_empty(), "{v}");
    assert_eq!(about("shut-off-overlap", c).len(), 1, "{v}");
    assert!(
        conflicts
            .iter()
            .filter(|x| x["kind"] != "shut-off-overlap")
            .all(|x| !x["tenants"].to_string().contains(c.as_str())),
        "{v}"
    );
    let state = |name: &str| {
        v["tenants"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|t| t["name"] == name)
            .map(|t| t["state"].clone())
    };
    assert_eq!(state(b), Some(Value::from("running")), "{v}");
    assert_eq!(state(c), Some(Value::from("shut-off")), "{v}");
    // No thread of a running guest's QEMU is a stray host thread.
    for name in [a, b] {
        let qemu: u64 = std::fs::read_to_string(format!("/run/libvirt/qemu/{name}.pid"))
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let strays: Vec<&Value> = v["live"]["stray_threads"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|t| t["pid"] == qemu)
            .collect();
        assert!(
            strays.is_empty(),
            "{name}'s threads listed as stray: {strays:?}"
        );
    }
    // The text: b on every CPU it may run on, c on its own line.
    let out = report(&["--connect", &uri, "--host-cpus", "0"]);
    let page = text(&out.stdout);
    assert!(page.contains(&format!("{b}~")), "{page}");
    assert!(page.contains(&format!("{c} (config: cpus 1)")), "{page}");
}

/// Issue 31: a domain pinned to CPUs the host does not have (written for
/// another host) was reported as fine and drawn nowhere; it is an error
/// (exit 2) naming the domain, its threads, the CPUs and the host's range.
#[test]
fn pins_to_cpus_the_host_lacks_are_refused_issue_31() {
    let dir = TempDir::new();
    let far = domain(&dir, "far", &[2048, 1], "4096");
    let near = domain(&dir, "near", &[2, 3], "4");
    for format in ["text", "json", "svg"] {
        let args = [
            "--domains",
            &near,
            &far,
            "--source",
            HOST,
            "--format",
            format,
        ];
        let out = report(&args);
        let shown = util::describe(&args, &out);
        assert_eq!(out.status.code(), Some(2), "{shown}");
        assert!(out.stdout.is_empty(), "{shown}");
        let stderr = text(&out.stderr);
        // The Broadwell host: 2 packages × 14 cores × 2 threads = CPUs 0-55.
        let expected = format!(
            "error: domain \"far\" pins vCPU 0 and emulator to CPUs 2048,4096, which {HOST} \
             does not have (its CPUs: 0-55)\n"
        );
        assert!(stderr.starts_with(&expected), "{shown}");
        assert!(
            stderr.contains("hint: the domain was written for another host: plan it for this one"),
            "{shown}"
        );
    }
    // The same domain within the host's CPUs is reported (exit 0: no conflict).
    let moved = domain(&dir, "far", &[5, 6], "7");
    let out = report(&["--domains", &near, &moved, "--source", HOST]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
}
