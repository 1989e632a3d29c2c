//! A domain's own request: the keys of a spec's `[[vm]]`, carried in the
//! domain's libvirt XML under pinplan's namespace in `<metadata>`:
//!
//! ```xml
//! <metadata>
//!   <pinplan:vm xmlns:pinplan="urn:pinplan:vm:1" profile="vm-64b" target_gbps="100"
//!               table="/etc/pinplan/b1-tx-cores.csv" threads="prefer" movable="true"/>
//! </metadata>
//! ```
//!
//! Each attribute is one key; its value is read as a TOML value (`100`,
//! `true`, `[{ addr = "0000:65:00.0" }]`, `"64"`), and a bare word that is not
//! one (`prefer`, `vm-64b`, `16GiB`) as a string. The request is checked
//! exactly as a `[[vm]]` is, with the same messages; an error names the
//! domain and the key instead of a file's line. `table` (an absolute path)
//! names a throughput table for the VM's `profile`, as `[host] tables` does.
//!
//! This module reads the element ([`DomainRequest::read`]), writes it
//! ([`DomainRequest::element`], for `pinplan tag`), and adds the requests
//! of a host's domains to a spec ([`Spec::with_domains`]), where the spec's
//! own `[[vm]]` of the same name wins.

use super::parse::{read_toml, Lines};
use super::{Spec, SpecError};
use crate::model::{Warning, WarningKind};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// pinplan's XML namespace for a domain's request.
pub const NAMESPACE: &str = "urn:pinplan:vm:1";
/// The prefix pinplan writes the element with (`virsh metadata --key`).
pub const PREFIX: &str = "pinplan";
/// The element's local name.
pub const ELEMENT: &str = "vm";
/// The key that names a throughput table (metadata only).
pub const TABLE_KEY: &str = "table";

/// Keys a request may hold, at most, and the longest value: a domain's XML
/// is anybody's, and the request is parsed as text.
const MOST_KEYS: usize = 64;
const LONGEST_VALUE: usize = 4096;

/// `[[vm]]` keys a domain's request cannot hold: the domain gives its name
/// and its XML; a domain is on the host it is on.
const NOT_IN_METADATA: [&str; 4] = ["name", "domain_xml", "host", "hosts"];

/// One domain's request, as its metadata says: the keys in the order written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DomainRequest {
    /// The domain's name.
    pub domain: String,
    /// Where it was read, for messages: `qemu:///system domain vm1`.
    pub origin: String,
    /// Each key and its value as written.
    pub pairs: Vec<(String, String)>,
}

/// Where a domain's request stands among a spec's lines: the request is
/// read as its own `[[vm]]` text numbered after the spec's, and an error on
/// one of those lines names the domain and the key ([`Spec::error`]).
#[derive(Debug, Clone, PartialEq)]
pub(super) struct DomainLines {
    /// The number of its `[[vm]]` line.
    first: usize,
    /// The keys of the lines after `name`, in order.
    keys: Vec<String>,
    /// `qemu:///system domain vm1`.
    origin: String,
}

impl DomainLines {
    /// Whether line `line` is one of this request's.
    pub(super) fn holds(&self, line: usize) -> bool {
        (self.first..self.first + 2 + self.keys.len()).contains(&line)
    }

    /// The error `message` at `line` of this request.
    pub(super) fn error(&self, line: usize, key: Option<&str>, message: String) -> SpecError {
        let attribute = line
            .checked_sub(self.first + 2)
            .and_then(|i| self.keys.get(i));
        let file = match attribute {
            Some(k) => format!("{}, pinplan metadata key {k}", self.origin),
            None => format!("{}, pinplan metadata", self.origin),
        };
        SpecError {
            file: PathBuf::from(file),
            line: 0,
            key: key.map(str::to_owned),
            message,
            hint: None,
            cause: None,
        }
    }
}

