//! `pinplan plan --connect` on the real libvirtd that scripts/test.sh
//! starts, with tiny real guests (KVM where /dev/kvm is usable, else TCG) on
//! this 2-CPU host (CPU 0 the host's, CPU 1 free): the plan reads what runs
//! there (issue 27). A guest pinned to CPU 1 and a floating one leave a new
//! VM nothing, both named; a running VM the spec names keeps its CPU
//! wherever the spec lists it; a movable one is re-pinned with its moves
//! listed; a shut-off domain's config pins are only reported.
//!
//! Needs PINPLAN_TEST_LIBVIRT_URI (set by scripts/test.sh: then this test
//! fails, never skips).

use crate::util::{self, arg, plan_json, virsh, Guests, TempDir};
use serde_json::Value;

/// `plan SPEC --connect URI --format json`, expecting exit `code`.
fn plan(dir: &TempDir, uri: &str, name: &str, spec: &str, code: i32) -> Value {
    let path = dir.write(name, spec);
    plan_json(code, &[arg(&path), "--connect", uri])
}

/// The plan's warnings, as strings.
fn warnings(plan: &Value) -> Vec<String> {
    plan["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w.as_str().unwrap().to_owned())
        .collect()
}

/// The plan's fixed tenants as `(name, cpus, kind)`.
fn fixed(plan: &Value) -> Vec<(String, String, String)> {
    plan["fixed"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["name"].as_str().unwrap().to_owned(),
                f["cpus"].as_str().unwrap().to_owned(),
                f["kind"].as_str().unwrap_or("spec").to_owned(),
            )
        })
        .collect()
}

/// Defines a 1-vCPU guest `name`: its vCPU and emulator pinned to
/// `(vcpu CPU, emulator CPU)`, or not pinned.
fn define(dir: &TempDir, uri: &str, name: &str, pins: Option<(u32, u32)>) {
    let tune = pins.map_or_else(String::new, |(vcpu, emulator)| {
        format!(
            "  <cputune>\n    <vcpupin vcpu='0' cpuset='{vcpu}'/>\n    <emulatorpin cpuset='{emulator}'/>\n  </cputune>\n"
        )
    });
    let kind = util::guest_type(uri);
    let xml = dir.write(
        &format!("{name}.xml"),
        util::guest_xml(kind, name, 1, &tune),
    );
    virsh(uri, &["define", arg(&xml)]);
}

#[test]
fn plan_connect_plans_around_what_runs_and_keeps_named_vms() {
    let Some(uri) = util::libvirt_uri("plan --connect around running guests") else {
        return;
    };
    let _turn = util::live_guests_turn();
    let _guests = Guests {
        uri: uri.clone(),
        names: ["pl-a", "pl-b", "pl-off"].map(str::to_owned).to_vec(),
    };
    let dir = TempDir::new();
    define(&dir, &uri, "pl-a", Some((1, 0)));
    define(&dir, &uri, "pl-b", None);
    define(&dir, &uri, "pl-off", Some((1, 0)));
    virsh(&uri, &["start", "pl-a"]);
    virsh(&uri, &["start", "pl-b"]);

    // (i) A new VM gets no CPU a running guest may run on: pl-a holds CPU
    // 1, floating pl-b every CPU; both named, pl-b with the fix.
    let head = "[host]\nreserved_cores = 1\n";
    let p = plan(
        &dir,
        &uri,
        "c.toml",
        &format!("{head}[[vm]]\nname = \"pl-c\"\nvcpus = 1\n"),
        1,
    );
    assert_eq!(p["unplaced"], serde_json::json!(["pl-c"]), "{p}");
    assert!(p["vms"].as_array().unwrap().is_empty(), "{p}");
    let f = fixed(&p);
    assert!(
        f.contains(&("pl-a".into(), "1".into(), "running".into())),
        "{f:?}"
    );
    assert!(
        f.contains(&("pl-b".into(), "1".into(), "running".into())),
        "{f:?}"
    );
    let w = warnings(&p);
    assert!(
        w.iter()
            .any(|w| w.starts_with(&format!(
                "domain pl-b runs at {uri} with its vCPU 0 and emulator not pinned"
            )) && w.ends_with("pin it, name it in the spec, or list it under [[ignore]]")),
        "{w:?}"
    );
    // The shut-off domain's config pins are said, not counted.
    assert!(
        w.iter()
            .any(|w| w.starts_with("domain pl-off is shut off: its config pins CPUs 1")),
        "{w:?}"
    );
    assert!(!f.iter().any(|(n, _, _)| n == "pl-off"), "{f:?}");
    // ... unless asked.
    let path = dir.write(
        "c2.toml",
        format!("{head}[[vm]]\nname = \"pl-c\"\nvcpus = 1\n"),
    );
    let counted = plan_json(1, &[arg(&path), "--connect", &uri, "--count-shut-off"]);
    assert!(
        fixed(&counted).contains(&("pl-off".into(), "1".into(), "shut-off".into())),
        "{counted}"
    );

    // (ii) pl-a named last, after two new VMs: it keeps CPU 1 (pl-b
    // ignored, so CPU 1 is what a new VM could have had).
    let p = plan(
        &dir,
        &uri,
        "acd.toml",
        &format!(
            "{head}[[vm]]\nname = \"pl-c\"\nvcpus = 1\n[[vm]]\nname = \"pl-d\"\nvcpus = 1\n\
             [[vm]]\nname = \"pl-a\"\nvcpus = 1\n[[ignore]]\nname = \"pl-b\"\n"
        ),
        1,
    );
    let a = util::vm(&p, "pl-a");
    assert_eq!(a["kept"], true, "{p}");
    assert_eq!(a["vcpus"][0]["cpu"], 1, "{p}");
    assert_eq!(p["unplaced"], serde_json::json!(["pl-c", "pl-d"]), "{p}");
    assert_eq!(p["objective"]["placed"], 1, "{p}");
    assert!(p.get("moves").is_none(), "{p}");
    // Nothing of a kept VM changes: there is no XML to write for it.
    let kept_plan = dir.write("acd.json", p.to_string());
    let out = util::pinplan(["xml", "--plan", arg(&kept_plan), "--vm", "pl-a"]);
    assert_eq!(out.status.code(), Some(2), "{}", util::text(&out.stderr));
    assert!(
        util::text(&out.stderr).starts_with("error: pl-a is kept where it runs by this plan"),
        "{}",
        util::text(&out.stderr)
    );

    // A movable running VM is planned: with pl-b stopped, CPU 1 is free
    // and pl-a, on CPU 0 now, moves there; the move is listed.
    virsh(&uri, &["destroy", "pl-b"]);
    virsh(&uri, &["vcpupin", "pl-a", "0", "0", "--live"]);
    let p = plan(
        &dir,
        &uri,
        "mov.toml",
        &format!("{head}[[vm]]\nname = \"pl-a\"\nvcpus = 1\nmovable = true\n"),
        0,
    );
    let a = util::vm(&p, "pl-a");
    assert!(a.get("kept").is_none(), "{p}");
    assert_eq!(a["vcpus"][0]["cpu"], 1, "{p}");
    assert_eq!(
        p["moves"],
        serde_json::json!([{"vm": "pl-a", "vcpu": 0, "from": "0", "to": 1}]),
        "{p}"
    );
    // Not movable, it stays on CPU 0 (the host's), said so.
    let p = plan(
        &dir,
        &uri,
        "kept.toml",
        &format!("{head}[[vm]]\nname = \"pl-a\"\nvcpus = 1\n"),
        0,
    );
    assert_eq!(util::vm(&p, "pl-a")["vcpus"][0]["cpu"], 0, "{p}");
    assert!(
        warnings(&p)
            .iter()
            .any(|w| w.starts_with("domain pl-a runs vCPUs on the host's reserved CPUs 0")),
        "{p}"
    );
}

