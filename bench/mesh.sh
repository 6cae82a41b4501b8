#!/usr/bin/env bash
# The mesh coordinator's cost, in a lab of N hosts behind a router.
#
#   bench/mesh.sh [N] [SECONDS] [ROUNDS]      (defaults: 6 hosts, 2 s tests, 5 rounds)
#
# 1. Per-test overhead of the coordinator: the same test a->b, alternately
#    (a) run directly on a (`nicbench tcp b -t SECONDS --no-save`, wall time
#    of the process) and (b) run by a as a peer test for a coordinator in the
#    router (`nicbench mesh a b`, the cell's `seconds`: the coordinator's
#    control round trips, both handshakes and the result's way back).
#    Reported: medians and their difference. Goal (issue 18): under 50 ms.
# 2. The whole mesh of N hosts: wall time against 2(N-1) x (test time + the
#    per-test overhead measured in 1). Goal: within 10%.
# Needs root (the lab) and python3. Builds lab `mbench` and removes it at exit
# (also on failure: the trap runs because python3 is not exec'd).
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-6}
SECONDS_PER_TEST=${2:-2}
ROUNDS=${3:-5}
cargo build --release --quiet
NB=$PWD/target/release/nicbench
LAB=mbench
WORK=$(mktemp -d /tmp/nicbench-mesh-bench-XXXXXX)
cleanup() {
  pkill -f "serve -p 5399 --psk-file $WORK" 2>/dev/null || true
  "$NB" lab down "$LAB" >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$WORK/key"
chmod 600 "$WORK/key"
"$NB" lab up "$LAB" --hosts "$N" --via-router --rate 1gbit --no-agents >/dev/null
hosts=$(python3 -c "import string; print(' '.join(string.ascii_lowercase[:$N]))")
members=()
i=1
for h in $hosts; do
  "$NB" lab exec "$LAB" "$h" -- "$NB" serve -p 5399 --psk-file "$WORK/key" --allow-peer-tests 2>"$WORK/$h.log" &
  members+=("$h=10.200.$i.2:5399")
  i=$((i + 1))
done
for h in $hosts; do
  for _ in $(seq 100); do grep -q "listening on" "$WORK/$h.log" && break; sleep 0.1; done
done
export NICBENCH_DB=$WORK/bench.db
python3 - "$NB" "$LAB" "$WORK" "$SECONDS_PER_TEST" "$ROUNDS" "${members[@]}" <<'PY'
import json, statistics, subprocess, sys, time

nb, lab, work, t, rounds = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]), int(sys.argv[5])
members = sys.argv[6:]
key = f"{work}/key"

def direct():
    start = time.monotonic()
    subprocess.run([nb, "lab", "exec", lab, "a", "--", nb, "tcp", "b", "-p", "5399", "-t", f"{t}s",
                    "--psk-file", key, "--no-save"], check=True, capture_output=True)
    return time.monotonic() - start

def mesh(hosts, extra=()):
    start = time.monotonic()
    out = subprocess.run([nb, "lab", "exec", lab, "r", "--", nb, "mesh", *hosts, "-t", f"{t}s",
                          "--psk-file", key, "--format", "json", *extra], check=True, capture_output=True, text=True)
    return time.monotonic() - start, json.loads(out.stdout)

d, p = [], []
for k in range(rounds):
    d.append(direct())
    _, doc = mesh(members[:2])
    p.append(next(c["seconds"] for c in doc["cells"] if c["src"] == 0))
    print(f"round {k + 1}: direct a->b {d[-1] * 1e3:.0f} ms, peer test a->b {p[-1] * 1e3:.0f} ms", flush=True)
md, mp = statistics.median(d), statistics.median(p)
print(f"\nper test, medians of {rounds}: direct {md * 1e3:.0f} ms, peer test {mp * 1e3:.0f} ms, "
      f"coordinator overhead {(mp - md) * 1e3:+.0f} ms (goal < 50 ms)")
n = len(members)
wall, doc = mesh(members)
expected = (2 * (n - 1) if n % 2 == 0 else 2 * n) * mp
print(f"mesh of {n} hosts: {doc['rounds']} rounds, {len(doc['cells'])} tests, wall {wall:.2f} s "
      f"(process), {doc['wall_seconds']:.2f} s (mesh); 2(N-1) x (test + overhead) = {expected:.2f} s; "
      f"ratio {doc['wall_seconds'] / expected:.3f} (goal within 10%)")
print("outliers:", [o["words"] for o in doc["outliers"]] or "none")
PY
