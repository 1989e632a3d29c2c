//! What `--help`, `pinplan help TOPIC` and the man pages say beyond the clap
//! definitions: every subcommand's examples and exit status (added to its
//! help by [`decorate`]), and the reference topics, embedded from the
//! repository's docs folder so that an installed binary carries them; the
//! other docs they link to are named by file, in the folder where
//! scripts/install.sh installs them (`PREFIX/share/doc/pinplan`), which the
//! topic names.
//!
//! The examples run on the bundled examples (`examples/`) from the folder
//! that holds them: the repository's root, or `PREFIX/share/pinplan` where
//! scripts/install.sh puts them (`pinplan help examples`); `tests/cli_shell.rs` runs each one that reads only
//! files, and checks the others' arguments, so the help stays true.

use clap::builder::{PossibleValue, PossibleValuesParser};
use clap_mangen::roff::{bold, roman, Roff};

/// A help topic: `pinplan help NAME`.
pub struct Topic {
    /// Its name.
    pub name: &'static str,
    /// One line for the lists.
    pub about: &'static str,
}

/// Every topic, in the order they are listed.
pub const TOPICS: [Topic; 4] = [
    Topic {
        name: "formats",
        about: "the file formats: CPU lists, topology files, throughput tables, the plan spec",
    },
    Topic {
        name: "policies",
        about: "how VMs are placed: threads, emulator, numa, nic_affinity, the objective",
    },
    Topic {
        name: "exit-codes",
        about: "what each command's exit status means",
    },
    Topic {
        name: "examples",
        about: "where the example files are that every help example runs on",
    },
];

const FORMATS: &str = include_str!("../../docs/formats.md");
const PLAN: &str = include_str!("../../docs/plan.md");

/// The sections of docs/plan.md that `pinplan help policies` shows.
const POLICY_SECTIONS: [&str; 3] = [
    "## What a placement is",
    "### Objective",
    "### NUMA nodes the host does not know",
];

/// A command's examples and exit status.
struct Page {
    /// The subcommand, or `""` for pinplan itself.
    command: &'static str,
    /// Example lines: a command, or `# what the next ones do`.
    examples: &'static [&'static str],
    /// Each exit status and what it means for this command.
    exit: &'static [(u8, &'static str)],
}