/// Issue 27: `apply` never puts two running VMs on one core between two
/// pin calls. Here (2 CPUs) the only move of two running guests that
/// changes anything is a swap, which no order of pin calls makes without
/// both on one core for a moment: refused before any change, live and in
/// the dry run, naming both; their threads' CPUs (taskset) are as before.
/// (The orders of longer chains are checked call by call in
/// `libvirt::apply::order`'s property test.)
#[test]
fn apply_refuses_a_swap_that_would_put_two_guests_on_one_core() {
    let Some(uri) = util::libvirt_uri("apply's order of pin calls") else {
        return;
    };
    let _turn = util::live_guests_turn();
    let guests = Guests {
        uri: uri.clone(),
        names: ["pl-x", "pl-y"].map(str::to_owned).to_vec(),
    };
    let dir = TempDir::new();
    for (name, cpu) in [("pl-x", 0), ("pl-y", 1)] {
        define(&dir, &uri, name, Some((cpu, cpu)));
        virsh(&uri, &["start", name]);
    }
    // A plan of this host (both kept as they run), then the two swapped.
    let p = plan(
        &dir,
        &uri,
        "xy.toml",
        "[host]\nreserved_cores = 1\n[[vm]]\nname = \"pl-x\"\nvcpus = 1\n[[vm]]\nname = \"pl-y\"\nvcpus = 1\n",
        0,
    );
    let mut swapped = p.clone();
    for (i, j) in [(0, 1), (1, 0)] {
        for key in ["vcpus", "cores", "cpus", "emulator_cpus", "numa_nodes"] {
            swapped["vms"][i][key] = p["vms"][j][key].clone();
        }
        if let Some(vm) = swapped["vms"][i].as_object_mut() {
            vm.remove("kept");
        }
    }
    let swap = dir.write("swap.json", swapped.to_string());
    let before = util::thread_affinities(&guests.names);
    for dry in [true, false] {
        let mut args = vec!["apply", arg(&swap), "--connect", uri.as_str()];
        if dry {
            args.push("--dry-run");
        }
        let out = util::pinplan(&args);
        let err = util::text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        for name in ["pl-x", "pl-y"] {
            assert!(
                err.contains(&format!(
                    "{name}: it is planned onto cores that another of pl-x, pl-y runs on now, which waits for this one's cores in turn"
                )),
                "{err}"
            );
        }
        assert_eq!(util::thread_affinities(&guests.names), before);
    }
}
