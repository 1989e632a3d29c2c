//! `pinplan watch`'s offline sides (issue 30): the systemd unit and the hook
//! it writes, the hook's side (`--admit`) when no watcher answers, and the
//! usage errors of `watch`, `plan` without a spec and `repack`. The service
//! itself runs on the real libvirtd in scripts/watch-live.sh, its decisions
//! on the test driver in the `watch` bench program (both run by
//! scripts/test.sh).

use crate::util::{self, arg, TempDir};

#[test]
fn the_unit_runs_this_watcher_with_its_spec_by_absolute_path() {
    let dir = TempDir::new();
    let spec = dir.write("host.toml", "[host]\nreserved_cores = 1\n");
    let unit = util::pinplan_ok(&[
        "watch",
        "--emit",
        "systemd",
        "--connect",
        "qemu:///system",
        arg(&spec),
    ]);
    let exec = unit
        .lines()
        .find(|l| l.starts_with("ExecStart="))
        .unwrap_or_else(|| panic!("no ExecStart= in:\n{unit}"));
    assert!(exec.contains("watch --connect qemu:///system"), "{exec}");
    assert!(exec.contains(&spec.display().to_string()), "{exec}");
    assert!(spec.is_absolute());
    for line in [
        "ExecReload=/bin/kill -HUP $MAINPID",
        "KillSignal=SIGTERM",
        "Restart=on-failure",
    ] {
        assert!(
            unit.lines().any(|l| l == line),
            "{line} missing from:\n{unit}"
        );
    }
}

#[test]
fn the_hook_is_written_beside_others_and_never_over_a_foreign_one() {
    let dir = TempDir::new();
    let hooks = dir.path("hooks");
    std::fs::create_dir_all(hooks.join("qemu.d")).unwrap();
    let isolate = hooks.join("qemu.d/pinplan-isolate");
    std::fs::write(&isolate, "#!/bin/sh\n# isolate's\n").unwrap();
    let socket = dir.path("w.sock");
    let args = [
        "watch",
        "--emit",
        "hook",
        arg(&hooks),
        "--socket",
        arg(&socket),
    ];
    let out = util::pinplan_ok(&args);
    let script = hooks.join("qemu.d/pinplan-admit");
    assert_eq!(out.trim(), script.display().to_string());
    let text = std::fs::read_to_string(&script).unwrap();
    assert!(text.contains("\"prepare begin\")"), "{text}");
    assert!(text.contains("watch --admit=\"$1\""), "{text}");
    assert!(text.contains(&socket.display().to_string()), "{text}");
    assert!(!text.contains("--strict"), "{text}");
    // Its own is replaced (now --strict); a foreign script is not.
    let mut strict = args.to_vec();
    strict.push("--strict");
    util::pinplan_ok(&strict);
    assert!(std::fs::read_to_string(&script)
        .unwrap()
        .contains("--strict"));
    std::fs::write(&script, "#!/bin/sh\nexit 0\n").unwrap();
    let out = util::pinplan(args);
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        util::describe(&args, &out)
    );
    assert_eq!(
        std::fs::read_to_string(&script).unwrap(),
        "#!/bin/sh\nexit 0\n"
    );
    assert_eq!(
        std::fs::read_to_string(&isolate).unwrap(),
        "#!/bin/sh\n# isolate's\n"
    );
}

/// No watcher answers: the start is let through with a warning, or with
/// --strict refused with the reason on standard error (what libvirt shows).
#[test]
fn without_a_watcher_a_start_goes_through_unless_strict() {
    let dir = TempDir::new();
    let socket = dir.path("none.sock");
    let xml = "<domain type='kvm'><name>vm1</name><vcpu>1</vcpu></domain>";
    let run = |strict: bool| {
        let mut cmd = util::command();
        cmd.args([
            "watch",
            "--admit=vm1",
            "--socket",
            arg(&socket),
            "--timeout-ms",
            "300",
        ]);
        if strict {
            cmd.arg("--strict");
        }
        cmd.stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        let mut child = cmd.spawn().unwrap();
        use std::io::Write as _;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(xml.as_bytes())
            .unwrap();
        child.wait_with_output().unwrap()
    };
    let out = run(false);
    assert_eq!(out.status.code(), Some(0));
    let err = util::text(&out.stderr);
    assert!(
        err.contains("pinplan watch did not answer") && err.contains("vm1 starts unchecked"),
        "{err}"
    );
    let out = run(true);
    assert_eq!(out.status.code(), Some(1));
    let err = util::text(&out.stderr);
    assert!(err.contains("pinplan: vm1 may not start:"), "{err}");
    assert!(err.contains(&socket.display().to_string()), "{err}");
}

