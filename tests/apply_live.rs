//! `pinplan apply` on the real libvirtd that scripts/test.sh starts, with two
//! tiny real guests (KVM where /dev/kvm is usable, else TCG): the pins reach
//! the QEMU threads (checked with taskset), hold across a restart, a fault on
//! the second VM leaves both exactly as they were, an aborted apply is undone
//! by `--rollback`, and failed preconditions change nothing.
//!
//! Needs PINPLAN_TEST_LIBVIRT_URI (set by scripts/test.sh: then this test
//! fails, never skips) and the `fault-injection` feature
//! (`cargo test --features pinplan-cli/fault-injection`, as scripts/test.sh
//! does). The refusals' messages are compared with snapshots.

use crate::util::{self, arg, virsh, Guests, TempDir};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Output;

/// The test's guests and scratch directory, removed even when the test fails.
struct Lab {
    guests: Guests,
    dir: TempDir,
}

impl Lab {
    /// Two running guests of 2 vCPUs, not pinned: `PREFIX-a-PID`,
    /// `PREFIX-b-PID`.
    fn two_running_guests(uri: &str, prefix: &str) -> Lab {
        let pid = std::process::id();
        let lab = Lab {
            guests: Guests {
                uri: uri.to_owned(),
                names: vec![format!("{prefix}-a-{pid}"), format!("{prefix}-b-{pid}")],
            },
            dir: TempDir::new(),
        };
        let domain_type = util::guest_type(uri);
        for name in &lab.guests.names {
            let path = lab.write(
                &format!("{name}.xml"),
                &util::guest_xml(domain_type, name, 2, ""),
            );
            virsh(uri, &["define", &path]);
            virsh(uri, &["start", name]);
        }
        lab
    }

    /// `pinplan ARGS` in the scratch directory, with `env` added.
    fn pinplan(&self, args: &[&str], env: &[(&str, &str)]) -> Output {
        util::command()
            .args(args)
            .envs(env.iter().copied())
            .current_dir(self.dir.root())
            .output()
            .expect("cannot run pinplan")
    }

    fn write(&self, name: &str, text: &str) -> String {
        arg(&self.dir.write(name, text)).to_owned()
    }

    fn affinities(&self) -> BTreeMap<String, BTreeMap<String, String>> {
        util::thread_affinities(&self.guests.names)
    }

    /// Affinities plus each guest's persistent XML.
    fn state(&self) -> (BTreeMap<String, BTreeMap<String, String>>, Vec<String>) {
        let xml = self
            .guests
            .names
            .iter()
            .map(|n| virsh(&self.guests.uri, &["dumpxml", "--inactive", n]))
            .collect();
        (self.affinities(), xml)
    }
}

/// Stderr for a snapshot: without this run's scratch directory and process
/// id, this host's fingerprint (the base plan's) and its online CPUs.
fn this_host(out: &Output, base: &Value) -> String {
    // The fingerprint first: its digits may hold the test's PID.
    let mut stderr = util::text(&out.stderr);
    if let Some(fingerprint) = base["host"]["fingerprint"].as_str() {
        stderr = stderr.replace(fingerprint, "[THIS HOST]");
    }
    let mut stderr = util::redact(&stderr).replace(&std::process::id().to_string(), "[PID]");
    // This host's size, after its fingerprint: `[THIS HOST]: 4 CPUs (4
    // online) in 4 cores, 1 NUMA node)`.
    // The CPUs the plan uses: the two VMs' 0-1 and this host's reserved.
    if let Some((head, tail)) = stderr.split_once("; it uses ") {
        let rest = tail.split_once(')').map_or("", |(_, rest)| rest);
        stderr = format!("{head}; it uses [CPUS]){rest}");
    }
    if let Some((head, tail)) = stderr.split_once("[THIS HOST]: ") {
        let rest = ["NUMA nodes)", "NUMA node)"]
            .iter()
            .find_map(|end| tail.split_once(end).map(|(_, rest)| rest))
            .unwrap_or(tail);
        stderr = format!("{head}[THIS HOST]: [SIZE]){rest}");
    }
    if let Some((head, tail)) = stderr.split_once("(online: ") {
        let rest = tail.split_once(')').map_or("", |(_, rest)| rest);
        stderr = format!("{head}(online: [THIS HOST]){rest}");
    }
    stderr
}

fn code(out: &Output) -> Option<i32> {
    out.status.code()
}

