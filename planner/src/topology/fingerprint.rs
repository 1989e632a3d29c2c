//! Which host a plan was made for: a stable fingerprint of the host's cores
//! and CPUs, written into every plan and compared before a plan is used.

use super::HostTopology;

impl HostTopology {
    /// A stable fingerprint of the host's cores and which of its CPUs are
    /// online (FNV-1a, 64 bits).
    ///
    /// Whether a CPU is *allowed* is left out: that depends on who reads the
    /// host (an `lstopo` or a pinplan confined by `pinplan isolate` to the
    /// housekeeping CPUs, issue 27), not on the host. A CPU is marked `u` when
    /// online — what plans before issue 27 marked when usable, so on a host
    /// where every online CPU is allowed the text hashed, and so every
    /// existing plan's fingerprint, is unchanged.
    pub fn fingerprint(&self) -> String {
        let mut text = String::new();
        for core in &self.cores {
            text.push_str(&format!("{}:{};", core.id, core.cpus));
        }
        for pu in &self.pus {
            text.push_str(&format!("{}{};", pu.cpu, if pu.online { "u" } else { "x" }));
        }
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
        for byte in text.bytes() {
            hash ^= u64::from(byte);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
        format!("fnv1a64:{hash:016x}")
    }
}

#[cfg(test)]
mod tests {
    use crate::topology::{load, Source};

    /// Issue 27: after `pinplan isolate`, pinplan's own process may use only
    /// the housekeeping CPUs; the host it reads is the same host.
    #[test]
    fn cpus_online_but_not_allowed_keep_the_fingerprint() {
        let all = load(&Source::Synthetic("package:1 core:4 pu:2".into())).unwrap();
        // The fingerprint of this host as every plan before issue 27 had it.
        let before = "fnv1a64:133559c0081d8135";
        assert_eq!(all.fingerprint(), before);
        let mut confined = all.clone();
        for pu in confined.pus.iter_mut().filter(|p| p.cpu.0 >= 2) {
            pu.allowed = false;
            pu.usable = false;
        }
        assert_eq!(confined.fingerprint(), before);
        let mut offline = all.clone();
        if let Some(pu) = offline.pus.last_mut() {
            pu.online = false;
            pu.usable = false;
        }
        assert_ne!(
            offline.fingerprint(),
            before,
            "an offline CPU is another host"
        );
    }
}
