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
#
# Goal (issue 5): latency and peak within 10% of NPtcp's, in at most half
# of NPtcp's wall time. This is a benchmark, not a test: run it on a quiet
# machine; client and agent share the CPU on loopback.
set -euo pipefail

cd "$(dirname "$0")/.."
MAX_ARG=${1:-8M}
POINT_TIME=${POINT_TIME:-100ms}
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
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    rm -rf "$tmp"
}
trap cleanup EXIT

now() { date +%s.%N; }

# NPtcp: a receiver process, then the transmitter; np.out has
# "size  Mbps(2^20 bit/s)  one-way-seconds" per point.
np_port=$(( 20000 + RANDOM % 20000 ))
(cd "$tmp" && exec NPtcp -P "$np_port" >"$tmp/np-receiver.log" 2>&1) &
pids+=($!)
sleep 0.5
echo "NPtcp: 1 B .. $MAX B on loopback ..." >&2
t0=$(now)
(cd "$tmp" && NPtcp -h 127.0.0.1 -P "$np_port" -u "$MAX" -o "$tmp/np.out" >"$tmp/np.log" 2>&1)
t1=$(now)
np_wall=$(echo "$t1 - $t0" | bc -l)

"$NICBENCH" serve -p 0 -B 127.0.0.1 2>"$tmp/agent.log" &
pids+=($!)
for _ in $(seq 50); do
    grep -q "listening on" "$tmp/agent.log" && break
    sleep 0.1
done
nb_port=$(sed -n 's/.*listening on .*:\([0-9]*\)$/\1/p' "$tmp/agent.log")

sizes=$(awk '{print $1}' "$tmp/np.out" | paste -sd, -)
echo "nicbench sweep: NPtcp's $(wc -l <"$tmp/np.out") sizes, --point-time $POINT_TIME ..." >&2
t0=$(now)
"$NICBENCH" sweep 127.0.0.1 -p "$nb_port" --sizes "$sizes" --point-time "$POINT_TIME" --csv \
    >"$tmp/nb.csv" 2>"$tmp/nb.log"
t1=$(now)
nb_wall=$(echo "$t1 - $t0" | bc -l)

echo "nicbench sweep: default size list up to $MAX B ..." >&2
t0=$(now)
"$NICBENCH" sweep 127.0.0.1 -p "$nb_port" --max "$MAX" --point-time "$POINT_TIME" --csv \
    >"$tmp/nb-default.csv" 2>"$tmp/nb-default.log"
t1=$(now)
nbd_wall=$(echo "$t1 - $t0" | bc -l)

# Figures: latency = one-way time of the smallest size in us; peak from
# size and time (NPtcp's "Mbps" column is 2^20 bit/s, so it is not used).
read -r np_points np_lat np_peak np_peak_size < <(awk '
    NR == 1 { lat = $3 * 1e6 }
    { bps = $1 * 8 / $3; if (bps > peak) { peak = bps; at = $1 } }
    END { printf "%d %.2f %.0f %d\n", NR, lat, peak, at }' "$tmp/np.out")
nb_figures() {
    awk -F, 'NR == 2 { lat = $2 }
        NR > 1 { bps = $3 * 1e6; if (bps > peak) { peak = bps; at = $1 } n++ }
        END { printf "%d %.2f %.0f %d\n", n, lat, peak, at }' "$1"
}
read -r nb_points nb_lat nb_peak nb_peak_size < <(nb_figures "$tmp/nb.csv")
read -r nbd_points nbd_lat nbd_peak nbd_peak_size < <(nb_figures "$tmp/nb-default.csv")

gbit() { echo "scale=2; $1 / 1000000000" | bc -l; }
ratio() { echo "scale=3; $1 / $2" | bc -l; }

printf '\n%-34s %8s %10s %14s %12s %12s\n' "loopback, 1 B .. $MAX B" "points" "wall s" "1 B latency us" "peak Gbit/s" "peak at B"
printf '%-34s %8d %10.1f %14.2f %12s %12d\n' "NPtcp (NetPIPE)" "$np_points" "$np_wall" "$np_lat" "$(gbit "$np_peak")" "$np_peak_size"
printf '%-34s %8d %10.1f %14.2f %12s %12d\n' "nicbench sweep, NPtcp's sizes" "$nb_points" "$nb_wall" "$nb_lat" "$(gbit "$nb_peak")" "$nb_peak_size"
printf '%-34s %8d %10.1f %14.2f %12s %12d\n' "nicbench sweep, default sizes" "$nbd_points" "$nbd_wall" "$nbd_lat" "$(gbit "$nbd_peak")" "$nbd_peak_size"
echo
echo "ratios nicbench (NPtcp's sizes) / NPtcp:"
echo "  wall time    $(ratio "$nb_wall" "$np_wall")   (goal: <= 0.5)"
echo "  1 B latency  $(ratio "$nb_lat" "$np_lat")   (goal: 0.9 .. 1.1)"
echo "  peak         $(ratio "$nb_peak" "$np_peak")   (goal: 0.9 .. 1.1)"
echo "(nicbench --point-time $POINT_TIME; $(nproc) cores shared by client, agent and everything else)"