/// Stdout and stderr, for messages and searches.
fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// A plan for the two guests built from a real plan of this host.
/// This host has 2 CPUs and no SMT, so no two 2-vCPU guests can have cores
/// of their own; `apply` applies what a plan says without re-planning, so the
/// test takes the planner's plan for one 1-vCPU VM (its host, fingerprint
/// and format) and gives each guest both CPUs, crossed so that every pin is
/// visible: a: vCPU0→`a0`, vCPU1→`a1`, emulator `ae`; b likewise.
fn two_guest_plan(base: &Value, names: &[String], a: [u32; 3], b: [u32; 3]) -> Value {
    let mut plan = base.clone();
    let template = plan["vms"][0].clone();
    let vm = |name: &str, p: [u32; 3]| {
        let mut v = template.clone();
        v["name"] = json!(name);
        v["vcpus"] = json!([{"vcpu": 0, "cpu": p[0]}, {"vcpu": 1, "cpu": p[1]}]);
        v["cpus"] = json!("0-1");
        v["emulator_cpus"] = json!(p[2].to_string());
        v
    };
    plan["vms"] = json!([vm(&names[0], a), vm(&names[1], b)]);
    plan
}

fn expect_affinity(lab: &Lab, name: &str, p: [u32; 3]) {
    let all = lab.affinities();
    let got = &all[name];
    assert_eq!(got.get("CPU 0"), Some(&p[0].to_string()), "{name}: {got:?}");
    assert_eq!(got.get("CPU 1"), Some(&p[1].to_string()), "{name}: {got:?}");
    assert_eq!(
        got.get("emulator"),
        Some(&p[2].to_string()),
        "{name}: {got:?}"
    );
}

