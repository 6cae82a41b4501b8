#!/usr/bin/env bash
# The lab's hosts and their CPUs (issue 66): two questions a roundup asks,
# rehearsed in a 2-host lab through a 1 Gbit/s router with offloads off
# (NICs of another era) and each host on a core of its own (--cores own).
#
# 1. Jumbo frames: MTU 1500 and 9000 by turns, `tcp b -t SECONDS`, ROUNDS
#    rounds; each host's CPU per KB: its own work (its test threads and the
#    napi threads carrying its packets, cpu.*.host_work_service_demand;
#    what counts on a busy machine), its cores' (cpu.*.service_demand;
#    everything that ran there) and its test threads' alone.
# 2. A slow host: b full and b at 25% of a core by turns, a -> b and b -> a.
#
# Prints every run, then the medians and ranges. Needs root and iproute2.
# The lab is named lc<PID> and removed on exit.
#
#   bench/lab-cpu.sh [NICBENCH] [ROUNDS] [SECONDS]
#   (default: target/release/nicbench, built; 3 rounds; 5 s)
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -ge 1 ] && [ -n "$1" ]; then
    NB=$(realpath "$1")
else
    cargo build --release --quiet
    NB=$PWD/target/release/nicbench
fi
ROUNDS=${2:-3}
SECONDS_EACH=${3:-5}
LAB=lc$$
OUT=$(mktemp -d)
cleanup() {
    "$NB" lab down "$LAB" >/dev/null 2>&1 || true
    rm -rf "$OUT"
}
trap cleanup EXIT

"$NB" lab up "$LAB" --via-router --rate 1gbit --offloads tso=off,gso=off,gro=off --cores own >/dev/null
"$NB" lab status "$LAB" | sed -n '/^hosts:/,/^links:/p'
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"

# run LABEL FROM TO: one tcp test, its JSON kept as OUT/LABEL.N.json
run() {
    local label=$1 from=$2 to=$3 n
    n=$(find "$OUT" -name "$label.*.json" | wc -l)
    "$NB" lab exec "$LAB" "$from" -- "$NB" tcp "$to" -t "$SECONDS_EACH" --json --no-save \
        >"$OUT/$label.$n.json" 2>"$OUT/$label.$n.err" || {
        echo "$label: failed: $(tail -1 "$OUT/$label.$n.err")"
        rm -f "$OUT/$label.$n.json"
    }
}

for round in $(seq "$ROUNDS"); do
    for mtu in 1500 9000; do
        "$NB" lab set "$LAB" --mtu "$mtu" >/dev/null
        run "mtu$mtu" a b
    done
    "$NB" lab set "$LAB" --mtu 1500 >/dev/null
    for limit in none 25%; do
        "$NB" lab set "$LAB" --cpu-limit "b=$limit" >/dev/null
        run "b-$limit-a-to-b" a b
        run "b-$limit-b-to-a" b a
    done
    "$NB" lab set "$LAB" --cpu-limit b=none >/dev/null
    echo "round $round done, load average $(cut -d' ' -f1-3 /proc/loadavg)"
done

python3 - "$OUT" <<'EOF'
import glob, json, os, statistics, sys
out = sys.argv[1]
labels = sorted({os.path.basename(p).split(".")[0] for p in glob.glob(f"{out}/*.json")})
def fig(run, *path):
    v = run
    for k in path:
        v = (v or {}).get(k) if isinstance(v, dict) else None
    return v
print(f"{'case':<18} {'Mbit/s':>24} {'client work us/KB':>20} {'agent work us/KB':>20} {'client cores us/KB':>20} {'agent cores us/KB':>20}  scope")
for label in labels:
    runs = [json.load(open(p)) for p in sorted(glob.glob(f"{out}/{label}.*.json"))]
    cols = []
    for path in [("sum", "receiver", "bits_per_second"), ("cpu", "client", "host_work_service_demand_us_per_kb"),
                 ("cpu", "agent", "host_work_service_demand_us_per_kb"), ("cpu", "client", "service_demand_us_per_kb"),
                 ("cpu", "agent", "service_demand_us_per_kb")]:
        vals = [fig(r, *path) for r in runs]
        vals = [v / 1e6 if path[0] == "sum" else v for v in vals if v is not None]
        cols.append(" / ".join(f"{v:.1f}" if path[0] == "sum" else f"{v:.2f}" for v in vals) or "-")
    scope = fig(runs[0], "cpu", "client", "scope") or {}
    where = f"{scope.get('kind', '?')} {scope.get('cores', '')}"
    print(f"{label:<18} {cols[0]:>24} {cols[1]:>20} {cols[2]:>20} {cols[3]:>20} {cols[4]:>20}  {where}")
    verdicts = {fig(r, "verdict", "kind") + "/" + str(fig(r, "verdict", "side")) for r in runs}
    print(f"{'':<18} verdicts: {', '.join(sorted(verdicts))}")
def med(label, *path):
    vals = [fig(json.load(open(p)), *path) for p in glob.glob(f"{out}/{label}.*.json")]
    vals = [v for v in vals if v is not None]
    return statistics.median(vals) if vals else None
for side in ["client", "agent"]:
    for figure, words in [("host_work_service_demand_us_per_kb", "its host's own work"),
                          ("service_demand_us_per_kb", "its host's cores"),
                          ("threads_service_demand_us_per_kb", "its test threads")]:
        a, b = med("mtu1500", "cpu", side, figure), med("mtu9000", "cpu", side, figure)
        if a and b:
            print(f"{side} CPU per KB ({words}), median, 1500 -> 9000: {a:.2f} -> {b:.2f} us/KB ({100 * (b - a) / a:+.0f}%)")
busy = [fig(json.load(open(p)), "cpu", "client", "utilization_percent") for p in glob.glob(f"{out}/mtu*.json")]
busy = [b for b in busy if b is not None]
if busy:
    print(f"the client host's cores were {min(busy):.0f}-{max(busy):.0f}% busy in the MTU runs"
          " (near 100%: other work on them, and its per-KB figure is only 1/throughput)")
EOF
