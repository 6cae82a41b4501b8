#!/usr/bin/env bash
# iperf3 interop on a shaped lab link (issues 16, 28): how near each pairing's
# rate comes to iperf3 measuring itself, on a link whose rate a tbf sets.
#
#   bench/iperf3-lab-agreement.sh [ROUNDS]      (default: 3 rounds)
#
# Builds a lab of its own (hosts a and b through a router r, tbf 1 Gbit/s on
# r's egress towards each side, MTU 9000, no agents), starts `iperf3 -s` and
# `nicbench serve --iperf3-port` in b, and runs from a, each `-t 3 -O 1`, every
# pairing right after an iperf3 -> iperf3 run in the same direction:
#   iperf3 -c        ->  iperf3 -s                      (reference)
#   nicbench tcp iperf3://  ->  iperf3 -s
#   iperf3 -c        ->  iperf3 -s                      (reference)
#   iperf3 -c        ->  nicbench serve --iperf3-port
#   iperf3 -c -R     <-  iperf3 -s                      (reference, reverse)
#   nicbench tcp iperf3:// -R  <-  iperf3 -s
#   iperf3 -c -R     <-  iperf3 -s                      (reference, reverse)
#   iperf3 -c -R     <-  nicbench serve --iperf3-port
# Figure: the receiver's rate (iperf3's sum_received, nicbench's
# sum.receiver). Prints each round, then per pairing the median, the spread
# (lowest to highest, and its width over the median) and the median's ratio
# to the reference's median in the same direction. The tbf sets the rate, so
# this compares two tools' counting of one link, not their speed; nothing is
# asserted (tests/cli/iperf3_lab.rs checks the byte counts agree). A note
# follows when iperf3 against itself reads under 90% of the tbf or its runs
# spread over 1%: the machine was busy, and the ratios are its noise.
#
# Needs root, iproute2 (ip, tc), iperf3 and python3. Traffic stays inside the
# lab: every client runs in a, every server binds b's lab address. The lab
# (`i3lab-PID`) is removed on any exit, also on failure or Ctrl-C: python3 runs
# as a child (not exec'd, which would drop the EXIT trap).
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-3}
if ! [[ $ROUNDS =~ ^[1-9][0-9]{0,2}$ ]]; then
  echo "usage: bench/iperf3-lab-agreement.sh [ROUNDS]  (ROUNDS: 1 to 999, not '$ROUNDS')" >&2
  exit 2
fi
for tool in ip tc iperf3 python3; do
  command -v "$tool" >/dev/null || { echo "missing $tool: apt-get install ${tool/tc/iproute2}" >&2; exit 1; }
done
if [ "$(id -u)" != 0 ]; then
  echo "the lab needs root (network namespaces): run with sudo" >&2
  exit 1
fi
cargo build --release --quiet
NB=$PWD/target/release/nicbench
LAB=i3lab-$$
if "$NB" lab status "$LAB" >/dev/null 2>&1; then
  echo "a lab named $LAB exists already (left by an earlier run?); remove it with: $NB lab down $LAB" >&2
  exit 1