const PAGES: [Page; 15] = [
    Page {
        command: "",
        examples: &[
            "# The lab: its host, a plan for its two VMs, and what the plan would change",
            "pinplan topology --source examples/lab/b1-host.xml",
            "pinplan plan examples/lab/b1.toml --out plans/",
            "pinplan report --source examples/lab/b1-host.xml --domains examples/lab/now/*.xml --plan plans/plan.json",
            "# The same plan made for, and applied to, the host libvirt reaches",
            "pinplan plan examples/lab/b1.toml --connect qemu:///system --out plans/ && pinplan apply plans/plan.json --connect qemu:///system",
        ],
        exit: &[
            (0, "success"),
            (1, "the answer is no: a VM cannot be placed (plan), CPUs or cores are shared (report), a check failed (doctor), no demand reaches the target (demand), a pin call failed (apply)"),
            (2, "bad input or an error"),
        ],
    },
    Page {
        command: "topology",
        examples: &[
            "# The lab's host, from its `lstopo --of xml` export",
            "pinplan topology --source examples/lab/b1-host.xml",
            "# The same as JSON, for scripts",
            "pinplan topology --source examples/lab/b1-host.xml --format json",
            "# A host to plan for before it exists: 2 sockets x 16 cores, siblings N and N+32",
            "pinplan topology --source 'synthetic:package:2 core:16 pu:2(indexes=2*32:1*2)'",
            "# This machine (hwloc), and a host libvirt reaches",
            "pinplan topology",
            "pinplan topology --connect qemu+ssh://root@server/system",
        ],
        exit: &[
            (0, "the topology was read and printed"),
            (2, "it could not be read: a missing, truncated or unknown file, a bad synthetic description, hwloc or libvirt failed"),
        ],
    },
    Page {
        command: "demand",
        examples: &[
            "# The lab's vm1: 100 G of 64-byte packets, 97 G is good enough (14 vCPUs, measured)",
            "pinplan demand --table examples/lab/b1-tx-cores.csv --profile vm-64b --target 100 --min-fraction 0.97",
            "# What the packet-rate model says for 50 G instead of the measurements",
            "pinplan demand --table examples/lab/b1-tx-cores.csv --profile vm-64b --target 50 --basis model",
            "# How well the model predicts the table's own rows",
            "pinplan demand --table examples/lab/b1-tx-cores.csv --leave-one-out",
        ],
        exit: &[
            (0, "a demand (with --leave-one-out: the model's errors)"),
            (1, "no demand can be given: the target is unreachable, or refused as an extrapolation"),
            (2, "bad input: a table error (with file:line), an unknown profile (the closest is suggested), a bad option"),
        ],
    },
    Page {
        command: "plan",
        examples: &[
            "# The lab's two VMs on the lab's host (the spec's [host] source)",
            "pinplan plan examples/lab/b1.toml",
            "# Also write plans/plan.json and each VM's domain XML (vm1.xml, vm2.fragment.xml)",
            "pinplan plan examples/lab/b1.toml --out plans/",
            "# The first-fit baseline, as JSON",
            "pinplan plan examples/lab/b1.toml --solver greedy --format json",
            "# For the host libvirt reaches, to apply there: around every domain running there,",
            "# keeping the running VMs the spec names where they run (unless movable = true)",
            "pinplan plan examples/lab/b1.toml --connect qemu:///system --out plans/",
            "# No spec: every domain there that carries its own request (pinplan tag)",
            "pinplan plan --connect qemu:///system",
            "# A captured topology, the domains through the URI; shut-off domains' pins counted too",
            "pinplan plan examples/lab/b1.toml --source examples/lab/b1-host.xml --connect qemu:///system --count-shut-off",
            "# A fleet ([[host]] tables): each VM's host too; plans-fleet/HOST/plan.json and fleet.json",
            "pinplan plan examples/fleet.toml --out plans-fleet/",
        ],
        exit: &[
            (0, "every VM placed"),
            (1, "some VM cannot be placed: the plan still lists what fits, why the others do not, and what would change that (a domain running there that floats leaves no core: it is named)"),
            (2, "bad input or an error: the spec, its tables, the topology, the domains at --connect, writing --out; or a VM's domain_xml with another vCPU count (without --set-vcpus): the rest of the set is written, that VM's file is not"),
        ],
    },
    Page {
        command: "xml",
        examples: &[
            "# vm2's pinning, to put into its domain (virsh edit vm2)",
            "pinplan plan examples/lab/b1.toml --out plans/ && pinplan xml --plan plans/plan.json --vm vm2",
            "# vm1's domain with its pinning replaced, everything else kept byte for byte",
            "pinplan xml --plan plans/plan.json --patch examples/lab/vm1.xml --out vm1.xml",
            "# The domain defined in libvirt, patched, ready for virsh define",
            "pinplan xml --plan plans/plan.json --vm vm1 --connect qemu:///system > vm1.xml && virsh define vm1.xml",
        ],
        exit: &[
            (0, "the XML was printed or written"),
            (2, "refused, nothing written: not XML or truncated, not a <domain>, a vCPU count other than the plan's (without --set-vcpus), no such VM in the plan, a plan that places no VM, a file that is not a plan, another host's plan (--connect), libvirt failed"),
        ],
    },
    Page {
        command: "report",
        examples: &[
            "# Who shares CPUs and cores in the lab now (exit 1: vm1 and vm2 do)",
            "pinplan report --source examples/lab/b1-host.xml --domains examples/lab/now/vm1.xml examples/lab/now/vm2.xml",
            "# ... and what a plan would move",
            "pinplan plan examples/lab/b1.toml --out plans/ && pinplan report --source examples/lab/b1-host.xml --domains examples/lab/now/*.xml --plan plans/plan.json",
            "# A picture of the host, coloured by tenant",
            "pinplan report --source examples/lab/b1-host.xml --domains examples/lab/now/*.xml --format svg > host.svg",
            "# Every domain of a libvirt host, with the pins of those running",
            "pinplan report --connect qemu:///system",
            "# Every host of a fleet plan, each against its own plan",
            "pinplan report --fleet fleet/",
        ],
        exit: &[
            (0, "no conflict of severity error (warnings allowed)"),
            (1, "at least one error: CPUs or cores shared between tenants, vCPUs on the host's CPUs; with --plan, an error the plan leaves or adds; with --fleet, on a host, or a host without a URI"),
            (2, "bad input: unreadable or malformed domain XML, a bad --host-cpus, a file that is not a plan or another host's plan, a domain given twice, an unreadable topology"),
        ],
    },
    Page {
        command: "apply",
        examples: &[
            "# Plan for the host libvirt reaches, check, then apply (it prints its journal)",
            "pinplan plan examples/lab/b1.toml --connect qemu:///system --out plans/",
            "pinplan apply plans/plan.json --connect qemu:///system --dry-run",
            "pinplan apply plans/plan.json --connect qemu:///system",
            "# Put the VMs back as they were before (the journal names its URI; it is in",
            "# /var/lib/pinplan as root, else $XDG_STATE_HOME/pinplan)",
            "pinplan apply --rollback /var/lib/pinplan/pinplan-journal-SECONDS-PID.json",
            "# A fleet spec whose [[host]]s have connect URIs: plan, then every host in parallel; undo it all",
            "pinplan plan my-fleet.toml --out fleet/ && pinplan apply --fleet fleet/ --all-or-nothing",
            "pinplan apply --rollback /var/lib/pinplan/pinplan-fleet-journal-SECONDS-PID.json",
        ],
        exit: &[
            (0, "applied and verified, already in effect, dry run passed, or rolled back (with --fleet: on every host)"),
            (1, "a pin call or read-back failed: the host was restored, or the message says what is left and how to retry; or the plan places no VM; with --fleet, a host failed, or was held or rolled back by --all-or-nothing"),
            (2, "a precondition failed (another host's plan, a journal path that exists, --live on a shut-off domain, a domain outside the plan that may run on the planned cores, an earlier apply on the host that did not finish, …), or bad input: nothing was changed (with --fleet: on that host)"),
            (130, "interrupted by SIGINT (143: SIGTERM): what was changed was restored from the journal, or after a second signal the message names the rollback that finishes it"),
        ],
    },
    Page {
        command: "doctor",
        examples: &[
            "# This machine, every NIC",
            "pinplan doctor",
            "# This machine against the lab's plan: its NICs' VFs and links, SMT, isolation, IRQs",
            "pinplan plan examples/lab/b1.toml --out plans/ && pinplan doctor --plan plans/plan.json",
            "# A captured sys/ and proc/ tree of another host, one NIC, as JSON",
            "pinplan doctor --root capture/ --nic 0000:65:00.0 --format json",
            "# A host reached through libvirt only: its PCI node devices (IOMMU, VFIO, SR-IOV, links)",
            "pinplan doctor --connect qemu+ssh://root@b1/system",
            "# Every host of a fleet plan: from its doctor_root, else through its URI",
            "pinplan doctor --fleet fleet/",
        ],
        exit: &[
            (0, "no check failed (warnings and skips allowed)"),
            (1, "at least one check failed (with --fleet: on a host, or a host could not be checked)"),
            (2, "bad input: --root holds neither sys/ nor proc/, the plan cannot be read or was made for another host, a malformed --nic address, a NIC that is not a PCI device under the root (or at --connect URI), libvirt cannot be read"),
        ],
    },
    Page {
        command: "isolate",
        examples: &[
            "# What would change: cgroups, IRQs, workqueues (nothing is changed)",
            "pinplan isolate --plan plans/plan.json --dry-run",
            "# Keep the host off the VM CPUs now; undo it from the journal",
            "pinplan isolate --plan plans/plan.json --journal iso.json && pinplan isolate --undo iso.json",
            "# The boot-time way: kernel arguments, or tuned's cpu-partitioning",
            "pinplan isolate --plan plans/plan.json --emit kernel-args",
            "# Isolate each VM's CPUs only while it runs (libvirt hook)",
            "pinplan isolate --plan /etc/pinplan/plan.json --emit hook /etc/libvirt/hooks",
        ],
        exit: &[
            (0, "isolated, emitted or undone (refused IRQs and kernel threads are listed, not errors)"),
            (1, "--undo (or the hook) could not restore every value: each is listed"),
            (2, "bad input: the plan cannot be read, is another host's, places no VM or reserves every CPU; a journal that is not isolate's or exists already; an isolation in effect already; a file that cannot be written"),
            (130, "interrupted by SIGINT (143: SIGTERM): the isolation was undone from its journal, or after a second signal the message names the undo that finishes it"),
        ],
    },
    Page {
        command: "tag",
        examples: &[
            "# Check a domain's request first, then write it into its metadata",
            "pinplan tag vm1 --connect qemu:///system vcpus=4 threads=prefer movable=true --dry-run",
            "pinplan tag vm1 --connect qemu:///system vcpus=4 threads=prefer movable=true",
            "# Sized from a table; remove a key; show the request",
            "pinplan tag vm2 --connect qemu:///system profile=vm-64b target_gbps=100 table=/etc/pinplan/b1-tx-cores.csv",
            "pinplan tag vm1 --connect qemu:///system movable=",
            "pinplan tag vm1 --connect qemu:///system",
        ],
        exit: &[
            (0, "written, unchanged, or shown (--dry-run, or no KEY=VALUE)"),
            (2, "the request is not valid (the message names the domain and the key), no such domain, libvirt refused or read back another request"),
        ],
    },
    Page {
        command: "watch",
        examples: &[
            "# The service, in the foreground: pins domains as they are defined and started",
            "pinplan watch --connect qemu:///system /etc/pinplan/host.toml",
            "# What it would do, as JSON lines",
            "pinplan watch --connect qemu:///system --dry-run --format json",
            "# Run it under systemd, and ask it before each start (libvirt hook)",
            "pinplan watch --emit systemd --connect qemu:///system /etc/pinplan/host.toml > /etc/systemd/system/pinplan-watch.service",
            "pinplan watch --emit hook /etc/libvirt/hooks",
            "# Every pin it set, back as it was",
            "pinplan watch --undo --connect qemu:///system",
        ],
        exit: &[
            (0, "stopped by SIGTERM or SIGINT; emitted; undone; with --admit: the domain may start"),
            (1, "with --admit: the start is refused (the reason on standard error, which libvirt shows)"),
            (2, "bad input or an error: the spec, the topology, the admission socket taken by another watcher, a hook file that is not pinplan's; --undo could not put a journal back"),
        ],
    },
    Page {
        command: "repack",
        examples: &[
            "# What would move to make room for an 8-vCPU VM",
            "pinplan repack --connect qemu:///system --for 8 --spec /etc/pinplan/host.toml --dry-run",
            "# Make room for a defined domain with a request, moving at most 4 vCPUs",
            "pinplan repack --connect qemu:///system --for vm3 --max-moves 4",
            "# The free cores as whole as moves can make them, the fewest moves",
            "pinplan repack --connect qemu:///system --spec /etc/pinplan/host.toml --dry-run",
        ],
        exit: &[
            (0, "room was made, or without --for the free cores made as whole as moves can (or, with --dry-run, would be): the moves are listed, with their journal; also when no move helps"),
            (1, "the answer is no: it does not fit even with every movable VM moved, or it needs more moves than --max-moves (nothing was changed)"),
            (2, "bad input or an error: the spec, --for a domain that runs or has no request, libvirt, no exact plan in the time limit (nothing was moved), a pin call (what it changed was put back)"),
        ],
    },
    Page {
        command: "completions",
        examples: &[
            "# bash (with bash-completion), for this user",
            "mkdir -p ~/.local/share/bash-completion/completions && pinplan completions bash > ~/.local/share/bash-completion/completions/pinplan",
            "# zsh: into a directory of $fpath",
            "mkdir -p ~/.zfunc && pinplan completions zsh > ~/.zfunc/_pinplan",
            "# fish",
            "mkdir -p ~/.config/fish/completions && pinplan completions fish > ~/.config/fish/completions/pinplan.fish",
        ],
        exit: &[
            (0, "the script was printed"),
            (2, "standard output could not be written (a closed pipe is not an error)"),
        ],
    },
    Page {
        command: "man",
        examples: &[
            "# Read the page without installing it",
            "pinplan man | man -l -",
            "# Install pinplan.1 and a page per subcommand (pinplan-plan.1, ...)",
            "pinplan man --out /usr/local/share/man/man1",
        ],
        exit: &[
            (0, "the page was printed, or every page written"),
            (2, "the directory or a page could not be written"),
        ],
    },
    Page {
        command: "help",
        examples: &[
            "# The file formats, and how VMs are placed",
            "pinplan help formats",
            "pinplan help policies",
            "# What every command's exit status means",
            "pinplan help exit-codes",
            "# A command's help, the same as pinplan plan --help",
            "pinplan help plan",
        ],
        exit: &[
            (0, "the help was printed"),
            (2, "no such topic or command (the message lists them)"),
        ],
    },
];

