//! Lossless patching of an existing domain XML: replace or insert only the
//! pinning elements (`<vcpu>`'s attributes, `<iothreads>`, the pins inside
//! `<cputune>`, `<numatune>`, `<hugepages>` inside `<memoryBacking>`,
//! `<topology>`, `<cache>`, the `topoext` feature, `<numa>` and its cells'
//! `<distances>` inside `<cpu>`, and `<cpu>`'s mode when it has none) and
//! copy every other byte of the input unchanged — comments, quoting,
//! namespaces, entity references, indentation, and `<cputune>` children we do
//! not own (`<shares>`, `<period>`, `<vcpusched>`, `<cachetune>`…).
//!
//! It works on byte spans: a quick-xml pass records where each element starts
//! and ends (`xmldoc::spans`); edits are splices of those spans, applied from
//! the end (`doc.rs`). Each element's rewrite has its file: `vcpu.rs` (with
//! `<iothreads>`), `cputune.rs`, `numatune.rs`, `memory.rs`, `cpu.rs`; the
//! plan's I/O threads take the domain's own ids first (`iothreads.rs`).

mod cpu;
mod cputune;
mod doc;
mod iothreads;
mod memory;
mod numatune;
mod refs;
mod vcpu;

use crate::plan::VmPlan;
use crate::xmldoc::{spans, Problem, XmlError};
use doc::Doc;

/// Why a domain could not be patched.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{source_name}:{line}: {message}")]
pub struct PatchError {
    /// The file (or `URI/domain`).
    pub source_name: String,
    /// 1-based line.
    pub line: usize,
    /// The element at fault (`domain`, `vcpu`, `name`).
    pub element: String,
    /// What is wrong and what to do.
    pub message: String,
    /// The domain's vCPU count and the plan's, when they differ and the
    /// count may not be changed (`--set-vcpus`).
    pub vcpu_counts: Option<(usize, usize)>,
}

impl crate::error::Diagnostic for PatchError {}

/// A patched domain, and what the patch changed beyond the pins that the
/// user should know: elements trimmed or removed with the vCPUs or I/O
/// threads they named, huge pages that change size (one line each, without
/// the file's name).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Patched {
    /// The domain XML.
    pub text: String,
    /// What else changed, in words.
    pub notes: Vec<String>,
}

/// Options for [`patch`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PatchOptions {
    /// Replace the domain's vCPU count with the plan's instead of refusing.
    pub set_vcpus: bool,
    /// The VM was named explicitly (`--vm`): a different domain name is fine.
    pub name_given: bool,
}

/// Why the spans of a domain XML cannot be read (not XML, truncated).
fn scan_error(source_name: &str, e: XmlError) -> PatchError {
    let (line, element, message) = match e.problem {
        Problem::Truncated { open, .. } => {
            let message = format!("the document ends inside <{open}>: it is truncated");
            (e.line, open, message)
        }
        Problem::SecondRoot(_) => (
            e.line,
            String::new(),
            "more than one root element".to_owned(),
        ),
        Problem::NoElement => (
            1,
            String::new(),
            "no XML element: this is not a domain XML".to_owned(),
        ),
        other => (e.line, String::new(), other.to_string()),
    };
    PatchError {
        source_name: source_name.to_owned(),
        line,
        element,
        message,
        vcpu_counts: None,
    }
}

/// The document of a domain XML and the index of its `<domain>` root;
/// errors name the file and line (not XML, truncated, not a domain).
fn read<'a>(source_name: &'a str, text: &'a str) -> Result<(Doc<'a>, usize), PatchError> {
    let nodes = spans::scan(text).map_err(|e| scan_error(source_name, e))?;
    let doc = Doc::new(source_name, text, nodes);
    // The scan puts the one root element first.
    let root = 0;
    let name = &doc.nodes[root].name;
    if name != "domain" {
        return Err(doc.error(
            doc.nodes[root].start,
            name,
            format!(
                "the root element is <{name}>, not <domain>: give a libvirt domain XML (virsh dumpxml --inactive NAME)"
            ),
        ));
    }
    // The document must be well-formed XML as a whole (the span scan only
    // sees elements): otherwise the patched output would not be either.
    well_formed(source_name, text)?;
    Ok((doc, root))
}

/// A domain XML read and checked once (span scan, well-formedness), to be
/// named and patched without reading it again.
pub struct Domain<'a> {
    doc: Doc<'a>,
    root: usize,
}

