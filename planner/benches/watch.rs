//! `cargo bench -p pinplan --bench watch`: `pinplan watch`'s decisions on
//! libvirt's test driver (`test:///default`: 2 nodes × 8 one-thread cores,
//! shared by every connection of this process), driven by random domain
//! events: define, start, stop, undefine (issue 30). The watcher decides
//! with `--dry-run` (the test driver has no pin calls, `virDomainPinVcpuFlags`
//! refuses both LIVE and CONFIG there), and this program carries out what it
//! decided the way the test driver allows: a domain's pins written by
//! redefining it. Starts go through the admission question first, as the
//! hook makes them; a refused start whose plan fits is pinned as the watcher
//! says and asked again once.
//!
//! After every event it checks, on its own reading of every running domain's
//! live XML, that no two running tenants have a vCPU on one core (and that
//! no vCPU is on the host's reserved core); a violation ends it with a
//! panic. It prints every decision's time (median, p99, most), the outcomes,
//! and the process's resident memory at event 100 and at the last.
//! `PINPLAN_WATCH_EVENTS` (1000) and `PINPLAN_WATCH_SEED` change the run.

// A check program: a test driver call that fails ends it with libvirt's
// words, as a failed assertion does.
#![allow(clippy::expect_used)]

use pinplan::watch::admission::Ask;
use pinplan::watch::{Decision, Happening, Outcome, Settings, Watcher};
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

const URI: &str = "test:///default";
/// Domains defined at once, at most.
const MOST_DOMAINS: usize = 24;

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A fixed-seed generator (no dependency for randomness in a bench).
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        usize::try_from((self.0 >> 33) % (n.max(1) as u64)).unwrap_or(0)
    }
}

/// A test-driver domain with a request of `vcpus` vCPUs, and pins when given.
fn domain_xml(
    name: &str,
    uuid: &str,
    vcpus: u32,
    movable: bool,
    pins: Option<(&[u32], &str)>,
) -> String {
    let tune = pins.map_or_else(String::new, |(cpus, emulator)| {
        let mut t = String::from("<cputune>");
        for (i, cpu) in cpus.iter().enumerate() {
            t.push_str(&format!("<vcpupin vcpu='{i}' cpuset='{cpu}'/>"));
        }
        t.push_str(&format!("<emulatorpin cpuset='{emulator}'/></cputune>"));
        t
    });
    format!(
        "<domain type='test'><name>{name}</name>{uuid}<memory unit='KiB'>1024</memory>\
         <vcpu placement='static'>{vcpus}</vcpu>{tune}<os><type>hvm</type></os>\
         <metadata><pinplan:vm xmlns:pinplan='urn:pinplan:vm:1' vcpus='{vcpus}' movable='{movable}'/></metadata>\
         </domain>"
    )
}

/// Each running domain's vCPU CPUs, from its live XML (every usable CPU for
/// an unpinned vCPU).
fn running_vcpus(conn: &virt::connect::Connect) -> BTreeMap<String, BTreeSet<u32>> {
    let mut out = BTreeMap::new();
    for d in conn.list_all_domains(0).unwrap_or_default() {
        if !d.is_active().unwrap_or(false) {
            continue;
        }
        let (Ok(name), Ok(xml)) = (d.name(), d.xml_desc(0)) else {
            continue;
        };
        let doc = roxmltree::Document::parse(&xml).expect("libvirt's XML parses");
        let vcpus: u32 = doc
            .descendants()
            .find(|n| {
                n.has_tag_name("vcpu") && n.parent().is_some_and(|p| p.has_tag_name("domain"))
            })
            .and_then(|n| n.text()?.trim().parse().ok())
            .unwrap_or(1);
        let mut cpus = BTreeSet::new();
        let pinned: Vec<u32> = doc
            .descendants()
            .filter(|n| n.has_tag_name("vcpupin"))
            .filter_map(|n| n.attribute("cpuset")?.parse().ok())
            .collect();
        if pinned.len() < vcpus as usize {
            cpus.extend(0..16);
        }
        cpus.extend(pinned);
        out.insert(name, cpus);
    }
    out
}

/// Panics unless the running domains' vCPUs are on cores of their own (one
/// thread per core here: CPUs), none on the reserved CPU 0.
fn check_no_sharing(conn: &virt::connect::Connect, event: usize, what: &str) {
    let running = running_vcpus(conn);
    let mut owner: BTreeMap<u32, &str> = BTreeMap::new();
    for (name, cpus) in &running {
        for cpu in cpus {
            if let Some(other) = owner.insert(*cpu, name) {
                panic!("event {event} ({what}): {name} and {other} share CPU {cpu}: {running:?}");
            }
        }
    }
    if running.len() > 1 {
        assert!(
            !owner.contains_key(&0),
            "event {event} ({what}): a vCPU on the reserved CPU 0: {running:?}"
        );
    }
}