/// Width the added help text is wrapped to.
const WIDTH: usize = 100;

/// pinplan's clap command with each page's examples and exit status after
/// its help, the topics listed at the top, and the topics and commands as
/// the values of `help`.
pub fn decorate(command: clap::Command) -> clap::Command {
    let topics: String = TOPICS
        .iter()
        .map(|t| format!("  {:<28}{}\n", format!("pinplan help {}", t.name), t.about))
        .collect();
    let mut values: Vec<PossibleValue> = TOPICS
        .iter()
        .map(|t| PossibleValue::new(t.name).help(t.about))
        .collect();
    // The pages name every subcommand (unit-tested), with 'static names.
    values.extend(PAGES.iter().filter(|p| !p.command.is_empty()).map(|p| {
        let about = command
            .find_subcommand(p.command)
            .and_then(|s| s.get_about())
            .cloned()
            .unwrap_or_default();
        PossibleValue::new(p.command).help(about)
    }));
    let mut command = command;
    for page in &PAGES {
        let text = page.text();
        command = if page.command.is_empty() {
            command.after_help(format!("Help topics:\n{topics}\n{text}"))
        } else {
            command.mut_subcommand(page.command, |sub| sub.after_help(text))
        };
    }
    command.mut_subcommand("help", |help| {
        help.mut_arg("topic", |arg| {
            arg.value_parser(PossibleValuesParser::new(values))
        })
    })
}

