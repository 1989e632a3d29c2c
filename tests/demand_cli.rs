//! `pinplan demand` run as a program: the lab table's answers from the issue
//! (worked out by hand from the packet-rate model, not copied from the
//! program's output), bad input, the table checks, several tables, and
//! deterministic output.
//!
//! Every refusal's message is compared with its snapshot.

use crate::util::{self, arg, pinplan, text, TempDir};
use serde_json::Value;

const LAB: &str = "examples/lab/b1-tx-cores.csv";
const HEADER: &str = "profile,packet_bytes,tx_cores,rx_cores,gbps\n";

/// `demand --table T… REST` (REST split at spaces).
fn demand_args<'a>(tables: &[&'a str], rest: &'a str) -> Vec<&'a str> {
    let mut args = vec!["demand"];
    for t in tables {
        args.extend(["--table", t]);
    }
    args.extend(rest.split_whitespace());
    args
}

/// Runs `pinplan demand … --format json`, expects exit 0, parses stdout.
fn ok_json(tables: &[&str], rest: &str) -> Value {
    let mut args = demand_args(tables, rest);
    args.extend(["--format", "json"]);
    let out = pinplan(&args);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{args:?}\nstdout: {}\nstderr: {}",
        text(&out.stdout),
        text(&out.stderr)
    );
    util::stdout_json(&out)
}

/// Runs `pinplan demand …`, expects exit `code` with an error message on
/// stderr (the same as snapshot `name`) and nothing on stdout; returns stderr.
fn fails(name: &str, code: i32, tables: &[&str], rest: &str) -> String {
    let args = demand_args(tables, rest);
    let out = pinplan(&args);
    let stderr = text(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(code),
        "{args:?}\nstdout: {}\nstderr: {stderr}",
        text(&out.stdout)
    );
    assert!(stderr.starts_with("error: "), "{args:?}: stderr: {stderr}");
    assert!(!stderr.contains("panicked"), "{args:?}: stderr: {stderr}");
    assert!(
        out.stdout.is_empty(),
        "{args:?}: stdout: {}",
        text(&out.stdout)
    );
    insta::assert_snapshot!(name, util::redact(&stderr));
    stderr
}

fn bad(name: &str, tables: &[&str], rest: &str) -> String {
    fails(name, 2, tables, rest)
}

/// `bad` for the question every table check asks: vm-64b at 100 G.
fn bad_table(name: &str, tables: &[&str]) -> String {
    bad(name, tables, "--profile vm-64b --target 100")
}

/// `bad` on the lab table for `--profile PROFILE --target TARGET`.
fn bad_lab(name: &str, profile: &str, target: &str) -> String {
    bad(
        name,
        &[LAB],
        &format!("--profile {profile} --target {target}"),
    )
}

/// Writes table `file` into `dir` and asks it for vm-64b at 100 G: refused,
/// naming `file:line` and every one of `words`. Its message is snapshot
/// `file` (less the extension). Returns stderr.
fn bad_row(dir: &TempDir, file: &str, contents: &str, line: usize, words: &[&str]) -> String {
    let t = table(dir, file, contents);
    let name = file.rsplit_once('.').map_or(file, |(stem, _)| stem);
    let stderr = bad_table(name, &[&t]);
    assert!(stderr.contains(&format!("{t}:{line}")), "{file}: {stderr}");
    for word in words {
        assert!(stderr.contains(word), "{file}: {word:?}: {stderr}");
    }
    stderr
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap_or_else(|| panic!("not an array: {v}"))
        .iter()
        .map(|s| {
            s.as_str()
                .unwrap_or_else(|| panic!("not a string: {s}"))
                .to_owned()
        })
        .collect()
}

/// `(vcpus, tx, rx, basis)` of a JSON answer.
fn summary(v: &Value) -> (u64, u64, u64, String) {
    (
        v["vcpus"].as_u64().unwrap(),
        v["tx_cores"].as_u64().unwrap(),
        v["rx_cores"].as_u64().unwrap(),
        v["basis"].as_str().unwrap().to_owned(),
    )
}

fn approx(v: &Value, expected: f64) -> bool {
    v.as_f64().is_some_and(|x| (x - expected).abs() < 1e-9)
}

/// Writes table `name` into `dir`; returns its path as given on the command line.
fn table(dir: &TempDir, name: &str, contents: impl AsRef<[u8]>) -> String {
    arg(&dir.write(name, contents)).to_owned()
}

