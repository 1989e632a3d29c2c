//! Reads back the topology JSON `pinplan topology --format json` writes
//! (`docs/topology.md`, "JSON output"), so that a capture is a source like
//! the XML it was made from. The file is checked, not trusted: every value
//! must have its documented type, and the lists must be the ones pinplan
//! would build from its CPUs (the same CPUs, numbered the same way), else the
//! error names the key (`pus[3].cpu`). Writing the JSON is
//! [`HostTopology::to_json`]'s.

use super::assemble::{RawGroup, RawNode, RawPu, RawTopology};
use super::{Core, HostTopology, L3Domain, NumaNode, Package, PciDevice, Pu, TopologyError};
use crate::cpuset::CpuSet;
use crate::ids::CpuId;
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::{Map, Value};
use std::path::Path;

/// Whether `text` reads as JSON rather than XML: its first non-blank
/// character (after a byte-order mark) is `{`.
pub(super) fn looks_like_json(text: &str) -> bool {
    text.trim_start_matches('\u{feff}')
        .trim_start()
        .starts_with('{')
}

/// The topology in `text`, the JSON file `path`.
pub(crate) fn read(path: &Path, text: &str) -> Result<HostTopology, TopologyError> {
    let value: Value = serde_json::from_str(text).map_err(|e| syntax(path, e))?;
    let Value::Object(root) = &value else {
        return Err(not_ours(path, "the JSON is not an object"));
    };
    refuse_other_kinds(path, root)?;
    let host: HostTopology = serde_json::from_str(text).map_err(|e| {
        let key = locate(root).unwrap_or_default();
        TopologyError::BadJson {
            path: path.to_owned(),
            line: e.line(),
            column: e.column(),
            key,
            source: e,
        }
    })?;
    check_cpus(path, &host)?;
    check_numbering(path, host)
}

/// A file that is not JSON at all, or cut short.
fn syntax(path: &Path, e: serde_json::Error) -> TopologyError {
    let problem = if e.classify() == serde_json::error::Category::Eof {
        "the JSON ends early: the file is truncated; capture it again".to_owned()
    } else {
        "this is not well-formed JSON".to_owned()
    };
    TopologyError::Malformed {
        path: path.to_owned(),
        line: e.line(),
        column: e.column(),
        problem,
    }
}

fn not_ours(path: &Path, what: &str) -> TopologyError {
    TopologyError::WrongKind {
        path: path.to_owned(),
        problem: format!("{what}: not the topology JSON `pinplan topology --format json` writes"),
    }
}

/// Refuses pinplan's other JSON files (plans, journals, reports) and any JSON
/// without the topology's keys, naming what it is or the key it lacks.
fn refuse_other_kinds(path: &Path, root: &Map<String, Value>) -> Result<(), TopologyError> {
    let version = root
        .get("version")
        .map(|v| format!(" (version {v})"))
        .unwrap_or_default();
    if let Some(tool) = root.get("tool").and_then(Value::as_str) {
        return Err(not_ours(
            path,
            &format!("this is a `{tool}` journal{version}"),
        ));
    }
    if root.contains_key("vms") && root.contains_key("host") {
        return Err(not_ours(path, &format!("this is a pinplan plan{version}")));
    }
    if root.contains_key("tenants") && root.contains_key("conflicts") {
        return Err(not_ours(
            path,
            &format!("this is a pinplan report{version}"),
        ));
    }
    const KEYS: [&str; 7] = [
        "source",
        "packages",
        "numa_nodes",
        "l3_domains",
        "cores",
        "pus",
        "pci",
    ];
    if let Some(missing) = KEYS.iter().find(|k| !root.contains_key(**k)) {
        return Err(not_ours(
            path,
            &format!("the JSON{version} has no key `{missing}`"),
        ));
    }
    Ok(())
}

