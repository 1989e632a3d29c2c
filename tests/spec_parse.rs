//! Bad plan specs through the library, `Spec::parse` (and `Spec::request`
//! for what needs the host), without starting the binary per case: each
//! error names the file and the line of the fault and says what is wrong,
//! with a hint where a fix is known. `plan_cli` checks how the binary prints
//! them (exit 2, `error:`, `hint:`).
//!
//! The specs are named as if they sat in `examples/lab/`, so that the lab's
//! host file and table resolve (no file is written).

use crate::util;
use pinplan::spec::{Spec, SpecError};
use pinplan::topology;
use std::path::Path;

const HOST: &str = "[host]\nsource = \"b1-host.xml\"\nreserved_cores = 1\n";
const HOST_TABLES: &str =
    "[host]\nsource = \"b1-host.xml\"\nreserved_cores = 1\ntables = [\"b1-tx-cores.csv\"]\n";
const VM: &str = "[[vm]]\nname = \"vm1\"\nvcpus = 4\n";

/// One bad spec: `key` is on `line` (a check on the hand count); the error
/// must contain every `message` fragment, its hint every `hint` fragment.
struct Case {
    /// The file name, also the snapshot's.
    name: &'static str,
    spec: String,
    line: usize,
    key: &'static str,
    message: &'static [&'static str],
    hint: &'static [&'static str],
}

/// The error for `case`: from `Spec::parse`, or, when that accepts the file,
/// from `Spec::request` on the spec's host.
fn error(path: &Path, case: &Case) -> SpecError {
    let spec = match Spec::parse(path, &case.spec) {
        Err(e) => return e,
        Ok(spec) => spec,
    };
    let source = spec.source.clone().expect("every case names its host");
    let host = topology::load(&source).expect("the lab host loads");
    match spec.request(host) {
        Err(e) => e,
        Ok(_) => panic!("{}: accepted:\n{}", case.name, case.spec),
    }
}

/// The error as the binary prints it, less `error: ` (the hint after a blank
/// line), the repository shown as `[REPO]`.
fn shown(e: &SpecError) -> String {
    let hint = e
        .hint
        .as_ref()
        .map_or(String::new(), |h| format!("\n\nhint: {h}"));
    util::redact(&format!("{e}{hint}"))
}

