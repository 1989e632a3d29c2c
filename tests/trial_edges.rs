//! Edges a new user hit (issue 31): a throughput table separated by `;` or
//! tabs, a table row with no housekeeping vCPU (`vcpus = tx + rx`), and a
//! spec VM that no domain at `plan --connect` has. Every expected message
//! and guest line here is written from the input by hand.

use crate::util::{self, arg, describe, pinplan, text, TempDir};

const HOST: &str = "[host]\nsource = \"synthetic:package:1 core:8 pu:1\"\nreserved_cores = 1\n";

/// Regression for issue 31: a `;`- or tab-separated table is refused at its
/// header line with the separator named and the command that converts it,
/// in `demand` and in a spec's `[host] tables`.
#[test]
fn issue_31_a_table_not_separated_by_commas_names_its_separator() {
    let dir = TempDir::new();
    let semi = dir.write(
        "semi.csv",
        "profile;packet_bytes;tx_cores;rx_cores;gbps\np;64;2;1;40,5\n",
    );
    let tabs = dir.write(
        "tabs.csv",
        "# lab\nprofile\tpacket_bytes\ttx_cores\trx_cores\tgbps\np\t64\t2\t1\t40.25\n",
    );
    for (table, line, name, convert) in [
        (&semi, 1, "';'", "sed 's/,/./g; s/;/,/g'"),
        (&tabs, 2, "tabs", "tr '\\t' ','"),
    ] {
        let file = arg(table);
        let args = [
            "demand",
            "--table",
            file,
            "--profile",
            "p",
            "--target",
            "10",
        ];
        let out = pinplan(args);
        assert_eq!(out.status.code(), Some(2), "{}", describe(&args, &out));
        let want = format!(
            "error: {file}:{line}: the header is separated by {name}: pinplan reads \
             comma-separated tables with decimal points (save it as CSV with commas, or: \
             {convert} < {file})\n"
        );
        assert!(
            text(&out.stderr).starts_with(&want),
            "{want:?} does not start:\n{}",
            describe(&args, &out)
        );
        // The advice works: the converted table is read, its decimal comma
        // (40,5) as 40.5 Gbit/s.
        let fixed = dir.path(&format!("fixed-{line}.csv"));
        let run = std::process::Command::new("sh")
            .args(["-c", &format!("{convert} < '{file}' > '{}'", arg(&fixed))])
            .status()
            .unwrap();
        assert!(run.success());
        let json = crate::util::pinplan_json(&[
            "demand",
            "--table",
            arg(&fixed),
            "--profile",
            "p",
            "--target",
            "10",
            "--format",
            "json",
        ]);
        let rate = if line == 1 { 40.5 } else { 40.25 };
        assert!(json.to_string().contains(&format!("{rate}")), "{json}");
    }
    let spec = dir.write(
        "spec.toml",
        format!("{HOST}tables = [\"semi.csv\"]\n[[vm]]\nname = \"vm1\"\nprofile = \"p\"\ntarget_gbps = 10\n"),
    );
    let out = pinplan(["plan", arg(&spec)]);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&[], &out));
    assert!(
        text(&out.stderr).contains(&format!("{}:1: the header is separated by ';'", arg(&semi))),
        "{}",
        describe(&[], &out)
    );
}

/// Regression for issue 31: a VM sized from a row with `vcpus = tx + rx`
/// (2 tx + 1 rx on 3 vCPUs) is planned with a warning, and its guest file
/// gives DPDK's main lcore (vCPU 0, the rx vCPU) to the guest's kernel: the
/// other two are isolated and forward, so testpmd is told 2 cores, not 3;
/// pktgen, whose only rx vCPU is the main lcore, gets no map.
#[test]
fn issue_31_a_table_row_without_housekeeping_vcpu_warns_and_hints_honestly() {
    let dir = TempDir::new();
    dir.write(
        "t.csv",
        "profile,packet_bytes,tx_cores,rx_cores,gbps,vcpus\np,64,2,1,50,3\n",
    );
    let spec = dir.write(
        "spec.toml",
        format!("{HOST}tables = [\"t.csv\"]\n[[vm]]\nname = \"vm1\"\nprofile = \"p\"\ntarget_gbps = 40\n"),
    );
    let out_dir = dir.path("out");
    let args = ["plan", arg(&spec), "--out", arg(&out_dir)];
    let out = pinplan(args);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&args, &out));
    let warning = "vm1: its table row has vcpus = tx + rx = 3: with no housekeeping vCPU, \
                   DPDK's main lcore shares a vCPU with a forwarding core and the guest's kernel \
                   has no CPU of its own (the guest hints leave the first vCPU to both: one \
                   forwarding core fewer); measure a row with one housekeeping vCPU (vcpus = \
                   tx + rx + 1 = 4)";
    assert!(
        text(&out.stdout).contains(warning),
        "{warning:?} not in:\n{}",
        describe(&args, &out)
    );
    let guest = std::fs::read_to_string(out_dir.join("vm1.guest.txt")).unwrap();
    assert_eq!(
        guest,
        "# vm1: the guest side of its pinning, in guest vCPU ids (3 vCPUs)\n\
         roles: main none, rx 0, tx 1-2\n\
         no housekeeping vCPU: vCPU 0 is DPDK's main lcore and the guest kernel's CPU, so it \
         is neither isolated nor a forwarding core: one forwarding core fewer than the table \
         row's tx + rx\n\
         guest kernel: isolcpus=managed_irq,domain,1-2 nohz_full=1-2 rcu_nocbs=1-2\n\
         EAL: -l 0-2 --main-lcore 0\n\
         testpmd: dpdk-testpmd -l 0-2 --main-lcore 0 -- --nb-cores=2\n"
    );
}

