//! Who is in the picture: every tenant of either side — now, and with the
//! plan — once, in order of first appearance, with its colour, so that a VM
//! looks the same on both sides and the legend names it once. Its index is
//! also the id of its hatch pattern (`emu-N`).

use super::palette::{HOST_GREY, PALETTE};
use crate::tenant::{Tenant, TenantKind};

/// One tenant of the picture.
#[derive(Debug, Clone)]
pub(super) struct Member {
    pub(super) name: String,
    pub(super) kind: TenantKind,
    /// The host grey, or the next palette colour (they repeat after 13 VMs).
    pub(super) colour: &'static str,
}

impl Member {
    fn is(&self, t: &Tenant) -> bool {
        self.kind == t.kind && self.name == t.name
    }
}

/// Every tenant of the picture.
#[derive(Debug, Clone, Default)]
pub(super) struct Cast {
    pub(super) members: Vec<Member>,
}

impl Cast {
    /// The tenants of `sides`, each once (by kind and name), the first
    /// side's in its order, then those only later sides have.
    pub(super) fn new(sides: &[&[Tenant]]) -> Cast {
        let mut members: Vec<Member> = Vec::new();
        let mut vms = 0;
        for t in sides.iter().flat_map(|side| side.iter()) {
            if members.iter().any(|m| m.is(t)) {
                continue;
            }
            let colour = match t.kind {
                TenantKind::Host => HOST_GREY,
                TenantKind::Vm => {
                    vms += 1;
                    PALETTE[(vms - 1) % PALETTE.len()]
                }
            };
            members.push(Member {
                name: t.name.clone(),
                kind: t.kind,
                colour,
            });
        }
        Cast { members }
    }

    /// `t`'s index in the cast.
    pub(super) fn index(&self, t: &Tenant) -> Option<usize> {
        self.members.iter().position(|m| m.is(t))
    }
}
