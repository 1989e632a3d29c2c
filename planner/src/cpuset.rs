//! [`CpuSet`]: a set of Linux CPU numbers in libvirt/Linux cpulist syntax.
//!
//! Parses what `virsh`, `/sys/.../cpulist`, `isolcpus=` and libvirt's `cpuset`
//! attributes use (`"0-3,^2,8"`) and prints one canonical compact form
//! (`"0-1,3,8"`). It owns syntax and set algebra only; which CPUs exist on a
//! host is [`crate::topology`]'s business.

use crate::ids::CpuId;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::collections::BTreeSet;
use std::fmt;
use std::str::FromStr;

/// A set of CPUs, always kept sorted, printed in canonical cpulist form.
///
/// ```
/// use pinplan::CpuSet;
/// let set: CpuSet = "0-3,^2,8".parse()?;
/// assert_eq!(set.to_string(), "0-1,3,8");
/// # Ok::<(), pinplan::CpuSetError>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CpuSet(BTreeSet<CpuId>);

/// Why a cpulist string was rejected. Positions are 1-based character columns.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CpuSetError {
    /// Nothing but whitespace, or only exclusions that left nothing.
    #[error("empty CPU list: give CPU numbers such as \"0-3,8\"")]
    Empty,
    /// A list item with nothing in it, e.g. a trailing or doubled comma.
    #[error("empty item at column {column} in {input:?}: remove the extra comma")]
    EmptyItem {
        /// The whole input.
        input: String,
        /// Where the empty item starts.
        column: usize,
    },
    /// Something that is not a CPU number.
    #[error("{token:?} at column {column} in {input:?} is not a CPU number")]
    NotANumber {
        /// The whole input.
        input: String,
        /// The offending text.
        token: String,
        /// Where it starts.
        column: usize,
    },
    /// A range without its end, e.g. `"0-"`.
    #[error("range {item:?} in {input:?} has no {missing}: write both ends, e.g. {example}")]
    OpenRange {
        /// The whole input.
        input: String,
        /// The range as written.
        item: String,
        /// What is missing (`end`).
        missing: &'static str,
        /// A fix: `0-3`.
        example: String,
    },
    /// A range whose end is below its start, e.g. `"3-1"`.
    #[error("range {start}-{end} in {input:?} runs backwards: write {end}-{start}")]
    ReversedRange {
        /// The whole input.
        input: String,
        /// First number of the range.
        start: u32,
        /// Last number of the range.
        end: u32,
    },
    /// A CPU number at or above [`CpuId::LIMIT`].
    #[error("CPU {cpu} in {input:?} is out of range: CPU numbers must be below {limit}", limit = CpuId::LIMIT)]
    TooLarge {
        /// The whole input.
        input: String,
        /// The number as written.
        cpu: u64,
    },
    /// `^N` for a CPU that the items before it did not include.
    #[error("^{cpu} in {input:?} excludes CPU {cpu}, which the list does not include")]
    ExcludesAbsent {
        /// The whole input.
        input: String,
        /// The excluded CPU.
        cpu: u32,
    },
}

impl CpuSet {
    /// The empty set (printed as `""`; not parseable, because an empty cpulist
    /// in a user's input is always a mistake).
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a CPU; returns whether it was new.
    pub fn insert(&mut self, cpu: CpuId) -> bool {
        self.0.insert(cpu)
    }

    /// Removes a CPU; returns whether it was there.
    pub fn remove(&mut self, cpu: CpuId) -> bool {
        self.0.remove(&cpu)
    }

    /// Whether `cpu` is in the set.
    pub fn contains(&self, cpu: CpuId) -> bool {
        self.0.contains(&cpu)
    }

    /// Number of CPUs.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether the set has no CPU.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The lowest CPU, if any.
    pub fn first(&self) -> Option<CpuId> {
        self.0.first().copied()
    }

