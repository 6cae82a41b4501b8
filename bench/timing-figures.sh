#!/usr/bin/env bash
# The timing figures the test suite no longer asserts (issue 21: tests
# assert counts and bounds a loaded machine cannot break; how near a rate
# the tool gets is measured here, on a quiet machine, and written down in
# docs/BENCHMARKS.md):
#   - udp -b 100M on loopback: sender and receiver rate against the offer;
#   - sweep on loopback: bandwidth gain 1 B -> 64 B -> 64 KiB -> 1 MiB
#     (latency-bound small sizes, bandwidth-bound large ones);
#   - (as root, with iproute2) tcp and udp through a 100 Mbit/s tbf router
#     in a lab: goodput, and udp loss at an offer of 200 Mbit/s.
#
#   bench/timing-figures.sh [ROUNDS]     (default 3)
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-3}
cargo build --release --quiet
NB=./target/release/nicbench
log=$(mktemp /tmp/nicbench-timing.XXXXXX)
"$NB" serve -B 127.0.0.1 -p 0 -v 2>"$log" &
agent=$!
trap 'kill "$agent" 2>/dev/null || true; wait "$agent" 2>/dev/null || true; rm -f "$log"' EXIT
port=
for _ in $(seq 100); do
    port=$(sed -n 's/.*listening on 127\.0\.0\.1:\([0-9]*\).*/\1/p' "$log" | head -1)
    [ -n "$port" ] && break
    sleep 0.1
done
[ -n "$port" ] || { echo "the agent did not start:" >&2; cat "$log" >&2; exit 1; }

# Reads one result document on stdin and prints the figures of interest.
figures() {
    python3 -c '
import json, sys
kind, label = sys.argv[1], sys.argv[2]
d = json.load(sys.stdin)
if kind == "udp":
    s = d["sum"]["udp"]
    snd, rcv, loss = s["sender_bits_per_second"] / 1e6, s["receiver_bits_per_second"] / 1e6, s["loss_percent"]
    print(f"{label}: sender {snd:.2f} Mbit/s, receiver {rcv:.2f} Mbit/s, loss {loss:.3f}%")
elif kind == "tcp":
    goodput = d["sum"]["receiver"]["bits_per_second"] / 1e6
    print(f"{label}: goodput {goodput:.1f} Mbit/s")
else:
    sw = d["streams"][0]["sender"]["sweep"]
    b = {p["size_bytes"]: p["best_bits_per_second"] for p in sw["points"]}
    small, mid, large = b[64] / b[1], b[65536] / b[64], b[1 << 20] / b[65536]
    peak = sw["summary"]["peak_bits_per_second"] / 1e9
    print(f"{label}: gain 1->64 B x{small:.1f}, 64 B->64 KiB x{mid:.1f}, 64 KiB->1 MiB x{large:.2f}; peak {peak:.2f} Gbit/s")
' "$1" "$2"
}

for round in $(seq "$ROUNDS"); do
    "$NB" udp 127.0.0.1 -p "$port" -t 2 -b 100M -w 4M --json | figures udp "udp -b 100M on loopback, round $round"
done
for round in $(seq "$ROUNDS"); do
    "$NB" sweep 127.0.0.1 -p "$port" --max 1M --point-time 10ms --json 2>/dev/null \
        | figures sweep "sweep on loopback, round $round"
done

if [ "$(id -u)" = 0 ] && command -v ip >/dev/null && command -v tc >/dev/null; then
    "$NB" lab up nbtiming --via-router --rate 100M >/dev/null
    trap 'kill "$agent" 2>/dev/null || true; "$NB" lab down nbtiming >/dev/null 2>&1 || true; rm -f "$log"' EXIT
    for round in $(seq "$ROUNDS"); do
        "$NB" lab exec nbtiming a -- "$NB" tcp b -t 3 -O 1 --json \
            | figures tcp "lab 100 Mbit/s router, tcp, round $round"
        "$NB" lab exec nbtiming a -- "$NB" udp b -t 3 -b 200M -l 1400 --json \
            | figures udp "lab 100 Mbit/s router, udp -b 200M, round $round"
    done
fi
