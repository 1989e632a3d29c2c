//! Step 1 of fleet planning: the hosts read, grouped into classes of hosts
//! alike (same spec keys, topology, running domains, facts and NIC names),
//! and per class each VM's solver input there or why it cannot go there.

use super::index::{ClassIx, HostIx, Per};
use super::Fleet;
use crate::model::{Warning, WarningKind};
use crate::solve::classes::FreeCore;
use crate::solve::{self, PlanRequest};
use crate::spec::SpecError;
use std::collections::{BTreeMap, BTreeSet};

/// One class of hosts alike: the per-VM inputs they share.
pub(super) struct HostClass {
    /// The request with every VM that may go to such a host.
    pub request: PlanRequest,
    /// VM name → index in `request.vms`.
    pub index: BTreeMap<String, usize>,
    /// VM name → why not.
    pub refused: BTreeMap<String, String>,
    /// The request's warnings, those about VMs refused left out.
    pub warnings: Vec<Warning>,
    /// Its hosts, in spec order.
    pub hosts: Vec<HostIx>,
    /// The free cores of one of its hosts.
    pub free: Vec<FreeCore>,
    /// Their most common thread count.
    pub threads: u32,
}

impl HostClass {
    /// The request of VM `name` on such a host, when it may go there.
    pub fn vm(&self, name: &str) -> Option<&solve::VmRequest> {
        self.index.get(name).map(|&i| &self.request.vms[i])
    }
}

/// The hosts grouped into classes, and the hosts that could not be read.
pub(super) struct Classes {
    /// Per host, its class (`None`: not read).
    pub of_host: Per<HostIx, Option<ClassIx>>,
    /// The classes, in the order of their first host.
    pub all: Per<ClassIx, HostClass>,
    /// Hosts not read, with why.
    pub errors: BTreeMap<HostIx, String>,
}

impl Classes {
    /// Groups the hosts read into classes, reading each class's request once.
    /// A spec key a host's topology refuses (a reservation it cannot hold) is
    /// the spec's error, not the host's: the whole plan is refused.
    pub fn read(fleet: &Fleet<'_>) -> Result<Classes, SpecError> {
        let mut classes = Classes {
            of_host: Per::new(),
            all: Per::new(),
            errors: BTreeMap::new(),
        };
        let mut keys: BTreeMap<String, ClassIx> = BTreeMap::new();
        for (h, input) in fleet.inputs.enumerate() {
            let input = match input {
                Ok(i) => i,
                Err(e) => {
                    classes.errors.insert(h, e.to_string());
                    classes.of_host.push(None);
                    continue;
                }
            };
            let key = class_key(fleet, h, input);
            if let Some(&c) = keys.get(&key) {
                classes.of_host.push(Some(c));
                classes.all[c].hosts.push(h);
                continue;
            }
            let mut class = host_class(fleet, h, input).map_err(|mut e| {
                e.message = format!("host {}: {}", fleet.host(h).name, e.message);
                e
            })?;
            class.hosts.push(h);
            let c = classes.all.push(class);
            keys.insert(key, c);
            classes.of_host.push(Some(c));
        }
        Ok(classes)
    }

    /// Host `h`'s class, when it was read.
    pub fn of(&self, h: HostIx) -> Option<&HostClass> {
        self.of_host[h].map(|c| &self.all[c])
    }
}

/// What makes two hosts alike: their spec keys, topology, running
/// domains, facts and NIC names (never for a host whose running VMs are in
/// the spec).
fn class_key(fleet: &Fleet<'_>, h: HostIx, input: &super::HostInput) -> String {
    let host = fleet.host(h);
    if input
        .running
        .iter()
        .any(|t| fleet.vm_index.contains_key(t.name.as_str()))
    {
        return format!("host {}", super::index::Index::get(h));
    }
    // A file or synthetic description read twice is the same topology; a
    // connection's is compared whole.
    let topology = match &host.source {
        crate::topology::Source::File(_) | crate::topology::Source::Synthetic(_) => {
            host.source.describe()
        }
        _ => {
            let mut t = input.topology.clone();
            t.source = String::new();
            serde_json::to_string(&t).unwrap_or_default()
        }
    };
    format!(
        "{}|{topology}|{:?}|{:?}|{:?}|{:?}",
        host.spec.host_key(),
        input.running,
        input
            .facts
            .as_ref()
            .map(|f| f.as_ref().map_err(ToString::to_string)),
        host.doctor_root.is_some(),
        host.nic_names
    )
}

