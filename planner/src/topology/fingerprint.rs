//! Which host a plan was made for: a stable fingerprint of the host's cores
//! and CPUs, written into every plan and compared before a plan is used.

use super::HostTopology;

impl HostTopology {
    /// A stable fingerprint of the host's cores and CPUs (FNV-1a, 64 bits).
    pub fn fingerprint(&self) -> String {
        let mut text = String::new();
        for core in &self.cores {
            text.push_str(&format!("{}:{};", core.id, core.cpus));
        }
        for pu in &self.pus {
            text.push_str(&format!("{}{};", pu.cpu, if pu.usable { "u" } else { "x" }));
        }
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
        for byte in text.bytes() {
            hash ^= u64::from(byte);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
        format!("fnv1a64:{hash:016x}")
    }
}
