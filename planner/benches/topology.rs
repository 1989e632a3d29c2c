//! `cargo bench -p planner --bench topology`: time to load the largest fixture
//! (384 PUs, 24 NUMA nodes) from hwloc XML and print it as JSON, the work of
//! `pinplan topology --source FILE --format json`. Target: ≤ 50 ms.
//! Results are recorded in docs/benchmarks.md.

use pinplan::topology::{self, Source};
use std::time::{Duration, Instant};

const RUNS: usize = 30;

fn measure(name: &str, source: &Source) -> Result<(), Box<dyn std::error::Error>> {
    let mut times: Vec<Duration> = Vec::with_capacity(RUNS);
    let mut bytes = 0;
    for _ in 0..RUNS {
        let start = Instant::now();
        let host = topology::load(source)?;
        let json = host.to_json();
        times.push(start.elapsed());
        bytes = json.len();
        std::hint::black_box(json);
    }
    times.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!(
        "{name}: load + JSON over {RUNS} runs: min {:.2} ms, median {:.2} ms, max {:.2} ms ({bytes} bytes of JSON)",
        ms(times[0]),
        ms(times[RUNS / 2]),
        ms(times[RUNS - 1]),
    );
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let fixtures = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures");
    measure(
        "192em64t-24n8c2t.xml (384 PUs, hwloc XML)",
        &Source::File(format!("{fixtures}/hwloc-xml/192em64t-24n8c2t.xml").into()),
    )?;
    measure(
        "x86-Intel-KnightsLanding-XeonPhi-7210.xml (256 PUs, SMT4)",
        &Source::File(
            format!("{fixtures}/hwloc-xml/x86-Intel-KnightsLanding-XeonPhi-7210.xml").into(),
        ),
    )?;
    measure(
        "synthetic package:2 core:96 pu:2 (384 PUs)",
        &Source::Synthetic("package:2 core:96 pu:2(indexes=2*192:1*2)".into()),
    )?;
    measure(
        "synthetic package:16 core:2048 pu:2 (65,536 PUs, the limit)",
        &Source::Synthetic("package:16 core:2048 pu:2(indexes=2*32768:1*2)".into()),
    )?;
    Ok(())
}
