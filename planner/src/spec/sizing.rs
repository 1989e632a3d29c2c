//! How a `[[vm]]` is sized: `vcpus`, or a table's `profile` at
//! `target_gbps` (never both), checked before any host is known.

use super::parse::Lines;
use super::schema::VmSection;
use super::{Sizing, Spec, SpecError};
use crate::text::closest;
use toml::Spanned;

impl Spec {
    /// How a VM's vCPU count is given: `vcpus`, or `profile` + `target_gbps`
    /// (never both), with the line of the key that sizes it.
    pub(super) fn sizing(
        &self,
        name: &str,
        vm: &VmSection,
        line: usize,
        lines: &Lines,
    ) -> Result<(Sizing, usize), SpecError> {
        match (&vm.vcpus, &vm.profile, &vm.target_gbps) {
            (Some(v), None, None) => {
                if *v.get_ref() == 0 {
                    return Err(self.error(
                        lines.of(v),
                        "vm.vcpus",
                        format!("{name}: vcpus must be at least 1"),
                    ));
                }
                Ok((Sizing::Explicit(*v.get_ref()), lines.of(v)))
            }
            (Some(v), Some(_), _) | (Some(v), _, Some(_)) => Err(self.error(
                lines.of(v),
                "vm.vcpus",
                format!("{name}: give either vcpus or profile + target_gbps, not both"),
            )),
            (None, Some(p), Some(t)) => self.table_sizing(name, p, t, lines),
            (None, Some(p), None) => Err(self.error(
                lines.of(p),
                "vm.target_gbps",
                format!("{name}: profile needs target_gbps (the rate to reach)"),
            )),
            (None, None, Some(t)) => Err(self.error(
                lines.of(t),
                "vm.profile",
                format!("{name}: target_gbps needs a profile from the tables"),
            )),
            (None, None, None) => Err(self.error(
                line,
                "vm.vcpus",
                format!("{name}: give vcpus = N, or profile and target_gbps"),
            )),
        }
    }

    /// Sizing from the tables: the profile must be in them, the target above 0.
    pub(super) fn table_sizing(
        &self,
        name: &str,
        profile: &Spanned<String>,
        target: &Spanned<f64>,
        lines: &Lines,
    ) -> Result<(Sizing, usize), SpecError> {
        let line = lines.of(profile);
        let profile = profile.get_ref().clone();
        if self.table.rows.is_empty() {
            return Err(self.error(
                line,
                "vm.profile",
                format!("{name}: profile {profile:?} needs throughput tables: add tables = [\"...csv\"] to [host]"),
            ));
        }
        let profiles = self.table.profiles();
        if !profiles.contains(&profile.as_str()) {
            let mut e = self.error(
                line,
                "vm.profile",
                format!("{name}: no profile {profile:?} in the tables"),
            );
            e.hint = Some(match closest(&profile, profiles.iter().copied()) {
                Some(c) => format!("did you mean {c:?}? profiles: {}", profiles.join(", ")),
                None => format!("profiles: {}", profiles.join(", ")),
            });
            return Err(e);
        }
        let target_gbps = *target.get_ref();
        if !(target_gbps.is_finite() && target_gbps > 0.0) {
            return Err(self.error(
                lines.of(target),
                "vm.target_gbps",
                format!("{name}: target_gbps must be above 0"),
            ));
        }
        Ok((
            Sizing::Table {
                profile,
                target_gbps,
            },
            line,
        ))
    }
}
