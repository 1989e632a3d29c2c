//! `report --fleet` and `doctor --fleet`: the single-host report and doctor
//! run over every host of an inventory, a bounded number at a time, each
//! within a time limit, and shown per host.
//!
//! `report` reaches a host through its URI (a host without one is named
//! and skipped). `doctor` reads a host's tree where it has one (its
//! `doctor_root`, or `/` when its URI is this machine's system libvirtd),
//! else asks libvirt through its URI (`doctor::run_libvirt`: the PCI checks
//! from its node devices); a host with neither is named as not checked.
//! From a plan directory each host is compared with its own plan.

use super::inventory::{Inventory, InventoryHost};
use super::pool;
use crate::doctor::{self, DoctorOptions};
use crate::error::one_line;
use crate::error::Exit;
use crate::report::connected::{self, Connected};
use crate::report::Report;
use crate::topology::HostTopology;
use serde_json::{json, Value};
use std::path::PathBuf;
use std::time::Duration;

/// One host's part of a fleet survey.
pub enum HostSurvey<T> {
    /// Its result.
    Done(T),
    /// It could not be surveyed, and why (the whole error).
    Failed(String),
    /// Nothing to do there, and why (no URI, no tree to read).
    Skipped(String),
}

/// A host's name and URI, and its survey.
pub struct Surveyed<T> {
    /// The host.
    pub name: String,
    /// Its libvirt URI.
    pub uri: Option<String>,
    /// What was found.
    pub survey: HostSurvey<T>,
}

/// How to survey.
#[derive(Debug, Clone, Copy)]
pub struct SurveyOptions {
    /// Compare with plans made for another topology anyway.
    pub force: bool,
    /// `report`: how many stray threads to list (this machine).
    pub top: usize,
    /// Hosts at once.
    pub concurrency: usize,
    /// How long one host may take.
    pub timeout: Duration,
    /// Told `(stage, hosts done, hosts)` as hosts finish: a progress line.
    pub progress: fn(&str, usize, usize),
}

fn each<T: Send + 'static>(
    inventory: &Inventory,
    options: SurveyOptions,
    stage: &str,
    one: fn(&InventoryHost, SurveyOptions) -> HostSurvey<T>,
) -> Vec<Surveyed<T>> {
    pool::each(
        inventory.hosts.len(),
        options.concurrency,
        |h| {
            let host = inventory.hosts[h].clone();
            let (name, uri) = (host.name.clone(), host.connect.clone());
            let survey =
                pool::within(options.timeout, move || one(&host, options)).unwrap_or_else(|| {
                    HostSurvey::Failed(format!(
                        "no answer within {:.0} s",
                        options.timeout.as_secs_f64()
                    ))
                });
            Surveyed { name, uri, survey }
        },
        &|k, n| (options.progress)(stage, k, n),
    )
}

/// `report --fleet`: each host's report through its URI.
pub fn report(
    inventory: &Inventory,
    options: SurveyOptions,
) -> Vec<Surveyed<(HostTopology, Report)>> {
    each(inventory, options, "reporting on", |host, options| {
        let Some(uri) = &host.connect else {
            return HostSurvey::Skipped(
                "no connect URI: report reads a host's domains through libvirt".to_owned(),
            );
        };
        let plan = host.plan.as_ref().map(|(p, plan)| (p.as_path(), plan));
        match connected::report(&Connected {
            uri,
            plan,
            force: options.force,
            host_cpus: None,
            top: options.top,
        }) {
            Ok(done) => HostSurvey::Done(done),
            Err(e) => HostSurvey::Failed(one_line(&e)),
        }
    })
}

/// Where `doctor` reads `host`: its `doctor_root`, or `/` when its URI is
/// this machine's system libvirtd.
pub fn doctor_root(host: &InventoryHost) -> Option<PathBuf> {
    host.doctor_root.clone().or_else(|| {
        host.connect
            .as_deref()
            .filter(|u| crate::libvirt::is_local_system_uri(u))
            .map(|_| PathBuf::from("/"))
    })
}

/// `doctor --fleet`: each host's checks, against its plan when planned: from
/// its tree ([`doctor_root`]), else through its URI (the PCI checks; the
/// kernel's settings are skipped, saying so).
pub fn doctor(inventory: &Inventory, options: SurveyOptions) -> Vec<Surveyed<doctor::Report>> {
    each(inventory, options, "checking", |host, options| {
        let (plan_path, plan) = match &host.plan {
            Some((path, plan)) => (Some(path.clone()), Some(plan.clone())),
            None => (None, None),
        };
        let mut asked = DoctorOptions {
            root: PathBuf::from("/"),
            plan,
            plan_path,
            force: options.force,
            nics: Vec::new(),
        };
        let done = match (doctor_root(host), &host.connect) {
            (Some(root), _) => {
                asked.root = root;
                doctor::run(&asked)
            }
            (None, Some(uri)) => doctor::run_libvirt(uri, &asked),
            (None, None) => {
                return HostSurvey::Skipped(
                    "not checked: no doctor_root to read and no connect URI to ask libvirt \
                     through; give its [[host]] one of them and plan again"
                        .to_owned(),
                )
            }
        };
        match done {
            Ok(report) => HostSurvey::Done(report),
            Err(e) => HostSurvey::Failed(one_line(&e)),
        }
    })
}

