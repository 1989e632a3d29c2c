//! The few libvirt calls that the `virt` crate does not wrap, made safe:
//! reading back vCPU, emulator and I/O thread pinning
//! (`virDomainGetVcpuPinInfo`, `virDomainGetEmulatorPinInfo`,
//! `virDomainGetIOThreadInfo`), pinning I/O threads (`virDomainPinIOThread`)
//! and counting the host's CPUs (`virNodeGetCPUMap`). One of the three
//! modules of pinplan with `unsafe` code (with `isolate/sys.rs` and
//! `solve/ilp/child.rs`); every block says why it is sound.
#![allow(unsafe_code)]

use crate::cpuset::CpuSet;
use crate::ids::CpuId;
use std::os::raw::{c_int, c_uint};
use virt::connect::Connect;
use virt::domain::Domain;
use virt::error::Error;
use virt_sys as sys;

/// Bytes in a libvirt CPU map for `ncpus` host CPUs (one bit per CPU).
pub fn map_len(ncpus: u32) -> usize {
    (ncpus as usize).div_ceil(8).max(1)
}

/// A libvirt CPU map of `set` for a host of `ncpus` CPUs.
pub fn to_cpumap(set: &CpuSet, ncpus: u32) -> Vec<u8> {
    let mut map = vec![0u8; map_len(ncpus)];
    for cpu in set.iter() {
        let i = cpu.0 as usize;
        if let Some(byte) = map.get_mut(i / 8) {
            *byte |= 1 << (i % 8);
        }
    }
    map
}

/// The CPUs set in a libvirt CPU map.
pub fn from_cpumap(map: &[u8]) -> CpuSet {
    let mut set = CpuSet::new();
    for (i, byte) in map.iter().enumerate() {
        for bit in 0..8 {
            if byte & (1 << bit) != 0 {
                // A map is at most a few KiB: the index fits in u32.
                set.insert(CpuId(u32::try_from(i * 8 + bit).unwrap_or(u32::MAX)));
            }
        }
    }
    set
}

fn int(n: usize) -> c_int {
    c_int::try_from(n).unwrap_or(c_int::MAX)
}

/// How many CPUs the host has (online or not): the size of its CPU maps.
pub fn host_cpu_count(conn: &Connect) -> Result<u32, Error> {
    // SAFETY: conn.as_ptr() is a live connection for the duration of the call;
    // with cpumap and online NULL libvirt only returns the count.
    let n = unsafe {
        sys::virNodeGetCPUMap(conn.as_ptr(), std::ptr::null_mut(), std::ptr::null_mut(), 0)
    };
    u32::try_from(n).map_err(|_| Error::last_error())
}

/// Each vCPU's CPUs (`flags`: `VIR_DOMAIN_AFFECT_LIVE` or `_CONFIG`).
pub fn vcpu_pin_info(
    domain: &Domain,
    vcpus: u32,
    ncpus: u32,
    flags: u32,
) -> Result<Vec<CpuSet>, Error> {
    let len = map_len(ncpus);
    let mut maps = vec![0u8; len * vcpus as usize];
    // SAFETY: `maps` holds `vcpus` maps of `len` bytes each, as the call
    // requires (ncpumaps * maplen); the domain pointer is live.
    let n = unsafe {
        sys::virDomainGetVcpuPinInfo(
            domain.as_ptr(),
            int(vcpus as usize),
            maps.as_mut_ptr(),
            int(len),
            flags as c_uint,
        )
    };
    let n = usize::try_from(n).map_err(|_| Error::last_error())?;
    Ok(maps.chunks(len).take(n).map(from_cpumap).collect())
}

/// The emulator threads' CPUs.
pub fn emulator_pin_info(domain: &Domain, ncpus: u32, flags: u32) -> Result<CpuSet, Error> {
    let len = map_len(ncpus);
    let mut map = vec![0u8; len];
    // SAFETY: `map` has `len` bytes, the maplen passed; the domain is live.
    let n = unsafe {
        sys::virDomainGetEmulatorPinInfo(
            domain.as_ptr(),
            map.as_mut_ptr(),
            int(len),
            flags as c_uint,
        )
    };
    if n < 0 {
        return Err(Error::last_error());
    }
    Ok(from_cpumap(&map))
}

/// Each I/O thread's id and CPUs, by id.
pub fn iothread_info(domain: &Domain, flags: u32) -> Result<Vec<(u32, CpuSet)>, Error> {
    let mut info: *mut sys::virDomainIOThreadInfoPtr = std::ptr::null_mut();
    // SAFETY: libvirt allocates an array of `n` info pointers into `info`;
    // the domain is live.
    let n = unsafe { sys::virDomainGetIOThreadInfo(domain.as_ptr(), &mut info, flags as c_uint) };
    let n = usize::try_from(n).map_err(|_| Error::last_error())?;
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        // SAFETY: i < n, the array's length; each element is a valid
        // virDomainIOThreadInfo whose cpumap has cpumaplen bytes. Each is
        // freed exactly once with virDomainIOThreadInfoFree, as documented.
        unsafe {
            let item = *info.add(i);
            if item.is_null() {
                continue;
            }
            let len = usize::try_from((*item).cpumaplen).unwrap_or(0);
            let map = if (*item).cpumap.is_null() || len == 0 {
                Vec::new()
            } else {
                std::slice::from_raw_parts((*item).cpumap, len).to_vec()
            };
            out.push(((*item).iothread_id, from_cpumap(&map)));
            sys::virDomainIOThreadInfoFree(item);
        }
    }
    if !info.is_null() {
        // SAFETY: the array itself is malloc'ed by libvirt and freed with free().
        unsafe { libc::free(info.cast()) };
    }
    out.sort_by_key(|(id, _)| *id);
    Ok(out)
}

/// Pins I/O thread `id` to `cpus`.
pub fn pin_iothread(
    domain: &Domain,
    id: u32,
    cpus: &CpuSet,
    ncpus: u32,
    flags: u32,
) -> Result<(), Error> {
    let mut map = to_cpumap(cpus, ncpus);
    // SAFETY: `map` has map.len() bytes, the maplen passed; libvirt only
    // reads it; the domain is live.
    let n = unsafe {
        sys::virDomainPinIOThread(
            domain.as_ptr(),
            id as c_uint,
            map.as_mut_ptr(),
            int(map.len()),
            flags as c_uint,
        )
    };
    if n < 0 {
        return Err(Error::last_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpumaps_round_trip() {
        let set: CpuSet = "0,3,8-9,15".parse().unwrap_or_default();
        let map = to_cpumap(&set, 16);
        assert_eq!(map, vec![0b0000_1001, 0b1000_0011]);
        assert_eq!(from_cpumap(&map), set);
        assert_eq!(map_len(1), 1);
        assert_eq!(map_len(9), 2);
    }
}