#[test]
fn apply_is_verified_all_or_nothing_and_reversible() {
    let Some(uri) = util::libvirt_uri("no live guests") else {
        return;
    };
    let _turn = crate::util::live_guests_turn();
    if !cfg!(feature = "fault-injection") {
        panic!("run with --features pinplan-cli/fault-injection (scripts/test.sh does)");
    }
    let lab = Lab::two_running_guests(&uri, "apl");
    let (a, b) = (lab.guests.names[0].clone(), lab.guests.names[1].clone());

    // A real plan of this host, as a base (b floats: ignored, since the
    // plans below pin it too).
    lab.write(
        "spec.toml",
        &format!("[host]\nreserved_cores = 1\n[defaults]\nthreads = \"prefer\"\n[[vm]]\nname = \"{a}\"\nvcpus = 1\n[[ignore]]\nname = \"{b}\"\n"),
    );
    let out = lab.pinplan(
        &["plan", "spec.toml", "--connect", &uri, "--out", "base"],
        &[],
    );
    assert_eq!(code(&out), Some(0), "{}", text(&out));
    let base: Value = serde_json::from_str(
        &std::fs::read_to_string(lab.dir.path("base/plan.json")).unwrap_or_default(),
    )
    .unwrap();
    let write_plan = |file: &str, plan: &Value| lab.write(file, &plan.to_string());
    let pa = [1, 0, 1];
    let pb = [0, 1, 0];
    let plan1 = write_plan(
        "plan1.json",
        &two_guest_plan(&base, &lab.guests.names, pa, pb),
    );

    // Dry run: nothing changes.
    let before = lab.state();
    let out = lab.pinplan(&["apply", &plan1, "--connect", &uri, "--dry-run"], &[]);
    assert_eq!(code(&out), Some(0), "{}", text(&out));
    assert!(text(&out).contains("nothing was changed"), "{}", text(&out));
    assert_eq!(lab.state(), before);
    // Issue 15, item 5: the VMs a plan does not place are named, untouched.
    let mut partial = two_guest_plan(&base, &lab.guests.names, pa, pb);
    partial["unplaced"] = json!(["ghost-vm"]);
    let partial = write_plan("partial.json", &partial);
    let out = lab.pinplan(&["apply", &partial, "--connect", &uri, "--dry-run"], &[]);
    assert_eq!(code(&out), Some(0), "{}", text(&out));
    assert!(
        text(&out).contains(
            "not placed by the plan, so not touched (they keep their current pins): ghost-vm"
        ),
        "{}",
        text(&out)
    );

    // Preconditions: each refusal is exit 2 and changes nothing.
    let mut wrong_count = two_guest_plan(&base, &lab.guests.names, pa, pb);
    wrong_count["vms"][1]["vcpus"] =
        json!([{"vcpu": 0, "cpu": 0}, {"vcpu": 1, "cpu": 1}, {"vcpu": 2, "cpu": 1}]);
    let mut unknown = two_guest_plan(&base, &lab.guests.names, pa, pb);
    unknown["vms"][0]["name"] = json!(format!("apl-nosuch-{}", std::process::id()));
    let mut other_host = two_guest_plan(&base, &lab.guests.names, pa, pb);
    other_host["host"]["fingerprint"] = json!("fnv1a64:0000000000000000");
    let mut no_cpu = two_guest_plan(&base, &lab.guests.names, pa, pb);
    no_cpu["vms"][1]["vcpus"][1]["cpu"] = json!(64);
    for (file, plan, why) in [
        (
            "count.json",
            &wrong_count,
            "it has 2 vCPUs (config), the plan 3",
        ),
        ("unknown.json", &unknown, "no domain"),
        // Issue 31: another host's plan is one error, as in every command
        // (the plan's checks, before any VM's), and so is a CPU it lacks.
        (
            "other.json",
            &other_host,
            "this plan was made for qemu:///system",
        ),
        (
            "nocpu.json",
            &no_cpu,
            "uses CPU 64, which this host (qemu:///system) does not have",
        ),
    ] {
        let path = write_plan(file, plan);
        let out = lab.pinplan(&["apply", &path, "--connect", &uri], &[]);
        assert_eq!(code(&out), Some(2), "{file}: {}", text(&out));
        assert!(text(&out).contains(why), "{file}: {}", text(&out));
        if !file.starts_with("other") && !file.starts_with("nocpu") {
            assert!(text(&out).contains("nothing was changed"), "{}", text(&out));
        }
        assert_eq!(lab.state(), before, "{file} changed something");
        insta::assert_snapshot!(file.replace(".json", ""), this_host(&out, &base));
    }

    // Apply: the QEMU threads and the config carry the plan.
    let out = lab.pinplan(
        &["apply", &plan1, "--connect", &uri, "--journal", "j1.json"],
        &[],
    );
    assert_eq!(code(&out), Some(0), "{}", text(&out));
    eprintln!("{}", text(&out));
    expect_affinity(&lab, &a, pa);
    expect_affinity(&lab, &b, pb);
    let config = virsh(&uri, &["dumpxml", "--inactive", &a]);
    for pin in [
        "<vcpupin vcpu='0' cpuset='1'/>",
        "<vcpupin vcpu='1' cpuset='0'/>",
        "<emulatorpin cpuset='1'/>",
    ] {
        assert!(config.contains(pin), "{pin} missing:\n{config}");
    }
    // Issue 15, item 2: an existing journal is never overwritten, even when
    // the plan would change something; the refusal comes before any change.
    let journal_before = std::fs::read(lab.dir.path("j1.json")).unwrap_or_default();
    let plan_back = write_plan(
        "plan-back.json",
        &two_guest_plan(&base, &lab.guests.names, pb, pa),
    );
    let state = lab.state();
    let out = lab.pinplan(
        &[
            "apply",
            &plan_back,
            "--connect",
            &uri,
            "--journal",
            "j1.json",
        ],
        &[],
    );
    assert_eq!(code(&out), Some(2), "{}", text(&out));
    assert!(text(&out).contains("never overwritten"), "{}", text(&out));
    assert!(text(&out).contains("--journal j1-2.json"), "{}", text(&out));
    assert_eq!(lab.state(), state, "a refused journal changed something");
    assert_eq!(
        std::fs::read(lab.dir.path("j1.json")).unwrap_or_default(),
        journal_before,
        "the journal was overwritten"
    );
    // Again: already in effect, nothing to do.
    let out = lab.pinplan(&["apply", &plan1, "--connect", &uri], &[]);
    assert_eq!(code(&out), Some(0), "{}", text(&out));
    assert!(text(&out).contains("already in effect"), "{}", text(&out));
    // The config pins hold across a restart.
    for name in &lab.guests.names {
        virsh(&uri, &["destroy", name]);
        virsh(&uri, &["start", name]);
    }
    expect_affinity(&lab, &a, pa);
    expect_affinity(&lab, &b, pb);

    // A fault on the second VM: both are back exactly as they were.
    let before = lab.state();
    let plan2 = write_plan(
        "plan2.json",
        &two_guest_plan(&base, &lab.guests.names, pb, pa),
    );
    // a takes 6 pin calls (2 vCPUs + emulator, live and config); 8 is b's second.
    let out = lab.pinplan(
        &["apply", &plan2, "--connect", &uri, "--journal", "j2.json"],
        &[("PINPLAN_FAULT_PIN_CALL", "8")],
    );
    assert_eq!(code(&out), Some(1), "{}", text(&out));
    assert!(text(&out).contains("back as it was"), "{}", text(&out));
    assert_eq!(lab.state(), before, "a fault left a change behind");

    // Killed mid-apply (abort at the same call): a is changed, b half; the
    // journal brings both back.
    let out = lab.pinplan(
        &["apply", &plan2, "--connect", &uri, "--journal", "j3.json"],
        &[
            ("PINPLAN_FAULT_PIN_CALL", "8"),
            ("PINPLAN_FAULT_MODE", "abort"),
        ],
    );
    assert_eq!(code(&out), None, "expected an abort: {}", text(&out));
    assert_ne!(lab.state(), before, "the abort came before any change");
    expect_affinity(&lab, &a, pb);
    let journal = arg(&lab.dir.path("j3.json")).to_owned();
    let out = lab.pinplan(&["apply", "--rollback", &journal, "--connect", &uri], &[]);
    assert_eq!(code(&out), Some(0), "{}", text(&out));
    assert_eq!(lab.state(), before, "--rollback did not restore");
    assert!(Path::new(&journal).exists());

    // A journal for another URI is refused.
    let out = lab.pinplan(
        &[
            "apply",
            "--rollback",
            &journal,
            "--connect",
            "test:///default",
        ],
        &[],
    );
    assert_eq!(code(&out), Some(2), "{}", text(&out));
    insta::assert_snapshot!("journal-for-another-uri", this_host(&out, &base));

    // Issue 14, defect 11: a failure on the very first pin call changed
    // nothing, and says so (it used to say "NOT as they were").
    let before = lab.state();
    let out = lab.pinplan(
        &["apply", &plan2, "--connect", &uri, "--journal", "j6.json"],
        &[("PINPLAN_FAULT_PIN_CALL", "1")],
    );
    assert_eq!(code(&out), Some(1), "{}", text(&out));
    assert!(text(&out).contains("nothing was changed"), "{}", text(&out));
    assert!(!text(&out).contains("NOT as they were"), "{}", text(&out));
    assert_eq!(
        lab.state(),
        before,
        "the first call's failure changed something"
    );

    // Issue 14, defect 1: two applies at once. The lock lets one apply; the
    // other waits, then finds the plan in effect. Its journal rolls back
    // exactly.
    let before = lab.state();
    let spawn = |journal: &str| {
        util::command()
            .args(["apply", &plan2, "--connect", &uri, "--journal", journal])
            .current_dir(lab.dir.root())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("cannot run pinplan")
    };
    let first = spawn("j4.json");
    std::thread::sleep(std::time::Duration::from_millis(10));
    let second = spawn("j5.json");
    let outs = [first, second].map(|c| c.wait_with_output().expect("pinplan ran"));
    for out in &outs {
        assert_eq!(code(out), Some(0), "{}", text(out));
    }
    let applied: Vec<usize> = (0..2)
        .filter(|&i| text(&outs[i]).contains("applied: 2 VMs"))
        .collect();
    let in_effect = (0..2)
        .filter(|&i| text(&outs[i]).contains("already in effect"))
        .count();
    assert_eq!(
        applied.len(),
        1,
        "{}\n---\n{}",
        text(&outs[0]),
        text(&outs[1])
    );
    assert_eq!(in_effect, 1, "{}\n---\n{}", text(&outs[0]), text(&outs[1]));
    expect_affinity(&lab, &a, pb);
    expect_affinity(&lab, &b, pa);
    let journal = arg(&lab.dir.path(["j4.json", "j5.json"][applied[0]])).to_owned();
    let out = lab.pinplan(&["apply", "--rollback", &journal, "--connect", &uri], &[]);
    assert_eq!(code(&out), Some(0), "{}", text(&out));
    assert_eq!(
        lab.state(),
        before,
        "the concurrent apply's journal did not restore"
    );

    // Issue 14, defect 11: the connection drops mid-apply (as when libvirtd
    // restarts). The restore reconnects once instead of retrying on the dead
    // connection, and both VMs are back.
    let before = lab.state();
    let drop_own_connection = "for id in $(virt-admin srv-clients-list libvirtd | awk 'NR>2 {print $1}'); do \
         virt-admin client-info libvirtd \"$id\" | grep -q \"unix_process_id: *$PINPLAN_PID\\$\" && \
         virt-admin client-disconnect libvirtd \"$id\"; done";
    let out = lab.pinplan(
        &["apply", &plan2, "--connect", &uri, "--journal", "j7.json"],
        &[
            ("PINPLAN_FAULT_PIN_CALL", "8"),
            ("PINPLAN_FAULT_EXEC", drop_own_connection),
        ],
    );
    assert_eq!(code(&out), Some(1), "{}", text(&out));
    assert!(text(&out).contains("back as it was"), "{}", text(&out));
    assert_eq!(
        lab.state(),
        before,
        "the restore after a dropped connection"
    );

    // Issue 15, item 6: --live on a shut-off domain is refused (it said
    // "already in effect" while the config was not pinned as planned).
    virsh(&uri, &["destroy", &b]);
    let before = lab.state();
    let out = lab.pinplan(
        &[
            "apply",
            &plan2,
            "--connect",
            &uri,
            "--live",
            "--journal",
            "j8.json",
        ],
        &[],
    );
    assert_eq!(code(&out), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains(&format!(
            "{b}: not running: nothing to pin live (use --config, or start it)"
        )),
        "{}",
        text(&out)
    );
    assert!(
        !lab.dir.path("j8.json").exists(),
        "a refusal wrote a journal"
    );
    assert_eq!(lab.state(), before, "a refused --live changed something");

    // Issue 15, item 7: rollback friction. b is shut off: a config-only
    // apply, then b is started; the rollback (no --connect: the journal's
    // URI) restores the config and says the live pins are the planned ones.
    // (--force: on this 2-CPU host the test's plans give both guests the
    // same cores, and with --vm the other guest is in the way.)
    let before_xml = lab.state().1;
    let out = lab.pinplan(
        &[
            "apply",
            &plan2,
            "--connect",
            &uri,
            "--config",
            "--vm",
            &b,
            "--journal",
            "j9.json",
            "--force",
        ],
        &[],
    );
    assert_eq!(code(&out), Some(0), "{}", text(&out));
    virsh(&uri, &["start", &b]);
    // A dry run says what would be restored, changes nothing.
    let state = lab.state();
    let out = lab.pinplan(&["apply", "--rollback", "j9.json", "--dry-run"], &[]);
    assert_eq!(code(&out), Some(0), "{}", text(&out));
    assert!(
        text(&out).contains(&format!("{b}: config would be restored"))
            && text(&out).contains("started since the apply")
            && text(&out).contains("nothing was changed"),
        "{}",
        text(&out)
    );
    assert_eq!(lab.state(), state, "a rollback dry run changed something");
    let out = lab.pinplan(&["apply", "--rollback", "j9.json"], &[]);
    assert_eq!(code(&out), Some(0), "{}", text(&out));
    assert!(
        text(&out).contains(&format!(
            "note: {b}: config restored; it was started after the apply"
        )),
        "{}",
        text(&out)
    );
    assert_eq!(lab.state().1, before_xml, "the config was not restored");

    // b deleted and defined again (a new UUID): the rollback names it and
    // offers --redefine, which puts the journal's definition onto it.
    let out = lab.pinplan(
        &[
            "apply",
            &plan1,
            "--connect",
            &uri,
            "--vm",
            &b,
            "--journal",
            "j10.json",
            "--force",
        ],
        &[],
    );
    assert_eq!(code(&out), Some(0), "{}", text(&out));
    virsh(&uri, &["destroy", &b]);
    virsh(&uri, &["undefine", &b]);
    let fresh = lab.write(
        "fresh.xml",
        &util::guest_xml(util::guest_type(&uri), &b, 2, ""),
    );
    virsh(&uri, &["define", &fresh]);
    let out = lab.pinplan(&["apply", "--rollback", "j10.json"], &[]);
    assert_eq!(code(&out), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains(&format!("{b}: its UUID is now"))
            && text(&out).contains("--redefine")
            && text(&out).contains("restored: none"),
        "{}",
        text(&out)
    );
    let out = lab.pinplan(&["apply", "--rollback", "j10.json", "--redefine"], &[]);
    assert_eq!(code(&out), Some(0), "{}", text(&out));
    assert!(
        text(&out).contains("redefined from the journal"),
        "{}",
        text(&out)
    );
    let journal: Value = serde_json::from_str(
        &std::fs::read_to_string(lab.dir.path("j10.json")).unwrap_or_default(),
    )
    .unwrap();
    let pins = |xml: &str| -> Vec<String> {
        xml.lines()
            .map(str::trim)
            .filter(|l| l.starts_with("<vcpupin") || l.starts_with("<emulatorpin"))
            .map(str::to_owned)
            .collect()
    };
    let journalled = pins(journal["vms"][0]["config_xml"].as_str().unwrap_or_default());
    let now = pins(&virsh(&uri, &["dumpxml", "--inactive", &b]));
    assert_eq!(
        now, journalled,
        "--redefine did not restore the journal's config"
    );
    virsh(&uri, &["start", &b]);

    // Issue 15, shell conventions: `--format json` for apply and rollback.
    let state = lab.state();
    let out = lab.pinplan(
        &[
            "apply",
            &plan2,
            "--connect",
            &uri,
            "--journal",
            "j11.json",
            "--format",
            "json",
        ],
        &[],
    );
    assert_eq!(code(&out), Some(0), "{}", text(&out));
    let applied: Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&out)));
    assert_eq!(applied["status"], "applied", "{applied}");
    assert_eq!(applied["journal"], "j11.json", "{applied}");
    let vms = applied["vms"].as_array().cloned().unwrap_or_default();
    assert_eq!(vms.len(), 2, "{applied}");
    assert!(
        vms.iter().all(|v| v["pin_calls"].as_u64() > Some(0)),
        "{applied}"
    );
    let out = lab.pinplan(
        &["apply", "--rollback", "j11.json", "--format", "json"],
        &[],
    );
    assert_eq!(code(&out), Some(0), "{}", text(&out));
    let rolled: Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&out)));
    assert_eq!(rolled["status"], "rolled-back", "{rolled}");
    assert_eq!(
        rolled["restored"].as_array().map(Vec::len),
        Some(2),
        "{rolled}"
    );
    assert_eq!(lab.state(), state, "the JSON apply's rollback");

    // Issue 15, item 8: `report --connect` shows pending pins — a running
    // domain whose config pins differ from its live ones.
    let state = lab.state();
    // Whichever of the two plans is not in effect now changes the config.
    let mut changed = false;
    for plan in [&plan1, &plan2] {
        let out = lab.pinplan(
            &[
                "apply",
                plan,
                "--connect",
                &uri,
                "--config",
                "--journal",
                "j12.json",
            ],
            &[],
        );
        assert_eq!(code(&out), Some(0), "{}", text(&out));
        if !text(&out).contains("already in effect") {
            changed = true;
            break;
        }
    }
    assert!(changed, "both plans were in effect already");
    let out = lab.pinplan(&["report", "--connect", &uri], &[]);
    let report = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        report.contains(&format!(
            "note: {a}: config pins differ from the live ones (vCPU 0: live "
        )) && report.contains("they take effect at its next start"),
        "{report}"
    );
    let out = lab.pinplan(&["report", "--connect", &uri, "--format", "json"], &[]);
    let json: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    assert!(
        json["notes"].to_string().contains("config pins differ"),
        "{json}"
    );
    let out = lab.pinplan(&["apply", "--rollback", "j12.json"], &[]);
    assert_eq!(code(&out), Some(0), "{}", text(&out));
    assert_eq!(lab.state(), state, "the config-only apply's rollback");
}