// ---------------------------------------------------------------- the issue

#[test]
fn vm_64b_at_100_accepting_97_percent_is_14_vcpus() {
    let v = ok_json(&[LAB], "--profile vm-64b --target 100 --min-fraction 0.97");
    assert_eq!(summary(&v), (14, 12, 1, "measured".to_owned()));
    assert_eq!(v["profile"], "vm-64b");
    assert_eq!(v["packet_bytes"], 64);
    assert!(approx(&v["target_gbps"], 100.0), "{v}");
    assert!(approx(&v["min_fraction"], 0.97), "{v}");
    assert!(approx(&v["predicted_gbps"], 97.0), "{v}");
    // The 12-core row is line 6 of the lab table (3 comment lines, header).
    assert_eq!(strings(&v["rows"]), [format!("{LAB}:6")]);
    assert!(strings(&v["warnings"]).is_empty(), "{v}");
    assert!(strings(&v["hints"]).is_empty(), "{v}");
}

#[test]
fn json_has_exactly_the_contract_fields() {
    let v = ok_json(&[LAB], "--profile vm-64b --target 100");
    let mut keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
    keys.sort_unstable();
    let mut expected = [
        "profile",
        "packet_bytes",
        "target_gbps",
        "min_fraction",
        "vcpus",
        "tx_cores",
        "rx_cores",
        "predicted_gbps",
        "basis",
        "warnings",
        "hints",
        "rows",
    ];
    expected.sort_unstable();
    assert_eq!(keys, expected);
}

#[test]
fn text_format_says_14_vcpus() {
    let ask = "--profile vm-64b --target 100 --min-fraction 0.97";
    let out = pinplan(demand_args(&[LAB], &format!("{ask} --format text")));
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(stdout.contains("14 vCPUs"), "{stdout}");
    assert!(stdout.contains("measured"), "{stdout}");
    // Text is the default format.
    let default = pinplan(demand_args(&[LAB], ask));
    assert_eq!(default.stdout, out.stdout);
}

#[test]
fn vm_64b_at_full_100_is_16_vcpus() {
    let v = ok_json(&[LAB], "--profile vm-64b --target 100");
    assert_eq!(summary(&v), (16, 14, 1, "measured".to_owned()));
    assert!(approx(&v["min_fraction"], 1.0), "{v}");
    assert!(approx(&v["predicted_gbps"], 100.0), "{v}");
    assert_eq!(strings(&v["rows"]), [format!("{LAB}:8")]);
    // 13 tx cores measured 98 G: nothing may suggest fewer than 14 would do.
    assert!(strings(&v["hints"]).is_empty(), "{v}");
}

#[test]
fn vm_512b_at_100_is_4_vcpus_with_a_monotonicity_warning() {
    let v = ok_json(&[LAB], "--profile vm-512b --target 100");
    assert_eq!(summary(&v), (4, 2, 1, "measured".to_owned()));
    assert_eq!(v["packet_bytes"], 512);
    assert_eq!(strings(&v["rows"]), [format!("{LAB}:9")]);
    let warnings = strings(&v["warnings"]);
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("not monotonic") && w.contains(&format!("{LAB}:10"))),
        "{warnings:?}"
    );
}

#[test]
fn vm_64b_at_50_is_the_smallest_row_with_a_model_hint() {
    // 50 G at 64 B = 50e9 / (8 · 84) = 74.40 Mpps; best per-core rate is the
    // 97 G / 12-core row: 97e9 / (8 · 84) / 12 = 12.03 Mpps → 6.19 → 7 tx.
    let v = ok_json(&[LAB], "--profile vm-64b --target 50");
    assert_eq!(summary(&v), (13, 11, 1, "measured".to_owned()));
    assert!(approx(&v["predicted_gbps"], 88.0), "{v}");
    assert_eq!(strings(&v["rows"]), [format!("{LAB}:5")]);
    let hints = strings(&v["hints"]);
    assert_eq!(hints.len(), 1, "{hints:?}");
    assert!(hints[0].contains("predicts 7 tx cores"), "{hints:?}");

    let v = ok_json(&[LAB], "--profile vm-64b --target 50 --basis model");
    assert_eq!(summary(&v), (9, 7, 1, "model".to_owned()));
    assert!(strings(&v["hints"]).is_empty(), "{v}");
    // 7 × 12.03 Mpps × 8 · 84 = 56.6 G: the prediction reaches the target.
    let predicted = v["predicted_gbps"].as_f64().unwrap();
    assert!((50.0..=100.0).contains(&predicted), "{v}");
    assert!(!strings(&v["rows"]).is_empty(), "{v}");
}

