#!/usr/bin/env bash
# The results store: what saving costs a run, and how fast `compare` and
# `runs` answer over a large database.
#
#   bench/store.sh [RUNS] [LARGE]      (defaults: 50 runs each way, 10000 runs in the large database)
#   bench/store.sh scale [SIZE...]     (default sizes: 10000 100000 1000000)
#
# `scale` (issue 71, item 4) measures the store at each SIZE of generated
# runs on SQLite and on PostgreSQL: the time to load them (the
# `store_fill` example: a 100-host mesh every 30 minutes, saved through
# nicbench's own store code in batches of 10,000) and the median of 5
# calls of each query below; then how each cost grows from size to size.
# Databases are cached under /tmp/nicbench-store-scale (a SIZE loaded once
# is reused; remove the directory to load again). PostgreSQL: a throwaway
# server of Debian's postgresql (initdb in that directory, a unix socket
# only, as nobody under root), stopped at the end.
#
# 1. Saving overhead: RUNS `nicbench tcp -t 0.2` against an agent on loopback
#    with --db, RUNS with --no-save, alternating so drifts hit both alike;
#    wall time of each process; reported: the medians and their difference.
#    Goal (issue 12): saving adds at most 5 ms (median).
# 2. A database of LARGE runs, generated (not typed): 12 real runs (tcp, udp,
#    rr with two message sizes each, two nics), then copies of them with varied
#    tags (nic, mtu), times and figures, written by Python's sqlite3 into the
#    schema nicbench made (each copy with its seed's digest, as every run
#    nicbench saves has one). Then 20 timed calls each of
#      nicbench compare --rows workload,tag:mtu --cols tag:nic   (median; goal < 200 ms)
#      nicbench runs                                              (median; goal < 100 ms)
# Needs python3.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = scale ]; then
    shift
    exec bash bench/lib/store-scale.sh "$@"
fi
RUNS=${1:-50}
LARGE=${2:-10000}
command -v python3 >/dev/null || { echo "missing python3" >&2; exit 1; }
cargo build --release --quiet
exec python3 - "$RUNS" "$LARGE" <<'PY'
import json, os, random, re, sqlite3, statistics, subprocess, sys, tempfile, time

runs, large = int(sys.argv[1]), int(sys.argv[2])
NB = "./target/release/nicbench"
work = tempfile.mkdtemp(prefix="nicbench-store-bench-")
env = dict(os.environ, NICBENCH_DB=os.path.join(work, "unused.db"))

agent = subprocess.Popen([NB, "serve", "-p", "0", "-B", "127.0.0.1", "-v"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
try:
    for line in agent.stderr:
        m = re.search(r"listening on 127\.0\.0\.1:(\d+)", line)
        if m:
            port = m.group(1)
            break

    def timed(cmd):
        t0 = time.perf_counter()
        out = subprocess.run(cmd, capture_output=True, text=True, env=env)
        elapsed = time.perf_counter() - t0
        if out.returncode != 0:
            sys.exit(f"{' '.join(cmd)} failed: {out.stderr}")
        return elapsed * 1e3

    # 1. Saving overhead.
    db = os.path.join(work, "overhead.db")
    tcp = [NB, "tcp", "127.0.0.1", "-p", port, "-t", "0.2"]
    saved, unsaved = [], []
    for _ in range(runs):
        saved.append(timed(tcp + ["--db", db, "--tag", "bench=overhead"]))
        unsaved.append(timed(tcp + ["--no-save"]))
    ms, mu = statistics.median(saved), statistics.median(unsaved)
    print(f"saving overhead over {runs} runs each (tcp -t 0.2 on loopback, wall time per process):")
    print(f"  --db      median {ms:8.1f} ms")
    print(f"  --no-save median {mu:8.1f} ms")
    print(f"  difference       {ms - mu:8.1f} ms  (goal: <= 5 ms)")

    # 2. The large database: real seed runs, then generated copies.
    big = os.path.join(work, "large.db")
    seeds = [(w, extra, nic) for nic in ("e1000", "igb")
             for w, extra in (("tcp", []), ("tcp", ["-l", "8K"]), ("udp", ["-b", "200M"]),
                              ("udp", ["-b", "200M", "-l", "512"]), ("rr", []), ("rr", ["-r", "64,64"]))]
    for w, extra, nic in seeds:
        timed([NB, w, "127.0.0.1", "-p", port, "-t", "0.2", "--db", big, "--tag", f"nic={nic}",
               "--tag", "mtu=1500"] + extra)
finally:
    agent.kill()
    agent.wait()

con = sqlite3.connect(big)
cols = [r[1] for r in con.execute("PRAGMA table_info(runs)") if r[1] != "id"]
rows = con.execute(f"SELECT {', '.join(cols)} FROM runs ORDER BY id").fetchall()
# Every run nicbench saves has a digest (schema version 6): a copy gets its seed's.
digests = [d for (d,) in con.execute("SELECT d.digest FROM runs r JOIN digests d ON d.run_id = r.id ORDER BY r.id")]
assert len(digests) == len(rows), "a seed run without its digest"
rng = random.Random(12)
nics = ["e1000", "igb", "ixgbe", "mlx5", "r8169", "tg3", "bnx2", "e100"]
figures = [c for c in cols if c.endswith(("_per_second", "_percent", "_us", "_per_kb")) or c == "headline_value"]
now = time.time()
with con:
    for i in range(large - len(rows)):
        seed = rng.randrange(len(rows))
        row = dict(zip(cols, rows[seed]))
        for c in figures:
            if row[c] is not None:
                row[c] *= rng.uniform(0.5, 1.5)
        row["started_at_unix_seconds"] = now - rng.uniform(0, 90 * 86400)
        cur = con.execute(f"INSERT INTO runs ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
                          [row[c] for c in cols])
        con.execute("INSERT INTO digests (run_id, digest) VALUES (?, ?)", (cur.lastrowid, digests[seed]))
        con.executemany("INSERT INTO tags (run_id, key, value) VALUES (?, ?, ?)",
                        [(cur.lastrowid, "nic", rng.choice(nics)),
                         (cur.lastrowid, "mtu", rng.choice(["1500", "4088", "9000", "16128"]))])
total = con.execute("SELECT count(*) FROM runs").fetchone()[0]
size = os.path.getsize(big) / 1e6
con.close()

def median_of(cmd, n=20):
    timed = []
    for _ in range(n):
        t0 = time.perf_counter()
        out = subprocess.run(cmd, capture_output=True, text=True)
        timed.append((time.perf_counter() - t0) * 1e3)
        if out.returncode != 0:
            sys.exit(f"{' '.join(cmd)} failed: {out.stderr}")
    return statistics.median(timed), out.stdout

compare = [NB, "compare", "--db", big, "--rows", "workload,tag:mtu", "--cols", "tag:nic"]
runs_cmd = [NB, "runs", "--db", big]
mc, table = median_of(compare)
mr, _ = median_of(runs_cmd)
print(f"\nlarge database: {total} runs, {size:.0f} MB ({big})")
print(f"  {' '.join(compare[1:])}: median {mc:6.1f} ms over 20 calls (goal: < 200 ms)")
print(f"  {' '.join(runs_cmd[1:])}: median {mr:6.1f} ms over 20 calls (goal: < 100 ms)")
print("\n" + "\n".join(table.splitlines()[:6]))
PY
