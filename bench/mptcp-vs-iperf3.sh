#!/usr/bin/env bash
# One Multipath TCP stream over 2, 3 and 4 lab links: nicbench `tcp --mptcp` against
# iperf3's `-m` (3.19+) on the same links, alternating in one run (issue 45).
#
#   bench/mptcp-vs-iperf3.sh [ROUNDS] [SECONDS] [LINKS...]   (defaults: 3 rounds, 5 s, 2 3 4)
#   IPERF3_SRC=/work/.mirror/esnet+iperf/... bench/mptcp-vs-iperf3.sh 5 5 2 3 4
#   RATE=200mbit bench/mptcp-vs-iperf3.sh 3 5 2
#   ROUTER=0 bench/mptcp-vs-iperf3.sh        (the tbf on the hosts' own interfaces)
#
# For each link count N it builds a lab of its own (hosts a and b each joined by N links
# to a router namespace, whose egress on each link is shaped by a tbf to RATE, default
# 100mbit; `--mptcp`: b announces its addresses on links 2..N, both hosts allow extra
# subflows). The bottleneck sits in the router, as on a real path: a tbf on the sender's
# own interface drops inside the sender's stack (MPTCP's subflows overrun it; 92% of the
# sum for 3 and 4 links, nicbench and iperf3 alike), which ROUTER=0 measures. It starts
# `iperf3 -s` in b
# beside the lab's nicbench agent, and from a runs, in turn each round, `-t SECONDS -O 1`:
#   nicbench tcp b --mptcp        (its agent in b)
#   iperf3 -c b -m                (iperf3 -s in b)
# Figure: the receiver's rate (nicbench's sum.receiver, iperf3's sum_received), against
# the links' summed goodput (N x RATE at a tbf's 1514 B per 1448 B of payload). Printed
# per round, then per N the medians, their spread, the ratio nicbench / iperf3, and
# nicbench's consistency: its receiver's subflows' bytes_received summed against the
# connection's MPTCP-level bytes_received (the kernel's own two counts of one stream;
# more than 100% by what the sender reinjected), and every subflow present (one per link).
#
# Upstream iperf3 is built when asked (IPERF3_SRC, see bench/lib/iperf3.sh), never
# committed; Debian 12's iperf3 (3.12) has no -m. Needs root, iproute2, python3, a kernel
# with MPTCP. The labs (`mpb-PID-N`) are removed on any exit, also on failure or Ctrl-C.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-3}
SECONDS_PER_TEST=${2:-5}
shift $(( $# > 2 ? 2 : $# ))
LINKS=("$@")
[ ${#LINKS[@]} -gt 0 ] || LINKS=(2 3 4)
RATE=${RATE:-100mbit}
ROUTER=${ROUTER:-1}
[[ $ROUTER =~ ^[01]$ ]] || { echo "ROUTER is 1 (a router between the hosts) or 0, not '$ROUTER'" >&2; exit 2; }
if ! [[ $ROUNDS =~ ^[1-9][0-9]{0,2}$ ]]; then
  echo "usage: bench/mptcp-vs-iperf3.sh [ROUNDS] [SECONDS] [LINKS...]  (ROUNDS: 1 to 999, not '$ROUNDS')" >&2
  exit 2
fi
if ! [[ $SECONDS_PER_TEST =~ ^[1-9][0-9]?$ ]]; then
  echo "SECONDS must be 1 to 99, not '$SECONDS_PER_TEST'" >&2
  exit 2
fi
for n in "${LINKS[@]}"; do
  [[ $n =~ ^[2-8]$ ]] || { echo "a link count is 2 to 8, not '$n'" >&2; exit 2; }
done
[[ $RATE =~ ^[1-9][0-9]*(kbit|mbit|gbit)$ ]] || { echo "RATE is like 100mbit, not '$RATE'" >&2; exit 2; }
# shellcheck source=bench/lib/iperf3.sh
. bench/lib/iperf3.sh
for tool in ip tc python3 "$IPERF3"; do
  command -v "$tool" >/dev/null || { echo "missing $tool: apt-get install ${tool/tc/iproute2}" >&2; exit 1; }
done
# The help text is read whole first: `grep -q` on a pipe stops reading at the first
# match, and under pipefail the writer's SIGPIPE would read as "no -m".
help=$("$IPERF3" --help 2>&1 || true)
if ! grep -q -- '--mptcp' <<<"$help"; then
  echo "$IPERF3 ($("$IPERF3" --version | head -1)) has no -m/--mptcp (3.19+):" \
       "give IPERF3_SRC=DIR to build the latest release (bench/lib/iperf3.sh)" >&2
  exit 1
fi
cargo build --release --quiet
NICBENCH=$PWD/target/release/nicbench
LABS=()
SERVERS=()
cleanup() {
  for pid in "${SERVERS[@]}"; do kill "$pid" 2>/dev/null || true; done
  for lab in "${LABS[@]}"; do "$NICBENCH" lab down "$lab" >/dev/null 2>&1 || true; done
}
trap cleanup EXIT INT TERM

declare -a RESULTS=()
for n in "${LINKS[@]}"; do
  lab=mpb-$$-$n
  LABS+=("$lab")
  up=(--links "$n" --mptcp --rate "$RATE")
  where="on the hosts' interfaces"
  if [ "$ROUTER" = 1 ]; then up+=(--via-router); where="on the router's egress"; fi
  echo "lab $lab: $n links of $RATE $where, MPTCP path manager set" >&2
  "$NICBENCH" lab up "$lab" "${up[@]}" >/dev/null
  ns_b=nicbench-$lab-b
  b=$(ip -n "$ns_b" -4 -o addr show dev eth0 | awk '{print $4}' | cut -d/ -f1)
  ip netns exec "$ns_b" "$IPERF3" -s -B 0.0.0.0 -p 5201 >/dev/null 2>&1 &
  SERVERS+=($!)
  sleep 0.5
  RESULTS+=("$n $lab $b")
done

python3 - "$ROUNDS" "$SECONDS_PER_TEST" "$RATE" "$NICBENCH" "$IPERF3" "${RESULTS[@]}" <<'PY'
import json, statistics, subprocess, sys

rounds, secs, rate_text, nicbench, iperf3 = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5]
labs = [item.split() for item in sys.argv[6:]]
unit = {"kbit": 1e3, "mbit": 1e6, "gbit": 1e9}
rate = next(float(rate_text[: -len(u)]) * m for u, m in unit.items() if rate_text.endswith(u))
# A tbf counts the frame without FCS, preamble or gap: 1514 B per 1448 B of TCP payload
# (MTU 1500, timestamps), the model nicbench's verdict uses.
goodput_per_link = rate * 1448 / 1514

def run_in_a(lab, args):
    out = subprocess.run([nicbench, "lab", "exec", lab, "a", "--", *args], capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed in {lab}:\n{out.stderr}")
    return json.loads(out.stdout)

def nicbench_once(lab, b):
    r = run_in_a(lab, [nicbench, "tcp", b, "--mptcp", "-t", secs, "-O", "1", "--json", "--no-save"])
    end = r["streams"][0]["receiver"]["mptcp"]
    subflows = end["subflows"]
    total = end.get("bytes_received") or 0
    summed = sum(s.get("bytes_received") or 0 for s in subflows)
    return r["sum"]["receiver"]["bits_per_second"], summed / total * 100 if total else float("nan"), len(subflows), r["verdict"]["kind"]

def iperf3_once(lab, b):
    r = run_in_a(lab, [iperf3, "-c", b, "-m", "-t", secs, "-O", "1", "-J"])
    return r["end"]["sum_received"]["bits_per_second"]

def spread(xs):
    med = statistics.median(xs)
    return f"{min(xs) / 1e6:.2f}-{max(xs) / 1e6:.2f} ({(max(xs) - min(xs)) / med * 100:.1f}%)"

print(f"one MPTCP stream, {secs} s (-O 1) per test, links of {rate_text}, {rounds} rounds; Mbit/s at the receiver")
summary = []
for n, lab, b in labs:
    n = int(n)
    goodput = n * goodput_per_link
    ours, theirs, sums, counts, kinds = [], [], [], [], []
    for i in range(rounds):
        bps, summed, subflows, kind = nicbench_once(lab, b)
        ours.append(bps); sums.append(summed); counts.append(subflows); kinds.append(kind)
        theirs.append(iperf3_once(lab, b))
        print(f"  {n} links, round {i + 1}: nicbench {bps / 1e6:8.2f} ({subflows} subflows, subflow bytes "
              f"{summed:.2f}% of the connection's, verdict {kind})   iperf3 -m {theirs[-1] / 1e6:8.2f}", flush=True)
    mo, mt = statistics.median(ours), statistics.median(theirs)
    summary.append((n, goodput, mo, mt, ours, theirs, sums, counts, kinds))

print()
print("links  goodput sum  nicbench median (spread)         iperf3 -m median (spread)        nicbench/iperf3  "
      "nicbench % of sum  subflow bytes / connection  subflows")
for n, goodput, mo, mt, ours, theirs, sums, counts, kinds in summary:
    print(f"{n:5d}  {goodput / 1e6:8.2f}     {mo / 1e6:8.2f}  {spread(ours):24s} {mt / 1e6:8.2f}  {spread(theirs):24s} "
          f"{mo / mt:6.3f}           {mo / goodput * 100:5.1f}%            "
          f"{min(sums):.2f}-{max(sums):.2f}%                 {min(counts)}-{max(counts)} of {n}")
PY
