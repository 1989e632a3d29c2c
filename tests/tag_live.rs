//! `pinplan tag` and `pinplan plan --connect` without a spec, on the real
//! libvirtd that scripts/test.sh starts (issue 30): a domain's request is
//! written into its metadata (checked first, `--dry-run` writes nothing,
//! `KEY=` removes a key), refused with the spec's own message naming the
//! domain and the key, and planned from there; a spec's `[[vm]]` wins.
//!
//! Needs PINPLAN_TEST_LIBVIRT_URI (set by scripts/test.sh).

use crate::util::{self, arg, plan_json, virsh, Guests, TempDir};

/// Defines shut-off guest `name` of `vcpus` vCPUs, unpinned.
fn define(dir: &TempDir, uri: &str, name: &str, vcpus: u32) {
    let xml = dir.write(
        &format!("{name}.xml"),
        util::guest_xml(util::guest_type(uri), name, vcpus, ""),
    );
    virsh(uri, &["define", arg(&xml)]);
}

/// The element libvirt keeps for `name` under pinplan's namespace.
fn metadata(uri: &str, name: &str) -> String {
    let out = std::process::Command::new("virsh")
        .args([
            "-q",
            "-c",
            uri,
            "metadata",
            name,
            "--uri",
            "urn:pinplan:vm:1",
            "--config",
        ])
        .output()
        .unwrap();
    util::text(&out.stdout).trim().to_owned()
}

#[test]
fn a_tagged_domain_is_planned_without_a_spec() {
    let Some(uri) = util::libvirt_uri("tag and plan --connect without a spec") else {
        return;
    };
    let _turn = util::live_guests_turn();
    let dir = TempDir::new();
    let names = ["pp-tag-a", "pp-tag-b"];
    let _guests = Guests {
        uri: uri.clone(),
        names: names.iter().map(|n| (*n).to_owned()).collect(),
    };
    for name in names {
        define(&dir, &uri, name, 1);
    }
    // A dry run checks and shows, and writes nothing.
    let shown = util::pinplan_ok(&[
        "tag",
        "pp-tag-a",
        "--connect",
        &uri,
        "vcpus=1",
        "emulator=isolate",
        "--dry-run",
    ]);
    assert!(
        shown.contains("pp-tag-a: after  <vm vcpus=\"1\" emulator=\"isolate\"/>"),
        "{shown}"
    );
    assert!(shown.contains("not written (--dry-run)"), "{shown}");
    assert_eq!(metadata(&uri, "pp-tag-a"), "");
    // A bad value is refused with the spec's message, naming the key.
    let out = util::pinplan(["tag", "pp-tag-a", "--connect", &uri, "threads=prefr"]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        util::describe(&["tag"], &out)
    );
    let err = util::text(&out.stderr);
    assert!(
        err.contains(&format!(
            "{uri} domain pp-tag-a, pinplan metadata key threads: unknown variant `prefr`"
        )),
        "{err}"
    );
    assert!(err.contains("did you mean `prefer`?"), "{err}");
    assert_eq!(metadata(&uri, "pp-tag-a"), "");
    // Written, and read back by libvirt.
    util::pinplan_ok(&[
        "tag",
        "pp-tag-a",
        "--connect",
        &uri,
        "vcpus=1",
        "emulator=isolate",
        "threads=prefer",
    ]);
    util::pinplan_ok(&["tag", "pp-tag-a", "--connect", &uri, "threads="]);
    assert_eq!(
        metadata(&uri, "pp-tag-a"),
        "<vm vcpus=\"1\" emulator=\"isolate\"/>"
    );
    util::pinplan_ok(&[
        "tag",
        "pp-tag-b",
        "--connect",
        &uri,
        "vcpus=1",
        "emulator=isolate",
    ]);
    // No spec: both requests planned; the host's two one-thread cores hold one.
    let plan = plan_json(1, &["--connect", &uri]);
    let placed: Vec<&str> = plan["vms"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["name"].as_str().unwrap())
        .collect();
    assert_eq!(placed, ["pp-tag-a"], "{plan:#}");
    let a = util::vm(&plan, "pp-tag-a");
    let vcpu = a["vcpus"][0]["cpu"].as_u64().unwrap();
    let emulator: Vec<u32> = util::cpuset(a["emulator_cpus"].as_str().unwrap())
        .into_iter()
        .collect();
    assert_eq!(a["vcpus"].as_array().unwrap().len(), 1, "{a:#}");
    assert_eq!(emulator.len(), 1, "{a:#}");
    assert_ne!(
        u64::from(emulator[0]),
        vcpu,
        "the emulator isolated: a core of its own"
    );
    assert_eq!(plan["unplaced"], serde_json::json!(["pp-tag-b"]));
    // A spec names pp-tag-b with 1 vCPU and the emulator on the reserved
    // CPU 0: the spec wins for it, and pp-tag-a's request no longer fits.
    let spec = dir.write(
        "spec.toml",
        "[host]\nreserved_cpus = \"0\"\n[[vm]]\nname = \"pp-tag-b\"\nvcpus = 1\n",
    );
    let plan = plan_json(1, &[arg(&spec), "--connect", &uri]);
    let b = util::vm(&plan, "pp-tag-b");
    assert_eq!(b["vcpus"][0]["cpu"], 1, "{b:#}");
    let warnings = plan["warnings"].to_string();
    assert!(warnings.contains("pp-tag-b: the spec's [[vm]] gives this VM's request; its domain's pinplan metadata (vcpus, emulator) is not used"), "{warnings}");
    // --clear removes the whole request.
    util::pinplan_ok(&["tag", "pp-tag-a", "--connect", &uri, "--clear"]);
    assert_eq!(metadata(&uri, "pp-tag-a"), "");
}
