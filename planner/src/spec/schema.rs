//! The spec file's TOML shape, as serde reads it: every table and key, with
//! the position of each value for error messages. Checking is `super::parse`'s.

use crate::model::{EmulatorPolicy, NumaPolicy, ThreadPolicy};
use serde::Deserialize;
use toml::Spanned;

/// How much a NIC's locality matters (`nic_affinity`, `nics[].affinity`).
#[derive(Debug, Deserialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub(crate) enum NicLocality {
    /// vCPUs only on the NIC's node.
    Required,
    /// vCPUs only on nodes of the NIC's package (socket).
    Socket,
    /// As many as possible on the NIC's node.
    Preferred,
    /// Don't care.
    Ignore,
}

/// A memory size: `"16GiB"`, or a number of MiB.
#[derive(Debug, Deserialize, Clone, PartialEq)]
#[serde(untagged)]
pub(super) enum Size {
    Text(String),
    MiB(u64),
}

#[derive(Debug, Deserialize, Default, Clone)]
#[serde(deny_unknown_fields)]
pub(super) struct HostSection {
    /// A fleet host's name (`[[host]]` only).
    pub(super) name: Option<Spanned<String>>,
    /// A fleet host's libvirt URI (`[[host]]` only).
    pub(super) connect: Option<Spanned<String>>,
    /// A fleet host's captured (or mounted) filesystem root for `doctor`'s
    /// facts (`[[host]]` only).
    pub(super) doctor_root: Option<Spanned<String>>,
    /// A fleet host's names for its NICs (`[[host]]` only):
    /// `nic_names = { uplink = "0000:65:00.0" }`, for `nic = "uplink"`.
    pub(super) nic_names: Option<Spanned<std::collections::BTreeMap<String, Spanned<String>>>>,
    pub(super) source: Option<Spanned<String>>,
    pub(super) reserved_cores: Option<Spanned<u32>>,
    pub(super) reserved_cores_per_node: Option<Spanned<u32>>,
    pub(super) reserved_cpus: Option<Spanned<String>>,
    #[serde(default)]
    pub(super) tables: Vec<Spanned<String>>,
    pub(super) line_rate_gbps: Option<Spanned<f64>>,
    pub(super) reserved_memory: Option<Spanned<Size>>,
}