impl DomainRequest {
    /// The request in a domain's XML (`xml`, of domain `domain`, read from
    /// `origin`), or none when it has no element of pinplan's namespace;
    /// its keys checked ([`DomainRequest::check_keys`]).
    pub fn read(origin: &str, domain: &str, xml: &str) -> Result<Option<DomainRequest>, SpecError> {
        let request = DomainRequest::read_as_written(origin, domain, xml)?;
        if let Some(r) = &request {
            r.check_keys()?;
        }
        Ok(request)
    }

    /// [`DomainRequest::read`] without checking its keys: what `pinplan
    /// tag` starts from, so that it can repair a request with a bad key.
    pub fn read_as_written(
        origin: &str,
        domain: &str,
        xml: &str,
    ) -> Result<Option<DomainRequest>, SpecError> {
        let bad = |message: String| {
            SpecError {
            file: PathBuf::from(format!("{origin}, pinplan metadata")),
            line: 0,
            key: None,
            message,
            hint: Some(format!(
                "write it as one empty element with a key per attribute: pinplan tag {domain} KEY=VALUE…, or virsh metadata {domain} --uri {NAMESPACE} --key {PREFIX} --set '<{ELEMENT} threads=\"prefer\" vcpus=\"4\"/>'"
            )),
            cause: None,
        }
        };
        let doc = crate::xmldoc::parse(xml).map_err(|e| SpecError {
            file: PathBuf::from(origin),
            line: e.line,
            key: None,
            message: e.problem.to_string(),
            hint: None,
            cause: None,
        })?;
        let ours: Vec<roxmltree::Node> = doc
            .root_element()
            .children()
            .filter(|n| n.has_tag_name("metadata"))
            .flat_map(|m| m.children())
            .filter(|n| n.is_element() && n.tag_name().namespace() == Some(NAMESPACE))
            .collect();
        let element = match ours.as_slice() {
            [] => return Ok(None),
            [one] => *one,
            _ => {
                return Err(bad(format!(
                    "{} elements of {NAMESPACE}: give one",
                    ours.len()
                )))
            }
        };
        if element.tag_name().name() != ELEMENT {
            return Err(bad(format!(
                "the element of {NAMESPACE} is <{}>, not <{ELEMENT}>",
                element.tag_name().name()
            )));
        }
        if element
            .children()
            .any(|c| c.is_element() || c.text().is_some_and(|t| !t.trim().is_empty()))
        {
            return Err(bad(format!(
                "<{ELEMENT}> holds elements or text: every key is an attribute"
            )));
        }
        let pairs = element
            .attributes()
            .map(|a| (a.name().to_owned(), a.value().to_owned()))
            .collect();
        Ok(Some(DomainRequest {
            domain: domain.to_owned(),
            origin: origin.to_owned(),
            pairs,
        }))
    }

    /// Every key is one a domain's request may hold, at most `MOST_KEYS` (64)
    /// of them, none twice, each value at most `LONGEST_VALUE` (4096) bytes.
    pub fn check_keys(&self) -> Result<(), SpecError> {
        let allowed = allowed_keys();
        let at = |key: &str, message: String, hint: Option<String>| SpecError {
            file: PathBuf::from(format!("{}, pinplan metadata key {key}", self.origin)),
            line: 0,
            key: Some(format!("vm.{key}")),
            message,
            hint,
            cause: None,
        };
        if self.pairs.len() > MOST_KEYS {
            return Err(at(
                "…",
                format!(
                    "{} keys: a request holds at most {MOST_KEYS}",
                    self.pairs.len()
                ),
                None,
            ));
        }
        let mut seen = BTreeSet::new();
        for (key, value) in &self.pairs {
            if !allowed.contains(&key.as_str()) {
                let hint = if NOT_IN_METADATA.contains(&key.as_str()) {
                    Some("the domain gives its own name, XML and host: drop the key".to_owned())
                } else {
                    crate::text::closest(key, allowed.iter().copied())
                        .map(|k| format!("did you mean `{k}`?"))
                };
                return Err(at(
                    key,
                    format!("unknown key `{key}` in a domain's request"),
                    hint,
                ));
            }
            if !seen.insert(key.as_str()) {
                return Err(at(key, format!("`{key}` is given twice"), None));
            }
            if value.len() > LONGEST_VALUE {
                return Err(at(
                    key,
                    format!(
                        "the value is {} bytes long: at most {LONGEST_VALUE}",
                        value.len()
                    ),
                    None,
                ));
            }
        }
        Ok(())
    }

