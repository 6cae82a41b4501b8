#!/usr/bin/env bash
# nicbench sweep against NetPIPE's NPtcp on loopback, point by point: RUNS
# (default 3) alternating rounds of a full NPtcp sweep and a full nicbench
# sweep over NPtcp's own size list (nicbench gets it with --sizes), then
# per size: each tool's median latency over the rounds, the ratio, and each
# tool's run-to-run spread ((max - min) / median over the rounds); the
# median of each tool's peaks and wall times, with ratios.
#
# Usage: bench/sweep-vs-netpipe.sh [MAX_SIZE]   (default 8M, NPtcp -u in bytes)
# Env:   NICBENCH=path/to/nicbench (default target/release/nicbench, built if absent)
#        POINT_TIME=130ms, PASSES=2 (nicbench --point-time, --passes; default: nicbench's)
#        RUNS=3 (rounds of NPtcp and nicbench, interleaved)
#        KEEP=dir (keep every round's raw output there)
#        PLACEMENT=apart: both tools pinned apart, NPtcp's receiver under
#        `taskset -c 1` and its transmitter under `taskset -c 0`, nicbench
#        with -A 0 --remote-affinity 1; PLACEMENT=together: both on core 0
#        (NPtcp's ends under `taskset -c 0`, -A 0 --remote-affinity 0);
#        PLACEMENT=best: the host's best placement for each tool, NPtcp run
#        twice a round (together, then left to the scheduler) and each size
#        its faster run's, against nicbench's default, which takes the same
#        two placements by turns in one sweep (NPtcp's wall time is then both
#        runs') (default: each tool's own placement:
#        NPtcp's left to the scheduler; nicbench's by turns since issue 42,
#        pass 1 both on one core, pass 2 left to the scheduler, each size
#        the faster)
#
# Goal (issue 17): for every size, nicbench's median latency within 10% of
# NPtcp's, its run-to-run spread no wider than NPtcp's, peak >= 0.95x and
# wall time <= 0.5x NPtcp's. A benchmark, not a test: client and agent
# share the CPU on loopback; run it on a quiet machine and say its load.
set -euo pipefail

cd "$(dirname "$0")/.."
MAX_ARG=${1:-8M}
POINT_TIME=${POINT_TIME:-}
PASSES=${PASSES:-}
RUNS=${RUNS:-3}
NICBENCH=${NICBENCH:-target/release/nicbench}
PLACEMENT=${PLACEMENT:-}
case "$PLACEMENT" in
    "") np_rx=(); np_tx=(); nb_pin=();;
    apart) np_rx=(taskset -c 1); np_tx=(taskset -c 0); nb_pin=(-A 0 --remote-affinity 1);;
    together) np_rx=(taskset -c 0); np_tx=(taskset -c 0); nb_pin=(-A 0 --remote-affinity 0);;
    best) np_rx=(); np_tx=(); nb_pin=();;
    *) echo "PLACEMENT=$PLACEMENT: use apart, together or best, or leave it unset" >&2; exit 2;;
esac
command -v NPtcp >/dev/null || { echo "NPtcp not found: apt-get install netpipe-tcp" >&2; exit 1; }
command -v python3 >/dev/null || { echo "python3 not found (it computes the table)" >&2; exit 1; }
[ -x "$NICBENCH" ] || cargo build --release --quiet

to_bytes() {
    case "$1" in
        *[kK]) echo $(( ${1%[kK]} * 1024 ));;
        *[mM]) echo $(( ${1%[mM]} * 1048576 ));;
        *) echo "$1";;
    esac
}
MAX=$(to_bytes "$MAX_ARG")

tmp=$(mktemp -d)
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    if [ -n "${KEEP:-}" ]; then mkdir -p "$KEEP" && cp "$tmp"/np-*.out "$tmp"/nb-*.csv "$tmp"/walls "$KEEP"/ 2>/dev/null || true; fi
    rm -rf "$tmp"
}
trap cleanup EXIT

