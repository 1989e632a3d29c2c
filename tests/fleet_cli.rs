//! Fleet specs (issue 19): the lab's two hosts as captured topologies with
//! `doctor` trees, the spec's errors, and the per-host plans' use by the
//! single-host commands. B1 is `examples/lab/b1-host.xml` (10 cores × 2
//! threads, 1 node: 9 cores free with `reserved_cores = 1`); JY is
//! `hwloc-xml/24em64t-2n6c2t-pci.xml` (2 nodes × 6 cores × 2 threads: 11
//! free). The trees are `tests/fixtures/fleet/{b1,jy}` (see their README).

use crate::util::{self, pinplan, text, vm, TempDir};
use serde_json::Value;

fn lab_spec(dir: &TempDir, vms: &str) -> std::path::PathBuf {
    let b1 = util::repo().join("examples/lab/b1-host.xml");
    let jy = util::fixture("hwloc-xml/24em64t-2n6c2t-pci.xml");
    let tree = |h: &str| util::fixture(&format!("fleet/{h}"));
    dir.write(
        "fleet.toml",
        format!(
            "[[host]]\nname = \"b1\"\nsource = {:?}\ndoctor_root = {:?}\nreserved_cores = 1\n\n\
             [[host]]\nname = \"jy\"\nsource = {:?}\ndoctor_root = {:?}\nreserved_cores = 1\n\n{vms}",
            b1.display().to_string(),
            tree("b1").display().to_string(),
            jy.display().to_string(),
            tree("jy").display().to_string()
        ),
    )
}

const LAB_VMS: &str = "[[vm]]\nname = \"sriov1\"\nvcpus = 6\nnic = \"0000:65:00.0\"\n\n\
    [[vm]]\nname = \"sriov2\"\nvcpus = 4\nnic = \"0000:65:00.0\"\n\n\
    [[vm]]\nname = \"plain1\"\nvcpus = 8\n\n[[vm]]\nname = \"plain2\"\nvcpus = 8\n";