#[test]
fn vm_64b_at_256_bytes_comes_from_the_model() {
    // 100e9 / (8 · 276) = 45.29 Mpps; 12.03 Mpps per tx core → 3.77 → 4 tx.
    let v = ok_json(&[LAB], "--profile vm-64b --packet-bytes 256 --target 100");
    assert_eq!(summary(&v), (6, 4, 1, "model".to_owned()));
    assert_eq!(v["packet_bytes"], 256);
    // 4 × 12.03 Mpps at 256 B is 106 G, capped at the 100 G line rate.
    assert!(approx(&v["predicted_gbps"], 100.0), "{v}");
    let rows = strings(&v["rows"]);
    assert!(rows.contains(&format!("{LAB}:6")), "{rows:?}");
    // A model answer says so among the warnings.
    assert!(!strings(&v["warnings"]).is_empty(), "{v}");

    // No measured 256 B row exists, so --basis measured cannot answer.
    let stderr = fails(
        "measured-only-256-bytes",
        1,
        &[LAB],
        "--profile vm-64b --packet-bytes 256 --target 100 --basis measured",
    );
    assert!(stderr.contains("tops out at 100 G"), "{stderr}");
}

#[test]
fn vm_64b_at_1000_is_refused_saying_where_the_table_tops_out() {
    let stderr = fails("target-1000", 1, &[LAB], "--profile vm-64b --target 1000");
    assert!(stderr.contains("tops out at 100 G"), "{stderr}");

    // With --allow-extrapolation the model guesses: 1000 G at 64 B is
    // 1488.1 Mpps / 12.03 Mpps per core → 123.7 → 124 tx cores.
    let v = ok_json(
        &[LAB],
        "--profile vm-64b --target 1000 --allow-extrapolation",
    );
    assert_eq!(summary(&v), (126, 124, 1, "model".to_owned()));
    assert!(!strings(&v["warnings"]).is_empty(), "{v}");
}

#[test]
fn more_than_one_and_a_half_times_the_measured_cores_is_refused() {
    let dir = TempDir::new();
    // Best per-core rate 10 G (64 B): 100 G needs 10 tx cores > 1.5 × 2.
    let t = table(&dir, "t.csv", format!("{HEADER}p,64,1,1,10\np,64,2,1,15\n"));
    let stderr = fails("too-many-cores", 1, &[&t], "--profile p --target 100");
    assert!(stderr.contains("tops out at 15 G"), "{stderr}");
    let v = ok_json(&[&t], "--profile p --target 100 --allow-extrapolation");
    assert_eq!(summary(&v), (12, 10, 1, "model".to_owned()));
}

// ---------------------------------------------------------------- bad input

#[test]
fn header_missing_a_column_names_file_line_1() {
    let header = "profile,packet_bytes,tx_cores,gbps";
    let rows = format!("{header}\nvm-64b,64,12,97\n");
    bad_row(
        &TempDir::new(),
        "missing-column.csv",
        &rows,
        1,
        &["rx_cores"],
    );
}

#[test]
fn non_number_in_a_numeric_column_names_file_and_line() {
    let dir = TempDir::new();
    // Comments and blank lines count for line numbers: the bad row is line 5.
    let rows = format!("# lab\n{HEADER}\nvm-64b,64,11,1,88G\nvm-64b,64,twelve,1,97G\n");
    bad_row(&dir, "non-number-tx-cores.csv", &rows, 5, &["tx_cores"]);

    let rows = format!("{HEADER}vm-64b,64,11,1,fast\n");
    bad_row(&dir, "non-number-gbps.csv", &rows, 2, &["gbps"]);
}

#[test]
fn negative_or_zero_tx_cores_are_rejected() {
    let dir = TempDir::new();
    for (name, tx) in [("tx-cores-neg.csv", "-2"), ("tx-cores-zero.csv", "0")] {
        let rows = format!("{HEADER}vm-64b,64,11,1,88G\nvm-64b,64,{tx},1,97G\n");
        bad_row(&dir, name, &rows, 3, &["tx_cores"]);
    }
}

