//! Guest memory: sizes as specs write them (`16GiB`, `512MiB`, a number of
//! MiB), the page size that backs it (`1G`, `2M`, `none`), and the huge
//! pages a plan needs ([`Allocation`]). How a placed VM's memory splits over
//! its host nodes, and the pages a plan needs beyond what each node has
//! free, are [`placement`]'s: they read the plan, which holds these values.

pub mod pages;
pub mod placement;

use crate::ids::NodeId;
use serde::{Deserialize, Serialize};

/// A VM's memory and its page size.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct VmMemory {
    /// Guest memory in bytes.
    pub bytes: u64,
    /// Page size in KiB: 4 (normal pages), 2048 or 1048576.
    pub page_kib: u64,
}

/// The normal page size, in KiB.
pub const NORMAL_PAGE_KIB: u64 = 4;

/// Why a memory size or page size in a spec is not one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SizeError {
    /// Zero where a size is needed.
    #[error("{0:?} is not a usable size (zero)")]
    Zero(String),
    /// A number of MiB that overflows, or is zero where a size is needed.
    #[error("{0} MiB is not a usable size")]
    Mib(u64),
    /// No number first.
    #[error("{0:?} is not a size: write e.g. \"16GiB\", \"512MiB\" or a number of MiB")]
    NotASize(String),
    /// A unit that is not KiB, MiB, GiB or TiB.
    #[error("unit {unit:?} in {text:?}: use KiB, MiB, GiB or TiB (powers of 1024), or a plain number of MiB")]
    Unit {
        /// The unit written.
        unit: String,
        /// The whole size.
        text: String,
    },
    /// More bytes than 64 bits hold.
    #[error("{0:?} is not a usable size (too large)")]
    TooLarge(String),
    /// A page size that is not 1G, 2M or none.
    #[error("hugepages = {0:?}: use \"1G\", \"2M\" or \"none\" (normal 4 KiB pages)")]
    Page(String),
}

/// `16GiB`, `512MiB`, `1048576KiB`, or a plain number of MiB (`16384`) →
/// bytes; zero is refused.
pub fn parse_size(text: &str) -> Result<u64, SizeError> {
    Some(parse_amount(text)?)
        .filter(|&b| b > 0)
        .ok_or_else(|| SizeError::Zero(text.to_owned()))
}

/// [`parse_size`] that takes 0 too (a reserve of nothing).
pub fn parse_amount(text: &str) -> Result<u64, SizeError> {
    let t = text.trim();
    let digits = t.bytes().take_while(u8::is_ascii_digit).count();
    let (number, unit) = t.split_at(digits);
    let n: u64 = number
        .parse()
        .map_err(|_| SizeError::NotASize(text.to_owned()))?;
    let scale: u64 = match unit.trim() {
        "" | "MiB" | "M" => 1 << 20,
        "GiB" | "G" => 1 << 30,
        "KiB" | "K" => 1 << 10,
        "TiB" | "T" => 1 << 40,
        other => {
            return Err(SizeError::Unit {
                unit: other.to_owned(),
                text: text.to_owned(),
            })
        }
    };
    n.checked_mul(scale)
        .ok_or_else(|| SizeError::TooLarge(text.to_owned()))
}

/// A number of MiB (a spec's bare number) → bytes; zero only when `zero_ok`.
pub fn mib(n: u64, zero_ok: bool) -> Result<u64, SizeError> {
    n.checked_mul(1 << 20)
        .filter(|&b| b > 0 || zero_ok)
        .ok_or(SizeError::Mib(n))
}

/// `1G`, `2M`, `none` (also `1GiB`, `2MiB`, `4K`) → page size in KiB.
pub fn parse_page(text: &str) -> Result<u64, SizeError> {
    match text.trim() {
        "none" | "4K" | "4KiB" => Ok(NORMAL_PAGE_KIB),
        "2M" | "2MiB" => Ok(2048),
        "1G" | "1GiB" => Ok(1_048_576),
        other => Err(SizeError::Page(other.to_owned())),
    }
}

/// `1 GiB`, `512 MiB`, `16 GiB`: sizes as messages print them.
pub fn human(bytes: u64) -> String {
    crate::text::bytes(bytes)
}

/// Huge pages of one size on one node that the plan needs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Allocation {
    /// The host node.
    pub node: NodeId,
    /// Page size in KiB.
    pub size_kib: u64,
    /// Pages the plan's VMs need there.
    pub needed: u64,
    /// Pages free there now (`None`: the source does not say; the pool's
    /// total is then taken as free, and a pool it does not list as empty).
    pub free: Option<u64>,
    /// Pages to allocate beyond what is free (0: enough).
    pub missing: u64,
    /// The runtime command that makes the pool large enough (`None` when
    /// nothing is missing).
    pub command: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_pages_parse_as_documented() {
        assert_eq!(parse_size("16GiB"), Ok(16 << 30));
        assert_eq!(parse_size("512MiB"), Ok(512 << 20));
        assert_eq!(parse_size("1048576KiB"), Ok(1 << 30));
        assert_eq!(parse_size("2048"), Ok(2048 << 20));
        assert!(parse_size("16GB")
            .unwrap_err()
            .to_string()
            .contains("powers of 1024"));
        assert!(parse_size("0").is_err());
        assert!(parse_size("lots").is_err());
        assert_eq!(parse_page("1G"), Ok(1_048_576));
        assert_eq!(parse_page("2M"), Ok(2048));
        assert_eq!(parse_page("none"), Ok(4));
        assert!(parse_page("3M").is_err());
    }
}
