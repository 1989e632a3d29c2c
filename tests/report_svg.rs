//! `pinplan report --format svg --plan`: the lab's host drawn twice, side by
//! side — as pinned by hand now, and with pinplan's plan for it — with one
//! legend (issue 15, SVG item 4).

use crate::util::{self, arg, cpuset, describe, text, TempDir};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

const LAB_HOST: &str = "examples/lab/b1-host.xml";
const LAB_NOW: [&str; 2] = ["examples/lab/now/vm1.xml", "examples/lab/now/vm2.xml"];

/// `pinplan report` of the lab now in SVG, with `extra` arguments; requires
/// exit status `status`.
fn lab_svg(extra: &[&str], status: i32) -> String {
    let mut args = vec![
        "report",
        "--domains",
        LAB_NOW[0],
        LAB_NOW[1],
        "--source",
        LAB_HOST,
        "--format",
        "svg",
    ];
    args.extend_from_slice(extra);
    let out = util::pinplan(&args);
    assert_eq!(out.status.code(), Some(status), "{}", describe(&args, &out));
    text(&out.stdout)
}

/// The `data-panel` of each `<g class="panel">`, in document order.
fn panels(doc: &roxmltree::Document<'_>) -> Vec<String> {
    doc.descendants()
        .filter(|n| n.attribute("class") == Some("panel"))
        .filter_map(|n| n.attribute("data-panel"))
        .map(str::to_owned)
        .collect()
}

/// Per panel, the CPUs on which `tenant` has a stripe of `role` (`vcpus`,
/// `host`, `threads`).
fn cpus_of(
    doc: &roxmltree::Document<'_>,
    tenant: &str,
    role: &str,
) -> BTreeMap<String, BTreeSet<u32>> {
    let mut out = BTreeMap::new();
    for panel in doc
        .descendants()
        .filter(|n| n.attribute("class") == Some("panel"))
    {
        let cpus: BTreeSet<u32> = panel
            .descendants()
            .filter(|cell| {
                cell.children().any(|s| {
                    s.attribute("data-tenant") == Some(tenant)
                        && s.attribute("data-role") == Some(role)
                })
            })
            .filter_map(|cell| cell.attribute("data-cpu")?.parse().ok())
            .collect();
        out.insert(
            panel.attribute("data-panel").unwrap_or("?").to_owned(),
            cpus,
        );
    }
    out
}

/// Each CPU cell of panel `panel` as it reads, coordinates and ids aside:
/// class, tooltip, stripes, number, outline, mark.
fn cells(doc: &roxmltree::Document<'_>, panel: &str) -> Vec<String> {
    let Some(panel) = doc.descendants().find(|n| {
        n.attribute("class") == Some("panel") && n.attribute("data-panel") == Some(panel)
    }) else {
        return Vec::new();
    };
    panel
        .descendants()
        .filter(|n| n.attribute("data-cpu").is_some())
        .map(|cell| {
            let mut facts = vec![format!("{:?}", cell.attribute("class"))];
            for n in cell.children().filter(roxmltree::Node::is_element) {
                let attrs: Vec<String> = n
                    .attributes()
                    .filter(|a| !matches!(a.name(), "x" | "y" | "d"))
                    .map(|a| format!("{}={}", a.name(), a.value()))
                    .collect();
                facts.push(format!("{} {attrs:?} {:?}", n.tag_name().name(), n.text()));
            }
            facts.join(" | ")
        })
        .collect()
}

/// The CPUs of each of `vm`'s vCPUs in plan.json.
fn planned_vcpus(plan: &Value, vm: &str) -> BTreeSet<u32> {
    plan["vms"]
        .as_array()
        .and_then(|vms| vms.iter().find(|v| v["name"] == vm))
        .and_then(|v| v["vcpus"].as_array())
        .map(|pins| {
            pins.iter()
                .filter_map(|p| p["cpu"].as_u64())
                .filter_map(|c| u32::try_from(c).ok())
                .collect()
        })
        .unwrap_or_else(|| panic!("no {vm} in the plan: {plan}"))
}

