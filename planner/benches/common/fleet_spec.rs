//! The fleet spec of the fleet benches (`fleet`, `fleet_out`): 1,000
//! synthetic hosts of three shapes and VMs from a fixed-seed generator.

use std::fmt::Write as _;

/// The fleet spec: hosts first, then VMs, from a fixed-seed generator.
pub fn spec(hosts: u64, vms: u64) -> String {
    let shapes = [
        "package:2 numa:2 core:16 pu:2",
        "package:2 numa:2 core:24 pu:2",
        "package:2 numa:4 core:8 pu:2",
    ];
    let mut seed: u64 = 0x5eed_f1ee_7000_0001;
    let mut next = move |n: u64| {
        seed = seed
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (seed >> 33) % n
    };
    let mut out = String::new();
    for h in 0..hosts {
        let shape = shapes[usize::try_from(h % 3).unwrap_or(0)];
        let _ = writeln!(
            out,
            "[[host]]\nname = \"h{h:04}\"\nsource = \"synthetic:{shape}\"\nreserved_cores_per_node = 1\n"
        );
    }
    let some: Vec<String> = (0..hosts)
        .step_by(7)
        .map(|h| format!("\"h{h:04}\""))
        .collect();
    let some = some.join(", ");
    for v in 0..vms {
        let vcpus = [2, 2, 4, 4, 6, 8][usize::try_from(next(6)).unwrap_or(0)];
        let numa = if next(4) == 0 { "spread" } else { "strict" };
        let priority = u64::from(next(3) == 0);
        let hosts_line = if next(10) == 0 {
            format!("hosts = [{some}]\n")
        } else {
            String::new()
        };
        let _ = writeln!(
            out,
            "[[vm]]\nname = \"vm{v:05}\"\nvcpus = {vcpus}\nthreads = \"require\"\nnuma = \"{numa}\"\npriority = {priority}\n{hosts_line}"
        );
    }
    out
}
