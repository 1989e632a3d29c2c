//! Issue 28: full hosts — VMs that use every free core, strict and
//! preferred, over nodes of several L3 domains — where objectives 6–7 are
//! ended by the search over what fills each node (`ilp::agg::full_host`):
//! the ILP's objective equals the per-core oracle's, every plan is safe, and
//! the search decides most cases (or it proves little).

use super::*;
use crate::solve::ilp::agg;

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

/// VMs of `wants` cores (the last takes what is left) that use the host's
/// `free` cores exactly, `threads = "prefer"`; `preferred[i]`: VM `i` has
/// `numa = "preferred"`, else strict.
fn filling(free: u32, wants: &[u32], preferred: &[bool], smt: u32) -> Vec<VmSpec> {
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
    if left > 0 {
        match sizes.last_mut() {
            Some(last) => *last += left,
            None => sizes.push(left),
        }
    }
    sizes
        .iter()
        .zip(preferred.iter().chain(std::iter::repeat(&false)))
        .map(|(&s, &p)| VmSpec {
            vcpus: s * smt,
            threads: ThreadPolicy::Prefer,
            emulator: EmulatorPolicy::Host,
            numa: if p {
                NumaPolicy::Preferred
            } else {
                NumaPolicy::Strict
            },
            nic_affinity: NicAffinity::Ignore,
            nic_node: None,
            second_nic: None,
            iothreads: 0,
            priority: 0,
        })
        .collect()
}

/// What one case did: not compared (a solver stopped, or the oracle), or
/// whether the search decided it.
fn one(host: &HostSpec, wants: &[u32], preferred: &[bool]) -> Result<Option<bool>, TestCaseError> {
    let empty = request(host, &[]);
    let free = u32::try_from(crate::solve::classes::free_cores(&empty).len()).unwrap_or(0);
    if free == 0 {
        return Ok(None);
    }
    let req = request(host, &filling(free, wants, preferred, host.smt));
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
    Ok(Some(stats.full_host))
}

/// 96 cases of 2–5 VMs filling hosts of 4–12 free cores. At least 3 in 4
/// must be compared, and the search must decide at least a third of them.
#[test]
fn full_hosts_match_the_oracle() {
    let compared = std::sync::atomic::AtomicUsize::new(0);
    let searched = std::sync::atomic::AtomicUsize::new(0);
    let mut runner = proptest::test_runner::TestRunner::new(config(96));
    let strategy = (
        host(),
        prop::collection::vec(1u32..=7, 2..=5),
        prop::collection::vec(prop::bool::weighted(0.2), 5),
    );
    let result = runner.run(&strategy, |(host, wants, preferred)| {
        if let Some(by_search) = one(&host, &wants, &preferred)? {
            compared.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            searched.fetch_add(usize::from(by_search), std::sync::atomic::Ordering::Relaxed);
        }
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    let (compared, searched) = (compared.into_inner(), searched.into_inner());
    assert!(compared >= 72, "only {compared} of 96 cases compared");
    assert!(
        searched * 3 >= compared,
        "the search decided only {searched} of {compared} cases"
    );
}
