//! Why a VM could not be placed, and the smallest change that makes it fit.
//!
//! One summary for the host (what the VMs ask for, what is free, what fits,
//! who is left out), then for each unplaced VM: what it needs (cores, on one
//! node or not), what is free per NUMA node (after the host's reservation and
//! fixed tenants, and after the VMs that were placed — naming a few of them,
//! never the full list), which constraint binds, and a fix found by trying
//! single changes in order — thread policy, emulator, NUMA policy, NIC
//! affinity, a smaller demand from the tables (`min_fraction`), fewer vCPUs.
//! A change counts only if the VM then fits without pushing out a VM that was
//! placed: first checked against the cores the plan leaves free (cheap), then,
//! for policy changes and while time is left before the deadline, by
//! re-solving exactly.

mod fix;

use super::classes::{self, cores_needed, FreeCore};
use super::{
    EmulatorPolicy, NicAffinity, NumaPolicy, Placement, PlanRequest, SolveOptions, SolverKind,
    ThreadPolicy, VmRequest,
};
use crate::deadline::Deadline;
use crate::ids::{CoreId, NodeId};
use crate::model::{Binding, Message};
use crate::plan::Explanation;
use std::collections::BTreeSet;

fn node_name(node: Option<NodeId>) -> String {
    node.map_or_else(|| "node ?".to_owned(), |n| format!("node {n}"))
}

/// "node 1", or "nodes 0, 1".
fn nodes_name(nodes: &[NodeId]) -> String {
    match nodes {
        [one] => node_name(Some(*one)),
        _ => {
            let ids: Vec<String> = nodes.iter().map(ToString::to_string).collect();
            format!("nodes {}", ids.join(", "))
        }
    }
}

fn plural(n: u32, one: &str) -> String {
    crate::text::plural(n as usize, one, &format!("{one}s"))
}

/// What one explanation run shares: the request and its placement, the
/// free cores, the host as the placement leaves it, and the time left.
#[derive(Clone)]
struct Explainer<'a> {
    request: &'a PlanRequest,
    placement: &'a Placement,
    options: &'a SolveOptions,
    deadline: Deadline,
    free: Vec<FreeCore>,
    taken: BTreeSet<CoreId>,
    nodes: BTreeSet<Option<NodeId>>,
    placed_names: Vec<&'a str>,
    /// A few of the placed VMs' names, for "left after vm1, vm2 and 3 more".
    placed_list: Message,
    /// The host with the placed VMs as fixed tenants ([`leftover`]).
    rest: PlanRequest,
    /// The cores the placed VMs ask for ([`asked_cores`]).
    placed_cores: u32,
    /// Changed VMs that a re-solve proved cannot join the placed VMs, each
    /// without its name ([`fix`]): shared by the threads of one run, so a
    /// change asked of several alike VMs is solved once.
    refused: &'a std::sync::Mutex<Vec<VmRequest>>,
}

/// What a VM needs and what the host has for it.
struct Need<'f> {
    /// Free cores the VM may use.
    allowed: Vec<&'f FreeCore>,
    /// Cores it needs.
    cores: u32,
    /// The most allowed cores on one node.
    best_node: u32,
}

impl<'a> Explainer<'a> {
    /// Free cores of `node` among `cores`, without the placed VMs' when
    /// `exclude_taken`.
    fn per_node(&self, cores: &[&FreeCore], node: Option<NodeId>, exclude_taken: bool) -> u32 {
        let n = cores
            .iter()
            .filter(|c| c.node == node && !(exclude_taken && self.taken.contains(&c.core)))
            .count();
        u32::try_from(n).unwrap_or(0)
    }