now() { date +%s.%N; }

# NPtcp: a receiver process, then the transmitter; its output file has
# "size  Mbps(2^20 bit/s)  one-way-seconds" per point.
run_nptcp() { # $1: output file; sets $wall
    local port=$(( 20000 + RANDOM % 20000 )) t0 t1
    (cd "$tmp" && exec "${np_rx[@]}" NPtcp -P "$port" >"$tmp/np-receiver.log" 2>&1) &
    pids+=($!)
    sleep 0.5
    t0=$(now)
    (cd "$tmp" && "${np_tx[@]}" NPtcp -h 127.0.0.1 -P "$port" -u "$MAX" -o "$1" >"$tmp/np.log" 2>&1)
    t1=$(now)
    wall=$(echo "$t1 - $t0" | bc -l)
}

run_nicbench() { # $1: output CSV, then sweep options; sets $wall
    local out=$1 t0 t1
    shift
    t0=$(now)
    "$NICBENCH" sweep 127.0.0.1 -p "$nb_port" ${POINT_TIME:+--point-time "$POINT_TIME"} ${PASSES:+--passes "$PASSES"} "${nb_pin[@]}" --csv "$@" >"$out" 2>"$tmp/nb.log"
    t1=$(now)
    wall=$(echo "$t1 - $t0" | bc -l)
}

"$NICBENCH" serve -p 0 -B 127.0.0.1 2>"$tmp/agent.log" &
pids+=($!)
for _ in $(seq 50); do
    grep -q "listening on" "$tmp/agent.log" && break
    sleep 0.1
done
nb_port=$(sed -n 's/.*listening on .*:\([0-9]*\)$/\1/p' "$tmp/agent.log")

echo "placement: ${PLACEMENT:-each tool its own}; load before the first round: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
: >"$tmp/walls"
for round in $(seq "$RUNS"); do
    echo "round $round/$RUNS: NPtcp 1 B .. $MAX B ..." >&2
    if [ "$PLACEMENT" = best ]; then
        # Both placements, each size from the faster run (one-way seconds, column 3).
        np_rx=(taskset -c 0); np_tx=(taskset -c 0)
        run_nptcp "$tmp/np-$round-together.out"
        together_wall=$wall
        np_rx=(); np_tx=()
        run_nptcp "$tmp/np-$round-scheduler.out"
        wall=$(echo "$wall + $together_wall" | bc -l)
        awk 'NR == FNR { t[$1] = $3; line[$1] = $0; next }
             { if (($1 in t) && t[$1] < $3) print line[$1]; else print $0 }' \
            "$tmp/np-$round-together.out" "$tmp/np-$round-scheduler.out" >"$tmp/np-$round.out"
    else
        run_nptcp "$tmp/np-$round.out"
    fi
    echo "np $round $wall" >>"$tmp/walls"
    sizes=$(awk '{print $1}' "$tmp/np-$round.out" | paste -sd, -)
    echo "round $round/$RUNS: nicbench sweep over NPtcp's $(awk 'END {print NR}' "$tmp/np-$round.out") sizes ..." >&2
    run_nicbench "$tmp/nb-$round.csv" --sizes "$sizes"
    echo "nb $round $wall" >>"$tmp/walls"
done
echo "load after the last round: $(cut -d' ' -f1-3 /proc/loadavg)" >&2

python3 - "$tmp" "$RUNS" "--point-time ${POINT_TIME:-default} --passes ${PASSES:-default}" "$MAX" <<'PY'
import csv, statistics, sys
tmp, runs, point_time, top = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
np_lat, nb_lat, nb_wide, np_peak, nb_peak = {}, {}, {}, [], []
walls = {"np": [], "nb": []}
for line in open(f"{tmp}/walls"):
    tool, _, w = line.split()
    walls[tool].append(float(w))