    /// The element pinplan writes into `<metadata>` (without its namespace,
    /// which libvirt adds: `virDomainSetMetadata` with [`NAMESPACE`] and
    /// [`PREFIX`]).
    pub fn element(&self) -> String {
        let mut out = format!("<{ELEMENT}");
        for (key, value) in &self.pairs {
            out.push_str(&format!(" {key}=\"{}\"", attribute_text(value)));
        }
        out.push_str("/>");
        out
    }

    /// The request with `KEY=VALUE` changes made in order: a key set again
    /// keeps its place, a new key goes last, `KEY=` removes it.
    pub fn with_changes(&self, changes: &[(String, String)]) -> DomainRequest {
        let mut pairs = self.pairs.clone();
        for (key, value) in changes {
            let at = pairs.iter().position(|(k, _)| k == key);
            match (at, value.is_empty()) {
                (Some(i), true) => {
                    pairs.remove(i);
                }
                (Some(i), false) => pairs[i].1.clone_from(value),
                (None, true) => {}
                (None, false) => pairs.push((key.clone(), value.clone())),
            }
        }
        DomainRequest {
            pairs,
            ..self.clone()
        }
    }

    /// The `table` key's path, if given.
    fn table(&self) -> Option<&str> {
        self.pairs
            .iter()
            .find(|(k, _)| k == TABLE_KEY)
            .map(|(_, v)| v.as_str())
    }

    /// The request as a `[[vm]]` of TOML text: `name`, then a line per key
    /// (without `table`), each value a TOML value or a quoted string.
    fn toml(&self) -> (String, Vec<String>) {
        let mut text = format!("[[vm]]\nname = {}\n", quoted(&self.domain));
        let mut keys = Vec::new();
        for (key, value) in self.pairs.iter().filter(|(k, _)| k != TABLE_KEY) {
            text.push_str(&format!("{key} = {}\n", toml_value(value)));
            keys.push(key.clone());
        }
        (text, keys)
    }
}

/// The keys of a `[[vm]]` that a domain's request may hold, and `table`.
fn allowed_keys() -> Vec<&'static str> {
    let mut keys: Vec<&'static str> = super::schema::vm_keys()
        .iter()
        .copied()
        .filter(|k| !NOT_IN_METADATA.contains(k))
        .collect();
    keys.push(TABLE_KEY);
    keys
}

/// `value` as TOML: itself when it is one TOML value on one line, else
/// the text as a quoted string.
fn toml_value(value: &str) -> String {
    let one_value = !value.contains(['\n', '\r'])
        && toml::from_str::<toml::Table>(&format!("v = {value}"))
            .is_ok_and(|t| t.len() == 1 && t.contains_key("v"));
    if one_value {
        value.to_owned()
    } else {
        quoted(value)
    }
}

/// A TOML basic string of `text`.
fn quoted(text: &str) -> String {
    let mut out = String::from("\"");
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// `text` as an XML attribute value between double quotes.
fn attribute_text(text: &str) -> String {
    let mut out = String::new();
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\n' => out.push_str("&#10;"),
            '\r' => out.push_str("&#13;"),
            '\t' => out.push_str("&#9;"),
            c => out.push(c),
        }
    }
    out
}

