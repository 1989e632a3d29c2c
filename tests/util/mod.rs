//! What the integration tests share: running the binary, scratch directories,
//! fixture paths, making error messages fit for a snapshot, and the live
//! libvirtd (`virsh`, guests removed even when a test fails). Nothing here
//! knows what a test checks.

use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The repository's root: the tests name files as the README does
/// (`examples/lab/b1.toml`), relative to it.
pub fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the cli package sits in the repository")
}

/// A file or directory under `tests/fixtures/`.
pub fn fixture(rel: &str) -> PathBuf {
    repo().join("tests/fixtures").join(rel)
}

/// The text of a file under `tests/fixtures/`.
pub fn fixture_text(rel: &str) -> String {
    let path = fixture(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The binary, to run in the repository's root, with this test process's
/// own state directory: a journal a test does not place never goes to the
/// real `/var/lib/pinplan` (a test that needs a state directory of its own
/// sets `PINPLAN_STATE_DIR` again).
pub fn command() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_pinplan"));
    cmd.current_dir(repo());
    cmd.env("PINPLAN_STATE_DIR", state_dir());
    cmd
}

/// `CARGO_TARGET_TMPDIR/state-PID`: this test process's state directory
/// (under the build directory, so never the host's).
pub fn state_dir() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("state-{}", std::process::id()))
}

/// Runs `pinplan ARGS` in the repository's root, whatever its exit status.
pub fn pinplan<I, S>(args: I) -> Output
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    command().args(args).output().expect("cannot run pinplan")
}

/// Runs `pinplan ARGS`, requires exit 0 and returns stdout.
pub fn pinplan_ok(args: &[&str]) -> String {
    let out = pinplan(args);
    assert_eq!(out.status.code(), Some(0), "{}", describe(args, &out));
    text(&out.stdout)
}

/// Runs `pinplan ARGS`, requires exit 0 and returns stdout parsed as JSON.
pub fn pinplan_json(args: &[&str]) -> Value {
    let out = pinplan(args);
    assert_eq!(out.status.code(), Some(0), "{}", describe(args, &out));
    stdout_json(&out)
}

/// Output bytes as text (lossy: a test shows what it got, whatever it is).
pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A run for a failure message: the command, exit status, stdout and stderr.
pub fn describe(args: &[&str], out: &Output) -> String {
    format!(
        "pinplan {args:?}\nstatus: {:?}\nstdout: {}\nstderr: {}",
        out.status.code(),
        text(&out.stdout),
        text(&out.stderr)
    )
}

/// Stdout parsed as JSON; fails showing stdout and stderr when it is not.
pub fn stdout_json(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}):\n{}\nstderr: {}",
            text(&out.stdout),
            text(&out.stderr)
        )
    })
}

/// A path as a command-line argument (every path here is UTF-8).
pub fn arg(path: &Path) -> &str {
    path.to_str().expect("UTF-8 path")
}

/// A Linux/libvirt CPU list (`"1-3,8,^2"`; `""` is empty) as a set.
pub fn cpuset(list: &str) -> BTreeSet<u32> {
    let number = |s: &str| {
        s.trim()
            .parse::<u32>()
            .unwrap_or_else(|e| panic!("bad CPU list {list:?}: {s:?}: {e}"))
    };
    let mut set = BTreeSet::new();
    let mut excluded = BTreeSet::new();
    for part in list.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (into, range) = match part.strip_prefix('^') {
            Some(range) => (&mut excluded, range),
            None => (&mut set, part),
        };
        match range.split_once('-') {
            Some((a, b)) => into.extend(number(a)..=number(b)),
            None => {
                into.insert(number(range));
            }
        }
    }
    set.difference(&excluded).copied().collect()
}

/// How every scratch directory's name starts (then random letters and digits).
const TEMP_PREFIX: &str = "pinplan-test-";

/// A scratch directory (`tempfile`), removed when dropped.
pub struct TempDir(tempfile::TempDir);

impl TempDir {
    pub fn new() -> TempDir {
        TempDir(
            tempfile::Builder::new()
                .prefix(TEMP_PREFIX)
                .tempdir()
                .expect("cannot create a temporary directory"),
        )
    }

    /// The directory itself.
    pub fn root(&self) -> &Path {
        self.0.path()
    }