#[test]
fn unknown_profile_suggests_the_closest_name() {
    let stderr = bad_lab("unknown-profile-vm-64", "vm-64", "100");
    assert!(stderr.contains("did you mean \"vm-64b\""), "{stderr}");
    let stderr = bad_lab("unknown-profile-vm-521b", "vm-521b", "100");
    assert!(stderr.contains("did you mean \"vm-512b\""), "{stderr}");
}

#[test]
fn empty_tables_are_rejected() {
    let dir = TempDir::new();
    for (name, contents) in [
        ("header-only.csv", HEADER.to_owned()),
        (
            "comments.csv",
            format!("# nothing yet\n{HEADER}\n# later\n"),
        ),
        ("empty.csv", String::new()),
    ] {
        let t = table(&dir, name, contents);
        let stderr = bad_table(&format!("empty-{}", name.trim_end_matches(".csv")), &[&t]);
        assert!(stderr.contains(&t), "{name}: {stderr}");
    }
}

#[test]
fn files_that_are_not_csv_are_rejected() {
    let xml = "examples/lab/b1-host.xml";
    let stderr = bad_table("not-csv-xml", &[xml]);
    assert!(stderr.contains(&format!("{xml}:1")), "{stderr}");

    let dir = TempDir::new();
    let prose = "Remember to ask about the NIC firmware.\nAlso: coffee.\n";
    bad_row(&dir, "not-csv-prose.txt", prose, 1, &[]);

    // A header-less table: data where the header should be.
    let data = "vm-64b,64,12,1,97G\nvm-64b,64,14,1,100G\n";
    bad_row(&dir, "not-csv-headerless.csv", data, 1, &[]);

    // Binary garbage.
    let binary = table(
        &dir,
        "blob.bin",
        [0xffu8, 0xfe, 0x00, 0x81, 0xc3, 0x28, 0x0a],
    );
    let stderr = bad_table("not-csv-binary", &[&binary]);
    assert!(stderr.contains(&binary), "{stderr}");
}

#[test]
fn missing_file_is_rejected() {
    let dir = TempDir::new();
    let missing = dir.path("no-such-table.csv");
    let missing = arg(&missing);
    let stderr = bad_table("missing-file", &[missing]);
    assert!(stderr.contains(missing), "{stderr}");
}

#[test]
fn wrong_field_count_names_file_and_line() {
    let dir = TempDir::new();
    let few = format!("{HEADER}vm-64b,64,11,1,88G\nvm-64b,64,12,1\n");
    bad_row(&dir, "field-count-few.csv", &few, 3, &[]);
    let many = format!("{HEADER}vm-64b,64,11,1,88G,13,extra\nvm-64b,64,12,1,97G\n");
    bad_row(&dir, "field-count-many.csv", &many, 2, &[]);
}

#[test]
fn min_fraction_outside_0_to_1_is_rejected() {
    for f in ["0", "1.5", "-0.5"] {
        let stderr = bad(
            &format!("min-fraction-{f}"),
            &[LAB],
            &format!("--profile vm-64b --target 100 --min-fraction={f}"),
        );
        assert!(stderr.contains("min-fraction"), "{f}: {stderr}");
    }
}

#[test]
fn target_zero_is_rejected() {
    let stderr = bad_lab("target-0", "vm-64b", "0");
    assert!(stderr.contains("target"), "{stderr}");
    bad("target-negative", &[LAB], "--profile vm-64b --target=-5");
}

// ------------------------------------------------------------- table checks

#[test]
fn row_above_line_rate_is_warned_about_unless_the_line_is_faster() {
    let dir = TempDir::new();
    let t = table(
        &dir,
        "t.csv",
        format!("{HEADER}p,64,2,1,50\np,64,4,1,120G\n"),
    );
    let v = ok_json(&[&t], "--profile p --target 100");
    assert_eq!(summary(&v), (6, 4, 1, "measured".to_owned()));
    let warnings = strings(&v["warnings"]);
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("line rate") && w.contains(&format!("{t}:3"))),
        "{warnings:?}"
    );

    let v = ok_json(&[&t], "--profile p --target 100 --line-rate 200");
    assert_eq!(summary(&v), (6, 4, 1, "measured".to_owned()));
    let warnings = strings(&v["warnings"]);
    assert!(
        !warnings.iter().any(|w| w.contains("line rate")),
        "{warnings:?}"
    );
}

