#!/usr/bin/env bash
# Pictures (issues 13 and 29): how long `nicbench report` takes over 10,000
# runs and how big the page is; how long one chart of each kind takes.
#
#   bench/report.sh [RUNS] [REPEATS]     (defaults: 10000 runs, 9 timed calls each)
#
# The database is generated, not measured, in seconds: the fixture run
# documents (tests/fixtures/run-*.json: tcp, tcp with repetitions and line
# rate, udp, udp both ways, rr with its latency histogram, sweep) and an
# imported NetPIPE file (no start time) go in once by `nicbench import`; then
# Python's sqlite3 copies their rows into the schema nicbench made until there
# are RUNS runs, each copy's figures scaled by a seeded random factor, its
# start a minute after the last, tagged with one of 8 cards (nic=...) and 2
# MTUs (mtu=...). Wall time of each nicbench process (start-up and opening
# the database included); reported: the median and the slowest.
# Goals: report < 2 s and < 5 MB; one chart < 100 ms.
# NICBENCH=path times another binary (default: a release build of this tree).
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${1:-10000}
REPEATS=${2:-9}
command -v python3 >/dev/null || { echo "missing python3" >&2; exit 1; }
if [ -z "${NICBENCH:-}" ]; then
    cargo build --release --quiet
    NICBENCH=./target/release/nicbench
fi
exec python3 - "$RUNS" "$REPEATS" "$NICBENCH" <<'PY'
import glob, os, random, sqlite3, statistics, subprocess, sys, tempfile, time

runs, repeats = int(sys.argv[1]), int(sys.argv[2])
NB = os.path.abspath(sys.argv[3])
work = tempfile.mkdtemp(prefix="nicbench-report-bench-")
db = os.path.join(work, "runs.db")
env = dict(os.environ, NICBENCH_DB=db)
rng = random.Random(13)
fixtures = sorted(glob.glob("tests/fixtures/run-*.json"))
nics = ["e1000", "igb", "ixgbe", "mlx5", "r8169", "tg3", "bnx2", "e100"]

t0 = time.perf_counter()
seeds = fixtures + sorted(glob.glob("tests/fixtures/*.np.out"))
subprocess.run([NB, "import", "--tag", f"nic={nics[0]}", "--tag", "mtu=1500"] + seeds,
               check=True, stdout=subprocess.DEVNULL, env=env)
con = sqlite3.connect(db)
columns = [r[1] for r in con.execute("PRAGMA table_info(runs)") if r[1] != "id"]
at = {c: i for i, c in enumerate(columns)}
rows = con.execute(f"SELECT {', '.join(columns)} FROM runs ORDER BY id").fetchall()
figures = [c for c in columns if c.endswith("_bits_per_second") or c in ("transactions_per_second", "headline_value")]
insert = f"INSERT INTO runs ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})"
with con:
    for i in range(len(rows), runs):
        row = list(rows[i % len(rows)])
        factor = rng.uniform(0.6, 1.2)
        for c in figures:
            if row[at[c]] is not None:
                row[at[c]] *= factor
        if row[at["started_at_unix_seconds"]]:
            row[at["started_at_unix_seconds"]] += i * 60
        run_id = con.execute(insert, row).lastrowid
        con.executemany("INSERT INTO tags (run_id, key, value) VALUES (?, ?, ?)",
                        [(run_id, "nic", nics[i % len(nics)]),
                         (run_id, "mtu", "9000" if (i // len(nics)) % 2 else "1500")])
con.close()
print(f"database: {runs} runs made from {len(seeds)} imported files in {time.perf_counter() - t0:.1f} s "
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
