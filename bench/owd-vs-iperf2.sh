#!/usr/bin/env bash
# nicbench udp's one-way delay against iperf 2's --trip-times on the same lab path,
# alternating (issue 70).
#
#   bench/owd-vs-iperf2.sh [ROUNDS] [SECONDS]     (defaults: 3 rounds, 4 s per test)
#   NICBENCH=/tmp/nicbench bench/owd-vs-iperf2.sh 3 4
#
# Builds a lab of its own (hosts a and b through a router r; r's egress toward b shaped
# by a tbf to 100 Mbit/s with a 50 ms queue, toward a the default 16 ms), starts an
# iperf 2 UDP server in b and one in a, and per round runs four scenarios, 1400 B
# datagrams throughout:
#   a-b-150M   a->b at 150 Mbit/s into 100: the 50 ms queue is full (about 53.5 ms)
#   a-b-50M    a->b at 50 Mbit/s, below the rate: the queue stays empty (microseconds)
#   a-b-10M    the same at 10 Mbit/s, where nicbench sends one datagram per sendmmsg
#   b-a-150M   b->a at 150 Mbit/s through the 16 ms queue, full (about 19.6 ms with the
#              tbf's bucket; nicbench -R from a, iperf 2's client in b)
# each with three senders, in turn, the order reversed every other round:
#   nicbench        `nicbench udp b -b RATE -l 1400` from a. Its pacer sends about a
#                   millisecond's worth of datagrams per sendmmsg, all with one stamp.
#   iperf2          `iperf -c -u -b RATE -l 1400 -e --trip-times`: one datagram per write,
#                   each stamped, evenly spaced (75 us apart at 150 Mbit/s).
#   iperf2 bursts   the same with `--isochronous=1000:RATE,0`: a millisecond's worth of
#                   datagrams back to back 1000 times a second, as nicbench sends them.
# What each figure is:
#   nicbench p50    the median of the datagrams' one-way delays: the receiver's kernel
#                   arrival stamp (SO_TIMESTAMPNS) minus the sender's stamp, less the
#                   clocks' estimated offset (docs/CLOCKS.md). nicbench has no mean.
#   bound           +/- how far that offset may be off. On one kernel, as in this lab,
#                   nicbench knows the two clocks are one (equal boot ids): the offset is 0
#                   and so is the bound (docs/CLOCKS.md, "One kernel, one clock"); builds
#                   before 2026-12-07 used the estimate there too.
#   clock           what the offset added to nicbench's figures: 0 on one kernel; with an
#                   older build, the estimate's own error (the true offset is 0).
#   iperf2 median   iperf 2's server (the receiver; `iperf -s -u -e
#                   --histograms=1u,200000`) takes the kernel arrival stamp (SO_TIMESTAMP,
#                   1 us) minus the sender's gettimeofday stamp and trusts the clocks to
#                   agree (they are one clock here). It prints `Latency avg/min/max/stdev`
#                   in ms and a histogram of 1 us bins. The median comes from the
#                   histogram: the middle of the bin that holds it, to within 0.5 us. It is
#                   set against nicbench's p50, like with like.
#   iperf2 avg      iperf 2's mean, shown for reference only. At 150M the queue takes about
#                   0.1 s to fill, and the datagrams sent meanwhile have shorter delays, so
#                   the mean falls below the median.
# A full tail-drop queue treats evenly spaced datagrams differently from bursts. An
# evenly spaced datagram that gets in finds the queue all but full. A burst arrives after
# the queue has drained for a millisecond: its first datagrams get in and see that much
# less queue, and the rest are dropped. So on a full queue nicbench's median is a few hundred
# microseconds below plain iperf 2's, and the bursts row shows whether that gap is the
# sending pattern or the clocks. With the queue empty, every datagram of a nicbench batch
# (5 at 50 Mbit/s) carries the batch's one stamp, and the later ones wait in the call
# while the earlier ones are sent, so its delays are some tens of microseconds longer;
# at 10 Mbit/s, one datagram per call, that part is gone.
# Prints each round's figures per scenario, then per scenario the median over the rounds
# with its spread ([min, max] over the rounds), the ratio nicbench / iperf 2, and the
# difference, as printed and less nicbench's clock part, against nicbench's bound and both
# tools' spreads over the rounds.
# Nothing is asserted.
#
# Needs root, iproute2, iperf (iperf 2: apt-get install iperf) and python3. NICBENCH is
# the binary to run; if it is unset, a release build of this tree is made and run. The
# traffic stays in the lab (`owd-PID`), which is removed on any exit.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib/lab-iperf2.sh
. bench/lib/lab-iperf2.sh
bench_args bench/owd-vs-iperf2.sh 4 "$@"
need_lab_and_iperf2 ip tc ss python3
nicbench_binary
NB=$NICBENCH
LAB=owd-$$
IPERF_PORT=5599
WORK=$(mktemp -d /tmp/nicbench-owd-iperf2-XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  "$NB" lab down "$LAB" >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
"$NB" lab up "$LAB" --via-router --rate 100mbit --queue 2:b=50ms >"$WORK/lab-up.txt" 2>&1 \
  || { cat "$WORK/lab-up.txt" >&2; exit 1; }
"$NB" lab status "$LAB" --json >"$WORK/lab.json"
address_of() {
  python3 -c 'import json,sys; s=json.load(open(sys.argv[1]))["lab"]; print(next(e["address"] for l in s["links"] for e in l["ends"] if e["host"]==sys.argv[2]))' "$WORK/lab.json" "$1"
}
declare -A ADDRESS=([a]=$(address_of a) [b]=$(address_of b))

# An iperf 2 server in each host, with 1 us latency bins up to 200 ms. Wait for its
# socket, not a fixed time: a client that starts first gets no server report.
for host in a b; do
  "$NB" lab exec "$LAB" "$host" -- iperf -s -u -e -B "${ADDRESS[$host]}" -p "$IPERF_PORT" --histograms=1u,200000 \
    >"$WORK/iperf2-server-$host.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 100); do
    "$NB" lab exec "$LAB" "$host" -- ss -Huln "sport = :$IPERF_PORT" 2>/dev/null | grep -q . && break
    sleep 0.1
  done
  "$NB" lab exec "$LAB" "$host" -- ss -Huln "sport = :$IPERF_PORT" | grep -q . \
    || { echo "iperf 2 server in $host did not listen on ${ADDRESS[$host]}:$IPERF_PORT:" >&2; cat "$WORK/iperf2-server-$host.log" >&2; exit 1; }
done

# Per scenario: nicbench's options (it runs from a), iperf 2's client host (the server
# is in the other one) and rate (iperf 2's m is 10^6; its M would be 2^20).
SCENARIOS=(a-b-150M a-b-50M a-b-10M b-a-150M)
declare -A NB_ARGS=([a-b-150M]="-b 150M" [a-b-50M]="-b 50M" [a-b-10M]="-b 10M" [b-a-150M]="-b 150M -R")
declare -A IPERF_CLIENT=([a-b-150M]=a [a-b-50M]=a [a-b-10M]=a [b-a-150M]=b)
declare -A IPERF_RATE=([a-b-150M]=150m [a-b-50M]=50m [a-b-10M]=10m [b-a-150M]=150m)

run_nicbench() { # SCENARIO ROUND
  # shellcheck disable=SC2086 # NB_ARGS holds several options
  "$NB" lab exec "$LAB" a -- nicbench udp b -t "$SECONDS_PER_TEST" -l 1400 ${NB_ARGS[$1]} --no-save --json \
    >"$WORK/nicbench-$1-$2.json" 2>"$WORK/nicbench.err" \
    || { echo "nicbench udp ($1, round $2) failed:" >&2; cat "$WORK/nicbench.err" >&2; exit 1; }
}

# The server's final report for a test: its latency line, then the packets' histogram
# (T8(f)-PDF), a long line that is complete once its closing `obl/obu=N/N)` is there.
REPORT='T8\(f\)-PDF.*obl/obu=[0-9]+/[0-9]+\)'

run_iperf2() { # SENDER(iperf2|iperf2-bursts) SCENARIO ROUND
  local client=${IPERF_CLIENT[$2]} server log lines_before reports_before pacing
  server=$([ "$client" = a ] && echo b || echo a)
  log=$WORK/iperf2-server-$server.log
  pacing=(-b "${IPERF_RATE[$2]}")
  [ "$1" = iperf2-bursts ] && pacing=(--isochronous="1000:${IPERF_RATE[$2]},0")
  lines_before=$(wc -l <"$log")
  reports_before=$(grep -cE "$REPORT" "$log" || true)
  "$NB" lab exec "$LAB" "$client" -- iperf -c "${ADDRESS[$server]}" -p "$IPERF_PORT" -u "${pacing[@]}" \
    -t "$SECONDS_PER_TEST" -l 1400 -e --trip-times >"$WORK/$1-client-$2-$3.txt" 2>&1 \
    || { echo "iperf 2 client ($1, $2, round $3) failed:" >&2; cat "$WORK/$1-client-$2-$3.txt" >&2; exit 1; }
  for _ in $(seq 150); do
    [ "$(grep -cE "$REPORT" "$log" || true)" -gt "$reports_before" ] && break
    sleep 0.1
  done
  [ "$(grep -cE "$REPORT" "$log" || true)" -gt "$reports_before" ] \
    || { echo "iperf 2 server in $server wrote no report for $1, $2, round $3:" >&2; tail -5 "$log" | cut -c1-300 >&2; exit 1; }
  tail -n +"$((lines_before + 1))" "$log" >"$WORK/$1-$2-$3.txt"
}

run() { # SENDER SCENARIO ROUND
  if [ "$1" = nicbench ]; then run_nicbench "$2" "$3"; else run_iperf2 "$@"; fi
  sleep 0.3
}

SENDERS=(nicbench iperf2 iperf2-bursts)
for round in $(seq "$ROUNDS"); do
  order=("${SENDERS[@]}")
  [ $((round % 2)) = 0 ] && order=(iperf2-bursts iperf2 nicbench)
  for scenario in "${SCENARIOS[@]}"; do
    for sender in "${order[@]}"; do run "$sender" "$scenario" "$round"; done
  done
  echo "round $round/$ROUNDS done (first: ${order[0]})" >&2
done

python3 - "$WORK" "$ROUNDS" "$SECONDS_PER_TEST" "$IPERF_VERSION" "${SCENARIOS[@]}" <<'PY'
import json, os, re, statistics, sys

work, rounds, secs, iperf_version, scenarios = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5:]
TITLES = {
    "a-b-150M": "a->b, 150 Mbit/s into 100: the 50 ms queue full",
    "a-b-50M": "a->b, 50 Mbit/s: the queue empty",
    "a-b-10M": "a->b, 10 Mbit/s: the queue empty, nicbench one datagram per sendmmsg",
    "b-a-150M": "b->a, 150 Mbit/s into 100: the 16 ms queue full (nicbench -R)",
}