impl Spec {
    /// The spec of a host planned without a spec file (`plan --connect URI`
    /// alone): no reservation, no table, the URI; its VMs come from the
    /// domains' requests ([`Spec::with_domains`]).
    pub fn without_file(uri: &str) -> Result<Spec, SpecError> {
        let mut spec = Spec::parse(Path::new(&format!("{uri} (no spec)")), "")?;
        spec.connect = Some(uri.to_owned());
        Ok(spec)
    }

    /// The spec with the requests of a host's domains added as VMs to
    /// place: a domain the spec's own `[[vm]]` names keeps the spec's
    /// request (a warning lists the metadata keys not used), the others are
    /// read as `[[vm]]`s with the spec's `[defaults]`; each `table` is
    /// loaded once beside the spec's tables.
    pub fn with_domains(
        &self,
        requests: &[DomainRequest],
    ) -> Result<(Spec, Vec<Warning>), SpecError> {
        let mut spec = self.clone();
        let mut warnings = Vec::new();
        let mut vms = (*spec.vms).clone();
        let mut names: BTreeSet<String> = vms.iter().map(|v| v.name.clone()).collect();
        let mut next_line = spec.line_count + 1;
        for request in requests {
            if names.contains(&request.domain) {
                if let Some(w) = spec_wins(request) {
                    warnings.push(w);
                }
                continue;
            }
            request.check_keys()?;
            let (text, keys) = request.toml();
            let lines = Lines::after(&text, next_line - 1);
            spec.domain_lines.push(DomainLines {
                first: next_line,
                keys,
                origin: request.origin.clone(),
            });
            next_line += lines.count();
            if let Some(table) = request.table() {
                spec.add_table(request, table)?;
            }
            let raw = read_toml(&spec.file, &text, &lines).map_err(|e| spec.relabel(e))?;
            let Some(vm) = raw.vm.first() else {
                continue;
            };
            let base = Path::new("/");
            let defaults = Arc::clone(&spec.defaults);
            let vm = spec.read_vm(vm, &defaults, spec.default_fraction, base, &names, &lines)?;
            names.insert(vm.name.clone());
            vms.push(vm);
        }
        spec.vms = Arc::new(vms);
        spec.line_count = next_line - 1;
        Ok((spec, warnings))
    }

    /// An error of `read_toml` on a domain's request, named by the domain.
    fn relabel(&self, e: SpecError) -> SpecError {
        match self.domain_lines.iter().find(|d| d.holds(e.line)) {
            Some(d) => SpecError {
                hint: e.hint.clone(),
                ..d.error(e.line, e.key.as_deref(), e.message.clone())
            },
            None => e,
        }
    }

    /// A domain request's `table`: an absolute path, loaded once.
    fn add_table(&mut self, request: &DomainRequest, table: &str) -> Result<(), SpecError> {
        let path = PathBuf::from(table);
        let at = |message: String| SpecError {
            file: PathBuf::from(format!(
                "{}, pinplan metadata key {TABLE_KEY}",
                request.origin
            )),
            line: 0,
            key: Some(format!("vm.{TABLE_KEY}")),
            message,
            hint: None,
            cause: None,
        };
        if !path.is_absolute() {
            let mut e = at(format!("table {table:?} is not an absolute path"));
            e.hint = Some(
                "a domain's request names its table by its absolute path on the host that plans"
                    .to_owned(),
            );
            return Err(e);
        }
        if self.tables_read.contains(&path) {
            return Ok(());
        }
        let rows = crate::demand::Table::load(&path).map_err(|e| {
            let mut error = at(format!("table {table}"));
            error.cause = Some(Arc::new(e));
            error
        })?;
        self.table.rows.extend(rows.rows);
        self.tables_read.push(path);
        Ok(())
    }
}

