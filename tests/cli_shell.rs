//! Shell conventions (issue 15) through the binary: completion scripts a
//! shell accepts, man pages `man` renders, the help topics embedded from
//! `docs/`, `--version` with the git revision and the MIP backend,
//! `--quiet` and `--verbose`, and every command's help with examples and
//! exit status — each example run (those that read only the bundled files)
//! or at least parsed (those that need libvirt or a live host), so that the
//! help stays true.

use crate::util::{self, describe, pinplan, text, TempDir};
use std::path::Path;
use std::process::{Command, Output};

/// The subcommands `pinplan --help` lists.
pub(crate) fn subcommands() -> Vec<String> {
    let help = util::pinplan_ok(&["--help"]);
    let list = help
        .split_once("Commands:\n")
        .map(|(_, rest)| rest.split("\n\n").next().unwrap_or(""))
        .unwrap_or_else(|| panic!("no Commands: in\n{help}"));
    let names: Vec<String> = list
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_owned)
        .collect();
    assert!(names.len() >= 10, "{names:?}");
    names
}

/// Whether a program can be run (`PROGRAM --version` starts).
fn have(program: &str) -> bool {
    Command::new(program).arg("--version").output().is_ok()
}

fn ok(args: &[&str], out: &Output) {
    assert_eq!(out.status.code(), Some(0), "{}", describe(args, out));
}

#[test]
fn completions_are_scripts_for_their_shell() {
    let commands = subcommands();
    for shell in ["bash", "zsh", "fish"] {
        let args = ["completions", shell];
        let out = pinplan(args);
        ok(&args, &out);
        let script = text(&out.stdout);
        for name in &commands {
            assert!(script.contains(name.as_str()), "{shell}: no {name}");
        }
        // The help topics are completed as `help`'s values.
        assert!(script.contains("exit-codes"), "{shell}: no help topics");
        match shell {
            "bash" => assert!(script.contains("complete -F _pinplan"), "{script}"),
            "zsh" => assert!(script.starts_with("#compdef pinplan"), "{script}"),
            _ => assert!(script.contains("complete -c pinplan"), "{script}"),
        }
        // The shell checks the syntax (bash always; zsh and fish where
        // installed).
        let dir = TempDir::new();
        let path = dir.write("script", &script);
        let check = match shell {
            "bash" => Some(Command::new("bash").arg("-n").arg(&path).output()),
            "zsh" if have("zsh") => Some(Command::new("zsh").arg("-n").arg(&path).output()),
            "fish" if have("fish") => {
                Some(Command::new("fish").arg("--no-execute").arg(&path).output())
            }
            _ => None,
        };
        if let Some(check) = check {
            let check = check.unwrap();
            assert!(check.status.success(), "{shell}: {}", text(&check.stderr));
        }
    }
    let bad = pinplan(["completions", "tcsh"]);
    assert_eq!(bad.status.code(), Some(2), "{}", text(&bad.stderr));
}

/// Renders a man page with `man -l` (or `groff -man` without man); `None`
/// when neither is installed.
fn render_man(path: &Path) -> Option<String> {
    let out = if have("man") {
        Command::new("man")
            .arg("-l")
            .arg(path)
            .env("MANPAGER", "cat")
            .env("MANWIDTH", "100")
            .env("MAN_KEEP_FORMATTING", "")
            .output()
            .unwrap()
    } else if have("groff") {
        Command::new("groff")
            .args(["-man", "-Tutf8", "-ww"])
            .arg(path)
            .output()
            .unwrap()
    } else {
        eprintln!("neither man nor groff is installed: the man pages are not rendered");
        return None;
    };
    assert!(
        out.status.success(),
        "{}: {}",
        path.display(),
        text(&out.stderr)
    );
    assert!(
        !text(&out.stderr).contains("warning"),
        "{}: {}",
        path.display(),
        text(&out.stderr)
    );
    Some(text(&out.stdout))
}

