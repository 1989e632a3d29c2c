//! Whole pictures checked through their SVG: every CPU drawn once, classes
//! and outlines by conflict, escaping, determinism.

use super::colour::{contrast, ink_on, CHIP_FILL, HOST_GREY, PALETTE, UNUSABLE_INK};
use super::*;
use crate::cpuset::CpuSet;
use crate::libvirt::domain::tenant_from_domain;
use crate::plan::Plan;
use crate::report::conflicts;
use crate::tenant::{host_tenant, IothreadCpus, Tenant, TenantKind, VcpuCpus};
use crate::topology::{self, Source};
use std::collections::{BTreeMap, BTreeSet};

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
        let svg = render(host, &report(host, "0", &[]), None);
        let mut drawn = cpu_ids(&svg);
        drawn.sort_unstable();
        let expected: Vec<u32> = host.pus.iter().map(|p| p.cpu.0).collect();
        assert_eq!(drawn, expected, "{}", host.source);

        // With a plan, once on each side.
        let usable: Vec<String> = host.usable_cpus().iter().map(|c| c.to_string()).collect();
        let (Some(first), Some(second)) = (usable.first(), usable.get(1)) else {
            continue;
        };
        let p = plan(first, &[("vm1", second, first)]);
        let svg = render(host, &report(host, first, &[]), Some(&p));
        let doc = roxmltree::Document::parse(&svg).unwrap_or_else(|e| panic!("{e}"));
        for prefix in ["cpu-", "plan-cpu-"] {
            let mut drawn: Vec<u32> = doc
                .descendants()
                .filter_map(|n| n.attribute("id")?.strip_prefix(prefix)?.parse().ok())
                .collect();
            drawn.sort_unstable();
            assert_eq!(drawn, expected, "{prefix} {}", host.source);
        }
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
                None,
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
    let svg = render(&host, &r, None);
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
    // vm1's emulator on its own vCPU 1's CPU 3: emulator-overlap, a warning
    // (on vCPU 0's alone it would be the housekeeping layout).
    let r = report(&host, "0,10", &[("vm1", &["2", "3"], Some("3"))]);
    assert!(!r.has_errors());
    let svg = render(&host, &r, None);
    assert!(class_of(&svg, 3).contains("conflict-warning"));
    assert!(svg.contains("class=\"outline-warning\""));
    assert!(!class_of(&svg, 2).contains("conflict"));
}

