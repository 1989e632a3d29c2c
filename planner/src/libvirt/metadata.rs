//! Domains' own requests through a connection: reading every domain's
//! pinplan metadata ([`domain_requests`]) and writing one (`pinplan tag`,
//! [`tag`]). The element's form and its checks are
//! [`crate::spec::metadata`]'s.

use super::{open_read_only, vanished, LibvirtAction, LibvirtError};
use crate::spec::metadata::{DomainRequest, NAMESPACE, PREFIX};
use crate::spec::{Spec, SpecError};
use std::path::Path;
use virt::domain::Domain;
use virt_sys::{
    VIR_DOMAIN_AFFECT_CONFIG, VIR_DOMAIN_AFFECT_LIVE, VIR_DOMAIN_METADATA_ELEMENT,
    VIR_DOMAIN_XML_INACTIVE,
};

/// Why a domain's request could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum MetadataError {
    /// libvirt failed.
    #[error(transparent)]
    Libvirt(#[from] LibvirtError),
    /// The request is not a valid `[[vm]]`.
    #[error(transparent)]
    Request(#[from] SpecError),
    /// libvirt answered, but the request read back is not the one written.
    #[error("{uri}: domain {domain}: the request read back is not the one written: {read}")]
    ReadBack {
        /// The URI.
        uri: String,
        /// The domain.
        domain: String,
        /// What was read back (`(none)` when nothing).
        read: String,
    },
}

impl crate::error::Diagnostic for MetadataError {
    fn hint(&self) -> Option<String> {
        match self {
            MetadataError::Libvirt(e) => e.hint(),
            MetadataError::Request(e) => e.hint(),
            MetadataError::ReadBack { domain, .. } => Some(format!(
                "another tool may have changed it at the same time: run pinplan tag {domain} --dry-run to see it"
            )),
        }
    }
}

/// The XML a domain's request is read from: the persistent definition's
/// (what it starts with), a transient domain's live one.
fn request_xml(uri: &str, d: &Domain, name: &str) -> Result<Option<String>, LibvirtError> {
    let flags = if d.is_persistent().unwrap_or(true) {
        VIR_DOMAIN_XML_INACTIVE
    } else {
        0
    };
    match d.xml_desc(flags) {
        Ok(xml) => Ok(Some(xml)),
        Err(e) if vanished(&e) => Ok(None),
        Err(e) => Err(LibvirtError::new(
            uri,
            LibvirtAction::DomainXml(name.to_owned()),
            &e,
        )),
    }
}

/// A domain's name and its request, or why its request is not valid.
pub type Read = (String, Result<DomainRequest, SpecError>);

/// Every domain's request at `uri`, by domain name; a domain without one
/// is left out, and one whose request is not valid gives its error (the
/// caller decides: `plan` stops, `watch` reports it and goes on).
pub fn domain_requests(uri: &str) -> Result<Vec<Read>, LibvirtError> {
    let conn = open_read_only(uri)?;
    let mut out = Vec::new();
    for d in super::list_domains(uri, &conn)? {
        let name = d
            .name()
            .map_err(|e| LibvirtError::new(uri, LibvirtAction::DomainName, &e))?;
        let Some(xml) = request_xml(uri, &d, &name)? else {
            continue;
        };
        let origin = format!("{uri} domain {name}");
        match DomainRequest::read(&origin, &name, &xml) {
            Ok(Some(request)) => out.push((name, Ok(request))),
            Ok(None) => {}
            Err(e) => out.push((name, Err(e))),
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

/// The requests in domains read already (`(name, XML, running)`, as
/// [`super::all_domain_xml`] gives them: a running domain's live XML, the
/// definition of the others), as [`domain_requests`] gives them.
pub fn requests_of(uri: &str, domains: &[(String, String, bool)]) -> Vec<Read> {
    let mut out = Vec::new();
    for (name, xml, _) in domains {
        let origin = format!("{uri} domain {name}");
        match DomainRequest::read(&origin, name, xml) {
            Ok(Some(request)) => out.push((name.clone(), Ok(request))),
            Ok(None) => {}
            Err(e) => out.push((name.clone(), Err(e))),
        }
    }
    out
}

/// What `pinplan tag` did, or would do with `--dry-run`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tagged {
    /// The domain's request before.
    pub before: Option<DomainRequest>,
    /// Its request after (none: the element removed).
    pub after: Option<DomainRequest>,
    /// Whether it was written (false with `--dry-run`, or when nothing changes).
    pub written: bool,
}

impl Tagged {
    /// Two lines: the element before and after, then what was done.
    pub fn to_text(&self, domain: &str, dry_run: bool) -> String {
        let show = |r: &Option<DomainRequest>| {
            r.as_ref()
                .map_or_else(|| "(none)".to_owned(), DomainRequest::element)
        };
        let done = if self.before == self.after {
            "unchanged"
        } else if self.written {
            "written"
        } else if dry_run {
            "not written (--dry-run)"
        } else {
            "not written"
        };
        format!(
            "{domain}: before {}\n{domain}: after  {}\n{domain}: {done}\n",
            show(&self.before),
            show(&self.after)
        )
    }
}

/// Sets `changes` (`KEY=VALUE`, `KEY=` removes a key) in domain `domain`'s
/// request at `uri`: checked as a `[[vm]]` of `spec` is (its tables and
/// `[defaults]`; without one, a spec that has nothing else, so a `profile`
/// needs the request's own `table`) before anything is written, then
/// written into the persistent definition and, when it runs, the live one;
/// read back. With `dry_run` only checked.
pub fn tag(
    uri: &str,
    domain: &str,
    changes: &[(String, String)],
    dry_run: bool,
    spec: Option<&Spec>,
) -> Result<Tagged, MetadataError> {
    let conn = if dry_run {
        open_read_only(uri)?
    } else {
        super::connection::open(uri, false)?
    };
    let d = conn
        .lookup_domain_by_name(domain)
        .map_err(|e| LibvirtError::new(uri, LibvirtAction::LookUp(domain.to_owned()), &e))?;
    let origin = format!("{uri} domain {domain}");
    let xml = request_xml(uri, &d, domain)?.unwrap_or_default();
    // As written: a request with a bad key is what tag repairs.
    let before = DomainRequest::read_as_written(&origin, domain, &xml)?;
    let empty = DomainRequest {
        domain: domain.to_owned(),
        origin,
        pairs: Vec::new(),
    };
    let changed = before.as_ref().unwrap_or(&empty).with_changes(changes);
    let after = (!changed.pairs.is_empty()).then_some(changed);
    if let Some(request) = &after {
        request.check_keys()?;
        match spec {
            Some(spec) => spec
                .with_domains(std::slice::from_ref(request))
                .map(|_| ())?,
            None => check(request)?,
        }
    }
    let mut tagged = Tagged {
        before,
        after,
        written: false,
    };
    if dry_run || tagged.before == tagged.after {
        return Ok(tagged);
    }
    write(uri, &d, domain, tagged.after.as_ref())?;
    let read = request_xml(uri, &d, domain)?.unwrap_or_default();
    let back = DomainRequest::read(&format!("{uri} domain {domain}"), domain, &read)?;
    if back.as_ref().map(|r| &r.pairs) != tagged.after.as_ref().map(|r| &r.pairs) {
        return Err(MetadataError::ReadBack {
            uri: uri.to_owned(),
            domain: domain.to_owned(),
            read: back.map_or_else(|| "(none)".to_owned(), |r| r.element()),
        });
    }
    tagged.written = true;
    Ok(tagged)
}

/// `request` checked as a `[[vm]]` of a spec that has nothing else.
pub fn check(request: &DomainRequest) -> Result<(), SpecError> {
    Spec::parse(Path::new(&request.origin), "")?.with_domains(std::slice::from_ref(request))?;
    Ok(())
}

/// Writes (or with `None` removes) the element: into the persistent
/// definition, and the live one while the domain runs.
fn write(
    uri: &str,
    d: &Domain,
    domain: &str,
    request: Option<&DomainRequest>,
) -> Result<(), LibvirtError> {
    let mut flags = 0;
    if d.is_persistent().unwrap_or(true) {
        flags |= VIR_DOMAIN_AFFECT_CONFIG;
    }
    if d.is_active().unwrap_or(false) {
        flags |= VIR_DOMAIN_AFFECT_LIVE;
    }
    let element = request.map(DomainRequest::element);
    d.set_metadata(
        VIR_DOMAIN_METADATA_ELEMENT as i32,
        element.as_deref(),
        Some(PREFIX),
        Some(NAMESPACE),
        flags,
    )
    .map_err(|e| LibvirtError::new(uri, LibvirtAction::SetMetadata(domain.to_owned()), &e))
}