def nicbench(scenario, r):
    run = json.load(open(f"{work}/nicbench-{scenario}-{r}.json"))
    direction = "agent_to_client" if run["spec"]["direction"] == "reverse" else "client_to_agent"
    udp = run["sum"][direction]["udp"]
    ow = udp["one_way"]
    # What the offset estimate took off the receiver-minus-sender figures: the agent's
    # clock minus the client's when the agent receives, plus it when the client does.
    # On one kernel (every lab) nicbench knows the clocks are one and uses 0.
    one_clock = run["clock_offset"].get("one_clock", False)
    offset = 0.0 if one_clock else run["clock_offset"]["agent_minus_client_us"] / 1e6
    return {"p50": ow["p50_seconds"], "bound": ow["clock_bound_seconds"], "min": ow["min_seconds"],
            "max": ow["max_seconds"], "loss": udp["loss_percent"],
            "clock": offset if direction == "agent_to_client" else -offset}

def iperf2(sender, scenario, r):
    text = open(f"{work}/{sender}-{scenario}-{r}.txt").read()
    # [  1] 0.0000-4.0543 sec  47.0 MBytes  97.2 Mbits/sec   0.114 ms 18397/53574 (34%)
    #       52.721/0.004/56.092/6.552 ms 8676 pps 35177/457(57) pkts 230
    # (with --isochronous the frames' own latency follows; the first is the datagrams')
    line = re.search(r" (\d+)/(\d+) \(\S+%\) +(-?[\d.]+)/(-?[\d.]+)/(-?[\d.]+)/(-?[\d.]+) ms ", text)
    # [  1] 0.0000-4.0543 sec T8(f)-PDF: bin(w=1us):cnt(35177)=1:95,2:3,...,561:2
    #       (5.00/95.00/99.7%=...,Outliers=58,obl/obu=0/0)
    # Bin k counts the delays in [(k-1)w, kw); obl those below 0, obu those past the last bin.
    pdf = re.search(r"T8\(f\)-PDF: bin\(w=(\d+)(us|ms)\):cnt\((\d+)\)=(\S+) \(.*obl/obu=(\d+)/(\d+)\)", text)
    if not line or not pdf:
        raise SystemExit(f"no iperf 2 latency report for {sender}, {scenario}, round {r}:\n{text[-2000:]}")
    lost, total = int(line.group(1)), int(line.group(2))
    avg, low, high = (float(line.group(i)) / 1e3 for i in (3, 4, 5))
    width = int(pdf.group(1)) * (1e-6 if pdf.group(2) == "us" else 1e-3)
    count, running, median = int(pdf.group(3)), int(pdf.group(5)), None
    for item in pdf.group(4).split(","):
        k, n = (int(x) for x in item.split(":"))
        running += n
        if running >= count / 2:
            median = (k - 0.5) * width
            break
    return {"median": median, "avg": avg, "min": low, "max": high, "loss": 100 * lost / total if total else 0.0}

