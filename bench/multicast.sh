#!/usr/bin/env bash
# nicbench multicast against iperf 2's multicast, alternating (issue 69): one sender,
# two receivers, each tool with its own sender and receivers, as fast as the sender can.
#
#   bench/multicast.sh [ROUNDS] [SECONDS]     (defaults: 3 rounds, 3 s per test)
#   NICBENCH=/tmp/nicbench bench/multicast.sh 3 3
#
# Builds a lab of its own (`mcb-PID`: hosts a, b and c on one switch, a Linux bridge with
# IGMP snooping) and per round runs, for 64 B and 1400 B datagrams:
#   loopback   sender and both receivers in host b, on its loopback (two nicbench agents
#              on 127.0.0.1; two iperf 2 servers joined on lo)
#   switch     a sends, b and c receive through the bridge
# each tool in turn, the order reversed every other round:
#   nicbench   `nicbench multicast R1 R2 -g GROUP -b max -l SIZE -t SECONDS` (a 1 s warm-up
#              before the SECONDS, not counted)
#   iperf2     `iperf -s -u -B GROUP%IFACE -y C` on each receiver, then
#              `iperf -c GROUP -u -T 1 -b 100G -l SIZE -t SECONDS -B SOURCE` (as fast as it
#              can; -B picks the interface the group leaves by)
# What each figure is:
#   rx/s       datagrams per second the slower of the two receivers took: nicbench's
#              received_datagrams over its receiver's seconds; iperf 2's total less lost
#              over its interval (its server's CSV line)
#   loss       that receiver's loss: nicbench's the sender's count less the receiver's;
#              iperf 2's from the gaps in its sequence numbers (lost / total)
# Prints each round's figures, then per case the median over the rounds with its spread
# ([min, max]) and the ratio nicbench / iperf 2 of the slower receiver's rx/s.
# Nothing is asserted.
#
# Needs root, iproute2, iperf (iperf 2: apt-get install iperf) and python3. The traffic
# stays in the lab, which is removed on any exit.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib/lab-iperf2.sh
. bench/lib/lab-iperf2.sh
bench_args bench/multicast.sh 3 "$@"
need_lab_and_iperf2 ip python3
nicbench_binary
LAB=mcb-$$
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
# Two agents on b's loopback for the loopback case.
for port in 5411 5412; do
  ip netns exec "$(ns b)" "$NICBENCH" serve -p "$port" -B 127.0.0.1 >/dev/null 2>&1 &
  PIDS+=($!)
done
sleep 1
AGENT_PORT=$("$NICBENCH" lab status "$LAB" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["lab"]["agent_port"])')

# nicbench CASE SIZE GROUP: the slower receiver's "rx_per_s loss_percent".
run_nicbench() {
  local where=$1 size=$2 group=$3 out=$WORK/nb.json
  if [ "$where" = loopback ]; then
    ip netns exec "$(ns b)" "$NICBENCH" multicast 127.0.0.1:5411 127.0.0.1:5412 -g "$group" -b max -l "$size" \
      -t "$SECONDS_PER_TEST" --json >"$out" 2>"$WORK/nb.err"
  else
    ip netns exec "$(ns a)" "$NICBENCH" multicast 10.200.0.2 10.200.0.3 -p "$AGENT_PORT" -g "$group" -b max \
      -l "$size" -t "$SECONDS_PER_TEST" --json >"$out" 2>"$WORK/nb.err"
  fi
  python3 - "$out" <<'EOF'
import json, sys
doc = json.load(open(sys.argv[1]))
rows = []
for r in doc["receivers"]:
    t = r["result"]
    udp, seconds = t["sum"]["udp"], t["streams"][0]["receiver"]["seconds"]
    rows.append((udp["received_datagrams"] / seconds if seconds else 0.0, udp["loss_percent"]))
rx, loss = min(rows)
print(f"{rx:.0f} {loss:.3f}")
EOF
}

