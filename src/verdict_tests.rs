//! Verdict rules on synthetic measurements.

use super::*;
use crate::model::{
    BothCounters, BothCpu, CgroupCpu, CoreUtilization, Flow, FlowTotal, NicCounters, ProcessCpu, Role, SocketBuffers,
    StreamEnd, StreamResult, Sum, TcpCounters, TcpInfo, ThreadScheduling, Total, UdpCounters,
};
use crate::workload::udp::UdpResults;
use crate::workload::Throughput;

fn end(role: Role, bits_per_second: f64, tcp: bool) -> StreamEnd {
    StreamEnd {
        stream_id: 1,
        role,
        bytes: (bits_per_second / 8.0) as u64,
        seconds: 1.0,
        bits_per_second,
        omitted_bytes: 0,
        socket: SocketBuffers::default(),
        tcp_info: tcp.then(|| TcpInfo {
            send_mss_bytes: 1448,
            path_mtu_bytes: 1500,
            ..TcpInfo::default()
        }),
        intervals: vec![],
        error: None,
        extras: Default::default(),
    }
}

fn cpu(core: u32, core_percent: f64, softirq: f64, own_seconds: f64) -> CpuReport {
    CpuReport {
        seconds: 10.0,
        logical_cpus: 2,
        busiest_core: CoreUtilization {
            core,
            utilization_percent: core_percent,
            softirq_percent: softirq,
            ..CoreUtilization::default()
        },
        process: ProcessCpu {
            user_seconds: 0.0,
            system_seconds: own_seconds,
        },
        ..CpuReport::default()
    }
}

/// One client->agent TCP stream at `bits_per_second`, quiet CPUs.
fn trial(bits_per_second: f64) -> TrialResult {
    let total = Total {
        bytes: 0,
        seconds: 1.0,
        bits_per_second,
    };
    TrialResult {
        trial: 1,
        streams: vec![StreamResult {
            stream_id: 1,
            flow: Flow::ClientToAgent,
            sender: end(Role::Sender, bits_per_second, true),
            receiver: end(Role::Receiver, bits_per_second, false),
            extras: Default::default(),
        }],
        sum: Sum {
            sender: total.clone(),
            receiver: total.clone(),
            client_to_agent: Some(FlowTotal {
                sender: total.clone(),
                receiver: total,
                extras: Default::default(),
            }),
            agent_to_client: None,
            extras: Default::default(),
        },
        cpu: BothCpu {
            client: cpu(0, 30.0, 0.0, 2.0),
            agent: cpu(1, 40.0, 10.0, 3.0),
        },
        counters: BothCounters {
            client: Some(SideCounters::default()),
            agent: Some(SideCounters::default()),
        },
        line_rate: None,
        verdict: None,
        overlapped_tests: 0,
        interruption: None,
    }
}

fn share(trial: &TrialResult, link: u64) -> Option<LineRateShare> {
    line_rate_share(trial, &Throughput, link, "option", 1500, false, 131072)
}

#[test]
fn quiet_trial_has_no_bottleneck() {
    let v = judge(&trial(500e6), &Throughput, false);
    assert_eq!(v.kind, "none");
    assert_eq!(v.summary, "no bottleneck stands out");
}

#[test]
fn near_line_rate_is_link_bound() {
    let mut t = trial(929.2e6);
    t.line_rate = share(&t, 1_000_000_000);
    let s = t.line_rate.as_ref().unwrap();
    // 1500-byte MTU, MSS 1448: 941.49 Mbit/s theoretical; 929.2 is 98.7%.
    assert!((s.theoretical_goodput_bits_per_second / 1e6 - 941.49).abs() < 0.01);
    assert!((s.percent_of_theoretical_goodput - 98.7).abs() < 0.05);
    let v = judge(&t, &Throughput, false);
    assert_eq!(v.kind, "link_bound");
    assert!(v.summary.starts_with("link-bound: 98.7% of line rate"), "{}", v.summary);
}

#[test]
fn below_the_link_threshold_is_not_link_bound() {
    let mut t = trial(800e6);
    t.line_rate = share(&t, 1_000_000_000);
    assert_eq!(judge(&t, &Throughput, false).kind, "none");
}

#[test]
fn a_busy_sender_core_names_the_sender() {
    let mut t = trial(500e6);
    t.cpu.client = cpu(0, 99.0, 71.0, 2.0);
    let v = judge(&t, &Throughput, false);
    assert_eq!(v.kind, "cpu_bound");
    assert!(
        v.summary.starts_with("sender CPU-bound: core 0 at 99% (71% softirq"),
        "{}",
        v.summary
    );
}