impl<'a> Domain<'a> {
    /// Reads `text`; errors name `source_name` and the line (not XML,
    /// truncated, not a domain).
    pub fn read(source_name: &'a str, text: &'a str) -> Result<Domain<'a>, PatchError> {
        let (doc, root) = read(source_name, text)?;
        Ok(Domain { doc, root })
    }

    /// Where it came from, for messages.
    pub fn source_name(&self) -> &str {
        self.doc.source_name
    }

    /// The domain's `<name>` and its line.
    pub fn name(&self) -> Result<(String, usize), PatchError> {
        let (doc, root) = (&self.doc, self.root);
        let name = doc.child(root, "name").ok_or_else(|| {
            doc.error(
                doc.nodes[root].start,
                "name",
                "the domain has no <name>".to_owned(),
            )
        })?;
        Ok((doc.inner_text(name).trim().to_owned(), doc.line(name)))
    }

    /// The domain with the pins of `vm`; every element that names a vCPU,
    /// guest cell or I/O thread kept valid (`refs.rs`), or refused.
    pub fn patch(&self, vm: &VmPlan, options: &PatchOptions) -> Result<Patched, PatchError> {
        let (doc, root) = (&self.doc, self.root);
        check_name(doc, root, vm, options)?;
        // The plan's I/O threads under the domain's own ids.
        let vm = &*iothreads::renumbered(doc, root, vm)?;
        let mut notes = Vec::new();
        let (vcpu, mut splices) = vcpu::rewrite(doc, root, vm, options)?;
        splices.extend(refs::vcpus(doc, root, vm, &mut notes)?);
        splices.extend(refs::iothreads(doc, root, vm, &mut notes)?);
        refs::cells(doc, root, vm)?;
        // Where a new <cputune> goes, and what comes after it when it is new.
        let anchor = vcpu::cputune_anchor(doc, root, vcpu);
        // In this order: of two insertions at one offset, the first goes first.
        splices.extend(vcpu::iothreads(doc, root, vcpu, vm));
        splices.extend(cputune::rewrite(doc, root, anchor, vm));
        splices.extend(numatune::rewrite(doc, root, anchor, vm));
        splices.extend(memory::rewrite(doc, root, anchor, vm, &mut notes));
        splices.extend(cpu::rewrite(doc, root, anchor, vm)?);
        let text = doc.apply(splices)?;
        // Never hand out XML that does not parse, whatever went wrong.
        well_formed(doc.source_name, &text).map_err(|e| PatchError {
            message: format!("the patched domain would not be well-formed XML ({}): please report this with the input", e.message),
            ..e
        })?;
        Ok(Patched { text, notes })
    }

    /// The domain with only the plan's memory placement (`<numatune>`,
    /// `<memoryBacking><hugepages>`, `<memory>`, and the guest NUMA cells
    /// its `<memnode>`s name): what `apply` writes to a config, whose pins it
    /// sets through libvirt's calls.
    pub fn patch_memory(&self, vm: &VmPlan) -> Result<Patched, PatchError> {
        let (doc, root) = (&self.doc, self.root);
        let anchor = vcpu::cputune_anchor(doc, root, vcpu::place(doc, root)?);
        refs::cells(doc, root, vm)?;
        let mut notes = Vec::new();
        let mut splices = numatune::rewrite(doc, root, anchor, vm)
            .into_iter()
            .collect::<Vec<_>>();
        splices.extend(memory::rewrite(doc, root, anchor, vm, &mut notes));
        splices.extend(cpu::cells_only(doc, root, anchor, vm)?);
        let text = doc.apply(splices)?;
        well_formed(doc.source_name, &text)?;
        Ok(Patched { text, notes })
    }
}

/// Refuses a domain named otherwise than the plan's VM, unless the VM was
/// named explicitly.
fn check_name(
    doc: &Doc,
    root: usize,
    vm: &VmPlan,
    options: &PatchOptions,
) -> Result<(), PatchError> {
    let node = doc.child(root, "name");
    let name = node.map(|n| doc.inner_text(n).trim()).unwrap_or_default();
    if name == vm.name || options.name_given {
        return Ok(());
    }
    Err(doc.error(
        doc.nodes[node.unwrap_or(root)].start,
        "name",
        format!(
            "the domain is named {name:?} but the plan's VM is {:?}: pass --vm {} to patch it anyway",
            vm.name, vm.name
        ),
    ))
}

/// Patches `domain_xml` with the pins of `vm`. `source_name` names the input
/// in errors.
pub fn patch(
    source_name: &str,
    domain_xml: &str,
    vm: &VmPlan,
    options: &PatchOptions,
) -> Result<Patched, PatchError> {
    Domain::read(source_name, domain_xml)?.patch(vm, options)
}