#[test]
fn disagreeing_duplicates_are_warned_about_and_the_lower_rate_counts() {
    let dir = TempDir::new();
    // 2 tx cores measured at 100 G, then again at 90 G: only 3 tx cores are
    // known to reach 100 G. With the higher rate the answer would be 4 vCPUs.
    for (name, rows, low_line) in [
        ("later.csv", "p,64,2,1,100\np,64,3,1,100\np,64,2,1,90\n", 4),
        ("first.csv", "p,64,2,1,90\np,64,3,1,100\np,64,2,1,100\n", 2),
    ] {
        let t = table(&dir, name, format!("{HEADER}{rows}"));
        let v = ok_json(&[&t], "--profile p --target 100");
        assert_eq!(summary(&v), (5, 3, 1, "measured".to_owned()), "{name}");
        assert_eq!(strings(&v["rows"]), [format!("{t}:3")], "{name}");
        // Nor may the model claim 2 tx cores would do.
        assert!(strings(&v["hints"]).is_empty(), "{name}: {v}");
        let warnings = strings(&v["warnings"]);
        assert!(
            warnings.iter().any(|w| w.contains(&format!("{t}:2"))
                && w.contains(&format!("{t}:4"))
                && w.contains("lower")),
            "{name}: {warnings:?}"
        );

        // Accepting 90 G, the 2-core configuration counts, at its lower rate.
        let v = ok_json(&[&t], "--profile p --target 100 --min-fraction 0.9");
        assert_eq!(summary(&v), (4, 2, 1, "measured".to_owned()), "{name}");
        assert!(approx(&v["predicted_gbps"], 90.0), "{name}: {v}");
        assert_eq!(strings(&v["rows"]), [format!("{t}:{low_line}")], "{name}");
    }
}

/// The duplicate warning fires when two rows share profile, packet size, tx
/// and rx (even with different vcpus) and says "the selection uses the lower
/// rate"; the selection must then not rest on the higher-rate row.
#[test]
fn duplicate_warning_and_selection_agree_when_vcpus_differ() {
    let dir = TempDir::new();
    let t = table(
        &dir,
        "t.csv",
        "profile,packet_bytes,tx_cores,rx_cores,gbps,vcpus\n\
         p,64,2,1,100,4\np,64,2,1,90,5\np,64,3,1,100,5\n",
    );
    let v = ok_json(&[&t], "--profile p --target 100");
    let warnings = strings(&v["warnings"]);
    let says_lower = warnings
        .iter()
        .any(|w| w.contains(&format!("{t}:3")) && w.contains("lower rate"));
    assert!(says_lower, "{warnings:?}");
    assert_ne!(
        strings(&v["rows"]),
        [format!("{t}:2")],
        "the warning says the lower rate (90 G) counts for tx 2 / rx 1, yet the answer \
         rests on the 100 G row: {v}"
    );
}

// ------------------------------------------------------------ several tables

#[test]
fn rows_from_several_tables_are_used_and_named_by_file() {
    let dir = TempDir::new();
    let a = table(
        &dir,
        "a.csv",
        format!("{HEADER}vm-64b,64,11,1,88G\nvm-64b,64,12,1,97G\n"),
    );
    // Different column order and case, a comment, a non-monotonic row.
    let b = table(
        &dir,
        "b.csv",
        "# second run\nGBPS,Profile,Packet_Bytes,RX_cores,tx_cores\n\
         96G,vm-64b,64,1,13\n100G,vm-64b,64,1,14\n",
    );
    let tables = [a.as_str(), b.as_str()];

    let v = ok_json(&tables, "--profile vm-64b --target 100");
    assert_eq!(summary(&v), (16, 14, 1, "measured".to_owned()));
    assert_eq!(strings(&v["rows"]), [format!("{b}:4")]);

    let v = ok_json(&tables, "--profile vm-64b --target 100 --min-fraction 0.97");
    assert_eq!(summary(&v), (14, 12, 1, "measured".to_owned()));
    assert_eq!(strings(&v["rows"]), [format!("{a}:3")]);
    // 13 tx cores (b.csv:3) gave less than 12 (a.csv:3).
    let warnings = strings(&v["warnings"]);
    assert!(
        warnings.iter().any(|w| w.contains("not monotonic")
            && w.contains(&format!("{b}:3"))
            && w.contains(&format!("{a}:3"))),
        "{warnings:?}"
    );

    // The model is fitted on both files' rows.
    let v = ok_json(&tables, "--profile vm-64b --target 50 --basis model");
    assert_eq!(summary(&v), (9, 7, 1, "model".to_owned()));
    let rows = strings(&v["rows"]);
    assert!(
        rows.iter().any(|r| r.starts_with(&format!("{a}:"))),
        "{rows:?}"
    );
    assert!(
        rows.iter().any(|r| r.starts_with(&format!("{b}:"))),
        "{rows:?}"
    );

    // A bad row in the second file is reported against the second file.
    let broken = table(&dir, "broken.csv", format!("{HEADER}vm-64b,64,13,1,lots\n"));
    let stderr = bad_table("bad-row-in-second-table", &[&a, &broken]);
    assert!(stderr.contains(&format!("{broken}:2")), "{stderr}");
    assert!(!stderr.contains(&a), "{stderr}");
}