#[test]
fn bad_specs_name_file_and_line() {
    let vm = VM;
    let cases = [
        // Lines 1-3: HOST; 4 blank; 5 [[vm]]; 6 name.
        Case {
            name: "threds.toml",
            spec: format!("{HOST}\n[[vm]]\nname = \"vm1\"\nvcpus = 4\nthreds = \"require\"\n"),
            line: 8,
            key: "threds",
            message: &[],
            hint: &["did you mean `threads`?"],
        },
        Case {
            name: "host-key.toml",
            spec: "[host]\nsource = \"b1-host.xml\"\nreserved_core = 1\n".to_owned(),
            line: 3,
            key: "reserved_core",
            message: &["reserved_core"],
            hint: &["did you mean `reserved_cores`?"],
        },
        // Lines 1-4: HOST_TABLES; 5 blank; 6 [[vm]]; 7 name.
        Case {
            name: "profile.toml",
            spec: format!(
                "{HOST_TABLES}\n[[vm]]\nname = \"vm1\"\nprofile = \"vm-64\"\ntarget_gbps = 100\n"
            ),
            line: 8,
            key: "profile",
            message: &["vm-64"],
            hint: &["did you mean \"vm-64b\"?"],
        },
        Case {
            name: "both.toml",
            spec: format!(
                "{HOST_TABLES}\n[[vm]]\nname = \"vm1\"\nvcpus = 4\nprofile = \"vm-64b\"\ntarget_gbps = 100\n"
            ),
            line: 8,
            key: "vcpus",
            message: &["vm1"],
            hint: &[],
        },
        // Neither vcpus nor profile: the VM's table, from its header.
        Case {
            name: "neither.toml",
            spec: format!("{HOST}\n[[vm]]\nname = \"vm1\"\nnic_affinity = \"ignore\"\n"),
            line: 5,
            key: "[[vm]]",
            message: &["vm1", "vcpus"],
            hint: &[],
        },
        // From Spec::request: b1 has no CPU 99.
        Case {
            name: "reserved99.toml",
            spec: "[host]\nsource = \"b1-host.xml\"\nreserved_cpus = \"0,99\"\n\n[[vm]]\nname = \"vm1\"\nvcpus = 4\n"
                .to_owned(),
            line: 3,
            key: "reserved_cpus",
            message: &["99"],
            hint: &[],
        },
        // Lines 1-3 HOST; 4 blank; 5-7 vm; 8 blank; 9-11 fixed a; 12 blank; 13-15 fixed b.
        Case {
            name: "fixed-overlap.toml",
            spec: format!(
                "{HOST}\n{vm}\n[[fixed]]\nname = \"a\"\ncpus = \"1-2,11-12\"\n\n\
                 [[fixed]]\nname = \"b\"\ncpus = \"2,12\"\n"
            ),
            line: 15,
            key: "cpus = \"2,12\"",
            message: &["a", "b", "2,12"],
            hint: &[],
        },
        // From Spec::request: CPU 10 is the sibling of reserved CPU 0.
        Case {
            name: "fixed-reserved.toml",
            spec: format!("{HOST}\n{vm}\n[[fixed]]\nname = \"old\"\ncpus = \"5,10\"\n"),
            line: 11,
            key: "cpus",
            message: &["old", "10"],
            hint: &[],
        },
        // From Spec::request. Lines 1-3 HOST; 4 blank; 5 [[vm]]; 6 name; 7 vcpus; 8 nic.
        Case {
            name: "nic.toml",
            spec: format!(
                "{HOST}\n[[vm]]\nname = \"vm1\"\nvcpus = 4\nnic = \"0000:66:00.0\"\nnic_affinity = \"required\"\n"
            ),
            line: 8,
            key: "nic = ",
            message: &["0000:66:00.0"],
            hint: &["0000:65:00.0"],
        },
        Case {
            name: "enum.toml",
            spec: format!("{HOST}\n[[vm]]\nname = \"vm1\"\nvcpus = 4\nthreads = \"sometimes\"\n"),
            line: 8,
            key: "threads",
            message: &["sometimes"],
            hint: &[],
        },
        Case {
            name: "syntax.toml",
            spec: format!("{HOST}\n[[vm]]\nname = \"vm1\nvcpus = 4\n"),
            line: 6,
            key: "name",
            message: &[],
            hint: &[],
        },
        Case {
            name: "fraction.toml",
            spec: format!(
                "{HOST_TABLES}\n[[vm]]\nname = \"vm1\"\nprofile = \"vm-64b\"\ntarget_gbps = 100\nmin_fraction = 1.5\n"
            ),
            line: 10,
            key: "min_fraction",
            message: &["1.5"],
            hint: &[],
        },
        Case {
            name: "defaults-fraction.toml",
            spec: format!("{HOST}\n[defaults]\nmin_fraction = 1.5\n\n{vm}"),
            line: 6,
            key: "min_fraction",
            message: &["1.5"],
            hint: &[],
        },
        // 5-7 first vm; 8 blank; 9 [[vm]]; 10 its name.
        Case {
            name: "duplicate.toml",
            spec: format!("{HOST}\n{vm}\n{vm}"),
            line: 10,
            key: "name",
            message: &["vm1"],
            hint: &[],
        },
        Case {
            name: "no-target.toml",
            spec: format!("{HOST_TABLES}\n[[vm]]\nname = \"vm1\"\nprofile = \"vm-64b\"\n"),
            line: 8,
            key: "profile",
            message: &["target_gbps"],
            hint: &[],
        },
    ];
    for case in &cases {
        let name = case.name;
        let on_line = case.spec.lines().nth(case.line - 1).unwrap_or("");
        assert!(
            on_line.contains(case.key),
            "test bug: line {} of {name} is {on_line:?}",
            case.line
        );
        let path = util::repo().join("examples/lab").join(name);
        let e = error(&path, case);
        let message = e.to_string();
        assert_eq!(e.file, path, "{name}: {e}");
        assert_eq!(e.line, case.line, "{name}: {e}");
        let prefix = format!("{}:{}: ", path.display(), case.line);
        assert!(message.starts_with(&prefix), "{name}: want {prefix:?}: {e}");
        assert!(message.len() > prefix.len(), "{name}: no message: {e}");
        for fragment in case.message {
            assert!(message.contains(fragment), "{name}: {fragment:?}: {e}");
        }
        for fragment in case.hint {
            let hint = e.hint.as_deref().unwrap_or("");
            assert!(hint.contains(fragment), "{name}: hint {fragment:?}: {e:?}");
        }
        insta::assert_snapshot!(name.trim_end_matches(".toml"), shown(&e));
    }
}

