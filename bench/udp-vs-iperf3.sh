#!/usr/bin/env bash
# nicbench udp against iperf3 -u on loopback, alternating in one run.
#
#   bench/udp-vs-iperf3.sh [ROUNDS] [SECONDS]      (defaults: 5 rounds, 5 s per test)
#
# Every tool sends 1400-byte datagrams as fast as it can over one stream
# (nicbench -b max, iperf3 -b 0), in turn each round so drifts of the machine hit
# all alike. Reported per tool (medians): the datagram rate the RECEIVER got, the
# rate the sender pushed, and the loss; then nicbench / iperf3 for the receiver
# datagram rate. Goal (issue 4): nicbench >= 1.5x iperf3 at equal or lower loss.
# Needs iperf3 (apt-get install iperf3).
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-5}
SECONDS_PER_TEST=${2:-5}
for tool in iperf3 python3; do
  command -v "$tool" >/dev/null || { echo "missing $tool: apt-get install $tool" >&2; exit 1; }
done
cargo build --release --quiet
exec python3 - "$ROUNDS" "$SECONDS_PER_TEST" <<'PY'
import json, os, signal, statistics, subprocess, sys, time

rounds, secs = int(sys.argv[1]), float(sys.argv[2])
NB = "./target/release/nicbench"
NB_PORT, IPERF_PORT = 5430, 5431
SIZE = 1400

def run(cmd):
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=secs * 4 + 30)
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed: {out.stderr.strip()}")
    return json.loads(out.stdout)

def nicbench(extra=()):
    d = run([NB, "udp", "127.0.0.1", "-p", str(NB_PORT), "-t", str(secs), "-b", "max", "-l", str(SIZE), "--json", *extra])
    u, r = d["sum"]["udp"], d["sum"]["receiver"]
    return {"rx_pps": u["received_datagrams"] / r["seconds"], "rx_bps": u["receiver_bits_per_second"],
            "tx_bps": u["sender_bits_per_second"], "loss": u["loss_percent"]}

def iperf3():
    d = run(["iperf3", "-c", "127.0.0.1", "-p", str(IPERF_PORT), "-u", "-b", "0", "-l", str(SIZE), "-t", str(secs), "-J"])["end"]
    rx, tx = d["sum_received"], d["sum_sent"]
    return {"rx_pps": rx["bytes"] / SIZE / rx["seconds"], "rx_bps": rx["bits_per_second"],
            "tx_bps": tx["bits_per_second"], "loss": rx["lost_percent"]}

servers = [
    subprocess.Popen([NB, "serve", "-p", str(NB_PORT), "-B", "127.0.0.1"], stderr=subprocess.DEVNULL),
    subprocess.Popen(["iperf3", "-s", "-p", str(IPERF_PORT), "-B", "127.0.0.1"], stdout=subprocess.DEVNULL),
]
try:
    time.sleep(0.5)
    tools = {
        "nicbench udp -b max": lambda: nicbench(),
        # The receive buffer iperf3 gets (the kernel default) instead of the
        # 4 MiB nicbench's UDP receiver asks for: what the buffer is worth.
        "nicbench udp -b max --remote-rcvbuf 208K": lambda: nicbench(["--remote-rcvbuf", "208K"]),
        # GSO on the sender only: the receiver still gets (and counts) every
        # datagram on its own, as from a real NIC.
        "nicbench udp -b max --gso": lambda: nicbench(["--gso"]),
        # GRO too: on loopback the GSO buffers then stay whole end to end.
        "nicbench udp -b max --gso --gro": lambda: nicbench(["--gso", "--gro"]),
        "iperf3 -u -b 0": iperf3,
    }
    results = {name: [] for name in tools}
    print(f"loopback, {SIZE}-byte datagrams, 1 stream, {rounds} rounds x {secs:g} s, "
          f"kernel {os.uname().release}, {os.cpu_count()} cores")
    for r in range(rounds):
        for name, f in tools.items():
            results[name].append(f())
            time.sleep(0.3)
        print(f"  round {r + 1}/{rounds}: " + ", ".join(
            f"{n} {results[n][-1]['rx_pps'] / 1e3:.0f}k/s" for n in tools), file=sys.stderr)
    med = {n: {k: statistics.median(x[k] for x in rs) for k in rs[0]} for n, rs in results.items()}
    print(f"\nmedians of {rounds}:")
    print(f"  {'tool':<40} {'receiver':>16} {'receiver':>14} {'sender':>14} {'loss':>8}")
    for n, m in med.items():
        print(f"  {n:<40} {m['rx_pps'] / 1e3:>7.1f} kdatagram/s {m['rx_bps'] / 1e9:>7.2f} Gbit/s "
              f"{m['tx_bps'] / 1e9:>7.2f} Gbit/s {m['loss']:>7.2f}%")
    base = med["iperf3 -u -b 0"]
    for n in list(tools)[:4]:
        print(f"  {n} / iperf3: receiver datagram rate x{med[n]['rx_pps'] / base['rx_pps']:.2f}, "
              f"loss {med[n]['loss']:.2f}% vs {base['loss']:.2f}%")
finally:
    for s in servers:
        s.send_signal(signal.SIGTERM)
    for s in servers:
        try:
            s.wait(timeout=5)
        except subprocess.TimeoutExpired:
            s.kill()
PY