/// The pins a dry-run decision gives, to write into the domain.
fn pins_of(d: &Decision) -> Option<(Vec<u32>, String)> {
    match &d.outcome {
        Outcome::Pinned {
            vcpus, emulator, ..
        } => Some((vcpus.iter().map(|c| c.0).collect(), emulator.to_string())),
        _ => None,
    }
}

struct Sim {
    conn: virt::connect::Connect,
    watcher: Watcher,
    times: Vec<f64>,
    /// Each decision's time by what it was about.
    by_event: BTreeMap<&'static str, Vec<f64>>,
    outcomes: BTreeMap<String, usize>,
    /// Ours: name → (vCPUs, movable, `<uuid>` once defined).
    defined: BTreeMap<String, (u32, bool, String)>,
    running: BTreeSet<String>,
}

impl Sim {
    fn record(&mut self, d: &Decision) {
        if std::env::var_os("PINPLAN_WATCH_LINES").is_some() {
            println!("{}", d.to_line());
        }
        self.times.push(d.millis);
        self.by_event.entry(d.event).or_default().push(d.millis);
        let key = format!(
            "{} {}",
            d.event,
            d.to_json_line()
                .split("\"action\":\"")
                .nth(1)
                .and_then(|s| s.split('"').next())
                .unwrap_or("?")
        );
        *self.outcomes.entry(key).or_default() += 1;
        if let Outcome::Failed(why) = &d.outcome {
            panic!("{}", format!("decision failed: {} — {why}", d.to_line()));
        }
    }

    fn redefine(&mut self, name: &str, pins: Option<(Vec<u32>, String)>) {
        let (vcpus, movable, uuid) = self.defined[name].clone();
        let pins = pins.as_ref().map(|(c, e)| (c.as_slice(), e.as_str()));
        let d = self
            .conn
            .define_domain_xml(&domain_xml(name, &uuid, vcpus, movable, pins))
            .expect("the test driver defines it");
        if uuid.is_empty() {
            let uuid = format!("<uuid>{}</uuid>", d.uuid_string().expect("its UUID"));
            if let Some(entry) = self.defined.get_mut(name) {
                entry.2 = uuid;
            }
        }
    }

    fn define(&mut self, name: String, vcpus: u32, movable: bool) {
        self.defined
            .insert(name.clone(), (vcpus, movable, String::new()));
        self.redefine(&name, None);
        let d = self.watcher.happened(&name, Happening::Defined);
        self.record(&d);
        if let Some(pins) = pins_of(&d) {
            self.redefine(&name, Some(pins));
        }
    }

    fn start(&mut self, name: &str) {
        for _ in 0..2 {
            let dom = self.conn.lookup_domain_by_name(name).expect("defined");
            let xml = dom
                .xml_desc(virt_sys::VIR_DOMAIN_XML_INACTIVE)
                .expect("its XML");
            let asked = Instant::now();
            let (answer, after) = self.watcher.admit(&Ask {
                version: 1,
                domain: name.to_owned(),
                xml,
            });
            let ms = asked.elapsed().as_secs_f64() * 1000.0;
            self.times.push(ms);
            self.by_event
                .entry("admission question")
                .or_default()
                .push(ms);
            *self
                .outcomes
                .entry(format!(
                    "admission {}",
                    if answer.allow { "allowed" } else { "refused" }
                ))
                .or_default() += 1;
            if answer.allow {
                dom.create().expect("the test driver starts it");
                self.running.insert(name.to_owned());
                let d = self.watcher.happened(name, Happening::Started);
                self.record(&d);
                // The test driver cannot pin a running domain: the pins the
                // watcher would set live are set by a restart on them.
                if let Some(pins) = pins_of(&d) {
                    dom.destroy().expect("the test driver stops it");
                    self.redefine(name, Some(pins));
                    let dom = self.conn.lookup_domain_by_name(name).expect("defined");
                    dom.create().expect("the test driver starts it");
                }
                return;
            }
            let Some(after) = after else {
                return;
            };
            let d = self.watcher.after_admission(after);
            self.record(&d);
            let pins = pins_of(&d);
            self.redefine(name, pins);
        }
    }

