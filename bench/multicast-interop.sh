#!/usr/bin/env bash
# nicbench and iperf 2 on one group, receiving the same datagrams (issue 69, interop):
# how their counts agree, and which receiver keeps up, both ways.
#
#   bench/multicast-interop.sh [ROUNDS] [SECONDS]    (defaults: 3 rounds, 3 s per test)
#   NICBENCH=/tmp/nicbench bench/multicast-interop.sh 3 3
#
# Builds a lab of its own (`mci-PID`: hosts a, b and c on one switch) and per round, for
# 64 B and 1400 B datagrams, sends as fast as the sender can:
#   nb-sender   a: `nicbench multicast b --with-iperf2 receivers -b max -l SIZE -t SECONDS`
#               (a 1 s warm-up first); b: a nicbench agent; c: `iperf -s -u -B GROUP%eth0 -y C`
#   ip2-sender  c: `iperf -c GROUP -u -T 1 -b 100G -l SIZE -t SECONDS -B c`; b: a nicbench agent
#               (driven from a with --with-iperf2 sender -O 0); a: `iperf -s -u -B GROUP%eth0`
# What each line shows:
#   count       the sender's count and how each receiver accounted for it: nicbench's agent
#               received + lost against the sender's count (ours, or iperf 2's numbering
#               from its first datagram); iperf 2's total less its closing datagram
#   rx/s        datagrams per second each receiver took (nicbench: received over its
#               receiver's seconds; iperf 2: total less lost over its interval)
#   loss%       each receiver's loss
# The receivers get the same datagrams on the same switch, so their rx/s and loss compare
# the receivers alone. Nothing is asserted.
#
# Needs root, iproute2, iperf (iperf 2) and python3. The traffic stays in the lab, which
# is removed on any exit.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib/lab-iperf2.sh
. bench/lib/lab-iperf2.sh
bench_args bench/multicast-interop.sh 3 "$@"
need_lab_and_iperf2 ip python3 stdbuf
nicbench_binary
LAB=mci-$$
WORK=$(mktemp -d)
PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  "$NICBENCH" lab down "$LAB" >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT
"$NICBENCH" lab up "$LAB" --switch --hosts 3 >/dev/null
ns() { echo "nicbench-$LAB-$1"; }
AGENT_PORT=$("$NICBENCH" lab status "$LAB" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["lab"]["agent_port"])')

# iperf_server HOST GROUP: starts `iperf -s` in HOST, line-buffered into $WORK/srv.csv.
iperf_server() {
  ip netns exec "$(ns "$1")" timeout $((SECONDS_PER_TEST + 12)) \
    stdbuf -oL iperf -s -u -B "$2%eth0" -y C >"$WORK/srv.csv" 2>/dev/null &
  SERVER=$!
  for _ in $(seq 100); do
    ip netns exec "$(ns "$1")" ip maddr show dev eth0 | grep -q "$2" && return
    sleep 0.05
  done
  echo "iperf -s never joined $2 in $1" >&2
  exit 1
}

# report WHO SIZE JSON [IPERF_SENT]: one line per receiver.
report() {
  sleep 1
  kill "$SERVER" 2>/dev/null || true
  wait "$SERVER" 2>/dev/null || true
  python3 - "$@" "$WORK/srv.csv" <<'EOF'
import json, sys
who, size, doc_path, rest = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
csv_path = rest[-1]
iperf_sent = int(rest[0]) if len(rest) > 1 else None
doc = json.load(open(doc_path))
r = doc["receivers"][0]["result"]
udp, seconds = r["sum"]["udp"], r["streams"][0]["receiver"]["seconds"]
if iperf_sent is None:
    s = r["streams"][0]["sender"]["udp"]
    sent = s["datagrams"] + s["warmup_datagrams"]
    sender = f"nicbench sent {sent} ({s['datagrams']} after the warm-up)"
else:
    sent = iperf_sent - 2
    sender = f"iperf 2 numbered {sent} ('Sent {iperf_sent}')"
nb = f"nicbench agent: {udp['received_datagrams'] + udp['lost_datagrams']} of {udp['sent_datagrams']} accounted, " \
     f"{udp['received_datagrams'] / seconds:.0f} rx/s, loss {udp['loss_percent']:.3f}%"
lines = [l.split(",") for l in open(csv_path) if l.count(",") >= 13]
if lines:
    f = lines[-1]
    start, end = (float(x) for x in f[6].split("-"))
    lost, total = int(f[10]), int(f[11])
    ip = f"iperf 2 server: total {total - 1} (+1 closing), {(total - lost) / (end - start):.0f} rx/s, " \
         f"loss {100.0 * lost / total:.3f}%"
else:
    ip = "iperf 2 server: no report"
print(f"{who:<10} {size:>5} B  {sender}; {nb}; {ip}")
EOF
}

echo "bench/multicast-interop.sh: $ROUNDS rounds, $SECONDS_PER_TEST s per test, $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "nicbench: $("$NICBENCH" --version)  iperf: $IPERF_VERSION"
n=0
for round in $(seq 1 "$ROUNDS"); do
  for size in 64 1400; do
    n=$((n + 1))
    group=239.78.$((n / 250)).$((n % 250 + 1))
    iperf_server c "$group"
    ip netns exec "$(ns a)" "$NICBENCH" multicast 10.200.0.2 -p "$AGENT_PORT" -g "$group" --with-iperf2 receivers \
      -b max -l "$size" -t "$SECONDS_PER_TEST" --no-save --json >"$WORK/nb.json" 2>"$WORK/nb.err"
    report nb-sender "$size" "$WORK/nb.json"

    n=$((n + 1))
    group=239.78.$((n / 250)).$((n % 250 + 1))
    iperf_server a "$group"
    ip netns exec "$(ns a)" "$NICBENCH" multicast 10.200.0.2 -p "$AGENT_PORT" -g "$group" --with-iperf2 sender \
      -O 0 --join-wait 10s -t $((SECONDS_PER_TEST + 3)) --no-save --json >"$WORK/nb.json" 2>"$WORK/nb.err" &
    client=$!
    for _ in $(seq 100); do
      ip netns exec "$(ns b)" ip maddr show dev eth0 | grep -q "$group" && break
      sleep 0.05
    done
    said=$(ip netns exec "$(ns c)" iperf -c "$group" -u -T 1 -b 100G -l "$size" -t "$SECONDS_PER_TEST" -B 10.200.0.3 2>&1)
    wait "$client"
    sent=$(sed -n 's/.*Sent \([0-9]*\) datagrams.*/\1/p' <<<"$said" | head -1)
    report ip2-sender "$size" "$WORK/nb.json" "$sent"
  done
done