    /// `name` inside it (nothing is created).
    pub fn path(&self, name: &str) -> PathBuf {
        self.root().join(name)
    }

    /// Writes `name` (creating its parent directories) and returns its path.
    pub fn write(&self, name: &str, contents: impl AsRef<[u8]>) -> PathBuf {
        let path = self.path(name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).expect("cannot create a directory in the temp dir");
        }
        std::fs::write(&path, contents).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        path
    }

    /// Copies `from` in as `name` and returns the copy's path.
    pub fn copy(&self, from: &Path, name: &str) -> PathBuf {
        let path = self.path(name);
        std::fs::copy(from, &path).unwrap_or_else(|e| panic!("{}: {e}", from.display()));
        path
    }
}

/// `text` as a snapshot can hold it: every scratch directory becomes
/// `[TMP]`, the repository's root `[REPO]`.
pub fn redact(text: &str) -> String {
    let prefix = std::env::temp_dir().join(TEMP_PREFIX);
    let prefix = prefix.display().to_string();
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find(&prefix) {
        out.push_str(&rest[..at]);
        out.push_str("[TMP]");
        rest = &rest[at + prefix.len()..];
        let end = rest
            .find(|c: char| !c.is_ascii_alphanumeric())
            .unwrap_or(rest.len());
        rest = &rest[end..];
    }
    out.push_str(rest);
    out.replace(&repo().display().to_string(), "[REPO]")
}

// ---------------------------------------------------------------------------
// The live libvirtd.

/// `PINPLAN_TEST_LIBVIRT_URI`: set by scripts/test.sh, which starts a
/// libvirtd, and then the live tests must pass. Without it (a plain `cargo
/// test` on a laptop) the test says it skipped `not_tested` — on standard
/// error itself, which the test harness does not capture — and gets `None`;
/// under `CI=true` it fails instead, as the CI script starts libvirtd and a
/// missing URI there is a bug, never a reason to pass.
pub fn libvirt_uri(not_tested: &str) -> Option<String> {
    let uri = std::env::var("PINPLAN_TEST_LIBVIRT_URI").ok();
    if uri.is_none() {
        skipped(not_tested);
    }
    uri
}

/// Says that the running test skipped `what` for want of
/// `PINPLAN_TEST_LIBVIRT_URI`; fails it under `CI=true`.
fn skipped(what: &str) {
    use std::io::Write as _;
    let current = std::thread::current();
    let test = current.name().unwrap_or("a test");
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "{test}: PINPLAN_TEST_LIBVIRT_URI is not set under CI=true: the CI script \
         (scripts/test.sh) starts libvirtd and sets it, so a skip here is a bug (it would leave: {what})"
    );
    let _ = writeln!(
        std::io::stderr(),
        "skipped: {test}: set PINPLAN_TEST_LIBVIRT_URI to run it (scripts/test.sh does); not tested: {what}"
    );
}

/// Runs `virsh -q -c URI ARGS` and returns stdout; fails the test with
/// virsh's output when it fails.
pub fn virsh(uri: &str, args: &[&str]) -> String {
    let out = Command::new("virsh")
        .args(["-q", "-c", uri])
        .args(args)
        .output()
        .expect("cannot run virsh");
    assert!(
        out.status.success(),
        "virsh -c {uri} {args:?}: {}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    text(&out.stdout)
}

/// Tests that run guests on the one libvirtd take turns: another test's
/// guest pinned onto the CPUs a plan gives would make its apply refuse (the
/// host has 2 CPUs). Hold the guard for the whole test.
pub fn live_guests_turn() -> std::sync::MutexGuard<'static, ()> {
    static TURN: std::sync::Mutex<()> = std::sync::Mutex::new(());
    // A test that panicked while holding it leaves nothing to protect.
    TURN.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The test's guests: destroyed and undefined when dropped, even when the
/// test fails.
pub struct Guests {
    /// The libvirt URI.
    pub uri: String,
    /// Domain names.
    pub names: Vec<String>,
}

impl Drop for Guests {
    fn drop(&mut self) {
        for name in &self.names {
            // Not running is fine; still defined afterwards is worth a word.
            let _ = Command::new("virsh")
                .args(["-q", "-c", &self.uri, "destroy", name])
                .output();
            let undefined = Command::new("virsh")
                .args(["-q", "-c", &self.uri, "undefine", name])
                .output();
            if !undefined.is_ok_and(|out| out.status.success()) {
                eprintln!("cannot undefine {name} on {}", self.uri);
            }
        }
    }
}

/// `kvm` when this libvirtd offers KVM and /dev/kvm is usable, else `qemu`
/// (TCG).
pub fn guest_type(uri: &str) -> &'static str {
    let kvm = virsh(uri, &["capabilities"]).contains("<domain type='kvm'")
        && std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/kvm")
            .is_ok();
    if kvm {
        "kvm"
    } else {
        "qemu"
    }
}