    fn need(&self, vm: &VmRequest) -> Need<'_> {
        let allowed: Vec<&FreeCore> = self
            .free
            .iter()
            .filter(|c| classes::allowed(vm, c.node, c.threads()))
            .collect();
        let typical_threads = allowed
            .iter()
            .copied()
            .chain(self.free.iter())
            .map(|c| c.threads())
            .max()
            .unwrap_or(1);
        let cores = cores_needed(vm, typical_threads);
        let best_node = self
            .nodes
            .iter()
            .map(|&n| self.per_node(&allowed, n, false))
            .max()
            .unwrap_or(0);
        Need {
            allowed,
            cores,
            best_node,
        }
    }

    /// Per NUMA node: free cores, and what the placed VMs leave of them.
    fn free_lines(&self, vm: &VmRequest) -> Vec<Message> {
        let all: Vec<&FreeCore> = self.free.iter().collect();
        self.nodes
            .iter()
            .map(|&node| {
                let total = self.per_node(&all, node, false);
                let left = self.per_node(&all, node, true);
                let nic = if node.is_some_and(|n| vm.nic_nodes.contains(&n)) {
                    " (the NIC's node)"
                } else {
                    ""
                };
                let free = format!("{}{nic}: {} free", node_name(node), plural(total, "core"));
                if left == total {
                    Message::from(free)
                } else {
                    Message::from(format!("{free}, {left} left after "))
                        .then(self.placed_list.clone())
                }
            })
            .collect()
    }

    /// Which constraint binds.
    /// `memory_short`: what [`Self::memory_short`] says of it, if anything.
    fn binding(&self, vm: &VmRequest, need: &Need, memory_short: bool) -> Binding {
        let cores = need.cores as usize;
        let without_nic = VmRequest {
            nic_affinity: NicAffinity::Ignore,
            cell_nodes: Vec::new(),
            ..vm.clone()
        };
        if need.allowed.is_empty()
            && vm.threads == ThreadPolicy::Require
            && self.free.iter().all(|c| !vm.threads.accepts(c.threads()))
        {
            Binding::Threads
        } else if vm.required_nodes().is_some()
            && need.allowed.len() < cores
            && self
                .free
                .iter()
                .filter(|c| classes::allowed(&without_nic, c.node, c.threads()))
                .count()
                >= cores
        {
            Binding::Nic
        } else if memory_short {
            Binding::Memory
        } else if need.allowed.len() < cores {
            Binding::Capacity
        } else if vm.numa == NumaPolicy::Strict && need.best_node < need.cores {
            Binding::Numa
        } else {
            Binding::Capacity
        }
    }

    /// When memory binds `vm`: some node has the free cores it needs but no
    /// node with them has its memory left. The sentence says what each such
    /// node has and what to allocate where (the node that lacks least).
    fn memory_short(&self, vm: &VmRequest, need: &Need) -> Option<String> {
        let memory = vm.memory?;
        let (page, bytes) = super::memory::need(vm)?;
        let mut ledger = super::memory::Ledger::new(self.request);
        for (&i, cores) in &self.placement.cores {
            ledger.take(&self.request.vms[i], cores);
        }
        // Nodes whose free cores would hold it whole.
        let mut per_node: std::collections::BTreeMap<Option<crate::ids::NodeId>, u32> =
            std::collections::BTreeMap::new();
        for c in need
            .allowed
            .iter()
            .filter(|c| !self.taken.contains(&c.core))
        {
            *per_node.entry(c.node).or_default() += 1;
        }
        let roomy: Vec<Option<crate::ids::NodeId>> = per_node
            .into_iter()
            .filter(|&(_, n)| n >= need.cores)
            .map(|(k, _)| k)
            .collect();
        if roomy.is_empty() {
            return None;
        }
        let left: Vec<(Option<crate::ids::NodeId>, f64)> =
            roomy.iter().map(|&k| (k, ledger.left(k, page))).collect();
        if left.iter().any(|&(_, l)| l + 1e-6 >= bytes) {
            return None;
        }
        // The ledger counts MiB.
        let page_bytes = page as f64 / 1024.0;
        let huge = page > crate::memory::NORMAL_PAGE_KIB;
        let what = if huge {
            format!(
                "{} of {} pages on one node",
                crate::memory::human(memory.bytes),
                crate::memory::human(page * 1024)
            )
        } else {
            format!(
                "{} of memory on one node",
                crate::memory::human(memory.bytes)
            )
        };
        let has: Vec<String> = left
            .iter()
            .map(|&(k, l)| {
                if huge {
                    format!(
                        "{} has {} free",
                        node_name(k),
                        (l / page_bytes).floor() as u64
                    )
                } else {
                    format!(
                        "{} has {} free",
                        node_name(k),
                        crate::memory::human((l.max(0.0) * 1_048_576.0) as u64)
                    )
                }
            })
            .collect();
        let (best, most) = left
            .iter()
            .copied()
            .max_by(|a, b| a.1.total_cmp(&b.1))
            .unwrap_or((None, 0.0));
        let advice = match (huge, best) {
            (true, Some(node)) => {
                let missing = ((bytes - most.max(0.0)) / page_bytes).ceil() as u64;
                let total = self
                    .request
                    .host
                    .numa_nodes
                    .iter()
                    .find(|n| n.id == node)
                    .and_then(|n| n.hugepages.iter().find(|p| p.size_kib == page))
                    .map_or(0, |p| p.total);
                format!(
                    "allocate {missing} more on node {node}: echo {} > /sys/devices/system/node/node{node}/hugepages/hugepages-{page}kB/nr_hugepages",
                    total + missing
                )
            }
            _ => "free memory on one of them, or give it less".to_owned(),
        };
        Some(format!(" — it needs {what}; {} — {advice}", has.join(", ")))
    }

    /// "N cores free after the host's M reserved cores and K of fixed tenants".
    fn free_summary(&self) -> String {
        let reserved = self.request.host.whole_cores(&self.request.reserved).len();
        let fixed = self
            .request
            .host
            .cores
            .iter()
            .filter(|c| {
                self.request
                    .fixed
                    .iter()
                    .any(|f| c.cpus.intersects(&f.cpus))
            })
            .count();
        let mut parts = vec![format!(
            "{} free",
            plural(u32::try_from(self.free.len()).unwrap_or(0), "core")
        )];
        if reserved > 0 {
            parts.push(format!(
                "after the host's {}",
                plural(u32::try_from(reserved).unwrap_or(0), "reserved core")
            ));
        }
        if fixed > 0 {
            parts.push(format!(
                "and {} of fixed tenants",
                plural(u32::try_from(fixed).unwrap_or(0), "core")
            ));
        }
        parts.join(" ")
    }

    /// The explanation of one unplaced VM.
    fn explain_vm(&mut self, i: usize, vm: &VmRequest) -> Explanation {
        let fix = self.fix(i, vm);
        let need = self.need(vm);
        let needs = needs_text(vm, need.cores);
        let memory_short = self.memory_short(vm, &need);
        let binding = self.binding(vm, &need, memory_short.is_some());
        let total_free = u32::try_from(self.free.len()).unwrap_or(0);
        let left_allowed = u32::try_from(
            need.allowed
                .iter()
                .filter(|c| !self.taken.contains(&c.core))
                .count(),
        )
        .unwrap_or(0);
        let usable_note = if left_allowed < total_free && !self.placed_names.is_empty() {
            Message::from(format!(", {left_allowed} usable by it left after "))
                .then(self.placed_list.clone())
        } else {
            Message::new()
        };
        let why = match binding {
            Binding::Threads => {
                " — threads=require needs cores with two usable threads and this host has none"
                    .to_owned()
            }
            Binding::Nic => format!(
                " — its NIC's {} {} only {} for it",
                nodes_name(&vm.nic_nodes),
                if vm.nic_nodes.len() > 1 {
                    "have"
                } else {
                    "has"
                },
                plural(u32::try_from(need.allowed.len()).unwrap_or(0), "free core")
            ),
            Binding::Numa => format!(
                " — no single node has {} (the most on one node is {})",
                need.cores, need.best_node
            ),
            Binding::Capacity => String::new(),
            Binding::Memory => memory_short.unwrap_or_default(),
        };
        let message = Message::new()
            .vm(&vm.name)
            .text(format!(" needs {needs}; {}", self.free_summary()))
            .then(usable_note)
            .text(why)
            .then(match &fix {
                Some(f) => Message::from(" — ").then(f.clone()),
                None => Message::from(" — no single change found that makes it fit"),
            });
        Explanation {
            vm: vm.name.clone(),
            needs,
            free: self.free_lines(vm),
            binding,
            fix,
            message,
        }
    }
}