/// The journal path an apply printed before its first change (`journal: J
/// (undo: …)`).
fn journal_of(out: &Output) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout);
    stdout
        .lines()
        .find_map(|l| l.strip_prefix("journal: "))
        .and_then(|rest| rest.split(" (undo: ").next())
        .unwrap_or_else(|| panic!("no journal line: {}", text(out)))
        .to_owned()
}

fn journal_status(path: &str) -> String {
    let journal: Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap_or_default()).unwrap();
    journal["status"].as_str().unwrap_or_default().to_owned()
}

/// Issue 27, item 4: SIGINT at each of the first five pin calls (fault
/// injection sends it and waits for the handler) leaves every VM exactly as
/// before — taskset on the QEMU threads, `virsh dumpxml --inactive` — exits
/// 130 and says what it restored; SIGTERM exits 143; a second SIGINT stops
/// the restore and names the rollback; a second apply after a SIGKILL at pin
/// call 2 refuses with the rollback command, which restores the original
/// state. Journals go to the state directory (`PINPLAN_STATE_DIR`).
#[test]
fn issue_27_signals_mid_apply_restore_and_unfinished_journals_refuse() {
    let Some(uri) = util::libvirt_uri("no live guests") else {
        return;
    };
    let _turn = crate::util::live_guests_turn();
    if !cfg!(feature = "fault-injection") {
        panic!("run with --features pinplan-cli/fault-injection (scripts/test.sh does)");
    }
    let lab = Lab::two_running_guests(&uri, "apl-sig");
    let state_dir = lab.dir.path("state");
    let state_arg = arg(&state_dir).to_owned();
    let run = |args: &[&str], env: &[(&str, &str)]| {
        let mut all = vec![("PINPLAN_STATE_DIR", state_arg.as_str())];
        all.extend_from_slice(env);
        lab.pinplan(args, &all)
    };
    let (a, b) = (lab.guests.names[0].clone(), lab.guests.names[1].clone());
    // b floats: ignored, since the plan below pins it too.
    lab.write(
        "spec.toml",
        &format!("[host]\nreserved_cores = 1\n[defaults]\nthreads = \"prefer\"\n[[vm]]\nname = \"{a}\"\nvcpus = 1\n[[ignore]]\nname = \"{b}\"\n"),
    );
    let out = run(
        &["plan", "spec.toml", "--connect", &uri, "--out", "base"],
        &[],
    );
    assert_eq!(code(&out), Some(0), "{}", text(&out));
    let base: Value = serde_json::from_str(
        &std::fs::read_to_string(lab.dir.path("base/plan.json")).unwrap_or_default(),
    )
    .unwrap();
    let plan = lab.write(
        "plan.json",
        &two_guest_plan(&base, &lab.guests.names, [1, 0, 1], [0, 1, 0]).to_string(),
    );
    let before = lab.state();
    // --force: other guests on this libvirtd (other tests, other people)
    // must not turn these applies into refusals. It does not change what
    // is tested, except where the unfinished journal's refusal is (below,
    // without it).
    let apply = ["apply", plan.as_str(), "--connect", uri.as_str(), "--force"];
    let unforced = &apply[..4];

    // SIGINT at pin calls 1 to 5 (a's live and config pins), SIGTERM at 3.
    let mut cases: Vec<(u32, &str, i32)> = (1..=5).map(|n| (n, "sigint", 130)).collect();
    cases.push((3, "sigterm", 143));
    for (n, mode, status) in cases {
        let call = n.to_string();
        let out = run(
            &apply,
            &[
                ("PINPLAN_FAULT_PIN_CALL", &call),
                ("PINPLAN_FAULT_MODE", mode),
            ],
        );
        assert_eq!(code(&out), Some(status), "{mode} at {n}: {}", text(&out));
        let journal = journal_of(&out);
        let said = if n == 1 {
            format!(
                "error: interrupted (SIGINT) before the first change: nothing was changed; journal: {journal}"
            )
        } else {
            let signal = if mode == "sigint" {
                "SIGINT"
            } else {
                "SIGTERM"
            };
            format!("error: interrupted ({signal}): restored {a} as they were; journal: {journal}")
        };
        assert!(text(&out).contains(&said), "{mode} at {n}: {}", text(&out));
        assert_eq!(lab.state(), before, "{mode} at pin call {n} left a change");
        assert_eq!(journal_status(&journal), "rolled-back", "{mode} at {n}");
        assert!(
            journal.starts_with(&state_arg),
            "{journal} is not in {state_arg}"
        );
    }
    let mode = std::fs::metadata(&state_dir).unwrap().permissions();
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&mode) & 0o777,
        0o700
    );

    // A second SIGINT stops the restore: it says how to finish, and the
    // journal stays unfinished until that rollback.
    let twice = "kill -s INT $PINPLAN_PID; sleep 0.5; kill -s INT $PINPLAN_PID; sleep 0.5";
    let out = run(
        &apply,
        &[
            ("PINPLAN_FAULT_PIN_CALL", "3"),
            ("PINPLAN_FAULT_MODE", "continue"),
            ("PINPLAN_FAULT_EXEC", twice),
        ],
    );
    assert_eq!(code(&out), Some(130), "{}", text(&out));
    let journal = journal_of(&out);
    assert!(
        text(&out).contains(&format!(
            "interrupted again: the host is partly restored; finish with: pinplan apply --rollback {journal} --connect {uri}"
        )),
        "{}",
        text(&out)
    );
    assert_ne!(lab.state(), before, "the restore was not stopped");
    assert_eq!(journal_status(&journal), "applying");
    let out = run(&["apply", "--rollback", &journal], &[]);
    assert_eq!(code(&out), Some(0), "{}", text(&out));
    assert_eq!(lab.state(), before, "the rollback after a second SIGINT");
    assert_eq!(journal_status(&journal), "rolled-back");

    // SIGKILL at pin call 2: a is half changed, the journal unfinished.
    let out = run(
        &apply,
        &[
            ("PINPLAN_FAULT_PIN_CALL", "2"),
            ("PINPLAN_FAULT_MODE", "sigkill"),
        ],
    );
    assert_eq!(code(&out), None, "expected SIGKILL: {}", text(&out));
    let killed = journal_of(&out);
    assert_ne!(lab.state(), before, "the kill came before any change");
    // The next apply refuses, naming the rollback, and changes nothing.
    let half = lab.state();
    let out = run(unforced, &[]);
    assert_eq!(code(&out), Some(2), "{}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!(
            "error: an earlier apply on {uri} did not finish (journal {killed}, started "
        )) && stderr.contains(&format!(
            "): undo it first with pinplan apply --rollback {killed}"
        )),
        "{stderr}"
    );
    assert_eq!(lab.state(), half, "the refused apply changed something");
    // The rollback restores the original state, not the half one.
    let out = run(&["apply", "--rollback", &killed], &[]);
    assert_eq!(code(&out), Some(0), "{}", text(&out));
    assert_eq!(lab.state(), before, "the rollback after SIGKILL");
    assert_eq!(journal_status(&killed), "rolled-back");
    // Then apply goes ahead, and finishes.
    let out = run(&apply, &[]);
    assert_eq!(code(&out), Some(0), "{}", text(&out));
    assert_eq!(journal_status(&journal_of(&out)), "applied");
}

