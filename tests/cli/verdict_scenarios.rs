//! The verdict against labs built with one known cause (issue 40): each
//! scenario builds a lab whose bottleneck nicbench did not choose, runs a
//! test across it, and checks the verdict's kind and side — what nicbench
//! concludes from what the lab built, never a rate or a duration.
//! `bench/verdict-matrix.sh` runs the same scenarios and prints the table.
//! Without root or iproute2 each test says why and returns (skipped).

use std::process::Stdio;

use nicbench::lab::{Lab, LabBuilder};
use serde_json::Value;

use super::common::*;

/// The verdict kinds that name an end short of CPU.
const CPU_KINDS: [&str; 3] = ["cgroup_throttled", "cpu_starved", "cpu_bound"];

/// Runs `nicbench ARGS --json` in host a of the lab and returns the run.
fn run_in_a(lab: &Lab, args: &[&str]) -> Value {
    let out = lab
        .command("a", BIN)
        .args(args)
        .args(["--json", "--no-save"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    if !out.status.success() {
        // The agents' side of it, before the lab and its logs go.
        let logs: Vec<String> = ["b", "a"]
            .iter()
            .map(|h| {
                let path = nicbench::lab::state::log_dir(lab.name()).join(format!("{h}-agent.log"));
                format!(
                    "{}:\n{}",
                    path.display(),
                    std::fs::read_to_string(&path).unwrap_or_default()
                )
            })
            .collect();
        panic!("{args:?}: {}\n{}", stderr(&out), logs.join("\n"));
    }
    serde_json::from_slice(&out.stdout).expect("JSON result")
}

fn num(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// The link named through a lab router, either way the rule allows: at 90%
/// of the line rate or more, or below it when the router's shaper (the
/// line rate) dropped packets at its full queue during the trial. A busy
/// machine's router passes less than its rate (CI: 84.3 of 97.2 Mbit/s),
/// but the same shaper is full: its counters are what the verdict rests on.
fn assert_the_link_from_rate_or_shaper(what: &str, run: &Value) {
    assert_eq!(verdict(what, run), ("link_bound".into(), "path".into()));
    super::result_schema::assert_valid(&super::result_schema::schema(), run, what);
    let (share, shaper) = (&run["line_rate"], &run["path_shaper"]);
    eprintln!(
        "{what}: {:.1}% of line rate, shaper {shaper}",
        num(&share["percent_of_theoretical_goodput"])
    );
    assert_eq!(share["link_speed_source"], "lab", "{share}");
    assert_eq!(shaper["name"], share["shaper_name"], "{shaper}");
    assert_eq!(shaper["bits_per_second"], share["link_bits_per_second"], "{shaper}");
    // The shaper counts every frame of the trial, warm-up and headers
    // included: at least the payload the receiver counted.
    let received = num(&run["sum"]["receiver"]["bytes"]);
    assert!(
        num(&shaper["sent_bytes"]) >= received,
        "{shaper} against {received} B received"
    );
    assert!(
        num(&share["percent_of_theoretical_goodput"]) >= 90.0 || num(&shaper["dropped_packets"]) > 0.0,
        "{what}: link_bound below 90% without the shaper's drops: {share} {shaper}"
    );
}

/// The verdict's kind and side, printed for the log.
fn verdict(what: &str, run: &Value) -> (String, String) {
    let v = &run["verdict"];
    eprintln!("{what}: {}", serde_json::to_string_pretty(v).unwrap());
    let text = |field: &str| v[field].as_str().unwrap_or("").to_string();
    (text("kind"), text("side"))
}

/// The limited `side` is named. Both ends are named only when the other
/// end's own threads (or its napi threads) measurably waited for a CPU most
/// of their ready time: a machine busier than its cores starves a free lab
/// host too, and the verdict follows what was measured on each side.
fn assert_cpu(what: &str, run: &Value, side: &str) {
    let (kind, found) = verdict(what, run);
    assert!(CPU_KINDS.contains(&kind.as_str()), "{what}: kind {kind}");
    if found == side {
        return;
    }
    assert_eq!(found, "both", "{what}");
    let other = if side == "sender" { "receiver" } else { "sender" };
    let waited = waited_percent(run, other);
    assert!(
        waited >= 50.0,
        "{what}: both ends named, but the {other} waited for a CPU only {waited:.0}% of its ready time"
    );
}

/// The larger of what `side`'s threads and its napi threads waited for a
/// CPU, in percent of their ready time. Every run here goes from a (the
/// client) to b (the agent).
fn waited_percent(run: &Value, side: &str) -> f64 {
    let end = if side == "sender" { "client" } else { "agent" };
    ["scheduling", "packet_work"]
        .iter()
        .filter_map(|part| run["counters"][end][part]["wait_percent"].as_f64())
        .fold(0.0, f64::max)
}

fn lab(build: impl FnOnce(LabBuilder) -> LabBuilder) -> Lab {
    build(lab_builder()).build().unwrap()
}

#[test]
fn a_receiver_starved_through_a_router_is_the_cause_not_its_retransmissions() {
    require_lab!();
    let _turn = limited_lab_turn();
    let lab = lab(|b| b.via_router().rate(1_000_000_000).cpu_limit("b", 2.0));
    let run = run_in_a(&lab, &["tcp", "b", "-t", "3"]);
    assert_cpu("tcp onto b at 2% through a 1 Gbit/s router", &run, "receiver");
    // The lab's limit reached the host's own facts through the published cgroup.
    let limit = &run["agent"]["facts"]["cpu_limit"];
    assert_eq!(limit["set_by"], "lab", "{limit}");
    assert_eq!(limit["percent_of_one_core"], 2.0, "{limit}");
}

#[test]
fn a_starved_sender_is_named_directly_and_through_a_router() {
    require_lab!();
    let _turn = limited_lab_turn();
    let direct = lab(|b| b.cpu_limit("a", 2.0));
    let run = run_in_a(&direct, &["tcp", "b", "-t", "3"]);
    assert_cpu("tcp from a at 2%, direct", &run, "sender");
    assert_eq!(run["client"]["facts"]["cpu_limit"]["set_by"], "lab");
    drop(direct);
    // A 10 Gbit/s router: at 2% of a core one VM's boot pushed 867 Mbit/s,
    // 90.6% of a 1 Gbit/s router's line rate, and the link was then an
    // honest first name; ten times that rate is out of a starved sender's reach.
    let routed = lab(|b| b.via_router().rate(10_000_000_000).cpu_limit("a", 2.0));
    let run = run_in_a(&routed, &["tcp", "b", "-t", "3"]);
    assert_cpu("tcp from a at 2% through a 10 Gbit/s router", &run, "sender");
}

#[test]
fn a_router_slower_than_both_ends_is_the_link() {
    require_lab!();
    let lab = lab(|b| b.via_router().rate(100_000_000));
    let run = run_in_a(&lab, &["tcp", "b", "-t", "3", "-O", "1"]);
    assert_the_link_from_rate_or_shaper("tcp through 100 Mbit/s", &run);
    // UDP offered above the router's rate: the link, and the datagrams the
    // router dropped as its consequence. Twice the rate, not more: every
    // datagram offered costs the router's softirq.
    let run = run_in_a(&lab, &["udp", "b", "-t", "3", "-O", "1", "-b", "200M"]);
    assert_the_link_from_rate_or_shaper("udp 200M into 100 Mbit/s", &run);
    let evidence = run["verdict"]["evidence"].as_array().unwrap();
    let loss = evidence
        .iter()
        .find(|e| e["kind"] == "path_loss")
        .expect("path loss in the evidence");
    assert_eq!(loss["role"], "consequence", "{loss}");
    assert_eq!(loss["explained_by"], 0, "{loss}");
}

#[test]
fn a_starved_udp_receiver_explains_its_socket_drops() {
    require_lab!();
    let _turn = limited_lab_turn();
    let lab = lab(|b| b.cpu_limit("b", 2.0));
    let run = run_in_a(&lab, &["udp", "b", "-t", "3", "-b", "500M"]);
    assert_cpu("udp 500M onto b at 2%", &run, "receiver");
}

#[test]
fn a_starved_udp_sender_below_its_offer_is_the_sender() {
    require_lab!();
    let _turn = limited_lab_turn();
    let lab = lab(|b| b.cpu_limit("a", 2.0));
    let run = run_in_a(&lab, &["udp", "b", "-t", "3", "-b", "2G"]);
    assert_cpu("udp 2G from a at 2%", &run, "sender");
    let evidence = run["verdict"]["evidence"].as_array().unwrap();
    let short = evidence
        .iter()
        .find(|e| e["kind"] == "offered_rate_not_reached")
        .expect("the offer not reached, in the evidence");
    assert_eq!(short["role"], "consequence", "{short}");
}

#[test]
fn a_deep_router_queue_is_the_loaded_verdict_under_cubic_and_bbr() {
    require_lab!();
    let lab = lab(|b| b.via_router().rate(100_000_000).queue(0.2));
    for cc in ["cubic", "bbr"] {
        let run = run_in_a(
            &lab,
            &[
                "loaded", "b", "-t", "4", "--idle", "2s", "--phases", "download", "-C", cc,
            ],
        );
        let (kind, side) = verdict(&format!("loaded -C {cc} through a 200 ms queue"), &run);
        // bbr may keep the queue short enough that nothing is added: the
        // verdict is then the phases' own, never a throughput rule.
        let allowed: &[&str] = if cc == "cubic" {
            &["added_delay"]
        } else {
            &["added_delay", "no_added_delay"]
        };
        assert!(allowed.contains(&kind.as_str()), "-C {cc}: kind {kind}");
        if kind == "added_delay" {
            assert_eq!(side, "path", "-C {cc}");
        }
    }
}

#[test]
fn files_onto_a_starved_receiver_name_its_cpu() {
    require_lab!();
    let _turn = limited_lab_turn();
    let lab = lab(|b| b.cpu_limit("b", 3.0));
    let run = run_in_a(&lab, &["files", "b", "--generate", "4x16M", "--raw-time", "2s"]);
    assert_cpu("files 4x16M onto b at 3%", &run, "receiver");
}

#[test]
fn files_of_a_few_kilobytes_are_per_file_overhead_at_the_receiver() {
    require_lab!();
    let lab = lab(|b| b);
    let run = run_in_a(&lab, &["files", "b", "--generate", "3000x4K", "--raw-time", "2s"]);
    let (kind, side) = verdict("files 3000x4K", &run);
    assert_eq!(side, "receiver", "{kind}");
    // Creating and closing files is the receiver's CPU work: when its
    // thread was on a CPU all the time doing it (seen with the suite's
    // other tests beside it), its CPU is the cause and the per-file
    // overhead its consequence.
    if kind != "files_per_file_overhead" {
        assert!(CPU_KINDS.contains(&kind.as_str()), "kind {kind}");
        let files = evidence(&run, "files_per_file_overhead").expect("the per-file overhead in the chain");
        assert_eq!(files["role"], "consequence", "{files}");
    }
}

/// The verdict's evidence of `kind`, if it holds.
fn evidence<'a>(run: &'a Value, kind: &str) -> Option<&'a Value> {
    run["verdict"]["evidence"]
        .as_array()
        .and_then(|all| all.iter().find(|e| e["kind"] == kind))
}

#[test]
fn a_small_receive_window_through_a_router_is_named_never_the_link() {
    require_lab!();
    // A 4 KiB receive buffer (8 KiB granted, 4.3 kB advertised) lets about
    // 1 Gbit/s through at the lab's 30 us round trip: a tenth of the
    // 10 Gbit/s router (through a 1 Gbit/s one it read link-bound at 91%,
    // the two too close to tell). On a busy machine the CPU may hold as
    // well: then "not sure", with the window one of the candidates, never
    // a confident other name.
    let lab = lab(|b| b.via_router().rate(10_000_000_000));
    let run = run_in_a(&lab, &["tcp", "b", "-t", "3", "--remote-rcvbuf", "4K"]);
    let (kind, side) = verdict("tcp through 10 Gbit/s, receive buffer 4 KiB", &run);
    match kind.as_str() {
        "receive_window_limited" => assert_eq!(side, "receiver"),
        "not_sure" => {
            let window = evidence(&run, "receive_window_limited").expect("the window among the candidates");
            assert_eq!(window["role"], "candidate", "{window}");
        }
        // Under heavy load the receiver's own threads may wait for a CPU
        // most of their ready time: then its starvation explains the
        // window, which must be in the chain under it.
        // On a machine busier than its cores the free sender may starve as
        // well: named only where its threads measurably waited.
        cpu if CPU_KINDS.contains(&cpu) => {
            if side != "receiver" {
                let waited = waited_percent(&run, "sender");
                assert!(
                    waited >= 50.0,
                    "{cpu} on the {side} side, which waited only {waited:.0}%"
                );
            }
            let window = evidence(&run, "receive_window_limited").expect("the window in the chain");
            assert_eq!(window["role"], "consequence", "{window}");
        }
        // What the window rule read, so a failure says why it did not hold
        // (seen once on a fresh clone's run: "none", no evidence printed).
        other => panic!(
            "a 4 KiB window read as {other}; verdict {}; sender tcp_info {}; intervals' rtt {:?}",
            run["verdict"],
            run["streams"][0]["sender"]["tcp_info"],
            run["streams"][0]["sender"]["intervals"]
                .as_array()
                .map(|i| i.iter().map(|x| x["rtt_us"].clone()).collect::<Vec<_>>())
        ),
    }
}

#[test]
fn two_causes_both_ends_starved_name_both_or_the_one_that_held() {
    require_lab!();
    let _turn = limited_lab_turn();
    // Both ends at 2% of a core. A sender that starved first sends so little
    // that the receiver may keep up within its 2% (seen on a fresh clone's
    // run: the receiver never throttled). So the verdict names both ends
    // (side `both`, two causes), or the one end that held the rate back;
    // always their CPU, never a symptom of it.
    let lab = lab(|b| b.cpu_limit("a", 2.0).cpu_limit("b", 2.0));
    let run = run_in_a(&lab, &["tcp", "b", "-t", "3"]);
    let (kind, side) = verdict("tcp from a at 2% onto b at 2%", &run);
    assert!(CPU_KINDS.contains(&kind.as_str()), "kind {kind}");
    let causes = run["verdict"]["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["role"] == "cause")
        .map(|e| {
            (
                e["kind"].as_str().unwrap_or("").to_string(),
                e["side"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect::<Vec<_>>();
    assert!(
        causes.iter().all(|(k, _)| CPU_KINDS.contains(&k.as_str())),
        "{causes:?}"
    );
    match side.as_str() {
        "both" => {
            let sides: Vec<&str> = causes.iter().map(|(_, s)| s.as_str()).collect();
            assert!(sides.contains(&"sender") && sides.contains(&"receiver"), "{causes:?}");
        }
        "sender" | "receiver" => assert_eq!(causes.len(), 1, "{causes:?}"),
        other => panic!("side {other}"),
    }
}

#[test]
fn two_causes_a_starved_receiver_explains_its_small_window() {
    require_lab!();
    let _turn = limited_lab_turn();
    // Both built: the receiver at 2% of a core and its buffer at 4 KiB. The
    // starved receiver reads slowly, which is what keeps its window shut:
    // the cause is its CPU, the window (when the kernel saw it hold the
    // sender back) a consequence of it.
    let lab = lab(|b| b.via_router().rate(1_000_000_000).cpu_limit("b", 2.0));
    // A small send buffer too: what the sender has queued at the end must
    // drain through the starved receiver within the agent's grace (with
    // the autotuned MiBs, beside two `yes` hogs, it did not).
    let run = run_in_a(
        &lab,
        &["tcp", "b", "-t", "3", "--remote-rcvbuf", "4K", "--sndbuf", "16K"],
    );
    assert_cpu("tcp onto b at 2% with a 4 KiB receive buffer", &run, "receiver");
    if let Some(window) = evidence(&run, "receive_window_limited") {
        assert_eq!(window["role"], "consequence", "{window}");
        assert_eq!(window["explained_by"], 0, "{window}");
    }
}

#[test]
fn a_starved_udp_receiver_on_three_links_is_the_receiver_not_a_slow_link() {
    require_lab!();
    let _turn = limited_lab_turn();
    // Every link carries what was offered; the receiving socket drops
    // unevenly between the links' streams.
    let lab = lab(|b| b.links(3).cpu_limit("b", 4.0));
    let run = run_in_a(&lab, &["udp", "b", "--links", "auto", "-t", "3", "-b", "200M"]);
    assert_cpu("udp 3 x 200M onto b at 4%", &run, "receiver");
}

/// The lab's router link toward `host`, and the router's interface on it.
fn router_iface_toward(lab: &Lab, host: &str) -> String {
    lab.state()
        .links
        .iter()
        .find(|l| l.end_of(host).is_some())
        .and_then(|l| l.end_of("r"))
        .unwrap_or_else(|| panic!("no router link toward {host}"))
        .ifname
        .clone()
}

/// Runs `program ARGS` in the lab's router and checks it succeeded.
fn in_router(lab: &Lab, program: &str, args: &[&str], stdin: Option<&str>) {
    use std::io::Write;
    let mut child = lab
        .command("r", program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{program}: {e}"));
    let mut input = child.stdin.take().unwrap();
    input.write_all(stdin.unwrap_or("").as_bytes()).unwrap();
    drop(input);
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{program} {args:?}: {}", stderr(&out));
}

/// The router drops what it cannot forward onto a smaller link, and its
/// "fragmentation needed" (ICMPv6 "packet too big") never leaves it.
const SILENT_ROUTER: &str = "table inet nicbench_black_hole {
  chain out {
    type filter hook output priority 0;
    icmp type destination-unreachable icmp code frag-needed drop
    icmpv6 type packet-too-big drop
  }
}
";

#[test]
fn a_path_mtu_black_hole_is_named_with_its_size_and_hop_not_a_lost_agent() {
    require_lab!();
    require!(tool("nft", &["--version"], "apt-get install nftables"));
    // Both ends at MTU 9000, the router's way to b at 1500, and its ICMP
    // "fragmentation needed" dropped: large packets vanish without a word.
    // Before, tcp ended with "lost the agent mid-test" and udp -l 8000 with
    // "aborted" after 30 s, neither naming the path.
    let lab = lab(|b| b.via_router().mtu(9000));
    let toward_b = router_iface_toward(&lab, "b");
    in_router(&lab, "ip", &["link", "set", "dev", &toward_b, "mtu", "1500"], None);
    in_router(&lab, "nft", &["-f", "-"], Some(SILENT_ROUTER));
    let router = lab
        .state()
        .links
        .iter()
        .find(|l| l.end_of("a").is_some())
        .and_then(|l| l.end_of("r"))
        .unwrap()
        .address;
    for args in [&["tcp", "b", "-t", "2"][..], &["udp", "b", "-l", "8000", "-t", "2"][..]] {
        let out = lab
            .command("a", BIN)
            .args(args)
            .args(["--json", "--no-save"])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(!out.status.success(), "{args:?} passed through a black hole");
        let doc: Value = serde_json::from_slice(&out.stdout).expect("a JSON error document");
        let verdict = &doc["error"]["verdict"];
        eprintln!("{args:?}: {}", serde_json::to_string_pretty(&doc).unwrap());
        assert_eq!(verdict["kind"], "path_mtu_black_hole", "{args:?}: {doc}");
        let summary = verdict["summary"].as_str().unwrap();
        // The size the lab built, and the hop: the router, which the large
        // packets reach (its "time exceeded" comes back for them).
        assert!(summary.contains("packets over 1500 B vanish"), "{summary}");
        assert!(
            summary.contains(&format!("after hop 1 ({router}, which they reach)")),
            "{summary}"
        );
        assert_eq!(doc["error"]["kind"], "test_failed", "{doc}");
    }
}

#[test]
fn a_shaped_return_path_holds_the_sender_and_is_named() {
    require_lab!();
    // The way back to the sender a at 200 kbit/s, the way to b unshaped:
    // TCP sends no faster than its ACKs come back. Before, the verdict read
    // "no bottleneck stands out" (or the ends' CPU), and the line rate
    // "n/a: shape it". At 1 Mbit/s a quiet machine's ends make ACKs enough to
    // fill the return path, but two busy cores' ends (their threads waiting
    // for a CPU 70% of the time) made 1100 a second, 59% of it: a fifth of
    // that rate leaves it full however slow the ends are.
    let lab = lab(|b| b.via_router().link_rate(1, "a", 200_000));
    let run = run_in_a(&lab, &["tcp", "b", "-t", "3"]);
    let (kind, side) = verdict("tcp with the ACKs' way at 200 kbit/s", &run);
    assert_eq!((kind.as_str(), side.as_str()), ("return_path_bound", "path"));
    super::result_schema::assert_valid(&super::result_schema::schema(), &run, "return path");
    let back = &run["return_shaper"];
    assert_eq!(back["bits_per_second"], 200_000, "{back}");
    // Every ACK the receiver sent went that way: as many packets at least
    // as the shaper counted, less what it still held.
    assert!(num(&back["sent_packets"]) > 0.0, "{back}");
}

#[test]
fn a_clamped_mss_sizes_the_line_rate_model_never_model_exceeded() {
    require_lab!();
    // A 4 KiB receive buffer makes b announce a 2048 B MSS on an MTU 9000
    // path: the packets are 2100 B, not 9000 (the router counted ~2114 B
    // each). The model paired the 9018 B frame with the 2048 B payload and
    // read 426% of it: model_exceeded, "check --link-speed".
    let lab = lab(|b| b.via_router().rate(1_000_000_000).mtu(9000));
    let run = run_in_a(&lab, &["tcp", "b", "-t", "2", "--remote-rcvbuf", "4K"]);
    let (kind, _) = verdict("tcp through 1 Gbit/s at MTU 9000 with a 4 KiB receive buffer", &run);
    assert_ne!(kind, "model_exceeded");
    let share = &run["line_rate"];
    let info = &run["streams"][0]["sender"]["tcp_info"];
    let mss = num(&info["send_mss_bytes"]);
    assert!(mss < 8000.0, "the MSS was not clamped: {info}");
    assert_eq!(num(&share["payload_bytes"]), mss, "{share}");
    // The frame the model counts is the one the segment makes (IP and TCP
    // headers with timestamps, Ethernet header and FCS), as the router's
    // shaper saw them: its average frame within 5% of the model's.
    assert_eq!(num(&share["frame_bytes"]), mss + 52.0 + 18.0, "{share}");
    let shaper = &run["path_shaper"];
    let seen = num(&shaper["sent_bytes"]) / num(&shaper["sent_packets"]);
    let counted = num(&share["counted_bytes_per_frame"]);
    assert!(
        (seen - counted).abs() < counted * 0.05,
        "shaper {seen} B a packet, model {counted} B: {shaper}"
    );
    // Link-bound (the window beside it), or, on a busy machine, the ends'
    // CPU or the window: what the lab built, never the model.
    let allowed = ["link_bound", "receive_window_limited", "not_sure"];
    assert!(
        allowed.contains(&kind.as_str()) || CPU_KINDS.contains(&kind.as_str()),
        "kind {kind}"
    );
}
