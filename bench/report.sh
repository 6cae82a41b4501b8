#!/usr/bin/env bash
# Pictures (issue 13): how long `nicbench report` takes over 1,000 runs and how
# big the page is; how long one chart of each kind takes.
#
#   bench/report.sh [RUNS] [REPEATS]     (defaults: 1000 runs, 9 timed calls each)
#
# The database is made by `nicbench import` of the fixture run documents
# (tests/fixtures/run-*.json: tcp, tcp with repetitions and line rate, udp,
# udp both ways, rr with its latency histogram, sweep), copied RUNS times with
# their throughput figures scaled by a seeded random factor and tagged with one
# of 8 cards (nic=...) and 2 MTUs (mtu=...). Wall time of each nicbench process
# (start-up and opening the database included); reported: the median and the
# slowest. Goals: report < 2 s and < 5 MB; one chart < 100 ms.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${1:-1000}
REPEATS=${2:-9}
command -v python3 >/dev/null || { echo "missing python3" >&2; exit 1; }
cargo build --release --quiet
exec python3 - "$RUNS" "$REPEATS" <<'PY'
import glob, json, os, random, statistics, subprocess, sys, tempfile, time

runs, repeats = int(sys.argv[1]), int(sys.argv[2])
NB = os.path.abspath("./target/release/nicbench")
work = tempfile.mkdtemp(prefix="nicbench-report-bench-")
db = os.path.join(work, "runs.db")
env = dict(os.environ, NICBENCH_DB=db)
rng = random.Random(13)
fixtures = sorted(glob.glob("tests/fixtures/run-*.json"))
nics = ["e1000", "igb", "ixgbe", "mlx5", "r8169", "tg3", "bnx2", "e100"]

def scale(doc, factor):
    """Scales every throughput figure of a document (not the nested trials)."""
    for part in ("sender", "receiver"):
        if part in doc.get("sum", {}):
            doc["sum"][part]["bits_per_second"] *= factor
    return doc

batches = {}
for i in range(runs):
    doc = json.load(open(fixtures[i % len(fixtures)]))
    doc = scale(doc, rng.uniform(0.6, 1.2))
    doc["started_at_unix_seconds"] += i * 60
    tags = (nics[i % len(nics)], "9000" if (i // len(nics)) % 2 else "1500")
    path = os.path.join(work, f"run-{i:05}.json")
    json.dump(doc, open(path, "w"))
    batches.setdefault(tags, []).append(path)
t0 = time.perf_counter()
for (nic, mtu), paths in batches.items():
    subprocess.run([NB, "import", "--tag", f"nic={nic}", "--tag", f"mtu={mtu}"] + paths,
                   check=True, stdout=subprocess.DEVNULL, env=env)
print(f"database: {runs} runs imported from {len(fixtures)} fixtures in {time.perf_counter() - t0:.1f} s "
      f"({os.path.getsize(db) / 1e6:.1f} MB)")

def timed(cmd):
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = subprocess.run(cmd, capture_output=True, text=True, env=env)
        times.append((time.perf_counter() - t0) * 1e3)
        if out.returncode != 0:
            sys.exit(f"{' '.join(cmd)} failed: {out.stderr}")
    return statistics.median(times), max(times)

page = os.path.join(work, "report.html")
median, worst = timed([NB, "report", "-o", page, "--rows", "workload", "--cols", "tag:nic"])
size = os.path.getsize(page)
print(f"report over {runs} runs (--rows workload --cols tag:nic): median {median:7.1f} ms, slowest {worst:7.1f} ms, "
      f"{size / 1e6:.2f} MB   (goals: < 2000 ms, < 5 MB)")

charts = [
    ("bars", ["--kind", "bars", "--group", "workload", "--series", "tag:nic"]),
    ("sweep", ["--kind", "sweep"]),
    ("cpu", ["--kind", "cpu", "--group", "tag:nic"]),
    ("latency", ["--kind", "latency"]),
    ("timeline", ["--kind", "timeline", "--workload", "tcp"]),
]
for fmt in ("svg", "png"):
    for name, args in charts:
        out = os.path.join(work, f"{name}.{fmt}")
        median, worst = timed([NB, "plot", "-o", out] + args)
        print(f"plot {name:8} {fmt}: median {median:6.1f} ms, slowest {worst:6.1f} ms  (goal: < 100 ms)")
print(f"files in {work}")
PY
