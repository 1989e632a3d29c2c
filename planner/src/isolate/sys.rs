//! The one system call std has no safe form of: setting a thread's CPU
//! affinity (`sched_setaffinity`), for undo to restore a moved thread's.
#![allow(unsafe_code)]

use crate::cpuset::CpuSet;

/// Sets thread `tid`'s CPU affinity (CPUs below `CPU_SETSIZE`, 1,024).
pub(super) fn set_affinity(tid: u32, cpus: &CpuSet) -> std::io::Result<()> {
    let pid = libc::pid_t::try_from(tid).map_err(|_| std::io::ErrorKind::InvalidInput)?;
    let limit = usize::try_from(libc::CPU_SETSIZE).unwrap_or(0);
    // SAFETY: a zeroed cpu_set_t is the empty set (it is plain bits).
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for cpu in cpus.iter() {
        let n = usize::try_from(cpu.0).unwrap_or(usize::MAX);
        if n >= limit {
            return Err(std::io::ErrorKind::InvalidInput.into());
        }
        // SAFETY: n is below CPU_SETSIZE, the set's size in bits.
        unsafe { libc::CPU_SET(n, &mut set) };
    }
    // SAFETY: the kernel reads size_of::<cpu_set_t>() bytes of `set`.
    let status =
        unsafe { libc::sched_setaffinity(pid, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if status != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}
