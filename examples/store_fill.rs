//! Fills a store with generated runs for `bench/store.sh` (issue 71,
//! item 4): a 100-host mesh measured every 30 minutes, as many runs as
//! asked, saved through nicbench's own store code (`Store::batch`, one
//! transaction per 10,000 runs), into a SQLite file or a PostgreSQL URL.
//!
//!   cargo run --release --example store_fill -- DB RUNS
//!
//! Each run is a small `nicbench.run/1` tcp document (one trial; the
//! hosts' names, a verdict, both ends' CPU, the receiver's and sender's
//! rates), started 30 minutes after the round before it (the last round ending
//! now), tagged
//! `mesh=dc1`, `src=host-NN`, `dst=host-NN`, `nic=` one of 8 and `mtu=`
//! one of 4. Figures vary by a fixed pseudo-random sequence, so two fills
//! of one size hold the same runs. Not a measurement: a stand-in for the
//! size and shape of a year of an archive.

use std::path::Path;
use std::time::Instant;

use serde_json::json;

const HOSTS: u64 = 100;
const NICS: [&str; 8] = ["e1000", "igb", "ixgbe", "mlx5", "r8169", "tg3", "bnx2", "ice"];
const MTUS: [&str; 4] = ["1500", "4088", "9000", "16128"];
const VERDICTS: [&str; 4] = ["link_bound", "cpu_starved", "cpu_bound", "none"];

/// A small deterministic sequence (xorshift64*).
struct Sequence(u64);

impl Sequence {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// In [low, high).
    fn uniform(&mut self, low: f64, high: f64) -> f64 {
        low + (high - low) * (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (Some(db), Some(count)) = (args.get(1), args.get(2).and_then(|n| n.parse::<u64>().ok())) else {
        eprintln!("usage: store_fill DB RUNS   (DB: a SQLite file or a postgres:// URL)");
        std::process::exit(2);
    };
    let mut store = nicbench::store::Store::open(Path::new(db)).unwrap_or_else(|e| {
        eprintln!("store_fill: {e}");
        std::process::exit(1)
    });
    let clock = Instant::now();
    let mut sequence = Sequence(0x9e37_79b9_7f4a_7c15);
    let pairs = HOSTS * (HOSTS - 1);
    // The last round ends now: `runs --since 2h` finds the newest rounds.
    let rounds = count.div_ceil(pairs);
    let start = nicbench::store::now_unix_seconds() - rounds as f64 * 1800.0;
    let mut done = 0;
    while done < count {
        let mut batch = store.batch().expect("a transaction");
        for i in done..count.min(done + 10_000) {
            let pair = i % pairs;
            let (src, dst) = (pair / (HOSTS - 1), pair % (HOSTS - 1));
            let dst = if dst >= src { dst + 1 } else { dst };
            let round = i / pairs;
            let nic = NICS[(src % 8) as usize];
            let mtu = MTUS[(sequence.next() % 4) as usize];
            let receiver = sequence.uniform(0.5e9, 9.5e9);
            let started = start + round as f64 * 1800.0 + sequence.uniform(0.0, 1700.0);
            let (src_name, dst_name) = (format!("host-{src:02}"), format!("host-{dst:02}"));
            let doc = json!({
                "schema": "nicbench.run/1", "workload": "tcp", "started_at_unix_seconds": started,
                "client": {"address": format!("10.0.{}.{}:40000", src / 250, src % 250 + 1),
                           "facts": {"hostname": src_name, "nicbench_version": "0.1.0", "kernel": "6.1.0"}},
                "agent": {"address": format!("10.0.{}.{}:5201", dst / 250, dst % 250 + 1),
                          "facts": {"hostname": dst_name, "nicbench_version": "0.1.0", "kernel": "6.1.0"}},
                "spec": {"workload": "tcp", "streams": 1, "duration_seconds": 10.0, "message_bytes": 131072,
                         "direction": "forward"},
                "trial": 1,
                "sum": {"receiver": {"bits_per_second": receiver, "bytes": (receiver * 1.25) as u64},
                        "sender": {"bits_per_second": receiver * 1.001, "bytes": (receiver * 1.2513) as u64}},
                "cpu": {"client": {"total_percent": sequence.uniform(5.0, 60.0)},
                        "agent": {"total_percent": sequence.uniform(5.0, 60.0)}},
                "verdict": {"kind": VERDICTS[(sequence.next() % 4) as usize], "summary": "generated"},
                "trials": [{"trial": 1, "sum": {"receiver": {"bits_per_second": receiver}}}]
            });
            let meta = nicbench::store::RunMeta {
                command_line: format!("nicbench tcp {dst_name} -t 10s"),
                tags: [
                    ("mesh", "dc1".to_string()),
                    ("src", format!("host-{src:02}")),
                    ("dst", format!("host-{dst:02}")),
                    ("nic", nic.to_string()),
                    ("mtu", mtu.to_string()),
                ]
                .into_iter()
                .map(|(k, v)| format!("{k}={v}").parse().expect("a valid tag"))
                .collect(),
                trials_planned: Some(1),
                source: None,
            };
            batch
                .save(&meta, &doc, &nicbench::store::columns::of_document(&doc))
                .expect("a generated run saves");
        }
        batch.commit().expect("the batch commits");
        done = count.min(done + 10_000);
        eprint!("\r{done} runs, {:.0} s", clock.elapsed().as_secs_f64());
    }
    eprintln!();
    println!(
        "generated {count} runs in {:.1} s ({:.0} runs/s)",
        clock.elapsed().as_secs_f64(),
        count as f64 / clock.elapsed().as_secs_f64()
    );
}