    /// CPUs in ascending order.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = CpuId> + ExactSizeIterator + '_ {
        self.0.iter().copied()
    }

    /// CPUs in both sets.
    pub fn intersection(&self, other: &CpuSet) -> CpuSet {
        CpuSet(self.0.intersection(&other.0).copied().collect())
    }

    /// CPUs in either set.
    pub fn union(&self, other: &CpuSet) -> CpuSet {
        CpuSet(self.0.union(&other.0).copied().collect())
    }

    /// CPUs in `self` but not in `other`.
    pub fn difference(&self, other: &CpuSet) -> CpuSet {
        CpuSet(self.0.difference(&other.0).copied().collect())
    }

    /// Whether every CPU of `self` is in `other`.
    pub fn is_subset(&self, other: &CpuSet) -> bool {
        self.0.is_subset(&other.0)
    }

    /// A kernel cpumask in hex (`/proc/irq/default_smp_affinity`, the
    /// workqueue `cpumask`): 32-bit words, most significant first, separated
    /// by commas (`"00000000,00000003"`, `"3"`); `None` when it is not one or
    /// names a CPU at or above [`CpuId::LIMIT`].
    pub fn from_hex_mask(text: &str) -> Option<CpuSet> {
        let digits: String = text.trim().chars().filter(|&c| c != ',').collect();
        if digits.is_empty() || !digits.chars().all(|c| c.is_ascii_hexdigit()) {
            return None;
        }
        let mut set = CpuSet::new();
        for (position, c) in digits.chars().rev().enumerate() {
            let nibble = c.to_digit(16)?;
            for bit in 0..4 {
                if nibble & (1 << bit) != 0 {
                    let cpu = u32::try_from(position * 4 + bit).ok()?;
                    if cpu >= CpuId::LIMIT {
                        return None;
                    }
                    set.insert(CpuId(cpu));
                }
            }
        }
        Some(set)
    }

    /// The kernel's hex cpumask form of the set: 32-bit words, most
    /// significant first, the first unpadded, the others 8 digits, joined by
    /// commas (`"3"`, `"1,00000000"`); `"0"` for the empty set.
    pub fn to_hex_mask(&self) -> String {
        let Some(last) = self.0.last() else {
            return "0".to_owned();
        };
        let words = last.0 / 32 + 1;
        let mut out: Vec<String> = Vec::new();
        for word in (0..words).rev() {
            let mut value = 0u32;
            for bit in 0..32 {
                if self.0.contains(&CpuId(word * 32 + bit)) {
                    value |= 1 << bit;
                }
            }
            out.push(if out.is_empty() {
                format!("{value:x}")
            } else {
                format!("{value:08x}")
            });
        }
        out.join(",")
    }

    /// Whether the sets share a CPU.
    pub fn intersects(&self, other: &CpuSet) -> bool {
        !self.0.is_disjoint(&other.0)
    }

    /// Runs of consecutive CPUs as inclusive `(first, last)` pairs.
    fn runs(&self) -> Vec<(u32, u32)> {
        let mut runs: Vec<(u32, u32)> = Vec::new();
        for CpuId(cpu) in self.iter() {
            match runs.last_mut() {
                Some((_, last)) if *last + 1 == cpu => *last = cpu,
                _ => runs.push((cpu, cpu)),
            }
        }
        runs
    }
}

impl FromIterator<CpuId> for CpuSet {
    fn from_iter<I: IntoIterator<Item = CpuId>>(iter: I) -> Self {
        CpuSet(iter.into_iter().collect())
    }
}

impl Extend<CpuId> for CpuSet {
    fn extend<I: IntoIterator<Item = CpuId>>(&mut self, iter: I) {
        self.0.extend(iter);
    }
}

impl fmt::Display for CpuSet {
    /// Canonical form: ascending, every run of two or more consecutive CPUs as a
    /// range (`"0-1,3,8"`), the empty set as `""`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (first, last)) in self.runs().into_iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            if first == last {
                write!(f, "{first}")?;
            } else {
                write!(f, "{first}-{last}")?;
            }
        }
        Ok(())
    }
}

impl FromStr for CpuSet {
    type Err = CpuSetError;

    fn from_str(input: &str) -> Result<Self, Self::Err> {
        let trimmed = input.trim_matches(' ');
        if trimmed.is_empty() {
            return Err(CpuSetError::Empty);
        }
        let lead = input.len() - input.trim_start_matches(' ').len();
        let mut set = CpuSet::new();
        let mut offset = lead;
        for item in trimmed.split(',') {
            let column = offset + 1;
            offset += item.len() + 1;
            let item_trimmed = item.trim_matches(' ');
            if item_trimmed.is_empty() {
                return Err(CpuSetError::EmptyItem {
                    input: input.to_owned(),
                    column,
                });
            }
            let column = column + (item.len() - item.trim_start_matches(' ').len());
            if let Some(excluded) = item_trimmed.strip_prefix('^') {
                let cpu = parse_number(input, excluded, column + 1)?;
                if !set.remove(CpuId(cpu)) {
                    return Err(CpuSetError::ExcludesAbsent {
                        input: input.to_owned(),
                        cpu,
                    });
                }
                continue;
            }
            match item_trimmed.split_once('-') {
                None => {
                    set.insert(CpuId(parse_number(input, item_trimmed, column)?));
                }
                // `0-`: a range without its end (`-1` stays "not a number").
                Some((start, end)) if end.trim().is_empty() && !start.trim().is_empty() => {
                    let n = parse_number(input, start, column)?;
                    return Err(CpuSetError::OpenRange {
                        input: input.to_owned(),
                        item: item_trimmed.to_owned(),
                        missing: "end",
                        example: format!("{n}-{}", n.saturating_add(3)),
                    });
                }
                Some((start, end)) => {
                    let start_n = parse_number(input, start, column)?;
                    let end_n = parse_number(input, end, column + start.len() + 1)?;
                    if end_n < start_n {
                        return Err(CpuSetError::ReversedRange {
                            input: input.to_owned(),
                            start: start_n,
                            end: end_n,
                        });
                    }
                    set.extend((start_n..=end_n).map(CpuId));
                }
            }
        }
        if set.is_empty() {
            return Err(CpuSetError::Empty);
        }
        Ok(set)
    }
}