/// The first key whose value does not read as its type (`pus[3].cpu`),
/// when it can be found.
fn locate(root: &Map<String, Value>) -> Option<String> {
    let one = |key: &str, bad: fn(&Value) -> Option<String>| {
        root.get(key)
            .and_then(bad)
            .map(|inner| join(key.to_owned(), &inner))
    };
    one("source", item::<String>)
        .or_else(|| one("packages", list::<Package>))
        .or_else(|| one("numa_nodes", list::<NumaNode>))
        .or_else(|| one("l3_domains", list::<L3Domain>))
        .or_else(|| one("cores", list::<Core>))
        .or_else(|| one("pus", list::<Pu>))
        .or_else(|| one("pci", list::<PciDevice>))
        .or_else(|| one("cpu_vendor", item::<Option<String>>))
}

/// `pus` + `[3].cpu` = `pus[3].cpu`; `[3]` + `cpu` = `[3].cpu`.
fn join(outer: String, inner: &str) -> String {
    if inner.is_empty() || inner.starts_with('[') {
        outer + inner
    } else {
        format!("{outer}.{inner}")
    }
}

/// Where a list of `T` fails to read: its first bad item (`[3].cpu`), or
/// `""` when it is no list.
fn list<T: DeserializeOwned>(value: &Value) -> Option<String> {
    let Value::Array(items) = value else {
        return Vec::<T>::deserialize(value).err().map(|_| String::new());
    };
    items
        .iter()
        .enumerate()
        .find_map(|(i, one)| item::<T>(one).map(|inner| join(format!("[{i}]"), &inner)))
}

/// Where `value` fails to read as `T`: `None` when it reads; in an object,
/// the field whose removal makes it read (or merely be missing); else `""`,
/// the value itself.
fn item<T: DeserializeOwned>(value: &Value) -> Option<String> {
    T::deserialize(value).err()?;
    let Value::Object(fields) = value else {
        return Some(String::new());
    };
    let culprit = fields.keys().find(|key| {
        let mut rest = fields.clone();
        rest.remove(key.as_str());
        match T::deserialize(&Value::Object(rest)) {
            Ok(_) => true,
            Err(e) => e.to_string() == format!("missing field `{key}`"),
        }
    });
    Some(culprit.cloned().unwrap_or_default())
}

/// Every CPU number below [`CpuId::LIMIT`], and each listed once.
fn check_cpus(path: &Path, host: &HostTopology) -> Result<(), TopologyError> {
    let bad = |i: usize, problem: String| TopologyError::BadJsonValue {
        path: path.to_owned(),
        key: format!("pus[{i}].cpu"),
        problem,
    };
    let mut seen = std::collections::BTreeMap::new();
    for (i, pu) in host.pus.iter().enumerate() {
        if pu.cpu.0 >= CpuId::LIMIT {
            return Err(bad(
                i,
                format!(
                    "CPU {} is out of range: CPU numbers are below {}",
                    pu.cpu,
                    CpuId::LIMIT
                ),
            ));
        }
        if let Some(first) = seen.insert(pu.cpu, i) {
            return Err(bad(
                i,
                format!("CPU {} is listed twice (also pus[{first}])", pu.cpu),
            ));
        }
    }
    Ok(())
}

/// Rebuilds the model from the file's CPUs, as every reader does, and
/// refuses a file whose lists differ from it (edited by hand, or not
/// pinplan's): the plan must see what the capture's source would give.
fn check_numbering(path: &Path, host: HostTopology) -> Result<HostTopology, TopologyError> {
    let mut rebuilt = raw(path, &host).assemble()?;
    rebuilt.source.clone_from(&host.source);
    if rebuilt == host {
        return Ok(host);
    }
    let key = first_difference(&host, &rebuilt);
    Err(TopologyError::BadJsonValue {
        path: path.to_owned(),
        key,
        problem: "it disagrees with the CPUs in `pus` and the groups that list them \
                  (pinplan numbers cores, packages and L3 domains by their lowest CPU)"
            .to_owned(),
    })
}