#[test]
fn man_prints_roff_and_writes_a_page_per_command() {
    let page = util::pinplan_ok(&["man"]);
    assert!(page.contains("\n.TH pinplan 1 "), "{page}");
    for section in [".SH NAME", ".SH SYNOPSIS", ".SH OPTIONS", ".SH EXAMPLES"] {
        assert!(page.contains(section), "{section}");
    }
    assert!(page.contains(".SH \"EXIT STATUS\""), "{page}");

    let dir = TempDir::new();
    let out_dir = dir.path("share/man/man1");
    let args = ["man", "--out", util::arg(&out_dir)];
    let out = pinplan(args);
    ok(&args, &out);
    let commands = subcommands();
    let mut names = vec!["pinplan".to_owned()];
    names.extend(commands.iter().map(|c| format!("pinplan-{c}")));
    for name in &names {
        let path = out_dir.join(format!("{name}.1"));
        let roff = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(roff.contains(&format!("\n.TH {name} 1 ")), "{name}: {roff}");
        assert!(
            text(&out.stderr).contains(&format!("wrote {}", path.display())),
            "{}",
            text(&out.stderr)
        );
        if let Some(rendered) = render_man(&path) {
            for heading in ["NAME", "SYNOPSIS", "EXAMPLES", "EXIT STATUS", "SEE ALSO"] {
                assert!(
                    rendered.contains(heading),
                    "{name}: no {heading}:\n{rendered}"
                );
            }
        }
    }
    let written = std::fs::read_dir(&out_dir).unwrap().count();
    assert_eq!(written, names.len(), "only the pages, no temporary files");
    assert_eq!(
        std::fs::read_to_string(out_dir.join("pinplan.1")).unwrap(),
        page,
        "man --out DIR writes what man prints"
    );
    // Again, quietly: the same pages, nothing said.
    let quiet = ["-q", "man", "--out", util::arg(&out_dir)];
    let out = pinplan(quiet);
    ok(&quiet, &out);
    assert_eq!(text(&out.stderr), "");
    // A directory that cannot be made.
    let file = dir.write("file", "");
    let bad = pinplan(["man", "--out", &format!("{}/man1", util::arg(&file))]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(
        text(&bad.stderr).starts_with("error: cannot write "),
        "{}",
        text(&bad.stderr)
    );
}

#[test]
fn help_topics_are_the_docs() {
    let formats = util::pinplan_ok(&["help", "formats"]);
    let docs = std::fs::read_to_string(util::repo().join("docs/formats.md")).unwrap();
    let headings: Vec<&str> = docs.lines().filter(|l| l.starts_with("## ")).collect();
    assert!(headings.contains(&"## Throughput tables"), "{headings:?}");
    for heading in headings {
        assert!(formats.contains(heading), "help formats lacks {heading}");
    }
    assert!(formats.contains("| `tx_cores` | yes |"), "{formats}");
    // Links to docs/formats.md name the command instead.
    assert!(!formats.contains("](formats.md"), "{formats}");

    let policies = util::pinplan_ok(&["help", "policies"]);
    for needle in [
        "## What a placement is",
        "threads = \"require\"",
        "nic_affinity = \"required\"",
        "### Objective",
        "fewest cores used",
    ] {
        assert!(policies.contains(needle), "help policies lacks {needle}");
    }

    let codes = util::pinplan_ok(&["help", "exit-codes"]);
    for name in subcommands() {
        assert!(
            codes.contains(&format!("\npinplan {name}\n  0  ")),
            "{name}: {codes}"
        );
    }
}

#[test]
fn help_command_is_the_command_s_help() {
    for name in ["plan", "apply", "help"] {
        assert_eq!(
            util::pinplan_ok(&["help", name]),
            util::pinplan_ok(&[name, "--help"]),
            "{name}"
        );
    }
    assert_eq!(util::pinplan_ok(&["help"]), util::pinplan_ok(&["--help"]));
    let out = pinplan(["help", "nosuch"]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        describe(&["help", "nosuch"], &out)
    );
    assert_eq!(text(&out.stdout), "");
    let stderr = text(&out.stderr);
    assert!(stderr.contains("nosuch"), "{stderr}");
    for topic in ["formats", "policies", "exit-codes", "plan"] {
        assert!(stderr.contains(topic), "{topic}: {stderr}");
    }
}

/// `pinplan X.Y.Z (git REVISION) — MIP backend: NAME…`: the revision of
/// this checkout's HEAD when git can tell.
#[test]
fn version_names_the_git_revision_and_the_backend() {
    let version = util::pinplan_ok(&["--version"]);
    let rest = version
        .strip_prefix(&format!("pinplan {} (git ", env!("CARGO_PKG_VERSION")))
        .unwrap_or_else(|| panic!("{version:?}"));
    let (revision, backend) = rest
        .split_once(") — MIP backend: ")
        .unwrap_or_else(|| panic!("{version:?}"));
    let hash = revision.strip_suffix("-dirty").unwrap_or(revision);
    assert!(
        revision == "unknown" || (hash.len() == 12 && hash.chars().all(|c| c.is_ascii_hexdigit())),
        "{version:?}"
    );
    assert!(
        ["CBC", "HiGHS", "microlp"]
            .iter()
            .any(|b| backend.starts_with(b)),
        "{version:?}"
    );
    let head = Command::new("git")
        .arg("-C")
        .arg(util::repo())
        .args(["rev-parse", "--short=12", "HEAD"])
        .output();
    if let Some(head) = head.ok().filter(|h| h.status.success()) {
        assert_eq!(hash, text(&head.stdout).trim(), "{version:?}");
    }
    assert_eq!(util::pinplan_ok(&["-V"]), version);
}

/// The lab's plan warns (vm2's table rows are not monotonic): with `--format
/// json` on stderr too. `-q` silences it there, `-v` adds what was read and
/// how it was solved; stdout and the exit status never change.
#[test]
fn quiet_silences_warnings_and_verbose_adds_detail() {
    let base = ["plan", "examples/lab/b1.toml", "--format", "json"];
    let run = |flag: Option<&str>| {
        let mut args: Vec<&str> = base.to_vec();
        args.extend(flag);
        let out = pinplan(&args);
        ok(&args, &out);
        (text(&out.stdout), text(&out.stderr))
    };
    let (stdout, stderr) = run(None);
    let warning = "warning: vm2: examples/lab/b1-tx-cores.csv:10: vm-512b 512 B is not monotonic";
    assert!(stderr.contains(warning), "{stderr}");
    assert!(!stderr.contains("verbose:"), "{stderr}");
    assert!(
        stdout.contains("is not monotonic"),
        "the JSON keeps it: {stdout}"
    );

    for quiet in ["-q", "--quiet"] {
        let (q_stdout, q_stderr) = run(Some(quiet));
        assert_eq!(q_stderr, "", "{quiet}");
        assert_eq!(q_stdout, stdout, "{quiet}");
    }
    for verbose in ["-v", "--verbose"] {
        let (v_stdout, v_stderr) = run(Some(verbose));
        assert_eq!(v_stdout, stdout, "{verbose}");
        assert!(v_stderr.contains(warning), "{v_stderr}");
        for detail in [
            "verbose: pinplan ",
            "MIP backend:",
            "verbose: topology from examples/lab/b1-host.xml: 20 CPUs",
            "verbose: solved by the ilp solver",
            "verbose: finished in ",
        ] {
            assert!(
                v_stderr.contains(detail),
                "{verbose}: no {detail:?}:\n{v_stderr}"
            );
        }
    }

    // The text output holds the warnings: nothing on stderr to silence.
    let text_out = pinplan(["plan", "examples/lab/b1.toml"]);
    assert!(text(&text_out.stdout).contains(warning));
    assert_eq!(text(&text_out.stderr), "");

    // Errors are never silenced, nor their exit status.
    let args = ["-q", "plan", "nosuch.toml"];
    let out = pinplan(args);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&args, &out));
    assert!(
        text(&out.stderr).starts_with("error: "),
        "{}",
        describe(&args, &out)
    );
    // "The answer is no" keeps its status too: the lab's report finds conflicts.
    let args = [
        "report",
        "--source",
        "examples/lab/b1-host.xml",
        "--domains",
        "examples/lab/now/vm1.xml",
        "examples/lab/now/vm2.xml",
        "-q",
    ];
    let out = pinplan(args);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&args, &out));
    assert_eq!(text(&out.stderr), "");
    // The two cannot be had at once.
    let both = pinplan([
        "-q",
        "-v",
        "topology",
        "--source",
        "examples/lab/b1-host.xml",
    ]);
    assert_eq!(both.status.code(), Some(2));
}