impl Page {
    /// `Examples:` and `Exit status:`, as the help shows them.
    fn text(&self) -> String {
        let mut out = String::from("Examples:\n");
        for line in self.examples {
            out.push_str("  ");
            out.push_str(line);
            out.push('\n');
        }
        out.push_str("\nExit status:\n");
        out.push_str(&self.exit_text());
        out
    }

    fn exit_text(&self) -> String {
        self.exit
            .iter()
            .map(|(code, meaning)| wrap(&format!("  {code}  "), meaning, WIDTH))
            .collect()
    }
}

/// The sections a man page has beyond clap_mangen's: EXIT STATUS,
/// EXAMPLES and SEE ALSO, for `command` (`""` for pinplan itself), as roff
/// without the preamble clap_mangen's part of the page already has.
pub fn man_sections(command: &str) -> String {
    let mut roff = Roff::new();
    if let Some(page) = PAGES.iter().find(|p| p.command == command) {
        roff.control("SH", ["EXIT STATUS"]);
        for (code, meaning) in page.exit {
            roff.control("TP", []);
            roff.text([bold(code.to_string())]);
            roff.text([roman(*meaning)]);
        }
        roff.control("SH", ["EXAMPLES"]);
        let mut lines = page.examples.iter().peekable();
        while let Some(line) = lines.next() {
            if let Some(comment) = line.strip_prefix("# ") {
                roff.control("PP", []);
                roff.text([roman(comment)]);
                continue;
            }
            roff.control("PP", []);
            roff.control("RS", ["4"]);
            roff.control("nf", []);
            roff.text([bold(*line)]);
            while let Some(next) = lines.next_if(|l| !l.starts_with('#')) {
                roff.text([bold(*next)]);
            }
            roff.control("fi", []);
            roff.control("RE", []);
        }
    }
    roff.control("SH", ["SEE ALSO"]);
    // Page names and commands read badly hyphenated.
    roff.control("nh", []);
    if command.is_empty() {
        let pages: Vec<String> = PAGES
            .iter()
            .filter(|p| !p.command.is_empty())
            .map(|p| format!("pinplan-{}(1)", p.command))
            .collect();
        roff.text([roman(format!("{}.", pages.join(", ")))]);
    } else {
        roff.text([roman("pinplan(1).")]);
    }
    let topics: Vec<String> = TOPICS
        .iter()
        .map(|t| format!("pinplan help {}", t.name))
        .collect();
    roff.control("PP", []);
    roff.text([roman(format!(
        "The reference topics: {}.",
        topics.join(", ")
    ))]);
    let preamble = Roff::new().render();
    let text = roff.render();
    text.strip_prefix(&preamble).unwrap_or(&text).to_owned()
}

