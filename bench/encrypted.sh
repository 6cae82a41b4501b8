#!/usr/bin/env bash
# What encryption costs on loopback: nicbench tcp over plain TCP and over TLS 1.3 with
# each cipher, alternating in one run, one stream.
#
#   bench/encrypted.sh [ROUNDS] [SECONDS]      (defaults: 3 rounds, 3 s per test)
#
# Each round runs every case once, in turn (tcp, tls aes128-gcm, tls aes256-gcm, tls
# chacha20-poly1305), so drifts of the machine hit all of them alike. For each case it
# prints the median throughput at the receiver with its min-max, each end's CPU per byte
# (its own process's user+system seconds per GB received, from the result), and for TLS
# the cipher's speed on one core of this host (sealing, from the result's facts) and the
# ratio the issue sets: TLS / min(plain TCP, the cipher's one-core speed), target 0.80.
#
# Then handshakes per second: `rr --crr` over TCP and over TLS (a new connection, and a
# TLS 1.3 handshake, per transaction), in the same rotation, with the client's mean
# handshake time from the result.
#
# Not yet measured here: QUIC (no QUIC transport yet); the script says so.
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
agent = subprocess.Popen([BIN, "serve", "-p", "0", "-B", "127.0.0.1"], stderr=subprocess.PIPE, text=True, env=env)
port = None
for line in agent.stderr:
    if "listening on " in line:
        port = line.split("listening on ")[1].split()[0].rsplit(":", 1)[1]
        break
if port is None:
    raise SystemExit("the agent did not start")

CASES = [("tcp", []), *[(f"tls {c}", ["--transport", "tls", "--cipher", c]) for c in ("aes128-gcm", "aes256-gcm", "chacha20-poly1305")]]
results = {name: [] for name, _ in CASES}
CRR = [("rr tcp --crr", ["--crr"]), ("rr tls --crr", ["--proto", "tls", "--crr"])]
crr = {name: [] for name, _ in CRR}

def run_crr(extra):
    out = subprocess.run([BIN, "rr", "127.0.0.1", "-p", port, "-t", str(secs), "-O", "0.5", "--json", *extra],
                         capture_output=True, text=True, env=env, timeout=secs * 10 + 60)
    if out.returncode != 0:
        raise SystemExit(f"nicbench rr {' '.join(extra)} failed: {out.stderr}")
    d = json.loads(out.stdout)
    tls = d["streams"][0]["sender"].get("tls") or {}
    return d["sum"]["rr"]["transactions_per_second"], tls.get("handshake_seconds")

def run(extra):
    out = subprocess.run([BIN, "tcp", "127.0.0.1", "-p", port, "-t", str(secs), "-O", "0.5", "--json", *extra],
                         capture_output=True, text=True, env=env, timeout=secs * 10 + 60)
    if out.returncode != 0:
        raise SystemExit(f"nicbench tcp {' '.join(extra)} failed: {out.stderr}")
    d = json.loads(out.stdout)
    bps = d["sum"]["receiver"]["bits_per_second"]
    gb = d["sum"]["receiver"]["bytes"] / 1e9
    per_gb = {}
    for end in ("client", "agent"):
        p = d["cpu"][end]["process"]
        per_gb[end] = (p["user_seconds"] + p["system_seconds"]) / gb if gb > 0 else float("nan")
    cipher_speed = None
    tls = d["streams"][0]["sender"].get("tls")
    if tls:
        cipher_speed = tls.get("cipher_one_core_bits_per_second")
    return bps, per_gb, cipher_speed

try:
    for r in range(rounds):
        for name, extra in CASES:
            results[name].append(run(extra))
        for name, extra in CRR:
            crr[name].append(run_crr(extra))
        print(f"round {r + 1}/{rounds} done", file=sys.stderr)
finally:
    agent.send_signal(signal.SIGTERM)
    agent.wait(timeout=10)

def med(xs):
    return statistics.median(xs)

tcp = med([b for b, _, _ in results["tcp"]])
print(f"nicbench tcp, loopback, 1 stream, {secs:g} s per test, {rounds} rounds alternating; medians (min-max)")
print(f"{'case':<24} {'Gbit/s':>22} {'client s/GB':>12} {'agent s/GB':>12} {'cipher 1 core':>14} {'/min(tcp,cipher)':>17}")
for name, _ in CASES:
    rows = results[name]
    bps = [b for b, _, _ in rows]
    line = f"{name:<24} {med(bps)/1e9:>8.2f} ({min(bps)/1e9:.2f}-{max(bps)/1e9:.2f})"
    line += f" {med([g['client'] for _, g, _ in rows]):>12.3f} {med([g['agent'] for _, g, _ in rows]):>12.3f}"
    speeds = [s for _, _, s in rows if s]
    if speeds:
        bound = min(tcp, med(speeds))
        line += f" {med(speeds)/1e9:>10.2f} Gb/s {med(bps)/bound:>16.2f}"
    print(line)
print("target: TLS >= 0.80 of min(plain TCP, the cipher on one core)")
print()
print(f"{'connection per transaction':<24} {'per second':>22} {'handshake (client)':>19}")
for name, _ in CRR:
    tps = [t for t, _ in crr[name]]
    hs = [h for _, h in crr[name] if h]
    line = f"{name:<24} {med(tps):>8.1f} ({min(tps):.1f}-{max(tps):.1f})"
    if hs:
        line += f" {med(hs)*1000:>16.3f} ms"
    print(line)
print("QUIC: no transport yet")
PY
