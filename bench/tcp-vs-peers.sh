#!/usr/bin/env bash
# nicbench tcp against iperf3 and nuttcp on loopback, alternating in one run.
#
#   bench/tcp-vs-peers.sh [ROUNDS] [SECONDS]      (defaults: 5 rounds, 5 s per test)
#   NICBENCH_BEFORE=/tmp/old/nicbench bench/tcp-vs-peers.sh 3 3
#   IPERF3_SRC=/tmp/iperf3-src bench/tcp-vs-peers.sh fast 3 5
#   TCP_CC=cubic IPERF3_SRC=/tmp/iperf3-src bench/tcp-vs-peers.sh fast 7 4
#   BLOCK=128K IPERF3_SRC=/tmp/iperf3-src bench/tcp-vs-peers.sh fast 5 4
#
# With NICBENCH_BEFORE (another build of nicbench, e.g. from `git worktree add /tmp/old
# COMMIT`), that binary runs too, against its own agent, in the same rotation: a
# restructuring is checked by the ratio now / before, measured side by side.
#
# `fast` compares the fast paths with upstream iperf3, one stream: copy, zero-copy send
# (`-Z` both), discarding receive (`--discard` / `--skip-rx-copy`) and both, each round
# running every mode of both tools in turn. It prints medians and spread of the
# throughput and the sender's (client's) CPU seconds per GB received (its rusage), with
# the receiver's (server's, from /proc) beside it, and the HRTIMER softirqs of the whole
# machine per GB (bbr without an fq qdisc paces with an hrtimer: a run with several thousand
# per GB spent its time waiting on the pacing timer, docs/BENCHMARKS.md issue 33). nicbench's `--zerocopy=msg` runs too (iperf3
# has no such mode; on loopback the kernel copies its pages anyway).
#
# Upstream iperf3 is built when asked (IPERF3_SRC, see bench/lib/iperf3.sh), never
# committed; without it the `iperf3` on PATH runs (Debian's may be older).
# TCP_CC=ALGO gives both tools' clients that congestion control (`-C ALGO` each); without it
# each runs the machine's default (net.ipv4.tcp_congestion_control), printed in the header.
# BLOCK=SIZE gives both tools' clients that write (and read) size (`-l SIZE` each, e.g. 128K);
# without it each uses its own default (nicbench 256 KiB, iperf3 128 KiB), printed in the header.
#
# For 1 and 2 streams, each round runs every tool once, in turn, so drifts of the
# machine hit all of them alike. Throughput is what each tool reports at the receiver;
# CPU per byte is measured the same way for every tool by this script: busy time of
# all cores from /proc/stat over the run, in microseconds per KB (1024 B) received
# (netperf's service demand, with both ends on this host). Medians are printed with
# the ratio nicbench / best peer. Needs iperf3 and nuttcp (apt-get install iperf3 nuttcp).
set -euo pipefail
cd "$(dirname "$0")/.."
MODE=peers
if [ "${1:-}" = fast ]; then MODE=fast; shift; fi
ROUNDS=${1:-5}
SECONDS_PER_TEST=${2:-5}
# shellcheck source=bench/lib/iperf3.sh
. bench/lib/iperf3.sh
needed="python3 $IPERF3"
[ "$MODE" = peers ] && needed="$needed nuttcp"
for tool in $needed; do
  command -v "$tool" >/dev/null || { echo "missing $tool: apt-get install $(basename "$tool")" >&2; exit 1; }
done
cargo build --release --quiet
exec python3 - "$MODE" "$ROUNDS" "$SECONDS_PER_TEST" "$IPERF3" <<'PY'
import json, os, re, resource, signal, statistics, subprocess, sys, time

mode, rounds, secs, IPERF3 = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
CC = os.environ.get("TCP_CC", "")
CC_ARGS = ["-C", CC] if CC else []
BLOCK = os.environ.get("BLOCK", "")
if BLOCK and not re.fullmatch(r"[1-9][0-9]*[KM]?", BLOCK):
    raise SystemExit(f"BLOCK={BLOCK} is not a size like 128K or 1M (both tools take it as -l)")
BLOCK_ARGS = ["-l", BLOCK] if BLOCK else []
BLOCK_NAME = f"block {BLOCK} both" if BLOCK else "each tool's default block (nicbench 256K, iperf3 128K)"
with open("/proc/sys/net/ipv4/tcp_congestion_control") as f:
    CC_NAME = CC or f.read().strip() + " (machine default)"
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
    return measured([IPERF3, "-c", "127.0.0.1", "-p", str(IPERF_PORT), "-t", str(secs), "-P", str(streams), "-J"], parse)

def nuttcp(streams):
    def parse(s):
        # e.g. "10576.2500 MB /   4.00 sec = 22179.5325 Mbps ..." (MB = 2^20 B, Mbps = 10^6 bit/s)
        m = re.search(r"([\d.]+) MB /\s+([\d.]+) sec =\s+([\d.]+) Mbps", s)
        return float(m.group(3)) * 1e6, float(m.group(1)) * 2**20
    nuttcp_server()
    return measured(["nuttcp", "-T", str(secs), "-N", str(streams), "-P", str(NUTTCP_CTL), "-p", str(NUTTCP_DATA), "127.0.0.1"], parse)