for r in range(1, runs + 1):
    peak = 0.0
    for line in open(f"{tmp}/np-{r}.out"):
        f = line.split()
        size, one_way = int(f[0]), float(f[2])
        np_lat.setdefault(size, []).append(one_way * 1e6)
        peak = max(peak, size * 8 / one_way)
    np_peak.append(peak)
    peak = 0.0
    for row in csv.DictReader(open(f"{tmp}/nb-{r}.csv")):
        size = int(row["size_bytes"])
        nb_lat.setdefault(size, []).append(float(row["latency_us"]))
        nb_wide[size] = nb_wide.get(size, 0) + (row.get("wide") == "1")
        peak = max(peak, float(row["bandwidth_mbit_per_second"]) * 1e6)
    nb_peak.append(peak)
med = statistics.median
def spread(v):
    return 100 * (max(v) - min(v)) / med(v)
print(f"\nloopback, 1 B .. {top} B, {runs} alternating rounds; latency = median over the rounds of each round's")
print("figure (NPtcp: best of its trials; nicbench: best batch), in us; spread = (max - min) / median over the rounds")
print(f"{'size B':>9} {'NPtcp us':>9} {'nicbench us':>11} {'ratio':>6} {'NPtcp spread':>12} {'nicbench spread':>15} {'wide':>5}")
within = narrower = n = 0
ratios, np_spreads, nb_spreads = [], [], []
for size in sorted(np_lat):
    if size not in nb_lat or len(nb_lat[size]) < runs:
        continue
    a, b = med(np_lat[size]), med(nb_lat[size])
    sa, sb = spread(np_lat[size]), spread(nb_lat[size])
    n += 1
    within += abs(b / a - 1) <= 0.10
    narrower += sb <= sa
    ratios.append(b / a); np_spreads.append(sa); nb_spreads.append(sb)
    flag = "" if abs(b / a - 1) <= 0.10 else ("  lower" if b < a else "  higher")
    print(f"{size:>9} {a:>9.2f} {b:>11.2f} {b / a:>6.2f} {sa:>11.0f}% {sb:>14.0f}% {nb_wide.get(size, 0):>3}/{runs}{flag}")
print()
powers = [s for s in sorted(np_lat) if s >= 1024 and s & (s - 1) == 0 and s in nb_lat and len(nb_lat[s]) >= runs]
close = [s for s in powers if abs(med(nb_lat[s]) / med(np_lat[s]) - 1) <= 0.15]
print(f"powers of two 1 KiB .. {top} B within 15% of NPtcp: {len(close)} of {len(powers)}"
      + ("" if len(close) == len(powers) else f" (not: {', '.join(str(s) for s in powers if s not in close)})"))
print(f"sizes within 10% of NPtcp: {within} of {n}; median ratio {med(ratios):.3f}")
print(f"run-to-run spread no wider than NPtcp's: {narrower} of {n} sizes; median spread NPtcp {med(np_spreads):.0f}%, nicbench {med(nb_spreads):.0f}%")
gb = lambda v: f"{v / 1e9:.2f}"
print(f"peak, median of {runs}: NPtcp {gb(med(np_peak))} Gbit/s, nicbench {gb(med(nb_peak))} Gbit/s, ratio {med(nb_peak) / med(np_peak):.3f}   (goal: >= 0.95)")
print(f"  NPtcp peaks {' '.join(gb(p) for p in np_peak)}; nicbench peaks {' '.join(gb(p) for p in nb_peak)} Gbit/s")
print(f"wall time, median of {runs}: NPtcp {med(walls['np']):.1f} s, nicbench {med(walls['nb']):.1f} s, ratio {med(walls['nb']) / med(walls['np']):.3f}   (goal: <= 0.5)")
print(f"(nicbench {point_time}; peaks from size and time in SI Gbit/s, NPtcp's Mbps column is 2^20 bit/s)")
PY