/// Parses one decimal CPU number (surrounding spaces allowed).
fn parse_number(input: &str, token: &str, column: usize) -> Result<u32, CpuSetError> {
    let digits = token.trim_matches(' ');
    let column = column + (token.len() - token.trim_start_matches(' ').len());
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(CpuSetError::NotANumber {
            input: input.to_owned(),
            token: token.to_owned(),
            column,
        });
    }
    // Anything too long for u64 is certainly too large; report it as such.
    let value: u64 = digits.parse().unwrap_or(u64::MAX);
    if value >= u64::from(CpuId::LIMIT) {
        return Err(CpuSetError::TooLarge {
            input: input.to_owned(),
            cpu: value,
        });
    }
    // Below LIMIT, so it fits in u32.
    Ok(u32::try_from(value).unwrap_or(u32::MAX))
}

impl Serialize for CpuSet {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for CpuSet {
    /// Accepts the canonical string, and `""` for the empty set (as we print it).
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        if text.trim_matches(' ').is_empty() {
            return Ok(CpuSet::new());
        }
        text.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn set(cpus: &[u32]) -> CpuSet {
        cpus.iter().copied().map(CpuId).collect()
    }

    #[test]
    fn parses_and_prints_canonically() {
        for (input, cpus, canonical) in [
            ("0-3,^2,8", &[0, 1, 3, 8][..], "0-1,3,8"),
            ("0,2,4", &[0, 2, 4], "0,2,4"),
            ("7", &[7], "7"),
            ("  5-6  ", &[5, 6], "5-6"),
            ("3,1,2", &[1, 2, 3], "1-3"),
            ("0-3, 8 ,  10-11", &[0, 1, 2, 3, 8, 10, 11], "0-3,8,10-11"),
            ("65535", &[65535], "65535"),
            ("4-4", &[4], "4"),
            ("1,1,1", &[1], "1"),
        ] {
            let parsed: CpuSet = input.parse().unwrap_or_else(|e| panic!("{input:?}: {e}"));
            assert_eq!(parsed, set(cpus), "{input:?}");
            assert_eq!(parsed.to_string(), canonical, "{input:?}");
        }
    }

    #[test]
    fn rejects_bad_lists_precisely() {
        let s = |x: &str| x.to_owned();
        for (input, expected) in [
            ("", CpuSetError::Empty),
            ("   ", CpuSetError::Empty),
            ("2,^2", CpuSetError::Empty),
            (
                "3-1",
                CpuSetError::ReversedRange {
                    input: s("3-1"),
                    start: 3,
                    end: 1,
                },
            ),
            (
                "0-3,^5",
                CpuSetError::ExcludesAbsent {
                    input: s("0-3,^5"),
                    cpu: 5,
                },
            ),
            (
                "0,1,",
                CpuSetError::EmptyItem {
                    input: s("0,1,"),
                    column: 5,
                },
            ),
            (
                "0,,1",
                CpuSetError::EmptyItem {
                    input: s("0,,1"),
                    column: 3,
                },
            ),
            (
                "0-",
                CpuSetError::OpenRange {
                    input: s("0-"),
                    item: s("0-"),
                    missing: "end",
                    example: s("0-3"),
                },
            ),
            (
                "0,x",
                CpuSetError::NotANumber {
                    input: s("0,x"),
                    token: s("x"),
                    column: 3,
                },
            ),
            (
                "1-b",
                CpuSetError::NotANumber {
                    input: s("1-b"),
                    token: s("b"),
                    column: 3,
                },
            ),
            (
                "-1",
                CpuSetError::NotANumber {
                    input: s("-1"),
                    token: s(""),
                    column: 1,
                },
            ),
            (
                "1.5",
                CpuSetError::NotANumber {
                    input: s("1.5"),
                    token: s("1.5"),
                    column: 1,
                },
            ),
            (
                "0-65536",
                CpuSetError::TooLarge {
                    input: s("0-65536"),
                    cpu: 65536,
                },
            ),
            (
                "99999999999999999999999",
                CpuSetError::TooLarge {
                    input: s("99999999999999999999999"),
                    cpu: u64::MAX,
                },
            ),
            (
                "^0-3",
                CpuSetError::NotANumber {
                    input: s("^0-3"),
                    token: s("0-3"),
                    column: 2,
                },
            ),
        ] {
            assert_eq!(input.parse::<CpuSet>(), Err(expected), "{input:?}");
        }
    }

