#!/usr/bin/env bash
# What encryption costs on loopback: nicbench tcp over plain TCP, over TLS 1.3 with
# each cipher and over QUIC, alternating in one run, one stream.
#
#   bench/encrypted.sh [ROUNDS] [SECONDS]      (defaults: 3 rounds, 3 s per test)
#
# Each round runs every case once, in turn (tcp, tls aes128-gcm, tls aes256-gcm, tls
# chacha20-poly1305, quic aes128-gcm), so drifts of the machine hit all of them alike. For each case it
# prints the median throughput at the receiver with its min-max, each end's CPU per byte
# (its own process's user+system seconds per GB received, from the result), and for TLS
# the cipher's speed on one core of this host (sealing, from the result's facts) and the
# ratio the issue sets: TLS / min(plain TCP, the cipher's one-core speed), target 0.80.
# Beside it, the serial bound: a TLS end pays TCP's CPU per byte and the cipher's, one
# after the other on its one core (and both ends share this host's cores), so the most
# one stream could reach is below min(TCP, cipher); TLS's share of that bound says how
# much is left to win in nicbench itself.
#
# Then handshakes per second: `rr --crr` over TCP and over TLS (a new connection, and a
# TLS 1.3 handshake, per transaction), in the same rotation, with the client's mean
# handshake time from the result.
#
# QUIC: nicbench tcp --transport quic (aes128-gcm, quinn's CUBIC) in the same rotation,
# and, when QUINN_PERF names a built quinn `perf` binary, quinn's own benchmark with
# the same shape (one stream uploading, 2 MiB socket buffers, its default CUBIC),
# alternating with it. Its throughput is the mean of its JSON intervals after the
# first second (nicbench omits its first 0.5 s); its CPU per GB is each process's
# user+system time (the client's from wait4, the server's from /proc/PID/stat around
# the run) per GB it reported sent. Build it under /tmp, never in this repository:
#
#   git clone https://github.com/quinn-rs/quinn /tmp/quinn-src   (tag quinn-0.11.11)
#   cd /tmp/quinn-src && cargo build --release -p perf
#   QUINN_PERF=/tmp/quinn-src/target/release/quinn-perf bench/encrypted.sh
#
# With NICBENCH_BEFORE (another build of nicbench, e.g. from `git worktree add /tmp/old
# COMMIT`), that binary runs every case too, against its own agent, right after this
# build's run of the case: a restructuring is checked by the ratio now / before.
#
#   NICBENCH_BEFORE=/tmp/old/target/release/nicbench bench/encrypted.sh 5 3
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-3}
SECONDS_PER_TEST=${2:-3}
command -v python3 >/dev/null || { echo "missing python3" >&2; exit 1; }
cargo build --release --quiet
exec python3 - "$ROUNDS" "$SECONDS_PER_TEST" <<'PY'
import json, os, signal, statistics, subprocess, sys, tempfile, time

rounds, secs = int(sys.argv[1]), float(sys.argv[2])
BIN = "target/release/nicbench"
db = tempfile.mkdtemp(prefix="nicbench-encrypted-") + "/results.db"
env = dict(os.environ, NICBENCH_DB=db)
BEFORE = os.environ.get("NICBENCH_BEFORE")
if BEFORE and not os.access(BEFORE, os.X_OK):
    raise SystemExit(f"NICBENCH_BEFORE={BEFORE} is not an executable nicbench")

# Each build its own database: a newer one migrates a file an older one then refuses.
envs = {BIN: env}
if BEFORE:
    envs[BEFORE] = dict(os.environ, NICBENCH_DB=os.path.dirname(db) + "/before.db")

def start_agent(binary):
    agent = subprocess.Popen([binary, "serve", "-p", "0", "-B", "127.0.0.1"], stderr=subprocess.PIPE, text=True,
                             env=envs[binary])
    for line in agent.stderr:
        if "listening on " in line:
            return agent, line.split("listening on ")[1].split()[0].rsplit(":", 1)[1]
    raise SystemExit(f"the agent of {binary} did not start")

agent, port = start_agent(BIN)
before_agent, before_port = start_agent(BEFORE) if BEFORE else (None, None)

CASES = [("tcp", []), *[(f"tls {c}", ["--transport", "tls", "--cipher", c]) for c in ("aes128-gcm", "aes256-gcm", "chacha20-poly1305")],
         ("quic aes128-gcm", ["--transport", "quic"])]
