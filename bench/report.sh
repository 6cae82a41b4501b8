#!/usr/bin/env bash
# Pictures (issues 13 and 29): how long `nicbench report` takes over 10,000
# runs, and how big the page is.
#
#   bench/report.sh [RUNS] [REPEATS]     (defaults: 10000 runs, 5 timed calls)
#
# The database is made once and kept in /tmp (made.db in the directory
# printed; remove it to make it again); each call times a copy of it. Every run in it went through nicbench's own
# store: first a handful of real runs on loopback against an agent this
# script starts (the demo's set; tcp reverse and both ways; udp; rr TCP,
# UDP, --crr and --spin; a sweep; loaded; a two-agent plan whose second
# agent is gone, so two of its cells fail), then copies of their documents,
# each with its own start time (a minute after the one before, or none for
# the NetPIPE files), hosts (one of 6 client/agent pairs) and figures
# scaled by a seeded random factor, imported by `nicbench import` with tags
# nic=one of 8 cards and mtu=1500|9000, until there are RUNS runs.
#
# Then `nicbench report -o PAGE --cols tag:nic` runs REPEATS times: the
# first with the database evicted from the page cache (cold), printed apart;
# then each warm call's wall time, their median and spread (slowest -
# fastest). Goal: median warm < 2 s.
# NICBENCH=path times another binary (default: a release build of this tree);
# the database is made by the same binary.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${1:-10000}
REPEATS=${2:-5}
command -v python3 >/dev/null || { echo "missing python3" >&2; exit 1; }
case "$RUNS$REPEATS" in *[!0-9]*) echo "RUNS and REPEATS are whole numbers" >&2; exit 2 ;; esac
[ "$REPEATS" -ge 2 ] || { echo "REPEATS: at least 2 (one cold, one warm)" >&2; exit 2; }
if [ -z "${NICBENCH:-}" ]; then
    cargo build --release --quiet
    NICBENCH=./target/release/nicbench
fi
NICBENCH=$(realpath "$NICBENCH")
# The cache is keyed by the number of runs and the database's make: bump
# MAKE when the runs it makes change.
MAKE=1
CACHE=/tmp/nicbench-report-bench-$RUNS-make$MAKE
exec python3 - "$RUNS" "$REPEATS" "$NICBENCH" "$CACHE" <<'PY'
import copy, glob, json, os, random, shutil, socket, statistics, subprocess, sys, time

runs, repeats, NB, cache = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
db = os.path.join(cache, "runs.db")
NICS = ["e1000", "igb", "ixgbe", "mlx5", "r8169", "tg3", "bnx2", "ice"]
HOSTS = [("lab-a", "lab-b"), ("lab-b", "lab-a"), ("lab-c", "lab-d"),
         ("lab-d", "lab-c"), ("lab-a", "lab-c"), ("lab-e", "lab-f")]


def nicbench(*args, ok=(0,)):
    out = subprocess.run([NB, *args], capture_output=True, text=True)
    if out.returncode not in ok:
        sys.exit(f"nicbench {' '.join(args)} failed ({out.returncode}): {out.stderr}")
    return out.stdout


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def seed_runs(seed_db):
    """The real runs on loopback whose documents every other run copies."""
    port = free_port()
    agent = subprocess.Popen([NB, "serve", "-B", "127.0.0.1", "-p", str(port), "-q"], stdout=subprocess.DEVNULL)
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
                break
            except OSError:
                time.sleep(0.1)
        else:
            sys.exit("the agent did not listen")
        p, d = str(port), ["--db", seed_db]
        nicbench("demo", "-t", "0.3", "--no-report", *d)
        for args in (["tcp", "-R"], ["tcp", "--bidir"], ["udp", "-b", "1G"], ["rr"],
                     ["rr", "--proto", "udp", "-r", "64,1024"], ["rr", "--crr"], ["rr", "--spin"],
                     ["loaded", "-t", "0.5"]):
            t = [] if args[0] == "loaded" else ["-t", "0.3"]
            nicbench(args[0], "127.0.0.1", "-p", p, *t, *args[1:], *d)
        nicbench("sweep", "127.0.0.1", "-p", p, "-t", "3", *d)
        gone = free_port()
        plan = os.path.join(os.path.dirname(seed_db), "cells.toml")
        with open(plan, "w") as f:
            f.write(f'name = "cells"\n[defaults]\nduration = "0.3s"\n'
                    f'[[agents]]\nlabel = "good"\naddress = "127.0.0.1:{port}"\n'
                    f'[[agents]]\nlabel = "gone"\naddress = "127.0.0.1:{gone}"\n'
                    f'[matrix]\nworkload = ["tcp", "rr"]\ntags = {{ nic = "{NICS[0]}" }}\n')
        nicbench("run", plan, *d, ok=(0, 5))
    finally:
        agent.terminate()
        agent.wait()