/// `prefix` then `text`, wrapped at `width` columns between words, each
/// line after the first indented as far as `prefix` goes; ends with a newline.
fn wrap(prefix: &str, text: &str, width: usize) -> String {
    let indent = " ".repeat(prefix.chars().count());
    let mut out = String::new();
    let mut line = prefix.to_owned();
    let mut words = 0;
    for word in text.split_whitespace() {
        if words > 0 && line.chars().count() + 1 + word.chars().count() > width {
            out.push_str(&line);
            out.push('\n');
            line.clone_from(&indent);
            words = 0;
        }
        if words > 0 {
            line.push(' ');
        }
        line.push_str(word);
        words += 1;
    }
    out.push_str(&line);
    out.push('\n');
    out
}

/// The text of topic `name`, or `None` when there is no such topic.
pub fn topic(name: &str) -> Option<String> {
    match name {
        "formats" => Some(markdown(FORMATS) + &docs_footer()),
        "policies" => Some(policies()),
        "exit-codes" => Some(exit_codes()),
        "examples" => Some(examples()),
        _ => None,
    }
}

/// Where the installed examples of this binary are: `PREFIX/bin/pinplan`
/// has them in `PREFIX/share/pinplan/examples` (scripts/install.sh).
fn installed_examples() -> Option<std::path::PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let prefix = exe.parent()?.parent()?;
    Some(prefix.join("share/pinplan/examples"))
}

