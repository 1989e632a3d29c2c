//! The VM names a shared plan is kept under (`#0`, `#1`, … in the memo of
//! hosts alike) and the real names each host's copy takes.
//!
//! A plan keeps every VM name it mentions as a value (its sentences are
//! [`crate::model::Message`]s), so a copy is renamed without editing text.

use crate::plan::Plan;
use crate::solve::PlanRequest;
use std::collections::BTreeMap;

/// A renaming of a plan's VMs: name `from[i]` becomes `to[i]`.
pub(super) struct Names {
    from: Vec<String>,
    to: Vec<String>,
}

impl Names {
    /// From `request`'s VM names to the placeholders `#0`, `#1`, ….
    pub fn placeholders(request: &PlanRequest) -> Names {
        let from: Vec<String> = request.vms.iter().map(|v| v.name.clone()).collect();
        Names {
            to: numbered(from.len()),
            from,
        }
    }

    /// From the placeholders to the host's VM names `names`, in order.
    pub fn real(names: &[&str]) -> Names {
        Names {
            from: numbered(names.len()),
            to: names.iter().map(|n| (*n).to_owned()).collect(),
        }
    }

    /// `plan` with each VM renamed: every place it names a VM holds the name
    /// as a value ([`Plan::rename`]), so no text is edited.
    pub fn rename(&self, plan: &Plan) -> Plan {
        let map: BTreeMap<&str, &str> = self
            .from
            .iter()
            .map(String::as_str)
            .zip(self.to.iter().map(String::as_str))
            .collect();
        let mut out = plan.clone();
        out.rename(&|name: &str| {
            map.get(name)
                .map_or_else(|| name.to_owned(), |n| (*n).to_owned())
        });
        out
    }
}

/// `#0`, `#1`, … up to `n`.
fn numbered(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("#{i}")).collect()
}
