//! `pinplan xml`: the libvirt domain XML emitter and lossless patcher, run as
//! a program.
//!
//! 1. Every domain of `tests/fixtures/libvirt-domains/` that libvirt's schema
//!    accepts (checked here with `virt-xml-validate`) is patched with a plan
//!    made by the real binary for a VM of its name and vCPU count: the output
//!    must validate, its pins (read back with roxmltree) must be the plan's,
//!    and every byte outside the pinning elements must be the input's. A
//!    second pass plans the larger ones with `numa = "spread"` on a two-node
//!    host so that guest NUMA cells and memnodes are written too.
//! 2. A hand-written domain (tabs, double quotes, comments, an entity, the qemu
//!    namespace, `<cputune>` children pinplan does not own, a
//!    `host-passthrough` `<cpu>`, `<vcpu current>`) against a hand-written
//!    expected output.
//! 3. Refusals: exit 2, `error: ` naming the file and the element or line,
//!    nothing on stdout, `--out` untouched.
//! 4. Fragments (`pinplan xml` without `--patch`, `plan --out`'s
//!    `NAME.fragment.xml`) wrapped in a minimal domain validate.
//! 5. A live libvirtd (`PINPLAN_TEST_LIBVIRT_URI`, set by scripts/test.sh):
//!    `pinplan xml --connect`, `virsh define` of the result, `virsh dumpxml`
//!    shows the pins. Fails (never skips) when the variable is set and libvirt
//!    does not work; without it, says so and does nothing.
//!
//! The hand-written plan, domain and expected output are files:
//! `tests/fixtures/inputs/tab-vm-plan.json`, `inputs/tab-vm.xml`,
//! `expected/tab-vm-patched.xml`. Refusals' messages are compared with
//! snapshots.

use crate::util::{
    self, arg as s, cpuset, describe, fixture, fixture_text, pinplan, pinplan_ok, text, Guests,
    TempDir,
};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;
use std::path::{Path, PathBuf};

/// 2 packages x 16 cores x 2 threads, one NUMA node; CPU n's sibling is n + 32.
pub(crate) const BIG_HOST: &str = "synthetic:package:2 core:16 pu:2(indexes=2*32:1*2)";

/// `xml --plan PLAN --patch DOMAIN MORE…`.
pub(crate) fn patch<'a>(plan: &'a Path, domain: &'a Path, more: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["xml", "--plan", s(plan), "--patch", s(domain)];
    args.extend_from_slice(more);
    args
}

use util::validate_domain as validate;

fn validate_text(dir: &TempDir, name: &str, xml: &str) -> Result<(), String> {
    let p = dir.write(name, xml);
    validate(&p)
}

// ---------------------------------------------------------------------------
// Reading pins back, independently of the program.

fn num(v: &Value) -> u32 {
    u32::try_from(v.as_u64().unwrap()).unwrap()
}

/// The pinning state of a domain, as libvirt would read it.
#[derive(Debug, Clone, PartialEq, Default)]
struct Pins {
    vcpu_count: String,
    vcpu_placement: Option<String>,
    vcpu_cpuset: Option<BTreeSet<u32>>,
    /// `<vcpu>` attributes other than placement and cpuset (`current`).
    vcpu_other_attrs: BTreeMap<String, String>,
    iothreads: Option<String>,
    vcpupin: BTreeMap<u32, BTreeSet<u32>>,
    emulatorpin: Option<BTreeSet<u32>>,
    iothreadpin: BTreeMap<u32, BTreeSet<u32>>,
    memory_nodeset: Option<BTreeSet<u32>>,
    memnodes: BTreeMap<u32, BTreeSet<u32>>,
    topology: Option<(u32, u32, u32)>,
    /// Guest NUMA cells: id (or position) → vCPUs.
    cells: Option<BTreeMap<u32, BTreeSet<u32>>>,
    /// Guest NUMA cells' memory in KiB.
    cell_memory_kib: Vec<u64>,
}

fn local<'a>(n: &roxmltree::Node<'a, '_>) -> Option<&'a str> {
    (n.is_element() && n.tag_name().namespace().is_none()).then(|| n.tag_name().name())
}

fn children<'a, 'i>(
    n: roxmltree::Node<'a, 'i>,
    name: &'static str,
) -> impl Iterator<Item = roxmltree::Node<'a, 'i>> {
    n.children().filter(move |c| local(c) == Some(name))
}

fn only_child<'a, 'i>(
    n: roxmltree::Node<'a, 'i>,
    name: &'static str,
) -> Result<Option<roxmltree::Node<'a, 'i>>, String> {
    let all: Vec<_> = children(n, name).collect();
    match all.len() {
        0 => Ok(None),
        1 => Ok(Some(all[0])),
        k => Err(format!(
            "{k} <{name}> elements in <{}>",
            n.tag_name().name()
        )),
    }
}

fn kib(amount: u64, unit: &str) -> u64 {
    let bytes: u64 = match unit {
        "b" | "bytes" => 1,
        "KB" => 1000,
        "k" | "K" | "KiB" => 1 << 10,
        "MB" => 1_000_000,
        "M" | "MiB" => 1 << 20,
        "GB" => 1_000_000_000,
        "G" | "GiB" => 1 << 30,
        "TB" => 1_000_000_000_000,
        "T" | "TiB" => 1 << 40,
        other => panic!("unit {other:?}"),
    };
    amount * bytes / 1024
}

/// The domain's `<memory>` in KiB, if it has one.
fn domain_memory_kib(xml: &str) -> Option<u64> {
    let doc = roxmltree::Document::parse(xml).ok()?;
    let m = children(doc.root_element(), "memory").next()?;
    let amount: u64 = m.text()?.trim().parse().ok()?;
    Some(kib(amount, m.attribute("unit").unwrap_or("KiB")))
}