/// `virsh iothreadinfo NAME [--config]`: I/O thread id → CPUs.
fn iothreadinfo(uri: &str, name: &str, config: bool) -> BTreeMap<u32, String> {
    let mut args = vec!["iothreadinfo", name];
    if config {
        args.push("--config");
    }
    virsh(uri, &args)
        .lines()
        .filter_map(|l| {
            let mut words = l.split_whitespace();
            Some((words.next()?.parse().ok()?, words.next()?.to_owned()))
        })
        .collect()
}

/// One guest `PREFIX-PID` to define (undefined when dropped), its name and
/// a scratch directory.
fn one_guest(uri: &str, prefix: &str) -> (Guests, String, TempDir) {
    let name = format!("{prefix}-{}", std::process::id());
    let guests = Guests {
        uri: uri.to_owned(),
        names: vec![name.clone()],
    };
    (guests, name, TempDir::new())
}

/// Issue 31: a plan numbers its I/O threads 1…n; apply pins the domain's
/// own ids (here 8), live and in the config, and refuses a plan whose count
/// of I/O threads is not the domain's (apply does not add or remove them).
#[test]
fn issue_31_apply_pins_the_domains_own_iothread_ids() {
    let Some(uri) = util::libvirt_uri("apply of a domain's own I/O thread ids") else {
        return;
    };
    let _turn = crate::util::live_guests_turn();
    let (guests, name, dir) = one_guest(&uri, "apl-io");
    let io =
        "  <iothreads>1</iothreads>\n  <iothreadids>\n    <iothread id='8'/>\n  </iothreadids>\n";
    let domain = dir.write(
        "d.xml",
        util::guest_xml(util::guest_type(&uri), &name, 1, io),
    );
    virsh(&uri, &["define", arg(&domain)]);
    virsh(&uri, &["start", &name]);
    let plan = |iothreads: u32| {
        let spec = dir.write(
            &format!("io{iothreads}.toml"),
            format!("[host]\nreserved_cores = 1\n\n[[vm]]\nname = \"{name}\"\nvcpus = 1\niothreads = {iothreads}\n"),
        );
        let out_dir = dir.path(&format!("io{iothreads}"));
        let out = util::pinplan([
            "plan",
            arg(&spec),
            "--connect",
            &uri,
            "--out",
            arg(&out_dir),
        ]);
        assert_eq!(code(&out), Some(0), "{}", text(&out));
        out_dir.join("plan.json")
    };
    // Both planned before the first apply: once pinned, the VM is kept
    // where it runs.
    let (one, two) = (plan(1), plan(2));
    let json: Value = serde_json::from_str(&std::fs::read_to_string(&one).unwrap()).unwrap();
    assert_eq!(json["vms"][0]["iothreads"][0]["iothread"], 1, "{json}");
    let cpus = json["vms"][0]["iothreads"][0]["cpus"]
        .as_str()
        .unwrap()
        .to_owned();
    let journal = dir.path("j.json");
    let out = util::pinplan(["apply", arg(&one), "--journal", arg(&journal)]);
    assert_eq!(code(&out), Some(0), "{}", text(&out));
    let want = BTreeMap::from([(8, cpus)]);
    assert_eq!(iothreadinfo(&uri, &name, false), want, "live");
    assert_eq!(iothreadinfo(&uri, &name, true), want, "config");

    // Two planned, one in the domain: refused, nothing changed.
    let before = (
        iothreadinfo(&uri, &name, false),
        iothreadinfo(&uri, &name, true),
    );
    let out = util::pinplan(["apply", arg(&two), "--journal", arg(&dir.path("j2.json"))]);
    assert_eq!(code(&out), Some(2), "{}", text(&out));
    assert!(
        text(&out)
            .contains("it has 1 I/O thread (id 8) and the plan pins 2: plan with iothreads = 1"),
        "{}",
        text(&out)
    );
    assert_eq!(
        (
            iothreadinfo(&uri, &name, false),
            iothreadinfo(&uri, &name, true)
        ),
        before
    );
    drop(guests);
}