def make():
    work = cache + ".making"
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    t0 = time.perf_counter()
    seed_db = os.path.join(work, "runs.db")
    seed_runs(seed_db)
    ids = [int(l.split()[0]) for l in nicbench("runs", "--db", seed_db, "--limit", "1000").splitlines()
           if l.split() and l.split()[0].isdigit()]
    docs = [json.loads(nicbench("show", str(i), "--json", "--db", seed_db)) for i in ids]
    netpipe = sorted(glob.glob(os.path.abspath("tests/fixtures/*.np.out")))
    print(f"{len(ids)} real runs on loopback in {time.perf_counter() - t0:.0f} s", flush=True)
    rng = random.Random(29)
    files = os.path.join(work, "documents")
    os.makedirs(files)
    by_tags = {}
    start = 1.7e9
    for n in range(runs - len(ids)):
        key = (NICS[n % len(NICS)], "9000" if (n // len(NICS)) % 2 else "1500")
        if netpipe and n % 500 == 499:
            by_tags.setdefault(key, []).append(netpipe[n % len(netpipe)])
            continue
        doc = copy.deepcopy(docs[n % len(docs)])
        start += 60
        doc["started_at_unix_seconds"] = start
        client, agent = HOSTS[rng.randrange(len(HOSTS))]
        for end, host in (("client", client), ("agent", agent)):
            if isinstance(doc.get(end, {}).get("facts"), dict):
                doc[end]["facts"]["hostname"] = host
        factor = rng.uniform(0.6, 1.2)
        for part in (doc.get("sum") or {}).values():
            if isinstance(part, dict):
                for k in ("bits_per_second", "transactions_per_second"):
                    if isinstance(part.get(k), (int, float)):
                        part[k] *= factor
        path = os.path.join(files, f"{n}.json")
        with open(path, "w") as f:
            json.dump(doc, f)
        by_tags.setdefault(key, []).append(path)
    for (nic, mtu), paths in sorted(by_tags.items()):
        for i in range(0, len(paths), 500):
            nicbench("import", "--db", seed_db, "--tag", f"nic={nic}", "--tag", f"mtu={mtu}", *paths[i:i + 500])
    shutil.rmtree(files)
    for name in glob.glob(seed_db + "-*"):
        os.remove(name)
    os.rename(seed_db, os.path.join(work, "made.db"))
    shutil.rmtree(cache, ignore_errors=True)
    os.rename(work, cache)
    print(f"database: {runs} runs made in {time.perf_counter() - t0:.0f} s", flush=True)


made = os.path.join(cache, "made.db")
if not os.path.exists(made):
    make()
# Timed on a copy: the binary timed may upgrade the database's schema
# (once, before the timed calls), and the made one stays as it was made.
for name in glob.glob(db + "*"):
    os.remove(name)
subprocess.run(["cp", "--reflink=auto", made, db], check=True)
t0 = time.perf_counter()
nicbench("runs", "--db", db, "--limit", "1")
print(f"first open of the copy (an upgrade when the binary's schema is newer): {time.perf_counter() - t0:.1f} s")
print(f"database {db}: {os.path.getsize(db) / 1e6:.0f} MB; `nicbench report -o PAGE --cols tag:nic`")
page = os.path.join(cache, "report.html")


def report():
    t0 = time.perf_counter()
    nicbench("report", "--db", db, "-o", page, "--cols", "tag:nic")
    return time.perf_counter() - t0


# Cold: the database's pages dropped from the page cache first.
for name in glob.glob(db + "*"):
    fd = os.open(name, os.O_RDONLY)
    os.fsync(fd)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)
print(f"cold:  {report():6.2f} s")
warm = [report() for _ in range(repeats - 1)]
for i, t in enumerate(warm, 1):
    print(f"warm {i}: {t:6.2f} s")
print(f"warm median {statistics.median(warm):.2f} s, spread {max(warm) - min(warm):.2f} s "
      f"(goal: < 2 s); page {os.path.getsize(page) / 1e6:.2f} MB")
PY