QUINN_PERF = os.environ.get("QUINN_PERF")
perf = []
perf_server = None
if QUINN_PERF:
    perf_server = subprocess.Popen([QUINN_PERF, "server", "--listen", "127.0.0.1:4433"],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.5)

def proc_cpu(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

def run_perf():
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        server0 = proc_cpu(perf_server.pid)
        before = os.times()
        subprocess.run([QUINN_PERF, "client", "127.0.0.1:4433", "--duration", str(int(secs) + 1),
                        "--upload-size", "100G", "--download-size", "0", "--bi-requests", "1",
                        "--json", out.name], capture_output=True, timeout=secs * 10 + 60)
        after = os.times()
        server = proc_cpu(perf_server.pid) - server0
        client = (after.children_user - before.children_user) + (after.children_system - before.children_system)
        d = json.load(open(out.name))
    intervals = d["intervals"]
    total = sum(i["sum"]["bytes"] for i in intervals) / 1e9
    measured = intervals[1:] or intervals
    bps = sum(i["sum"]["bytes"] for i in measured) * 8 / sum(i["sum"]["seconds"] for i in measured)
    return bps, {"client": client / total, "agent": server / total}, None
results = {name: [] for name, _ in CASES}
before = {name: [] for name, _ in CASES}
CRR = [("rr tcp --crr", ["--crr"]), ("rr tls --crr", ["--proto", "tls", "--crr"])]
crr = {name: [] for name, _ in CRR}
crr_before = {name: [] for name, _ in CRR}

def run_crr(extra, binary=BIN, port=port):
    out = subprocess.run([binary, "rr", "127.0.0.1", "-p", port, "-t", str(secs), "-O", "0.5", "--json", *extra],
                         capture_output=True, text=True, env=envs[binary], timeout=secs * 10 + 60)
    if out.returncode != 0:
        raise SystemExit(f"nicbench rr {' '.join(extra)} failed: {out.stderr}")
    d = json.loads(out.stdout)
    tls = d["streams"][0]["sender"].get("tls") or {}
    return d["sum"]["rr"]["transactions_per_second"], tls.get("handshake_seconds")

def run(extra, binary=BIN, port=port):
    out = subprocess.run([binary, "tcp", "127.0.0.1", "-p", port, "-t", str(secs), "-O", "0.5", "--json", *extra],
                         capture_output=True, text=True, env=envs[binary], timeout=secs * 10 + 60)
    if out.returncode != 0:
        raise SystemExit(f"nicbench tcp {' '.join(extra)} failed: {out.stderr}")
    d = json.loads(out.stdout)
    bps = d["sum"]["receiver"]["bits_per_second"]
    # CPU time covers the whole test, the omitted first 0.5 s too: so do the bytes.
    gb = sum(s["receiver"]["bytes"] + s["receiver"]["omitted_bytes"] for s in d["streams"]) / 1e9
    per_gb = {}
    for end in ("client", "agent"):
        p = d["cpu"][end]["process"]
        per_gb[end] = (p["user_seconds"] + p["system_seconds"]) / gb if gb > 0 else float("nan")
    cipher_speed = None
    tls = d["streams"][0]["sender"].get("tls")
    if tls:
        # Sealing on the sender, opening on the receiver: each end's own bound.
        opening = d["streams"][0]["receiver"]["tls"].get("cipher_one_core_bits_per_second")
        cipher_speed = (tls.get("cipher_one_core_bits_per_second"), opening)
    return bps, per_gb, cipher_speed

try:
    for r in range(rounds):
        for name, extra in CASES:
            results[name].append(run(extra))
            if BEFORE:
                before[name].append(run(extra, BEFORE, before_port))
        if QUINN_PERF:
            perf.append(run_perf())
        for name, extra in CRR:
            crr[name].append(run_crr(extra))
            if BEFORE:
                crr_before[name].append(run_crr(extra, BEFORE, before_port))
        print(f"round {r + 1}/{rounds} done", file=sys.stderr)
finally:
    for a in (agent, before_agent):
        if a:
            a.send_signal(signal.SIGTERM)
            a.wait(timeout=10)
    if perf_server:
        perf_server.kill()
        perf_server.wait()

def med(xs):
    return statistics.median(xs)

tcp = med([b for b, _, _ in results["tcp"]])
tcp_per_gb = {end: med([g[end] for _, g, _ in results["tcp"]]) for end in ("client", "agent")}

def serial_bound(seal_bps, open_bps):
    """What one stream could reach if each end paid plain TCP's CPU per byte
    plus the cipher's, each end on one core and both on this host's cores:
    the costs add, where min(TCP, cipher) assumes they overlap."""
    sender = tcp_per_gb["client"] + 8 / seal_bps * 1e9
    receiver = tcp_per_gb["agent"] + 8 / open_bps * 1e9
    cores = os.cpu_count() or 1
    gb_per_s = min(1 / sender, 1 / receiver, cores / (sender + receiver))
    return gb_per_s * 8e9
print(f"nicbench tcp, loopback, 1 stream, {secs:g} s per test, {rounds} rounds alternating; medians (min-max)")
print(f"{'case':<24} {'Gbit/s':>22} {'client s/GB':>12} {'agent s/GB':>12} {'cipher 1 core':>14} {'/min(tcp,cipher)':>17} {'serial bound':>13} {'/serial':>8}")
for name, _ in CASES:
    rows = results[name]
    bps = [b for b, _, _ in rows]
    line = f"{name:<24} {med(bps)/1e9:>8.2f} ({min(bps)/1e9:.2f}-{max(bps)/1e9:.2f})"
    line += f" {med([g['client'] for _, g, _ in rows]):>12.3f} {med([g['agent'] for _, g, _ in rows]):>12.3f}"
    speeds = [s for _, _, s in rows if s and s[0] and s[1]]
    if speeds:
        seal, opening = med([s[0] for s in speeds]), med([s[1] for s in speeds])
        bound = min(tcp, seal)
        line += f" {seal/1e9:>10.2f} Gb/s {med(bps)/bound:>16.2f}"
        if name.startswith("tls"):
            # QUIC's own cost is UDP's and quinn's, not TCP's.
            serial = serial_bound(seal, opening)
            line += f" {serial/1e9:>8.2f} Gb/s {med(bps)/serial:>8.2f}"
    print(line)
if perf:
    bps = [b for b, _, _ in perf]
    line = f"{'quinn perf (peer)':<24} {med(bps)/1e9:>8.2f} ({min(bps)/1e9:.2f}-{max(bps)/1e9:.2f})"
    line += f" {med([g['client'] for _, g, _ in perf]):>12.3f} {med([g['agent'] for _, g, _ in perf]):>12.3f}"
    print(line)
    quic = med([b for b, _, _ in results["quic aes128-gcm"]])
    print(f"QUIC / quinn perf: {quic / med(bps):.2f} (target >= 1.0 at no more CPU per byte)")
else:
    print("quinn perf: QUINN_PERF not set, the peer was not run (see the top of this script)")
print("target: TLS >= 0.80 of min(plain TCP, the cipher on one core)")
print("serial bound: each end pays plain TCP's CPU per byte plus the cipher's, one core each, on this host's cores")
print()
print(f"{'connection per transaction':<24} {'per second':>22} {'handshake (client)':>19}")
for name, _ in CRR:
    tps = [t for t, _ in crr[name]]
    hs = [h for _, h in crr[name] if h]
    line = f"{name:<24} {med(tps):>8.1f} ({min(tps):.1f}-{max(tps):.1f})"
    if hs:
        line += f" {med(hs)*1000:>16.3f} ms"
    print(line)
if BEFORE:
    print()
    print(f"now / before ({BEFORE}), the same cases alternating; medians (min-max)")
    print(f"{'case':<24} {'now':>22} {'before':>22} {'now/before':>11}")
    for name, _ in CASES:
        now, then = [b for b, _, _ in results[name]], [b for b, _, _ in before[name]]
        print(f"{name:<24} {med(now)/1e9:>8.2f} ({min(now)/1e9:.2f}-{max(now)/1e9:.2f}) Gb"
              f" {med(then)/1e9:>8.2f} ({min(then)/1e9:.2f}-{max(then)/1e9:.2f}) Gb {med(now)/med(then):>10.3f}")
    for name, _ in CRR:
        now, then = [t for t, _ in crr[name]], [t for t, _ in crr_before[name]]
        print(f"{name:<24} {med(now):>8.1f} ({min(now):.1f}-{max(now):.1f}) /s"
              f" {med(then):>8.1f} ({min(then):.1f}-{max(then):.1f}) /s {med(now)/med(then):>10.3f}")
PY
