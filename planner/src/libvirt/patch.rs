//! Lossless patching of an existing domain XML: replace or insert only the
//! pinning elements (`<vcpu>`'s attributes, `<iothreads>`, the pins inside
//! `<cputune>`, `<numatune>`, `<topology>` and `<numa>` inside `<cpu>`) and
//! copy every other byte of the input unchanged — comments, quoting,
//! namespaces, entity references, indentation, and `<cputune>` children we do
//! not own (`<shares>`, `<period>`, `<vcpusched>`, `<cachetune>`…).
//!
//! It works on byte spans: a quick-xml pass records where each element starts
//! and ends; edits are splices of those spans, applied from the end.

use super::emit;
use crate::plan::VmPlan;
use crate::text::line_col;
use crate::xmldoc::spans::{self, Span as Node};
use crate::xmldoc::Problem;
use quick_xml::events::Event;
use quick_xml::Reader;

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
}

/// Options for [`patch`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PatchOptions {
    /// Replace the domain's vCPU count with the plan's instead of refusing.
    pub set_vcpus: bool,
    /// The VM was named explicitly (`--vm`): a different domain name is fine.
    pub name_given: bool,
}

/// The element spans of `text`, or why it has none (not XML, truncated).
fn scan(source_name: &str, text: &str) -> Result<Vec<Node>, PatchError> {
    spans::scan(text).map_err(|e| {
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
        }
    })
}