#[test]
fn tenant_names_are_escaped() {
    let host = twenty();
    let name = "a<&\"b' </svg>";
    let r = report(&host, "0,10", &[(name, &["1"], Some("0"))]);
    assert_eq!(r.tenants[1].name, name);
    let svg = render(&host, &r, None);
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
    let first = render(&host, &r, None);
    assert_eq!(first, render(&host, &r, None));
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

/// Issue 27: a VM that is not pinned, and a pinned VM's emulator that is
/// not, are drawn on every CPU they may run on — a dashed band in their
/// colour, never a free CPU — without painting the whole host; where they
/// float over what others hold is outlined as the `floating` error. A
/// shut-off domain is not drawn, and the legend says so.
#[test]
fn floating_vms_are_banded_where_they_may_run_and_shut_off_ones_are_not_drawn() {
    let host = twenty();
    let loose = tenant_from_domain(
        "loose.xml",
        "<domain><name>loose</name><vcpu>2</vcpu></domain>",
        &host,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let mut off = tenant_from_domain("off.xml", &domain("off", &["7"], Some("7")), &host)
        .unwrap_or_else(|e| panic!("{e}"));
    off.state = crate::tenant::TenantState::ShutOff;
    // vcpupin without emulatorpin: the emulator may run anywhere.
    let mut r = report(&host, "0,10", &[("vm1", &["1", "2"], None)]);
    r.tenants.push(loose);
    r.tenants.push(off);
    r.conflicts = conflicts(&host, &r.tenants);
    let svg = render(&host, &r, None);
    let doc = roxmltree::Document::parse(&svg).unwrap_or_else(|e| panic!("{e}"));
    let band = |cpu: u32| -> Vec<String> {
        cell_node(&doc, &format!("cpu-{cpu}"))
            .descendants()
            .filter(|n| n.attribute("data-role") == Some("floating"))
            .filter_map(|n| n.attribute("data-tenant"))
            .map(str::to_owned)
            .collect()
    };
    // CPU 5: nobody's, but both may run there.
    let five = class_of(&svg, 5);
    assert!(
        five.contains("floating") && !five.contains("free"),
        "{five}"
    );
    assert!(!five.contains("conflict"), "{five}");
    assert_eq!(band(5), ["vm1", "loose"]);
    // vm1's own CPU: its vCPU, loose's band, loose's error outline.
    let one = class_of(&svg, 1);
    assert!(
        one.contains("taken") && one.contains("conflict-error"),
        "{one}"
    );
    assert_eq!(band(1), ["loose"]);
    // The host's CPU: loose floats over it too.
    assert!(class_of(&svg, 0).contains("conflict-error"));
    // The shut-off domain's CPU 7: nobody's stripe; both float there.
    assert!(!svg.contains("data-tenant=\"off\" data-role=\"vcpus\""));
    assert_eq!(band(7), ["vm1", "loose"]);
    assert!(svg.contains("loose may run here (vCPUs 0,1 and emulator not pinned)"));
    assert!(svg.contains("not pinned (may run on any CPU)"));
    assert!(svg.contains("emulator not pinned"));
    assert!(svg.contains("off: shut off, not drawn; its config: 1 vCPU on 7"));
    assert!(svg.contains("a VM may run here, not pinned"));
}

/// A pinned VM built by hand: vCPU i on `vcpus[i]`, the emulator on
/// `emulator`, I/O thread i+1 on `iothreads[i]`.
fn vm(name: &str, vcpus: &[&str], emulator: &str, iothreads: &[&str]) -> Tenant {
    let set = |s: &str| s.parse::<CpuSet>().unwrap_or_else(|e| panic!("{s}: {e}"));
    let vcpus: Vec<VcpuCpus> = vcpus
        .iter()
        .zip(0..)
        .map(|(cpus, vcpu)| VcpuCpus {
            vcpu,
            cpus: set(cpus),
        })
        .collect();
    Tenant {
        name: name.to_owned(),
        kind: TenantKind::Vm,
        state: crate::tenant::TenantState::Running,
        cpus: vcpus.iter().fold(CpuSet::new(), |a, v| a.union(&v.cpus)),
        vcpus,
        emulator_cpus: set(emulator),
        iothreads: iothreads
            .iter()
            .zip(1..)
            .map(|(cpus, iothread)| IothreadCpus {
                iothread,
                cpus: set(cpus),
            })
            .collect(),
        nics: Vec::new(),
        pinned: true,
        memory: None,
        memory_resident: None,
    }
}

/// The `<g>` of CPU cell `id`.
fn cell_node<'a, 'i>(doc: &'a roxmltree::Document<'i>, id: &str) -> roxmltree::Node<'a, 'i> {
    doc.descendants()
        .find(|n| n.attribute("id") == Some(id))
        .unwrap_or_else(|| panic!("no {id}"))
}

/// Whether a node under `node` has class `class`.
fn has_class(node: roxmltree::Node<'_, '_>, class: &str) -> bool {
    node.descendants().any(|n| {
        n.attribute("class")
            .is_some_and(|c| c.split(' ').any(|c| c == class))
    })
}

#[test]
fn several_tenants_mark_counts_emulator_and_io_threads() {
    let host = twenty();
    // The host on 0,10; vm1's emulator on the host's CPU 0, its I/O thread on
    // vm2's CPU 3; vm2's emulator on its own CPU 4 (one tenant: no mark).
    let tenants = vec![
        host_tenant(&"0,10".parse().unwrap_or_default()),
        vm("vm1", &["1", "11"], "0", &["3"]),
        vm("vm2", &["3", "13"], "4", &[]),
    ];
    let svg = render(&host, &Report::new(&host, tenants, None), None);
    let doc = roxmltree::Document::parse(&svg).unwrap_or_else(|e| panic!("{e}"));
    for (cpu, several) in [(0, true), (3, true), (10, false), (1, false), (4, false)] {
        let node = cell_node(&doc, &format!("cpu-{cpu}"));
        assert_eq!(has_class(node, "shared-mark"), several, "cpu {cpu}");
        assert_eq!(class_of(&svg, cpu).contains("shared"), several, "cpu {cpu}");
    }
    // The key says what the mark counts.
    assert!(svg.contains("several tenants (any thread)"));
}

#[test]
fn cpu_numbers_contrast_with_what_is_under_them() {
    // Every palette colour and the host's, solid and fill, by inks chosen.
    for fill in PALETTE.iter().chain([&HOST_GREY, &"#ffffff", &CHIP_FILL]) {
        let ratio = contrast(ink_on(fill), fill);
        assert!(ratio >= 4.5, "{} on {fill}: {ratio:.2}", ink_on(fill));
    }
    assert!(contrast(UNUSABLE_INK, CHIP_FILL) >= 4.5);

    // In pictures: each VM's vCPUs alone on a CPU (solid), its emulator
    // alone on one (hatched), two VMs on one (striped); unusable CPUs
    // (crossed), on a host with offline CPUs.
    let big = synthetic("package:1 core:32 pu:2");
    let mut tenants = vec![host_tenant(&"0".parse().unwrap_or_default())];
    for i in 0..PALETTE.len() + 1 {
        let base = 4 * i + 1;
        let own = base.to_string();
        let striped = (base + 2).to_string();
        tenants.push(vm(
            &format!("vm{i}"),
            &[&own, &striped],
            &(base + 1).to_string(),
            &[],
        ));
    }
    // vm0 also on vm1's second CPU, which is then striped.
    if let Some(vm0) = tenants.get_mut(1) {
        let cpu: CpuSet = "7".parse().unwrap_or_default();
        vm0.vcpus.push(VcpuCpus {
            vcpu: 2,
            cpus: cpu.clone(),
        });
        vm0.cpus = vm0.cpus.union(&cpu);
    }
    let offline = fixture("16em64t-4s2c2t-offlines.xml");
    let pictures = [
        (&big, Report::new(&big, tenants, None)),
        (
            &offline,
            report(&offline, "0", &[("vm1", &["1", "2"], Some("0"))]),
        ),
    ];
    let mut solid_backgrounds = BTreeSet::new();
    let (mut chips, mut hatched) = (0, 0);
    for (host, r) in &pictures {
        let svg = render(host, r, None);
        let doc = roxmltree::Document::parse(&svg).unwrap_or_else(|e| panic!("{e}"));
        for cell in doc
            .descendants()
            .filter(|n| n.attribute("data-cpu").is_some())
        {
            let cpu = cell.attribute("data-cpu").unwrap_or("?");
            let class = |c: &'static str| {
                move |n: &roxmltree::Node<'_, '_>| n.attribute("class") == Some(c)
            };
            let number = cell
                .children()
                .find(class("num"))
                .unwrap_or_else(|| panic!("cpu {cpu}: no number"));
            assert_eq!(number.text(), Some(cpu));
            let ink = number.attribute("fill").unwrap_or("");
            let stripes: Vec<&str> = cell
                .children()
                .filter(class("fill"))
                .filter_map(|n| n.attribute("fill"))
                .collect();
            if stripes.iter().any(|f| f.starts_with("url(")) {
                hatched += 1;
            }
            let background = match cell.children().find(class("num-chip")) {
                Some(chip) => {
                    chips += 1;
                    chip.attribute("fill").unwrap_or("")
                }
                None => {
                    // No chip: the number must be on one solid colour, and
                    // nothing crossing it.
                    assert_eq!(stripes.len(), 1, "cpu {cpu}: {stripes:?} without a chip");
                    assert!(
                        !has_class(cell, "cross"),
                        "cpu {cpu}: crossed without a chip"
                    );
                    solid_backgrounds.insert(stripes[0].to_owned());
                    stripes[0]
                }
            };
            assert!(
                background.starts_with('#') && background.len() == 7,
                "cpu {cpu}: number on {background}"
            );
            let ratio = contrast(ink, background);
            assert!(ratio >= 4.5, "cpu {cpu}: {ink} on {background}: {ratio:.2}");
        }
    }
    for colour in PALETTE.iter().chain([&HOST_GREY]) {
        assert!(
            solid_backgrounds.contains(*colour),
            "{colour} not drawn solid"
        );
    }
    assert!(
        hatched > PALETTE.len() && chips > hatched,
        "{hatched} hatched, {chips} chips"
    );
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
        let svg = render(host, &r, None);
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
            with_picture(host, &r, None, |p| p.subtitle()),
            "{}",
            host.source
        );
        if lines.len() > 1 {
            wrapped += 1;
        }
    }
    assert!(wrapped > 0, "no subtitle wrapped");
}

