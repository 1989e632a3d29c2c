//! `pinplan topology` on the bundled lab host and on synthetic hosts, checked
//! against what the issue and hwloc's synthetic syntax say they are (not
//! against the program's own earlier output).

use crate::util::{pinplan, pinplan_json};
use serde_json::Value;

fn cores(topology: &Value) -> Vec<Vec<u64>> {
    topology["cores"]
        .as_array()
        .map(|cores| {
            cores
                .iter()
                .map(|c| {
                    c["cpus"]
                        .as_array()
                        .map(|cpus| cpus.iter().filter_map(Value::as_u64).collect())
                        .unwrap_or_default()
                })
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn lab_host_is_ten_cores_with_siblings_n_and_n_plus_10() {
    let host = pinplan_json(&[
        "topology",
        "--source",
        "examples/lab/b1-host.xml",
        "--format",
        "json",
    ]);
    let expected: Vec<Vec<u64>> = (0..10).map(|n| vec![n, n + 10]).collect();
    assert_eq!(cores(&host), expected);
    assert_eq!(host["packages"].as_array().map(Vec::len), Some(1));
    assert_eq!(host["packages"][0]["cpus"], "0-19");
    assert_eq!(host["numa_nodes"][0]["cpus"], "0-19");
    let ids: Vec<u64> = host["cores"]
        .as_array()
        .map(|c| c.iter().filter_map(|c| c["id"].as_u64()).collect())
        .unwrap_or_default();
    assert_eq!(ids, (0..10).collect::<Vec<u64>>());
    let usable = host["pus"]
        .as_array()
        .map(|p| p.iter().filter(|p| p["usable"] == true).count());
    assert_eq!(usable, Some(20));
}

#[test]
fn synthetic_hosts_follow_the_description() {
    // Two packages of 4 cores, siblings N and N+8: package 0 = cores 0-3.
    let host = pinplan_json(&[
        "topology",
        "--source",
        "synthetic:package:2 core:4 pu:2(indexes=2*8:1*2)",
        "--format",
        "json",
    ]);
    let expected: Vec<Vec<u64>> = (0..8).map(|n| vec![n, n + 8]).collect();
    assert_eq!(cores(&host), expected);
    assert_eq!(host["packages"][0]["cpus"], "0-3,8-11");
    assert_eq!(host["packages"][1]["cpus"], "4-7,12-15");
    assert_eq!(host["cores"][5]["package"], 1);

    // SMT4 with adjacent numbering and two NUMA nodes.
    let host = pinplan_json(&[
        "topology",
        "--source",
        "synthetic:numa:2 core:2 pu:4",
        "--format",
        "json",
    ]);
    let expected: Vec<Vec<u64>> = (0..4).map(|c| (c * 4..c * 4 + 4).collect()).collect();
    assert_eq!(cores(&host), expected);
    assert_eq!(host["numa_nodes"][1]["cpus"], "8-15");
}

#[test]
fn output_is_the_same_bytes_every_time() {
    for format in ["text", "json"] {
        let args = [
            "topology",
            "--source",
            "tests/fixtures/hwloc-xml/gen29-256ppc-8n8s4t.xml",
            "--format",
            format,
        ];
        let first = pinplan(args);
        let second = pinplan(args);
        assert!(first.status.success());
        assert!(!first.stdout.is_empty());
        assert_eq!(
            first.stdout, second.stdout,
            "{format} output differs between runs"
        );
    }
}

#[test]
fn text_map_marks_unusable_cpus_and_names_cores() {
    let out = pinplan([
        "topology",
        "--source",
        "tests/fixtures/hwloc-xml/linux-16em64t-4s2c2t-offlines.xml",
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    // Siblings N and N+8; CPUs 2, 5, 13, 14 are offline (see PROVENANCE-INDEX.md).
    assert!(text.contains("core 0: cpus 0,8 "), "{text}");
    assert!(text.contains("core 4: cpus 6 "), "{text}");
    for cpu in [2, 5, 13, 14] {
        assert!(
            text.contains(&format!("  cpu {cpu}: offline")),
            "cpu {cpu}: {text}"
        );
    }
    assert!(text.contains("16 CPUs (12 usable)"), "{text}");
}