def proc_cpu_seconds(pid):
    """User + system CPU of a running process, its exited threads included."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / HZ

def hrtimer_softirqs():
    """HRTIMER softirqs so far, all cores: bbr without an fq qdisc paces each
    socket with an hrtimer, one softirq per expiry."""
    with open("/proc/softirqs") as f:
        for line in f:
            if line.split(":")[0].strip() == "HRTIMER":
                return sum(int(x) for x in line.split(":")[1].split())
    return 0

def fast_paths():
    """Copy, -Z, discard, both: nicbench and iperf3 alternating, one stream."""
    agent = subprocess.Popen([NB, "serve", "-p", str(NB_PORT), "-B", "127.0.0.1"], stderr=subprocess.DEVNULL)
    server = subprocess.Popen([IPERF3, "-s", "-p", str(IPERF_PORT), "-B", "127.0.0.1"], stdout=subprocess.DEVNULL)
    pids = {"nicbench": agent.pid, "iperf3": server.pid}

    def client(tool, extra):
        if tool == "nicbench":
            cmd = [NB, "tcp", "127.0.0.1", "-p", str(NB_PORT), "-t", str(secs), "--json", "--no-save", *CC_ARGS, *BLOCK_ARGS, *extra]
        else:
            cmd = [IPERF3, "-c", "127.0.0.1", "-p", str(IPERF_PORT), "-t", str(secs), "-J", *CC_ARGS, *BLOCK_ARGS, *extra]
        server_before = proc_cpu_seconds(pids[tool])
        timers_before = hrtimer_softirqs()
        # The servers are not reaped before the end: the children's usage
        # grows by this client's alone.
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        child = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        out, err = child.communicate(timeout=secs * 4 + 30)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        client_cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
        if child.returncode != 0:
            raise SystemExit(f"{' '.join(cmd)} failed: {err.strip()[:300]}")
        time.sleep(0.2)  # the server's last reads and report
        server_cpu = proc_cpu_seconds(pids[tool]) - server_before
        timers = hrtimer_softirqs() - timers_before
        d = json.loads(out)
        if tool == "nicbench":
            bps, nbytes = d["sum"]["receiver"]["bits_per_second"], d["sum"]["receiver"]["bytes"]
        else:
            e = d["end"]["sum_received"]
            bps, nbytes = e["bits_per_second"], e["bytes"]
        return bps, client_cpu / (nbytes / 1e9), server_cpu / (nbytes / 1e9), timers / (nbytes / 1e9)

    modes = [
        ("copy", [], []),
        ("zero-copy send (-Z)", ["-Z"], ["-Z"]),
        ("discarding receive", ["--discard"], ["--skip-rx-copy"]),
        ("-Z + discard", ["-Z", "--discard"], ["-Z", "--skip-rx-copy"]),
        ("MSG_ZEROCOPY (--zerocopy=msg)", ["--zerocopy=msg"], None),
    ]
    version = subprocess.run([IPERF3, "--version"], capture_output=True, text=True).stdout.split("\n")[0]
    print(f"fast paths, loopback, 1 stream, {rounds} rounds x {secs:g} s, {version}, "
          f"kernel {os.uname().release}, {os.cpu_count()} cores, congestion control {CC_NAME}, {BLOCK_NAME}")
    results = {}
    try:
        time.sleep(0.5)
        for r in range(rounds):
            line = []
            for name, nb_args, ip_args in modes:
                for tool, extra in (("nicbench", nb_args), ("iperf3", ip_args)):
                    if extra is None:
                        continue
                    results.setdefault((name, tool), []).append(client(tool, extra))
                    line.append(f"{name} {tool} {results[(name, tool)][-1][0] / 1e9:.1f}")
                    time.sleep(0.3)
            print(f"  round {r + 1}/{rounds}: " + ", ".join(line) + " Gbit/s", file=sys.stderr)
    finally:
        for p in (agent, server):
            p.send_signal(signal.SIGTERM)
            p.wait(timeout=5)
    med = lambda xs: statistics.median(xs)
    print(f"\n  {'mode':<31} {'tool':<9} {'throughput':>12} {'spread':>13} {'sender CPU':>13} {'receiver CPU':>13}"
          f" {'timer softirqs':>16}")
    for name, _, _ in modes:
        for tool in ("nicbench", "iperf3"):
            rs = results.get((name, tool))
            if not rs:
                continue
            bps = [x[0] for x in rs]
            print(f"  {name:<31} {tool:<9} {med(bps) / 1e9:>6.2f} Gbit/s {min(bps) / 1e9:>6.2f}-{max(bps) / 1e9:<6.2f}"
                  f" {med(x[1] for x in rs):>7.3f} s/GB {med(x[2] for x in rs):>7.3f} s/GB"
                  f" {med(x[3] for x in rs):>10.0f} per GB")
    print()
    for name, _, ip_args in modes:
        if ip_args is None:
            continue
        a, b = results[(name, "nicbench")], results[(name, "iperf3")]
        print(f"  {name:<31} nicbench / iperf3: throughput x{med(x[0] for x in a) / med(x[0] for x in b):.3f},"
              f" sender CPU per GB x{med(x[1] for x in a) / med(x[1] for x in b):.2f},"
              f" receiver CPU per GB x{med(x[2] for x in a) / med(x[2] for x in b):.2f}")

if mode == "fast":
    fast_paths()
    sys.exit(0)

servers = [
    subprocess.Popen([NB, "serve", "-p", str(NB_PORT), "-B", "127.0.0.1"], stderr=subprocess.DEVNULL),
    subprocess.Popen([IPERF3, "-s", "-p", str(IPERF_PORT), "-B", "127.0.0.1"], stdout=subprocess.DEVNULL),
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