/// Every text of the picture, wrapped lines joined again with spaces.
fn words(svg: &str) -> String {
    let doc = roxmltree::Document::parse(svg).unwrap_or_else(|e| panic!("{e}"));
    let texts: Vec<&str> = doc
        .descendants()
        .filter(|n| n.tag_name().name() == "text")
        .filter_map(|n| n.text())
        .collect();
    texts.join(" ")
}

/// A plan with the host's `reserved` CPUs placing each `(name, vCPU CPUs,
/// emulator CPUs)`, vCPU i on the i-th CPU.
fn plan(reserved: &str, vms: &[(&str, &str, &str)]) -> Plan {
    use crate::doctor::testroot::{self, Vm};
    let vms: Vec<Vm<'_>> = vms
        .iter()
        .map(|&(name, cpus, emulator)| Vm {
            emulator: Some(emulator),
            ..Vm::new(name, cpus, "isolate", 1)
        })
        .collect();
    testroot::plan(reserved, &vms)
}

/// Per panel (`now`, `plan`): the CPUs where `tenant` has a stripe of
/// `role`.
fn cells_of(svg: &str, tenant: &str, role: &str) -> BTreeMap<String, Vec<u32>> {
    let doc = roxmltree::Document::parse(svg).unwrap_or_else(|e| panic!("{e}\n{svg}"));
    let mut out: BTreeMap<String, Vec<u32>> = BTreeMap::new();
    for panel in doc
        .descendants()
        .filter(|n| n.attribute("class") == Some("panel"))
    {
        let key = panel.attribute("data-panel").unwrap_or("?").to_owned();
        let list = out.entry(key).or_default();
        for cell in panel
            .descendants()
            .filter(|n| n.attribute("data-cpu").is_some())
        {
            let here = cell.children().any(|s| {
                s.attribute("data-tenant") == Some(tenant) && s.attribute("data-role") == Some(role)
            });
            if here {
                list.extend(
                    cell.attribute("data-cpu")
                        .and_then(|c| c.parse::<u32>().ok()),
                );
            }
        }
        list.sort_unstable();
    }
    out
}

