//! The order in which `apply` re-pins running VMs so that two of them never
//! hold one physical core, not even between two pin calls: a VM goes only
//! when no VM still to go runs on a core it is planned onto. Threads that
//! float now (allowed on every CPU) are left out of what a VM holds: such a
//! VM already shares every core, and pinning it first only takes sharing
//! away. The host's reserved CPUs are left out of what emulator and I/O
//! threads hold (they are meant to be there together).

use super::journal::Pins;
use crate::cpuset::CpuSet;
use crate::ids::CoreId;
use crate::topology::HostTopology;
use std::collections::BTreeSet;

/// The physical cores a VM's threads hold with `pins`, on `host`:
/// its vCPUs' cores, and its emulator's and I/O threads' cores off the
/// host's `reserved` CPUs; a thread allowed on every usable CPU holds none.
pub(crate) fn cores_held(pins: &Pins, host: &HostTopology, reserved: &CpuSet) -> BTreeSet<CoreId> {
    let usable = host.usable_cpus();
    let pinned = |set: &&CpuSet| !crate::tenant::floats(set, &usable);
    let mut cpus = CpuSet::new();
    for set in pins.vcpus.iter().filter(pinned) {
        cpus = cpus.union(set);
    }
    let others = std::iter::once(&pins.emulator).chain(pins.iothreads.iter().map(|i| &i.cpus));
    for set in others.filter(pinned) {
        cpus = cpus.union(&set.difference(reserved));
    }
    cpus.iter()
        .filter_map(|cpu| host.pu(cpu).and_then(|p| p.core))
        .collect()
}