/// The first entry where `read` and `rebuilt` differ, as a key.
fn first_difference(read: &HostTopology, rebuilt: &HostTopology) -> String {
    fn at<T: PartialEq>(key: &str, read: &[T], rebuilt: &[T]) -> Option<String> {
        if read == rebuilt {
            return None;
        }
        let i = read
            .iter()
            .zip(rebuilt)
            .position(|(a, b)| a != b)
            .unwrap_or(read.len().min(rebuilt.len()));
        Some(format!("{key}[{i}]"))
    }
    at("packages", &read.packages, &rebuilt.packages)
        .or_else(|| at("numa_nodes", &read.numa_nodes, &rebuilt.numa_nodes))
        .or_else(|| at("l3_domains", &read.l3_domains, &rebuilt.l3_domains))
        .or_else(|| at("cores", &read.cores, &rebuilt.cores))
        .or_else(|| at("pus", &read.pus, &rebuilt.pus))
        .or_else(|| at("pci", &read.pci, &rebuilt.pci))
        .unwrap_or_else(|| "cpu_vendor".to_owned())
}

/// The id of the group among `groups` whose CPUs hold `cpu`.
fn owner<'a>(mut groups: impl Iterator<Item = (u32, &'a CpuSet)>, cpu: CpuId) -> Option<u64> {
    groups
        .find(|(_, cpus)| cpus.contains(cpu))
        .map(|(id, _)| u64::from(id))
}