/// Each CPU cell of a panel as it reads, coordinates aside: its class,
/// tooltip, stripes (fill and data) and number.
fn cell_facts(svg: &str, panel: &str) -> Vec<String> {
    let doc = roxmltree::Document::parse(svg).unwrap_or_else(|e| panic!("{e}"));
    let Some(panel) = doc.descendants().find(|n| {
        n.attribute("class") == Some("panel") && n.attribute("data-panel") == Some(panel)
    }) else {
        return Vec::new();
    };
    panel
        .descendants()
        .filter(|n| n.attribute("data-cpu").is_some())
        .map(|cell| {
            let mut facts = vec![
                cell.attribute("data-cpu").unwrap_or("").to_owned(),
                cell.attribute("class").unwrap_or("").to_owned(),
            ];
            for n in cell.children().filter(|n| n.is_element()) {
                let attrs: Vec<String> = n
                    .attributes()
                    .filter(|a| !matches!(a.name(), "x" | "y" | "d"))
                    .map(|a| format!("{}={}", a.name(), a.value()))
                    .collect();
                facts.push(format!(
                    "{} {} {}",
                    n.tag_name().name(),
                    attrs.join(" "),
                    n.text().unwrap_or("")
                ));
            }
            facts.join(" | ")
        })
        .collect()
}