/// Must show: B1 (viable VFIO groups) and JY (one non-viable group). The
/// SR-IOV VMs land on B1 and fleet.json says why not on JY; the others go
/// wherever fits: 3 + 2 cores of SR-IOV VMs and 4 + 4 cores of plain ones
/// (threads = "prefer" on 2-thread cores) are 13 cores, more than B1's 9, so
/// one plain VM goes to JY. Each host's plan.json is a normal plan.
#[test]
fn the_lab_fleet_puts_the_sriov_vms_on_b1() {
    let dir = TempDir::new();
    let spec = lab_spec(&dir, LAB_VMS);
    let out_dir = dir.path("out");
    let out = pinplan(["plan", util::arg(&spec), "--out", util::arg(&out_dir)]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let summary = text(&out.stdout);
    assert!(
        summary.starts_with("fleet plan: proven optimal, 4 of 4 VMs placed on 2 of 2 hosts"),
        "{summary}"
    );
    let fleet: Value =
        serde_json::from_str(&std::fs::read_to_string(out_dir.join("fleet.json")).unwrap())
            .unwrap();
    for name in ["sriov1", "sriov2"] {
        let v = vm(&fleet, name);
        assert_eq!(v["host"], "b1", "{v}");
        let refused = v["refused"].as_array().unwrap();
        assert_eq!(refused.len(), 1, "{v}");
        assert_eq!(refused[0]["host"], "jy");
        let reason = refused[0]["reason"].as_str().unwrap();
        assert!(
            reason.contains(
                "0000:65:00.1's IOMMU group 1 is not viable (0000:65:00.0 is bound to mlx4_core)"
            ),
            "{reason}"
        );
    }
    let hosts: Vec<&str> = ["plain1", "plain2"]
        .iter()
        .map(|n| vm(&fleet, n)["host"].as_str().unwrap())
        .collect();
    assert!(hosts.contains(&"jy") && hosts.contains(&"b1"), "{hosts:?}");
    // The per-host plans say the same, and are plans the other commands take.
    for host in ["b1", "jy"] {
        let plan: Value = serde_json::from_str(
            &std::fs::read_to_string(out_dir.join(host).join("plan.json")).unwrap(),
        )
        .unwrap();
        let mut names: Vec<&str> = plan["vms"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v["name"].as_str().unwrap())
            .collect();
        names.sort_unstable();
        let mut listed: Vec<&str> = fleet["vms"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|v| v["host"] == host)
            .map(|v| v["name"].as_str().unwrap())
            .collect();
        listed.sort_unstable();
        assert_eq!(names, listed, "{host}");
        assert!(plan["host"]["fingerprint"]
            .as_str()
            .unwrap()
            .starts_with("fnv1a64:"));
    }
    let out = pinplan([
        "xml",
        "--plan",
        util::arg(&out_dir.join("b1").join("plan.json")),
        "--vm",
        "sriov1",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("<vcpupin vcpu='0'"));
}

/// A VM the fleet cannot place is named with why, and the exit status is 1.
#[test]
fn a_vm_only_jy_could_take_is_left_out_with_why() {
    let dir = TempDir::new();
    let vms = format!(
        "{LAB_VMS}\n[[vm]]\nname = \"onjy\"\nvcpus = 2\nnic = \"0000:65:00.0\"\nhost = \"jy\"\n"
    );
    let spec = lab_spec(&dir, &vms);
    let out = pinplan(["plan", util::arg(&spec), "--format", "json"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let fleet = util::stdout_json(&out);
    let v = vm(&fleet, "onjy");
    assert_eq!(v["host"], Value::Null);
    assert!(
        v["refused"][0]["reason"]
            .as_str()
            .unwrap()
            .contains("not viable"),
        "{v}"
    );
}

/// Fleet spec errors name the file and line and say what to do.
#[test]
fn fleet_spec_errors_name_the_line() {
    let dir = TempDir::new();
    for (text_in, wanted) in [
        (
            "[[host]]\nsource = \"synthetic:package:1 core:4 pu:1\"\n",
            ":1: each [[host]] needs a name",
        ),
        (
            "[[host]]\nname = \"a\"\nreserved_cores = 1\n",
            "host a: give connect = \"URI\" (read through libvirt), source = \"FILE\" (a captured topology), or both",
        ),
        (
            "[[host]]\nname = \"a\"\nsource = \"synthetic:package:1 core:4 pu:1\"\n[[host]]\nname = \"a\"\nsource = \"synthetic:package:1 core:4 pu:1\"\n",
            ":4: host name \"a\" is empty or given twice",
        ),
        (
            "[[host]]\nname = \"a\"\nsource = \"synthetic:package:1 core:4 pu:1\"\n[[vm]]\nname = \"v\"\nvcpus = 1\nhost = \"b\"\n",
            ":7: v: no [[host]] is named \"b\"",
        ),
        (
            "[[host]]\nname = \"a/b\"\nsource = \"synthetic:package:1 core:4 pu:1\"\n",
            "host name \"a/b\" contains '/'",
        ),
        (
            "[[host]]\nname = \"a\"\nsource = \"synthetic:package:1 core:4 pu:1\"\nreserved_cores = 9\n[[vm]]\nname = \"v\"\nvcpus = 1\n",
            "host a: ",
        ),
        // [[ignore]] names a domain nothing else names, once.
        (
            "[host]\nsource = \"synthetic:package:1 core:4 pu:1\"\nreserved_cores = 1\n[[vm]]\nname = \"v\"\nvcpus = 1\n[[ignore]]\nname = \"v\"\n",
            ":8: \"v\" is a [[vm]] the plan places: it cannot be ignored too",
        ),
        (
            "[host]\nsource = \"synthetic:package:1 core:4 pu:1\"\n[[ignore]]\nname = \"w\"\n[[ignore]]\nname = \"w\"\n",
            ":6: \"w\" is ignored twice",
        ),
        (
            "[host]\nsource = \"synthetic:package:1 core:4 pu:1\"\n[[ignore]]\nname = \" \"\n",
            ":4: [[ignore]] needs the name of a domain",
        ),
        (
            "[host]\nsource = \"synthetic:package:1 core:4 pu:1\"\nconnect = \"\"\n",
            ":3: connect is a libvirt URI",
        ),
        (
            "[host]\nname = \"x\"\nsource = \"synthetic:package:1 core:4 pu:1\"\n",
            ":2: [host] name is for fleet specs",
        ),
        // NIC names: one that reads as an address, a bad address, and a
        // one-host spec.
        (
            "[[host]]\nname = \"a\"\nsource = \"synthetic:package:1 core:4 pu:1\"\nnic_names = { \"65:00.0\" = \"0000:65:00.0\" }\n",
            "NIC name \"65:00.0\" is empty or reads as a PCI address",
        ),
        (
            "[[host]]\nname = \"a\"\nsource = \"synthetic:package:1 core:4 pu:1\"\nnic_names = { uplink = \"65-00\" }\n",
            ":4: nic_names.uplink: \"65-00\" is not a PCI address",
        ),
        (
            "[host]\nsource = \"synthetic:package:1 core:4 pu:1\"\nnic_names = { uplink = \"0000:65:00.0\" }\n",
            ":3: [host] nic_names is for fleet specs",
        ),
    ] {
        let spec = dir.write("bad.toml", text_in);
        let out = pinplan(["plan", util::arg(&spec)]);
        assert_eq!(out.status.code(), Some(2), "{text_in}: {}", text(&out.stderr));
        let err = text(&out.stderr);
        assert!(err.contains(wanted), "{wanted:?} not in:\n{err}");
    }
}

/// Must show: libvirt's own remote transport. This machine's libvirtd is
/// two hosts of a fleet — once through `qemu:///system`, once through
/// `qemu+ssh://root@localhost:PORT/system` (scripts/test.sh starts an sshd
/// of its own on the loopback address, key-based) — each with a captured
/// topology (B1's, 9 free cores) so that two VMs of 8 cores must split.
/// A guest started here is read as running through both transports.
#[test]
fn two_hosts_through_qemu_system_and_qemu_ssh() {
    let Some(local) = util::libvirt_uri("the fleet over libvirt's remote transport") else {
        return;
    };
    let remote = std::env::var("PINPLAN_TEST_SSH_URI")
        .expect("PINPLAN_TEST_SSH_URI: scripts/test.sh starts an sshd for qemu+ssh://");
    let _turn = util::live_guests_turn();
    let dir = TempDir::new();
    // A tiny guest, running, that the spec does not name.
    let name = format!("pp-fleet-running-{}", std::process::id());
    let guest = util::Guests {
        uri: local.clone(),
        names: vec![name.clone()],
    };
    let name = name.as_str();
    // Pinned to CPU 1 (emulator too): on B1's topology that is core 1
    // (CPUs 1 and 11), taken on both hosts; 8 cores stay free on each.
    let pins = "  <cputune>\n    <vcpupin vcpu='0' cpuset='1'/>\n    <emulatorpin cpuset='1'/>\n  </cputune>\n";
    let xml = dir.write(
        "guest.xml",
        util::guest_xml(util::guest_type(&local), name, 1, pins),
    );
    util::virsh(&local, &["define", util::arg(&xml)]);
    util::virsh(&local, &["start", name]);
    let b1 = util::repo().join("examples/lab/b1-host.xml");
    let spec = dir.write(
        "fleet.toml",
        format!(
            "[[host]]\nname = \"local\"\nconnect = {local:?}\nsource = {b1:?}\nreserved_cores = 1\n\n\
             [[host]]\nname = \"remote\"\nconnect = {remote:?}\nsource = {b1:?}\nreserved_cores = 1\n\n\
             [[vm]]\nname = \"big1\"\nvcpus = 16\n\n[[vm]]\nname = \"big2\"\nvcpus = 16\n",
            b1 = b1.display().to_string()
        ),
    );
    let out = pinplan(["plan", util::arg(&spec), "--format", "json"]);
    drop(guest);
    let fleet = util::stdout_json(&out);
    // A host not read first: its error is the short story.
    for (i, uri) in [(0, &local), (1, &remote)] {
        assert_eq!(fleet["hosts"][i]["connect"], uri.as_str());
        assert_eq!(fleet["hosts"][i]["error"], Value::Null, "host {i}");
    }
    assert_eq!(out.status.code(), Some(0), "{}\n{fleet}", text(&out.stderr));
    let hosts: Vec<&str> = ["big1", "big2"]
        .iter()
        .map(|n| vm(&fleet, n)["host"].as_str().unwrap())
        .collect();
    assert!(
        hosts.contains(&"local") && hosts.contains(&"remote"),
        "{hosts:?}"
    );
    // The running guest was read through each transport: planned around on
    // both (its core is taken), so each host has 8 cores free, not 9.
    for i in 0..2 {
        assert_eq!(fleet["hosts"][i]["cores_free"], 8, "host {i}: {fleet}");
    }
}

/// The vCPU and emulator threads' affinity of a running guest, by taskset.
fn threads(name: &str) -> (String, String) {
    let all = util::thread_affinities(&[name.to_owned()]);
    let t = &all[name];
    (t["CPU 0"].clone(), t["emulator"].clone())
}

/// `pinplan ARGS` in `dir`, with `env` added.
fn pinplan_in(dir: &TempDir, args: &[&str], env: &[(&str, &str)]) -> std::process::Output {
    util::command()
        .args(args)
        .envs(env.iter().copied())
        .current_dir(dir.root())
        .output()
        .expect("cannot run pinplan")
}

/// `pinplan ARGS` in `dir`, with `env` added, given at most `limit`: its
/// exit status, stdout and stderr, or `None` (and killed) when it ran over.
fn pinplan_at_most(
    dir: &TempDir,
    args: &[&str],
    env: &[(&str, &str)],
    limit: std::time::Duration,
) -> Option<(Option<i32>, String, String)> {
    let (out, err) = (dir.path("at-most.stdout"), dir.path("at-most.stderr"));
    let mut child = util::command()
        .args(args)
        .envs(env.iter().copied())
        .current_dir(dir.root())
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(std::fs::File::create(&err).unwrap())
        .spawn()
        .expect("cannot run pinplan");
    let deadline = std::time::Instant::now() + limit;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    let read = |p: &std::path::Path| std::fs::read_to_string(p).unwrap_or_default();
    status.map(|s| (s.code(), read(&out), read(&err)))
}

/// Issue 19, item 4: `apply --fleet DIR` over libvirt's own transports —
/// this machine's libvirtd as two hosts, `qemu:///system` and
/// `qemu+ssh://…` (the sshd scripts/test.sh starts). Each host has 1 free
/// core (2 cores, `reserved_cores = 1`), so the two 1-vCPU guests split;
/// both are planned onto CPU 1, the emulator onto CPU 0. Checked by taskset
/// on the QEMU threads (not by pinplan's own read-back): a dry run changes
/// nothing; a fault on one host with `--all-or-nothing` leaves both as they
/// were; without it the other host stays applied and the fleet journal puts
/// it back; a clean apply pins both; a host refused under
/// `--all-or-nothing` keeps the other from changing; a host whose connection
/// stalls mid-apply fails within seconds (keepalive) and is restored.
#[test]
fn fleet_apply_per_host_all_or_nothing_and_rollback() {
    let Some(local) = util::libvirt_uri("apply --fleet on live guests") else {
        return;
    };
    if !cfg!(feature = "fault-injection") {
        panic!("run with --features pinplan-cli/fault-injection (scripts/test.sh does)");
    }
    let remote = std::env::var("PINPLAN_TEST_SSH_URI")
        .expect("PINPLAN_TEST_SSH_URI: scripts/test.sh starts an sshd for qemu+ssh://");
    let _turn = util::live_guests_turn();
    let pid = std::process::id();
    let (a, b) = (format!("pp-fleet-a-{pid}"), format!("pp-fleet-b-{pid}"));
    let _guests = util::Guests {
        uri: local.clone(),
        names: vec![a.clone(), b.clone()],
    };
    let dir = TempDir::new();
    for name in [&a, &b] {
        let xml = dir.write(
            &format!("{name}.xml"),
            util::guest_xml(util::guest_type(&local), name, 1, ""),
        );
        util::virsh(&local, &["define", util::arg(&xml)]);
    }
    let fleet = |vms: &str| {
        format!(
            "[[host]]\nname = \"local\"\nconnect = {local:?}\nreserved_cores = 1\n\n\
             [[host]]\nname = \"remote\"\nconnect = {remote:?}\nreserved_cores = 1\n\n{vms}"
        )
    };
    let spec = dir.write(
        "fleet.toml",
        fleet(&format!(
            "[[vm]]\nname = \"{a}\"\nvcpus = 1\n\n[[vm]]\nname = \"{b}\"\nvcpus = 1\n"
        )),
    );
    let out = pinplan_in(&dir, &["plan", util::arg(&spec), "--out", "out"], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let planned: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path("out").join("fleet.json")).unwrap())
            .unwrap();
    let host_of = |name: &str| vm(&planned, name)["host"].as_str().unwrap().to_owned();
    assert_ne!(host_of(&a), host_of(&b), "{planned}");
    // Started after planning (planned while running, each would count as
    // running on both hosts: they are one machine).
    for name in [&a, &b] {
        util::virsh(&local, &["start", name]);
    }
    let floating = ("0,1".to_owned(), "0,1".to_owned());
    let pinned = ("1".to_owned(), "0".to_owned());
    let listing = |dir: &TempDir| {
        let mut names: Vec<String> = std::fs::read_dir(dir.root())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.contains("journal"))
            .collect();
        names.sort();
        names
    };

    // --force from here while both guests run: this machine is both hosts,
    // so each host's check sees the other host's VM running, not pinned
    // (issue 27: a floating domain may run on the planned CPUs) or pinned
    // onto its CPU.

    // A dry run: the preconditions of both hosts, nothing changed or written.
    let out = pinplan_in(
        &dir,
        &[
            "apply",
            "--fleet",
            "out",
            "--force",
            "--dry-run",
            "--format",
            "json",
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let json = util::stdout_json(&out);
    assert_eq!(json["status"], "dry-run", "{json}");
    for h in json["hosts"].as_array().unwrap() {
        assert_eq!(h["status"], "dry-run", "{json}");
    }
    assert!(listing(&dir).is_empty(), "{:?}", listing(&dir));
    assert_eq!(threads(&a), floating);

    // A fault at the remote host's second pin call, all or nothing: the
    // remote host restores its VM, the local host is rolled back.
    let remote_vm = if host_of(&a) == "remote" { &a } else { &b };
    let local_vm = if remote_vm == &a { &b } else { &a };
    let fault = [
        ("PINPLAN_FAULT_HOST", "remote"),
        ("PINPLAN_FAULT_PIN_CALL", "2"),
    ];
    let out = pinplan_in(
        &dir,
        &[
            "apply",
            "--fleet",
            "out",
            "--force",
            "--all-or-nothing",
            "--journal",
            "j1.json",
            "--format",
            "json",
        ],
        &fault,
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let json = util::stdout_json(&out);
    assert_eq!(json["status"], "not-applied", "{json}");
    let status = |json: &Value, host: &str| {
        json["hosts"]
            .as_array()
            .unwrap()
            .iter()
            .find(|h| h["name"] == host)
            .unwrap()["status"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    // The local host either finished and was rolled back, or was held
    // before it started (the hosts run in parallel).
    assert!(
        ["rolled-back", "held"].contains(&status(&json, "local").as_str()),
        "{json}"
    );
    assert_eq!(status(&json, "remote"), "failed", "{json}");
    assert_eq!(threads(&a), floating, "all or nothing left a change");
    assert_eq!(threads(&b), floating, "all or nothing left a change");

    // The same fault without --all-or-nothing: the local host stays applied
    // and says so; the fleet journal puts it back.
    let out = pinplan_in(
        &dir,
        &["apply", "--fleet", "out", "--force", "--journal", "j2.json"],
        &fault,
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let said = text(&out.stdout);
    assert!(
        said.contains("fleet partly applied: 1 host stays applied (local)")
            && said.contains("pinplan apply --rollback j2.json"),
        "{said}"
    );
    assert_eq!(threads(local_vm), pinned);
    assert_eq!(threads(remote_vm), floating);
    let out = pinplan_in(&dir, &["apply", "--rollback", "j2.json"], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(threads(local_vm), floating);

    // A clean apply: both pinned, one journal per host (0600) beside the
    // fleet journal, the config pinned too.
    let out = pinplan_in(
        &dir,
        &["apply", "--fleet", "out", "--force", "--journal", "j3.json"],
        &[],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("fleet applied: 2 hosts changed"),
        "{}",
        text(&out.stdout)
    );
    assert_eq!(threads(&a), pinned);
    assert_eq!(threads(&b), pinned);
    for host in ["local", "remote"] {
        let journal = dir.path(&format!("j3-{host}.json"));
        let mode = std::os::unix::fs::PermissionsExt::mode(
            &std::fs::metadata(&journal).unwrap().permissions(),
        );
        assert_eq!(mode & 0o777, 0o600, "{}", journal.display());
    }
    let config = util::virsh(&local, &["dumpxml", "--inactive", &a]);
    assert!(
        config.contains("<vcpupin vcpu='0' cpuset='1'/>"),
        "{config}"
    );
    // report --fleet reads both hosts through their URIs against their
    // plans: nothing left to move.
    let out = pinplan_in(&dir, &["report", "--fleet", "out", "--format", "json"], &[]);
    let json = util::stdout_json(&out);
    for h in json["hosts"].as_array().unwrap() {
        assert_eq!(h["status"], "done", "{json}");
        assert_eq!(h["report"]["moves"], serde_json::json!([]), "{json}");
    }
    // The fleet journal puts both back.
    let out = pinplan_in(&dir, &["apply", "--rollback", "j3.json"], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(threads(&a), floating);
    assert_eq!(threads(&b), floating);

    // A host whose connection stalls mid-apply, as when its network stops
    // answering: at the remote host's second pin call, pinplan's ssh client
    // for it is stopped (SIGSTOP) and the call goes ahead on the dead
    // connection. Keepalive (1 s, 2 requests) closes it within seconds: the
    // remote host is named failed and restored through a fresh connection,
    // the local host stays applied. Without keepalive the call would wait
    // forever (the test gives up after 90 s and fails).
    let stopped = dir.path("stopped-ssh.pids");
    let stall = format!(
        "pgrep -P \"$PINPLAN_PID\" -x ssh > {p}; kill -STOP $(cat {p})",
        p = stopped.display()
    );
    let started = std::time::Instant::now();
    let out = pinplan_at_most(
        &dir,
        &[
            "apply",
            "--fleet",
            "out",
            "--force",
            "--journal",
            "j7.json",
            "--format",
            "json",
        ],
        &[
            ("PINPLAN_FAULT_HOST", "remote"),
            ("PINPLAN_FAULT_PIN_CALL", "2"),
            ("PINPLAN_FAULT_MODE", "continue"),
            ("PINPLAN_FAULT_EXEC", &stall),
            ("PINPLAN_LIBVIRT_KEEPALIVE", "1,2"),
        ],
        std::time::Duration::from_secs(90),
    );
    let took = started.elapsed();
    let pids = std::fs::read_to_string(&stopped).unwrap_or_default();
    let _ = std::process::Command::new("kill")
        .arg("-KILL")
        .args(pids.split_whitespace())
        .output();
    assert!(
        !pids.trim().is_empty(),
        "no ssh client of pinplan was found to stop"
    );
    let (code, stdout, stderr) = out.expect("apply hung on the stalled host for 90 s");
    assert_eq!(code, Some(1), "{stderr}\n{stdout}");
    let json: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    assert_eq!(status(&json, "remote"), "failed", "{json}");
    assert_eq!(status(&json, "local"), "applied", "{json}");
    assert!(
        json.to_string().contains("keepalive"),
        "the failure names the keepalive timeout: {json}"
    );
    assert!(took.as_secs() < 30, "the stalled host took {took:?}");
    assert_eq!(
        threads(remote_vm),
        floating,
        "the stalled host was not restored"
    );
    assert_eq!(threads(local_vm), pinned);
    let out = pinplan_in(&dir, &["apply", "--rollback", "j7.json"], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(threads(local_vm), floating);

    // Two fleet applies at once over the same hosts: the host locks (taken
    // in one order) make one wait for the other, which then finds the plan
    // in effect.
    let spawn = |journal: &str| {
        util::command()
            .args(["apply", "--fleet", "out", "--force", "--journal", journal])
            .current_dir(dir.root())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("cannot run pinplan")
    };
    let (first, second) = (spawn("j5.json"), spawn("j6.json"));
    let outs = [
        first.wait_with_output().unwrap(),
        second.wait_with_output().unwrap(),
    ];
    for out in &outs {
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    }
    let said: Vec<String> = outs.iter().map(|o| text(&o.stdout)).collect();
    let applied = said
        .iter()
        .filter(|t| t.contains("fleet applied: 2 hosts changed"))
        .count();
    let in_effect = said
        .iter()
        .filter(|t| t.contains("fleet already in effect"))
        .count();
    assert_eq!((applied, in_effect), (1, 1), "{said:?}");
    assert_eq!(threads(&a), pinned);
    let journal = if said[0].contains("fleet applied") {
        "j5.json"
    } else {
        "j6.json"
    };
    let out = pinplan_in(&dir, &["apply", "--rollback", journal], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(threads(&a), floating);

    // A host refused (its VM is not defined there) keeps the other from
    // changing under --all-or-nothing; nothing is journalled. Planned
    // with the guests shut off, as above.
    for name in [&a, &b] {
        util::virsh(&local, &["destroy", name]);
    }
    let spec = dir.write(
        "fleet2.toml",
        fleet(&format!(
            "[[vm]]\nname = \"{a}\"\nvcpus = 1\nhost = \"local\"\n\n\
             [[vm]]\nname = \"pp-fleet-undefined-{pid}\"\nvcpus = 1\nhost = \"remote\"\n"
        )),
    );
    let out = pinplan_in(&dir, &["plan", util::arg(&spec), "--out", "out2"], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    util::virsh(&local, &["start", &a]);
    let before = listing(&dir);
    let out = pinplan_in(
        &dir,
        &[
            "apply",
            "--fleet",
            "out2",
            "--all-or-nothing",
            "--journal",
            "j4.json",
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    let said = text(&out.stdout);
    assert!(said.contains("no domain \"pp-fleet-undefined-"), "{said}");
    assert!(
        said.contains("fleet not applied: no host is changed"),
        "{said}"
    );
    assert_eq!(threads(&a), floating);
    assert_eq!(listing(&dir), before, "a refused fleet wrote a journal");
}

/// `apply`, `report` and `doctor --fleet` on the lab's captured hosts: they
/// have no URI, so apply refuses each by name and changes nothing; doctor
/// reads each host's `doctor_root` against its plan; report skips them.
#[test]
fn fleet_commands_on_captured_hosts() {
    let dir = TempDir::new();
    let spec = lab_spec(&dir, LAB_VMS);
    let out_dir = dir.path("out");
    let out = pinplan(["plan", util::arg(&spec), "--out", util::arg(&out_dir)]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let out = pinplan(["apply", "--fleet", util::arg(&out_dir)]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    let said = text(&out.stdout);
    for host in ["b1", "jy"] {
        assert!(
            said.contains(&format!("fleet.json gives host {host} no connect URI")),
            "{said}"
        );
    }
    // --vm picks VMs across the fleet; one no host plans is refused first.
    let out = pinplan(["apply", "--fleet", util::arg(&out_dir), "--vm", "nosuch"]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(
        err.contains("plans nosuch")
            && err.contains("VMs the hosts plan: plain1, plain2, sriov1, sriov2"),
        "{err}"
    );
    let out = pinplan([
        "apply",
        "--fleet",
        util::arg(&out_dir),
        "--vm",
        "sriov1",
        "--format",
        "json",
    ]);
    let json = util::stdout_json(&out);
    let jy = json["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["name"] == "jy")
        .unwrap();
    assert_eq!(jy["status"], "skipped", "{json}");
    let out = pinplan(["doctor", "--fleet", util::arg(&out_dir), "--format", "json"]);
    let json = util::stdout_json(&out);
    assert_eq!(out.status.code(), Some(0), "{json}");
    let hosts = json["hosts"].as_array().unwrap();
    assert_eq!(hosts.len(), 2);
    // B1's plan has the SR-IOV VMs: its sriov-vfs check names them.
    let sriov = |h: &Value| {
        h["doctor"]["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["id"] == "sriov-vfs")
            .unwrap()["message"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    assert!(
        sriov(&hosts[0]).contains("sriov1, sriov2"),
        "{}",
        sriov(&hosts[0])
    );
    assert!(
        sriov(&hosts[1]).contains("no plan VM names this PF"),
        "{}",
        sriov(&hosts[1])
    );
    let out = pinplan(["report", "--fleet", util::arg(&spec)]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("== jy ==\nskipped: no connect URI"));
    assert!(
        text(&out.stdout).ends_with("\nfleet: 2 hosts: 2 skipped (b1, jy)\n"),
        "{}",
        text(&out.stdout)
    );
    // A host's plan.json that places other VMs than fleet.json says (B1's
    // plan copied over JY's) is refused, naming the file, before any host.
    std::fs::copy(out_dir.join("b1/plan.json"), out_dir.join("jy/plan.json")).unwrap();
    let out = pinplan(["apply", "--fleet", util::arg(&out_dir)]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stdout));
    let said = text(&out.stderr);
    assert!(
        said.contains(&format!(
            "{} places plain1, sriov1, sriov2 but fleet.json puts plain2 there",
            out_dir.join("jy/plan.json").display()
        )),
        "{said}"
    );
    // A directory that is not a fleet plan is named.
    std::fs::write(
        out_dir.join("fleet.json"),
        "{\"hosts\": [{\"name\": \"../x\", \"connect\": null, \"vms\": [\"v\"]}]}",
    )
    .unwrap();
    let out = pinplan(["apply", "--fleet", util::arg(&out_dir)]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("fleet.json: host \"../x\": the name contains '/'"),
        "{}",
        text(&out.stderr)
    );
}

/// A host reached only through its URI has its NICs checked for VFIO from
/// libvirt's node devices, as one with a doctor_root is from sysfs. This
/// machine twice: `tree` (qemu:///system, doctor_root = "/") and `nodedev`
/// (qemu+ssh://, no doctor_root). A VM passing through this machine's
/// first network function must get the same verdict from both; and where
/// sysfs shows no IOMMU group for it (no IOMMU, as on the CI machine), the
/// verdict is a refusal that says so.
#[test]
fn a_nic_is_checked_through_libvirt_as_through_sysfs() {
    let Some(local) = util::libvirt_uri("NIC facts through libvirt's node devices") else {
        return;
    };
    let remote = std::env::var("PINPLAN_TEST_SSH_URI")
        .expect("PINPLAN_TEST_SSH_URI: scripts/test.sh starts an sshd for qemu+ssh://");
    let devices = std::path::Path::new("/sys/bus/pci/devices");
    let mut nics: Vec<String> = std::fs::read_dir(devices)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|a| {
            std::fs::read_to_string(devices.join(a).join("class"))
                .is_ok_and(|c| c.trim().starts_with("0x02"))
        })
        .collect();
    nics.sort();
    let Some(nic) = nics.first().cloned() else {
        panic!("this machine has no network PCI function to check");
    };
    let no_group = std::fs::symlink_metadata(devices.join(&nic).join("iommu_group")).is_err();
    let dir = TempDir::new();
    let spec = dir.write(
        "fleet.toml",
        format!(
            "[[host]]\nname = \"tree\"\nconnect = {local:?}\ndoctor_root = \"/\"\nreserved_cores = 1\n\n\
             [[host]]\nname = \"nodedev\"\nconnect = {remote:?}\nreserved_cores = 1\n\n\
             [[vm]]\nname = \"nicvm\"\nvcpus = 1\nnic = {nic:?}\nnic_affinity = \"ignore\"\n"
        ),
    );
    let out = pinplan(["plan", util::arg(&spec), "--format", "json"]);
    let fleet = util::stdout_json(&out);
    let v = vm(&fleet, "nicvm");
    let reason = |host: &str| {
        v["refused"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["host"] == host)
            .map(|r| r["reason"].as_str().unwrap().to_owned())
    };
    assert_eq!(reason("tree"), reason("nodedev"), "{fleet}");
    // doctor --fleet over the same spec: the tree host from "/", the other
    // through its URI (the kernel's settings skipped there, saying so).
    let doc = pinplan(["doctor", "--fleet", util::arg(&spec), "--format", "json"]);
    let json = util::stdout_json(&doc);
    assert_ne!(doc.status.code(), Some(2), "{json}");
    let checks = |i: usize| {
        json["hosts"][i]["doctor"]["checks"]
            .as_array()
            .unwrap()
            .clone()
    };
    let skipped_rt = |i: usize| {
        checks(i).iter().any(|c| {
            c["id"] == "smt"
                && c["message"]
                    .as_str()
                    .unwrap()
                    .contains("not visible through libvirt")
        })
    };
    assert_eq!(json["hosts"][0]["status"], "done", "{json}");
    assert_eq!(json["hosts"][1]["status"], "done", "{json}");
    assert!(!skipped_rt(0) && skipped_rt(1), "{json}");
    if no_group {
        assert_eq!(out.status.code(), Some(1), "{fleet}");
        let why = reason("nodedev").unwrap_or_default();
        assert!(
            why.contains(&format!("{nic} has no IOMMU group (the IOMMU is off)")),
            "{why}"
        );
    }
}

/// NIC names: each host says which address its `uplink` is. JY calls the
/// VF 0000:65:00.1 its uplink (in the group its PF's driver holds), B1 the
/// PF 0000:65:00.0; a third host has no such name. The VM resolves per host:
/// it lands on B1, JY refuses it for 0000:65:00.1 (its own address, so the
/// name was resolved there), the third host for the missing name.
#[test]
fn nic_names_resolve_per_host() {
    let dir = TempDir::new();
    let b1 = util::repo().join("examples/lab/b1-host.xml");
    let jy = util::fixture("hwloc-xml/24em64t-2n6c2t-pci.xml");
    let tree = |h: &str| util::fixture(&format!("fleet/{h}")).display().to_string();
    let spec = dir.write(
        "fleet.toml",
        format!(
            "[[host]]\nname = \"b1\"\nsource = {:?}\ndoctor_root = {:?}\nreserved_cores = 1\n\
             nic_names = {{ uplink = \"0000:65:00.0\" }}\n\n\
             [[host]]\nname = \"jy\"\nsource = {:?}\ndoctor_root = {:?}\nreserved_cores = 1\n\
             nic_names = {{ uplink = \"0000:65:00.1\" }}\n\n\
             [[host]]\nname = \"plain\"\nsource = \"synthetic:package:1 core:8 pu:1\"\nreserved_cores = 1\n\n\
             [[vm]]\nname = \"sriov1\"\nvcpus = 2\nnic = \"uplink\"\nnic_affinity = \"ignore\"\n",
            b1.display().to_string(),
            tree("b1"),
            jy.display().to_string(),
            tree("jy")
        ),
    );
    let out = pinplan(["plan", util::arg(&spec), "--format", "json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let fleet = util::stdout_json(&out);
    let v = vm(&fleet, "sriov1");
    assert_eq!(v["host"], "b1", "{v}");
    let reason = |host: &str| {
        v["refused"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["host"] == host)
            .map(|r| r["reason"].as_str().unwrap().to_owned())
            .unwrap_or_default()
    };
    assert!(
        reason("jy").contains("vfio: 0000:65:00.1 cannot be passed through")
            && reason("jy").contains("0000:65:00.0 is bound to mlx4_core"),
        "{}",
        reason("jy")
    );
    assert!(
        reason("plain").contains("plain has no NIC named \"uplink\" (its nic_names)"),
        "{}",
        reason("plain")
    );
}

/// The files under `root` (two levels, as a fleet's set has them), by path
/// relative to it, with their bytes; `fleet.json`'s `solve_seconds` (the
/// solve's time, different every run) left out.
fn fleet_set(root: &std::path::Path) -> std::collections::BTreeMap<String, Vec<u8>> {
    let mut set = std::collections::BTreeMap::new();
    let mut dirs = vec![(root.to_owned(), String::new())];
    while let Some((dir, rel)) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let entry = entry.unwrap();
            let name = format!("{rel}{}", entry.file_name().to_string_lossy());
            let kind = entry.file_type().unwrap();
            if kind.is_dir() {
                dirs.push((entry.path(), format!("{name}/")));
                continue;
            }
            if kind.is_symlink() {
                set.insert(name, b"(a link)".to_vec());
                continue;
            }
            let mut bytes = std::fs::read(entry.path()).unwrap();
            if name == "fleet.json" {
                let text = String::from_utf8(bytes).unwrap();
                let kept: Vec<&str> = text
                    .split_inclusive('\n')
                    .filter(|l| !l.trim_start().starts_with("\"solve_seconds\""))
                    .collect();
                bytes = kept.concat().into_bytes();
            }
            set.insert(name, bytes);
        }
    }
    set
}

fn mode(path: &std::path::Path) -> u32 {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::symlink_metadata(path)
        .unwrap()
        .permissions()
        .mode()
        & 0o777
}

/// Issue 31: a fleet's set, now written in one pass (one staging directory,
/// one sync, one rename), is the same files with the same bytes as the set
/// the per-host writes made (`tests/fixtures/fleet-out/golden`, checked by
/// hand: see its README), with the same modes, listed in the same order.
#[test]
fn issue_31_a_fleet_set_in_one_pass_is_the_same_files_and_bytes() {
    let dir = TempDir::new();
    let spec = util::fixture("fleet-out/fleet.toml");
    let out = pinplan_in(&dir, &["plan", util::arg(&spec), "--out", "out"], &[]);
    // huge1 fits no host: "the answer is no", the set written all the same.
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let written = fleet_set(&dir.path("out"));
    let golden = fleet_set(&util::fixture("fleet-out/golden"));
    assert_eq!(written.len(), 14);
    assert_eq!(
        written.keys().collect::<Vec<_>>(),
        golden.keys().collect::<Vec<_>>()
    );
    for (name, bytes) in &golden {
        assert!(written[name] == *bytes, "{name} differs");
    }
    for d in ["out", "out/h0", "out/h1", "out/h2"] {
        assert_eq!(mode(&dir.path(d)), 0o755, "{d}");
    }
    assert_eq!(mode(&dir.path("out/h1/vm1.xml")), 0o644);
    let said = text(&out.stderr);
    let wrote: Vec<&str> = said.lines().filter(|l| l.starts_with("wrote ")).collect();
    assert_eq!(wrote.len(), 14, "{said}");
    assert_eq!(wrote[0], "wrote out/h0/plan.json");
    assert_eq!(wrote[13], "wrote out/fleet.json");
    let left: Vec<String> = std::fs::read_dir(dir.root())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".pinplan-"))
        .collect();
    assert!(left.is_empty(), "staging left behind: {left:?}");
}

/// Issue 31: run again into the same directory, the fleet's set replaces
/// the earlier one as a whole: our files the new set lacks go (and are
/// listed), a user's files stay where they were, at the top and in a host's
/// directory, and a directory the new set does not name is kept.
#[test]
fn issue_31_a_fleet_set_replaces_the_earlier_one_and_keeps_yours() {
    let dir = TempDir::new();
    let spec = util::fixture("fleet-out/fleet.toml");
    let args = ["plan", util::arg(&spec), "--out", "out"];
    assert_eq!(pinplan_in(&dir, &args, &[]).status.code(), Some(1));
    dir.write("out/notes.txt", "mine");
    dir.write("out/h1/mine.txt", "mine too");
    dir.write("out/h1/gone.fragment.xml", "an earlier run's");
    dir.write("out/h9/plan.json", "a host no longer in the fleet");
    let out = pinplan_in(&dir, &args, &[]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let said = text(&out.stderr);
    assert!(
        said.contains("removed out/h1/gone.fragment.xml (of an earlier run)"),
        "{said}"
    );
    let mut expected = fleet_set(&util::fixture("fleet-out/golden"));
    for (name, text) in [
        ("notes.txt", "mine"),
        ("h1/mine.txt", "mine too"),
        ("h9/plan.json", "a host no longer in the fleet"),
    ] {
        expected.insert(name.to_owned(), text.as_bytes().to_vec());
    }
    assert_eq!(fleet_set(&dir.path("out")), expected);
}

/// Issue 31: a host's directory that is a link is refused, not written
/// through, and the earlier set stays whole.
#[test]
fn issue_31_a_host_directory_that_is_a_link_is_refused() {
    let dir = TempDir::new();
    let spec = util::fixture("fleet-out/fleet.toml");
    let args = ["plan", util::arg(&spec), "--out", "out"];
    assert_eq!(pinplan_in(&dir, &args, &[]).status.code(), Some(1));
    let before = fleet_set(&dir.path("out"));
    let elsewhere = dir.write("elsewhere/keep.txt", "keep");
    std::fs::remove_dir_all(dir.path("out/h2")).unwrap();
    std::os::unix::fs::symlink(dir.path("elsewhere"), dir.path("out/h2")).unwrap();
    let out = pinplan_in(&dir, &args, &[]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    let said = text(&out.stderr);
    assert!(said.contains("it exists and is not a directory"), "{said}");
    assert_eq!(std::fs::read_to_string(&elsewhere).unwrap(), "keep");
    assert_eq!(
        std::fs::read_dir(dir.path("elsewhere")).unwrap().count(),
        1,
        "written through the link"
    );
    let mut after = fleet_set(&dir.path("out"));
    assert_eq!(after.remove("h2").as_deref(), Some(&b"(a link)"[..]));
    // The rest is the earlier set (h2's plan.json went with its directory).
    let mut before = before;
    assert!(before.remove("h2/plan.json").is_some());
    assert_eq!(after, before);
}

/// Issue 31: what patching a host's domain changes beyond the pins is said
/// for a fleet as for one host (`note: DIR/HOST/VM.xml: …`).
#[test]
fn a_fleets_patch_notes_are_printed() {
    let dir = TempDir::new();
    let host = util::fixture("hwloc-xml/24em64t-2n6c2t-pci.xml");
    let domain = util::fixture("libvirt-domains/qemu-hugepages-numa-default-2M.xml");
    let spec = dir.write(
        "fleet.toml",
        format!(
            "[[host]]\nname = \"h1\"\nsource = \"{}\"\nreserved_cores = 1\n\n[[vm]]\nname = \"fedora\"\nvcpus = 2\nhugepages = \"none\"\ndomain_xml = \"{}\"\n",
            util::arg(&host),
            util::arg(&domain)
        ),
    );
    let out = dir.path("out");
    let args = ["plan", util::arg(&spec), "--out", util::arg(&out)];
    let run = pinplan(args);
    assert_eq!(
        run.status.code(),
        Some(0),
        "{}",
        util::describe(&args, &run)
    );
    let want = format!(
        "note: {}: huge pages: the domain's 2 MiB pages for cells 0-1 become normal pages for cells 0-1, as planned\n",
        out.join("h1/fedora.xml").display()
    );
    assert!(
        text(&run.stderr).contains(&want),
        "{}",
        util::describe(&args, &run)
    );
}