#[test]
fn usage_errors_say_what_to_give() {
    for (args, says) in [
        (&["watch"][..], "pinplan watch needs --connect URI"),
        (&["watch", "--emit", "cron"][..], "--emit takes `systemd`"),
        (&["plan"][..], "give a plan spec, or --connect URI"),
        (
            &["repack", "--connect", "test:///default", "--for", "0"][..],
            "--for 0: give at least one vCPU",
        ),
        (
            &["tag", "vm1", "--connect", "test:///default", "threads"][..],
            "\"threads\" is not KEY=VALUE",
        ),
    ] {
        let out = util::pinplan(args);
        assert_eq!(out.status.code(), Some(2), "{}", util::describe(args, &out));
        let err = util::text(&out.stderr);
        assert!(err.contains(says), "{args:?}: {err}");
    }
}

/// `repack --source` (else the spec's `[host] source`) plans on the
/// topology given, the domains read through `--connect`: on libvirt's test driver (16 CPUs on 2 nodes) 3 vCPUs fit
/// on one node beside the reserved CPU 0; on a captured 2-node host of 2
/// single-thread cores each, a node has 2 cores, one of node 0 the host's:
/// 3 do not fit on one node, 2 do on node 1 (CPUs 2-3), with nothing moved.
#[test]
fn repack_plans_on_the_topology_given_with_source() {
    let dir = TempDir::new();
    let spec = dir.write(
        "host.toml",
        "[host]\nreserved_cpus = \"0\"\n\n[[ignore]]\nname = \"test\"\n",
    );
    let base = [
        "repack",
        "--connect",
        "test:///default",
        "--spec",
        arg(&spec),
        "--dry-run",
    ];
    let small = "synthetic:numa:2 core:2 pu:1";
    let on_driver = util::pinplan([&base[..], &["--for", "3"]].concat());
    assert_eq!(
        on_driver.status.code(),
        Some(0),
        "{}",
        util::describe(&base, &on_driver)
    );
    let out = util::text(&on_driver.stdout);
    assert!(out.contains("(new) fits without moving anything"), "{out}");

    let too_big = util::pinplan([&base[..], &["--for", "3", "--source", small]].concat());
    assert_eq!(
        too_big.status.code(),
        Some(1),
        "{}",
        util::describe(&base, &too_big)
    );
    let err = util::text(&too_big.stderr);
    assert!(err.contains("(new) does not fit"), "{err}");

    let fits = util::pinplan([&base[..], &["--for", "2", "--source", small]].concat());
    assert_eq!(
        fits.status.code(),
        Some(0),
        "{}",
        util::describe(&base, &fits)
    );
    let out = util::text(&fits.stdout);
    assert!(
        out.contains("(new) fits: vCPUs 2-3, emulator 0 (0 vCPUs moved"),
        "{out}"
    );

    // Without --source, the spec's [host] source is the topology.
    let captured = dir.write(
        "captured.toml",
        format!(
            "[host]\nreserved_cpus = \"0\"\nsource = \"{small}\"\n\n[[ignore]]\nname = \"test\"\n"
        ),
    );
    let args = [
        "repack",
        "--connect",
        "test:///default",
        "--spec",
        arg(&captured),
        "--dry-run",
        "--for",
        "3",
    ];
    let from_spec = util::pinplan(args);
    assert_eq!(
        from_spec.status.code(),
        Some(1),
        "{}",
        util::describe(&args, &from_spec)
    );
}