/// `text` parses as a whole XML document; else the error at its line.
fn well_formed(source_name: &str, text: &str) -> Result<(), PatchError> {
    crate::xmldoc::parse(text)
        .map(drop)
        .map_err(|e| PatchError {
            source_name: source_name.to_owned(),
            line: e.line,
            element: "domain".to_owned(),
            message: format!("column {}: {}", e.column, e.problem),
            vcpu_counts: None,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// VM `vm`: vCPU i on CPU i + 2 (CPUs 2…), emulator on CPU 0, `iothreads`
    /// I/O threads numbered from 1 as a plan numbers them, on CPU 1.
    fn vm(vcpus: u32, iothreads: u32) -> VmPlan {
        let pins: Vec<String> = (0..vcpus)
            .map(|v| format!("{{\"vcpu\": {v}, \"cpu\": {}}}", v + 2))
            .collect();
        let io: Vec<String> = (1..=iothreads)
            .map(|i| format!("{{\"iothread\": {i}, \"cpus\": \"1\"}}"))
            .collect();
        let json = format!(
            "{{\"name\": \"vm\", \"vcpus\": [{}], \"cores\": [], \"cpus\": \"2-{}\",
              \"emulator_cpus\": \"0\", \"iothreads\": [{}], \"numa_nodes\": [],
              \"guest_cells\": [], \"guest_topology\": {{\"sockets\": 1, \"cores\": {vcpus}, \"threads\": 1}},
              \"threads\": \"require\", \"demand\": null}}",
            pins.join(", "),
            vcpus + 1,
            io.join(", ")
        );
        serde_json::from_str(&json).unwrap_or_else(|e| panic!("{e}: {json}"))
    }

    fn patched(domain: &str, vm: &VmPlan, set_vcpus: bool) -> Result<String, PatchError> {
        let options = PatchOptions {
            set_vcpus,
            name_given: false,
        };
        patch("d.xml", domain, vm, &options).map(|p| p.text)
    }

    #[test]
    fn a_domain_without_vcpu_gets_one_where_libvirt_writes_it() -> Result<(), PatchError> {
        let domain = "<domain type='kvm'>\n  <name>vm</name>\n  <memory unit='KiB'>65536</memory>\n  <os>\n    <type>hvm</type>\n  </os>\n</domain>\n";
        // libvirt counts 1 vCPU: a plan of 1 needs no --set-vcpus. <vcpu>
        // goes after <memory> (libvirt writes memory before vcpu), then the
        // new <cputune>; the guest topology goes in a new <cpu> after the
        // last element; the rest is the input's, byte for byte.
        let want = "<domain type='kvm'>\n  <name>vm</name>\n  <memory unit='KiB'>65536</memory>\n  <vcpu placement='static' cpuset='2'>1</vcpu>\n  <cputune>\n    <vcpupin vcpu='0' cpuset='2'/>\n    <emulatorpin cpuset='0'/>\n  </cputune>\n  <os>\n    <type>hvm</type>\n  </os>\n  <cpu>\n    <topology sockets='1' dies='1' cores='1' threads='1'/>\n  </cpu>\n</domain>\n";
        assert_eq!(patched(domain, &vm(1, 0), false)?, want);
        // Two planned: the domain's 1 vCPU is a count to change.
        let refused = patched(domain, &vm(2, 0), false).err();
        assert_eq!(
            refused.as_ref().map(|e| (e.line, e.vcpu_counts)),
            Some((1, Some((1, 2)))),
            "{refused:?}"
        );
        assert!(refused.is_some_and(|e| e
            .message
            .starts_with("the domain has 1 vCPU but the plan gives vm 2")),);
        let two = patched(domain, &vm(2, 0), true)?;
        assert!(
            two.contains("<memory unit='KiB'>65536</memory>\n  <vcpu placement='static' cpuset='2-3'>2</vcpu>\n"),
            "{two}"
        );
        Ok(())
    }

    #[test]
    fn iothread_pins_name_the_domains_own_ids() -> Result<(), PatchError> {
        let with_ids = |count: u32, ids: &[u32]| {
            let ids: String = ids
                .iter()
                .map(|i| format!("<iothread id='{i}'/>"))
                .collect();
            format!("<domain><name>vm</name><vcpu>1</vcpu><iothreads>{count}</iothreads><iothreadids>{ids}</iothreadids></domain>")
        };
        let pins = |xml: &str| -> Vec<String> {
            xml.match_indices("<iothreadpin iothread='")
                .map(|(at, m)| {
                    let rest = &xml[at + m.len()..];
                    rest[..rest.find('\'').unwrap_or(0)].to_owned()
                })
                .collect()
        };
        // (domain count, its listed ids, planned I/O threads, the ids pinned):
        // the ids libvirt gives the domain with the plan's count.
        for (count, ids, planned, want) in [
            // generic-iothreadids: the one I/O thread is 8, not 1.
            (1, vec![8], 1, vec!["8"]),
            // qemu-iothreads-ids-partial: 5 and 6 listed, 1 and 2 filled.
            (4, vec![5, 6], 4, vec!["1", "2", "5", "6"]),
            // One more planned than the domain has: libvirt fills 1.
            (1, vec![8], 2, vec!["1", "8"]),
            // None listed: the plan's own numbers.
            (0, vec![], 2, vec!["1", "2"]),
        ] {
            let out = patched(&with_ids(count, &ids), &vm(1, planned), false)?;
            assert_eq!(pins(&out), want, "{count} {ids:?} {planned}: {out}");
            let written = format!("<iothreads>{planned}</iothreads>");
            assert!(out.contains(&written), "{out}");
        }
        // Two named, one planned: libvirt would keep both, one unpinned.
        let refused = patched(&with_ids(2, &[2, 4]), &vm(1, 1), false).err();
        assert!(
            refused.as_ref().is_some_and(|e| e.message.starts_with(
                "the domain names 2 I/O threads in <iothreadids> (2, 4) but the plan gives vm 1"
            )),
            "{refused:?}"
        );
        let bad = patched(&with_ids(1, &[0]), &vm(1, 1), false).err();
        assert_eq!(bad.map(|e| e.element), Some("iothread".to_owned()));
        Ok(())
    }
}