#[test]
fn a_busy_core_on_a_shared_host_does_not_name_a_side() {
    let mut t = trial(500e6);
    t.cpu.client = cpu(0, 99.0, 71.0, 2.0);
    t.cpu.agent = cpu(0, 99.0, 71.0, 3.0);
    let v = judge(&t, &Throughput, true);
    assert!(v.summary.starts_with("host CPU-bound: core 0 at 99%"), "{}", v.summary);
}

#[test]
fn a_saturated_stream_thread_names_its_side_even_on_a_shared_host() {
    let mut t = trial(500e6);
    t.cpu.agent = cpu(1, 60.0, 0.0, 9.8);
    let v = judge(&t, &Throughput, true);
    assert!(
        v.summary
            .starts_with("receiver CPU-bound: its 1 stream thread on CPU 98%"),
        "{}",
        v.summary
    );
}

#[test]
fn both_ends_busy_says_both() {
    let mut t = trial(500e6);
    t.cpu.client = cpu(0, 99.0, 5.0, 2.0);
    t.cpu.agent = cpu(1, 97.0, 5.0, 2.0);
    let v = judge(&t, &Throughput, false);
    assert!(
        v.summary.starts_with("both ends CPU-bound: sender core 0"),
        "{}",
        v.summary
    );
}

#[test]
fn retransmissions_of_the_sender_are_reported() {
    let mut t = trial(500e6);
    t.counters.client.as_mut().unwrap().tcp = Some(TcpCounters {
        out_segments: 1000,
        retransmitted_segments: 21,
        retransmitted_percent: Some(2.1),
    });
    let v = judge(&t, &Throughput, false);
    assert_eq!(v.kind, "retransmitting");
    assert!(
        v.summary.starts_with("retransmitting: 2.1% of segments"),
        "{}",
        v.summary
    );
    // A handful of segments is not evidence.
    t.counters.client.as_mut().unwrap().tcp.as_mut().unwrap().out_segments = 50;
    assert_eq!(judge(&t, &Throughput, false).kind, "none");
}

#[test]
fn socket_buffer_drops_at_the_receiver() {
    let mut t = trial(300e6);
    t.counters.agent.as_mut().unwrap().udp = Some(UdpCounters {
        in_datagrams: 52_000,
        in_errors: 48_000,
        receive_buffer_errors: 48_000,
        send_buffer_errors: 0,
        receive_buffer_errors_percent: Some(48.0),
    });
    let v = judge(&t, &Throughput, false);
    assert_eq!(v.kind, "socket_buffer_drops");
    assert_eq!(
        v.summary,
        "receiver dropping in the socket buffer: 48.0% of datagrams (48000 dropped)"
    );
    // The same counters on the sending side are not the receiver's drops.
    let mut t = trial(300e6);
    t.counters.client = t.counters.agent.clone();
    t.counters.client.as_mut().unwrap().udp = Some(UdpCounters {
        receive_buffer_errors: 48_000,
        receive_buffer_errors_percent: Some(48.0),
        ..UdpCounters::default()
    });
    assert_eq!(judge(&t, &Throughput, false).kind, "none");
}

#[test]
fn nic_drops_at_the_receiver() {
    let mut t = trial(300e6);
    t.counters.agent.as_mut().unwrap().nic = Some(NicCounters {
        rx_packets: 9_800,
        rx_dropped: 200,
        ..NicCounters::default()
    });
    let v = judge(&t, &Throughput, false);
    assert_eq!(
        v.summary,
        "receiver NIC dropping: 2.0% of arriving packets (200 dropped)"
    );
}

#[test]
fn cgroup_throttling_comes_first() {
    let mut t = trial(929.2e6);
    t.line_rate = share(&t, 1_000_000_000);
    t.counters.client.as_mut().unwrap().cgroup_cpu = Some(CgroupCpu {
        cgroup: "/nicbench-slow".into(),
        periods: 100,
        throttled_periods: 97,
        throttled_seconds: 4.0,
        throttled_percent_of_periods: Some(97.0),
        quota_us: Some(20_000),
        period_us: Some(100_000),
    });
    let v = judge(&t, &Throughput, false);
    assert_eq!(v.kind, "cgroup_throttled");
    assert!(
        v.summary
            .starts_with("sender CPU-bound: its cgroup /nicbench-slow throttled it in 97%"),
        "{}",
        v.summary
    );
}