/// The file's topology as a reader's flat list: each CPU with its core,
/// package and L3 domain by the file's ids, the groups as listed.
fn raw(path: &Path, host: &HostTopology) -> RawTopology {
    let pus = host
        .pus
        .iter()
        .map(|p| RawPu {
            cpu: p.cpu,
            online: p.online,
            allowed: p.allowed,
            core: p.core.map(|c| u64::from(c.0)),
            package: owner(host.packages.iter().map(|g| (g.id.0, &g.cpus)), p.cpu),
            node: p.numa_node,
            l3: owner(host.l3_domains.iter().map(|g| (g.id.0, &g.cpus)), p.cpu),
        })
        .collect();
    let group = |id: u32, os_index, size_bytes, cpus: &CpuSet| RawGroup {
        key: u64::from(id),
        os_index,
        size_bytes,
        known_cpus: cpus.clone(),
    };
    RawTopology {
        // Errors of the shared step name the file.
        source: path.display().to_string(),
        pus,
        packages: host
            .packages
            .iter()
            .map(|p| group(p.id.0, p.os_index, None, &p.cpus))
            .collect(),
        l3s: host
            .l3_domains
            .iter()
            .map(|d| group(d.id.0, None, d.size_bytes, &d.cpus))
            .collect(),
        nodes: host
            .numa_nodes
            .iter()
            .map(|n| RawNode {
                id: n.id,
                memory_bytes: n.memory_bytes,
                memory_free_bytes: n.memory_free_bytes,
                hugepages: n.hugepages.clone(),
                cpus: Some(n.cpus.clone()),
                distances: n.distances.clone(),
            })
            .collect(),
        pci: host.pci.clone(),
        cpu_vendor: host.cpu_vendor.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::{load, Source};
    use serde_json::json;

    /// CPUs 0-3: core 0 is CPUs 0,1, core 1 CPUs 2,3; one package, node 0
    /// with 1 GiB.
    fn host() -> HostTopology {
        load(&Source::Synthetic("package:1 core:2 pu:2".into())).unwrap_or_else(|e| panic!("{e}"))
    }

    fn read_str(text: &str) -> Result<HostTopology, String> {
        read(Path::new("h.json"), text).map_err(|e| e.to_string())
    }

    /// The host's JSON with `edit` made to it.
    fn edited(edit: impl Fn(&mut Value)) -> String {
        let mut value: Value =
            serde_json::from_str(&host().to_json()).unwrap_or_else(|e| panic!("{e}"));
        edit(&mut value);
        serde_json::to_string_pretty(&value).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn reads_back_what_it_wrote() {
        let host = host();
        assert_eq!(read_str(&host.to_json()), Ok(host.clone()));
        // A byte-order mark and blank lines first, as an editor may leave them.
        assert!(looks_like_json(&format!("\u{feff}\n  {}", host.to_json())));
        assert!(!looks_like_json("<topology/>"));
    }

    #[test]
    fn refuses_what_is_not_its_topology_naming_the_key() {
        let whole = host().to_json();
        let cases: Vec<(String, &str)> = vec![
            (
                whole[..whole.len() / 2].to_owned(),
                "the JSON ends early: the file is truncated; capture it again",
            ),
            (
                edited(|v| v["pus"][1]["cpu"] = json!("x")),
                "`pus[1].cpu` is not what pinplan's topology JSON has there",
            ),
            (
                edited(|v| v["pus"][1]["cpu"] = json!(4_294_967_296_u64)),
                "`pus[1].cpu` is not what pinplan's topology JSON has there",
            ),
            (
                edited(|v| v["pus"][1]["cpu"] = json!(70_000)),
                "h.json: `pus[1].cpu`: CPU 70000 is out of range: CPU numbers are below 65536",
            ),
            (
                edited(|v| v["numa_nodes"][0]["memory_bytes"] = json!(1e30)),
                "`numa_nodes[0].memory_bytes` is not what pinplan's topology JSON has there",
            ),
            (
                edited(|v| v["packages"][0]["cpus"] = json!("0-99999")),
                "`packages[0].cpus` is not what pinplan's topology JSON has there",
            ),
            (
                edited(|v| v["cores"][1]["cpus"] = json!(true)),
                "`cores[1].cpus` is not what pinplan's topology JSON has there",
            ),
            (
                edited(|v| v["pus"] = json!({"cpu": 0})),
                "`pus` is not what pinplan's topology JSON has there",
            ),
            (
                edited(|v| {
                    let copy = v["pus"][1].clone();
                    if let Some(pus) = v["pus"].as_array_mut() {
                        pus.insert(2, copy);
                    }
                }),
                "h.json: `pus[2].cpu`: CPU 1 is listed twice (also pus[1])",
            ),
            (
                edited(|v| v["cores"][1]["cpus"] = json!([1, 3])),
                "h.json: `cores[1]`: it disagrees with the CPUs in `pus`",
            ),
            (
                // CPU 4 is in no `pus` entry.
                edited(|v| v["packages"][0]["cpus"] = json!("0-4")),
                "h.json: `packages[0]`: it disagrees",
            ),
            (
                edited(|v| v["pus"][3]["usable"] = json!(false)),
                "h.json: `pus[3]`: it disagrees",
            ),
            (
                edited(|v| {
                    if let Some(root) = v.as_object_mut() {
                        root.remove("pus");
                    }
                }),
                "h.json: the JSON has no key `pus`: not the topology JSON `pinplan topology \
                 --format json` writes",
            ),
            (
                r#"{"version": 3, "source": "x"}"#.to_owned(),
                "h.json: the JSON (version 3) has no key `packages`",
            ),
            (
                r#"{"status": "optimal", "host": {}, "vms": []}"#.to_owned(),
                "h.json: this is a pinplan plan: not the topology JSON",
            ),
            (
                r#"{"tool": "pinplan apply", "version": 2}"#.to_owned(),
                "h.json: this is a `pinplan apply` journal (version 2): not the topology JSON",
            ),
            ("{".repeat(10_000), "this is not well-formed JSON"),
            ("{}".to_owned(), "the JSON has no key `source`"),
        ];
        for (text, expected) in cases {
            let got = read_str(&text);
            assert!(
                got.as_ref().is_err_and(|e| e.contains(expected)),
                "want {expected:?}, got {got:?} for\n{}",
                &text[..text.len().min(400)]
            );
        }
    }
}
