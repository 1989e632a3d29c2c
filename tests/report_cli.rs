//! `pinplan report --domains` on a real machine's topology with siblings N
//! and N+28 (x86-Intel-Broadwell-2xXeon-E5-2650Lv4.xml): sibling sharing is
//! found by core, not by CPU-number adjacency.

use std::path::PathBuf;
use std::process::{Command, Output};

const HOST: &str = "tests/fixtures/hwloc-xml/x86-Intel-Broadwell-2xXeon-E5-2650Lv4.xml";

struct Dir(PathBuf);

impl Dir {
    fn new(name: &str) -> Dir {
        let dir =
            std::env::temp_dir().join(format!("pinplan-report-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
        Dir(dir)
    }

    fn domain(&self, name: &str, pins: &[u32], emulator: &str) -> String {
        let mut cputune = String::new();
        for (i, cpu) in pins.iter().enumerate() {
            cputune.push_str(&format!("    <vcpupin vcpu='{i}' cpuset='{cpu}'/>\n"));
        }
        let text = format!(
            "<domain type='kvm'>\n  <name>{name}</name>\n  <vcpu placement='static'>{}</vcpu>\n  <cputune>\n{cputune}    <emulatorpin cpuset='{emulator}'/>\n  </cputune>\n</domain>\n",
            pins.len()
        );
        let path = self.0.join(format!("{name}.xml"));
        std::fs::write(&path, text).unwrap_or_else(|e| panic!("{e}"));
        path.display().to_string()
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn report(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_pinplan"))
        .arg("report")
        .args(args)
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
        .output()
        .unwrap_or_else(|e| panic!("cannot run pinplan: {e}"))
}

fn json(out: &Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)))
}

#[test]
fn siblings_n_and_n_plus_28_are_one_core() {
    let dir = Dir::new("siblings");
    // CPU 1's sibling is 29 (cores pair N and N+28), CPU 2's is 30.
    let a = dir.domain("vm1", &[1, 2], "0");
    let b = dir.domain("vm2", &[29, 30], "0");
    let out = report(&[
        "--domains",
        &a,
        &b,
        "--source",
        HOST,
        "--host-cpus",
        "0,28",
        "--format",
        "json",
    ]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v = json(&out);
    let conflicts = v["conflicts"].as_array().cloned().unwrap_or_default();
    assert_eq!(conflicts.len(), 1, "{conflicts:?}");
    assert_eq!(conflicts[0]["kind"], "core-shared");
    assert_eq!(conflicts[0]["severity"], "error");
    assert_eq!(conflicts[0]["cpus"], "1-2,29-30");
    assert_eq!(conflicts[0]["tenants"], serde_json::json!(["vm1", "vm2"]));

    // Adjacent CPU numbers (1 and 2) are different cores: no conflict.
    let a = dir.domain("vm1", &[1], "0");
    let b = dir.domain("vm2", &[2], "0");
    let out = report(&["--domains", &a, &b, "--source", HOST, "--host-cpus", "0,28"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

#[test]
fn same_cpu_and_host_overlap_are_errors() {
    let dir = Dir::new("errors");
    let a = dir.domain("vm1", &[3, 4], "0");
    let b = dir.domain("vm2", &[4, 28], "0");
    let out = report(&[
        "--domains",
        &a,
        &b,
        "--source",
        HOST,
        "--host-cpus",
        "0,28",
        "--format",
        "json",
    ]);
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
    let dir = Dir::new("bad");
    let bad = dir.0.join("bad.xml");
    std::fs::write(&bad, "<domain><name>x</name>\n<vcpu>two</vcpu></domain>")
        .unwrap_or_else(|e| panic!("{e}"));
    let bad = bad.display().to_string();
    for args in [
        vec!["--domains", bad.as_str(), "--source", HOST],
        vec!["--domains", "/nonexistent.xml", "--source", HOST],
        vec![
            "--domains",
            bad.as_str(),
            "--source",
            HOST,
            "--host-cpus",
            "3-1",
        ],
    ] {
        let out = report(&args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.starts_with("error: "), "{stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
        assert!(out.stdout.is_empty());
    }
}

/// Runs `virsh -c URI ARGS`, panicking with its output on failure.
fn virsh(uri: &str, args: &[&str]) -> String {
    let out = Command::new("virsh")
        .args(["-q", "-c", uri])
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run virsh: {e}"));
    assert!(
        out.status.success(),
        "virsh {args:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Destroys and undefines the test guests, even when the test fails.
struct Guests {
    uri: String,
    names: Vec<String>,
}

impl Drop for Guests {
    fn drop(&mut self) {
        for name in &self.names {
            let _ = Command::new("virsh")
                .args(["-q", "-c", &self.uri, "destroy", name])
                .output();
            let _ = Command::new("virsh")
                .args(["-q", "-c", &self.uri, "undefine", name])
                .output();
        }
    }
}

#[test]
fn live_guests_pinned_to_one_cpu_conflict_until_repinned() {
    let Ok(uri) = std::env::var("PINPLAN_TEST_LIBVIRT_URI") else {
        eprintln!("PINPLAN_TEST_LIBVIRT_URI is not set: no live guests (scripts/test.sh sets it)");
        return;
    };
    let dir = Dir::new("live");
    let pid = std::process::id();
    let guests = Guests {
        uri: uri.clone(),
        names: vec![
            format!("pinplan-report-a-{pid}"),
            format!("pinplan-report-b-{pid}"),
        ],
    };
    for name in &guests.names {
        // Tiny diskless TCG guests, both pinned on purpose to CPU 0.
        let xml = format!(
            "<domain type='qemu'>\n  <name>{name}</name>\n  <memory unit='MiB'>64</memory>\n  <vcpu placement='static'>1</vcpu>\n  <cputune>\n    <vcpupin vcpu='0' cpuset='0'/>\n    <emulatorpin cpuset='0'/>\n  </cputune>\n  <os>\n    <type arch='x86_64' machine='pc'>hvm</type>\n  </os>\n  <on_poweroff>destroy</on_poweroff>\n  <devices>\n    <emulator>/usr/bin/qemu-system-x86_64</emulator>\n    <controller type='usb' model='none'/>\n    <memballoon model='none'/>\n  </devices>\n</domain>\n"
        );
        let path = dir.0.join(format!("{name}.xml"));
        std::fs::write(&path, xml).unwrap_or_else(|e| panic!("{e}"));
        virsh(&uri, &["define", &path.display().to_string()]);
        virsh(&uri, &["start", name]);
    }
    let (a, b) = (&guests.names[0], &guests.names[1]);
    let out = report(&["--connect", &uri, "--format", "json"]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v = json(&out);
    let shared = v["conflicts"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .find(|c| c["kind"] == "cpu-shared")
        .unwrap_or_else(|| panic!("no cpu-shared conflict: {v}"));
    assert_eq!(shared["tenants"], serde_json::json!([a, b]));
    assert_eq!(shared["cpus"], "0");

    // Re-pin b live (vCPU and emulator) onto another CPU: no more errors.
    let other = if std::thread::available_parallelism().map_or(1, usize::from) > 1 {
        "1"
    } else {
        "0"
    };
    if other == "1" {
        virsh(&uri, &["vcpupin", b, "0", "1", "--live"]);
        virsh(&uri, &["emulatorpin", b, "1", "--live"]);
        let out = report(&["--connect", &uri, "--format", "json"]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stdout)
        );
    }
}