/// `plan --out` lists the files it writes on stderr; `-q` writes them all
/// the same, silently.
#[test]
fn quiet_plan_out_writes_without_listing() {
    let dir = TempDir::new();
    let out_dir = dir.path("plans");
    let args = ["plan", "examples/lab/b1.toml", "--out", util::arg(&out_dir)];
    let loud = pinplan(args);
    ok(&args, &loud);
    assert!(
        text(&loud.stderr).contains("wrote "),
        "{}",
        text(&loud.stderr)
    );
    std::fs::remove_dir_all(&out_dir).unwrap();
    let quiet_args = [
        "plan",
        "examples/lab/b1.toml",
        "--out",
        util::arg(&out_dir),
        "--quiet",
    ];
    let quiet = pinplan(quiet_args);
    ok(&quiet_args, &quiet);
    assert_eq!(text(&quiet.stderr), "");
    assert_eq!(quiet.stdout, loud.stdout);
    for file in ["plan.json", "vm1.xml", "vm2.fragment.xml"] {
        assert!(out_dir.join(file).is_file(), "{file}");
    }
}

/// A command's help: its `Examples:` lines (commands, not `#` comments)
/// and its `Exit status:` section.
fn examples_and_exit(help: &str, name: &str) -> (Vec<String>, String) {
    let examples = help
        .split_once("\nExamples:\n")
        .map(|(_, rest)| rest.split("\n\n").next().unwrap_or(""))
        .unwrap_or_else(|| panic!("{name}: no Examples:\n{help}"));
    let exit = help
        .split_once("\nExit status:\n")
        .map(|(_, rest)| rest.to_owned())
        .unwrap_or_else(|| panic!("{name}: no Exit status:\n{help}"));
    let commands = examples
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(str::to_owned)
        .collect();
    (commands, exit)
}

