//! Refuses a report of domains pinned to CPUs the host does not have: a
//! domain written for another host (CPU 2048 on a 56-CPU machine) would
//! otherwise be drawn nowhere and conflict with nothing, and the report
//! would say all is well. The plan's own CPUs are checked by
//! [`crate::plan::Plan::check_host`]; the host's (`--host-cpus`) by
//! [`crate::libvirt::tenants::host_cpus`].

use crate::cpuset::CpuSet;
use crate::error::Diagnostic;
use crate::tenant::{LooseThreads, Tenant, TenantKind};
use crate::topology::HostTopology;

/// One domain's pins to CPUs the host lacks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForeignDomain {
    /// The domain's name.
    pub domain: String,
    /// Its threads so pinned, as people read them (`vCPUs 0,1 and emulator`).
    pub threads: String,
    /// The CPUs it names that the host does not have.
    pub missing: CpuSet,
}

/// Domains pinned to CPUs the host does not have.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "domain {:?} pins {} to {} {}, which {host} does not have (its CPUs: {known}){}",
    first.domain,
    first.threads,
    if first.missing.len() == 1 { "CPU" } else { "CPUs" },
    first.missing,
    also(others)
)]
pub struct ForeignPins {
    /// The first such domain (in the report's order).
    pub first: ForeignDomain,
    /// The others, if any.
    pub others: Vec<ForeignDomain>,
    /// The topology source.
    pub host: String,
    /// Every CPU the host has (online or not).
    pub known: CpuSet,
}

/// `; also domains "b" (CPUs 64), "c" (CPUs 99)`.
fn also(others: &[ForeignDomain]) -> String {
    if others.is_empty() {
        return String::new();
    }
    let named: Vec<String> = others
        .iter()
        .map(|o| format!("{:?} (CPUs {})", o.domain, o.missing))
        .collect();
    format!(
        "; also {} {}",
        if others.len() == 1 {
            "domain"
        } else {
            "domains"
        },
        named.join(", ")
    )
}

impl Diagnostic for ForeignPins {
    fn hint(&self) -> Option<String> {
        Some(
            "the domain was written for another host: plan it for this one \
             (`pinplan plan SPEC` with --source or --connect for this host, then \
             `pinplan xml --patch`), or report it against its own host's topology (--source FILE)"
                .to_owned(),
        )
    }
}

/// Refuses `tenants` when a domain pins a thread to a CPU `host` does not have.
pub fn check_pins(host: &HostTopology, tenants: &[Tenant]) -> Result<(), Box<ForeignPins>> {
    let known: CpuSet = host.pus.iter().map(|p| p.cpu).collect();
    let mut foreign = tenants
        .iter()
        .filter(|t| t.kind == TenantKind::Vm)
        .filter_map(|t| foreign(t, &known));
    let Some(first) = foreign.next() else {
        return Ok(());
    };
    Err(Box::new(ForeignPins {
        first,
        others: foreign.collect(),
        host: host.source.clone(),
        known,
    }))
}

/// `t`'s threads pinned outside `known`, when there are any.
fn foreign(t: &Tenant, known: &CpuSet) -> Option<ForeignDomain> {
    let outside = |cpus: &CpuSet| !cpus.is_subset(known);
    let threads = LooseThreads {
        vcpus: t
            .vcpus
            .iter()
            .filter(|v| outside(&v.cpus))
            .map(|v| v.vcpu)
            .collect(),
        emulator: outside(&t.emulator_cpus),
        iothreads: t
            .iothreads
            .iter()
            .filter(|i| outside(&i.cpus))
            .map(|i| i.iothread)
            .collect(),
    };
    if threads.is_empty() {
        return None;
    }
    Some(ForeignDomain {
        domain: t.name.clone(),
        threads: threads.named().0,
        missing: t.every_cpu().difference(known),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tenant::{host_tenant, IothreadCpus, TenantState, VcpuCpus};

    fn cpus(text: &str) -> CpuSet {
        text.parse().unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    fn vm(name: &str, vcpus: &[&str], emulator: &str, iothreads: &[&str]) -> Tenant {
        let vcpus: Vec<VcpuCpus> = (0u32..)
            .zip(vcpus)
            .map(|(vcpu, c)| VcpuCpus {
                vcpu,
                cpus: cpus(c),
            })
            .collect();
        Tenant {
            name: name.to_owned(),
            kind: TenantKind::Vm,
            state: TenantState::Running,
            cpus: vcpus
                .iter()
                .fold(CpuSet::new(), |all, v| all.union(&v.cpus)),
            vcpus,
            emulator_cpus: cpus(emulator),
            iothreads: (1u32..)
                .zip(iothreads)
                .map(|(iothread, c)| IothreadCpus {
                    iothread,
                    cpus: cpus(c),
                })
                .collect(),
            nics: Vec::new(),
            pinned: true,
            memory: None,
            memory_resident: None,
        }
    }

    #[test]
    fn names_the_domain_its_threads_and_the_cpus() {
        // CPUs 0-7 (one package of 4 cores, siblings N and N+4).
        let host = crate::tenant::test_host();
        let host_name = host.source.clone();
        let fine = vm("fine", &["1", "2"], "3", &["3"]);
        let far = vm("far", &["2048", "1", "4096"], "0", &["1", "9"]);
        let emu = vm("emu", &["1"], "0,8", &[]);
        // The host tenant is --host-cpus', checked where it is read.
        let own = host_tenant(&cpus("0,99"));
        assert_eq!(check_pins(&host, &[own.clone(), fine.clone()]), Ok(()));

        let err = check_pins(&host, &[own, fine, far, emu]).err();
        let expected = format!(
            "domain \"far\" pins vCPUs 0,2 and I/O thread 2 to CPUs 9,2048,4096, which \
             {host_name} does not have (its CPUs: 0-7); also domain \"emu\" (CPUs 8)"
        );
        assert_eq!(err.map(|e| e.to_string()), Some(expected));

        let one = check_pins(&host, &[vm("one", &["1"], "8", &[])]).err();
        let expected = format!(
            "domain \"one\" pins emulator to CPU 8, which {host_name} does not have \
             (its CPUs: 0-7)"
        );
        assert_eq!(one.map(|e| e.to_string()), Some(expected));
    }
}
