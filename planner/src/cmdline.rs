//! The kernel command line (`/proc/cmdline`): its parameters, and the CPU
//! lists of `isolcpus=`, `nohz_full=` and `rcu_nocbs=` in the kernel's own
//! syntax (flags before the list, `N` for the last CPU, `a-b:used/group`
//! strides). Used by `pinplan report` (the host's CPUs are those not isolated)
//! and `pinplan doctor`.

use crate::cpuset::CpuSet;
use crate::ids::CpuId;
use std::path::Path;

/// Parsed kernel parameters, in order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KernelCmdline {
    params: Vec<(String, Option<String>)>,
}

/// Why a CPU-list parameter could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("kernel parameter {param}={value:?}: {reason}")]
pub struct CmdlineError {
    /// The parameter, e.g. `isolcpus`.
    pub param: String,
    /// Its value.
    pub value: String,
    /// What is wrong.
    pub reason: CpulistFault,
}

/// What is wrong with a kernel CPU list.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CpulistFault {
    /// A bound is neither a number nor `N`.
    #[error("{0:?} is not a CPU number")]
    NotACpu(String),
    /// `a-b` with `b < a`.
    #[error("range {0}-{1} runs backwards")]
    Backwards(u32, u32),
    /// A stride that is not `used/group`.
    #[error("stride {0:?} is not used/group")]
    NotAStride(String),
    /// A stride's part that is not a count.
    #[error("{0:?} is not a count")]
    NotACount(String),
    /// A stride with `used` 0, `group` 0 or `used > group`.
    #[error("stride {0:?}: need 0 < used <= group")]
    BadStride(String),
    /// Only flags, or nothing.
    #[error("no CPUs in the list")]
    Empty,
}

impl KernelCmdline {
    /// Splits a command line into parameters. Double quotes group a value
    /// with spaces; everything after a lone `--` belongs to init and is
    /// dropped.
    pub fn parse(text: &str) -> KernelCmdline {
        let mut params = Vec::new();
        let mut word = String::new();
        let mut quoted = false;
        let mut words = Vec::new();
        for ch in text.chars() {
            match ch {
                '"' => quoted = !quoted,
                c if c.is_whitespace() && !quoted => {
                    if !word.is_empty() {
                        words.push(std::mem::take(&mut word));
                    }
                }
                c => word.push(c),
            }
        }
        if !word.is_empty() {
            words.push(word);
        }
        for w in words {
            if w == "--" {
                break;
            }
            match w.split_once('=') {
                Some((k, v)) => params.push((k.to_owned(), Some(v.to_owned()))),
                None => params.push((w, None)),
            }
        }
        KernelCmdline { params }
    }

    /// Reads `ROOT/proc/cmdline`.
    pub fn read(root: &Path) -> std::io::Result<KernelCmdline> {
        let text = std::fs::read_to_string(root.join("proc/cmdline"))?;
        Ok(KernelCmdline::parse(&text))
    }

    /// The value of the last `key=value` (the kernel lets the last one win).
    pub fn get(&self, key: &str) -> Option<&str> {
        self.params
            .iter()
            .rev()
            .find(|(k, _)| k == key)
            .and_then(|(_, v)| v.as_deref())
    }

    /// Whether `key` appears at all (with or without a value).
    pub fn has(&self, key: &str) -> bool {
        self.params.iter().any(|(k, _)| k == key)
    }

    /// The CPUs of a CPU-list parameter (`isolcpus`, `nohz_full`,
    /// `rcu_nocbs`), with `isolcpus`'s flags (`domain,managed_irq,`) dropped,
    /// `all` and `N` resolved against `cpus` (the host's CPUs). `None` when
    /// the parameter is absent.
    pub fn cpu_list(&self, key: &str, cpus: &CpuSet) -> Option<Result<CpuSet, CmdlineError>> {
        let value = self.get(key)?;
        Some(
            parse_kernel_cpulist(value, cpus).map_err(|reason| CmdlineError {
                param: key.to_owned(),
                value: value.to_owned(),
                reason,
            }),
        )
    }
}