#[test]
fn every_help_has_examples_and_exit_status() {
    let mut pages = vec![("pinplan".to_owned(), util::pinplan_ok(&["--help"]))];
    for name in subcommands() {
        pages.push((name.clone(), util::pinplan_ok(&[&name, "--help"])));
    }
    for (name, help) in &pages {
        let (examples, exit) = examples_and_exit(help, name);
        assert!(!examples.is_empty(), "{name}");
        assert!(
            examples
                .iter()
                .any(|e| e.contains(&format!("pinplan {name}")) || name == "pinplan"),
            "{name}: no example runs it: {examples:?}"
        );
        assert!(exit.contains("  0  "), "{name}: {exit}");
        assert!(exit.contains("  2  "), "{name}: {exit}");
        // An installed binary has no docs/ to point at.
        assert!(!help.contains("docs/"), "{name}: {help}");
    }
    // -h (the short help) shows them too.
    let short = util::pinplan_ok(&["plan", "-h"]);
    assert!(short.contains("Examples:") && short.contains("Exit status:"));
}

/// Whether an example needs what a test does not have or must not touch:
/// libvirt, a live host's topology or sysfs, other programs, system paths.
/// Those are only checked to parse.
fn needs_a_live_host(example: &str) -> bool {
    let segments = example
        .split("&&")
        .flat_map(|s| s.split('|'))
        .map(str::trim);
    ["--connect", "virsh", "| man", "/usr/", "/etc/"]
        .iter()
        .any(|n| example.contains(n))
        || segments.into_iter().any(|s| {
            s.starts_with("pinplan doctor")
                || s.starts_with("pinplan apply")
                || s.starts_with("pinplan isolate")
                || s.starts_with("pinplan watch")
                || ((s.starts_with("pinplan topology") || s.starts_with("pinplan report"))
                    && !s.contains("--source"))
        })
}

/// Runs `script` with `sh -c` in `dir` (HOME too), `pinplan` on the PATH.
fn sh(dir: &Path, script: &str) -> Output {
    let bin = Path::new(env!("CARGO_BIN_EXE_pinplan"));
    let path = format!(
        "{}:{}",
        bin.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    Command::new("sh")
        .arg("-c")
        .arg(script)
        .current_dir(dir)
        .env("HOME", dir)
        .env("PATH", path)
        .env("PINPLAN_BIN", bin)
        .output()
        .unwrap()
}

/// Copies the directory `from` into `to`, recursively, links as links
/// (the fleet example's doctor trees hold sysfs links).
pub(crate) fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let (source, target) = (entry.path(), to.join(entry.file_name()));
        let kind = entry.file_type().unwrap();
        if kind.is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(&source).unwrap(), &target).unwrap();
        } else if kind.is_dir() {
            copy_dir(&source, &target);
        } else {
            std::fs::copy(&source, &target).unwrap();
        }
    }
}