fi
WORK=$(mktemp -d /tmp/nicbench-iperf3-lab-XXXXXX)
runner=
cleanup() {
  if [ -n "$runner" ]; then kill "$runner" 2>/dev/null || true; wait "$runner" 2>/dev/null || true; fi
  # Removes everything the lab holds, the servers in b included.
  "$NB" lab down "$LAB" >&2 || echo "removing lab $LAB failed: run $NB lab down $LAB" >&2
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM
if ! "$NB" lab up "$LAB" --via-router --rate 1gbit --mtu 9000 --no-agents >"$WORK/lab-up.txt" 2>&1; then
  cat "$WORK/lab-up.txt" >&2
  exit 1
fi
"$NB" lab status "$LAB" --json >"$WORK/lab.json"
# In the background and waited for, so a signal reaches the trap at once.
python3 - "$NB" "$LAB" "$WORK" "$ROUNDS" <<'PY' &
import json, statistics, subprocess, sys, time

nb, lab, work, rounds = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
RATE = 1e9
SECONDS, OMIT = "3", "1"
IPERF3_PORT, AGENT_PORT, AGENT_IPERF3_PORT = 5201, 5310, 5202
LIMIT = 60  # seconds for one 3 s run, setup and results included

state = json.load(open(f"{work}/lab.json"))
b = next(e["address"].split("/")[0] for l in state["lab"]["links"] for e in l["ends"] if e["host"] == "b")

def in_host(host, *command):
    return [nb, "lab", "exec", lab, host, "--", *command]

def listening(port):
    out = subprocess.run(in_host("b", "ss", "-Hltn", f"src {b}:{port}"), capture_output=True, text=True)
    return out.returncode == 0 and out.stdout.strip() != ""

def start(name, command, port):
    log = open(f"{work}/{name}.log", "w")
    p = subprocess.Popen(in_host("b", *command), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 20
    while not listening(port):
        if p.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"{name} did not listen on {b}:{port}:\n" + open(f"{work}/{name}.log").read())
        time.sleep(0.05)
    return p

def run(what, command):
    out = subprocess.run(in_host("a", *command), stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=LIMIT)
    try:
        doc = json.loads(out.stdout)
    except ValueError:
        raise SystemExit(f"{what}: exit {out.returncode}, no JSON:\n{out.stdout}{out.stderr}")
    if out.returncode != 0 or "error" in doc:
        raise SystemExit(f"{what}: exit {out.returncode}: {doc.get('error', '')}{out.stderr}")
    return doc

def iperf3(port, reverse):
    doc = run("iperf3 -c", ["iperf3", "-c", b, "-p", str(port), "-t", SECONDS, "-O", OMIT, "-J", *(["-R"] if reverse else [])])
    return doc["end"]["sum_received"]["bits_per_second"]

def nicbench(reverse):
    doc = run("nicbench tcp iperf3://", [nb, "tcp", f"iperf3://{b}:{IPERF3_PORT}", "-t", SECONDS, "-O", OMIT,
                                         "--json", "--no-save", *(["-R"] if reverse else [])])
    return doc["sum"]["receiver"]["bits_per_second"]

REF, REF_R = "iperf3 -> iperf3 -s", "iperf3 -R <- iperf3 -s"
# (pairing, its reference, how to measure it), in the order of a round.
PAIRINGS = [
    ("nicbench -> iperf3 -s", REF, lambda: nicbench(False)),
    ("iperf3 -> nicbench serve", REF, lambda: iperf3(AGENT_IPERF3_PORT, False)),
    ("nicbench -R <- iperf3 -s", REF_R, lambda: nicbench(True)),
    ("iperf3 -R <- nicbench serve", REF_R, lambda: iperf3(AGENT_IPERF3_PORT, True)),
]
servers = [
    start("iperf3-s", ["iperf3", "-s", "-B", b, "-p", str(IPERF3_PORT)], IPERF3_PORT),
    start("nicbench-serve", [nb, "serve", "-B", b, "-p", str(AGENT_PORT), "--iperf3-port", str(AGENT_IPERF3_PORT)],
          AGENT_IPERF3_PORT),
]
print(f"lab {lab}: a -> r -> b, tbf 1 Gbit/s on r's egress towards each side, MTU 9000; "
      f"{rounds} round(s), each run -t {SECONDS} -O {OMIT}, receiver's rate in Mbit/s", flush=True)
rates = {REF: [], REF_R: [], **{p: [] for p, _, _ in PAIRINGS}}
try:
    for r in range(1, rounds + 1):
        seen = []
        for pairing, ref, measure in PAIRINGS:
            rates[ref].append(iperf3(IPERF3_PORT, ref == REF_R))
            rates[pairing].append(measure())
            seen.append(f"{ref} {rates[ref][-1] / 1e6:.1f}, {pairing} {rates[pairing][-1] / 1e6:.1f}")
        print(f"round {r}: " + "; ".join(seen), flush=True)
finally:
    for s in servers:
        s.terminate()
        s.wait()

print(f"\n{'pairing':28s} {'median':>8s} {'lowest-highest':>15s} {'spread':>7s}  ratio to iperf3 itself")
for name, ref in [(REF, REF), (PAIRINGS[0][0], REF), (PAIRINGS[1][0], REF),
                  (REF_R, REF_R), (PAIRINGS[2][0], REF_R), (PAIRINGS[3][0], REF_R)]:
    v, m_ref = rates[name], statistics.median(rates[ref])
    m = statistics.median(v)
    print(f"{name:28s} {m / 1e6:8.1f} {min(v) / 1e6:7.1f}-{max(v) / 1e6:<7.1f} {(max(v) - min(v)) * 100 / m:6.2f}%  "
          f"{m / m_ref:.4f} ({(m / m_ref - 1) * 100:+.2f}%)")
for ref in (REF, REF_R):
    v = rates[ref]
    m = statistics.median(v)
    if not 0.9 * RATE < m <= RATE:
        print(f"note: {ref} median {m / 1e6:.1f} Mbit/s is not within 90-100% of the 1 Gbit/s tbf: "
              "the tbf was not the bottleneck (a starved machine?), so these ratios compare CPU, not counting")
    elif (max(v) - min(v)) > 0.01 * m:
        print(f"note: iperf3 against itself ({ref}) spread {(max(v) - min(v)) * 100 / m:.1f}%: "
              "the machine was busy, the tbf did not alone set the rate; run again on a quiet machine")
PY
runner=$!
status=0
wait "$runner" || status=$?
runner=
exit "$status"
