#!/usr/bin/env bash
# nicbench tcp against iperf3 and nuttcp on loopback, alternating in one run.
#
#   bench/tcp-vs-peers.sh [ROUNDS] [SECONDS]      (defaults: 5 rounds, 5 s per test)
#
# For 1 and 2 streams, each round runs every tool once, in turn, so drifts of the
# machine hit all of them alike. Throughput is what each tool reports at the receiver;
# CPU per byte is measured the same way for every tool by this script: busy time of
# all cores from /proc/stat over the run, in microseconds per KB (1024 B) received
# (netperf's service demand, with both ends on this host). Medians are printed with
# the ratio nicbench / best peer. Needs iperf3 and nuttcp (apt-get install iperf3 nuttcp).
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-5}
SECONDS_PER_TEST=${2:-5}
for tool in iperf3 nuttcp python3; do
  command -v "$tool" >/dev/null || { echo "missing $tool: apt-get install $tool" >&2; exit 1; }
done
cargo build --release --quiet
exec python3 - "$ROUNDS" "$SECONDS_PER_TEST" <<'PY'
import json, os, re, signal, statistics, subprocess, sys, time

rounds, secs = int(sys.argv[1]), float(sys.argv[2])
NB = "./target/release/nicbench"
NB_PORT, IPERF_PORT, NUTTCP_CTL, NUTTCP_DATA = 5410, 5411, 5412, 5413

def busy_ticks():
    busy = 0
    with open("/proc/stat") as f:
        for line in f:
            if line.startswith("cpu "):
                v = [int(x) for x in line.split()[1:]]
                busy = sum(v) - v[3] - v[4]   # all but idle and iowait
    return busy

HZ = os.sysconf("SC_CLK_TCK")

def measured(cmd, parse):
    before, t0 = busy_ticks(), time.time()
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=secs * 4 + 30)
    busy_us = (busy_ticks() - before) / HZ * 1e6
    if out.returncode != 0:
        raise SystemExit(f"{cmd[0]} failed: {out.stderr.strip()}")
    bps, nbytes = parse(out.stdout)
    return bps, busy_us / (nbytes / 1024.0)

def nicbench(streams, extra=()):
    def parse(s):
        d = json.loads(s)
        return d["sum"]["receiver"]["bits_per_second"], d["sum"]["receiver"]["bytes"]
    return measured([NB, "tcp", "127.0.0.1", "-p", str(NB_PORT), "-t", str(secs), "-P", str(streams), "--json", *extra], parse)

def iperf3(streams):
    def parse(s):
        d = json.loads(s)["end"]["sum_received"]
        return d["bits_per_second"], d["bytes"]
    return measured(["iperf3", "-c", "127.0.0.1", "-p", str(IPERF_PORT), "-t", str(secs), "-P", str(streams), "-J"], parse)

def nuttcp(streams):
    def parse(s):
        # e.g. "10576.2500 MB /   4.00 sec = 22179.5325 Mbps ..." (MB = 2^20 B, Mbps = 10^6 bit/s)
        m = re.search(r"([\d.]+) MB /\s+([\d.]+) sec =\s+([\d.]+) Mbps", s)
        return float(m.group(3)) * 1e6, float(m.group(1)) * 2**20
    return measured(["nuttcp", "-T", str(secs), "-N", str(streams), "-P", str(NUTTCP_CTL), "-p", str(NUTTCP_DATA), "127.0.0.1"], parse)

servers = [
    subprocess.Popen([NB, "serve", "-p", str(NB_PORT), "-B", "127.0.0.1"], stderr=subprocess.DEVNULL),
    subprocess.Popen(["iperf3", "-s", "-p", str(IPERF_PORT), "-B", "127.0.0.1"], stdout=subprocess.DEVNULL),
    subprocess.Popen(["nuttcp", "-S", "--nofork", "-P", str(NUTTCP_CTL), "-p", str(NUTTCP_DATA)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL),
]
try:
    time.sleep(0.5)
    tools = {
        "nicbench": lambda n: nicbench(n),
        "nicbench --zerocopy --discard": lambda n: nicbench(n, ["--zerocopy", "--discard"]),
        "iperf3": iperf3,
        "nuttcp": nuttcp,
    }
    print(f"loopback, {rounds} rounds x {secs:g} s, kernel {os.uname().release}, {os.cpu_count()} cores")
    for streams in (1, 2):
        results = {name: [] for name in tools}
        for r in range(rounds):
            for name, run in tools.items():
                results[name].append(run(streams))
                time.sleep(0.3)
            print(f"  {streams} stream(s), round {r + 1}/{rounds}: " + ", ".join(
                f"{n.split()[0] if n == 'nicbench' else n} {results[n][-1][0] / 1e9:.1f}" for n in tools) + " Gbit/s", file=sys.stderr)
        med = {n: (statistics.median(v[0] for v in rs), statistics.median(v[1] for v in rs)) for n, rs in results.items()}
        print(f"\n{streams} stream(s), medians of {rounds}:")
        print(f"  {'tool':<32} {'throughput':>14} {'CPU per byte':>16}")
        for n, (bps, sd) in med.items():
            print(f"  {n:<32} {bps / 1e9:>8.2f} Gbit/s {sd:>10.3f} us/KB")
        best = max(("iperf3", "nuttcp"), key=lambda n: med[n][0])
        for n in ("nicbench", "nicbench --zerocopy --discard"):
            print(f"  {n} / {best} (best peer): throughput x{med[n][0] / med[best][0]:.2f}, CPU per byte x{med[n][1] / med[best][1]:.2f}")
finally:
    for s in servers:
        s.send_signal(signal.SIGTERM)
    for s in servers:
        try:
            s.wait(timeout=5)
        except subprocess.TimeoutExpired:
            s.kill()
PY