// -------------------------------------------------------------- determinism

#[test]
fn same_command_twice_gives_identical_output() {
    let dir = TempDir::new();
    let extra = table(
        &dir,
        "extra.csv",
        format!("{HEADER}vm-64b,64,12,1,95G\nvm-64b,64,13,1,120G\n"),
    );
    let commands: [Vec<&str>; 4] = [
        demand_args(&[LAB], "--profile vm-64b --target 50"),
        demand_args(
            &[LAB],
            "--profile vm-64b --packet-bytes 256 --target 100 --format json",
        ),
        demand_args(
            &[LAB, &extra],
            "--profile vm-64b --target 100 --min-fraction 0.9 --format json",
        ),
        demand_args(&[LAB], "--profile vm-64 --target 100"),
    ];
    for args in commands {
        let first = pinplan(&args);
        let second = pinplan(&args);
        assert_eq!(first.status.code(), second.status.code(), "{args:?}");
        assert_eq!(first.stdout, second.stdout, "{args:?}");
        assert_eq!(first.stderr, second.stderr, "{args:?}");
    }
}

// ------------------------------------------------- issue 32: published columns

/// Forwarding cores and threads per core, Mpps, direction, source, as
/// published tables give them. Worked by hand: a 64 B packet is 84 B on the
/// wire, so 20 Mpps is 20 × 84 × 8 / 1000 = 13.44 Gb/s; one core of two SMT
/// threads is two forwarding threads; `both` halves a two-way sum.
const PUBLISHED: &str = "profile,packet_bytes,cores,threads_per_core,mpps,direction,source\n\
    smt,64,1,2,10,one,lab-smt\n\
    smt,64,2,2,20,one,lab-smt\n\
    whole,64,2,1,20,both,lab-whole\n\
    whole,64,4,1,40,both,lab-whole\n";

#[test]
fn issue_32_a_table_of_cores_mpps_and_threads_per_core() {
    let dir = TempDir::new();
    let t = table(&dir, "published.csv", PUBLISHED);
    // 13 G: the second smt row, 2 cores × 2 threads = 4 tx cores at 13.44 G;
    // 4 forwarding threads + 1 housekeeping vCPU.
    let smt = ok_json(&[&t], "--profile smt --target 13");
    assert_eq!(
        (
            smt["tx_cores"].as_u64(),
            smt["rx_cores"].as_u64(),
            smt["vcpus"].as_u64()
        ),
        (Some(4), Some(0), Some(5)),
        "{smt}"
    );
    assert!(approx(&smt["predicted_gbps"], 13.44), "{smt}");
    assert_eq!(smt["basis"], "measured", "{smt}");
    // 40 Mpps both ways is 20 one way: 13.44 G on 4 whole cores.
    let whole = ok_json(&[&t], "--profile whole --target 13");
    assert_eq!(
        (whole["tx_cores"].as_u64(), whole["vcpus"].as_u64()),
        (Some(4), Some(5)),
        "{whole}"
    );
    assert!(approx(&whole["predicted_gbps"], 13.44), "{whole}");
    // 6.72 G: the first row of each.
    let first = ok_json(&[&t], "--profile whole --target 6.72");
    assert_eq!(first["tx_cores"].as_u64(), Some(2), "{first}");
}

