//! Putting VMs back as a journal recorded them: `apply --rollback`, its
//! dry run, and the rollback of an apply that failed or was interrupted.

use super::{lv, Journal, JournalVm, Restored, Session, StepError};
use crate::interrupt::{Interrupt, Signal};
use virt::connect::Connect;
use virt_sys::{VIR_DOMAIN_AFFECT_CONFIG as AFFECT_CONFIG, VIR_DOMAIN_AFFECT_LIVE as AFFECT_LIVE};

impl Session {
    /// Puts every VM of `journal` back (used by `apply --rollback`).
    /// With `redefine`, a domain of the journalled name but another UUID
    /// (deleted and defined again since) gets the journal's definition with
    /// its own UUID.
    /// A first request on `interrupt` does not stop it (a rollback is what
    /// an interrupted apply does); a second one does
    /// ([`Restored::interrupted`]).
    pub fn rollback(&self, journal: &Journal, redefine: bool, interrupt: &Interrupt) -> Restored {
        self.restore(&journal.vms, redefine, interrupt)
    }

    /// What `apply --rollback --dry-run` prints: per VM, whether its pins
    /// differ from the journal's now (live and config), read only.
    pub fn rollback_preview(&self, journal: &Journal) -> Vec<String> {
        let mut lines = Vec::new();
        for j in &journal.vms {
            let Ok(domain) = self.conn.lookup_domain_by_name(&j.name) else {
                lines.push(format!("{}: not found: nothing to restore onto", j.name));
                continue;
            };
            let uuid = domain.uuid_string().unwrap_or_default();
            if uuid != j.uuid {
                lines.push(format!(
                    "{}: its UUID is now {uuid}, the journal's {}: restored only with --redefine",
                    j.name, j.uuid
                ));
                continue;
            }
            let n = u32::try_from(j.config.vcpus.len()).unwrap_or(u32::MAX);
            let mut what = Vec::new();
            match self.pins(&domain, n, AFFECT_CONFIG) {
                Ok(now) => match now.restricted_to(&j.config).describe_difference(&j.config) {
                    None => what.push("config as journalled".to_owned()),
                    Some(d) => what.push(format!("config would be restored ({d})")),
                },
                Err(e) => what.push(format!("config unreadable: {}", lv(&e))),
            }
            let running = domain.is_active().unwrap_or(false);
            match (&j.live, running) {
                (Some(live), true) => match self.pins(&domain, n, AFFECT_LIVE) {
                    Ok(now) => match now.restricted_to(live).describe_difference(live) {
                        None => what.push("live pins as journalled".to_owned()),
                        Some(d) => what.push(format!("live pins would be restored ({d})")),
                    },
                    Err(e) => what.push(format!("live pins unreadable: {}", lv(&e))),
                },
                (None, true) => what.push(
                    "started since the apply: its live pins are not in the journal and stay \
                     until it restarts"
                        .to_owned(),
                ),
                (_, false) => what.push("not running".to_owned()),
            }
            lines.push(format!("{}: {}", j.name, what.join("; ")));
        }
        lines
    }

    /// Restores VMs from the journal and verifies them: live pins by pin
    /// calls (when the domain is still running), the config by redefining the
    /// journalled definition. When the connection has dropped (libvirtd
    /// restarted), it reconnects once and carries on. A second request on
    /// `interrupt` stops it before the next pin call or VM.
    pub(super) fn restore(
        &self,
        vms: &[JournalVm],
        redefine: bool,
        interrupt: &Interrupt,
    ) -> Restored {
        let mut done = Restored::default();
        let mut reconnected: Option<Connect> = None;
        let mut tried_reconnecting = false;
        let stop = || interrupt.again().then(|| interrupt.last()).flatten();
        // In reverse: the VMs were pinned in an order where none went onto
        // a core another still held (issue 27), so undoing them backwards
        // keeps that true.
        for j in vms.iter().rev() {
            if let Some(signal) = stop() {
                done.interrupted = Some(signal);
                done.errors.push(format!(
                    "{}: not restored (interrupted again, {signal})",
                    j.name
                ));
                continue;
            }
            let conn = reconnected.as_ref().unwrap_or(&self.conn);
            let mut result = self.restore_one(conn, j, redefine, &stop);
            if let Err(StepError::Interrupted { signal, .. }) = result {
                done.interrupted = Some(signal);
            }
            if result.is_err()
                && done.interrupted.is_none()
                && !tried_reconnecting
                && !conn.is_alive().unwrap_or(false)
            {
                tried_reconnecting = true;
                match crate::libvirt::connection::open(&self.uri, false) {
                    Ok(fresh) => {
                        result = self.restore_one(&fresh, j, redefine, &stop);
                        reconnected = Some(fresh);
                    }
                    Err(e) => {
                        done.errors.push(format!(
                            "the connection dropped, and reconnecting failed: {e}"
                        ));
                    }
                }
            }
            match result {
                Ok(note) => {
                    done.restored.push(j.name.clone());
                    done.notes.extend(note.map(|n| format!("{}: {n}", j.name)));
                }
                Err(e) => done.errors.push(format!("{}: {e}", j.name)),
            }
        }
        // Said in the journal's order.
        done.restored.reverse();
        done.errors.reverse();
        done.notes.reverse();
        done
    }

    /// Restores one VM; `Some(note)` when what was restored is not the whole
    /// story (started since a config-only apply, redefined over a new UUID).
    fn restore_one(
        &self,
        conn: &Connect,
        j: &JournalVm,
        redefine: bool,
        stop: &dyn Fn() -> Option<Signal>,
    ) -> Result<Option<String>, StepError> {
        let mut note = None;
        let domain = conn
            .lookup_domain_by_name(&j.name)
            .map_err(|e| StepError::Gone((&e).into()))?;
        let uuid = domain.uuid_string().map_err(|e| StepError::Libvirt {
            what: "reading its UUID",
            cause: (&e).into(),
        })?;
        let mut config_xml = std::borrow::Cow::Borrowed(j.config_xml.as_str());
        if uuid != j.uuid {
            if !redefine {
                return Err(StepError::OtherDomain {
                    now: uuid,
                    journal: j.uuid.clone(),
                });
            }
            // The journal's definition, on the domain that has the name now.
            config_xml = std::borrow::Cow::Owned(j.config_xml.replacen(
                &format!("<uuid>{}</uuid>", j.uuid),
                &format!("<uuid>{uuid}</uuid>"),
                1,
            ));
            note = Some(format!(
                "redefined from the journal over the domain's new UUID {uuid} (the journal's: {})",
                j.uuid
            ));
        }
        let running = domain.is_active().unwrap_or(false);
        if j.live.is_none() && running {
            note = Some(
                "config restored; it was started after the apply, so its live pins are the \
                 planned ones until it restarts (or `virsh vcpupin` them)"
                    .to_owned(),
            );
        }
        if let Some(live) = &j.live {
            if running && uuid == j.uuid {
                // Restoring is never fault-injected.
                self.set_and_verify(
                    &domain,
                    live,
                    AFFECT_LIVE,
                    "the journal",
                    &mut 0,
                    &mut |_| Ok(()),
                    stop,
                )?;
            }
        }
        if let Some(signal) = stop() {
            return Err(StepError::Interrupted {
                signal,
                what: "its config".to_owned(),
                scope: "config",
            });
        }
        conn.define_domain_xml(&config_xml)
            .map_err(|e| StepError::Libvirt {
                what: "redefining its config",
                cause: (&e).into(),
            })?;
        self.verify(&domain, &j.config, AFFECT_CONFIG, "the journal")?;
        Ok(note)
    }
}