/// "3 cores (4 vCPUs + its emulator, threads=require) on one NUMA node".
fn needs_text(vm: &VmRequest, cores: u32) -> String {
    let where_ = match (vm.required_nodes(), vm.numa) {
        (Some(nodes), _) if !vm.cell_nodes.is_empty() => {
            format!(" with vCPUs on each of {} (its NICs')", nodes_name(nodes))
        }
        (Some(nodes), _) => format!(" on {} (its NIC's)", nodes_name(nodes)),
        (None, NumaPolicy::Strict) => " on one NUMA node".to_owned(),
        _ => String::new(),
    };
    let emu = if vm.emulator == EmulatorPolicy::Isolate {
        " + its emulator"
    } else {
        ""
    };
    format!(
        "{} ({}{emu}, threads={}){where_}",
        plural(cores, "core"),
        plural(vm.vcpus, "vCPU"),
        vm.threads.name()
    )
}

/// Explanations for every VM the placement left out.
pub fn explain(
    request: &PlanRequest,
    placement: &Placement,
    options: &SolveOptions,
    deadline: Deadline,
) -> Vec<Explanation> {
    let free: Vec<FreeCore> = classes::free_cores(request);
    let placed_names: Vec<&str> = placement
        .cores
        .keys()
        .filter_map(|&i| request.vms.get(i).map(|v| v.name.as_str()))
        .collect();
    let placed_cores = asked_cores(
        placement.cores.keys().filter_map(|&i| request.vms.get(i)),
        &free,
    );
    let refused = std::sync::Mutex::new(refused_by_the_plan(request, placement));
    let mut explainer = Explainer {
        request,
        placement,
        options,
        deadline,
        taken: placement.cores.values().flatten().copied().collect(),
        nodes: free.iter().map(|c| c.node).collect(),
        free,
        placed_list: Message::some_names(&placed_names, 3),
        placed_names,
        rest: fix::leftover(request, placement),
        placed_cores,
        refused: &refused,
    };
    let unplaced: Vec<usize> = (0..request.vms.len())
        .filter(|i| !placement.cores.contains_key(i))
        .collect();
    // Each VM's explanation is its own (its re-solves start from the same
    // placement): with re-solves to run and cores to run them on, several
    // threads take the VMs in turn, each with its solver process.
    let threads = std::thread::available_parallelism()
        .map_or(1, std::num::NonZeroUsize::get)
        .min(MOST_THREADS)
        .min(unplaced.len());
    let resolves = options.explain && options.solver == SolverKind::Ilp && !deadline.is_past();
    if !resolves || threads < 2 {
        return unplaced
            .iter()
            .map(|&i| explainer.explain_vm(i, &request.vms[i]))
            .collect();
    }
    let next = std::sync::atomic::AtomicUsize::new(0);
    let take = || next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let mut done: Vec<(usize, Explanation)> = std::thread::scope(|scope| {
        // A thread the system refuses (a limit on processes or memory) is
        // no error: the threads there are, this one at least, do the work.
        let workers: Vec<_> = (1..threads)
            .map_while(|_| {
                let mut mine = explainer.clone();
                let (take, unplaced) = (&take, &unplaced);
                std::thread::Builder::new()
                    .spawn_scoped(scope, move || {
                        let mut done = Vec::new();
                        while let Some(&i) = unplaced.get(take()) {
                            done.push((i, mine.explain_vm(i, &request.vms[i])));
                        }
                        done
                    })
                    .ok()
            })
            .collect();
        let mut done = Vec::new();
        while let Some(&i) = unplaced.get(take()) {
            done.push((i, explainer.explain_vm(i, &request.vms[i])));
        }
        for w in workers {
            done.extend(w.join().unwrap_or_else(|e| std::panic::resume_unwind(e)));
        }
        done
    });
    // In the VMs' order, whichever thread explained each.
    done.sort_by_key(|&(i, _)| i);
    done.into_iter().map(|(_, e)| e).collect()
}