def ms(seconds, width=8):
    return f"{seconds * 1e3:{width}.3f}" if seconds is not None else f"{'-':>{width}}"

def spread(values):
    return f"[{min(values) * 1e3:.3f}, {max(values) * 1e3:.3f}]"

print(f"lab a - r - b, tbf 100 Mbit/s, 1400 B datagrams; {rounds} rounds x {secs} s per test; "
      f"{iperf_version}; kernel {os.uname().release}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}")
print("ms; nicbench p50 +/- its clock bound; iperf 2's median from its 1 us histogram; "
      "bursts: iperf 2 --isochronous=1000:RATE,0")
results = {}
for scenario in scenarios:
    print(f"\n{TITLES.get(scenario, scenario)}")
    print(f"  {'round':<5} {'first':<8} | {'nicbench p50':>12} {'+/- bound':>9} {'clock':>7} {'loss':>6} | "
          f"{'iperf2 median':>13} {'avg':>8} {'loss':>6} | {'bursts median':>13} {'loss':>6}")
    rows = []
    for r in range(1, rounds + 1):
        n, i, b = nicbench(scenario, r), iperf2("iperf2", scenario, r), iperf2("iperf2-bursts", scenario, r)
        rows.append((n, i, b))
        hidden = "*" if n["bound"] >= abs(n["p50"]) else " "
        print(f"  {r:<5} {'nicbench' if r % 2 else 'bursts':<8} | {ms(n['p50'], 11)}{hidden} {ms(n['bound'], 9)} "
              f"{ms(n['clock'], 7)} "
              f"{n['loss']:5.1f}% | {ms(i['median'], 13)} {ms(i['avg'])} {i['loss']:5.1f}% | "
              f"{ms(b['median'], 13)} {b['loss']:5.1f}%")
    print("  min over the rounds: " + ", ".join(
        f"{name} {ms(min(row[k]['min'] for row in rows), 0)}" for k, name in enumerate(("nicbench", "iperf2", "bursts")))
        + "; max: " + ", ".join(
        f"{name} {ms(max(row[k]['max'] for row in rows), 0)}" for k, name in enumerate(("nicbench", "iperf2", "bursts"))))
    results[scenario] = rows