    fn stop(&mut self, name: &str) {
        let dom = self.conn.lookup_domain_by_name(name).expect("defined");
        dom.destroy().expect("the test driver stops it");
        self.running.remove(name);
        let d = self.watcher.happened(name, Happening::Stopped);
        self.record(&d);
    }

    fn undefine(&mut self, name: &str) {
        let dom = self.conn.lookup_domain_by_name(name).expect("defined");
        dom.undefine().expect("the test driver undefines it");
        self.defined.remove(name);
        let d = self.watcher.happened(name, Happening::Undefined);
        self.record(&d);
    }
}

/// This process's resident memory, in KiB.
fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn main() {
    // `cargo bench` passes `--bench`; nothing else is taken.
    let events = usize::try_from(env("PINPLAN_WATCH_EVENTS", 1000)).unwrap_or(1000);
    let mut rng = Rng(env("PINPLAN_WATCH_SEED", 0x5eed_0030));
    let dir = tempfile::tempdir().expect("a scratch directory");
    let spec = dir.path().join("host.toml");
    std::fs::write(&spec, "[host]\nreserved_cores = 1\nreserved_memory = 0\n")
        .expect("the spec is written");
    let conn = virt::connect::Connect::open(Some(URI)).expect("the test driver opens");
    // The driver's own domain floats over every CPU: out of the way.
    if let Ok(test) = conn.lookup_domain_by_name("test") {
        let _ = test.destroy();
    }
    let settings = Settings {
        uri: URI.to_owned(),
        spec: Some(spec),
        dry_run: true,
        refuse_in_dry_run: true,
        time_limit: Duration::from_secs(2),
        source: None,
    };
    let watcher = Watcher::new(&settings).expect("the watcher starts");
    let mut sim = Sim {
        conn,
        watcher,
        times: Vec::new(),
        by_event: BTreeMap::new(),
        outcomes: BTreeMap::new(),
        defined: BTreeMap::new(),
        running: BTreeSet::new(),
    };
    let started = Instant::now();
    let mut rss_100 = 0;
    let mut next_name = 0;
    for event in 1..=events {
        let stopped: Vec<String> = sim
            .defined
            .keys()
            .filter(|n| !sim.running.contains(*n))
            .cloned()
            .collect();
        let running: Vec<String> = sim.running.iter().cloned().collect();
        let what = match rng.below(10) {
            0..=2 if sim.defined.len() < MOST_DOMAINS => "define",
            3..=5 if !stopped.is_empty() => "start",
            6..=7 if !running.is_empty() => "stop",
            8..=9 if !stopped.is_empty() => "undefine",
            _ if sim.defined.len() < MOST_DOMAINS => "define",
            _ if !running.is_empty() => "stop",
            _ => "start",
        };
        match what {
            "define" => {
                next_name += 1;
                let vcpus = u32::try_from(1 + rng.below(4)).unwrap_or(1);
                let movable = rng.below(2) == 0;
                sim.define(format!("pp-sim-{next_name}"), vcpus, movable);
            }
            "start" => {
                let name = stopped[rng.below(stopped.len())].clone();
                sim.start(&name);
            }
            "stop" => {
                let name = running[rng.below(running.len())].clone();
                sim.stop(&name);
            }
            _ => {
                let name = stopped[rng.below(stopped.len())].clone();
                sim.undefine(&name);
            }
        }
        check_no_sharing(&sim.conn, event, what);
        if event == 100 {
            rss_100 = rss_kib();
        }
    }
    let rss_end = rss_kib();
    let mut sorted = sim.times.clone();
    sorted.sort_by(f64::total_cmp);
    println!("{events} events in {:.1} s on {URI}: no two running tenants shared a core after any of them", started.elapsed().as_secs_f64());
    println!(
        "decisions: {} — median {:.1} ms, p99 {:.1} ms, most {:.1} ms",
        sorted.len(),
        percentile(&sorted, 0.5),
        percentile(&sorted, 0.99),
        sorted.last().copied().unwrap_or(0.0)
    );
    for (event, times) in &mut sim.by_event {
        times.sort_by(f64::total_cmp);
        println!(
            "  {event}: {} decisions, median {:.1} ms, p99 {:.1} ms",
            times.len(),
            percentile(times, 0.5),
            percentile(times, 0.99)
        );
    }
    for (what, n) in &sim.outcomes {
        println!("  {what}: {n}");
    }
    println!("resident memory: {rss_100} KiB at event 100, {rss_end} KiB at event {events}");
}