# iperf 2 CASE SIZE GROUP: the slower receiver's "rx_per_s loss_percent".
run_iperf2() {
  local where=$1 size=$2 group=$3 sender receivers source iface
  if [ "$where" = loopback ]; then
    sender=b receivers="b b" source=127.0.0.1 iface=lo
  else
    sender=a receivers="b c" source=10.200.0.1 iface=eth0
  fi
  local k=0 servers=()
  for host in $receivers; do
    k=$((k + 1))
    ip netns exec "$(ns "$host")" timeout $((SECONDS_PER_TEST + 6)) \
      iperf -s -u -B "$group%$iface" -y C >"$WORK/srv$k.csv" 2>/dev/null &
    servers+=($!)
  done
  sleep 1
  ip netns exec "$(ns "$sender")" iperf -c "$group" -u -T 1 -b 100G -l "$size" -t "$SECONDS_PER_TEST" \
    -B "$source" -y C >/dev/null 2>&1 || true
  sleep 2
  for pid in "${servers[@]}"; do kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done
  python3 - "$WORK"/srv1.csv "$WORK"/srv2.csv <<'EOF'
import sys
rows = []
for path in sys.argv[1:]:
    lines = [l.split(",") for l in open(path) if l.count(",") >= 13]
    if not lines:
        rows.append((0.0, 100.0))
        continue
    f = lines[-1]
    start, end = (float(x) for x in f[6].split("-"))
    lost, total = int(f[10]), int(f[11])
    rows.append(((total - lost) / (end - start) if end > start else 0.0, 100.0 * lost / total if total else 100.0))
rx, loss = min(rows)
print(f"{rx:.0f} {loss:.3f}")
EOF
}

echo "bench/multicast.sh: $ROUNDS rounds, $SECONDS_PER_TEST s per test, $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "nicbench: $("$NICBENCH" --version)  iperf: $IPERF_VERSION"
printf '%-6s %-9s %5s %-9s %12s %8s\n' round case size tool rx/s loss%
n=0
for round in $(seq 1 "$ROUNDS"); do
  for where in loopback switch; do
    for size in 64 1400; do
      tools="nicbench iperf2"
      [ $((round % 2)) = 0 ] && tools="iperf2 nicbench"
      for tool in $tools; do
        n=$((n + 1))
        group=239.77.$((n / 250)).$((n % 250 + 1))
        if [ "$tool" = nicbench ]; then read -r rx loss < <(run_nicbench "$where" "$size" "$group")
        else read -r rx loss < <(run_iperf2 "$where" "$size" "$group"); fi
        printf '%-6s %-9s %5s %-9s %12s %8s\n' "$round" "$where" "$size" "$tool" "$rx" "$loss"
        echo "$where $size $tool $rx $loss" >>"$WORK/figures"
      done
    done
  done
done
echo
python3 - "$WORK/figures" <<'EOF'
import statistics, sys
figures = {}
for line in open(sys.argv[1]):
    where, size, tool, rx, loss = line.split()
    figures.setdefault((where, int(size)), {}).setdefault(tool, []).append((float(rx), float(loss)))
print(f"{'case':<9} {'size':>5}  {'nicbench rx/s [min, max]':>32}  {'loss%':>6}  {'iperf 2 rx/s [min, max]':>32}  {'loss%':>6}  {'ratio':>6}")
for (where, size), tools in sorted(figures.items()):
    cells = []
    for tool in ("nicbench", "iperf2"):
        rx = [r for r, _ in tools[tool]]
        loss = [l for _, l in tools[tool]]
        cells.append((statistics.median(rx), min(rx), max(rx), statistics.median(loss)))
    (nb, nbmin, nbmax, nbloss), (ip, ipmin, ipmax, iploss) = cells
    ratio = nb / ip if ip else float("inf")
    print(f"{where:<9} {size:>5}  {nb:>12.0f} [{nbmin:.0f}, {nbmax:.0f}]  {nbloss:>6.2f}  {ip:>12.0f} [{ipmin:.0f}, {ipmax:.0f}]  {iploss:>6.2f}  {ratio:>5.2f}x")
EOF