/// The warning for a domain whose request the spec's `[[vm]]` of the same
/// name replaces, naming the keys it does not use; none without keys.
fn spec_wins(request: &DomainRequest) -> Option<Warning> {
    if request.pairs.is_empty() {
        return None;
    }
    let keys: Vec<&str> = request.pairs.iter().map(|(k, _)| k.as_str()).collect();
    Some(Warning::vm(
        &request.domain,
        WarningKind::Running,
        format!(
            "the spec's [[vm]] gives this VM's request; its domain's pinplan metadata ({}) is not used",
            keys.join(", ")
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A domain's XML with `metadata` inside `<metadata>`.
    fn domain(metadata: &str) -> String {
        format!(
            "<domain type='kvm'><name>vm1</name><metadata>{metadata}</metadata><vcpu>2</vcpu></domain>"
        )
    }

    fn read(metadata: &str) -> Result<Option<DomainRequest>, SpecError> {
        DomainRequest::read("test:///default domain vm1", "vm1", &domain(metadata))
    }

    fn ours(attributes: &str) -> String {
        format!("<pinplan:vm xmlns:pinplan='{NAMESPACE}' {attributes}/>")
    }

    #[test]
    fn a_request_is_the_attributes_of_one_element_of_the_namespace() {
        assert_eq!(read("").unwrap(), None);
        assert_eq!(
            read("<other:x xmlns:other='urn:x' vcpus='4'/>").unwrap(),
            None
        );
        let r = read(&ours("vcpus='4' threads='prefer'")).unwrap().unwrap();
        assert_eq!(
            r.pairs,
            [
                ("vcpus".to_owned(), "4".to_owned()),
                ("threads".to_owned(), "prefer".to_owned())
            ]
        );
        // Written back, it reads the same, odd characters included.
        let odd = r.with_changes(&[("profile".to_owned(), "a \"b\" & <c>\n'd'".to_owned())]);
        let element = odd.element();
        let back = read(&element.replacen(
            "<vm",
            &format!("<pinplan:vm xmlns:pinplan='{NAMESPACE}'"),
            1,
        ))
        .unwrap()
        .unwrap();
        assert_eq!(back.pairs, odd.pairs);
    }

    #[test]
    fn a_malformed_request_is_refused_naming_the_domain() {
        for (metadata, says) in [
            (
                format!("{}{}", ours("vcpus='1'"), ours("vcpus='2'")),
                "2 elements of urn:pinplan:vm:1",
            ),
            (
                format!("<pinplan:request xmlns:pinplan='{NAMESPACE}'/>"),
                "is <request>, not <vm>",
            ),
            (
                format!("<pinplan:vm xmlns:pinplan='{NAMESPACE}'><vcpus>4</vcpus></pinplan:vm>"),
                "every key is an attribute",
            ),
            (ours("thread='prefer'"), "unknown key `thread`"),
            (ours("name='x'"), "unknown key `name`"),
            (ours("domain_xml='/x'"), "unknown key `domain_xml`"),
        ] {
            let e = read(&metadata).unwrap_err();
            let text = e.to_string();
            assert!(
                text.starts_with("test:///default domain vm1, pinplan metadata"),
                "{text}"
            );
            assert!(text.contains(says), "{text} lacks {says}");
        }
        let e = read(&ours("thread='prefer'")).unwrap_err();
        assert_eq!(e.hint.as_deref(), Some("did you mean `threads`?"));
    }

    #[test]
    fn values_are_toml_and_bare_words_are_strings() {
        for (raw, toml) in [
            ("4", "4"),
            ("true", "true"),
            ("prefer", "\"prefer\""),
            ("16GiB", "\"16GiB\""),
            ("\"64\"", "\"64\""),
            (
                "[{ addr = \"0000:65:00.0\" }]",
                "[{ addr = \"0000:65:00.0\" }]",
            ),
            // One value only: a second key or a table is text, not TOML.
            ("1\nvcpus = 2", "\"1\\u000Avcpus = 2\""),
            ("1 [[vm]]", "\"1 [[vm]]\""),
        ] {
            assert_eq!(toml_value(raw), toml, "{raw:?}");
        }
    }

    /// A spec with a reserved core and `[defaults]`, and the requests of
    /// domains `vm1` (named by the spec too) and `vm2`.
    fn spec() -> Spec {
        Spec::parse(
            Path::new("spec.toml"),
            "[host]\nreserved_cores = 1\n[defaults]\nthreads = \"isolate\"\n[[vm]]\nname = \"vm1\"\nvcpus = 2\n",
        )
        .unwrap()
    }

    fn request(domain: &str, pairs: &[(&str, &str)]) -> DomainRequest {
        DomainRequest {
            domain: domain.to_owned(),
            origin: format!("test:///default domain {domain}"),
            pairs: pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        }
    }

    #[test]
    fn the_spec_wins_and_the_others_join_with_its_defaults() {
        let (joined, warnings) = spec()
            .with_domains(&[
                request("vm1", &[("vcpus", "6")]),
                request("vm2", &[("vcpus", "3"), ("movable", "true")]),
            ])
            .unwrap();
        let vm = |n: &str| joined.vms.iter().find(|v| v.name == n).unwrap().clone();
        assert_eq!(vm("vm1").sizing, super::super::Sizing::Explicit(2));
        assert_eq!(vm("vm2").sizing, super::super::Sizing::Explicit(3));
        assert_eq!(vm("vm2").threads, crate::model::ThreadPolicy::Isolate);
        assert!(vm("vm2").movable);
        assert_eq!(warnings.len(), 1);
        assert!(warnings[0]
            .to_string()
            .starts_with("vm1: the spec's [[vm]] gives this VM's request"));
    }

    #[test]
    fn an_error_in_a_request_names_the_domain_and_the_key() {
        for (pairs, file, says) in [
            (
                vec![("vcpus", "2"), ("threads", "prefr")],
                "test:///default domain vm2, pinplan metadata key threads",
                "unknown variant `prefr`",
            ),
            (
                vec![("vcpus", "2"), ("min_fraction", "2")],
                "test:///default domain vm2, pinplan metadata key min_fraction",
                "min_fraction is 2",
            ),
            (
                vec![("vcpus", "0.5")],
                "test:///default domain vm2, pinplan metadata key vcpus",
                "invalid type",
            ),
            (
                vec![("threads", "prefer")],
                "test:///default domain vm2, pinplan metadata",
                "vm2",
            ),
            (
                vec![("vcpus", "2"), ("table", "rel.csv")],
                "test:///default domain vm2, pinplan metadata key table",
                "not an absolute path",
            ),
            (
                vec![("vcpus", "2"), ("table", "/nonexistent/t.csv")],
                "test:///default domain vm2, pinplan metadata key table",
                "table /nonexistent/t.csv",
            ),
        ] {
            let e = spec().with_domains(&[request("vm2", &pairs)]).unwrap_err();
            assert_eq!(e.file, PathBuf::from(file), "{pairs:?}: {e}");
            assert_eq!(e.line, 0);
            assert!(e.to_string().contains(says), "{pairs:?}: {e}");
            assert!(!e.to_string().contains(":0:"), "{e}");
        }
    }

    /// A check made later, on the host, names the domain too: the spec has
    /// no reserved CPU and the request keeps the emulator on the host's.
    #[test]
    fn a_host_check_of_a_request_names_the_domain() {
        let spec = Spec::without_file("test:///default").unwrap();
        let (joined, _) = spec
            .with_domains(&[request("vm2", &[("vcpus", "2"), ("emulator", "host")])])
            .unwrap();
        let host = crate::topology::load(&crate::topology::Source::Synthetic(
            "package:1 core:4 pu:1".to_owned(),
        ))
        .unwrap();
        let e = joined.request(host).unwrap_err();
        assert_eq!(
            e.file,
            PathBuf::from("test:///default domain vm2, pinplan metadata")
        );
        assert!(e.to_string().contains("emulator = \"host\""), "{e}");
    }
}
