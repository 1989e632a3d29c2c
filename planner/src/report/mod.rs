//! Overlap analysis: which CPUs and physical cores [`Tenant`]s share
//! ([`conflicts()`]), what a [`Plan`] would move and which conflicts it removes
//! ([`moves()`]), printed as text with a host map (`text`) or as a picture
//! ([`svg`]). Reading domains into tenants is [`crate::libvirt::domain`]'s.

pub mod conflicts;
pub mod connected;
pub mod live;
pub mod moves;
mod pins;
pub mod svg;
mod text;

pub use conflicts::{conflicts, Conflict, ConflictKind, Severity};
pub use moves::{moves, planned_tenants, Move, Thread};
pub use pins::{check_pins, ForeignDomain, ForeignPins};

use crate::plan::Plan;
use crate::tenant::Tenant;
use crate::topology::HostTopology;
use serde::Serialize;
use std::collections::BTreeSet;

/// What applying a plan would do to the conflicts.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PlanEffect {
    /// Conflicts now that the plan removes.
    pub resolved: Vec<Conflict>,
    /// Conflicts now that stay under the plan (with their CPUs after it).
    pub remaining: Vec<Conflict>,
    /// Conflicts the plan would add.
    pub introduced: Vec<Conflict>,
}

/// What `pinplan report --format json` prints.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    /// Every tenant (the host first).
    pub tenants: Vec<Tenant>,
    /// Every conflict, errors first.
    pub conflicts: Vec<Conflict>,
    /// Threads a plan would move (empty without a plan).
    pub moves: Vec<Move>,
    /// With a plan: which conflicts it removes, leaves and adds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plan: Option<PlanEffect>,
    /// The CPUs counted as the host's (`null`: unknown, and host overlap
    /// not checked).
    pub host_cpus: Option<crate::cpuset::CpuSet>,
    /// What the reader should know about how the report was made.
    pub notes: Vec<String>,
    /// On the live host (`--connect` to this machine's libvirtd): stray
    /// threads and IRQs on VM CPUs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub live: Option<live::LiveHost>,
}

/// The note when no CPUs are known as the host's.
pub const HOST_CPUS_UNKNOWN: &str =
    "host CPUs: unknown (no isolcpus=, no --host-cpus): host overlap not checked";

impl Report {
    /// The report of `tenants` on `host`, compared with `plan` when given.
    pub fn new(host: &HostTopology, tenants: Vec<Tenant>, plan: Option<&Plan>) -> Report {
        let conflicts = conflicts(host, &tenants);
        let (moves, effect) = match plan {
            None => (Vec::new(), None),
            Some(plan) => {
                let after = self::conflicts(host, &planned_tenants(&tenants, plan));
                let before_keys: BTreeSet<_> = conflicts.iter().map(Conflict::identity).collect();
                let after_keys: BTreeSet<_> = after.iter().map(Conflict::identity).collect();
                let effect = PlanEffect {
                    resolved: conflicts
                        .iter()
                        .filter(|c| !after_keys.contains(&c.identity()))
                        .cloned()
                        .collect(),
                    remaining: after
                        .iter()
                        .filter(|c| before_keys.contains(&c.identity()))
                        .cloned()
                        .collect(),
                    introduced: after
                        .iter()
                        .filter(|c| !before_keys.contains(&c.identity()))
                        .cloned()
                        .collect(),
                };
                (moves(&tenants, plan), Some(effect))
            }
        };
        let host_cpus = tenants
            .iter()
            .find(|t| t.kind == crate::tenant::TenantKind::Host)
            .map(|t| t.cpus.clone());
        let notes = if host_cpus.is_none() {
            vec![HOST_CPUS_UNKNOWN.to_owned()]
        } else {
            Vec::new()
        };
        Report {
            tenants,
            conflicts,
            moves,
            plan: effect,
            host_cpus,
            notes,
            live: None,
        }
    }

    /// Whether any conflict is an error (exit status 1). With a plan, the
    /// conflicts that count are those after it: the ones it leaves and the
    /// ones it adds (so `report --plan` can gate a change in a script).
    pub fn has_errors(&self) -> bool {
        let error = |c: &Conflict| c.severity == Severity::Error;
        match &self.plan {
            None => self.conflicts.iter().any(error),
            Some(effect) => effect.remaining.iter().chain(&effect.introduced).any(error),
        }
    }

    /// The JSON form.
    pub fn to_json(&self) -> String {
        let mut text = serde_json::to_string_pretty(self).unwrap_or_default();
        text.push('\n');
        text
    }
}
