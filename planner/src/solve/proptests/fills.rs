//! Issue 28: VMs that use every free core or fewer, strict, preferred and
//! spread, some preferring a NIC's node, over nodes of several L3 domains — where objectives 6–7 are ended by the
//! search over what each node holds (`ilp::agg::fills`): the ILP's
//! objective equals the per-core oracle's, every plan is safe, and the
//! search decides most cases on full hosts and on the others (or it proves
//! little).

use super::*;
use crate::solve::ilp::agg;
use crate::solve::Tier;

/// A host of 1–3 nodes of 2–3 L3 domains of 2–3 cores; on hosts of one
/// thread per core some CPUs reserved or given to a tenant (domains of fewer
/// cores), on hosts of two none (a lone thread would be another class).
fn host() -> impl Strategy<Value = HostSpec> {
    (
        1u32..=3,
        2u32..=3,
        2u32..=3,
        prop_oneof![Just(1u32), Just(2)],
        prop::collection::vec(any::<u32>(), MAX_PUS),
        prop::collection::vec(any::<u32>(), 8),
        prop::collection::vec(
            prop_oneof![
                12 => Just(Tag::Free),
                2 => Just(Tag::Reserved),
                1 => Just(Tag::FixedA),
            ],
            MAX_PUS,
        ),
    )
        .prop_map(|(nodes, domains, cores, smt, pu_keys, node_keys, tags)| {
            let tags = if smt == 1 {
                tags
            } else {
                vec![Tag::Free; MAX_PUS]
            };
            HostSpec {
                packages: 1,
                nodes_per_package: nodes,
                l3: domains + 1,
                cores_per_group: cores,
                smt,
                pu_keys,
                node_keys,
                tags,
            }
        })
        .prop_filter("too many cores for the oracle", |s| {
            s.groups() * s.cores_per_group <= 12
        })
}

/// VMs of `wants` cores within the host's `free` cores (with `full`, the
/// last takes what is left: every free core used), `threads = "prefer"`;
/// `numa[i]`: VM `i`'s NUMA policy (strict where it has none) and, where
/// it has one, the node of a NIC it prefers.
fn filling(
    free: u32,
    wants: &[u32],
    numa: &[(NumaPolicy, Option<usize>)],
    smt: u32,
    full: bool,
) -> Vec<VmSpec> {
    let mut sizes = Vec::new();
    let mut left = free;
    for &w in wants {
        if left == 0 {
            break;
        }
        let s = w.min(left);
        sizes.push(s);
        left -= s;
    }
    if full && left > 0 {
        match sizes.last_mut() {
            Some(last) => *last += left,
            None => sizes.push(left),
        }
    }
    sizes
        .iter()
        .zip(
            numa.iter()
                .chain(std::iter::repeat(&(NumaPolicy::Strict, None))),
        )
        .map(|(&s, &(numa, nic))| VmSpec {
            vcpus: s * smt,
            threads: ThreadPolicy::Prefer,
            emulator: EmulatorPolicy::Host,
            numa,
            nic_affinity: if nic.is_some() {
                NicAffinity::Preferred
            } else {
                NicAffinity::Ignore
            },
            nic_node: nic,
            second_nic: None,
            iothreads: 0,
            priority: 0,
        })
        .collect()
}

/// A VM's NUMA policy and the node of the NIC it prefers, if any.
type Numa = (NumaPolicy, Option<usize>);

/// A case: a host, the cores each VM wants, each VM's NUMA policy and NIC
/// node (see [`filling`]), and whether the VMs use every free core.
fn a_case() -> impl Strategy<Value = (HostSpec, Vec<u32>, Vec<Numa>, bool)> {
    (
        host(),
        prop::collection::vec(1u32..=7, 2..=5),
        prop::collection::vec(
            (
                prop_oneof![
                    14 => Just(NumaPolicy::Strict),
                    3 => Just(NumaPolicy::Preferred),
                    3 => Just(NumaPolicy::Spread),
                ],
                prop::option::weighted(0.2, 0usize..3),
            ),
            5,
        ),
        any::<bool>(),
    )
}

/// What one case did: not compared (a solver stopped, or the oracle), or
/// whether the search decided it.
fn one(
    host: &HostSpec,
    wants: &[u32],
    numa: &[(NumaPolicy, Option<usize>)],
    full: bool,
) -> Result<Option<bool>, TestCaseError> {
    let empty = request(host, &[]);
    let free = u32::try_from(crate::solve::classes::free_cores(&empty).len()).unwrap_or(0);
    if free == 0 {
        return Ok(None);
    }
    let req = request(host, &filling(free, wants, numa, host.smt, full));
    prop_assert!(agg::supported(&req), "{}", host.description());
    let Some(ilp) = check_solvers(&req)? else {
        return Ok(None);
    };
    let (_, stats) = agg::place(&req, by_limit(), &crate::solve::Progress::default());
    let Some(placement) = oracle::place_within(&req, ORACLE_LIMIT) else {
        return Ok(None);
    };
    prop_assert_eq!(
        &ilp.objective,
        &objective(&req, &placement),
        "ILP vs oracle on {} with VMs of {:?} cores: ILP {:?}, oracle {:?}",
        host.description(),
        req.vms
            .iter()
            .map(|v| v.vcpus / host.smt)
            .collect::<Vec<_>>(),
        ilp.vms
            .iter()
            .map(|v| (&v.name, &v.cores))
            .collect::<Vec<_>>(),
        placement.cores
    );
    Ok(Some(stats.searched))
}