/// One host's VM inputs and refusals.
fn host_class(
    fleet: &Fleet<'_>,
    h: HostIx,
    input: &super::HostInput,
) -> Result<HostClass, SpecError> {
    let host = fleet.host(h);
    let (mut request, mut warnings, refused_each) = host
        .spec
        .request_each(input.topology.clone(), &BTreeMap::new())?;
    plan_around_others(fleet, h, input, &mut request, &mut warnings);
    let mut refused: BTreeMap<String, String> = refused_each
        .into_iter()
        .map(|(name, e)| (name, e.message))
        .collect();
    for vm in &fleet.spec.vms {
        if let Some(why) = refusal_by_facts(fleet, vm, h, input, &mut warnings) {
            refused.entry(vm.name.clone()).or_insert(why);
        }
    }
    request.vms.retain(|vm| !refused.contains_key(&vm.name));
    // Warnings about VMs that cannot go there are no concern of this host.
    let warnings = warnings
        .into_iter()
        .filter(|w| w.vm.as_ref().is_none_or(|vm| !refused.contains_key(vm)))
        .collect();
    let index = request
        .vms
        .iter()
        .enumerate()
        .map(|(i, vm)| (vm.name.clone(), i))
        .collect();
    let free = solve::free_cores(&request);
    Ok(HostClass {
        threads: super::assign::threads(&free),
        free,
        request,
        index,
        refused,
        warnings,
        hosts: Vec::new(),
    })
}

/// Domains running on host `h` that the spec does not name: planned around.
fn plan_around_others(
    fleet: &Fleet<'_>,
    h: HostIx,
    input: &super::HostInput,
    request: &mut PlanRequest,
    warnings: &mut Vec<Warning>,
) {
    let host = fleet.host(h);
    let spec_names: BTreeSet<&str> = fleet.spec.vms.iter().map(|v| v.name.as_str()).collect();
    let usable = input.topology.usable_cpus();
    let uri = host.connect.as_deref().unwrap_or("its URI");
    for t in &input.running {
        if !spec_names.contains(t.name.as_str()) && host.spec.plans_around(&t.name) {
            request.fixed.extend(crate::spec::plan_around(
                t,
                uri,
                &usable,
                &request.reserved,
                warnings,
            ));
        }
    }
}

/// Why `vm` cannot go to host `h` by the host's facts (a NIC it lacks, a NIC
/// whose VFIO group is not viable, a kernel that cannot run real-time
/// vCPUs), if it cannot; a real-time VM on a host whose facts do not say
/// whether it can is a warning.
fn refusal_by_facts(
    fleet: &Fleet<'_>,
    vm: &crate::spec::FleetVm,
    h: HostIx,
    input: &super::HostInput,
    warnings: &mut Vec<Warning>,
) -> Option<String> {
    let nics = match fleet.spec.nics_on(vm, fleet.host(h)) {
        Ok(nics) => nics,
        Err(why) => return Some(why.to_string()),
    };
    let why = match &input.facts {
        Some(Err(e)) if !nics.is_empty() || vm.realtime => Some(e.to_string()),
        Some(Ok(facts)) => nics
            .iter()
            .find_map(|nic| facts.nics.get(nic)?.as_ref().err().map(ToString::to_string))
            .or_else(|| {
                vm.realtime
                    .then(|| {
                        facts
                            .realtime
                            .as_ref()?
                            .as_ref()
                            .err()
                            .map(ToString::to_string)
                    })
                    .flatten()
            }),
        _ => None,
    };
    let unknown_rt = matches!(&input.facts, Some(Ok(f)) if f.realtime.is_none());
    if why.is_none() && vm.realtime && unknown_rt {
        warnings.push(Warning::vm(
            &vm.name,
            WarningKind::Host,
            "whether real-time vCPUs can start here is not known (read through libvirt, which does not show kernel.sched_rt_runtime_us): give the host a doctor_root to check",
        ));
    }
    why
}

/// A host that could not be read, as a VM's refusal there says it.
pub(super) fn unread(error: &str) -> String {
    format!("the host could not be read: {error}")
}
