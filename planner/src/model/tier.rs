//! The objectives, one enum for a host's plan and a fleet's assignment:
//! each is optimised after the ones before it and held at its optimum
//! while the next is (docs/plan.md, "Objective"; docs/fleet.md).

use std::fmt;

/// One objective of a lexicographic order. A host's plan uses
/// [`Tier::RunningPlaced`] to [`Tier::PartialL3`] (without the fleet's
/// three), and compaction [`Tier::PartialNodes`] too; a fleet's assignment
/// uses [`Tier::RunningKept`], the placed VMs, vCPUs and cores,
/// [`Tier::HostMoves`] and [`Tier::HostsTouched`]. Each counts what users
/// count; [`Tier::more_is_better`] says which way it goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Tier {
    /// (host 0) Every running VM the plan may move placed (before any
    /// priority: left out, it would go on running where others may be put).
    RunningPlaced,
    /// (fleet 0) Most running VMs that may not move kept on their host.
    RunningKept,
    /// (1) Most VMs placed at this priority level; levels highest first.
    Placed(i64),
    /// (2) Then the most vCPUs placed: the bigger work, with the same count.
    Vcpus,
    /// (host 2b) Fewest vCPUs of running VMs whose CPU changes.
    VcpusMoved,
    /// (3) Fewest cores used.
    Cores,
    /// (host 4) Fewest NUMA nodes beyond the first for `numa = "preferred"`
    /// VMs.
    ExtraNodes,
    /// (host 5) Fewest cores off a preferred NIC's node.
    NicRemote,
    /// (host 6) Fewest L3 domains per VM, summed.
    L3PerVm,
    /// (host 7) Fewest partially used L3 domains.
    PartialL3,
    /// (host, compaction only) Fewest partially used NUMA nodes: some of
    /// their free cores used, some not.
    PartialNodes,
    /// (fleet) Fewest running (movable) VMs given another host.
    HostMoves,
    /// (fleet) Fewest hosts with a VM of the spec.
    HostsTouched,
}

impl Tier {
    /// A plan's objectives after its priority levels, in their order (what
    /// a plan's [`super::plan::Objective`] holds; running VMs' moves and
    /// compaction's partly used nodes come in where those apply).
    pub const AFTER_LEVELS: [Tier; 6] = [
        Tier::Vcpus,
        Tier::Cores,
        Tier::ExtraNodes,
        Tier::NicRemote,
        Tier::L3PerVm,
        Tier::PartialL3,
    ];

    /// Whether the best value is the largest (VMs, vCPUs), not the smallest.
    /// Solvers minimise: they take these negated.
    pub fn more_is_better(self) -> bool {
        matches!(
            self,
            Tier::RunningPlaced | Tier::RunningKept | Tier::Placed(_) | Tier::Vcpus
        )
    }

    /// Whether it counts VMs placed (the levels that come first).
    pub fn places_vms(self) -> bool {
        matches!(self, Tier::RunningPlaced | Tier::Placed(_))
    }
}

/// Its name in traces, in `fleet.json` (`assignment`, `gap.objective`) and
/// in the text.
impl fmt::Display for Tier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Tier::RunningPlaced => f.write_str("running VMs placed"),
            Tier::RunningKept => f.write_str("running VMs kept"),
            Tier::Placed(level) => write!(f, "VMs placed at priority {level}"),
            Tier::Vcpus => f.write_str("vCPUs placed"),
            Tier::VcpusMoved => f.write_str("vCPUs moved"),
            Tier::Cores => f.write_str("cores used"),
            Tier::ExtraNodes => f.write_str("extra NUMA nodes"),
            Tier::NicRemote => f.write_str("cores off the NIC's node"),
            Tier::L3PerVm => f.write_str("L3 domains per VM"),
            Tier::PartialL3 => f.write_str("partially used L3 domains"),
            Tier::PartialNodes => f.write_str("partially used NUMA nodes"),
            Tier::HostMoves => f.write_str("moves"),
            Tier::HostsTouched => f.write_str("hosts touched"),
        }
    }
}

impl serde::Serialize for Tier {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

#[cfg(test)]
mod tests {
    use super::Tier;

    #[test]
    fn what_users_want_most_of_is_the_counts_of_what_is_placed_or_kept() {
        let more: Vec<Tier> = [
            Tier::RunningPlaced,
            Tier::RunningKept,
            Tier::Placed(-3),
            Tier::Vcpus,
            Tier::VcpusMoved,
            Tier::Cores,
            Tier::ExtraNodes,
            Tier::NicRemote,
            Tier::L3PerVm,
            Tier::PartialL3,
            Tier::PartialNodes,
            Tier::HostMoves,
            Tier::HostsTouched,
        ]
        .into_iter()
        .filter(|t| t.more_is_better())
        .collect();
        assert_eq!(
            more,
            [
                Tier::RunningPlaced,
                Tier::RunningKept,
                Tier::Placed(-3),
                Tier::Vcpus
            ]
        );
        assert_eq!(
            serde_json::to_string(&[Tier::Placed(2), Tier::HostMoves]).unwrap(),
            r#"["VMs placed at priority 2","moves"]"#
        );
    }
}