/// Every example of every help runs, in a scratch copy of the repository's
/// `examples/` (so `--out plans/` lands there), in the order the help lists
/// them: those on the bundled files for real (exit 0, or 1 where the answer
/// is no, and no error), the others with `--help` added to each pinplan
/// call (every flag and value must parse) and other programs stubbed.
#[test]
fn every_example_in_the_help_runs() {
    let dir = TempDir::new();
    copy_dir(&util::repo().join("examples"), &dir.path("examples"));
    let mut pages = vec![util::pinplan_ok(&["--help"])];
    for name in subcommands() {
        pages.push(util::pinplan_ok(&[&name, "--help"]));
    }
    let mut ran = 0;
    let mut parsed = 0;
    for help in &pages {
        let (examples, _) = examples_and_exit(help, "");
        for example in examples {
            if needs_a_live_host(&example) {
                let script = format!(
                    "pinplan() {{ \"$PINPLAN_BIN\" \"$@\" --help > /dev/null; }}\n\
                     virsh() {{ :; }}\nman() {{ cat > /dev/null; }}\n{example}\n"
                );
                let out = sh(dir.root(), &script);
                assert_eq!(
                    out.status.code(),
                    Some(0),
                    "{example}: {}{}",
                    text(&out.stdout),
                    text(&out.stderr)
                );
                parsed += 1;
            } else {
                let out = sh(dir.root(), &example);
                let stderr = text(&out.stderr);
                assert!(
                    matches!(out.status.code(), Some(0 | 1)) && !stderr.contains("error"),
                    "{example}: exit {:?}\n{stderr}",
                    out.status.code()
                );
                ran += 1;
            }
        }
    }
    // The completions went where the examples said, under HOME.
    let bash = dir.path(".local/share/bash-completion/completions/pinplan");
    assert!(
        std::fs::metadata(&bash).is_ok_and(|m| m.len() > 0),
        "{}",
        bash.display()
    );
    assert!(dir.path("plans/plan.json").is_file());
    assert!(ran >= 15 && parsed >= 5, "ran {ran}, parsed {parsed}");
}

/// An installed pinplan (issue 31): the binary in PREFIX/bin and the
/// examples where scripts/install.sh puts them, no repository. `pinplan
/// help examples` names them, and every example spec plans there exactly as
/// in the repository: nothing reaches outside `examples/`.
#[test]
fn an_installed_binary_finds_its_examples_and_they_plan_without_the_repository() {
    let prefix = TempDir::new();
    let bin = prefix.path("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let exe = bin.join("pinplan");
    std::fs::copy(env!("CARGO_BIN_EXE_pinplan"), &exe).unwrap();
    let share = prefix.path("share/pinplan");
    copy_dir(&util::repo().join("examples"), &share.join("examples"));
    let run = |args: &[&str]| -> Output {
        Command::new(&exe)
            .args(args)
            .current_dir(&share)
            .env("PINPLAN_STATE_DIR", util::state_dir())
            .output()
            .unwrap()
    };
    let help = run(&["help", "examples"]);
    assert_eq!(
        help.status.code(),
        Some(0),
        "{}",
        describe(&["help", "examples"], &help)
    );
    let said = text(&help.stdout);
    let installed = format!(
        "Installed with this binary: {}",
        share.join("examples").display()
    );
    assert!(said.contains(&installed), "{said}");
    for spec in [
        "examples/lab/b1.toml",
        "examples/two-nics.toml",
        "examples/amd-guest.toml",
        "examples/nfv-roles.toml",
        "examples/fleet.toml",
    ] {
        let args = ["plan", spec, "--format", "json"];
        let there = run(&args);
        assert_eq!(there.status.code(), Some(0), "{}", describe(&args, &there));
        let here = pinplan(args);
        let strip = |out: &Output| {
            let mut json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
            // Run to run, only the solve time differs.
            json.as_object_mut().unwrap().remove("solve_seconds");
            json
        };
        assert_eq!(strip(&there), strip(&here), "{spec}");
    }
    // Without the installed examples, it says where it looked.
    std::fs::remove_dir_all(share.join("examples")).unwrap();
    let said = text(&run(&["help", "examples"]).stdout);
    assert!(said.contains("Not installed beside this binary"), "{said}");
}