/// `pinplan help examples`: where the example files are, and how to run the
/// help's examples on them.
fn examples() -> String {
    let mut out = String::from(
        "The examples of `pinplan --help` and `pinplan COMMAND --help` name the bundled\n\
         example files (`examples/lab/b1.toml`, the lab's host and throughput table,\n\
         the specs of the docs) and run from the folder that holds `examples/`.\n\n",
    );
    match installed_examples() {
        Some(dir) if dir.join("lab/b1.toml").is_file() => {
            let parent = dir.parent().unwrap_or(&dir);
            out.push_str(&format!(
                "Installed with this binary: {}\n\n\
                 Run the help's examples there, or on a copy you may change:\n\
                 \x20 cd {} && pinplan plan examples/lab/b1.toml\n\
                 \x20 cp -r {} . && pinplan plan examples/lab/b1.toml\n",
                dir.display(),
                parent.display(),
                dir.display()
            ));
        }
        Some(dir) => out.push_str(&format!(
            "Not installed beside this binary (looked in {}): scripts/install.sh\n\
             installs them there; a clone of the repository has them at its root.\n",
            dir.display()
        )),
        None => out.push_str(
            "scripts/install.sh installs them in PREFIX/share/pinplan/examples; a clone\n\
             of the repository has them at its root.\n",
        ),
    }
    out.push_str(
        "\nOn your own host, drop the spec's `source` (the live host is read) or give\n\
         `--connect qemu:///system`.\n",
    );
    out
}

/// `pinplan help policies`: the placement sections of the docs' plan.md.
fn policies() -> String {
    let mut md = String::from(
        "# Placement policies\n\n\
         How `pinplan plan` places VMs (from plan.md of pinplan's docs). Every spec\n\
         key, its values and its default: `pinplan help formats` (Plan spec).\n",
    );
    for heading in POLICY_SECTIONS {
        if !md.ends_with("\n\n") {
            md.push('\n');
        }
        // Unit-tested to be there; a renamed heading fails the tests.
        md.push_str(section(PLAN, heading).unwrap_or(heading));
    }
    markdown(&md) + &docs_footer()
}

/// Where the docs are that `pinplan help formats` and `policies` name by
/// file: `PREFIX/bin/pinplan` has them in `PREFIX/share/doc/pinplan`
/// (scripts/install.sh).
fn installed_docs() -> Option<std::path::PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let prefix = exe.parent()?.parent()?;
    Some(prefix.join("share/doc/pinplan"))
}

/// The topic's last lines: where the docs it names (`topology.md in
/// pinplan's docs`) are.
fn docs_footer() -> String {
    let place = match installed_docs() {
        Some(dir) if dir.join("formats.md").is_file() => {
            format!("installed with this binary in {}.", dir.display())
        }
        Some(dir) => format!(
            "not installed beside this binary (looked in {}): scripts/install.sh installs \
             them there; a clone of the repository has them in its docs folder.",
            dir.display()
        ),
        None => "scripts/install.sh installs them in PREFIX/share/doc/pinplan; a clone of \
                 the repository has them in its docs folder."
            .to_owned(),
    };
    format!(
        "\n{}",
        wrap(
            "",
            &format!("pinplan's docs, named here by file (topology.md), are {place}"),
            80
        )
    )
}