/// Issue 31, D6 through apply: writing the plan's memory into a config whose
/// huge pages are of another size says so before anything changes.
#[test]
fn issue_31_apply_says_when_a_configs_huge_pages_change_size() {
    let Some(uri) = util::libvirt_uri("apply's note on huge pages") else {
        return;
    };
    let _turn = crate::util::live_guests_turn();
    let (_guests, name, dir) = one_guest(&uri, "apl-hp");
    let xml = util::guest_xml(util::guest_type(&uri), &name, 1, "").replace(
        "  <vcpu",
        "  <memoryBacking>\n    <hugepages>\n      <page size='2048' unit='KiB'/>\n    </hugepages>\n  </memoryBacking>\n  <vcpu",
    );
    virsh(&uri, &["define", arg(&dir.write("d.xml", xml))]);
    let spec = dir.write(
        "hp.toml",
        format!("[host]\nreserved_cores = 1\n\n[[vm]]\nname = \"{name}\"\nvcpus = 1\nhugepages = \"none\"\n"),
    );
    let out_dir = dir.path("hp");
    let out = util::pinplan([
        "plan",
        arg(&spec),
        "--connect",
        &uri,
        "--out",
        arg(&out_dir),
    ]);
    assert_eq!(code(&out), Some(0), "{}", text(&out));
    let plan = out_dir.join("plan.json");
    let out = util::pinplan([
        "apply",
        arg(&plan),
        "--config",
        "--journal",
        arg(&dir.path("j.json")),
    ]);
    assert_eq!(code(&out), Some(0), "{}", text(&out));
    assert!(
        text(&out).contains(&format!(
            "warning: {name}: huge pages: the domain's 2 MiB pages become normal pages, as planned"
        )),
        "{}",
        text(&out)
    );
    let config = virsh(&uri, &["dumpxml", "--inactive", &name]);
    assert!(!config.contains("<hugepages"), "{config}");
}