/// The attributes of a start tag, unescaped, in document order.
fn attributes(tag: &str) -> Vec<(String, String)> {
    let mut reader = Reader::from_str(tag);
    match reader.read_event() {
        Ok(Event::Start(e) | Event::Empty(e)) => e
            .attributes()
            .flatten()
            .map(|a| {
                let value = a
                    .normalized_value(quick_xml::XmlVersion::Implicit1_0)
                    .map(|v| v.into_owned())
                    .unwrap_or_else(|_| a.value.clone().into_owned());
                (a.key.as_ref().to_owned(), value)
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// `<name` with `set` first (in that order), then the tag's other attributes
/// as they were (re-quoted with single quotes), then `>` (or `/>`).
fn rewrite_start_tag(name: &str, tag: &str, set: &[(&str, String)], empty: bool) -> String {
    let mut out = format!("<{name}");
    for (k, v) in set {
        out.push_str(&format!(" {k}='{}'", emit::attr(v)));
    }
    for (k, v) in attributes(tag) {
        if !set.iter().any(|(s, _)| *s == k) {
            out.push_str(&format!(" {k}='{}'", emit::attr(&v)));
        }
    }
    out.push_str(if empty { "/>" } else { ">" });
    out
}

/// KiB in a libvirt scaled amount (`unit` defaults to KiB).
fn kib(amount: &str, unit: Option<&str>) -> u64 {
    let amount: u64 = amount.trim().parse().unwrap_or(0);
    let bytes = crate::topology::unit_bytes(unit.unwrap_or("KiB")).unwrap_or(1024);
    amount.saturating_mul(bytes) / 1024
}

/// A pending edit: replace `start..end` with `text`.
struct Splice {
    start: usize,
    end: usize,
    text: String,
}

/// The whitespace that precedes `offset` on its line (the element's indentation).
fn indent_before(text: &str, offset: usize) -> String {
    let line_start = text[..offset].rfind('\n').map_or(0, |i| i + 1);
    let prefix = &text[line_start..offset];
    if prefix.chars().all(|c| c == ' ' || c == '\t') {
        prefix.to_owned()
    } else {
        String::new()
    }
}

/// Start of the line holding `offset` when only whitespace precedes it there
/// (so that removing an element removes its line), else `offset`.
fn line_start_if_blank(text: &str, offset: usize) -> usize {
    let line_start = text[..offset].rfind('\n').map_or(0, |i| i + 1);
    if text[line_start..offset]
        .chars()
        .all(|c| c == ' ' || c == '\t')
    {
        line_start
    } else {
        offset
    }
}

/// End of the line after `offset` (including the newline) when only
/// whitespace follows there, else `offset`.
fn line_end_if_blank(text: &str, offset: usize) -> usize {
    let rest = &text[offset..];
    let end = rest.find('\n').map_or(rest.len(), |i| i + 1);
    if rest[..end].trim().is_empty() {
        offset + end
    } else {
        offset
    }
}

struct Doc<'a> {
    text: &'a str,
    nodes: Vec<Node>,
    /// Indentation step of the document (from the root's first child).
    unit: String,
}

impl Doc<'_> {
    fn child(&self, parent: usize, name: &str) -> Option<usize> {
        self.nodes[parent]
            .children
            .iter()
            .copied()
            .find(|&c| self.nodes[c].name == name)
    }

    fn inner_text(&self, node: usize) -> &str {
        let n = &self.nodes[node];
        &self.text[n.start_tag_end..n.end_tag_start]
    }

    fn indent_of(&self, node: usize) -> String {
        indent_before(self.text, self.nodes[node].start)
    }

    /// Lines `children` as a block that closes at `indent`, each child one
    /// step deeper.
    fn block(&self, open: &str, children: &[String], close: &str, indent: &str) -> String {
        let mut s = String::from(open);
        for c in children {
            s.push('\n');
            s.push_str(indent);
            s.push_str(&self.unit);
            s.push_str(c);
        }
        s.push('\n');
        s.push_str(indent);
        s.push_str(close);
        s
    }
}

/// Inserts `element` (already indented for its first line) after `node`.
fn insert_after(doc: &Doc, node: usize, element: &str) -> Splice {
    let at = doc.nodes[node].end;
    let indent = doc.indent_of(node);
    Splice {
        start: at,
        end: at,
        text: format!("\n{indent}{element}"),
    }
}

/// Inserts `element` before `node`, on its own line.
fn insert_before(doc: &Doc, node: usize, element: &str) -> Splice {
    let at = doc.nodes[node].start;
    let indent = doc.indent_of(node);
    Splice {
        start: at,
        end: at,
        text: format!("{element}\n{indent}"),
    }
}

fn error_at(
    source_name: &str,
    text: &str,
    offset: usize,
    element: &str,
    message: String,
) -> PatchError {
    PatchError {
        source_name: source_name.to_owned(),
        line: line_col(text.as_bytes(), offset).0,
        element: element.to_owned(),
        message,
    }
}

/// The element spans of a domain XML and the index of its `<domain>` root;
/// errors name the file and line (not XML, truncated, not a domain).
fn scan_domain(source_name: &str, text: &str) -> Result<(Vec<Node>, usize), PatchError> {
    let nodes = scan(source_name, text)?;
    let root = nodes
        .iter()
        .position(|n| n.parent.is_none())
        .ok_or_else(|| error_at(source_name, text, 0, "", "no root element".to_owned()))?;
    if nodes[root].name != "domain" {
        return Err(error_at(
            source_name,
            text,
            nodes[root].start,
            &nodes[root].name,
            format!(
                "the root element is <{}>, not <domain>: give a libvirt domain XML (virsh dumpxml --inactive NAME)",
                nodes[root].name
            ),
        ));
    }
    Ok((nodes, root))
}

/// The domain's `<name>` and its line; errors name the file and line
/// (not XML, truncated, not a domain, no name).
pub fn domain_name(source_name: &str, domain_xml: &str) -> Result<(String, usize), PatchError> {
    let (nodes, root) = scan_domain(source_name, domain_xml)?;
    let name = nodes[root]
        .children
        .iter()
        .copied()
        .find(|&c| nodes[c].name == "name")
        .ok_or_else(|| {
            error_at(
                source_name,
                domain_xml,
                nodes[root].start,
                "name",
                "the domain has no <name>".to_owned(),
            )
        })?;
    let n = &nodes[name];
    Ok((
        domain_xml[n.start_tag_end..n.end_tag_start]
            .trim()
            .to_owned(),
        line_col(domain_xml.as_bytes(), n.start).0,
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
    let (nodes, root) = scan_domain(source_name, domain_xml)?;
    let err = |offset: usize, element: &str, message: String| {
        error_at(source_name, domain_xml, offset, element, message)
    };
    let unit = nodes[root]
        .children
        .first()
        .map(|&c| indent_before(domain_xml, nodes[c].start))
        .filter(|u| !u.is_empty())
        .unwrap_or_else(|| "  ".to_owned());
    let doc = Doc {
        text: domain_xml,
        nodes,
        unit,
    };
    let mut splices: Vec<Splice> = Vec::new();

    // <name>
    let name_node = doc.child(root, "name");
    let name = name_node
        .map(|n| doc.inner_text(n).trim().to_owned())
        .unwrap_or_default();
    if name != vm.name && !options.name_given {
        let at = name_node.map_or(doc.nodes[root].start, |n| doc.nodes[n].start);
        return Err(err(
            at,
            "name",
            format!(
                "the domain is named {name:?} but the plan's VM is {:?}: pass --vm {} to patch it anyway",
                vm.name, vm.name
            ),
        ));
    }

    // <vcpu>: our attributes, the count checked (or set).
    let planned = vm.vcpus.len();
    let vcpu = doc.child(root, "vcpu");
    match vcpu {
        Some(v) => {
            let n = &doc.nodes[v];
            let count_text = doc.inner_text(v).trim();
            let count: usize = count_text.parse().map_err(|_| {
                err(
                    n.start,
                    "vcpu",
                    format!("<vcpu> holds {count_text:?}, not a vCPU count"),
                )
            })?;
            if count != planned && !options.set_vcpus {
                return Err(err(
                    n.start,
                    "vcpu",
                    format!(
                        "the domain has {count} vCPUs but the plan gives {} {planned}: pass --set-vcpus to change the domain's count, or plan with vcpus = {count}",
                        vm.name
                    ),
                ));
            }
            // Keep attributes we do not own (e.g. current='2'); a current
            // count above a lowered maximum would make libvirt refuse it.
            let start_tag = &doc.text[n.start..n.start_tag_end];
            let mut set = vec![
                ("placement", "static".to_owned()),
                ("cpuset", vm.cpus.to_string()),
            ];
            if let Some((_, current)) = attributes(start_tag)
                .into_iter()
                .find(|(k, _)| k == "current")
            {
                if current.trim().parse::<usize>().is_ok_and(|c| c > planned) {
                    set.push(("current", planned.to_string()));
                }
            }
            let new_start = rewrite_start_tag("vcpu", start_tag, &set, false);
            if n.empty {
                splices.push(Splice {
                    start: n.start,
                    end: n.end,
                    text: format!("{new_start}{planned}</vcpu>"),
                });
            } else {
                splices.push(Splice {
                    start: n.start,
                    end: n.start_tag_end,
                    text: new_start,
                });
                if count != planned {
                    splices.push(Splice {
                        start: n.start_tag_end,
                        end: n.end_tag_start,
                        text: planned.to_string(),
                    });
                }
            }
        }
        None => {
            return Err(err(
                doc.nodes[root].start,
                "vcpu",
                "the domain has no <vcpu> element: it is not a complete domain definition"
                    .to_owned(),
            ))
        }
    }
    let vcpu = vcpu.unwrap_or(root);

    // The last of the elements that come before <cputune> in libvirt's order.
    let anchor = [
        "vcpu",
        "vcpus",
        "iothreads",
        "iothreadids",
        "defaultiothread",
    ]
    .iter()
    .filter_map(|n| doc.child(root, n))
    .max_by_key(|&i| doc.nodes[i].start)
    .unwrap_or(vcpu);

    // <iothreads>
    if let Some(io) = emit::iothreads(vm) {
        match doc.child(root, "iothreads") {
            Some(existing) => {
                let n = &doc.nodes[existing];
                splices.push(Splice {
                    start: n.start,
                    end: n.end,
                    text: io,
                });
            }
            None => splices.push(insert_after(&doc, vcpu, &io)),
        }
    }

    // <cputune>: replace our pins, keep the rest.
    let pins = emit::cputune_pins(vm);
    match doc.child(root, "cputune") {
        Some(ct) => {
            let indent = doc.indent_of(ct);
            let child_indent = format!("{indent}{}", doc.unit);
            let ours = |name: &str| matches!(name, "vcpupin" | "emulatorpin" | "iothreadpin");
            let owned: Vec<usize> = doc.nodes[ct]
                .children
                .iter()
                .copied()
                .filter(|&c| ours(&doc.nodes[c].name))
                .collect();
            let text: String = pins
                .iter()
                .map(|p| format!("{child_indent}{p}\n"))
                .collect();
            // Where the pins go: where the first old pin was, else before the
            // first element libvirt puts after pins, else before </cputune>.
            let after_pins = [
                "vcpusched",
                "iothreadsched",
                "emulatorsched",
                "cachetune",
                "memorytune",
            ];
            let position = owned.first().copied().or_else(|| {
                doc.nodes[ct]
                    .children
                    .iter()
                    .copied()
                    .find(|&c| after_pins.contains(&doc.nodes[c].name.as_str()))
            });
            for &o in &owned {
                let n = &doc.nodes[o];
                let start = line_start_if_blank(doc.text, n.start);
                let end = if start < n.start {
                    line_end_if_blank(doc.text, n.end)
                } else {
                    n.end
                };
                if Some(o) == position {
                    splices.push(Splice {
                        start,
                        end,
                        text: text.clone(),
                    });
                } else {
                    splices.push(Splice {
                        start,
                        end,
                        text: String::new(),
                    });
                }
            }
            if owned.is_empty() {
                match position {
                    Some(p) => {
                        let at = line_start_if_blank(doc.text, doc.nodes[p].start);
                        let text = if at < doc.nodes[p].start {
                            text
                        } else {
                            format!("\n{}", text)
                        };
                        splices.push(Splice {
                            start: at,
                            end: at,
                            text,
                        });
                    }
                    None if doc.nodes[ct].empty => {
                        let n = &doc.nodes[ct];
                        let start_tag = doc.text[n.start..n.start_tag_end]
                            .trim_end_matches("/>")
                            .trim_end();
                        splices.push(Splice {
                            start: n.start,
                            end: n.end,
                            text: format!("{start_tag}>\n{text}{indent}</cputune>"),
                        });
                    }
                    None => {
                        let close = doc.nodes[ct].end_tag_start;
                        let at = line_start_if_blank(doc.text, close);
                        let text = if at < close {
                            text
                        } else {
                            format!("\n{text}{indent}")
                        };
                        splices.push(Splice {
                            start: at,
                            end: at,
                            text,
                        });
                    }
                }
            }
        }
        None => {
            // Right after the anchor; an <iothreads> inserted after <vcpu>
            // lands first when both go to the same offset (stable sort).
            let indent = doc.indent_of(anchor);
            let block = doc.block("<cputune>", &pins, "</cputune>", &indent);
            splices.push(insert_after(&doc, anchor, &block));
        }
    }

    // <numatune>: ours entirely.
    let numa = emit::numatune_children(vm);
    match (doc.child(root, "numatune"), numa.is_empty()) {
        (Some(nt), false) => {
            let indent = doc.indent_of(nt);
            let n = &doc.nodes[nt];
            splices.push(Splice {
                start: n.start,
                end: n.end,
                text: doc.block("<numatune>", &numa, "</numatune>", &indent),
            });
        }
        (None, false) => {
            let after = doc.child(root, "cputune").unwrap_or(anchor);
            let indent = doc.indent_of(after);
            let block = doc.block("<numatune>", &numa, "</numatune>", &indent);
            if doc.child(root, "cputune").is_some() {
                splices.push(insert_after(&doc, after, &block));
            } else {
                // After the <cputune> inserted after the anchor.
                let at = doc.nodes[anchor].end;
                splices.push(Splice {
                    start: at,
                    end: at,
                    text: format!("\n{indent}{block}"),
                });
            }
        }
        (_, true) => {}
    }

    // <cpu>: topology (and guest NUMA cells) inside, the rest kept.
    let topology = emit::topology(vm);
    // Guest memory for NUMA cells: <memory>, else what the old cells held.
    let old_cells: Vec<usize> = doc
        .child(root, "cpu")
        .and_then(|cpu| doc.child(cpu, "numa"))
        .map(|numa| {
            doc.nodes[numa]
                .children
                .iter()
                .copied()
                .filter(|&c| doc.nodes[c].name == "cell")
                .collect()
        })
        .unwrap_or_default();
    let cell_attrs =
        |c: usize| attributes(&doc.text[doc.nodes[c].start..doc.nodes[c].start_tag_end]);
    let memory_kib = match doc.child(root, "memory") {
        Some(m) => {
            let attrs = attributes(&doc.text[doc.nodes[m].start..doc.nodes[m].start_tag_end]);
            let unit = attrs
                .iter()
                .find(|(k, _)| k == "unit")
                .map(|(_, v)| v.as_str());
            kib(doc.inner_text(m), unit)
        }
        None => old_cells
            .iter()
            .map(|&c| {
                let attrs = cell_attrs(c);
                let get = |k: &str| attrs.iter().find(|(a, _)| a == k).map(|(_, v)| v.as_str());
                kib(get("memory").unwrap_or("0"), get("unit"))
            })
            .sum(),
    };
    let cells = emit::guest_numa(vm, memory_kib);
    match doc.child(root, "cpu") {
        Some(cpu) => {
            let indent = doc.indent_of(cpu);
            let child_indent = format!("{indent}{}", doc.unit);
            let n = &doc.nodes[cpu];
            if n.empty {
                let start_tag = doc.text[n.start..n.start_tag_end]
                    .trim_end_matches("/>")
                    .trim_end();
                let mut children = vec![topology.clone()];
                if let Some(c) = &cells {
                    children.extend(c.iter().cloned());
                }
                splices.push(Splice {
                    start: n.start,
                    end: n.end,
                    text: doc.block(&format!("{start_tag}>"), &children, "</cpu>", &indent),
                });
            } else {
                match doc.child(cpu, "topology") {
                    Some(t) => {
                        let t = &doc.nodes[t];
                        splices.push(Splice {
                            start: t.start,
                            end: t.end,
                            text: topology.clone(),
                        });
                    }
                    None => {
                        // After <model>/<vendor> when present, else first.
                        match ["vendor", "model"].iter().find_map(|c| doc.child(cpu, c)) {
                            Some(after) => splices.push(insert_after(&doc, after, &topology)),
                            None => {
                                let at = n.start_tag_end;
                                splices.push(Splice {
                                    start: at,
                                    end: at,
                                    text: format!("\n{child_indent}{topology}"),
                                });
                            }
                        }
                    }
                }
                if let Some(cell_lines) = &cells {
                    let block_text = {
                        let mut s = String::new();
                        for (i, l) in cell_lines.iter().enumerate() {
                            if i > 0 {
                                s.push('\n');
                                s.push_str(&child_indent);
                            }
                            s.push_str(l);
                        }
                        s
                    };
                    match doc.child(cpu, "numa") {
                        // As many cells as planned: keep them (memory, memAccess,
                        // distances…) and rewrite only which vCPUs they hold.
                        Some(_) if old_cells.len() == vm.guest_cells.len() => {
                            for (&c, planned_cell) in old_cells.iter().zip(&vm.guest_cells) {
                                let cn = &doc.nodes[c];
                                let tag = &doc.text[cn.start..cn.start_tag_end];
                                let set = [
                                    ("id", planned_cell.id.to_string()),
                                    ("cpus", planned_cell.vcpus.clone()),
                                ];
                                splices.push(Splice {
                                    start: cn.start,
                                    end: cn.start_tag_end,
                                    text: rewrite_start_tag("cell", tag, &set, cn.empty),
                                });
                            }
                        }
                        Some(numa) => {
                            let nn = &doc.nodes[numa];
                            splices.push(Splice {
                                start: nn.start,
                                end: nn.end,
                                text: block_text,
                            });
                        }
                        None => {
                            let close = n.end_tag_start;
                            let at = line_start_if_blank(doc.text, close);
                            let text = if at < close {
                                format!("{child_indent}{block_text}\n")
                            } else {
                                format!("\n{child_indent}{block_text}\n{indent}")
                            };
                            splices.push(Splice {
                                start: at,
                                end: at,
                                text,
                            });
                        }
                    }
                }
            }
        }
        None => {
            let mut children = vec![topology];
            if let Some(c) = cells {
                children.extend(c);
            }
            // libvirt's order: … <os>, <features>, <cpu>, <clock>, <on_*>, …, <devices>.
            let before = [
                "clock",
                "on_poweroff",
                "on_reboot",
                "on_crash",
                "pm",
                "devices",
            ]
            .iter()
            .filter_map(|n| doc.child(root, n))
            .min_by_key(|&i| doc.nodes[i].start);
            match before {
                Some(b) => {
                    let indent = doc.indent_of(b);
                    let block = doc.block("<cpu>", &children, "</cpu>", &indent);
                    splices.push(insert_before(&doc, b, &block));
                }
                None => {
                    let last = doc.nodes[root].children.last().copied().unwrap_or(anchor);
                    let indent = doc.indent_of(last);
                    let block = doc.block("<cpu>", &children, "</cpu>", &indent);
                    splices.push(insert_after(&doc, last, &block));
                }
            }
        }
    }

    // Apply from the end; splices never overlap.
    splices.sort_by_key(|s| (s.start, s.end));
    let mut out = String::with_capacity(domain_xml.len() + 4096);
    let mut at = 0;
    for s in &splices {
        if s.start < at {
            return Err(err(
                s.start,
                "",
                "internal error: overlapping edits".to_owned(),
            ));
        }
        out.push_str(&domain_xml[at..s.start]);
        out.push_str(&s.text);
        at = s.end;
    }
    out.push_str(&domain_xml[at..]);
    Ok(out)
}
