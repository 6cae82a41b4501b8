#!/usr/bin/env bash
# iperf3 interop throughput on loopback, alternating in one run (issue 16):
#
#   bench/iperf3-interop.sh [ROUNDS] [SECONDS]      (defaults: 5 rounds, 5 s per test)
#
# Each round runs, one after the other, one TCP stream of 128 KiB writes:
#   iperf3 -c  ->  iperf3 -s                    (the reference)
#   nicbench tcp iperf3://  ->  iperf3 -s       (nicbench as the client)
#   iperf3 -c  ->  nicbench serve --iperf3-port (nicbench as the server)
# and prints the receiver's Gbit/s of each pairing, the medians, and each
# pairing's median over the reference's. Goal: both pairings >= 1.0.
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
import json, statistics, subprocess, sys, time

rounds, secs = int(sys.argv[1]), int(sys.argv[2])
NB = "./target/release/nicbench"
IPERF_PORT, AGENT_PORT, AGENT_IPERF3_PORT = 5441, 5442, 5443

def iperf3_server():
    s = subprocess.Popen(["iperf3", "-s", "-1", "-B", "127.0.0.1", "-p", str(IPERF_PORT)],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.3)
    return s

def iperf3_client(port):
    out = subprocess.run(["iperf3", "-c", "127.0.0.1", "-p", str(port), "-t", str(secs), "-l", "128K", "-J"],
                         capture_output=True, text=True, timeout=secs * 4 + 30)
    doc = json.loads(out.stdout)
    if "error" in doc: raise SystemExit(f"iperf3 -c: {doc['error']}")
    return doc["end"]["sum_received"]["bits_per_second"] / 1e9

def nicbench_client():
    out = subprocess.run([NB, "tcp", f"iperf3://127.0.0.1:{IPERF_PORT}", "-t", str(secs), "-l", "128K", "--json"],
                         capture_output=True, text=True, timeout=secs * 4 + 30)
    if out.returncode != 0: raise SystemExit(out.stderr)
    return json.loads(out.stdout)["sum"]["receiver"]["bits_per_second"] / 1e9

agent = subprocess.Popen([NB, "serve", "-B", "127.0.0.1", "-p", str(AGENT_PORT), "--iperf3-port", str(AGENT_IPERF3_PORT)],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
time.sleep(0.5)
results = {"iperf3->iperf3": [], "nicbench->iperf3": [], "iperf3->nicbench": []}
try:
    for r in range(rounds):
        s = iperf3_server(); results["iperf3->iperf3"].append(iperf3_client(IPERF_PORT)); s.wait(timeout=30)
        s = iperf3_server(); results["nicbench->iperf3"].append(nicbench_client()); s.wait(timeout=30)
        results["iperf3->nicbench"].append(iperf3_client(AGENT_IPERF3_PORT))
        print(f"round {r + 1}: " + ", ".join(f"{k} {v[-1]:.2f} Gbit/s" for k, v in results.items()), flush=True)
finally:
    agent.terminate(); agent.wait()
ref = statistics.median(results["iperf3->iperf3"])
for k, v in results.items():
    m = statistics.median(v)
    print(f"{k:18s} median {m:6.2f} Gbit/s   ratio to iperf3->iperf3 {m / ref:.2f}")
PY