/// Declares a table that holds the placement policy keys, `[defaults]` or
/// `[[vm]]`: the shared keys are written here once, and each `@…` marker
/// in the table's own list says where that run of them stands. The order is
/// the point: serde's "unknown field `…`, expected one of …" lists the
/// fields in declaration order, and that refusal is the user's (snapshots
/// pin it), so `[[vm]]` keeps its own keys between the policies where they
/// always stood. Every field is `pub(super)`.
macro_rules! policy_table {
    (
        $(#[$attr:meta])*
        pub(super) struct $name:ident {
            $($(#[$a_attr:meta])* $a:ident: $a_ty:ty,)*
            @threads_to_packet_bytes
            $($(#[$b_attr:meta])* $b:ident: $b_ty:ty,)*
            @set_vcpus_to_realtime
            $($(#[$c_attr:meta])* $c:ident: $c_ty:ty,)*
            @cache_aware_to_cache_passthrough
            $($(#[$d_attr:meta])* $d:ident: $d_ty:ty,)*
            @movable
        }
    ) => {
        $(#[$attr])*
        pub(super) struct $name {
            $($(#[$a_attr])* pub(super) $a: $a_ty,)*
            pub(super) threads: Option<ThreadPolicy>,
            pub(super) emulator: Option<EmulatorPolicy>,
            pub(super) numa: Option<NumaPolicy>,
            pub(super) nic_affinity: Option<NicLocality>,
            pub(super) min_fraction: Option<Spanned<f64>>,
            /// The level of a model answer's interval, whose conservative
            /// end gives the vCPUs (0 < c < 1; 0.9).
            pub(super) confidence: Option<Spanned<f64>>,
            pub(super) iothreads: Option<u32>,
            pub(super) priority: Option<i64>,
            pub(super) packet_bytes: Option<u32>,
            $($(#[$b_attr])* pub(super) $b: $b_ty,)*
            pub(super) set_vcpus: Option<bool>,
            pub(super) allow_extrapolation: Option<bool>,
            pub(super) memory: Option<Spanned<Size>>,
            pub(super) hugepages: Option<Spanned<String>>,
            pub(super) housekeeping_vcpus: Option<Spanned<u32>>,
            pub(super) realtime: Option<bool>,
            $($(#[$c_attr])* pub(super) $c: $c_ty,)*
            pub(super) cache_aware: Option<bool>,
            pub(super) cache_passthrough: Option<bool>,
            $($(#[$d_attr])* pub(super) $d: $d_ty,)*
            /// A running VM may be re-pinned on its host, or (fleets) move
            /// to another host; in `[defaults]`, every VM that does not say.
            pub(super) movable: Option<Spanned<bool>>,
        }
    };
}

policy_table! {
    /// `[defaults]`: the policies of every `[[vm]]` that does not set its own.
    #[derive(Debug, Deserialize, Default, Clone, PartialEq)]
    #[serde(deny_unknown_fields)]
    pub(super) struct Policies {
        @threads_to_packet_bytes
        @set_vcpus_to_realtime
        @cache_aware_to_cache_passthrough
        @movable
    }
}

policy_table! {
    /// One `[[vm]]`: what it needs, and its own policies.
    #[derive(Debug, Deserialize, Clone)]
    #[serde(deny_unknown_fields)]
    pub(super) struct VmSection {
        name: Spanned<String>,
        profile: Option<Spanned<String>>,
        target_gbps: Option<Spanned<f64>>,
        vcpus: Option<Spanned<u32>>,
        nic: Option<Spanned<String>>,
        nics: Option<Spanned<Vec<NicEntry>>>,
        @threads_to_packet_bytes
        domain_xml: Option<Spanned<String>>,
        @set_vcpus_to_realtime
        realtime_vcpus: Option<Spanned<String>>,
        @cache_aware_to_cache_passthrough
        /// Fleet specs: the one host it may go to.
        host: Option<Spanned<String>>,
        /// Fleet specs: the hosts it may go to.
        hosts: Option<Spanned<Vec<String>>>,
        @movable
    }
}

/// One of `nics = [{ addr = "…", affinity = "…" }]`.
#[derive(Debug, Deserialize, Clone)]
#[serde(deny_unknown_fields)]
pub(super) struct NicEntry {
    pub(super) addr: Spanned<String>,
    pub(super) affinity: Option<NicLocality>,
}

#[derive(Debug, Deserialize, Clone)]
#[serde(deny_unknown_fields)]
pub(super) struct FixedSection {
    pub(super) name: Spanned<String>,
    pub(super) cpus: Spanned<String>,
}

/// `[[ignore]]`: a domain the plan does not plan around.
#[derive(Debug, Deserialize, Clone)]
#[serde(deny_unknown_fields)]
pub(super) struct IgnoreSection {
    pub(super) name: Spanned<String>,
}

#[derive(Debug, Deserialize, Clone)]
#[serde(deny_unknown_fields)]
pub(super) struct SpecFile {
    #[serde(default)]
    pub(super) host: HostField,
    #[serde(default)]
    pub(super) defaults: Policies,
    #[serde(default)]
    pub(super) vm: Vec<Spanned<VmSection>>,
    #[serde(default)]
    pub(super) fixed: Vec<Spanned<FixedSection>>,
    #[serde(default)]
    pub(super) ignore: Vec<Spanned<IgnoreSection>>,
}

/// `[host]` (one host) or `[[host]]` (a fleet).
#[derive(Debug, Clone)]
#[allow(clippy::large_enum_variant)] // one per spec file
pub(super) enum HostField {
    One(HostSection),
    Many(Vec<Spanned<HostSection>>),
}

impl Default for HostField {
    fn default() -> Self {
        HostField::One(HostSection::default())
    }
}

impl<'de> Deserialize<'de> for HostField {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = HostField;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a [host] table, or [[host]] tables for a fleet")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                map: A,
            ) -> Result<HostField, A::Error> {
                HostSection::deserialize(serde::de::value::MapAccessDeserializer::new(map))
                    .map(HostField::One)
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                seq: A,
            ) -> Result<HostField, A::Error> {
                Vec::deserialize(serde::de::value::SeqAccessDeserializer::new(seq))
                    .map(HostField::Many)
            }
        }
        deserializer.deserialize_any(Visitor)
    }
}

/// Every key of every table, for suggestions when serde's message lists
/// none: read from the types above (their derived `Deserialize` names its
/// fields), so that a new key is never missing here.
pub(super) fn keys() -> Vec<&'static str> {
    let tables = [
        fields::<SpecFile>(),
        fields::<HostSection>(),
        fields::<Policies>(),
        fields::<VmSection>(),
        fields::<NicEntry>(),
        fields::<FixedSection>(),
        fields::<IgnoreSection>(),
    ];
    let mut keys: Vec<&'static str> = Vec::new();
    for key in tables.into_iter().flatten() {
        if !keys.contains(key) {
            keys.push(key);
        }
    }
    keys
}

/// The keys of a `[[vm]]`, in the order the file's table declares them.
pub(super) fn vm_keys() -> &'static [&'static str] {
    fields::<VmSection>()
}

/// The field names a derived `Deserialize` struct asks for: a deserializer
/// that records them from `deserialize_struct` and reads nothing.
fn fields<'de, T: Deserialize<'de>>() -> &'static [&'static str] {
    let mut seen: &'static [&'static str] = &[];
    let _ = T::deserialize(FieldProbe(&mut seen));
    seen
}

/// See [`fields`].
struct FieldProbe<'a>(&'a mut &'static [&'static str]);

impl<'de> serde::Deserializer<'de> for FieldProbe<'_> {
    type Error = serde::de::value::Error;

    fn deserialize_any<V: serde::de::Visitor<'de>>(self, _: V) -> Result<V::Value, Self::Error> {
        Err(serde::de::Error::custom(
            "only a struct's field names are read",
        ))
    }

    fn deserialize_struct<V: serde::de::Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        *self.0 = fields;
        self.deserialize_any(visitor)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes
        byte_buf option unit unit_struct newtype_struct seq tuple tuple_struct map
        enum identifier ignored_any
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_keys_are_every_tables_fields() {
        let keys = keys();
        // One from each table, including those the hand-written list lacked.
        for key in [
            "host",
            "source",
            "reserved_memory",
            "threads",
            "memory",
            "hugepages",
            "set_vcpus",
            "domain_xml",
            "realtime_vcpus",
            "addr",
            "cpus",
            "ignore",
            "movable",
            "nic_names",
        ] {
            assert!(keys.contains(&key), "{key} missing from {keys:?}");
        }
        assert!(!keys.contains(&"threds"));
        let mut sorted = keys.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), keys.len(), "a key listed twice");
    }

    /// serde's "unknown field `…`, expected one of …" lists a table's
    /// fields in declaration order, and the refusal is the user's (snapshots
    /// pin the `[[vm]]` one): the order of the keys is part of the output.
    #[test]
    fn the_policy_tables_list_their_keys_in_the_files_order() {
        assert_eq!(
            fields::<Policies>(),
            [
                "threads",
                "emulator",
                "numa",
                "nic_affinity",
                "min_fraction",
                "confidence",
                "iothreads",
                "priority",
                "packet_bytes",
                "set_vcpus",
                "allow_extrapolation",
                "memory",
                "hugepages",
                "housekeeping_vcpus",
                "realtime",
                "cache_aware",
                "cache_passthrough",
                "movable",
            ]
        );
        assert_eq!(
            fields::<VmSection>(),
            [
                "name",
                "profile",
                "target_gbps",
                "vcpus",
                "nic",
                "nics",
                "threads",
                "emulator",
                "numa",
                "nic_affinity",
                "min_fraction",
                "confidence",
                "iothreads",
                "priority",
                "packet_bytes",
                "domain_xml",
                "set_vcpus",
                "allow_extrapolation",
                "memory",
                "hugepages",
                "housekeeping_vcpus",
                "realtime",
                "realtime_vcpus",
                "cache_aware",
                "cache_passthrough",
                "host",
                "hosts",
                "movable",
            ]
        );
    }
}
