//! `nicbench sweep` against a real agent on loopback.

use super::common::*;
use serde_json::Value;

fn sweep_of(run: &Value) -> &Value {
    &run["streams"][0]["sender"]["sweep"]
}

fn point(sweep: &Value, size: u64) -> &Value {
    sweep["points"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["size_bytes"] == size)
        .unwrap_or_else(|| panic!("no point for {size} B"))
}

/// The sizes of the sweep's points, in order.
fn sizes(sweep: &Value) -> Vec<u64> {
    sweep["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["size_bytes"].as_u64().unwrap())
        .collect()
}

fn best_bps(sweep: &Value, size: u64) -> f64 {
    point(sweep, size)["best_bits_per_second"].as_f64().unwrap()
}

#[test]
fn short_tcp_sweep_reports_every_size_and_a_summary_true_to_its_points() {
    let agent = AgentProcess::start(&[]);
    let out = nicbench(&[
        "sweep",
        "127.0.0.1",
        "-p",
        &agent.port_arg(),
        "--max",
        "1M",
        "--point-time",
        "10ms",
        "--json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let run: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(run["workload"], "sweep");
    let sweep = sweep_of(&run);
    assert_eq!(sweep["mode"], "ping_pong");
    assert_eq!(sweep["transport"], "tcp");
    let points = sweep["points"].as_array().unwrap();
    // Both ends on one host, nobody chose cores, two passes: the passes
    // take turns between two placements (pass 1 both on one core, pass 2
    // where the scheduler puts them) and each point is its faster
    // placement's (issue 42). A process held to one core cannot.
    let turns = std::thread::available_parallelism().map_or(1, |n| n.get()) >= 2;
    if !turns {
        // Locally the single-core branch below is checked; CI has two cores.
        skip_or_fail("a sweep by turns needs two cores; this test checks the one-core placement instead");
    }
    let sizes: Vec<u64> = points.iter().map(|p| p["size_bytes"].as_u64().unwrap()).collect();
    assert_eq!(sizes.first(), Some(&1));
    assert_eq!(sizes.last(), Some(&(1 << 20)));
    assert!(sizes.windows(2).all(|w| w[0] < w[1]), "{sizes:?}");
    for p in points {
        assert!(p["exchanges"].as_u64().unwrap() >= 7, "{p}");
        assert!(p["best_latency_us"].as_f64().unwrap() > 0.0);
        assert!(p["best_latency_us"].as_f64().unwrap() <= p["mean_latency_us"].as_f64().unwrap() + 1e-9);
        // Every point carries its spread: min <= median <= max of its
        // batches, the percentage from them, and the mark by its rule.
        let (min, median, max) = (
            p["best_latency_us"].as_f64().unwrap(),
            p["median_latency_us"].as_f64().unwrap(),
            p["max_latency_us"].as_f64().unwrap(),
        );
        assert!(min <= median && median <= max, "{p}");
        let spread = p["spread_percent"].as_f64().unwrap();
        assert!((spread - 100.0 * (max - min) / median).abs() < 1e-6, "{p}");
        assert_eq!(p["wide"].as_bool().unwrap_or(false), spread > 25.0, "{p}");
        // Two passes by default, then extra rounds where the batches have
        // not settled, within each point's share of the budget (the
        // allocation is tested in src/workload/sweep/points.rs); each pass's
        // fastest batch is there, and the point's figure is the best of them
        // (or of an extra round's batches).
        let rounds = p["rounds"].as_u64().unwrap();
        assert!(rounds >= 2, "{p}");
        assert!(p["batches"].as_u64().unwrap() >= rounds, "{p}");
        let passes: Vec<f64> = p["pass_latency_us"]
            .as_array()
            .unwrap_or_else(|| panic!("no pass figures: {p}"))
            .iter()
            .map(|v| v.as_f64().unwrap())
            .collect();
        assert_eq!(passes.len(), 2, "{p}");
        let best_pass = passes.iter().copied().fold(f64::INFINITY, f64::min);
        assert!(min <= best_pass + 1e-9, "{p}");
        if rounds == 2 {
            assert!(
                (min - best_pass).abs() < 1e-9,
                "no extra round: the best pass is the figure: {p}"
            );
        }
        if !turns {
            assert!(passes.iter().all(|&v| v <= max + 1e-9), "{p}");
            assert!(p.get("placement").is_none(), "{p}");
            continue;
        }
        // By turns: each placement's fastest batch is there, the faster
        // is named, and the point's batches are its own (three a round).
        let (together, scheduler) = (
            p["together_latency_us"]
                .as_f64()
                .unwrap_or_else(|| panic!("no together figure: {p}")),
            p["scheduler_latency_us"]
                .as_f64()
                .unwrap_or_else(|| panic!("no scheduler figure: {p}")),
        );
        let faster = if scheduler < together { "scheduler" } else { "together" };
        assert_eq!(p["placement"], faster, "{p}");
        assert_eq!(min, together.min(scheduler), "{p}");
        // Pass 1 ran together, pass 2 by the scheduler; an extra round
        // only ever lowers the faster one's figure.
        assert!(together <= passes[0] + 1e-9 && scheduler <= passes[1] + 1e-9, "{p}");
        let chosen_pass = if faster == "together" { passes[0] } else { passes[1] };
        assert!(chosen_pass <= max + 1e-9, "{p}");
        assert_eq!(p["batches"].as_u64().unwrap() % 3, 0, "{p}");
    }
    assert_eq!(sweep["passes"], 2);
    assert_eq!(run["spec"]["params"]["passes"], 2);
    // Both ends on one host and no -A: the scheduler places them, as
    // NPtcp's and rr's (issue 42); the sweep says so, and says what a
    // wake-up on another core costs this host.
    let placement = sweep["placement"]
        .as_str()
        .unwrap_or_else(|| panic!("no placement: {sweep}"));
    if turns {
        assert!(
            placement.contains("placed by turns: both on core 0 in odd passes"),
            "{placement}"
        );
    } else {
        assert!(placement.contains("placed by the scheduler"), "{placement}");
    }
    // The thread is placed point by point, not pinned for the run: no
    // affinity record unless a pin was refused.
    let stream = &run["streams"][0];
    assert!(stream["sender"].get("affinity").is_none(), "nobody pinned: {stream}");
    assert!(stream["receiver"].get("affinity").is_none(), "nobody pinned: {stream}");
    if std::thread::available_parallelism().map_or(1, |n| n.get()) >= 2 {
        let w = &sweep["cross_core_wakeup"];
        let (together, apart) = (
            w["together_round_trip_us"]
                .as_f64()
                .unwrap_or_else(|| panic!("no wake-up: {sweep}")),
            w["apart_round_trip_us"].as_f64().unwrap(),
        );
        assert!(together > 0.0 && apart > 0.0, "{w}");
        assert_eq!(
            w["cross_core_wakeup_us"].as_f64().unwrap(),
            ((apart - together) / 2.0).max(0.0)
        );
        assert_ne!(w["cores"][0], w["cores"][1], "{w}");
    }
    // The small-message latency: the median of the five smallest sizes'
    // fastest batches, not one point.
    let summary = &sweep["summary"];
    assert_eq!(summary["small_message_size_bytes"], 1);
    let mut smallest: Vec<(u64, f64)> = points
        .iter()
        .map(|p| {
            (
                p["size_bytes"].as_u64().unwrap(),
                p["best_latency_us"].as_f64().unwrap(),
            )
        })
        .collect();
    smallest.sort_by_key(|p| p.0);
    smallest.retain(|p| p.0 <= 8);
    smallest.truncate(5);
    assert_eq!(summary["small_message_largest_size_bytes"], smallest.last().unwrap().0);
    let mut latencies: Vec<f64> = smallest.iter().map(|p| p.1).collect();
    latencies.sort_by(f64::total_cmp);
    let median = if latencies.len() % 2 == 1 {
        latencies[latencies.len() / 2]
    } else {
        (latencies[latencies.len() / 2 - 1] + latencies[latencies.len() / 2]) / 2.0
    };
    assert_eq!(
        summary["small_message_latency_us"].as_f64().unwrap(),
        median,
        "{summary}"
    );
    // The shape of the curve (latency-bound small sizes, bandwidth-bound
    // large ones) is a figure for bench/sweep-vs-netpipe.sh. Here: the
    // summary is what the points say, whatever the machine's speed.
    for p in points {
        let size = p["size_bytes"].as_u64().unwrap() as f64;
        let latency = p["best_latency_us"].as_f64().unwrap();
        let bps = p["best_bits_per_second"].as_f64().unwrap();
        assert!(
            (bps - size * 8.0 / (latency * 1e-6)).abs() <= 1e-6 * bps,
            "bandwidth = size / latency: {p}"
        );
    }
    let peak = summary["peak_bits_per_second"].as_f64().unwrap();
    let best = points
        .iter()
        .map(|p| p["best_bits_per_second"].as_f64().unwrap())
        .fold(0.0, f64::max);
    assert_eq!(peak, best, "the peak is the best point");
    let peak_size = summary["peak_size_bytes"].as_u64().unwrap();
    assert_eq!(best_bps(sweep, peak_size), peak);
    let half = summary["half_peak_size_bytes"].as_u64().unwrap();
    assert!(best_bps(sweep, half) >= peak / 2.0);
    // n-1/2 is the smallest size that reaches half the peak.
    assert!(points
        .iter()
        .filter(|p| p["size_bytes"].as_u64().unwrap() < half)
        .all(|p| p["best_bits_per_second"].as_f64().unwrap() < peak / 2.0));
    assert!(half <= summary["ninety_percent_peak_size_bytes"].as_u64().unwrap());
    // Progress went to stderr, one line per pass, not per size (stderr is
    // not a terminal here; it printed 132 lines before).
    let rounds = 2 * sizes.len();
    let text = stderr(&out);
    let progress: Vec<&str> = text.lines().filter(|l| l.starts_with("sweep [")).collect();
    assert!(!text.contains(&format!("sweep [1/{rounds}] ")), "{text}");
    assert_eq!(progress.len(), 2, "{text}");
    let half = sizes.len();
    assert!(
        progress[0].starts_with(&format!("sweep [{half}/{rounds}] pass 1/2, 1048576 B: ")),
        "{progress:?}"
    );
    assert!(
        progress[1].starts_with(&format!("sweep [{rounds}/{rounds}] pass 2/2, 1048576 B: ")),
        "{progress:?}"
    );
}

/// `--passes N`: N rounds of every size, N pass figures each, one batch
/// per pass from three on; `--passes 1` is one round and no extra pass.
#[test]
fn passes_go_through_the_sizes_again() {
    let agent = AgentProcess::start(&[]);
    let port = agent.port_arg();
    for passes in [1u64, 3] {
        let out = nicbench(&[
            "sweep",
            "127.0.0.1",
            "-p",
            &port,
            "--sizes",
            "1,4K,64K",
            "--point-time",
            "15ms",
            "--passes",
            &passes.to_string(),
            // One core chosen: no placements by turns, whose rounds and
            // batches the short test above checks.
            "-A",
            "0",
            "--json",
        ]);
        assert!(out.status.success(), "{}", stderr(&out));
        let run: Value = serde_json::from_slice(&out.stdout).unwrap();
        let sweep = sweep_of(&run);
        assert_eq!(sweep["passes"], passes);
        for p in sweep["points"].as_array().unwrap() {
            let figures = p["pass_latency_us"].as_array().unwrap();
            assert_eq!(figures.len() as u64, passes, "{p}");
            let rounds = p["rounds"].as_u64().unwrap();
            // Every pass, then any extra rounds the point's batches asked for.
            assert!(rounds >= passes, "{p}");
            // One pass: three batches a round; three passes: one.
            let per_round = if passes == 1 { 3 } else { 1 };
            assert_eq!(p["batches"].as_u64().unwrap(), per_round * rounds, "{p}");
        }
        let text = stderr(&out);
        if passes == 1 {
            assert!(text.contains("sweep [3/3] 65536 B: "), "{text}");
            assert!(!text.contains("pass "), "{text}");
        } else {
            assert!(text.contains("sweep [9/9] pass 3/3, 65536 B: "), "{text}");
        }
    }
}

#[test]
fn table_and_csv_carry_units_and_line_rate() {
    let agent = AgentProcess::start(&[]);
    let port = agent.port_arg();
    let common = [
        "sweep",
        "127.0.0.1",
        "-p",
        &port,
        "--sizes",
        "1,1K,64K",
        "--point-time",
        "5ms",
        "--link-speed",
        "100G",
    ];
    let out = nicbench(&common);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    for needle in [
        "size B",
        "latency us",
        "bandwidth Mbit/s",
        "% line rate",
        "Small-message latency:",
        "n-1/2",
    ] {
        assert!(text.contains(needle), "missing {needle}:\n{text}");
    }
    let out = nicbench(&[&common[..], &["--csv"]].concat());
    assert!(out.status.success(), "{}", stderr(&out));
    let csv = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = csv.lines().collect();
    assert!(lines[0].starts_with("size_bytes,latency_us,bandwidth_mbit_per_second"));
    assert!(
        lines[0].ends_with(
            ",median_latency_us,max_latency_us,spread_percent,rounds,wide,pass_latency_us,placement,\
             together_latency_us,scheduler_latency_us"
        ),
        "{csv}"
    );
    assert_eq!(lines.len(), 4, "{csv}");
    assert!(lines[1].starts_with("1,") && lines[3].starts_with("65536,"));
    let header: Vec<&str> = lines[0].split(',').collect();
    let column = |name: &str| header.iter().position(|h| *h == name).unwrap();
    for row in &lines[1..] {
        let cells: Vec<&str> = row.split(',').collect();
        assert_eq!(cells.len(), header.len(), "{row}");
        assert!(
            !cells[column("line_rate_percent")].is_empty(),
            "line rate column filled: {csv}"
        );
        let num = |name: &str| cells[column(name)].parse::<f64>().unwrap();
        assert!(num("latency_us") <= num("median_latency_us") && num("median_latency_us") <= num("max_latency_us"));
        assert!(["0", "1"].contains(&cells[column("wide")]), "{row}");
    }
    // Cores chosen by the user: the sweep does not place the ends itself.
    let out = nicbench(&[&common[..], &["-A", "0"]].concat());
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!String::from_utf8_lossy(&out.stdout).contains("Placement:"));
}

#[test]
fn udp_sweep_skips_what_does_not_fit_a_datagram() {
    let agent = AgentProcess::start(&[]);
    let run = agent.run_json("sweep", &["-u", "--min", "16K", "--max", "64K", "--point-time", "5ms"]);
    let sweep = sweep_of(&run);
    assert_eq!(sweep["transport"], "udp");
    assert_eq!(sizes(sweep), vec![16384, 16387, 32765, 32768, 32771]);
    assert_eq!(sweep["skipped_sizes_bytes"], serde_json::json!([65533, 65536]));
    assert!(sweep["note"].as_str().unwrap().contains("datagram"));
}

#[test]
fn stream_mode_reports_time_per_message() {
    let agent = AgentProcess::start(&[]);
    let run = agent.run_json(
        "sweep",
        &["--mode", "stream", "--sizes", "1K,256K", "--point-time", "10ms"],
    );
    let sweep = sweep_of(&run);
    assert_eq!(sweep["mode"], "stream");
    assert!(best_bps(sweep, 262144) > best_bps(sweep, 1024));
    // The agent received everything the client sent.
    assert_eq!(run["sum"]["sender"]["bytes"], run["sum"]["receiver"]["bytes"]);
}

/// Each is a usage error: refused by name, exit code 2, whether clap, the
/// spec or the sweep's own refusal of a shared option (-O, -i) says so.
#[test]
fn bad_sweep_options_are_refused_by_name() {
    let agent = AgentProcess::start(&[]);
    let port = agent.port_arg();
    let cases: [(&[&str], &str); 8] = [
        (&["--mode", "stream", "-u"], "--mode stream"),
        (&["--passes", "0"], "--passes"),
        (&["--passes", "11"], "--passes"),
        (&["--min", "1M", "--max", "1K"], "--min"),
        (&["-P", "2"], "-P/--parallel"),
        (&["-O", "1s"], "-O/--omit"),
        (&["-i", "1s"], "-i/--interval"),
        (&["--csv", "--json"], "--csv"),
    ];
    for (extra, needle) in cases {
        let out = nicbench(&[&["sweep", "127.0.0.1", "-p", &port][..], extra].concat());
        assert_eq!(out.status.code(), Some(2), "{extra:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(needle), "{extra:?}: {}", stderr(&out));
    }
}

/// Issue 5 in the lab: two namespaces over veth at MTU 1500 and 9000; the
/// curve has the same shape on a real (emulated) link, the smallest size's
/// latency is reported, and the MSS follows the MTU.
#[test]
fn lab_sweep_over_veth_at_mtu_1500_and_9000() {
    require_lab!();
    let mut lab = lab_builder().mtu(1500).build().unwrap();
    let port = lab.agent_port().to_string();
    for (mtu, mss) in [(1500, 1448), (9000, 8948)] {
        if mtu != 1500 {
            lab.set_mtu(None, mtu).unwrap();
        }
        let out = lab
            .command("a", BIN)
            .args([
                "sweep",
                "b",
                "-p",
                &port,
                "--max",
                "1M",
                "--point-time",
                "10ms",
                "--json",
            ])
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        assert!(out.status.success(), "MTU {mtu}: {}", stderr(&out));
        let run: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(
            run["streams"][0]["sender"]["tcp_info"]["send_mss_bytes"], mss,
            "MTU {mtu}"
        );
        let sweep = sweep_of(&run);
        // Two namespaces of one kernel: the addresses differ, the boot ids
        // do not; the sweep knows the ends share a host, leaves them to the
        // scheduler as on loopback, and measures the wake-up there.
        let placement = sweep["placement"]
            .as_str()
            .unwrap_or_else(|| panic!("no placement: {sweep}"));
        assert!(placement.contains("one kernel (network namespaces"), "{placement}");
        if std::thread::available_parallelism().map_or(1, |n| n.get()) >= 2 {
            assert!(
                sweep["cross_core_wakeup"]["cross_core_wakeup_us"].is_number(),
                "{sweep}"
            );
        }
        let summary = &sweep["summary"];
        assert_eq!(summary["small_message_size_bytes"], 1, "MTU {mtu}");
        assert!(summary["small_message_latency_us"].as_f64().unwrap() > 0.0);
        // Sizes far apart: a 10 ms point on a loaded 2-core machine can
        // read 8 times slower than its neighbour (CI saw 64 B at 175 us
        // beside 1 B at 21 us), never 400 times.
        assert!(best_bps(sweep, 4096) > 10.0 * best_bps(sweep, 1), "MTU {mtu}: {sweep}");
        assert!(best_bps(sweep, 65536) > best_bps(sweep, 64), "MTU {mtu}");
        // Levels off: the top decade of sizes gains far less than the bottom
        // one (a ratio, so a loaded machine slowing every point alike does
        // not change the verdict).
        let high_gain = best_bps(sweep, 1 << 20) / best_bps(sweep, 1 << 16);
        let low_gain = best_bps(sweep, 1 << 16) / best_bps(sweep, 64);
        assert!(
            high_gain < low_gain / 4.0,
            "MTU {mtu}: gains {high_gain} vs {low_gain}: {sweep}"
        );
    }
}

/// Through a lab router's 100 Mbit/s tbf the sweep's sizes are compared
/// with that rate (it had no line rate at all: a veth's 10 Gbit/s is
/// nominal), and every size faster than it is marked and explained: the
/// shaper's bucket passes a message that fits at the hosts' speed.
#[test]
fn a_lab_routers_shaper_is_the_sweeps_line_rate_and_sizes_above_it_are_marked() {
    require_lab!();
    let lab = lab_builder().via_router().rate(100_000_000).build().unwrap();
    let port = lab.agent_port().to_string();
    let sweep_args = [
        "sweep",
        "b",
        "-p",
        &port,
        "--max",
        "64K",
        "--point-time",
        "10ms",
        "--no-save",
    ];
    let out = lab
        .command("a", BIN)
        .args(sweep_args)
        .arg("--json")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let run: Value = serde_json::from_slice(&out.stdout).unwrap();
    let sweep = sweep_of(&run);
    assert_eq!(sweep["link_speed_bits_per_second"], 1e8, "{sweep}");
    assert_eq!(sweep["link_speed_source"], "lab", "{sweep}");
    // The lab's tbf bucket at 100 Mbit/s: 4 ms of the rate.
    assert_eq!(sweep["shaper_burst_bytes"], 50_000, "{sweep}");
    assert!(
        sweep["shaper_name"]
            .as_str()
            .is_some_and(|n| n.starts_with("lab router ")),
        "{sweep}"
    );
    let peak = sweep["summary"]["peak_bits_per_second"].as_f64().unwrap();
    let percent = sweep["summary"]["peak_line_rate_percent"].as_f64().unwrap();
    assert!((percent - peak / 1e6).abs() < 1e-6 * percent, "{percent} vs {peak}");

    // The table: a % line rate column; a size is marked exactly when it
    // reads above 100%, and the note is there exactly when one is.
    let out = lab
        .command("a", BIN)
        .args(sweep_args)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(text.contains("% line rate"), "{text}");
    let mut marked = 0;
    for row in text
        .lines()
        .filter(|l| l.trim_start().starts_with(|c: char| c.is_ascii_digit()))
    {
        let last = row.split_whitespace().last().unwrap();
        if !(last.ends_with('%') || last.ends_with("%^")) {
            continue;
        }
        let value: f64 = last.trim_end_matches('^').trim_end_matches('%').parse().unwrap();
        assert_eq!(last.ends_with('^'), value > 100.0, "{row}");
        marked += usize::from(value > 100.0);
    }
    assert_eq!(
        text.contains("^ above the line rate (100.00 Mbit/s, lab router "),
        marked > 0,
        "{text}"
    );
}

/// Ctrl-C in the sweep's second pass keeps every size the first pass
/// measured, and the note says from which size on the sizes ran one pass.
#[test]
fn a_stop_in_the_second_pass_keeps_the_first() {
    let agent = AgentProcess::start(&[]);
    let port = agent.port_arg();
    // Three sizes of 1 s each (500 ms a pass): the progress line of the
    // third size in pass 1 says pass 1 is over; the stop then lands in
    // pass 2, whose first round takes 500 ms.
    let mut command = std::process::Command::new(BIN);
    command.args([
        "sweep",
        "127.0.0.1",
        "-p",
        &port,
        "--sizes",
        "1,2,3",
        "--point-time",
        "1s",
        "--json",
    ]);
    let mut child = spawn_captured(&mut command, "the sweep to interrupt");
    let progress = Lines::collect(child.stderr.take().unwrap());
    progress
        .wait_for(0, "sweep [3/6] pass 1/2, 3 B: ", COMMAND_LIMIT)
        .unwrap_or_else(|e| panic!("pass 1 did not end: {e}"));
    // SAFETY: plain kill(2) on our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = wait_output(child, COMMAND_LIMIT, "the interrupted sweep");
    assert_eq!(out.status.code(), Some(6), "{}", progress.text());
    let run: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", progress.text()));
    let sweep = sweep_of(&run);
    let note = sweep["note"].as_str().unwrap_or_else(|| panic!("no note: {sweep}"));
    assert!(note.starts_with("stopped before the end"), "{note}");
    assert!(
        sweep["skipped_sizes_bytes"].as_array().map_or(true, |s| s.is_empty()),
        "{sweep}"
    );
    // The note names the size pass 2 stopped at; the sizes from it on have
    // one pass figure, those before it two.
    let from: u64 = note
        .split_once("in pass 2 of 2: the sizes from ")
        .and_then(|(_, rest)| rest.split_once(" B on ran 1 pass"))
        .unwrap_or_else(|| panic!("the note does not say where pass 2 stopped: {note}"))
        .0
        .parse()
        .unwrap();
    assert!((1..=3).contains(&from), "{note}");
    for size in [1, 2, 3] {
        let passes = point(sweep, size)["pass_latency_us"].as_array().unwrap().len();
        assert_eq!(passes, if size < from { 2 } else { 1 }, "{size} B: {sweep}");
    }
}

/// The sweep over TLS and QUIC (issue 46): every message sealed on one
/// connection, ping-pong and stream; both ends count the same bytes, each
/// records the handshake with the cipher offered (rustls' records over
/// TCP, quinn's packets over QUIC), the case names the cipher, and the
/// result is valid against the schema. A wrong pin is refused before any
/// size runs, and the agent serves on.
#[test]
fn a_sweep_over_tls_and_quic_seals_every_message_and_both_ends_count_them() {
    let agent = AgentProcess::start(&[]);
    for (transport, cipher, suite, layer, mode) in [
        ("tls", "aes128-gcm", "TLS13_AES_128_GCM_SHA256", "rustls", "ping-pong"),
        (
            "tls",
            "chacha20-poly1305",
            "TLS13_CHACHA20_POLY1305_SHA256",
            "rustls",
            "stream",
        ),
        ("quic", "aes256-gcm", "TLS13_AES_256_GCM_SHA384", "quinn", "ping-pong"),
        ("quic", "aes128-gcm", "TLS13_AES_128_GCM_SHA256", "quinn", "stream"),
    ] {
        let what = format!("{transport} {cipher} {mode}");
        let run = agent.run_json(
            "sweep",
            &[
                "--transport",
                transport,
                "--cipher",
                cipher,
                "--mode",
                mode,
                "--sizes",
                "1,1K,100K",
                "--point-time",
                "5ms",
                "--passes",
                "1",
            ],
        );
        super::result_schema::assert_valid(&super::result_schema::schema(), &run, &what);
        assert_eq!(run["spec"]["params"]["transport"], transport, "{what}");
        assert_eq!(run["spec"]["params"]["tls"]["cipher"], cipher, "{what}");
        let sweep = sweep_of(&run);
        assert_eq!(sweep["transport"], transport, "{what}");
        assert_eq!(sizes(sweep), [1, 1024, 102400], "{what}");
        // One connection, every message through it: the agent received
        // what the client sent, to the byte.
        let stream = &run["streams"][0];
        let (sender, receiver) = (&stream["sender"], &stream["receiver"]);
        assert!(
            sender["error"].is_null() && receiver["error"].is_null(),
            "{what}: {stream}"
        );
        let sent = sender["bytes"].as_u64().unwrap();
        assert!(sent > 0, "{what}");
        assert_eq!(sent, receiver["bytes"].as_u64().unwrap(), "{what}");
        for end in [sender, receiver] {
            let tls = &end["tls"];
            assert_eq!(tls["cipher_suite"], suite, "{what}: {tls}");
            assert_eq!(tls["record_layer"], layer, "{what}: {tls}");
            assert!(tls["handshake_seconds"].as_f64().unwrap() > 0.0, "{what}: {tls}");
            assert_eq!(end["quic"].is_object(), transport == "quic", "{what}: {end}");
        }
        let sum = &run["sum"]["tls"];
        assert!(sum["client_handshake_seconds"].as_f64().unwrap() > 0.0, "{what}: {sum}");
        assert!(sum["agent_handshake_seconds"].as_f64().unwrap() > 0.0, "{what}: {sum}");
    }
    // The text names the transport in the table's title and the suite quinn used.
    let out = nicbench(&[
        "sweep",
        "127.0.0.1",
        "-p",
        &agent.port_arg(),
        "--transport",
        "quic",
        "--cipher",
        "chacha20-poly1305",
        "--sizes",
        "1,2",
        "--point-time",
        "5ms",
        "--passes",
        "1",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("Sweep (ping-pong, QUIC)"), "{text}");
    assert!(
        text.contains("TLS: TLSv1_3 TLS13_CHACHA20_POLY1305_SHA256 (quinn)"),
        "{text}"
    );
    // A certificate that is not the pinned one: refused before any size.
    let wrong = "00".repeat(32);
    let out = nicbench(&[
        "sweep",
        "127.0.0.1",
        "-p",
        &agent.port_arg(),
        "--transport",
        "tls",
        "--tls-pin",
        &wrong,
        "--sizes",
        "1",
    ]);
    assert!(!out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(&format!("not sha256:{wrong}")),
        "{}",
        stderr(&out)
    );
    assert!(!stderr(&out).contains("sweep [1/"), "no size ran: {}", stderr(&out));
    // The agent serves on.
    let run = agent.run_json(
        "sweep",
        &[
            "--transport",
            "tls",
            "--sizes",
            "1",
            "--point-time",
            "5ms",
            "--passes",
            "1",
        ],
    );
    assert!(
        run["streams"][0]["receiver"]["error"].is_null(),
        "{}",
        run["streams"][0]
    );
}