#[test]
fn with_a_plan_now_and_after_side_by_side() {
    let host = twenty();
    // vm1 on 2-3, its siblings 12-13 vm2's: core-shared. The plan moves vm1
    // to core 5 (CPUs 5 and 15), its emulator to the host's 0,10; vm2 is
    // not in the plan and stays.
    let tenants = vec![
        host_tenant(&"0,10".parse().unwrap_or_default()),
        vm("vm1", &["2", "3"], "4", &[]),
        vm("vm2", &["12", "13"], "14", &[]),
    ];
    let r = Report::new(&host, tenants.clone(), None);
    let p = plan("0,10", &[("vm1", "5,15", "0,10")]);
    let with_plan = Report::new(&host, tenants, Some(&p));
    let before_after = render(&host, &with_plan, Some(&p));
    assert_eq!(
        before_after,
        render(&host, &with_plan, Some(&p)),
        "same bytes"
    );
    let alone = render(&host, &r, None);

    // The two panels, their headings and their ids (unique: cpu-N now,
    // plan-cpu-N with the plan) are checked on the lab through the binary,
    // tests/report_svg.rs; here, where each tenant is drawn.

    // vm1 at its CPUs now on the left, at the planned ones on the right; its
    // emulator on the host's CPUs with the plan; vm2 where it is on both.
    let vm1 = cells_of(&before_after, "vm1", "vcpus");
    assert_eq!(vm1.get("now"), Some(&vec![2, 3]), "{vm1:?}");
    assert_eq!(vm1.get("plan"), Some(&vec![5, 15]), "{vm1:?}");
    let emulator = cells_of(&before_after, "vm1", "threads");
    assert_eq!(emulator.get("now"), Some(&vec![4]));
    assert_eq!(emulator.get("plan"), Some(&vec![0, 10]));
    let vm2 = cells_of(&before_after, "vm2", "vcpus");
    assert_eq!(vm2.get("now"), vm2.get("plan"));
    assert_eq!(vm2.get("now"), Some(&vec![12, 13]));
    // The conflicts: outlined now, gone with the plan.
    assert!(class_of(&before_after, 2).contains("conflict-error"));
    assert!(class_of(&before_after, 12).contains("conflict-error"));
    let after: Vec<String> = cell_facts(&before_after, "plan");
    assert!(
        after.iter().all(|c| !c.contains("conflict-error")),
        "{after:?}"
    );
    assert!(words(&before_after).contains("(the plan removes it)"));

    // The left side is exactly the picture without a plan; the subtitle
    // says whose CPUs are the host's.
    assert_eq!(cell_facts(&before_after, "now"), cell_facts(&alone, "now"));
    assert_eq!(cell_facts(&alone, "now").len(), 20);
    let (_, subtitle) = subtitle_lines(&before_after);
    assert!(
        subtitle
            .concat()
            .contains("host CPUs 0,10 (the plan's reserved CPUs) on both sides"),
        "{subtitle:?}"
    );

    // Without a plan, one side and no heading.
    let doc = roxmltree::Document::parse(&alone).unwrap_or_else(|e| panic!("{e}"));
    let panels: Vec<&str> = doc
        .descendants()
        .filter(|n| n.attribute("class") == Some("panel"))
        .filter_map(|n| n.attribute("data-panel"))
        .collect();
    assert_eq!(panels, ["now"]);
    assert!(!alone.contains("panel-heading"));
    assert_eq!(cpu_ids(&alone).len(), 20);
}

#[test]
fn a_conflict_the_plan_adds_is_listed_and_outlined_on_its_side() {
    let host = twenty();
    let tenants = vec![
        host_tenant(&"0,10".parse().unwrap_or_default()),
        vm("vm1", &["2"], "4", &[]),
        vm("vm2", &["13"], "14", &[]),
    ];
    // The plan reserves nothing and puts vm1 on vm2's CPU 13; vm3 is new.
    let p = plan("", &[("vm1", "13", "13"), ("vm3", "7", "7")]);
    let r = Report::new(&host, tenants, Some(&p));
    let svg = render(&host, &r, Some(&p));
    let doc = roxmltree::Document::parse(&svg).unwrap_or_else(|e| panic!("{e}"));
    let plan13 = cell_node(&doc, "plan-cpu-13");
    assert!(has_class(plan13, "outline-error"));
    assert!(has_class(plan13, "shared-mark"));
    assert!(!has_class(cell_node(&doc, "cpu-13"), "outline-error"));
    assert!(
        words(&svg).contains("Added by the plan: 1 error"),
        "{}",
        words(&svg)
    );
    // The host is a tenant now only; vm3 with the plan only.
    assert!(words(&svg).contains("host CPUs 0,10 now, the plan reserves none"));
    assert!(words(&svg).contains("with the plan: not a tenant"));
    assert!(words(&svg).contains("vm3: not a tenant now"));
    assert_eq!(cells_of(&svg, "host", "host").get("plan"), Some(&vec![]));
    assert_eq!(cells_of(&svg, "vm3", "vcpus").get("plan"), Some(&vec![7]));
    // vm3 has a colour of its own, not vm1's or vm2's.
    let fill_of = |id: &str| {
        cell_node(&doc, id)
            .children()
            .find(|n| n.attribute("class") == Some("fill"))
            .and_then(|n| n.attribute("fill"))
            .unwrap_or("")
            .to_owned()
    };
    let colours: BTreeSet<String> = ["cpu-2", "cpu-13", "plan-cpu-7"]
        .iter()
        .map(|id| fill_of(id))
        .collect();
    assert_eq!(colours.len(), 3, "{colours:?}");
}