impl Pins {
    fn read(xml: &str) -> Result<Pins, String> {
        let doc = roxmltree::Document::parse(xml).map_err(|e| format!("not XML: {e}"))?;
        let root = doc.root_element();
        if root.tag_name().name() != "domain" {
            return Err("root is not <domain>".to_owned());
        }
        let mut p = Pins::default();
        let vcpu = only_child(root, "vcpu")?.ok_or("no <vcpu>")?;
        p.vcpu_count = vcpu.text().unwrap_or("").trim().to_owned();
        p.vcpu_placement = vcpu.attribute("placement").map(str::to_owned);
        p.vcpu_cpuset = vcpu.attribute("cpuset").map(cpuset);
        for a in vcpu.attributes() {
            if a.name() != "placement" && a.name() != "cpuset" {
                p.vcpu_other_attrs
                    .insert(a.name().to_owned(), a.value().to_owned());
            }
        }
        p.iothreads =
            only_child(root, "iothreads")?.map(|n| n.text().unwrap_or("").trim().to_owned());
        if let Some(ct) = only_child(root, "cputune")? {
            for v in children(ct, "vcpupin") {
                let id: u32 = v.attribute("vcpu").unwrap().parse().unwrap();
                if p.vcpupin
                    .insert(id, cpuset(v.attribute("cpuset").unwrap()))
                    .is_some()
                {
                    return Err(format!("two <vcpupin vcpu='{id}'>"));
                }
            }
            if let Some(e) = only_child(ct, "emulatorpin")? {
                p.emulatorpin = Some(cpuset(e.attribute("cpuset").unwrap()));
            }
            for t in children(ct, "iothreadpin") {
                let id: u32 = t.attribute("iothread").unwrap().parse().unwrap();
                if p.iothreadpin
                    .insert(id, cpuset(t.attribute("cpuset").unwrap()))
                    .is_some()
                {
                    return Err(format!("two <iothreadpin iothread='{id}'>"));
                }
            }
        }
        if let Some(nt) = only_child(root, "numatune")? {
            p.memory_nodeset = only_child(nt, "memory")?
                .and_then(|m| m.attribute("nodeset"))
                .map(cpuset);
            for m in children(nt, "memnode") {
                p.memnodes.insert(
                    m.attribute("cellid").unwrap().parse().unwrap(),
                    cpuset(m.attribute("nodeset").unwrap()),
                );
            }
        }
        if let Some(cpu) = only_child(root, "cpu")? {
            p.topology = only_child(cpu, "topology")?.map(|t| {
                let a = |k: &str| t.attribute(k).unwrap().parse::<u32>().unwrap();
                (a("sockets"), a("cores"), a("threads"))
            });
            if let Some(numa) = only_child(cpu, "numa")? {
                let mut cells = BTreeMap::new();
                for (i, c) in children(numa, "cell").enumerate() {
                    let id = c
                        .attribute("id")
                        .map_or(u32::try_from(i).unwrap(), |v| v.parse().unwrap());
                    cells.insert(id, cpuset(c.attribute("cpus").unwrap_or("")));
                    let amount: u64 = c.attribute("memory").unwrap().parse().unwrap();
                    p.cell_memory_kib
                        .push(kib(amount, c.attribute("unit").unwrap_or("KiB")));
                }
                p.cells = Some(cells);
            }
        }
        Ok(p)
    }

    /// What `input` should look like after patching with the plan's `vm`
    /// (without --set-vcpus); the plan's I/O threads, in order, pin
    /// `iothread_ids` (the domain's own, lowest first) when given.
    fn expected(input: &Pins, vm: &Value, iothread_ids: Option<&BTreeSet<u32>>) -> Pins {
        let mut p = input.clone();
        p.vcpu_placement = Some("static".to_owned());
        p.vcpu_cpuset = Some(cpuset(vm["cpus"].as_str().unwrap()));
        p.vcpupin = vm["vcpus"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| (num(&v["vcpu"]), BTreeSet::from([num(&v["cpu"])])))
            .collect();
        let emu = cpuset(vm["emulator_cpus"].as_str().unwrap());
        p.emulatorpin = (!emu.is_empty()).then_some(emu);
        let io = vm["iothreads"].as_array().unwrap();
        if !io.is_empty() {
            p.iothreads = Some(io.len().to_string());
        }
        p.iothreadpin = io
            .iter()
            .map(|t| (num(&t["iothread"]), cpuset(t["cpus"].as_str().unwrap())))
            .collect();
        if let Some(ids) = iothread_ids {
            p.iothreadpin = ids
                .iter()
                .copied()
                .zip(std::mem::take(&mut p.iothreadpin).into_values())
                .collect();
        }
        let nodes: BTreeSet<u32> = vm["numa_nodes"]
            .as_array()
            .unwrap()
            .iter()
            .map(num)
            .collect();
        let cells = vm["guest_cells"].as_array().unwrap();
        if !nodes.is_empty() {
            p.memory_nodeset = Some(nodes);
            p.memnodes = cells
                .iter()
                .map(|c| (num(&c["id"]), BTreeSet::from([num(&c["host_node"])])))
                .collect();
        }
        let t = &vm["guest_topology"];
        p.topology = Some((num(&t["sockets"]), num(&t["cores"]), num(&t["threads"])));
        if !cells.is_empty() {
            p.cells = Some(
                cells
                    .iter()
                    .map(|c| (num(&c["id"]), cpuset(c["vcpus"].as_str().unwrap())))
                    .collect(),
            );
            // The cells' memory is checked separately (its sum is the domain's).
            p.cell_memory_kib.clear();
        }
        p
    }
}

fn diff_pins(got: &Pins, want: &Pins) -> Option<String> {
    let mut d = Vec::new();
    macro_rules! fields {
        ($($f:ident),*) => {$(
            if got.$f != want.$f {
                d.push(format!("  {}: got {:?}, want {:?}", stringify!($f), got.$f, want.$f));
            }
        )*};
    }
    fields!(
        vcpu_count,
        vcpu_placement,
        vcpu_cpuset,
        vcpu_other_attrs,
        iothreads,
        vcpupin,
        emulatorpin,
        iothreadpin,
        memory_nodeset,
        memnodes,
        topology,
        cells,
        cell_memory_kib
    );
    (!d.is_empty()).then(|| format!("pins differ from the plan:\n{}", d.join("\n")))
}

// ---------------------------------------------------------------------------
// Byte identity outside the pinning elements.
//
// Method: parse input and output with roxmltree (independently of the
// program's quick-xml scanner) and collect, in each, the byte ranges
// (`Node::range()`, offsets into the original text) of the elements the
// patcher may rewrite: top-level `<vcpu>`, `<iothreads>`, `<numatune>`; the
// `<vcpupin>`, `<emulatorpin>`, `<iothreadpin>` children of `<cputune>`; the
// `<topology>` and `<numa>` children of `<cpu>`. A `<cputune>` or `<cpu>` the
// input does not have, or has as an empty element (`<cpu mode='x'/>`), is
// owned whole (in the output it is new or re-opened). Ranges separated only by
// whitespace are merged, and a merged range that is alone on its line(s)
// takes its whole lines with it (indentation and newline). What is left of the
// two texts must be byte for byte the same.

