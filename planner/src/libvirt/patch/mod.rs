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
//! `<iothreads>`), `cputune.rs`, `numatune.rs`, `memory.rs`, `cpu.rs`.

mod cpu;
mod cputune;
mod doc;
mod memory;
mod numatune;
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

    /// The domain with the pins of `vm`.
    pub fn patch(&self, vm: &VmPlan, options: &PatchOptions) -> Result<String, PatchError> {
        let (doc, root) = (&self.doc, self.root);
        check_name(doc, root, vm, options)?;
        let (vcpu, mut splices) = vcpu::rewrite(doc, root, vm, options)?;
        // Where a new <cputune> goes, and what comes after it when it is new.
        let anchor = vcpu::cputune_anchor(doc, root, vcpu);
        // In this order: of two insertions at one offset, the first goes first.
        splices.extend(vcpu::iothreads(doc, root, vcpu, vm));
        splices.extend(cputune::rewrite(doc, root, anchor, vm));
        splices.extend(numatune::rewrite(doc, root, anchor, vm));
        splices.extend(memory::rewrite(doc, root, anchor, vm));
        splices.extend(cpu::rewrite(doc, root, anchor, vm)?);
        let patched = doc.apply(splices)?;
        // Never hand out XML that does not parse, whatever went wrong.
        well_formed(doc.source_name, &patched).map_err(|e| PatchError {
            message: format!("the patched domain would not be well-formed XML ({}): please report this with the input", e.message),
            ..e
        })?;
        Ok(patched)
    }

    /// The domain with only the plan's memory placement (`<numatune>`,
    /// `<memoryBacking><hugepages>`, `<memory>`): what `apply` writes to a
    /// config, whose pins it sets through libvirt's calls.
    pub fn patch_memory(&self, vm: &VmPlan) -> Result<String, PatchError> {
        let (doc, root) = (&self.doc, self.root);
        let vcpu = doc.child(root, "vcpu").ok_or_else(|| {
            doc.error(
                doc.nodes[root].start,
                "vcpu",
                "the domain has no <vcpu>".to_owned(),
            )
        })?;
        let anchor = vcpu::cputune_anchor(doc, root, vcpu);
        let mut splices = numatune::rewrite(doc, root, anchor, vm)
            .into_iter()
            .collect::<Vec<_>>();
        splices.extend(memory::rewrite(doc, root, anchor, vm));
        let patched = doc.apply(splices)?;
        well_formed(doc.source_name, &patched)?;
        Ok(patched)
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
) -> Result<String, PatchError> {
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
