//! Run one JSON config and print its headline numbers (used while developing;
//! the user-facing entry points are the Python API and the `tracefabric` CLI).

use std::time::Instant;

// The Python extension's allocator (see foundation/bindings/src/lib.rs).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    let path = std::env::args()
        .nth(1)
        .expect("usage: run_config CONFIG.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let t0 = Instant::now();
    match tracefabric_packet::simulate_json(&text, &mut |_, _| true) {
        Ok(r) => {
            let wall = t0.elapsed().as_secs_f64();
            println!(
                "cct_us={:.3} bound_us={:.3} increase={:.4} events={} hops={} wall_s={:.2} Mhops/s={:.2} drops={} marks={} digest={:016x}",
                r.cct_ps as f64 / 1e6,
                r.lower_bound_ps as f64 / 1e6,
                r.cct_increase(),
                r.events,
                r.data_packet_hops,
                wall,
                r.data_packet_hops as f64 / wall / 1e6,
                r.data_packets_dropped,
                r.ecn_marks,
                r.digest
            );
            for s in &r.stages {
                println!(
                    "  {:8} max_q={:>8} mean_q={:>10.1} util={:.3}",
                    s.name, s.max_queue_bytes, s.mean_queue_bytes, s.utilization
                );
            }
        }
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(2);
        }
    }
}