#[test]
fn with_a_plan_the_lab_is_drawn_now_and_with_the_plan_side_by_side() {
    let dir = TempDir::new();
    util::pinplan_ok(&["plan", "examples/lab/b1.toml", "--out", arg(dir.root())]);
    let plan_path = dir.path("plan.json");
    let plan: Value = serde_json::from_str(&std::fs::read_to_string(&plan_path).unwrap()).unwrap();

    // Exit 0: the plan removes every error.
    let svg = lab_svg(&["--plan", arg(&plan_path)], 0);
    let doc = roxmltree::Document::parse(&svg).expect("the SVG is XML");
    assert_eq!(doc.root_element().tag_name().name(), "svg");
    assert_eq!(panels(&doc), ["now", "plan"]);
    let headings: Vec<&str> = doc
        .descendants()
        .filter(|n| n.attribute("class") == Some("panel-heading"))
        .filter_map(|n| n.text())
        .collect();
    assert_eq!(headings, ["now", "with the plan"]);
    let ids: Vec<&str> = doc
        .descendants()
        .filter_map(|n| n.attribute("id"))
        .collect();
    assert_eq!(
        ids.len(),
        ids.iter().collect::<BTreeSet<_>>().len(),
        "duplicate ids: {ids:?}"
    );
    assert_eq!(ids.iter().filter(|id| id.starts_with("cpu-")).count(), 20);
    assert_eq!(
        ids.iter().filter(|id| id.starts_with("plan-cpu-")).count(),
        20
    );
    // cpu-N now, plan-cpu-N with the plan: N the CPU.
    for cpu in 0..20 {
        for id in [format!("cpu-{cpu}"), format!("plan-cpu-{cpu}")] {
            assert!(ids.contains(&id.as_str()), "no {id} in {ids:?}");
        }
    }

    // Each VM at its hand-made pins on the left, at the plan's on the right;
    // the emulators on the host's reserved CPUs with the plan.
    for (vm, now) in [("vm1", "0-13"), ("vm2", "12-15")] {
        let cpus = cpus_of(&doc, vm, "vcpus");
        assert_eq!(cpus["now"], cpuset(now), "{vm} now");
        assert_eq!(cpus["plan"], planned_vcpus(&plan, vm), "{vm} with the plan");
        assert_eq!(
            cpus_of(&doc, vm, "threads")["plan"],
            cpuset("0,10"),
            "{vm}'s emulator"
        );
    }
    assert_eq!(cpus_of(&doc, "host", "host")["plan"], cpuset("0,10"));

    // The left side is what report shows without --plan (with the plan's
    // reserved CPUs as the host's), and the subtitle says so.
    let alone = lab_svg(&["--host-cpus", "0,10"], 1);
    let alone = roxmltree::Document::parse(&alone).expect("the SVG is XML");
    assert_eq!(panels(&alone), ["now"]);
    assert_eq!(cells(&doc, "now").len(), 20);
    assert_eq!(cells(&doc, "now"), cells(&alone, "now"));
    let subtitle: Vec<&str> = doc
        .descendants()
        .filter(|n| n.attribute("class") == Some("subtitle"))
        .filter_map(|n| n.text())
        .collect();
    assert!(
        subtitle
            .join(" ")
            .contains("host CPUs 0,10 (the plan's reserved CPUs) on both sides"),
        "{subtitle:?}"
    );
    // Without --plan nor --host-cpus the host is not a tenant.
    let bare = lab_svg(&[], 1);
    let bare = roxmltree::Document::parse(&bare).expect("the SVG is XML");
    assert!(cpus_of(&bare, "host", "host")["now"].is_empty());

    // librsvg draws it.
    let svg_path = dir.write("lab-plan.svg", &svg);
    let png_path = dir.path("lab-plan.png");
    let render = Command::new("rsvg-convert")
        .arg("-o")
        .arg(&png_path)
        .arg(&svg_path)
        .output()
        .expect("cannot run rsvg-convert (apt install librsvg2-bin)");
    assert!(
        render.status.success() && render.stderr.is_empty(),
        "rsvg-convert: {}",
        text(&render.stderr)
    );
}
