#!/usr/bin/env bash
# nicbench sweep against NetPIPE's NPtcp on loopback, in one run: the wall
# time of each whole sweep, the 1-byte latency (half round trip) and the
# peak bandwidth side by side, with ratios. Both sweep NPtcp's own size list
# (nicbench gets it with --sizes), so the curves cover the same points; a
# second nicbench run with its default size list is shown for reference.
#
# Usage: bench/sweep-vs-netpipe.sh [MAX_SIZE]   (default 8M, NPtcp -u in bytes)
# Env:   NICBENCH=path/to/nicbench (default target/release/nicbench, built if absent)
#        POINT_TIME=100ms (nicbench --point-time)
#        RUNS=1 (rounds of NPtcp and nicbench, interleaved; on a noisy machine use 3)
#
# Goal (issue 5): latency and peak within 10% of NPtcp's, in at most half
# of NPtcp's wall time. This is a benchmark, not a test: run it on a quiet
# machine; client and agent share the CPU on loopback.
set -euo pipefail

cd "$(dirname "$0")/.."
MAX_ARG=${1:-8M}
POINT_TIME=${POINT_TIME:-100ms}
RUNS=${RUNS:-1}
NICBENCH=${NICBENCH:-target/release/nicbench}
command -v NPtcp >/dev/null || { echo "NPtcp not found: apt-get install netpipe-tcp" >&2; exit 1; }
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
np_walls=(); np_lats=(); np_peaks=(); nb_walls=(); nb_lats=(); nb_peaks=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    rm -rf "$tmp"
}
trap cleanup EXIT

now() { date +%s.%N; }

# NPtcp: a receiver process, then the transmitter; np.out has
# "size  Mbps(2^20 bit/s)  one-way-seconds" per point.
run_nptcp() { # $1: output file; sets $wall
    local port=$(( 20000 + RANDOM % 20000 )) t0 t1
    (cd "$tmp" && exec NPtcp -P "$port" >"$tmp/np-receiver.log" 2>&1) &
    pids+=($!)
    sleep 0.5
    t0=$(now)
    (cd "$tmp" && NPtcp -h 127.0.0.1 -P "$port" -u "$MAX" -o "$1" >"$tmp/np.log" 2>&1)
    t1=$(now)
    wall=$(echo "$t1 - $t0" | bc -l)
}

run_nicbench() { # $1: output CSV, then sweep options; sets $wall
    local out=$1 t0 t1
    shift
    t0=$(now)
    "$NICBENCH" sweep 127.0.0.1 -p "$nb_port" --point-time "$POINT_TIME" --csv "$@" >"$out" 2>"$tmp/nb.log"
    t1=$(now)
    wall=$(echo "$t1 - $t0" | bc -l)
}

# Figures: latency = one-way time of the smallest size in us; peak from
# size and time (NPtcp's "Mbps" column is 2^20 bit/s, so it is not used).
np_figures() {
    awk 'NR == 1 { lat = $3 * 1e6 }
        { bps = $1 * 8 / $3; if (bps > peak) { peak = bps; at = $1 } }
        END { printf "%d %.2f %.0f %d\n", NR, lat, peak, at }' "$1"
}
nb_figures() {
    awk -F, 'NR == 2 { lat = $2 }
        NR > 1 { bps = $3 * 1e6; if (bps > peak) { peak = bps; at = $1 } n++ }
        END { printf "%d %.2f %.0f %d\n", n, lat, peak, at }' "$1"
}

"$NICBENCH" serve -p 0 -B 127.0.0.1 2>"$tmp/agent.log" &
pids+=($!)
for _ in $(seq 50); do
    grep -q "listening on" "$tmp/agent.log" && break
    sleep 0.1
done
nb_port=$(sed -n 's/.*listening on .*:\([0-9]*\)$/\1/p' "$tmp/agent.log")

# RUNS rounds, NPtcp and nicbench (over NPtcp's sizes) interleaved so that
# both see the same machine; per tool: the median over the rounds of wall
# time, 1-byte latency and peak (medians, so one lucky or unlucky round of
# either tool does not decide the ratio; every round is printed).
rows=()
for round in $(seq "$RUNS"); do
    echo "round $round/$RUNS: NPtcp 1 B .. $MAX B ..." >&2
    run_nptcp "$tmp/np.out"
    w=$wall
    read -r n lat peak at < <(np_figures "$tmp/np.out")
    rows+=("NPtcp (NetPIPE), round $round|$n|$w|$lat|$peak|$at")
    np_walls+=("$w"); np_lats+=("$lat"); np_peaks+=("$peak")
    sizes=$(awk '{print $1}' "$tmp/np.out" | paste -sd, -)
    echo "round $round/$RUNS: nicbench sweep over NPtcp's $n sizes ..." >&2
    run_nicbench "$tmp/nb.csv" --sizes "$sizes"
    w=$wall
    read -r n lat peak at < <(nb_figures "$tmp/nb.csv")
    rows+=("nicbench, NPtcp's sizes, round $round|$n|$w|$lat|$peak|$at")
    nb_walls+=("$w"); nb_lats+=("$lat"); nb_peaks+=("$peak")
done
echo "nicbench sweep: default size list up to $MAX B ..." >&2
run_nicbench "$tmp/nb-default.csv" --max "$MAX"
w=$wall
read -r n lat peak at < <(nb_figures "$tmp/nb-default.csv")
rows+=("nicbench, default sizes|$n|$w|$lat|$peak|$at")

median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

gbit() { printf '%.2f' "$(echo "$1 / 1000000000" | bc -l)"; }
ratio() { printf '%.3f' "$(echo "$1 / $2" | bc -l)"; }

printf '\n%-36s %7s %9s %15s %12s %10s\n' "loopback, 1 B .. $MAX B" "points" "wall s" "1 B latency us" "peak Gbit/s" "peak at B"
for row in "${rows[@]}"; do
    IFS='|' read -r label n w lat peak at <<<"$row"
    printf '%-36s %7d %9.1f %15.2f %12s %10d\n' "$label" "$n" "$w" "$lat" "$(gbit "$peak")" "$at"
done
echo
echo "ratios nicbench (NPtcp's sizes) / NPtcp, medians over $RUNS round(s):"
echo "  wall time    $(ratio "$(median "${nb_walls[@]}")" "$(median "${np_walls[@]}")")   (goal: <= 0.5)"
echo "  1 B latency  $(ratio "$(median "${nb_lats[@]}")" "$(median "${np_lats[@]}")")   (goal: 0.9 .. 1.1)"
echo "  peak         $(ratio "$(median "${nb_peaks[@]}")" "$(median "${np_peaks[@]}")")   (goal: 0.9 .. 1.1)"
echo "(nicbench --point-time $POINT_TIME; $(nproc) cores shared by client, agent and everything else)"
