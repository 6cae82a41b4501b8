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

for round in $(seq "$ROUNDS"); do
    "$NB" udp 127.0.0.1 -p "$port" -t 2 -b 100M -w 4M --json | python3 -c '
import json, sys
s = json.load(sys.stdin)["sum"]["udp"]
print(f"udp -b 100M, round '"$round"': sender {s[\"sender_bits_per_second\"]/1e6:.2f} Mbit/s, "
      f"receiver {s[\"receiver_bits_per_second\"]/1e6:.2f} Mbit/s, loss {s[\"loss_percent\"]:.3f}%")'
done
for round in $(seq "$ROUNDS"); do
    "$NB" sweep 127.0.0.1 -p "$port" --max 1M --point-time 10ms --json 2>/dev/null | python3 -c '
import json, sys
sw = json.load(sys.stdin)["streams"][0]["sender"]["sweep"]
b = {p["size_bytes"]: p["best_bits_per_second"] for p in sw["points"]}
print(f"sweep, round '"$round"': gain 1->64 B x{b[64]/b[1]:.1f}, 64 B->64 KiB x{b[65536]/b[64]:.1f}, "
      f"64 KiB->1 MiB x{b[1<<20]/b[65536]:.2f}; peak {sw[\"summary\"][\"peak_bits_per_second\"]/1e9:.2f} Gbit/s")'
done

if [ "$(id -u)" = 0 ] && command -v ip >/dev/null && command -v tc >/dev/null; then
    "$NB" lab up nbtiming --via-router --rate 100M >/dev/null
    trap 'kill "$agent" 2>/dev/null || true; "$NB" lab down nbtiming >/dev/null 2>&1 || true; rm -f "$log"' EXIT
    for round in $(seq "$ROUNDS"); do
        tcp=$("$NB" lab exec nbtiming a -- "$NB" tcp b -t 3 -O 1 --json | python3 -c '
import json, sys; print(f"{json.load(sys.stdin)[\"sum\"][\"receiver\"][\"bits_per_second\"]/1e6:.1f}")')
        udp=$("$NB" lab exec nbtiming a -- "$NB" udp b -t 3 -b 200M -l 1400 --json | python3 -c '
import json, sys
s = json.load(sys.stdin)["sum"]["udp"]
print(f"sent {s[\"sender_bits_per_second\"]/1e6:.1f}, received {s[\"receiver_bits_per_second\"]/1e6:.1f} Mbit/s, loss {s[\"loss_percent\"]:.1f}%")')
        echo "lab 100 Mbit/s router, round $round: tcp ${tcp} Mbit/s; udp -b 200M: ${udp}"
    done
fi