/// A VM sized from rows measured on SMT siblings is placed under
/// `threads = "require"` (its vCPUs on siblings, as measured), and the plan
/// says how the rows ran and where they come from; one sized from rows of
/// one thread per core is refused under `require` (the rate was not
/// measured on siblings: the user chooses `isolate`, or measures), and
/// placed under `isolate`.
#[test]
fn issue_32_smt_rows_under_require_and_whole_core_rows_refused() {
    let dir = TempDir::new();
    table(&dir, "published.csv", PUBLISHED);
    let spec = |name: &str, profile: &str, threads: &str| {
        arg(&dir.write(
            name,
            format!(
                "[host]\nreserved_cores = 1\ntables = [\"published.csv\"]\n\n[[vm]]\nname = \"vm1\"\nprofile = \"{profile}\"\ntarget_gbps = 13\nthreads = \"{threads}\"\n"
            ),
        ))
        .to_owned()
    };
    let host = "synthetic:package:1 core:8 pu:2";
    let smt = spec("smt.toml", "smt", "require");
    let plan = util::plan_json(0, &[&smt, "--source", host]);
    let vm = &plan["vms"][0];
    assert_eq!(vm["vcpus"].as_array().map(Vec::len), Some(5), "{vm}");
    assert_eq!(vm["demand"]["threads_per_core"], 2, "{vm}");
    assert_eq!(
        vm["demand"]["sources"],
        serde_json::json!(["lab-smt"]),
        "{vm}"
    );

    let whole = spec("whole.toml", "whole", "require");
    let args = ["plan", whole.as_str(), "--source", host];
    let out = pinplan(args);
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        util::describe(&args, &out)
    );
    assert!(
        text(&out.stderr).contains(
            "vm1: profile whole was measured with one forwarding thread per core (threads_per_core = 1; "
        ) && text(&out.stderr).contains(
            "but threads = \"require\" puts two of its vCPUs on each core's SMT siblings, where the 13.44 G it reached is not to be had: set threads = \"isolate\""
        ),
        "{}",
        util::describe(&args, &out)
    );
    let isolate = spec("isolate.toml", "whole", "isolate");
    let plan = util::plan_json(0, &[&isolate, "--source", host]);
    assert_eq!(plan["vms"][0]["demand"]["threads_per_core"], 1, "{plan}");
    assert_eq!(
        plan["vms"][0]["demand"]["sources"],
        serde_json::json!(["lab-whole"]),
        "{plan}"
    );
}

/// The spec's `confidence` (issue 32) sets the level of a model answer's
/// interval, kept in the plan; out of range is refused at its line. Two
/// straight-line profiles (5 and 4 G per core) give 8 held-out errors of
/// 0: 30 G of `a` is 6 tx cores by the linear model, 6 at every level.
#[test]
fn issue_32_the_specs_confidence_sets_the_intervals_level() {
    let dir = TempDir::new();
    table(
        &dir,
        "lin.csv",
        "profile,packet_bytes,tx_cores,rx_cores,gbps\na,64,1,0,5\na,64,2,0,10\na,64,3,0,15\na,64,4,0,20\n\
         b,64,1,0,4\nb,64,2,0,8\nb,64,3,0,12\nb,64,4,0,16\n",
    );
    let spec = |name: &str, level: &str| {
        arg(&dir.write(
            name,
            format!("[host]\nreserved_cores = 1\ntables = [\"lin.csv\"]\n\n[defaults]\nconfidence = {level}\n\n[[vm]]\nname = \"vm1\"\nprofile = \"a\"\ntarget_gbps = 30\n"),
        ))
        .to_owned()
    };
    let host = "synthetic:package:1 core:8 pu:2";
    let half = spec("half.toml", "0.5");
    let plan = util::plan_json(0, &[&half, "--source", host]);
    let demand = &plan["vms"][0]["demand"];
    assert_eq!(demand["basis"], "model", "{demand}");
    assert!(approx(&demand["interval"]["confidence"], 0.5), "{demand}");
    assert_eq!(demand["interval"]["tx_cores_high"], 6, "{demand}");
    assert_eq!(demand["interval"]["residuals"], 8, "{demand}");
    let bad = spec("bad.toml", "1.5");
    let args = ["plan", bad.as_str(), "--source", host];
    let out = pinplan(args);
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        util::describe(&args, &out)
    );
    assert!(
        text(&out.stderr).contains(
            "bad.toml:6: confidence is 1.5: it must be above 0 and below 1 (0.9 for a 90 % interval)"
        ),
        "{}",
        util::describe(&args, &out)
    );
}