/// A tiny diskless guest that libvirt can define and start: 64 MiB, `vcpus`
/// vCPUs, `cputune` (whole lines, or "") after `<vcpu>`.
pub fn guest_xml(domain_type: &str, name: &str, vcpus: u32, cputune: &str) -> String {
    format!(
        "<domain type='{domain_type}'>
  <name>{name}</name>
  <memory unit='MiB'>64</memory>
  <vcpu placement='static'>{vcpus}</vcpu>
{cputune}  <os>
    <type arch='x86_64' machine='pc'>hvm</type>
  </os>
  <on_poweroff>destroy</on_poweroff>
  <devices>
    <emulator>/usr/bin/qemu-system-x86_64</emulator>
    <controller type='usb' model='none'/>
    <memballoon model='none'/>
  </devices>
</domain>
"
    )
}

/// Runs `pinplan plan ARGS… --format json`, expects exit `code` (and no
/// panic), parses standard output: a plan, or a fleet's `fleet.json`.
pub fn plan_json(code: i32, args: &[&str]) -> Value {
    let mut all = vec!["plan"];
    all.extend_from_slice(args);
    all.extend(["--format", "json"]);
    let out = pinplan(&all);
    assert_eq!(out.status.code(), Some(code), "{}", describe(&all, &out));
    assert!(
        !text(&out.stderr).contains("panicked"),
        "{}",
        describe(&all, &out)
    );
    stdout_json(&out)
}

/// The entry of `vms` named `name` in a plan (or fleet.json).
pub fn vm<'a>(plan: &'a Value, name: &str) -> &'a Value {
    plan["vms"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == name)
        .unwrap_or_else(|| panic!("no VM {name} in {plan}"))
}

/// `virt-xml-validate FILE domain` (libvirt's own schema check): Ok, or the
/// validator's complaint.
pub fn validate_domain(path: &Path) -> Result<(), String> {
    let out = Command::new("virt-xml-validate")
        .arg(path)
        .arg("domain")
        .output()
        .map_err(|e| format!("cannot run virt-xml-validate (libvirt-clients): {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "virt-xml-validate {} domain: {}{}",
            path.display(),
            text(&out.stdout),
            text(&out.stderr)
        ))
    }
}

/// Each guest's thread affinities as taskset reports them: `CPU n` for
/// vCPU threads, `emulator` for QEMU's main thread.
pub fn thread_affinities(names: &[String]) -> BTreeMap<String, BTreeMap<String, String>> {
    names
        .iter()
        .map(|name| {
            let mut threads = BTreeMap::new();
            let Ok(pid) = std::fs::read_to_string(format!("/run/libvirt/qemu/{name}.pid")) else {
                threads.insert("state".to_owned(), "not running".to_owned());
                return (name.clone(), threads);
            };
            let pid = pid.trim();
            let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).unwrap();
            for task in tasks.flatten() {
                let tid = task.file_name().to_string_lossy().into_owned();
                let comm = std::fs::read_to_string(task.path().join("comm"))
                    .unwrap_or_default()
                    .trim()
                    .to_owned();
                let key = if tid == pid {
                    "emulator".to_owned()
                } else if let Some(rest) = comm.strip_prefix("CPU ") {
                    // "CPU 0/KVM" or "CPU 0/TCG".
                    format!("CPU {}", rest.split('/').next().unwrap_or(rest))
                } else {
                    continue;
                };
                let out = Command::new("taskset")
                    .args(["-pc", &tid])
                    .output()
                    .expect("cannot run taskset");
                let text = String::from_utf8_lossy(&out.stdout);
                let cpus = text.rsplit(": ").next().unwrap_or("").trim().to_owned();
                threads.insert(key, cpus);
            }
            (name.clone(), threads)
        })
        .collect()
}