/// Names of `<cputune>`/`<cpu>` the patcher creates or re-opens for `input`.
fn wholly_owned(input: &str) -> BTreeSet<&'static str> {
    let doc = roxmltree::Document::parse(input).unwrap();
    let root = doc.root_element();
    ["cputune", "cpu"]
        .into_iter()
        .filter(|name| match children(root, name).next() {
            None => true,
            Some(n) => input[n.range()].ends_with("/>"),
        })
        .collect()
}

fn owned_spans(xml: &str, whole: &BTreeSet<&'static str>) -> Vec<Range<usize>> {
    let doc = roxmltree::Document::parse(xml).unwrap();
    let mut spans = Vec::new();
    for c in doc.root_element().children() {
        match local(&c) {
            Some("vcpu" | "iothreads" | "numatune") => spans.push(c.range()),
            Some(name @ ("cputune" | "cpu")) if whole.contains(name) => spans.push(c.range()),
            Some("cputune") => spans.extend(
                c.children()
                    .filter(|k| matches!(local(k), Some("vcpupin" | "emulatorpin" | "iothreadpin")))
                    .map(|k| k.range()),
            ),
            Some("cpu") => spans.extend(
                c.children()
                    .filter(|k| matches!(local(k), Some("topology" | "numa")))
                    .map(|k| k.range()),
            ),
            _ => {}
        }
    }
    spans
}

fn strip(xml: &str, mut spans: Vec<Range<usize>>) -> String {
    spans.sort_by_key(|r| r.start);
    let mut merged: Vec<Range<usize>> = Vec::new();
    for r in spans {
        match merged.last_mut() {
            Some(last) if xml[last.end..r.start].trim().is_empty() => last.end = r.end,
            _ => merged.push(r),
        }
    }
    let mut out = String::new();
    let mut at = 0;
    for r in merged {
        let line_start = xml[..r.start].rfind('\n').map_or(0, |i| i + 1);
        let line_end = xml[r.end..].find('\n').map_or(xml.len(), |i| r.end + i + 1);
        let (start, end) = if xml[line_start..r.start].trim().is_empty()
            && xml[r.end..line_end].trim().is_empty()
        {
            (line_start, line_end)
        } else {
            (r.start, r.end)
        };
        let start = start.max(at);
        out.push_str(&xml[at..start]);
        at = end;
    }
    out.push_str(&xml[at..]);
    out
}

