//! The VM names a shared plan is kept under (`#0`, `#1`, … in the memo of
//! hosts alike) and the real names each host's copy takes.
//!
//! The single-host plan still carries VM names inside rendered text (the
//! summary's "left out" list, explanation messages, warnings that start with
//! a VM's name), so a copy is renamed there too; this module is the one
//! place that does it.

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

    /// `plan` with each VM renamed (plans, unplaced, explanations, the
    /// summary's VMs left out, and warnings that start with the name).
    pub fn rename(&self, plan: &Plan) -> Plan {
        let map: BTreeMap<&str, &str> = self
            .from
            .iter()
            .map(String::as_str)
            .zip(self.to.iter().map(String::as_str))
            .collect();
        let new = |name: &str| {
            map.get(name)
                .map_or_else(|| name.to_owned(), |n| (*n).to_owned())
        };
        let mut out = plan.clone();
        for vm in &mut out.vms {
            vm.name = new(&vm.name);
        }
        for n in &mut out.unplaced {
            *n = new(n);
        }
        // "… fit; left out: a, b and 3 more": the names are the unplaced VMs,
        // in order; what comes before them names none.
        if let Some(summary) = &mut out.summary {
            if let Some((head, _)) = summary.split_once("; left out: ") {
                let names: Vec<&str> = out.unplaced.iter().map(String::as_str).collect();
                *summary = format!(
                    "{head}; left out: {}",
                    crate::solve::explain::some_names(&names, 5)
                );
            }
        }
        for e in &mut out.explanations {
            let old = e.vm.clone();
            e.vm = new(&old);
            if let Some(rest) = e.message.strip_prefix(old.as_str()) {
                e.message = format!("{}{rest}", e.vm);
            }
        }
        for w in &mut out.warnings {
            if let Some((name, rest)) = w.split_once(": ") {
                if let Some(n) = map.get(name) {
                    *w = format!("{n}: {rest}");
                }
            }
        }
        out
    }
}

/// `#0`, `#1`, … up to `n`.
fn numbered(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("#{i}")).collect()
}