/// Parses a kernel cpulist, skipping leading flag words (letters and `_`).
fn parse_kernel_cpulist(value: &str, cpus: &CpuSet) -> Result<CpuSet, CpulistFault> {
    let last = cpus.iter().next_back().map_or(0, |c| c.0);
    let items: Vec<&str> = value.split(',').collect();
    let first_list = items
        .iter()
        .position(|i| !i.chars().all(|c| c.is_ascii_alphabetic() || c == '_') || *i == "all")
        .unwrap_or(items.len());
    let mut out = CpuSet::new();
    for item in &items[first_list..] {
        if *item == "all" {
            out = out.union(cpus);
            continue;
        }
        let (range, stride) = match item.split_once(':') {
            Some((r, s)) => (r, Some(s)),
            None => (*item, None),
        };
        let number = |s: &str| -> Result<u32, CpulistFault> {
            if s == "N" {
                Ok(last)
            } else {
                s.parse().map_err(|_| CpulistFault::NotACpu(s.to_owned()))
            }
        };
        let (start, end) = match range.split_once('-') {
            Some((a, b)) => (number(a)?, number(b)?),
            None => {
                let n = number(range)?;
                (n, n)
            }
        };
        if end < start {
            return Err(CpulistFault::Backwards(start, end));
        }
        let (used, group) = match stride {
            None => (1, 1),
            Some(s) => {
                let (u, g) = s
                    .split_once('/')
                    .ok_or_else(|| CpulistFault::NotAStride(s.to_owned()))?;
                let u: u32 = u
                    .parse()
                    .map_err(|_| CpulistFault::NotACount(u.to_owned()))?;
                let g: u32 = g
                    .parse()
                    .map_err(|_| CpulistFault::NotACount(g.to_owned()))?;
                if u == 0 || g == 0 || u > g {
                    return Err(CpulistFault::BadStride(s.to_owned()));
                }
                (u, g)
            }
        };
        for cpu in start..=end {
            if (cpu - start) % group < used {
                out.insert(CpuId(cpu));
            }
        }
    }
    if out.is_empty() {
        return Err(CpulistFault::Empty);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host() -> CpuSet {
        "0-15".parse().unwrap_or_default()
    }

    #[test]
    fn reads_parameters_and_stops_at_init_arguments() {
        let c = KernelCmdline::parse(
            "BOOT_IMAGE=/vmlinuz quiet iommu=pt isolcpus=2-5 iommu=on x=\"a b\" -- isolcpus=9",
        );
        assert_eq!(c.get("iommu"), Some("on"));
        assert_eq!(c.get("x"), Some("a b"));
        assert!(c.has("quiet"));
        assert_eq!(c.get("quiet"), None);
        assert_eq!(
            c.cpu_list("isolcpus", &host())
                .map(|r| r.map(|s| s.to_string())),
            Some(Ok("2-5".to_owned()))
        );
        assert_eq!(c.cpu_list("nohz_full", &host()), None);
    }

    #[test]
    fn understands_the_kernels_cpulist_syntax() {
        let list = |v: &str| parse_kernel_cpulist(v, &host()).map(|s| s.to_string());
        assert_eq!(list("domain,managed_irq,2-5,8"), Ok("2-5,8".to_owned()));
        assert_eq!(list("nohz,1"), Ok("1".to_owned()));
        assert_eq!(list("all"), Ok("0-15".to_owned()));
        assert_eq!(list("8-N"), Ok("8-15".to_owned()));
        // The kernel's example: 0-7:2/4 is 0,1,4,5.
        assert_eq!(list("0-7:2/4"), Ok("0-1,4-5".to_owned()));
        assert!(list("5-2").is_err());
        assert!(list("domain").is_err());
        assert!(list("1-3:3/2").is_err());
        assert!(list("x7").is_err());
    }
}
