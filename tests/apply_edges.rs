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
            "applying to test:///default, the URI {} was made for\n",
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
