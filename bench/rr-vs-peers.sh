#!/usr/bin/env bash
# nicbench rr against sockperf ping-pong, qperf tcp_lat/udp_lat (and netperf
# TCP_RR/UDP_RR when installed) on loopback, alternating in one run.
#
#   bench/rr-vs-peers.sh [ROUNDS] [SECONDS] [SIZE]   (defaults: 5 rounds, 5 s, 64 bytes)
#
# One flow, one transaction in flight, SIZE-byte request and response. Reported
# per tool (medians): round trips per second and the p99 round trip. sockperf and
# qperf report half a round trip; this script doubles them. qperf gives no
# percentiles. Goal (issue 4): nicbench >= 1.3x sockperf's round trips/s with a
# p99 no worse. Needs sockperf and qperf (apt-get install sockperf qperf).
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-5}
SECONDS_PER_TEST=${2:-5}
SIZE=${3:-64}
for tool in sockperf qperf python3; do
  command -v "$tool" >/dev/null || { echo "missing $tool: apt-get install $tool" >&2; exit 1; }
done
cargo build --release --quiet
exec python3 - "$ROUNDS" "$SECONDS_PER_TEST" "$SIZE" <<'PY'
import json, os, re, shutil, signal, statistics, subprocess, sys, time

rounds, secs, size = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
NB = "./target/release/nicbench"
NB_PORT, SP_TCP, SP_UDP, QP_PORT, NP_PORT = 5440, 5441, 5442, 5443, 5444

def run(cmd):
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=secs * 4 + 30)
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed: {out.stderr.strip()}")
    return out.stdout + out.stderr

def nicbench(proto, extra=()):
    d = json.loads(run([NB, "rr", "127.0.0.1", "-p", str(NB_PORT), "-t", str(secs), "--proto", proto,
                        "-r", f"{size},{size}", "--json", *extra]))["sum"]["rr"]
    return d["transactions_per_second"], d["latency"]["p99_us"]

def sockperf(proto, port):
    flag = ["--tcp"] if proto == "tcp" else []   # UDP is sockperf's default
    s = run(["sockperf", "pp", *flag, "-i", "127.0.0.1", "-p", str(port), "-t", str(int(secs)), "-m", str(size)])
    valid = re.search(r"\[Valid Duration\] RunTime=([\d.]+) sec; SentMessages=(\d+); ReceivedMessages=(\d+)", s)
    p99 = re.search(r"percentile 99\.000 =\s+([\d.]+)", s)
    if not (valid and p99):
        raise SystemExit(f"unexpected sockperf output:\n{s}")
    return int(valid.group(3)) / float(valid.group(1)), 2 * float(p99.group(1))

def qperf(test):
    s = run(["qperf", "127.0.0.1", "-lp", str(QP_PORT), "-t", str(secs), "-m", str(size), test])
    m = re.search(r"latency\s*=\s*([\d.]+)\s*(us|ms|ns)", s)
    half_us = float(m.group(1)) * {"us": 1, "ms": 1000, "ns": 0.001}[m.group(2)]
    return 1e6 / (2 * half_us), float("nan")

def netperf(test):
    s = run(["netperf", "-H", "127.0.0.1", "-p", str(NP_PORT), "-t", test, "-l", str(secs), "--",
             "-r", f"{size},{size}", "-o", "THROUGHPUT,P99_LATENCY"])
    tps, p99 = s.strip().splitlines()[-1].split(",")
    return float(tps), float(p99)

servers = [
    subprocess.Popen([NB, "serve", "-p", str(NB_PORT), "-B", "127.0.0.1"], stderr=subprocess.DEVNULL),
    subprocess.Popen(["sockperf", "sr", "--tcp", "-i", "127.0.0.1", "-p", str(SP_TCP)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL),
    subprocess.Popen(["sockperf", "sr", "-i", "127.0.0.1", "-p", str(SP_UDP)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL),
    subprocess.Popen(["qperf", "-lp", str(QP_PORT)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL),
]
tools = {
    "nicbench rr --proto tcp": lambda: nicbench("tcp"),
    # Polls instead of sleeping: no wake-up latency, one busy core per end.
    "nicbench rr --proto tcp --spin": lambda: nicbench("tcp", ["--spin"]),
    "sockperf ping-pong --tcp": lambda: sockperf("tcp", SP_TCP),
    "qperf tcp_lat": lambda: qperf("tcp_lat"),
    "nicbench rr --proto udp": lambda: nicbench("udp"),
    "nicbench rr --proto udp --spin": lambda: nicbench("udp", ["--spin"]),
    "sockperf ping-pong (udp)": lambda: sockperf("udp", SP_UDP),
    "qperf udp_lat": lambda: qperf("udp_lat"),
}
if shutil.which("netperf") and shutil.which("netserver"):
    servers.append(subprocess.Popen(["netserver", "-D", "-p", str(NP_PORT)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    tools["netperf TCP_RR"] = lambda: netperf("TCP_RR")
    tools["netperf UDP_RR"] = lambda: netperf("UDP_RR")
try:
    time.sleep(0.5)
    results = {name: [] for name in tools}
    print(f"loopback, {size}-byte request and response, 1 flow, {rounds} rounds x {secs:g} s, "
          f"kernel {os.uname().release}, {os.cpu_count()} cores")
    for r in range(rounds):
        for name, f in tools.items():
            results[name].append(f())
            time.sleep(0.3)
        print(f"  round {r + 1}/{rounds}: " + ", ".join(
            f"{n} {results[n][-1][0] / 1e3:.1f}k/s" for n in tools), file=sys.stderr)
    med = {n: (statistics.median(x[0] for x in rs), statistics.median(x[1] for x in rs)) for n, rs in results.items()}
    print(f"\nmedians of {rounds}:")
    print(f"  {'tool':<32} {'round trips/s':>14} {'p99 round trip':>16}")
    for n, (tps, p99) in med.items():
        p = "n/a" if p99 != p99 else f"{p99:.1f} us"
        print(f"  {n:<32} {tps:>14.0f} {p:>16}")
    for proto, peer in (("tcp", "sockperf ping-pong --tcp"), ("tcp --spin", "sockperf ping-pong --tcp"),
                        ("udp", "sockperf ping-pong (udp)"), ("udp --spin", "sockperf ping-pong (udp)")):
        nb = med[f"nicbench rr --proto {proto}"]
        print(f"  nicbench {proto} / sockperf: round trips/s x{nb[0] / med[peer][0]:.2f}, "
              f"p99 {nb[1]:.1f} us vs {med[peer][1]:.1f} us")
finally:
    for s in servers:
        s.send_signal(signal.SIGTERM)
    for s in servers:
        try:
            s.wait(timeout=5)
        except subprocess.TimeoutExpired:
            s.kill()
PY