/// The order to re-pin VMs live, as indexes into `planned`/`now` (plan order
/// where it is free): each VM goes once no other VM still to go holds a core
/// it is planned onto and must leave (`now[i]`: its live pins, `None` when
/// not running).
/// `Err` names the VMs that wait on each other (a swap, or a longer cycle),
/// not those only waiting behind them: no order moves them without two on
/// one core for a moment.
pub(crate) fn live_order(
    planned: &[Pins],
    now: &[Option<Pins>],
    host: &HostTopology,
    reserved: &CpuSet,
) -> Result<Vec<usize>, Vec<usize>> {
    let want: Vec<BTreeSet<CoreId>> = planned
        .iter()
        .map(|p| cores_held(p, host, reserved))
        .collect();
    let held: Vec<BTreeSet<CoreId>> = now
        .iter()
        .map(|p| {
            p.as_ref()
                .map_or_else(BTreeSet::new, |p| cores_held(p, host, reserved))
        })
        .collect();
    // i waits on j: j holds a core i is planned onto, and must leave it (a
    // core the plan itself gives both, as a hand-written plan may, is not
    // one any order frees).
    let waits = |i: usize, j: usize| {
        i != j
            && want[i]
                .intersection(&held[j])
                .any(|core| !want[j].contains(core))
    };
    let mut left: Vec<usize> = (0..planned.len()).collect();
    let mut order = Vec::with_capacity(left.len());
    while !left.is_empty() {
        let ready = left
            .iter()
            .position(|&i| left.iter().all(|&j| !waits(i, j)));
        match ready {
            Some(at) => order.push(left.remove(at)),
            None => {
                // Named: those others wait on too (the cycle), not the ones
                // only waiting behind it.
                loop {
                    let before = left.len();
                    let waited: Vec<usize> = left
                        .iter()
                        .copied()
                        .filter(|&j| left.iter().any(|&i| waits(i, j)))
                        .collect();
                    left = waited;
                    if left.len() == before {
                        return Err(left);
                    }
                }
            }
        }
    }
    Ok(order)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::IothreadPin;
    use proptest::prelude::*;

    fn host() -> HostTopology {
        // 6 cores, siblings N and N+6.
        crate::topology::load(&crate::topology::Source::Synthetic(
            "package:1 core:6 pu:2(indexes=2*6:1*2)".into(),
        ))
        .unwrap_or_else(|e| panic!("{e}"))
    }

    fn pins(vcpus: &[&str], emulator: &str) -> Pins {
        let set = |s: &str| s.parse::<CpuSet>().unwrap_or_else(|e| panic!("{s}: {e}"));
        Pins {
            vcpus: vcpus.iter().map(|s| set(s)).collect(),
            emulator: set(emulator),
            iothreads: Vec::<IothreadPin>::new(),
        }
    }

    /// A chain (b onto a's core as a moves off to a free one) goes a
    /// first; a swap is refused; siblings are one core; floating threads and
    /// the host's CPUs hold nothing.
    #[test]
    fn orders_chains_and_refuses_swaps() {
        let h = host();
        let reserved: CpuSet = "0,6".parse().unwrap_or_default();
        // b: 2 -> 1 (a's now), a: 1 -> 3.
        let planned = [pins(&["1"], "0"), pins(&["3"], "0")];
        let now = [Some(pins(&["2"], "0")), Some(pins(&["1"], "0"))];
        assert_eq!(live_order(&planned, &now, &h, &reserved), Ok(vec![1, 0]));
        // A swap: 1 <-> 2; a third VM waiting behind it (onto 3, which the
        // first holds too) is not named.
        let planned = [pins(&["2"], "0"), pins(&["1"], "0")];
        let now = [Some(pins(&["1"], "0")), Some(pins(&["2"], "0"))];
        assert_eq!(live_order(&planned, &now, &h, &reserved), Err(vec![0, 1]));
        let planned = [pins(&["2"], "0"), pins(&["1"], "0"), pins(&["3"], "0")];
        let now = [
            Some(pins(&["1", "3"], "0")),
            Some(pins(&["2"], "0")),
            Some(pins(&["4"], "0")),
        ];
        assert_eq!(live_order(&planned, &now, &h, &reserved), Err(vec![0, 1]));
        // Siblings are one core: 7 is core 1's.
        let planned = [pins(&["7"], "0"), pins(&["3"], "0")];
        let now = [Some(pins(&["2"], "0")), Some(pins(&["1"], "0"))];
        assert_eq!(live_order(&planned, &now, &h, &reserved), Ok(vec![1, 0]));
        // A floating VM holds nothing; emulators on the host's CPUs neither;
        // a VM not running holds nothing.
        let all = "0-11";
        let planned = [pins(&["1"], "0"), pins(&["2"], "0"), pins(&["4"], "0")];
        let now = [Some(pins(&[all], all)), Some(pins(&["1"], "6")), None];
        assert_eq!(live_order(&planned, &now, &h, &reserved), Ok(vec![1, 0, 2]));
        // A core the plan itself gives both (hand-written) waits for no one.
        let planned = [pins(&["1"], "0"), pins(&["7"], "0")];
        let now = [Some(pins(&["2"], "0")), Some(pins(&["1"], "0"))];
        assert_eq!(live_order(&planned, &now, &h, &reserved), Ok(vec![0, 1]));
    }

    /// Random moves of up to 4 VMs on 6 cores from a state where no two
    /// share a core to another such state: applied in the order given, one
    /// pin call at a time (each vCPU, then the emulator), no sample of the
    /// threads' CPUs ever has two VMs on one core; and a refused order is
    /// a real deadlock (every VM left waits on another).
    fn layouts() -> impl Strategy<Value = (Vec<(usize, bool)>, Vec<usize>)> {
        (1usize..=4).prop_flat_map(|n| {
            let cores = || {
                Just((1usize..6).collect::<Vec<_>>())
                    .prop_shuffle()
                    .prop_map(move |v| v.into_iter().take(n).collect::<Vec<_>>())
            };
            (
                (cores(), prop::collection::vec(any::<bool>(), n))
                    .prop_map(|(c, two)| c.into_iter().zip(two).collect()),
                cores(),
            )
        })
    }

    proptest! {
        #[test]
        fn no_pin_call_leaves_two_vms_on_one_core((now, planned) in layouts()) {
            let h = host();
            let reserved: CpuSet = "0,6".parse().unwrap_or_default();
            let n = now.len().min(planned.len());
            // A VM on core c: vCPU 0 on CPU c, with two vCPUs vCPU 1 on its
            // sibling c + 6; its emulator on the host's CPU 0.
            let to_pins = |core: usize, two: bool| Pins {
                vcpus: [core, core + 6]
                    .iter()
                    .take(if two { 2 } else { 1 })
                    .map(|&c| std::iter::once(crate::ids::CpuId(c as u32)).collect())
                    .collect(),
                emulator: "0".parse().unwrap_or_default(),
                iothreads: Vec::new(),
            };
            let now: Vec<Pins> = now.iter().map(|&(c, two)| to_pins(c, two)).collect();
            let planned: Vec<Pins> = planned
                .iter()
                .zip(&now)
                .map(|(&c, p)| to_pins(c, p.vcpus.len() == 2))
                .collect();
            let current: Vec<Option<Pins>> = now.iter().cloned().map(Some).collect();
            match live_order(&planned, &current, &h, &reserved) {
                Ok(order) => {
                    let mut state = now.clone();
                    for i in order {
                        for v in 0..planned[i].vcpus.len() {
                            state[i].vcpus[v] = planned[i].vcpus[v].clone();
                            let held: Vec<BTreeSet<CoreId>> =
                                state.iter().map(|p| cores_held(p, &h, &reserved)).collect();
                            for a in 0..n {
                                for b in a + 1..n {
                                    prop_assert!(held[a].is_disjoint(&held[b]), "{:?}", state);
                                }
                            }
                        }
                        state[i].emulator = planned[i].emulator.clone();
                    }
                }
                Err(left) => {
                    for &i in &left {
                        let want = cores_held(&planned[i], &h, &reserved);
                        prop_assert!(left.iter().any(|&j| j != i
                            && !want.is_disjoint(&cores_held(&now[j], &h, &reserved))));
                    }
                }
            }
        }
    }
}