/// The exit status of a survey: an error when a host failed, "no" when a
/// host's result says no (`no`) or a host was skipped, else success.
pub fn exit<T>(hosts: &[Surveyed<T>], no: impl Fn(&T) -> bool) -> Option<Exit> {
    if hosts
        .iter()
        .any(|h| matches!(h.survey, HostSurvey::Failed(_)))
    {
        Some(Exit::Error)
    } else if hosts.iter().any(|h| match &h.survey {
        HostSurvey::Done(t) => no(t),
        HostSurvey::Skipped(_) => true,
        HostSurvey::Failed(_) => false,
    }) {
        Some(Exit::No)
    } else {
        None
    }
}

/// Per host, `== NAME (URI) ==` and its text; then one line for the fleet:
/// how many hosts, and which have `no` (errors, failed checks), could not
/// be surveyed or were skipped.
pub fn to_text<T>(
    hosts: &[Surveyed<T>],
    text: impl Fn(&T) -> String,
    no: impl Fn(&T) -> bool,
    what: &str,
) -> String {
    let mut out = String::new();
    for h in hosts {
        let uri = h
            .uri
            .as_deref()
            .map(|u| format!(" ({u})"))
            .unwrap_or_default();
        out.push_str(&format!("== {}{uri} ==\n", h.name));
        match &h.survey {
            HostSurvey::Done(t) => out.push_str(&text(t)),
            HostSurvey::Failed(e) => out.push_str(&format!("error: {e}\n")),
            HostSurvey::Skipped(why) => out.push_str(&format!("skipped: {why}\n")),
        }
        if !out.ends_with("\n\n") {
            out.push('\n');
        }
    }
    let names = |pick: &dyn Fn(&HostSurvey<T>) -> bool| -> Vec<&str> {
        hosts
            .iter()
            .filter(|h| pick(&h.survey))
            .map(|h| h.name.as_str())
            .collect()
    };
    let flagged = names(&|s| matches!(s, HostSurvey::Done(t) if no(t)));
    let failed = names(&|s| matches!(s, HostSurvey::Failed(_)));
    let skipped = names(&|s| matches!(s, HostSurvey::Skipped(_)));
    let list = |n: &[&str]| {
        if n.len() > 10 {
            format!("{} … ({} more)", n[..10].join(", "), n.len() - 10)
        } else {
            n.join(", ")
        }
    };
    let mut parts = Vec::new();
    for (n, label) in [
        (&flagged, what),
        (&failed, "not read"),
        (&skipped, "skipped"),
    ] {
        if !n.is_empty() {
            parts.push(format!("{} {label} ({})", n.len(), list(n)));
        }
    }
    out.push_str(&format!(
        "fleet: {}{}\n",
        crate::text::plural(hosts.len(), "host", "hosts"),
        if parts.is_empty() {
            format!(", none {what}")
        } else {
            format!(": {}", parts.join("; "))
        }
    ));
    out
}

/// `{"hosts": [{"name", "uri", "status", KEY: …|"error"}]}`.
pub fn to_json<T>(hosts: &[Surveyed<T>], key: &str, json_of: impl Fn(&T) -> String) -> String {
    let hosts: Vec<Value> = hosts
        .iter()
        .map(|h| {
            let mut o = json!({"name": h.name, "uri": h.uri});
            if let Some(map) = o.as_object_mut() {
                match &h.survey {
                    HostSurvey::Done(t) => {
                        map.insert("status".to_owned(), json!("done"));
                        map.insert(
                            key.to_owned(),
                            serde_json::from_str(&json_of(t)).unwrap_or(Value::Null),
                        );
                    }
                    HostSurvey::Failed(e) => {
                        map.insert("status".to_owned(), json!("failed"));
                        map.insert("error".to_owned(), json!(e));
                    }
                    HostSurvey::Skipped(why) => {
                        map.insert("status".to_owned(), json!("skipped"));
                        map.insert("reason".to_owned(), json!(why));
                    }
                }
            }
            o
        })
        .collect();
    let mut text = serde_json::to_string_pretty(&json!({ "hosts": hosts })).unwrap_or_default();
    text.push('\n');
    text
}