/// Regression for issue 31: a spec VM `tesst` at `test:///default` (whose
/// one domain is `test`, ignored here so that it leaves room) is planned
/// with a warning naming `test`, and
/// `apply` refuses it with the same guess.
#[test]
fn issue_31_a_spec_vm_no_domain_has_gets_a_did_you_mean() {
    let dir = TempDir::new();
    let spec = dir.write(
        "spec.toml",
        "[host]\nreserved_cores = 1\n[[vm]]\nname = \"tesst\"\nvcpus = 1\n[[ignore]]\nname = \"test\"\n",
    );
    let out_dir = dir.path("out");
    let args = [
        "plan",
        arg(&spec),
        "--connect",
        "test:///default",
        "--out",
        arg(&out_dir),
    ];
    let out = pinplan(args);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&args, &out));
    let warning = "vm tesst: no domain of that name at test:///default (did you mean test?): \
                   it is planned as a new VM; apply will refuse it";
    assert!(
        text(&out.stdout).contains(warning),
        "{warning:?} not in:\n{}",
        describe(&args, &out)
    );
    let plan = out_dir.join("plan.json");
    let args = ["apply", arg(&plan), "--connect", "test:///default"];
    let out = pinplan(args);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&args, &out));
    let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert!(
        all.contains("no domain \"tesst\" at test:///default: ")
            && all.contains("(did you mean test? virsh list --all shows the names)"),
        "{}",
        describe(&args, &out)
    );
}

/// Regression for issue 31: isolate said "moved 82 threads" and its undo
/// "moved 72 back (0 had ended)": a moved task that ended meanwhile, or
/// that another program moved on, was skipped without a word. Now the undo
/// counts the isolation's moves, each one back, ended or left elsewhere,
/// and names the tasks started in pinplan's cgroup since, which go out with
/// it. On a cgroup v2 tree: init (1), sshd (500) and cron (501) move;
/// then 500 ends, 501 is moved elsewhere, and 600 starts inside.
#[test]
fn issue_31_the_undo_accounts_for_every_task_the_isolation_moved() {
    use crate::isolate_cli::{isolate, ok, plan, read, stat, v2_tree};
    let dir = TempDir::new();
    let (plan, _) = plan(&dir, &["vm1"]);
    let root = v2_tree(&dir);
    let put = |rel: &str, text: &str| dir.write(&format!("root/{rel}"), text);
    put("proc/501/comm", "cron\n");
    put("proc/501/stat", &stat(501, "cron", 0x0040_0140, 950));
    put("proc/501/status", "Name:\tcron\nCpus_allowed_list:\t0-3\n");
    put("sys/fs/cgroup/cgroup.procs", "1\n2\n500\n501\n");
    let (root_arg, state) = (arg(&root).to_owned(), dir.path("state"));
    let journal = dir.path("j.json");
    let common = ["--root", &root_arg, "--state", arg(&state)];
    let out = ok(&isolate(
        &[
            &["--plan", arg(&plan), "--journal", arg(&journal)][..],
            &common[..],
        ]
        .concat(),
    ));
    assert!(
        out.contains(
            "moved 3 threads or processes to the housekeeping cgroup (0 refused by the kernel, 0 ended)\n"
        ),
        "{out}"
    );
    let ours = "sys/fs/cgroup/pinplan.housekeeping/cgroup.procs";
    assert_eq!(read(&root, ours), "1\n500\n501\n");

    // 500 ends; 501 is moved elsewhere; 600 starts in pinplan's cgroup.
    std::fs::remove_dir_all(root.join("proc/500")).unwrap();
    put(ours, "1\n600\n");
    put("proc/600/comm", "sh\n");
    put("proc/600/stat", &stat(600, "sh", 0x0040_0140, 2000));

    let out = ok(&isolate(
        &[&["--undo", arg(&journal)][..], &common[..]].concat(),
    ));
    assert!(
        out.contains(
            "moved back 1 of the 3 threads or processes the isolation moved (1 had ended, \
             1 was no longer in pinplan's cgroup: left in place)\n\
             moved out with pinplan's cgroup: 1 thread or process started in it since\n"
        ),
        "{out}"
    );
    // Init back (the one move made), then the cgroup's remaining tasks
    // (init again, and 600) as it is removed.
    assert_eq!(
        read(&root, "sys/fs/cgroup/cgroup.procs"),
        "1\n2\n500\n501\n1\n1\n600\n"
    );
}

