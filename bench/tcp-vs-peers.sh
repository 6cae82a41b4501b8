#!/usr/bin/env bash
# nicbench tcp against iperf3 and nuttcp on loopback, alternating in one run.
#
#   bench/tcp-vs-peers.sh [ROUNDS] [SECONDS]      (defaults: 5 rounds, 5 s per test)
#   NICBENCH_BEFORE=/tmp/old/nicbench bench/tcp-vs-peers.sh 3 3
#
# With NICBENCH_BEFORE (another build of nicbench, e.g. from `git worktree add /tmp/old
# COMMIT`), that binary runs too, against its own agent, in the same rotation: a
# restructuring is checked by the ratio now / before, measured side by side.
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
NB_PORT, IPERF_PORT, NUTTCP_CTL, NUTTCP_DATA, NB_BEFORE_PORT = 5410, 5411, 5412, 5413, 5420  # nuttcp -N n takes 5413..5413+n-1
NB_BEFORE = os.environ.get("NICBENCH_BEFORE")
if NB_BEFORE and not os.access(NB_BEFORE, os.X_OK):
    raise SystemExit(f"NICBENCH_BEFORE={NB_BEFORE} is not an executable nicbench")

def busy_ticks():
    busy = 0
    with open("/proc/stat") as f:
        for line in f:
            if line.startswith("cpu "):
                v = [int(x) for x in line.split()[1:]]
                busy = sum(v) - v[3] - v[4]   # all but idle and iowait
    return busy

HZ = os.sysconf("SC_CLK_TCK")

def measured(cmd, parse, tries=3):
    before, t0 = busy_ticks(), time.time()
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=secs * 4 + 30)
    busy_us = (busy_ticks() - before) / HZ * 1e6
    if out.returncode != 0:
        # nuttcp's multi-stream client now and then ends "Broken pipe" on
        # loopback (and its server may exit): say so and run that test again
        # rather than lose the round.
        if tries > 1:
            if cmd[0] == "nuttcp":
                nuttcp_server()
            print(f"  {cmd[0]} failed ({out.stderr.strip()[:120]}); running it again", file=sys.stderr)
            time.sleep(1)
            return measured(cmd, parse, tries - 1)
        raise SystemExit(f"{cmd[0]} failed: {out.stderr.strip()}")
    bps, nbytes = parse(out.stdout)
    return bps, busy_us / (nbytes / 1024.0)

def nicbench(streams, extra=(), binary=NB, port=NB_PORT):
    def parse(s):
        d = json.loads(s)
        return d["sum"]["receiver"]["bits_per_second"], d["sum"]["receiver"]["bytes"]
    return measured([binary, "tcp", "127.0.0.1", "-p", str(port), "-t", str(secs), "-P", str(streams), "--json", "--no-save", *extra], parse)

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
    nuttcp_server()
    return measured(["nuttcp", "-T", str(secs), "-N", str(streams), "-P", str(NUTTCP_CTL), "-p", str(NUTTCP_DATA), "127.0.0.1"], parse)

servers = [
    subprocess.Popen([NB, "serve", "-p", str(NB_PORT), "-B", "127.0.0.1"], stderr=subprocess.DEVNULL),
    subprocess.Popen(["iperf3", "-s", "-p", str(IPERF_PORT), "-B", "127.0.0.1"], stdout=subprocess.DEVNULL),
    None,  # nuttcp's, started by nuttcp_server()
]

def nuttcp_server():
    """(Re)starts nuttcp's server: after a client's broken pipe it may exit."""
    if servers[2] is None or servers[2].poll() is not None:
        servers[2] = subprocess.Popen(["nuttcp", "-S", "--nofork", "-P", str(NUTTCP_CTL), "-p", str(NUTTCP_DATA)],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.3)

nuttcp_server()
if NB_BEFORE:
    servers.append(subprocess.Popen([NB_BEFORE, "serve", "-p", str(NB_BEFORE_PORT), "-B", "127.0.0.1"], stderr=subprocess.DEVNULL))
try:
    time.sleep(0.5)
    tools = {
        "nicbench": lambda n: nicbench(n),
        "nicbench --zerocopy --discard": lambda n: nicbench(n, ["--zerocopy", "--discard"]),
        "iperf3": iperf3,
        "nuttcp": nuttcp,
    }
    if NB_BEFORE:
        tools["nicbench (before)"] = lambda n: nicbench(n, binary=NB_BEFORE, port=NB_BEFORE_PORT)
        tools["nicbench --zerocopy --discard (before)"] = lambda n: nicbench(
            n, ["--zerocopy", "--discard"], binary=NB_BEFORE, port=NB_BEFORE_PORT)
    print(f"loopback, {rounds} rounds x {secs:g} s, kernel {os.uname().release}, {os.cpu_count()} cores")
    for streams in (1, 2):
        results = {name: [] for name in tools}
        for r in range(rounds):
            for name, run in tools.items():
                results[name].append(run(streams))
                time.sleep(0.3)
            print(f"  {streams} stream(s), round {r + 1}/{rounds}: " + ", ".join(
                f"{n} {results[n][-1][0] / 1e9:.1f}" for n in tools) + " Gbit/s", file=sys.stderr)
        med = {n: (statistics.median(v[0] for v in rs), statistics.median(v[1] for v in rs)) for n, rs in results.items()}
        print(f"\n{streams} stream(s), medians of {rounds}:")
        print(f"  {'tool':<40} {'throughput':>14} {'spread':>15} {'CPU per byte':>16}")
        for n, (bps, sd) in med.items():
            lo, hi = min(v[0] for v in results[n]), max(v[0] for v in results[n])
            print(f"  {n:<40} {bps / 1e9:>8.2f} Gbit/s {lo / 1e9:>6.2f}-{hi / 1e9:<6.2f} {sd:>10.3f} us/KB")
        best = max(("iperf3", "nuttcp"), key=lambda n: med[n][0])
        for n in ("nicbench", "nicbench --zerocopy --discard"):
            print(f"  {n} / {best} (best peer): throughput x{med[n][0] / med[best][0]:.2f}, CPU per byte x{med[n][1] / med[best][1]:.2f}")
            if NB_BEFORE:
                b = med[f"{n} (before)"]
                print(f"  {n}: now / before: throughput x{med[n][0] / b[0]:.2f}, CPU per byte x{med[n][1] / b[1]:.2f}")
finally:
    for s in servers:
        s.send_signal(signal.SIGTERM)
    for s in servers:
        try:
            s.wait(timeout=5)
        except subprocess.TimeoutExpired:
            s.kill()
PY
