//! The host's interrupt lines: `/proc/irq/N/smp_affinity_list`, named from
//! `/proc/interrupts`.

use super::fs::Fs;
use crate::cpuset::CpuSet;
use std::collections::BTreeMap;

/// One interrupt line from `/proc/irq/N` and `/proc/interrupts`.
#[derive(Debug, Clone, PartialEq)]
pub struct Irq {
    /// `N`.
    pub number: u32,
    /// `smp_affinity_list`.
    pub affinity: CpuSet,
    /// Its action name(s) from `/proc/interrupts` (`eth0-rx-0`), when listed.
    pub name: Option<String>,
}

impl Fs {
    /// Every numbered `/proc/irq/N` with a readable `smp_affinity_list`, by
    /// number, named from `/proc/interrupts`; `None` when `/proc/irq` is
    /// absent.
    pub fn irqs(&self) -> Option<Vec<Irq>> {
        let dir = self.proc("irq");
        let names = self
            .read_raw(&self.proc("interrupts"))
            .map(|text| interrupt_names(&text))
            .unwrap_or_default();
        let mut irqs: Vec<Irq> = self
            .list(&dir)?
            .iter()
            .filter_map(|n| n.parse::<u32>().ok())
            .filter_map(|number| {
                let affinity = self
                    .read(&dir.join(number.to_string()).join("smp_affinity_list"))?
                    .parse()
                    .ok()?;
                Some(Irq {
                    number,
                    affinity,
                    name: names.get(&number).cloned(),
                })
            })
            .collect();
        irqs.sort_by_key(|irq| irq.number);
        Some(irqs)
    }
}

/// IRQ number → action names, from `/proc/interrupts`: the columns after the
/// per-CPU counts are the chip, the hardware IRQ with its trigger
/// (`5-edge`, `16-fasteoi`, or `27 Level`) and then the names.
pub(crate) fn interrupt_names(text: &str) -> BTreeMap<u32, String> {
    let mut lines = text.lines();
    let cpus = lines.next().map_or(0, |h| h.split_whitespace().count());
    lines
        .filter_map(|line| {
            let (number, rest) = line.trim_start().split_once(':')?;
            let number: u32 = number.trim().parse().ok()?;
            let fields: Vec<&str> = rest.split_whitespace().skip(cpus).collect();
            let trigger = fields.iter().rposition(|f| {
                let numbered = f
                    .split_once('-')
                    .is_some_and(|(n, _)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
                numbered || f.eq_ignore_ascii_case("edge") || f.eq_ignore_ascii_case("level")
            });
            let name = match trigger {
                Some(i) => fields.get(i + 1..).map(|n| n.join(" ")),
                None => fields.last().map(|n| (*n).to_owned()),
            }
            .filter(|n| !n.is_empty())?;
            Some((number, name))
        })
        .collect()
}