/// `pinplan help exit-codes`: the convention, then every command's.
fn exit_codes() -> String {
    let mut out = String::from(
        "# Exit status\n\nEvery pinplan command exits 0 on success, 1 when the answer is no, 2 for bad input \
         or an error. Errors are printed on standard error as `error: ...`, then `Caused by:` \
         lines, then `hint: ...` where a fix is known. A closed standard output (pinplan ... | \
         head) is success. --quiet and --verbose never change the exit status.\n",
    );
    for page in &PAGES {
        out.push('\n');
        out.push_str(format!("pinplan {}", page.command).trim_end());
        out.push('\n');
        out.push_str(&page.exit_text());
    }
    wrap_paragraphs(&out)
}

/// Wraps every line longer than [`WIDTH`] that does not start with a space.
fn wrap_paragraphs(text: &str) -> String {
    text.lines()
        .map(|line| {
            if line.len() > WIDTH && !line.starts_with(' ') {
                wrap("", line, WIDTH)
            } else {
                format!("{line}\n")
            }
        })
        .collect()
}

/// The section of `md` that starts with the line `heading`, up to the next
/// heading of its level or above (outside code blocks).
fn section<'a>(md: &'a str, heading: &str) -> Option<&'a str> {
    let level = heading.chars().take_while(|&c| c == '#').count();
    let start = md.match_indices(heading).map(|(at, _)| at).find(|&at| {
        (at == 0 || md[..at].ends_with('\n')) && md[at + heading.len()..].starts_with('\n')
    })?;
    let mut end = md.len();
    let mut fenced = false;
    let mut offset = start;
    for line in md[start..].split_inclusive('\n') {
        if offset > start {
            if line.starts_with("```") {
                fenced = !fenced;
            }
            let hashes = line.chars().take_while(|&c| c == '#').count();
            if !fenced && hashes > 0 && hashes <= level && line[hashes..].starts_with(' ') {
                end = offset;
                break;
            }
        }
        offset += line.len();
    }
    Some(&md[start..end])
}

/// Markdown as a terminal shows it well: code blocks indented by four
/// spaces without their fences (their `#` lines are comments, not
/// headings), and links to the other docs named by the command that prints
/// them (`pinplan help formats`) or by their file in pinplan's docs
/// (`xml.md in pinplan's docs`): an installed binary has no repository.
fn markdown(md: &str) -> String {
    let mut out = String::new();
    let mut fenced = false;
    for line in md.lines() {
        if line.starts_with("```") {
            fenced = !fenced;
        } else if fenced {
            if !line.is_empty() {
                out.push_str("    ");
            }
            out.push_str(line);
            out.push('\n');
        } else {
            out.push_str(&links(line));
            out.push('\n');
        }
    }
    out
}