#[test]
fn without_tcp_info_the_udp_model_is_used() {
    let mut t = trial(900e6);
    t.streams[0].sender.tcp_info = None;
    // 1472-byte datagrams fill a 1500-byte MTU: 957.09 Mbit/s at 1 Gbit/s.
    let s = line_rate_share(&t, &Throughput, 1_000_000_000, "nic", 1500, false, 8000).unwrap();
    assert_eq!(s.payload_bytes, 1472);
    assert!((s.theoretical_goodput_bits_per_second / 1e6 - 957.09).abs() < 0.01);
}

#[test]
fn far_above_the_model_blames_the_assumed_link_speed() {
    let mut t = trial(12.22e9);
    t.line_rate = share(&t, 10_000_000_000);
    let v = judge(&t, &Throughput, false);
    assert_eq!(v.kind, "model_exceeded");
    assert!(v.summary.contains("check --link-speed"), "{}", v.summary);
}

fn scheduling(run_seconds: f64, wait_seconds: f64) -> Option<ThreadScheduling> {
    Some(ThreadScheduling {
        threads: 2,
        run_seconds,
        wait_seconds,
        wait_percent: Some(wait_seconds * 100.0 / (run_seconds + wait_seconds)),
    })
}

#[test]
fn threads_waiting_for_a_cpu_name_their_side() {
    let mut t = trial(300e6);
    let client = t.counters.client.as_mut().unwrap();
    client.seconds = 3.0;
    client.scheduling = scheduling(0.3, 2.6);
    let v = judge(&t, &Throughput, true);
    assert_eq!(v.kind, "cpu_starved");
    assert!(
        v.summary
            .starts_with("sender CPU-bound: its threads waited for a CPU 90% of the time"),
        "{}",
        v.summary
    );
}

#[test]
fn short_waits_are_not_starvation() {
    // 90% of ready time, but ready only briefly: a mostly blocked sender.
    let mut t = trial(300e6);
    let client = t.counters.client.as_mut().unwrap();
    client.seconds = 10.0;
    client.scheduling = scheduling(0.1, 0.9);
    assert_eq!(judge(&t, &Throughput, false).kind, "none");
}

#[test]
fn link_bound_wins_over_waiting_threads() {
    let mut t = trial(929.2e6);
    t.line_rate = share(&t, 1_000_000_000);
    let client = t.counters.client.as_mut().unwrap();
    client.seconds = 3.0;
    client.scheduling = scheduling(0.3, 2.6);
    assert_eq!(judge(&t, &Throughput, false).kind, "link_bound");
}

fn udp_trial(sent: u64, received: u64, socket_drops: u64) -> TrialResult {
    let mut t = trial(100e6);
    t.sum.extras.set(
        crate::workload::udp::result::KEY,
        &crate::workload::udp::result::UdpResult {
            sent_datagrams: sent,
            received_datagrams: received,
            lost_datagrams: sent - received,
            loss_percent: (sent - received) as f64 * 100.0 / sent as f64,
            sender_bits_per_second: 200e6,
            receiver_bits_per_second: 200e6 * received as f64 / sent as f64,
            receiver_socket_drops: socket_drops,
            ..Default::default()
        },
    );
    t
}

#[test]
fn udp_loss_before_the_receiver_names_the_path() {
    let v = judge(&udp_trial(10_000, 5_000, 0), &UdpResults, false);
    assert_eq!(v.kind, "path_loss");
    assert!(
        v.summary.contains("50.0% of datagrams before the receiving socket"),
        "{}",
        v.summary
    );
    assert!(
        v.summary
            .contains("sender pushed 200.00 Mbit/s, receiver got 100.00 Mbit/s"),
        "{}",
        v.summary
    );
}

#[test]
fn udp_loss_in_the_socket_names_the_receiver() {
    let v = judge(&udp_trial(10_000, 5_200, 4_800), &UdpResults, false);
    assert_eq!(v.kind, "socket_buffer_drops");
    assert!(
        v.summary.contains("receiver dropping in the socket buffer: 48.0%"),
        "{}",
        v.summary
    );
}

#[test]
fn negligible_udp_loss_is_not_a_verdict() {
    assert_eq!(judge(&udp_trial(100_000, 99_995, 0), &UdpResults, false).kind, "none");
}