print("  * p50 not above its bound: nicbench's text report leaves such a figure out")
print("  clock: what the clocks' offset added to nicbench's figures: 0 where nicbench knows both ends read one\n"
      "    kernel's clock (bound 0); with an older build, the estimate's error (the true offset is 0 here)")

print(f"\nmedians of {rounds} rounds, ms (spread: [min, max] over the rounds); ratio and difference: nicbench p50 against each")
for scenario, rows in results.items():
    p50s, bounds = [n["p50"] for n, _, _ in rows], [n["bound"] for n, _, _ in rows]
    p50, bound = statistics.median(p50s), statistics.median(bounds)
    clock = statistics.median(n["clock"] for n, _, _ in rows)
    # The receiver's own figure: arrival minus the sender's stamp, on one clock here.
    raw = statistics.median(n["p50"] - n["clock"] for n, _, _ in rows)
    hidden = "*" if bound >= abs(p50) else " "
    print(f"  {scenario:<9} nicbench p50        {ms(p50, 9)}{hidden}{spread(p50s):>18}  +/- {bound * 1e3:.3f}, "
          f"clock {clock * 1e6:+.1f} us")
    for label, values, like in (
        ("iperf2 median", [i["median"] for _, i, _ in rows], True),
        ("iperf2 avg", [i["avg"] for _, i, _ in rows], False),
        ("bursts median", [b["median"] for _, _, b in rows], True),
    ):
        theirs = statistics.median(values)
        diff = p50 - theirs
        # Agreement: the difference of the medians against the clocks' bound and
        # both tools' spreads over the rounds together (max - min of each).
        room = bound + (max(p50s) - min(p50s)) + (max(values) - min(values))
        verdict = (f"difference {diff * 1e6:+7.1f} us, {'within' if abs(diff) <= room else 'beyond'} "
                   f"bound and spreads ({room * 1e6:.1f} us); less the clock {(raw - theirs) * 1e6:+7.1f} us"
                   if like else "(a mean: not like for like)")
        print(f"  {'':<9} {label:<19} {ms(theirs, 9)} {spread(values):>18}  ratio {p50 / theirs:6.3f}{hidden} {verdict}")
PY
