//! The placement policies a spec sets per VM, as the solver, the plan and
//! the checks read them, with the rules that follow from each written once
//! here: which cores a thread policy may use and how many vCPUs one carries.

use serde::{Deserialize, Serialize};

/// How vCPUs use SMT siblings (names follow OpenStack Nova).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ThreadPolicy {
    /// One vCPU per physical core; the siblings stay idle, owned by the VM.
    Isolate,
    /// vCPUs fill every thread of their cores; only cores with 2+ usable threads.
    Require,
    /// Like require, but cores with a single usable thread may be used too.
    Prefer,
}

impl ThreadPolicy {
    /// The spec/plan name.
    pub fn name(self) -> &'static str {
        match self {
            ThreadPolicy::Isolate => "isolate",
            ThreadPolicy::Require => "require",
            ThreadPolicy::Prefer => "prefer",
        }
    }

    /// Whether a core with `threads` usable threads may carry vCPUs of this
    /// policy: `require` needs siblings (two threads at least), the others
    /// take any core.
    pub fn accepts(self, threads: u32) -> bool {
        !(self == ThreadPolicy::Require && threads < 2)
    }

    /// The vCPU-bearing CPUs one core of `threads` usable threads gives:
    /// one with `isolate` (the siblings stay idle), every thread otherwise.
    pub fn cpus_per_core(self, threads: u32) -> u32 {
        match self {
            ThreadPolicy::Isolate => 1,
            ThreadPolicy::Require | ThreadPolicy::Prefer => threads,
        }
    }

    /// Whole cores of `threads` usable threads that carry `cpus` CPUs of
    /// this policy: one per CPU with `isolate`, else the CPUs over the
    /// threads, rounded up. (An isolated emulator's extra core is the VM's
    /// rule, not the policy's: `classes::cores_needed`.)
    pub fn cores_for(self, cpus: u32, threads: u32) -> u32 {
        cpus.div_ceil(self.cpus_per_core(threads.max(1)))
    }
}

/// Where the emulator (and I/O) threads run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EmulatorPolicy {
    /// On the host's reserved CPUs.
    Host,
    /// On one more CPU of the VM's own (an idle sibling when there is one).
    Isolate,
    /// On the core(s) of the VM's housekeeping vCPUs, which no poll-mode
    /// vCPU shares (the RHEL/OSP NFV layout).
    WithHousekeeping,
}

/// How a VM may use NUMA nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NumaPolicy {
    /// All vCPUs (and memory) on one node.
    Strict,
    /// One node unless impossible.
    Preferred,
    /// Any nodes; the plan records guest NUMA cells.
    Spread,
}

/// How much the NIC's NUMA node matters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NicAffinity {
    /// vCPUs only on the NIC's node.
    Required,
    /// As many as possible on it.
    Preferred,
    /// Don't care.
    #[default]
    Ignore,
}

/// The constraint that keeps a VM out of a plan (`binding` in the plan's
/// explanations).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Binding {
    /// `threads = "require"` on a host without SMT.
    Threads,
    /// Its NIC's node is too small.
    Nic,
    /// No single node is big enough under `numa = "strict"`.
    Numa,
    /// Not enough free cores.
    Capacity,
    /// Cores enough on some node, but not its memory (page pool).
    Memory,
}

impl Binding {
    /// The name the plan gives it.
    pub fn name(self) -> &'static str {
        match self {
            Binding::Threads => "threads",
            Binding::Nic => "nic",
            Binding::Numa => "numa",
            Binding::Capacity => "capacity",
            Binding::Memory => "memory",
        }
    }
}

impl std::fmt::Display for Binding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn require_needs_two_threads_and_isolate_one_cpu_a_core() {
        use ThreadPolicy::{Isolate, Prefer, Require};
        for (policy, threads, accepts, cores_for_5) in [
            (Require, 1, false, 5),
            (Require, 2, true, 3),
            (Prefer, 1, true, 5),
            (Prefer, 2, true, 3),
            (Isolate, 1, true, 5),
            (Isolate, 2, true, 5),
        ] {
            assert_eq!(policy.accepts(threads), accepts, "{policy:?} {threads}");
            assert_eq!(
                policy.cores_for(5, threads),
                cores_for_5,
                "{policy:?} {threads}"
            );
        }
    }

    #[test]
    fn names_are_the_serialized_names() {
        for b in [
            Binding::Threads,
            Binding::Nic,
            Binding::Numa,
            Binding::Capacity,
            Binding::Memory,
        ] {
            assert_eq!(serde_json::to_value(b).unwrap(), b.name());
        }
        for t in [
            ThreadPolicy::Isolate,
            ThreadPolicy::Require,
            ThreadPolicy::Prefer,
        ] {
            assert_eq!(serde_json::to_value(t).unwrap(), t.name());
        }
    }
}