/// `[text](target)` → `text (where)`, or `where` alone when the text is the
/// file's name; anything else in brackets (`[[vm]]`) stays.
fn links(line: &str) -> String {
    let mut out = String::new();
    let mut rest = line;
    while let Some(open) = rest.find('[') {
        let after = &rest[open + 1..];
        let link = after.find(']').and_then(|close| {
            let target = after[close + 1..].strip_prefix('(')?;
            let end = target.find(')')?;
            Some((&after[..close], &target[..end], close + 2 + end + 1))
        });
        match link {
            Some((text, target, len)) if !text.contains('[') => {
                out.push_str(&rest[..open]);
                let (file, place) = doc_ref(target);
                if text.trim_matches('`') == file {
                    out.push_str(&place);
                } else {
                    out.push_str(&format!("{text} ({place})"));
                }
                rest = &after[len..];
            }
            _ => {
                out.push_str(&rest[..=open]);
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// A link's file, and where a user of the binary finds it.
fn doc_ref(target: &str) -> (&str, String) {
    let (file, anchor) = target.split_once('#').unwrap_or((target, ""));
    let policies = POLICY_SECTIONS.iter().any(|h| {
        anchor
            == h.trim_start_matches('#')
                .trim()
                .to_lowercase()
                .replace(' ', "-")
    });
    let place = if target.contains("://") {
        target.to_owned()
    } else if file == "formats.md" {
        "`pinplan help formats`".to_owned()
    } else if file == "plan.md" && policies {
        "`pinplan help policies`".to_owned()
    } else {
        format!("{target} in pinplan's docs")
    };
    (file, place)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_policy_section_is_in_docs_plan_md() {
        for heading in POLICY_SECTIONS {
            let text = section(PLAN, heading).unwrap_or_else(|| panic!("{heading}"));
            assert!(text.lines().count() > 3, "{heading}: {text}");
        }
        let text = policies();
        assert!(text.contains("threads = \"require\""), "{text}");
        assert!(text.contains("fewest cores used"), "{text}");
    }

    #[test]
    fn a_section_ends_at_the_next_heading_of_its_level() {
        let md = "# A\n\n## B\nb\n### C\nc\n```\n## not a heading\n```\n## D\nd\n";
        for (heading, expected) in [
            ("## B", "## B\nb\n### C\nc\n```\n## not a heading\n```\n"),
            ("### C", "### C\nc\n```\n## not a heading\n```\n"),
            ("## D", "## D\nd\n"),
        ] {
            assert_eq!(section(md, heading), Some(expected), "{heading}");
        }
        assert_eq!(section(md, "## E"), None);
        assert_eq!(section(md, "## "), None);
    }

    #[test]
    fn links_name_the_help_topic_or_the_docs_file() {
        for (line, expected) in [
            (
                "see [topology.md](topology.md)",
                "see topology.md in pinplan's docs",
            ),
            (
                "see [formats.md](formats.md#plan-spec-toml)",
                "see `pinplan help formats`",
            ),
            (
                "as [`pinplan demand`](demand-model.md) does",
                "as `pinplan demand` (demand-model.md in pinplan's docs) does",
            ),
            (
                "see [benchmarks](benchmarks.md#apply).",
                "see benchmarks (benchmarks.md#apply in pinplan's docs).",
            ),
            (
                "[placement](plan.md#what-a-placement-is)",
                "placement (`pinplan help policies`)",
            ),
            ("[rustup](https://rustup.rs)", "rustup (https://rustup.rs)"),
            (
                "`[[vm]]` and `[host]` tables",
                "`[[vm]]` and `[host]` tables",
            ),
            ("a [bracket] (then text)", "a [bracket] (then text)"),
            ("unclosed [link](x.md", "unclosed [link](x.md"),
        ] {
            assert_eq!(links(line), expected, "{line}");
        }
    }

    #[test]
    fn code_blocks_are_indented_without_fences() {
        let md = "text\n```toml\n# comment\n\nkey = 1\n```\nafter [x](xml.md)\n";
        assert_eq!(
            markdown(md),
            "text\n    # comment\n\n    key = 1\nafter x (xml.md in pinplan's docs)\n"
        );
    }

    #[test]
    fn formats_keeps_every_section_of_docs_formats_md() {
        let text = topic("formats").unwrap_or_default();
        for heading in FORMATS.lines().filter(|l| l.starts_with("## ")) {
            assert!(text.contains(heading), "{heading}");
        }
        assert!(!text.contains("](formats.md"), "{text}");
    }

    #[test]
    fn wrapping_keeps_every_word_and_indents() {
        for (prefix, text, width, expected) in [
            ("  1  ", "a bb ccc", 8, "  1  a\n     bb\n     ccc\n"),
            ("  1  ", "a bb  ccc", 10, "  1  a bb\n     ccc\n"),
            ("", "short", 80, "short\n"),
            ("", "one two", 3, "one\ntwo\n"),
        ] {
            assert_eq!(wrap(prefix, text, width), expected, "{text}");
        }
        let long = "x".repeat(120);
        assert_eq!(wrap("", &long, 80), format!("{long}\n"));
    }

    #[test]
    fn every_subcommand_has_a_page_and_every_page_a_subcommand() {
        let command = crate::cli();
        let names: Vec<&str> = command.get_subcommands().map(|s| s.get_name()).collect();
        for name in &names {
            assert!(
                PAGES.iter().any(|p| p.command == *name),
                "no page for {name}"
            );
        }
        for page in &PAGES {
            assert!(
                page.command.is_empty() || names.contains(&page.command),
                "page for no command: {}",
                page.command
            );
            assert!(
                page.examples.iter().any(|l| !l.starts_with('#')),
                "{}",
                page.command
            );
            assert!(!page.exit.is_empty(), "{}", page.command);
        }
    }

    #[test]
    fn exit_codes_lists_every_command() {
        let text = exit_codes();
        for page in &PAGES {
            let name = format!("pinplan {}", page.command);
            let name = name.trim_end();
            assert!(text.contains(&format!("\n{name}\n  0  ")), "{name}: {text}");
        }
    }
}
