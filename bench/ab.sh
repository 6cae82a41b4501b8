#!/usr/bin/env bash
# One test, this build against another, alternating: is a change slower?
#
#   NICBENCH_BEFORE=/tmp/before/target/release/nicbench bench/ab.sh [ROUNDS] -- COMMAND...
#   NICBENCH_BEFORE=/tmp/before/target/release/nicbench bench/ab.sh 10 -- rr --crr
#   NICBENCH_BEFORE=/tmp/before/target/release/nicbench bench/ab.sh 8 -- udp -b max -l 1400 --gso
#
# COMMAND is a measuring command and its options without the host (`tcp -P 2`, `rr
# --crr --proto tls`); the script adds `127.0.0.1 -p PORT -t 3 --json --no-save` (give
# your own -t to change the time). Each build runs against an agent of its own on
# loopback; each round runs both, and every other round the other one goes first, so a
# drift of the machine hits both alike. The suite-wide benches (tcp-vs-peers.sh and
# the rest) run many tests per round and their 5-round medians here move by 10% from
# run to run; this one test, alternated, is what to trust for a "before and after".
#
# Printed per build: the figure of every round (the receiver's Gbit/s; transactions/s
# for rr), the median with min-max, each end's process CPU seconds per test (median),
# and now / before of the medians. Build the other one under /tmp, never here:
#
#   git clone -q . /tmp/before && git -C /tmp/before checkout -q COMMIT
#   (cd /tmp/before && cargo build --release)
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=10
if [[ ${1:-} =~ ^[0-9]+$ ]]; then ROUNDS=$1; shift; fi
[[ ${1:-} == -- ]] && shift
(($# > 0)) || { echo "usage: NICBENCH_BEFORE=BINARY bench/ab.sh [ROUNDS] -- COMMAND [OPTIONS...]" >&2; exit 2; }
[[ -n ${NICBENCH_BEFORE:-} ]] || { echo "set NICBENCH_BEFORE to the nicbench binary of the other build" >&2; exit 2; }
[[ -x $NICBENCH_BEFORE ]] || { echo "NICBENCH_BEFORE=$NICBENCH_BEFORE is not an executable" >&2; exit 2; }
command -v python3 >/dev/null || { echo "missing python3" >&2; exit 1; }
cargo build --release --quiet
exec python3 - "$ROUNDS" "$NICBENCH_BEFORE" "$@" <<'PY'
import json, os, statistics, subprocess, sys, tempfile, time

rounds, before_bin, command = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
builds = [("now", "target/release/nicbench"), ("before", before_bin)]
workload, options = command[0], command[1:]
if not any(o in ("-t", "--time") or o.startswith("--time=") for o in options):
    options += ["-t", "3"]
home = tempfile.mkdtemp(prefix="nicbench-ab-")

def start_agent(name, binary):
    env = dict(os.environ, NICBENCH_DB=f"{home}/{name}.db")
    agent = subprocess.Popen([binary, "serve", "-p", "0", "-B", "127.0.0.1"], stderr=subprocess.PIPE, text=True, env=env)
    for line in agent.stderr:
        if "listening on " in line:
            return agent, line.split("listening on ")[1].split()[0].rsplit(":", 1)[1]
    raise SystemExit(f"the agent of {binary} did not start")

def figure(doc):
    rr = doc["sum"].get("rr")
    if rr and rr.get("transactions_per_second"):
        return rr["transactions_per_second"], "transactions/s"
    return doc["sum"]["receiver"]["bits_per_second"] / 1e9, "Gbit/s"

agents = {name: start_agent(name, binary) for name, binary in builds}
results = {name: [] for name, _ in builds}
unit = ""
try:
    for r in range(rounds):
        order = builds if r % 2 == 0 else builds[::-1]
        for name, binary in order:
            port = agents[name][1]
            out = subprocess.run([binary, workload, "127.0.0.1", "-p", port, *options, "--json", "--no-save"],
                                 capture_output=True, text=True, timeout=600)
            try:
                doc = json.loads(out.stdout)
                value, unit = figure(doc)
            except (ValueError, KeyError):
                raise SystemExit(f"{name}: {' '.join([workload, *options])} failed: {out.stderr.strip()[-400:]}")
            cpu = {end: doc["cpu"][end]["process"]["user_seconds"] + doc["cpu"][end]["process"]["system_seconds"]
                   for end in ("client", "agent")}
            results[name].append((value, cpu))
        print(f"  round {r + 1}/{rounds}: " + ", ".join(f"{n} {results[n][-1][0]:.2f}" for n, _ in builds),
              file=sys.stderr)
        time.sleep(0.3)
finally:
    for agent, _ in agents.values():
        agent.terminate()
        agent.wait(timeout=10)

print(f"nicbench {' '.join([workload, *options])}, loopback, {rounds} rounds alternating, "
      f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}")
med = {}
for name, binary in builds:
    values = [v for v, _ in results[name]]
    med[name] = statistics.median(values)
    cpu = {end: statistics.median(c[end] for _, c in results[name]) for end in ("client", "agent")}
    print(f"  {name:<7} {med[name]:>12.2f} {unit} ({min(values):.2f}-{max(values):.2f}), "
          f"CPU client {cpu['client']:.2f} s, agent {cpu['agent']:.2f} s   [{binary}]")
    print("          rounds: " + " ".join(f"{v:.2f}" for v in values))
print(f"  now / before: x{med['now'] / med['before']:.3f}")
PY