    #[test]
    fn cpusets_accept_tabs_and_newlines_no_more() {
        // Issue 14, defect 11: the docs say spaces; tabs and newlines are refused.
        for input in ["0-1\t,2", "0-1\n", "\t3", "1,\n2"] {
            assert!(input.parse::<CpuSet>().is_err(), "{input:?} was accepted");
        }
        assert_eq!(
            " 0-1 , 2 ".parse::<CpuSet>().map(|s| s.to_string()),
            Ok("0-2".to_owned())
        );
    }

    #[test]
    fn error_messages_name_the_input() {
        let err = "0-3,^9".parse::<CpuSet>().err().map(|e| e.to_string());
        assert_eq!(
            err.as_deref(),
            Some("^9 in \"0-3,^9\" excludes CPU 9, which the list does not include")
        );
    }

    #[test]
    fn set_algebra() {
        let a = set(&[0, 1, 2, 3]);
        let b = set(&[2, 3, 4]);
        assert_eq!(a.intersection(&b), set(&[2, 3]));
        assert_eq!(a.union(&b), set(&[0, 1, 2, 3, 4]));
        assert_eq!(a.difference(&b), set(&[0, 1]));
        assert!(set(&[1, 2]).is_subset(&a));
        assert!(a.intersects(&b));
        assert!(!set(&[9]).intersects(&a));
    }

    #[test]
    fn serde_uses_the_canonical_string() -> Result<(), serde_json::Error> {
        let a = set(&[0, 1, 2, 5]);
        assert_eq!(serde_json::to_string(&a)?, "\"0-2,5\"");
        assert_eq!(serde_json::from_str::<CpuSet>("\"0-2,5\"")?, a);
        assert_eq!(serde_json::from_str::<CpuSet>("\"\"")?, CpuSet::new());
        Ok(())
    }

    proptest! {
        #[test]
        fn format_then_parse_round_trips(cpus in proptest::collection::btree_set(0u32..CpuId::LIMIT, 1..200)) {
            let original: CpuSet = cpus.into_iter().map(CpuId).collect();
            let text = original.to_string();
            let parsed: CpuSet = text.parse().map_err(|e| TestCaseError::fail(format!("{text}: {e}")))?;
            prop_assert_eq!(parsed, original);
        }

        #[test]
        fn dense_runs_round_trip(start in 0u32..1000, len in 1u32..64, gaps in proptest::collection::vec(0u32..64, 0..8)) {
            let mut original: CpuSet = (start..start + len).map(CpuId).collect();
            for g in gaps { original.remove(CpuId(start + g)); }
            prop_assume!(!original.is_empty());
            let parsed: CpuSet = original.to_string().parse().map_err(|e| TestCaseError::fail(format!("{e}")))?;
            prop_assert_eq!(parsed, original);
        }
    }

    #[test]
    fn hex_masks_read_and_write_the_kernels_form() {
        let set = |t: &str| t.parse::<CpuSet>().unwrap_or_default();
        assert_eq!(CpuSet::from_hex_mask("3\n"), Some(set("0-1")));
        assert_eq!(CpuSet::from_hex_mask("00000001,00000000"), Some(set("32")));
        assert_eq!(CpuSet::from_hex_mask("ff,ffffffff"), Some(set("0-39")));
        assert_eq!(CpuSet::from_hex_mask("0"), Some(CpuSet::new()));
        assert_eq!(CpuSet::from_hex_mask(""), None);
        assert_eq!(CpuSet::from_hex_mask("0x3"), None);
        assert_eq!(set("0-1").to_hex_mask(), "3");
        assert_eq!(set("0,32").to_hex_mask(), "1,00000001");
        assert_eq!(set("4-7,36").to_hex_mask(), "10,000000f0");
        assert_eq!(CpuSet::new().to_hex_mask(), "0");
        for text in ["0", "1-5,40,63,64,1000"] {
            let s = set(text);
            assert_eq!(CpuSet::from_hex_mask(&s.to_hex_mask()), Some(s));
        }
    }
}