/// Ok when input and output agree outside the pinning elements; else a
/// unified-ish diff of the first difference.
fn same_outside_pins(input: &str, output: &str) -> Result<(), String> {
    let whole = wholly_owned(input);
    let a = strip(input, owned_spans(input, &whole));
    let b = strip(output, owned_spans(output, &whole));
    if a == b {
        return Ok(());
    }
    let al: Vec<&str> = a.lines().collect();
    let bl: Vec<&str> = b.lines().collect();
    let first = al
        .iter()
        .zip(&bl)
        .position(|(x, y)| x != y)
        .unwrap_or(al.len().min(bl.len()));
    let show = |v: &[&str]| {
        v.iter()
            .skip(first.saturating_sub(2))
            .take(6)
            .map(|l| format!("    {l:?}"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    Err(format!(
        "bytes outside the pinning elements changed (line {} of the stripped text):\n  input:\n{}\n  output:\n{}",
        first + 1,
        show(&al),
        show(&bl)
    ))
}

// ---------------------------------------------------------------------------
// Plans.

pub(crate) fn toml_str(v: &str) -> String {
    format!("\"{}\"", v.replace('\\', "\\\\").replace('"', "\\\""))
}

/// Writes SPEC in `dir`, runs `pinplan plan SPEC --source SOURCE --out DIR/out`;
/// Ok((plan.json, the VM)) when exit 0, Err(output) otherwise.
pub(crate) fn make_plan(dir: &Path, source: &str, spec: &str) -> Result<(PathBuf, Value), String> {
    std::fs::create_dir_all(dir).unwrap();
    let spec_path = dir.join("spec.toml");
    std::fs::write(&spec_path, spec).unwrap();
    let out_dir = dir.join("out");
    let args = [
        "plan",
        s(&spec_path),
        "--source",
        source,
        "--out",
        s(&out_dir),
    ];
    let out = pinplan(args);
    if out.status.code() != Some(0) {
        return Err(describe(&args, &out));
    }
    let plan_path = out_dir.join("plan.json");
    let plan: Value = serde_json::from_str(&std::fs::read_to_string(&plan_path).unwrap()).unwrap();
    let vm = plan["vms"][0].clone();
    Ok((plan_path, vm))
}

enum Outcome {
    Checked,
    Skipped(String),
}

/// Plans `fixture`'s domain (its name and vCPU count, `policy` lines added to
/// the VM) on `host`, patches it, and checks (a) validation, (b) pins,
/// (c) bytes outside the pins.
fn check_fixture(
    work: &Path,
    fixture: &Path,
    host: &str,
    reserved_cores: u32,
    policy: &str,
    want_cells: bool,
) -> Result<Outcome, String> {
    let input = std::fs::read_to_string(fixture).unwrap();
    let input_pins = Pins::read(&input)?;
    let doc = roxmltree::Document::parse(&input).unwrap();
    let name = children(doc.root_element(), "name")
        .next()
        .and_then(|n| n.text())
        .ok_or("no <name>")?
        .trim()
        .to_owned();
    let vcpus: u32 = input_pins
        .vcpu_count
        .parse()
        .map_err(|e| format!("<vcpu> {:?}: {e}", input_pins.vcpu_count))?;
    let iothreads = input_pins
        .iothreads
        .as_deref()
        .map_or(0, |t| t.parse::<u32>().unwrap());
    let spec = format!(
        "[host]\nreserved_cores = {reserved_cores}\n\n[[vm]]\nname = {}\nvcpus = {vcpus}\niothreads = {iothreads}\n{policy}",
        toml_str(&name)
    );
    let (plan_path, vm) = match make_plan(work, host, &spec) {
        Ok(p) => p,
        Err(e) if e.contains("status: Some(1)") => {
            return Ok(Outcome::Skipped(format!(
                "{vcpus} vCPUs do not fit on {host}"
            )))
        }
        Err(e) => return Err(format!("plan failed:\n{e}")),
    };
    if want_cells && vm["guest_cells"].as_array().unwrap().len() < 2 {
        return Ok(Outcome::Skipped(format!(
            "the plan did not spread {vcpus} vCPUs over nodes"
        )));
    }
    let args = patch(&plan_path, fixture, &["--vm", &name]);
    let out = pinplan(&args);
    // A note (an element naming an I/O thread the domain lacks, removed) is
    // only for an input libvirt itself refuses.
    let refused_input = crate::libvirt_reads::define(fixture, &name).err();
    let only_notes = text(&out.stderr).lines().all(|l| l.starts_with("note: "));
    if out.status.code() != Some(0)
        || !only_notes
        || (!out.stderr.is_empty() && refused_input.is_none())
    {
        return Err(describe(&args, &out));
    }
    let output = text(&out.stdout);
    let out_path = work.join("patched.xml");
    std::fs::write(&out_path, &output).unwrap();
    let mut problems = Vec::new();
    // (a)
    if let Err(e) = validate(&out_path) {
        problems.push(format!("(a) the output does not validate: {e}"));
    }
    // (b)
    match Pins::read(&output) {
        Ok(got) => {
            // A domain that names its I/O threads keeps its ids (issue 31,
            // D3): which they are, libvirt's test driver says.
            let ids = input.contains("<iothreadids>").then(|| {
                let xml =
                    crate::libvirt_reads::define(fixture, &name).unwrap_or_else(|e| panic!("{e}"));
                crate::libvirt_reads::read(&xml).iothreadids
            });
            let mut want = Pins::expected(&input_pins, &vm, ids.as_ref());
            if !vm["guest_cells"].as_array().unwrap().is_empty() {
                want.cell_memory_kib.clone_from(&got.cell_memory_kib);
            }
            if let Some(d) = diff_pins(&got, &want) {
                problems.push(format!("(b) {d}"));
            }
            if !vm["guest_cells"].as_array().unwrap().is_empty() {
                // libvirt counts the cells' memory when a domain has cells
                // (`<memory>` adds memory devices, or is recomputed).
                let cells: u64 = input_pins.cell_memory_kib.iter().sum();
                let total = match cells {
                    0 => domain_memory_kib(&input).unwrap_or(0),
                    _ => cells,
                };
                let sum: u64 = got.cell_memory_kib.iter().sum();
                let n = got.cell_memory_kib.len() as u64;
                if got.cell_memory_kib.contains(&0) || sum > total || sum + n < total {
                    problems.push(format!(
                        "(b) guest NUMA cells' memory {:?} KiB (sum {sum}) but the domain has {total} KiB \
                         (the input's cells or, without them, <memory>)",
                        got.cell_memory_kib
                    ));
                }
            }
        }
        Err(e) => problems.push(format!("(b) cannot read the output: {e}")),
    }
    // (c) Every byte outside the pins is the input's, unless the patch
    // said it removed an element (of an input libvirt refuses).
    if out.stderr.is_empty() {
        if let Err(e) = same_outside_pins(&input, &output) {
            problems.push(format!("(c) {e}"));
        }
    }
    if problems.is_empty() {
        Ok(Outcome::Checked)
    } else {
        Err(format!(
            "{}\n  output: {}",
            problems.join("\n"),
            out_path.display()
        ))
    }
}

pub(crate) fn fixtures() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(fixture("libvirt-domains"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "xml"))
        .collect();
    v.sort();
    v
}

/// Test 1: every schema-valid fixture domain.
#[test]
fn fixture_domains_are_patched_losslessly() {
    let tmp = TempDir::new();
    // Kept for inspection of failures when set.
    let keep = std::env::var_os("PINPLAN_TEST_KEEP").is_some();
    let work_root = if keep {
        std::env::temp_dir().join(format!("pinplan-xml-fixtures-{}", std::process::id()))
    } else {
        tmp.root().to_owned()
    };
    let mut invalid = Vec::new();
    let mut checked = 0;
    let mut checked_spread = 0;
    let mut notes = Vec::new();
    let mut failures = Vec::new();
    for fixture in fixtures() {
        let file = fixture.file_name().unwrap().to_string_lossy().into_owned();
        if let Err(e) = validate(&fixture) {
            assert!(
                !e.contains("cannot run"),
                "virt-xml-validate is needed: {e}"
            );
            invalid.push(file);
            continue;
        }
        let stem = file.trim_end_matches(".xml");
        // Pass A: one NUMA node, the policy defaults (threads require,
        // emulator and I/O threads on the host's core).
        match check_fixture(
            &work_root.join(format!("{stem}-one-node")),
            &fixture,
            BIG_HOST,
            1,
            "",
            false,
        ) {
            Ok(Outcome::Checked) => checked += 1,
            Ok(Outcome::Skipped(why)) => notes.push(format!("{file}: skipped: {why}")),
            Err(e) => failures.push(format!("{file} on {BIG_HOST}:\n{e}")),
        }
        // Pass B: numa = "spread" on two nodes each too small for the VM, so
        // the plan has guest cells (vCPU counts from 6 up).
        let vcpus: u32 = Pins::read(&std::fs::read_to_string(&fixture).unwrap())
            .unwrap()
            .vcpu_count
            .parse()
            .unwrap();
        if vcpus >= 6 {
            let cores_needed = vcpus.div_ceil(2);
            let per_node = (cores_needed + 1).div_ceil(2);
            let host = format!("synthetic:package:2 numa:1 core:{per_node} pu:2");
            match check_fixture(
                &work_root.join(format!("{stem}-spread")),
                &fixture,
                &host,
                1,
                "numa = \"spread\"\n",
                true,
            ) {
                Ok(Outcome::Checked) => checked_spread += 1,
                Ok(Outcome::Skipped(why)) => {
                    notes.push(format!("{file}: spread pass skipped: {why}"));
                }
                Err(e) => failures.push(format!("{file} with numa = \"spread\" on {host}:\n{e}")),
            }
        }
    }
    eprintln!(
        "fixtures: {checked} patched and checked on one node, {checked_spread} with guest NUMA cells; \
         not schema-valid here (not used): {invalid:?}"
    );
    for n in &notes {
        eprintln!("note: {n}");
    }
    assert!(
        failures.is_empty(),
        "{} of the fixture checks failed:\n\n{}",
        failures.len(),
        failures.join("\n\n")
    );
    assert!(
        checked >= 60,
        "only {checked} fixtures checked (invalid: {invalid:?})"
    );
    assert!(checked_spread >= 20, "only {checked_spread} spread checks");
}

// ---------------------------------------------------------------------------
// Test 2: a hand-written domain, exact output.

/// The hand-written plan: one VM, `tab-vm`, 4 vCPUs on CPUs 1-2,11-12 (cores
/// 1 and 2 of a host whose siblings are n and n + 10), emulator and one I/O
/// thread on the host's 0,10.
fn tab_plan() -> PathBuf {
    fixture("inputs/tab-vm-plan.json")
}

/// The hand-written plan's VM.
fn tab_vm() -> Value {
    let plan: Value = serde_json::from_str(&fixture_text("inputs/tab-vm-plan.json")).unwrap();
    plan["vms"][0].clone()
}

/// A domain for the plan's VM in the style of a hand-edited file: tabs, double
/// quotes, comments, an entity, the qemu namespace, `<cputune>` children
/// pinplan does not own, a `host-passthrough` `<cpu>`, `<vcpu current>`.
fn tab_domain() -> String {
    fixture_text("inputs/tab-vm.xml")
}

/// Written by hand from the plan: `<vcpu>` gets placement and cpuset
/// (libvirt's attribute order, `current` kept), `<iothreads>` is added after
/// it, the pins replace the old ones where they were (vcpupin, emulatorpin,
/// iothreadpin: libvirt's order) in the document's tab indentation and
/// pinplan's single quotes, `<numatune>` follows `<cputune>`, `<topology>`
/// opens `<cpu>`; every other byte is the input's.
fn tab_expected() -> String {
    fixture_text("expected/tab-vm-patched.xml")
}

/// Shows the first differing line of two texts, with invisible characters.
fn first_difference(want: &str, got: &str) -> String {
    let w: Vec<&str> = want.split_inclusive('\n').collect();
    let g: Vec<&str> = got.split_inclusive('\n').collect();
    let i = w
        .iter()
        .zip(&g)
        .position(|(a, b)| a != b)
        .unwrap_or(w.len().min(g.len()));
    format!(
        "first difference at line {}:\n  want {:?}\n  got  {:?}\n--- got whole:\n{got}",
        i + 1,
        w.get(i),
        g.get(i)
    )
}

#[test]
fn hand_written_domain_keeps_every_other_byte() {
    let dir = TempDir::new();
    let plan = tab_plan();
    let domain = fixture("inputs/tab-vm.xml");
    let (tab_domain, tab_expected) = (tab_domain(), tab_expected());
    validate(&domain).expect("the hand-written input must be a valid domain");
    validate(&fixture("expected/tab-vm-patched.xml"))
        .expect("the hand-written expected output must be a valid domain");
    // Self-check of the byte-identity method of test 1: the hand-written
    // answer passes it, and a changed byte or quote outside the pins fails it.
    same_outside_pins(&tab_domain, &tab_expected).unwrap();
    for (from, to) in [
        ("<shares>2048", "<shares>2049"),
        ("scheduler=\"fifo\"", "scheduler='fifo'"),
        ("\t<clock", "  <clock"),
        ("&amp; rx", "&#38; rx"),
    ] {
        assert!(tab_expected.contains(from));
        let changed = tab_expected.replace(from, to);
        assert!(
            same_outside_pins(&tab_domain, &changed).is_err(),
            "the identity check misses {from:?} -> {to:?}"
        );
    }
    // The domain's name is the plan's VM: no --vm needed.
    let got = pinplan_ok(&patch(&plan, &domain, &[]));
    assert!(
        got == tab_expected,
        "{}",
        first_difference(&tab_expected, &got)
    );
    // --out writes the same bytes.
    let out_file = dir.path("patched.xml");
    let stdout = pinplan_ok(&patch(&plan, &domain, &["--out", s(&out_file)]));
    assert_eq!(stdout, "", "--out: nothing on stdout");
    assert_eq!(std::fs::read_to_string(&out_file).unwrap(), tab_expected);
    // Patching the patched domain again changes nothing.
    let again = pinplan_ok(&patch(&plan, &out_file, &[]));
    assert!(
        again == tab_expected,
        "patching twice: {}",
        first_difference(&tab_expected, &again)
    );
}

// ---------------------------------------------------------------------------
// Test 3: refusals.

/// A domain for the hand-written plan's VM, with `vcpus` vCPUs and `name`.
fn small_domain(name: &str, vcpu_tag: &str) -> String {
    format!(
        "<domain type='kvm'>
  <name>{name}</name>
  <memory unit='MiB'>64</memory>
  {vcpu_tag}
  <os>
    <type arch='x86_64' machine='pc'>hvm</type>
  </os>
  <devices>
    <emulator>/usr/bin/qemu-system-x86_64</emulator>
  </devices>
</domain>
"
    )
}

/// Runs `pinplan xml ARGS` and requires a refusal: exit 2, nothing on stdout,
/// stderr starting `error: `, naming `file` and either `file:LINE` or one of
/// `what`. Then again with `--out` to a new file (not created) and to an
/// existing one (unchanged), and no temporary file left behind. The message
/// must be snapshot `snapshot`.
fn refused(snapshot: &str, dir: &TempDir, args: &[&str], file: &Path, what: &[&str]) -> String {
    let out = pinplan(args);
    let err = text(&out.stderr);
    let ctx = describe(args, &out);
    assert_eq!(out.status.code(), Some(2), "{ctx}");
    assert!(out.stdout.is_empty(), "stdout must be empty: {ctx}");
    assert!(err.starts_with("error: "), "{ctx}");
    assert!(!err.contains("panicked"), "{ctx}");
    let first = err.lines().next().unwrap_or("");
    let file = file.display().to_string();
    assert!(
        first.contains(&file),
        "the error must name the file {file}: {ctx}"
    );
    let at_line = first
        .split(&file)
        .skip(1)
        .any(|rest| rest.starts_with(':') && rest[1..].starts_with(|c: char| c.is_ascii_digit()));
    // The path itself must not count as naming the element.
    let message = err.replace(&file, "FILE");
    assert!(
        at_line || what.iter().any(|w| message.contains(w)),
        "the error must give the line ({file}:N) or name one of {what:?}: {ctx}"
    );

    let sub = dir.path("out");
    let _ = std::fs::remove_dir_all(&sub);
    std::fs::create_dir_all(&sub).unwrap();
    let new_file = sub.join("new.xml");
    let existing = sub.join("existing.xml");
    std::fs::write(&existing, "sentinel\n").unwrap();
    for target in [&new_file, &existing] {
        let mut with_out: Vec<&str> = args.to_vec();
        with_out.extend(["--out", s(target)]);
        let out = pinplan(&with_out);
        let ctx = describe(&with_out, &out);
        assert_eq!(out.status.code(), Some(2), "{ctx}");
        assert!(out.stdout.is_empty(), "{ctx}");
        assert!(text(&out.stderr).starts_with("error: "), "{ctx}");
    }
    assert!(
        !new_file.exists(),
        "a refused --out file must not be created"
    );
    assert_eq!(std::fs::read_to_string(&existing).unwrap(), "sentinel\n");
    let left: Vec<_> = std::fs::read_dir(&sub)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left.len(), 1, "files left in the --out directory: {left:?}");
    insta::assert_snapshot!(snapshot, util::redact(&err));
    err
}

#[test]
fn refuses_a_file_that_is_not_xml() {
    let dir = TempDir::new();
    let plan = tab_plan();
    let f = dir.write("notes.txt", "this is not XML\njust some notes\n");
    refused("not-xml", &dir, &patch(&plan, &f, &[]), &f, &["<domain>"]);
    refused(
        "not-xml-with-vm",
        &dir,
        &patch(&plan, &f, &["--vm", "tab-vm"]),
        &f,
        &["<domain>"],
    );
    let empty = dir.write("empty.xml", "");
    refused(
        "empty-with-vm",
        &dir,
        &patch(&plan, &empty, &["--vm", "tab-vm"]),
        &empty,
        &["<domain>"],
    );
}

#[test]
fn refuses_xml_that_is_not_a_domain() {
    let dir = TempDir::new();
    let plan = tab_plan();
    let network = dir.write(
        "net.xml",
        "<network>\n  <name>tab-vm</name>\n  <bridge name='virbr9'/>\n</network>\n",
    );
    let caps = dir.copy(&fixture("libvirt-caps/caps-test.xml"), "caps.xml");
    for f in [&network, &caps] {
        let root = if f == &network {
            "network"
        } else {
            "capabilities"
        };
        let err = refused(
            &format!("{root}-with-vm"),
            &dir,
            &patch(&plan, f, &["--vm", "tab-vm"]),
            f,
            &["<domain>"],
        );
        assert!(err.contains(root), "the error should name <{root}>: {err}");
        refused(root, &dir, &patch(&plan, f, &[]), f, &["<domain>"]);
    }
}

#[test]
fn refuses_a_vcpu_mismatch_unless_set_vcpus() {
    let dir = TempDir::new();
    let plan = tab_plan();
    let input = small_domain("tab-vm", "<vcpu placement='static'>2</vcpu>");
    let f = dir.write("two.xml", &input);
    validate(&f).unwrap();
    let err = refused(
        "vcpu-mismatch",
        &dir,
        &patch(&plan, &f, &[]),
        &f,
        &["<vcpu>"],
    );
    assert!(
        err.contains(&format!("{}:4:", f.display())),
        "the <vcpu> is on line 4: {err}"
    );
    assert!(err.contains("--set-vcpus"), "{err}");
    // With --set-vcpus: the plan's count.
    let got = pinplan_ok(&patch(&plan, &f, &["--set-vcpus"]));
    validate_text(&dir, "set.xml", &got).unwrap();
    let pins = Pins::read(&got).unwrap();
    assert_eq!(pins.vcpu_count, "4", "{got}");
    let mut want = Pins::expected(&Pins::read(&input).unwrap(), &tab_vm(), None);
    want.vcpu_count = "4".to_owned();
    if let Some(d) = diff_pins(&pins, &want) {
        panic!("{d}\n{got}");
    }
    same_outside_pins(&input, &got).unwrap();
}

/// `--set-vcpus` lowering the count below `<vcpu current>`: libvirt refuses
/// such a domain ("maximum vCPU count must not be less than current vCPU
/// count"), so the output must not keep a `current` above the new count.
#[test]
fn set_vcpus_below_current_gives_a_definable_domain() {
    let dir = TempDir::new();
    let plan = tab_plan();
    let f = dir.write(
        "eight.xml",
        small_domain("tab-vm", "<vcpu placement='static' current='6'>8</vcpu>"),
    );
    validate(&f).unwrap();
    let got = pinplan_ok(&patch(&plan, &f, &["--set-vcpus"]));
    let pins = Pins::read(&got).unwrap();
    assert_eq!(pins.vcpu_count, "4");
    let current: u32 = pins
        .vcpu_other_attrs
        .get("current")
        .map_or(4, |c| c.parse().unwrap());
    assert!(
        current <= 4,
        "input {}: <vcpu current='6'>8</vcpu> patched with --set-vcpus to a 4-vCPU plan keeps current='{current}' > 4 \
         (libvirt: maximum vCPU count must not be less than current vCPU count):\n{got}",
        f.display()
    );
}

#[test]
fn refuses_a_domain_named_otherwise_unless_vm_is_given() {
    let dir = TempDir::new();
    let plan = tab_plan();
    let input = small_domain("other-vm", "<vcpu placement='static'>4</vcpu>");
    let f = dir.write("other.xml", &input);
    validate(&f).unwrap();
    let err = refused("other-name", &dir, &patch(&plan, &f, &[]), &f, &["<name>"]);
    assert!(err.contains("other-vm") && err.contains("tab-vm"), "{err}");
    // --vm names the plan's VM: patched.
    let got = pinplan_ok(&patch(&plan, &f, &["--vm", "tab-vm"]));
    validate_text(&dir, "named.xml", &got).unwrap();
    assert!(got.contains("<name>other-vm</name>"), "{got}");
    same_outside_pins(&input, &got).unwrap();
    let want = Pins::expected(&Pins::read(&input).unwrap(), &tab_vm(), None);
    if let Some(d) = diff_pins(&Pins::read(&got).unwrap(), &want) {
        panic!("{d}\n{got}");
    }
}

#[test]
fn refuses_a_vm_not_in_the_plan() {
    let dir = TempDir::new();
    let plan = tab_plan();
    let f = fixture("inputs/tab-vm.xml");
    let err = refused(
        "vm-not-in-plan",
        &dir,
        &patch(&plan, &f, &["--vm", "nosuch"]),
        &plan,
        &["\"nosuch\""],
    );
    assert!(err.contains("nosuch") && err.contains("tab-vm"), "{err}");
    // Also without --patch (the fragment).
    refused(
        "vm-not-in-plan-fragment",
        &dir,
        &["xml", "--plan", s(&plan), "--vm", "nosuch"],
        &plan,
        &["\"nosuch\""],
    );
}

#[test]
fn refuses_truncated_xml() {
    let dir = TempDir::new();
    let plan = tab_plan();
    // Cut inside <cputune> (line 9, in <period>).
    let tab_domain = tab_domain();
    let cut = tab_domain.find("000</period>").unwrap();
    let f = dir.write("cut.xml", &tab_domain[..cut]);
    let with_vm = refused(
        "truncated-with-vm",
        &dir,
        &patch(&plan, &f, &["--vm", "tab-vm"]),
        &f,
        &["truncated"],
    );
    assert!(
        with_vm.contains("truncated") || with_vm.contains("end"),
        "{with_vm}"
    );
    // Without --vm the domain's name is read first: the error must still say
    // that the file is cut short (not that it is no domain).
    let without = refused(
        "truncated",
        &dir,
        &patch(&plan, &f, &[]),
        &f,
        &["truncated"],
    );
    assert!(
        without.contains("truncated"),
        "input {} (a valid domain cut in <period>, line 9), without --vm: the error misdiagnoses it: {without}",
        f.display()
    );
}

#[test]
fn refuses_a_plan_that_is_not_a_plan() {
    let dir = TempDir::new();
    let f = fixture("inputs/tab-vm.xml");
    let json = dir.write("other.json", "{\n  \"vms\": 3\n}\n");
    let txt = dir.write("plan.txt", "not a plan\n");
    for (what, plan) in [
        ("plan-not-a-plan", &json),
        ("plan-text", &txt),
        ("plan-is-xml", &f),
    ] {
        refused(
            &format!("{what}-patch"),
            &dir,
            &patch(plan, &f, &["--vm", "tab-vm"]),
            plan,
            &["not a pinplan plan"],
        );
        refused(
            &format!("{what}-fragment"),
            &dir,
            &["xml", "--plan", s(plan)],
            plan,
            &["not a pinplan plan"],
        );
    }
    let missing = dir.path("missing.json");
    refused(
        "plan-missing",
        &dir,
        &patch(&missing, &f, &[]),
        &missing,
        &["cannot read"],
    );
}

// ---------------------------------------------------------------------------
// Test 4: fragments.

/// A minimal domain around `fragment` (after the <memory> line).
fn wrap_fragment(name: &str, fragment: &str) -> String {
    format!(
        "<domain type='kvm'>\n  <name>{name}</name>\n  <memory unit='MiB'>64</memory>\n{fragment}  <os>\n    <type arch='x86_64' machine='pc'>hvm</type>\n  </os>\n  <devices>\n    <emulator>/usr/bin/qemu-system-x86_64</emulator>\n  </devices>\n</domain>\n"
    )
}

#[test]
fn fragments_validate_inside_a_domain() {
    let dir = TempDir::new();
    let out_dir = dir.path("lab");
    let args = ["plan", "examples/lab/b1.toml", "--out", s(&out_dir)];
    pinplan_ok(&args);
    let plan_path = out_dir.join("plan.json");
    let plan: Value = serde_json::from_str(&std::fs::read_to_string(&plan_path).unwrap()).unwrap();
    let mut files = 0;
    for vm in plan["vms"].as_array().unwrap() {
        let name = vm["name"].as_str().unwrap();
        let printed = pinplan_ok(&["xml", "--plan", s(&plan_path), "--vm", name]);
        // vm1 names a domain_xml in the lab spec: plan --out patches that
        // instead of writing a fragment (checked in its own test).
        let fragment_file = out_dir.join(format!("{name}.fragment.xml"));
        if fragment_file.exists() {
            let written = std::fs::read_to_string(&fragment_file).unwrap();
            assert_eq!(printed, written, "xml --vm {name} and plan --out disagree");
        } else {
            assert!(
                out_dir.join(format!("{name}.xml")).exists(),
                "plan --out wrote nothing for {name}"
            );
        }
        files += 1;
        let domain = wrap_fragment(name, &printed);
        validate_text(&dir, &format!("{name}-wrapped.xml"), &domain)
            .unwrap_or_else(|e| panic!("{e}\n{domain}"));
        let pins = Pins::read(&domain).unwrap();
        let mut input = Pins::read(&wrap_fragment(
            name,
            &format!("  <vcpu>{}</vcpu>\n", vm["vcpus"].as_array().unwrap().len()),
        ))
        .unwrap();
        input.vcpu_other_attrs.clear();
        if let Some(d) = diff_pins(&pins, &Pins::expected(&input, vm, None)) {
            panic!("fragment of {name}: {d}\n{printed}");
        }
    }
    assert_eq!(files, 2, "the lab plan places vm1 and vm2");
    // vm1's patched domain (spec domain_xml = "vm1.xml") validates too.
    let patched = std::fs::read_to_string(out_dir.join("vm1.xml")).unwrap();
    validate_text(&dir, "vm1-patched.xml", &patched).unwrap_or_else(|e| panic!("{e}\n{patched}"));
    // Every fragment file of the directory, whatever its VM.
    for e in std::fs::read_dir(&out_dir).unwrap() {
        let p = e.unwrap().path();
        let n = p.file_name().unwrap().to_string_lossy().into_owned();
        if let Some(vm) = n.strip_suffix(".fragment.xml") {
            let domain = wrap_fragment(vm, &std::fs::read_to_string(&p).unwrap());
            validate_text(&dir, &format!("{vm}-file.xml"), &domain)
                .unwrap_or_else(|e| panic!("{n}: {e}\n{domain}"));
        }
    }
    // The only VM of a plan needs no --vm.
    let fragment = pinplan_ok(&["xml", "--plan", s(&tab_plan())]);
    validate_text(&dir, "tab-wrapped.xml", &wrap_fragment("tab-vm", &fragment)).unwrap();
}

// ---------------------------------------------------------------------------
// Test 5: a live libvirtd.

#[test]
fn live_libvirt_define_patched_domain() {
    let Some(uri) = util::libvirt_uri("not testing against libvirt") else {
        return;
    };
    let _turn = crate::util::live_guests_turn();
    let virsh = |args: &[&str]| util::virsh(&uri, args);
    virsh(&["version"]);
    let name = format!("pinplan-xmltest-{}", std::process::id());
    let dir = TempDir::new();
    // A 1-vCPU guest: on a 2-CPU host without SMT the host keeps core 0 (the
    // emulator runs there) and the vCPU gets core 1.
    let domain = util::guest_xml(util::guest_type(&uri), &name, 1, "");
    let dom_path = dir.write("domain.xml", &domain);
    validate(&dom_path).unwrap();
    virsh(&["define", s(&dom_path)]);
    let _guard = Guests {
        uri: uri.clone(),
        names: vec![name.clone()],
    };
    let spec = format!(
        "[host]\nreserved_cores = 1\n\n[[vm]]\nname = {}\nvcpus = 1\nthreads = \"prefer\"\nemulator = \"host\"\n",
        toml_str(&name)
    );
    let (plan_path, vm) = make_plan(&dir.path("plan"), "host", &spec).unwrap();
    let patched = pinplan_ok(&[
        "xml",
        "--plan",
        s(&plan_path),
        "--connect",
        &uri,
        "--vm",
        &name,
    ]);
    let patched_path = dir.write("patched.xml", &patched);
    validate(&patched_path).unwrap();
    let before = virsh(&["dumpxml", "--inactive", &name]);
    same_outside_pins(&before, &patched)
        .unwrap_or_else(|e| panic!("--connect output vs virsh dumpxml --inactive: {e}"));
    virsh(&["define", s(&patched_path)]);
    let after = virsh(&["dumpxml", "--inactive", &name]);
    let got = Pins::read(&after).unwrap();
    let want = Pins::expected(&Pins::read(&before).unwrap(), &vm, None);
    if let Some(d) = diff_pins(&got, &want) {
        panic!("after virsh define, dumpxml --inactive: {d}\n{after}");
    }
    let cpu = vm["vcpus"][0]["cpu"].as_u64().unwrap();
    assert!(
        after.contains(&format!("<vcpupin vcpu='0' cpuset='{cpu}'/>")),
        "{after}"
    );
    let emu = vm["emulator_cpus"].as_str().unwrap();
    assert!(!emu.is_empty(), "the plan pins the emulator: {vm}");
    assert!(
        after.contains(&format!("<emulatorpin cpuset='{emu}'/>")),
        "{after}"
    );
    // `--connect` without --vm: the plan's only VM.
    let again = pinplan_ok(&["xml", "--plan", s(&plan_path), "--connect", &uri]);
    let again_pins = Pins::read(&again).unwrap();
    assert_eq!(again_pins.vcpupin, got.vcpupin);
}

// Plans on real machines' topologies: every file `plan --out` writes validates.

#[test]
fn plans_on_fixture_hosts_write_valid_xml() {
    let dir = TempDir::new();
    let fixtures = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures");
    // (host, a VM set that fits it): siblings N+28, N+192, SMT4, 8 NUMA nodes,
    // a libvirt capabilities host.
    let hosts = [
        ("hwloc-xml/x86-Intel-Broadwell-2xXeon-E5-2650Lv4.xml", 4),
        ("hwloc-xml/192em64t-24n8c2t.xml", 6),
        ("hwloc-xml/gen29-256ppc-8n8s4t.xml", 4),
        ("hwloc-xml/x86-AMD-17h-Zen-2xEpyc-7451.xml", 6),
        ("libvirt-caps/caps-qemu-kvm.xml", 3),
    ];
    let domain = |name: &str, vcpus: usize| {
        format!(
            "<domain type='kvm'>\n  <name>{name}</name>\n  <memory unit='MiB'>1024</memory>\n  <vcpu placement='static'>{vcpus}</vcpu>\n  <os>\n    <type arch='x86_64' machine='pc'>hvm</type>\n  </os>\n  <devices>\n    <emulator>/usr/bin/qemu-system-x86_64</emulator>\n  </devices>\n</domain>\n"
        )
    };
    let mut validated = 0;
    for (i, (host, vms)) in hosts.iter().enumerate() {
        let work = dir.path(&format!("h{i}"));
        std::fs::create_dir_all(&work).unwrap();
        let mut spec =
            String::from("[host]\nreserved_cores = 1\n\n[defaults]\nthreads = \"prefer\"\n");
        for v in 0..*vms {
            let vcpus = 2 + 2 * v;
            let name = format!("vm{v}");
            let numa = if v == 0 { "spread" } else { "preferred" };
            // Half the VMs come with a domain to patch, half as fragments.
            let domain_line = if v % 2 == 0 {
                std::fs::write(work.join(format!("{name}.xml")), domain(&name, vcpus)).unwrap();
                format!("domain_xml = \"{name}.xml\"\n")
            } else {
                String::new()
            };
            spec.push_str(&format!(
                "\n[[vm]]\nname = \"{name}\"\nvcpus = {vcpus}\nnuma = \"{numa}\"\niothreads = {}\n{domain_line}",
                v % 2
            ));
        }
        let source = format!("{fixtures}/{host}");
        let (plan_path, _) =
            make_plan(&work, &source, &spec).unwrap_or_else(|e| panic!("{host}: {e}"));
        let out_dir = plan_path.parent().unwrap().to_path_buf();
        for e in std::fs::read_dir(&out_dir).unwrap() {
            let p = e.unwrap().path();
            let n = p.file_name().unwrap().to_string_lossy().into_owned();
            let text = std::fs::read_to_string(&p).unwrap();
            let whole = if let Some(vm) = n.strip_suffix(".fragment.xml") {
                wrap_fragment(vm, &text)
            } else if n.ends_with(".xml") {
                text
            } else {
                continue;
            };
            validate_text(&dir, &format!("h{i}-{n}"), &whole)
                .unwrap_or_else(|e| panic!("{host} {n}: {e}\n{whole}"));
            validated += 1;
        }
    }
    assert!(validated >= 20, "only {validated} files validated");
}

/// Issue 14, defect 8: input that is not well-formed XML (a duplicate
/// attribute, an undefined entity, a character reference XML cannot hold) is
/// refused with its line, exit 2, instead of being patched into malformed
/// output; `report` refuses the same files.
#[test]
fn malformed_domains_are_patched_into_malformed_output_no_more() {
    let dir = TempDir::new();
    let good = tab_domain();
    let plan = tab_plan();
    let cases = [
        (
            "dup-attr.xml",
            good.replacen("<domain ", "<domain id='1' id='2' ", 1),
            1,
            "already defined",
        ),
        (
            "entity.xml",
            good.replacen("<name>tab-vm</name>", "<name>tab-vm&x;</name>", 1),
            2,
            "unknown entity &x;",
        ),
        (
            "charref.xml",
            good.replacen("<name>tab-vm</name>", "<name>tab-vm&#x110000;</name>", 1),
            2,
            "&#x110000;",
        ),
    ];
    for (name, xml, line, why) in cases {
        assert_ne!(xml, good, "test bug: {name} is unchanged");
        let domain = dir.write(name, &xml);
        let args = patch(&plan, &domain, &[]);
        let out = pinplan(&args);
        assert_eq!(out.status.code(), Some(2), "{}", describe(&args, &out));
        assert!(out.stdout.is_empty(), "{name}: output written");
        let stderr = text(&out.stderr);
        assert!(
            stderr.contains(&format!("{}:{line}:", s(&domain))),
            "{name}: {stderr}"
        );
        assert!(stderr.contains(why), "{name}: {stderr}");
        let args = [
            "report",
            "--domains",
            s(&domain),
            "--source",
            BIG_HOST,
            "--host-cpus",
            "0",
        ];
        let out = pinplan(args);
        assert_eq!(out.status.code(), Some(2), "{}", describe(&args, &out));
    }
}