/// What an installed binary's help may not name: paths of the repository
/// (an installed binary has none) and its issues.
const REPOSITORY_ONLY: [&str; 4] = ["docs/", "issue ", "tests/fixtures", "../"];

/// Every help topic, as `pinplan --help` lists them (`pinplan help NAME`).
fn topics() -> Vec<String> {
    let help = util::pinplan_ok(&["--help"]);
    let list = help
        .split_once("Help topics:\n")
        .map(|(_, rest)| rest.split("\n\n").next().unwrap_or(""))
        .unwrap_or_else(|| panic!("no Help topics: in\n{help}"));
    let names: Vec<String> = list
        .lines()
        .filter_map(|l| l.trim().strip_prefix("pinplan help "))
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_owned)
        .collect();
    assert!(names.len() >= 4, "{names:?}");
    names
}

/// The words of `text` that start with `prefix`, without the quotes,
/// brackets and punctuation around them.
fn words_from<'t>(text: &'t str, prefix: &str) -> Vec<&'t str> {
    text.split(|c: char| c.is_whitespace() || "`'\"(),;=".contains(c))
        .filter(|w| w.starts_with(prefix))
        .map(|w| w.trim_end_matches(['.', ':']))
        .collect()
}

/// Regression for issue 31: `pinplan help formats` linked `docs/*.md` and
/// help texts named "issue 15", which an installed binary has no way to
/// follow. Every topic and every command's `--help` and `-h` is run: none
/// names a path of the repository; every example file it names is under
/// `examples/` (which scripts/install.sh installs whole), and every doc it
/// names by file (`topology.md in pinplan's docs`) is one of `docs/`
/// (installed whole too).
#[test]
fn issue_31_no_help_names_a_path_of_the_repository() {
    let mut pages: Vec<(String, String)> = topics()
        .into_iter()
        .map(|t| (format!("help {t}"), util::pinplan_ok(&["help", &t])))
        .collect();
    pages.push(("--help".to_owned(), util::pinplan_ok(&["--help"])));
    for command in crate::cli_shell::subcommands() {
        for flag in ["--help", "-h"] {
            pages.push((
                format!("{command} {flag}"),
                util::pinplan_ok(&[&command, flag]),
            ));
        }
    }
    let repo = util::repo();
    let mut docs_named = 0;
    for (page, text) in &pages {
        let lower = text.to_lowercase();
        for path in REPOSITORY_ONLY {
            assert!(
                !lower.contains(path),
                "pinplan {page} names {path:?}:\n{text}"
            );
        }
        for word in words_from(text, "examples/") {
            let file = word.split('*').next().unwrap_or(word);
            assert!(
                repo.join(file).exists(),
                "pinplan {page} names {word}, which examples/ does not have"
            );
        }
        for (at, _) in text.match_indices(" in pinplan's docs") {
            let before = &text[..at];
            let word = before
                .rsplit(|c: char| c.is_whitespace() || c == '(')
                .next()
                .unwrap_or("");
            let file = word.split('#').next().unwrap_or(word);
            assert!(
                file.ends_with(".md") && repo.join("docs").join(file).is_file(),
                "pinplan {page} names {word:?} in pinplan's docs"
            );
            docs_named += 1;
        }
    }
    // formats and policies link to topology.md, plan.md, xml.md, …
    assert!(docs_named >= 10, "{docs_named}");
}

/// Issue 31: an installed binary (PREFIX/bin/pinplan, its docs where
/// scripts/install.sh puts them) says where the docs its topics name are;
/// without them, where it looked.
#[test]
fn issue_31_an_installed_binarys_topics_say_where_its_docs_are() {
    let prefix = TempDir::new();
    let bin = prefix.path("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let exe = bin.join("pinplan");
    std::fs::copy(env!("CARGO_BIN_EXE_pinplan"), &exe).unwrap();
    let docs = prefix.path("share/doc/pinplan");
    crate::cli_shell::copy_dir(&util::repo().join("docs"), &docs);
    let run = |topic: &str| -> String {
        let out = std::process::Command::new(&exe)
            .args(["help", topic])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        // Wrapped at 80 columns: compared as one line.
        text(&out.stdout)
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    };
    let installed = format!(
        "pinplan's docs, named here by file (topology.md), are installed with this binary in {}.",
        docs.display()
    );
    for topic in ["formats", "policies"] {
        let said = run(topic);
        assert!(said.ends_with(&installed), "{topic}: {said}");
        assert!(said.contains(" in pinplan's docs"), "{topic}");
    }
    std::fs::remove_dir_all(&docs).unwrap();
    let said = run("formats");
    assert!(
        said.ends_with(&format!(
            "are not installed beside this binary (looked in {}): scripts/install.sh installs \
             them there; a clone of the repository has them in its docs folder.",
            docs.display()
        )),
        "{said}"
    );
}