/// 512 cases of 2–5 VMs on hosts of 4–12 free cores, half of them using
/// every free core. At least 3 in 4 must be compared, and the search must
/// decide one at least of the full hosts and of the others (where the first
/// fits reach the bounds, the models end at once and the search does not
/// run: it decided 1 in 8 of 1,000 cases before objective 6's bound on a
/// full host, and since then 1–7 of some 128 full hosts per 256 cases, 3–8
/// of the others; `the_search_alone_matches_the_oracle` runs it on every
/// case).
#[test]
fn hosts_full_or_not_match_the_oracle() {
    use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
    let compared = AtomicUsize::new(0);
    let searched = [AtomicUsize::new(0), AtomicUsize::new(0)];
    let cases = [AtomicUsize::new(0), AtomicUsize::new(0)];
    let mut runner = proptest::test_runner::TestRunner::new(config(512));
    let strategy = a_case();
    let result = runner.run(&strategy, |(host, wants, numa, full)| {
        if let Some(by_search) = one(&host, &wants, &numa, full)? {
            compared.fetch_add(1, Relaxed);
            cases[usize::from(full)].fetch_add(1, Relaxed);
            searched[usize::from(full)].fetch_add(usize::from(by_search), Relaxed);
        }
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    let compared = compared.into_inner();
    assert!(compared >= 384, "only {compared} of 512 cases compared");
    for (full, (cases, searched)) in cases.into_iter().zip(searched).enumerate() {
        let (cases, searched) = (cases.into_inner(), searched.into_inner());
        assert!(
            searched >= 1,
            "full = {full}: the search decided only {searched} of {cases} cases"
        );
    }
}

/// The search alone, from no start, on the cases of
/// [`hosts_full_or_not_match_the_oracle`]: with objectives 1–5 held at the
/// oracle's optima, where it ends it finds a layout, and its objectives 6–7
/// are the oracle's, whether it stops at the models' lower bounds or at
/// none (a bound above the optimum fails it). (Through the models it decides few
/// cases: their first layouts are often at the bounds.) Left out: a VM off
/// its NIC's node at the oracle's optimum, which the search does not count.
/// 256 cases; at least 128 must be decided by it (185 were).
#[test]
fn the_search_alone_matches_the_oracle() {
    use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
    let decided = AtomicUsize::new(0);
    let mut runner = proptest::test_runner::TestRunner::new(config(256));
    let strategy = a_case();
    let result = runner.run(&strategy, |(host, wants, numa, full)| {
        let empty = request(&host, &[]);
        let free = u32::try_from(crate::solve::classes::free_cores(&empty).len()).unwrap_or(0);
        if free == 0 {
            return Ok(());
        }
        let req = request(&host, &filling(free, &wants, &numa, host.smt, full));
        let Some(placement) = oracle::place_within(&req, ORACLE_LIMIT) else {
            return Ok(());
        };
        let o = objective(&req, &placement);
        if o.nic_remote_cores > 0 {
            return Ok(());
        }
        let held = std::collections::BTreeMap::from([
            (Tier::Cores, f64::from(o.cores_used)),
            (Tier::ExtraNodes, f64::from(o.extra_numa_nodes)),
            (Tier::NicRemote, 0.0),
        ]);
        // With every VM placed, the models' lower bound of objective 6
        // (each VM's fewest domains and, on a full host, the parts of VMs
        // and domains) is one.
        let placed: u32 = o.placed_by_priority.iter().map(|&(_, n)| n).sum();
        let bound = agg::bounds_for_tests(&req, &held)
            .get(&Tier::L3PerVm)
            .copied()
            .unwrap_or(0.0);
        prop_assert!(
            placed as usize != req.vms.len() || bound <= f64::from(o.vm_l3_domains) + 1e-6,
            "objective 6's bound {} above the oracle's {} on {}",
            bound,
            o.vm_l3_domains,
            host.description()
        );
        for floor in [false, true] {
            let Some(found) = agg::search_alone(&req, &held, floor) else {
                return Ok(());
            };
            prop_assert_eq!(
                found,
                Some((o.vm_l3_domains, o.partial_l3_domains)),
                "search (stopping at the models' bounds: {}) vs oracle on {} with VMs of {:?} \
                 cores: oracle {:?}",
                floor,
                host.description(),
                req.vms
                    .iter()
                    .map(|v| (v.vcpus / host.smt, v.numa))
                    .collect::<Vec<_>>(),
                placement.cores
            );
        }
        decided.fetch_add(1, Relaxed);
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    let decided = decided.into_inner();
    assert!(
        decided >= 128,
        "the search decided only {decided} of 256 cases"
    );
}
