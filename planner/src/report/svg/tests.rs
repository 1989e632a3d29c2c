//! Whole pictures checked through their SVG: every CPU drawn once, classes
//! and outlines by conflict, escaping, determinism.

use super::*;
use crate::libvirt::domain::tenant_from_domain;
use crate::report::conflicts;
use crate::tenant::host_tenant;
use crate::topology::{self, Source};

fn synthetic(desc: &str) -> HostTopology {
    topology::load(&Source::Synthetic(desc.into())).unwrap_or_else(|e| panic!("{desc}: {e}"))
}

fn fixture(name: &str) -> HostTopology {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures/hwloc-xml")
        .join(name);
    topology::load(&Source::File(path)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// A domain pinning vCPU i to `pins[i]`; the name is escaped for XML.
fn domain(name: &str, pins: &[&str], emulator: Option<&str>) -> String {
    let mut cputune = String::new();
    for (v, c) in pins.iter().enumerate() {
        cputune.push_str(&format!("<vcpupin vcpu='{v}' cpuset='{c}'/>"));
    }
    if let Some(e) = emulator {
        cputune.push_str(&format!("<emulatorpin cpuset='{e}'/>"));
    }
    format!(
        "<domain type='kvm'><name>{}</name><vcpu>{}</vcpu><cputune>{cputune}</cputune></domain>",
        esc(name),
        pins.len().max(1)
    )
}

/// The host tenant on `host_cpus`, then one VM per `(name, pins, emulator)`.
fn report(host: &HostTopology, host_cpus: &str, vms: &[(&str, &[&str], Option<&str>)]) -> Report {
    let mut tenants = vec![host_tenant(&host_cpus.parse().unwrap_or_default())];
    for (name, pins, emulator) in vms {
        let xml = domain(name, pins, *emulator);
        tenants.push(
            tenant_from_domain(&format!("{name}.xml"), &xml, host)
                .unwrap_or_else(|e| panic!("{e}")),
        );
    }
    Report::new(host, tenants, None)
}

/// The `cpu-N` ids of the document, in document order.
fn cpu_ids(svg: &str) -> Vec<u32> {
    let doc = roxmltree::Document::parse(svg).unwrap_or_else(|e| panic!("{e}\n{svg}"));
    doc.descendants()
        .filter_map(|n| n.attribute("id"))
        .filter_map(|id| id.strip_prefix("cpu-"))
        .map(|n| n.parse().unwrap_or_else(|e| panic!("{n}: {e}")))
        .collect()
}

fn class_of(svg: &str, cpu: u32) -> String {
    let doc = roxmltree::Document::parse(svg).unwrap_or_else(|e| panic!("{e}"));
    let id = format!("cpu-{cpu}");
    doc.descendants()
        .find(|n| n.attribute("id") == Some(id.as_str()))
        .and_then(|n| n.attribute("class"))
        .unwrap_or_else(|| panic!("no {id}"))
        .to_owned()
}

/// The 20-CPU host of the brief: siblings N and N+10.
fn twenty() -> HostTopology {
    synthetic("package:1 core:10 pu:2(indexes=2*10:1*2)")
}

#[test]
fn every_pu_is_drawn_exactly_once() {
    let hosts = [
        synthetic("package:2 numa:2 l3:1 core:4 pu:2"),
        synthetic("package:2 numa:2 l3:6 core:8 pu:2"),
        synthetic("package:1 core:3 pu:8"),
        synthetic("pu:2"),
        twenty(),
        fixture("16em64t-4s2c2t-offlines.xml"),
        fixture("28intel64-2p2g7c-CoD.nogroups.v1tov2.xml"),
        fixture("8em64t-2p2ca2co-nonodesets.v1.xml"),
        fixture("gen29-20em64t-hybrid-1p6c2t+2ca4co1t.xml"),
        fixture("x86-AMD-19h-Zen3-2xEpyc-7763.xml"),
    ];
    for host in &hosts {
        let svg = render(host, &report(host, "0", &[]));
        let mut drawn = cpu_ids(&svg);
        drawn.sort_unstable();
        let expected: Vec<u32> = host.pus.iter().map(|p| p.cpu.0).collect();
        assert_eq!(drawn, expected, "{}", host.source);
    }
}

#[test]
fn every_fixture_host_draws_every_pu_once() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures");
    let mut drawn_hosts = 0;
    for dir in ["hwloc-xml", "libvirt-caps"] {
        let mut paths: Vec<_> = std::fs::read_dir(root.join(dir))
            .unwrap_or_else(|e| panic!("{dir}: {e}"))
            .filter_map(|e| e.ok().map(|e| e.path()))
            .collect();
        paths.sort();
        for path in paths {
            // Some fixtures are unreadable on purpose (format 3.0, no CPU).
            let Ok(host) = topology::load(&Source::File(path.clone())) else {
                continue;
            };
            let svg = render(
                &host,
                &report(&host, "0", &[("vm1", &["1", "2"], Some("0"))]),
            );
            let mut drawn = cpu_ids(&svg);
            drawn.sort_unstable();
            let expected: Vec<u32> = host.pus.iter().map(|p| p.cpu.0).collect();
            assert_eq!(drawn, expected, "{}", path.display());
            drawn_hosts += 1;
        }
    }
    assert!(drawn_hosts > 50, "{drawn_hosts}");
}

#[test]
fn conflicts_are_outlined_by_severity() {
    let host = twenty();
    let vm1: Vec<String> = (1..=7).chain(11..=17).map(|c| c.to_string()).collect();
    let vm1: Vec<&str> = vm1.iter().map(String::as_str).collect();
    // vm2 also on 17 (vm1's): cpu-shared; vm3 on 9's sibling 19: core-shared.
    let r = report(
        &host,
        "0,10",
        &[
            ("vm1", &vm1, Some("0")),
            ("vm2", &["8", "9", "18", "17"], Some("0")),
            ("vm3", &["19"], Some("0,10")),
        ],
    );
    let svg = render(&host, &r);
    let shared = class_of(&svg, 17);
    assert!(shared.contains("shared"), "{shared}");
    assert!(shared.contains("conflict-error"), "{shared}");
    assert!(class_of(&svg, 19).contains("conflict-error"));
    assert!(class_of(&svg, 1).contains("taken"));
    assert!(!class_of(&svg, 1).contains("conflict"));
    assert!(class_of(&svg, 5).contains("free") || class_of(&svg, 5).contains("taken"));
    let doc = roxmltree::Document::parse(&svg).unwrap_or_else(|e| panic!("{e}"));
    let cpu17 = doc
        .descendants()
        .find(|n| n.attribute("id") == Some("cpu-17"))
        .unwrap_or_else(|| panic!("no cpu-17"));
    assert!(cpu17
        .descendants()
        .any(|n| n.attribute("class") == Some("outline-error")));
    // Emulator threads of vm1 and vm2 on the host's CPU 0: a warning, and
    // hatched, not coloured.
    let zero = class_of(&svg, 0);
    assert!(zero.contains("emulator"), "{zero}");
    assert!(!zero.contains("conflict-error"), "{zero}");
}

#[test]
fn warnings_alone_get_the_warning_outline() {
    let host = twenty();
    // vm1's emulator on its own vCPU CPU 2: emulator-overlap, a warning.
    let r = report(&host, "0,10", &[("vm1", &["2", "3"], Some("2"))]);
    assert!(!r.has_errors());
    let svg = render(&host, &r);
    assert!(class_of(&svg, 2).contains("conflict-warning"));
    assert!(svg.contains("class=\"outline-warning\""));
    assert!(!class_of(&svg, 3).contains("conflict"));
}

#[test]
fn tenant_names_are_escaped() {
    let host = twenty();
    let name = "a<&\"b' </svg>";
    let r = report(&host, "0,10", &[(name, &["1"], Some("0"))]);
    assert_eq!(r.tenants[1].name, name);
    let svg = render(&host, &r);
    let doc = roxmltree::Document::parse(&svg).unwrap_or_else(|e| panic!("{e}\n{svg}"));
    assert!(doc
        .descendants()
        .filter_map(|n| n.text())
        .any(|t| t.starts_with(&format!("{name}: 1 vCPU on 1"))));
    assert!(doc
        .descendants()
        .filter_map(|n| n.text())
        .any(|t| t.contains(&format!("{name} vCPU 0"))));
}

#[test]
fn same_input_same_bytes() {
    let host = synthetic("package:2 numa:2 l3:6 core:8 pu:2");
    let vms: Vec<(String, Vec<String>)> = (0..12)
        .map(|i| {
            let cpus = (0..8).map(|v| (i * 16 + v * 2 + 1).to_string()).collect();
            (format!("vm{i}"), cpus)
        })
        .collect();
    let vms: Vec<(&str, Vec<&str>)> = vms
        .iter()
        .map(|(n, c)| (n.as_str(), c.iter().map(String::as_str).collect()))
        .collect();
    let vms: Vec<(&str, &[&str], Option<&str>)> =
        vms.iter().map(|(n, c)| (*n, &c[..], Some("0-1"))).collect();
    let r = report(&host, "0-1,192-193", &vms);
    let first = render(&host, &r);
    assert_eq!(first, render(&host, &r));
    assert_eq!(cpu_ids(&first).len(), 384);
    // Wrapped into rows: no wider than the limit.
    let doc = roxmltree::Document::parse(&first).unwrap_or_else(|e| panic!("{e}"));
    let width: i64 = doc
        .root_element()
        .attribute("width")
        .and_then(|w| w.parse().ok())
        .unwrap_or(i64::MAX);
    assert!(width <= CONTENT_MAX + 2 * MARGIN, "{width}");
}

#[test]
fn unpinned_vms_and_emulators_do_not_paint_the_whole_host() {
    let host = twenty();
    let loose = tenant_from_domain(
        "loose.xml",
        "<domain><name>loose</name><vcpu>2</vcpu></domain>",
        &host,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    // vcpupin without emulatorpin: the emulator may run anywhere.
    let mut r = report(&host, "0,10", &[("vm1", &["1", "2"], None)]);
    r.tenants.push(loose);
    r.conflicts = conflicts(&host, &r.tenants);
    let svg = render(&host, &r);
    assert!(class_of(&svg, 5).contains("free"), "{}", class_of(&svg, 5));
    assert!(!class_of(&svg, 5).contains("conflict"));
    assert!(svg.contains("not pinned (may run on any CPU)"));
    assert!(svg.contains("emulator not pinned"));
}

/// The picture's width and its subtitle lines.
fn subtitle_lines(svg: &str) -> (i64, Vec<String>) {
    let doc = roxmltree::Document::parse(svg).unwrap_or_else(|e| panic!("{e}"));
    let width = doc
        .root_element()
        .attribute("width")
        .and_then(|w| w.parse().ok())
        .unwrap_or(0);
    let lines = doc
        .descendants()
        .filter(|n| n.attribute("class") == Some("subtitle"))
        .map(|n| n.text().unwrap_or("").to_owned())
        .collect();
    (width, lines)
}

/// Lines wrapped by `wrap_phrases`, joined back: ` · ` where a break
/// dropped one, a space after a `;`.
fn rejoin(lines: &[String]) -> String {
    let mut out = String::new();
    for line in lines {
        if !out.is_empty() {
            out.push_str(if out.ends_with(';') { " " } else { " · " });
        }
        out.push_str(line);
    }
    out
}

#[test]
fn the_subtitle_breaks_between_phrases_within_the_width() {
    use super::text::{chars_fitting, text_w, wrap_phrases};
    use super::title::SUBTITLE_FONT;
    // A deliberately long subtitle, one phrase of it longer than a line.
    let long = format!(
        "4 packages · 8 NUMA nodes · 16 L3 domains · 512 cores (1/2 threads per core) · \
         1024 CPUs (1000 usable) · 27 tenants · 12 errors · 31 warnings · host CPUs \
         0-3,512-515 as the plan reserves them; {} · the end",
        "words of a phrase far too long for one line "
            .repeat(4)
            .trim_end()
    );
    let avail = MIN_CANVAS - 2 * MARGIN;
    let lines = wrap_phrases(&long, chars_fitting(avail, SUBTITLE_FONT));
    assert!(lines.len() >= 3, "{lines:?}");
    let phrases: Vec<&str> = long.split(" · ").collect();
    for line in &lines {
        assert!(text_w(line, SUBTITLE_FONT) <= avail, "too wide: {line:?}");
        assert!(!line.starts_with(' ') && !line.ends_with(' ') && !line.ends_with('·'));
        // Whole phrases, or words of the phrase too long for a line.
        for part in line.split(" · ") {
            let whole = phrases.contains(&part);
            let words_of_long = part.split(' ').all(|w| long.split(' ').any(|l| l == w))
                && phrases
                    .iter()
                    .any(|p| p.contains(part) && text_w(p, SUBTITLE_FONT) > avail);
            assert!(whole || words_of_long, "{part:?} in {lines:?}");
        }
    }
    // Nothing lost, nothing added: the words in order.
    let words = |s: &str| -> Vec<String> {
        s.split([' ', '·'])
            .filter(|w| !w.is_empty())
            .map(str::to_owned)
            .collect()
    };
    assert_eq!(words(&lines.join(" ")), words(&long));

    // In pictures: each subtitle line within the width, whole phrases.
    let hosts = [
        synthetic("package:2 numa:2 l3:1 core:4 pu:2"),
        synthetic("package:2 numa:2 l3:6 core:8 pu:2"),
        fixture("gen29-20em64t-hybrid-1p6c2t+2ca4co1t.xml"),
        twenty(),
    ];
    let mut wrapped = 0;
    for host in &hosts {
        let r = report(host, "0", &[("vm1", &["1", "2"], Some("0"))]);
        let svg = render(host, &r);
        let (width, lines) = subtitle_lines(&svg);
        for line in &lines {
            assert!(
                text_w(line, SUBTITLE_FONT) <= width - 2 * MARGIN,
                "{}: too wide: {line:?}",
                host.source
            );
        }
        assert_eq!(
            rejoin(&lines),
            Paint::new(host, &r).subtitle(),
            "{}",
            host.source
        );
        if lines.len() > 1 {
            wrapped += 1;
        }
    }
    assert!(wrapped > 0, "no subtitle wrapped");
}