/// Issue 14, defect 3: VM names that would leave `--out DIR` (or break a
/// line, or hide the file) are refused at parse time, at the name's line.
#[test]
fn vm_names_escape_out_is_refused() {
    let long = "v".repeat(pinplan::spec::NAME_MAX_BYTES + 1);
    let bad = [
        ("../../escape", "'/'"),
        ("/etc/libvirt/qemu/X", "'/'"),
        (".hidden", "'.'"),
        ("a\\nb", "control character"),
        ("nul\\u0000", "control character"),
        (long.as_str(), "bytes long"),
    ];
    let path = util::repo().join("examples/lab/names.toml");
    for (name, why) in bad {
        let spec = format!("{HOST}\n[[vm]]\nname = \"{name}\"\nvcpus = 4\n");
        let e = Spec::parse(&path, &spec)
            .err()
            .unwrap_or_else(|| panic!("{name:?} was accepted"));
        assert_eq!(e.line, 6, "{name:?}: {e}");
        assert_eq!(e.key.as_deref(), Some("vm.name"), "{name:?}: {e}");
        assert!(e.to_string().contains(why), "{name:?}: {e}");
        assert!(
            e.hint.as_deref().is_some_and(|h| h.contains("no '/'")),
            "{name:?}: {e}"
        );
    }
    let longest = "v".repeat(pinplan::spec::NAME_MAX_BYTES);
    for ok in ["vm1", "vm-1_b.2", longest.as_str()] {
        let spec = format!("{HOST}\n[[vm]]\nname = \"{ok}\"\nvcpus = 4\n");
        assert!(Spec::parse(&path, &spec).is_ok(), "{ok:?} was refused");
    }
}

/// Issue 31: `emulator = "with-housekeeping"` on a VM sized from a table row
/// without a housekeeping vCPU (vcpus = tx + rx) must not suggest
/// `housekeeping_vcpus`, which a table-sized VM may not have: following the
/// first hint used to give "drop housekeeping_vcpus", and round again.
#[test]
fn issue_31_with_housekeeping_on_a_table_row_gives_no_hint_loop() {
    let dir = util::TempDir::new();
    // vcpus 3 = tx 2 + rx 1: no housekeeping vCPU in the row.
    dir.write(
        "t.csv",
        "profile,packet_bytes,tx_cores,rx_cores,gbps,vcpus,note\nbare,64,2,1,10G,3,\n",
    );
    let host = util::repo().join("examples/lab/b1-host.xml");
    let head = format!(
        "[host]\nsource = \"{}\"\nreserved_cores = 1\ntables = [\"t.csv\"]\n",
        host.display()
    );
    // Lines 1-4 head; 5 blank; 6 [[vm]]; 7 name; 8 emulator; 9 and on: sizing.
    let vm = |sizing: &str| {
        format!("{head}\n[[vm]]\nname = \"vm1\"\nemulator = \"with-housekeeping\"\n{sizing}")
    };
    let path = dir.path("spec.toml");
    let refused = |sizing: &str| -> SpecError {
        let text = vm(sizing);
        let spec = match Spec::parse(&path, &text) {
            Err(e) => return e,
            Ok(spec) => spec,
        };
        let host = topology::load(&spec.source.clone().expect("a host")).expect("b1 loads");
        spec.request(host)
            .err()
            .unwrap_or_else(|| panic!("accepted:\n{text}"))
    };

    let table = "profile = \"bare\"\ntarget_gbps = 10\n";
    let first = refused(table);
    assert_eq!(
        (first.line, first.key.as_deref()),
        (6, Some("vm.emulator")),
        "{first}"
    );
    let message = first.to_string();
    assert!(
        message.contains("vm1: emulator = \"with-housekeeping\""),
        "{message}"
    );
    assert!(
        message.contains("its table row has none (vcpus 3 = tx 2 + rx 1)"),
        "{message}"
    );
    let hint = first.hint.clone().unwrap_or_default();
    assert!(
        hint.contains("a table row with a housekeeping vCPU"),
        "{hint}"
    );
    // Not the bare "set housekeeping_vcpus = 1", which the table VM refuses.
    assert!(!hint.starts_with("set housekeeping_vcpus"), "{hint}");
    assert!(hint.contains("vcpus = N with housekeeping_vcpus = 1 instead of the table"));

    // What the old hint said: refused, naming the row's count.
    let second = refused(&format!("{table}housekeeping_vcpus = 1\n"));
    assert_eq!(second.line, 11, "{second}");
    let message = second.to_string();
    assert!(message.contains("(vcpus - tx - rx: 0 here)"), "{message}");
    assert!(
        message.contains("drop housekeeping_vcpus, or give vcpus = N"),
        "{message}"
    );

    // What the new hint says is accepted.
    let text = vm("vcpus = 3\nhousekeeping_vcpus = 1\n");
    let spec = Spec::parse(&path, &text).expect("vcpus with housekeeping_vcpus parses");
    let host = topology::load(&spec.source.clone().expect("a host")).expect("b1 loads");
    assert!(spec.request(host).is_ok(), "refused:\n{text}");

    // Without a table, the hint is housekeeping_vcpus.
    let bare = refused("vcpus = 3\n");
    assert!(bare.to_string().ends_with("and it has none"), "{bare}");
    assert!(bare
        .hint
        .as_deref()
        .is_some_and(|h| h.starts_with("set housekeeping_vcpus = 1")));
}
