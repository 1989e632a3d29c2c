//! `apply` edges a new user hit (issue 31): the host to change is the URI
//! the plan was made through when `--connect` is not given, said on
//! standard error; a plan made from a file records none, and the usage
//! error says so. libvirt's test driver (`test:///default`, in memory, one
//! per connection) runs `plan --connect` and `apply --dry-run`.

use crate::util::{self, arg, describe, text, TempDir};

/// A spec for the test driver's one domain, `test` (2 vCPUs, running).
const SPEC: &str = "[host]\nreserved_cores = 1\n\n[[vm]]\nname = \"test\"\nvcpus = 2\n";

/// `plan SPEC HOST… --out DIR/out` in `dir`, which must succeed; the
/// plan's path.
fn planned(dir: &TempDir, host: &[&str]) -> std::path::PathBuf {
    let spec = dir.write("s.toml", SPEC);
    let out = dir.path("out");
    let mut args = vec!["plan", arg(&spec)];
    args.extend_from_slice(host);
    args.extend(["--out", arg(&out)]);
    let made = util::pinplan(&args);
    assert_eq!(made.status.code(), Some(0), "{}", describe(&args, &made));
    dir.path("out/plan.json")
}

#[test]
fn issue_31_apply_takes_the_uri_the_plan_was_made_for() {
    let dir = TempDir::new();
    let plan = planned(&dir, &["--connect", "test:///default"]);

    // No --connect: the plan's URI, named on stderr.
    let args = ["apply", arg(&plan), "--dry-run"];
    let run = util::pinplan(args);
    assert_eq!(run.status.code(), Some(0), "{}", describe(&args, &run));
    assert_eq!(
        text(&run.stderr),
        format!(
            "applying to test:///default, where {} was planned (plan --connect): --connect URI for another host\n",
            plan.display()
        )
    );
    assert!(
        text(&run.stdout)
            .ends_with("dry run: the preconditions hold for test; nothing was changed\n"),
        "{}",
        describe(&args, &run)
    );
    let json = util::pinplan_json(&["apply", arg(&plan), "--dry-run", "--format", "json"]);
    assert_eq!(json["uri"], "test:///default");

    // --connect given: taken as it is, nothing said.
    let args = [
        "apply",
        arg(&plan),
        "--dry-run",
        "--connect",
        "test:///default",
    ];
    let run = util::pinplan(args);
    assert_eq!(run.status.code(), Some(0), "{}", describe(&args, &run));
    assert_eq!(text(&run.stderr), "");
}

#[test]
fn issue_31_apply_without_connect_names_a_plan_without_uri() {
    let dir = TempDir::new();
    let plan = planned(&dir, &["--source", "synthetic:package:1 core:4 pu:1"]);
    let args = ["apply", arg(&plan), "--dry-run"];
    let run = util::pinplan(args);
    assert_eq!(run.status.code(), Some(2), "{}", describe(&args, &run));
    let p = plan.display();
    assert_eq!(
        text(&run.stderr),
        format!(
            "error: give the host to change: --connect URI ({p} records no libvirt URI: it was planned from synthetic:package:1 core:4 pu:1)\n\n\
             hint: name the host: pinplan apply {p} --connect URI (qemu:///system for this machine's), or plan through it: pinplan plan SPEC --connect URI\n"
        )
    );
    assert_eq!(text(&run.stdout), "");
}

/// `text` with every `fnv1a64:` fingerprint replaced by `FP`.
fn without_fingerprints(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find("fnv1a64:") {
        out.push_str(&rest[..at]);
        out.push_str("FP");
        let tail = &rest[at + "fnv1a64:".len()..];
        let hex = tail.chars().take_while(char::is_ascii_hexdigit).count();
        rest = &tail[hex..];
    }
    out.push_str(rest);
    out
}

/// Regression for issue 31: another host's plan (a 4-CPU synthetic host's,
/// applied to the test driver's 16-CPU host) is one error naming the plan,
/// both hosts, the CPUs the plan uses (by hand: the reserved core's CPU 0,
/// the VM's two vCPUs on 1 and 2), this host's size and the fix, and nothing else: not one line
/// per VM of what follows from it. `--force` uses it, as in `report`, `xml`,
/// `doctor` and `isolate` (its CPUs 0-3 exist there), and says so.
#[test]
fn issue_31_another_hosts_plan_is_one_error_and_force_says_what_it_lets_through() {
    let dir = TempDir::new();
    let plan = planned(&dir, &["--source", "synthetic:package:1 core:4 pu:1"]);
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&plan).unwrap()).unwrap();
    let fingerprint = json["host"]["fingerprint"].as_str().unwrap();
    let p = plan.display();
    let args = [
        "apply",
        arg(&plan),
        "--dry-run",
        "--connect",
        "test:///default",
    ];
    let run = util::pinplan(args);
    assert_eq!(run.status.code(), Some(2), "{}", describe(&args, &run));
    assert_eq!(text(&run.stdout), "");
    let stderr = text(&run.stderr);
    // test:///default: 2 nodes of 8 CPUs, each CPU a core of its own in the
    // capabilities libvirt's test driver builds.
    assert_eq!(
        without_fingerprints(&stderr),
        format!(
            "error: {p}: this plan was made for synthetic:package:1 core:4 pu:1 (fingerprint FP; it uses CPUs 0-2); \
             this host is test:///default (fingerprint FP: 16 CPUs (16 online) in 16 cores, 2 NUMA nodes)\n\n\
             hint: make the plan for this host: `pinplan plan SPEC --connect test:///default`; \
             if it is the same machine read another way (an old libvirt lists each CPU as a core \
             of its own), --force uses this plan anyway (a plan that uses CPUs or NUMA nodes this \
             host lacks is refused all the same)\n"
        )
    );
    assert!(
        stderr.contains(&format!("(fingerprint {fingerprint};")),
        "{stderr}"
    );

    let forced = [&args[..], &["--force"]].concat();
    let run = util::pinplan(&forced);
    assert_eq!(run.status.code(), Some(0), "{}", describe(&forced, &run));
    assert_eq!(
        without_fingerprints(&text(&run.stderr)),
        format!(
            "warning: {p}: made for synthetic:package:1 core:4 pu:1 (fingerprint FP), not for \
             this host (test:///default, fingerprint FP): used all the same (--force)\n"
        )
    );
    assert!(
        text(&run.stdout)
            .ends_with("dry run: the preconditions hold for test; nothing was changed\n"),
        "{}",
        describe(&forced, &run)
    );
}