/// The most threads explanations run on.
const MOST_THREADS: usize = 4;

/// The VMs a proven plan leaves out, as questions of [`fix`]'s re-solve
/// (without their names, at priority 0): none of them fits beside every
/// VM the plan places. Were there room for one, the plan placing it too
/// would keep every running VM and every VM of each priority level the
/// plan places and add one, and so be better at the first objective where
/// they differ (running VMs placed, then VMs per level): not the proven
/// optimum. A change that turns a VM into one of these is then a "no"
/// without a solve.
pub(in crate::solve) fn refused_by_the_plan(
    request: &PlanRequest,
    placement: &Placement,
) -> Vec<VmRequest> {
    if !placement.proven || placement.fault.is_some() {
        return Vec::new();
    }
    request
        .vms
        .iter()
        .enumerate()
        .filter(|(i, _)| !placement.cores.contains_key(i))
        .map(|(_, vm)| fix::question(vm))
        .collect()
}

/// The cores `vms` ask for: each its fewest, on cores of the most usable
/// threads among `free` (no placement gives them fewer).
pub(crate) fn asked_cores<'v>(
    vms: impl IntoIterator<Item = &'v VmRequest>,
    free: &[FreeCore],
) -> u32 {
    let threads = free.iter().map(FreeCore::threads).max().unwrap_or(1);
    vms.into_iter()
        .map(|vm| cores_needed(vm, threads))
        .fold(0, u32::saturating_add)
}

/// One line for the host when VMs were left out: "91 VMs ask for 375 cores,
/// 190 are free: 65 fit; left out: vm3, vm9, vm12 and 23 more".
pub fn summary(request: &PlanRequest, placement: &Placement) -> Message {
    let free = classes::free_cores(request);
    let asked = asked_cores(&request.vms, &free);
    let left_out: Vec<&str> = request
        .vms
        .iter()
        .enumerate()
        .filter(|(i, _)| !placement.cores.contains_key(i))
        .map(|(_, vm)| vm.name.as_str())
        .collect();
    Message::from(format!(
        "{} ask{} for {}, {} free: {} fit; left out: ",
        plural(u32::try_from(request.vms.len()).unwrap_or(0), "VM"),
        if request.vms.len() == 1 { "s" } else { "" },
        plural(asked, "core"),
        if free.len() == 1 {
            "1 is".to_owned()
        } else {
            format!("{} are", free.len())
        },
        placement.cores.len(),
    ))
    .then(Message::some_names(&left_out, 5))
}
