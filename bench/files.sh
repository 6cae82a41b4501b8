#!/usr/bin/env bash
# nicbench files against the plain tools on loopback, alternating, medians:
#   - one big file:    nicbench files --from DIR   vs   cat FILE | nc   (receiver: nc -l > FILE)
#   - many small ones: nicbench files --from TREE  vs   tar c | nc      (receiver: nc -l | tar x)
# Both write what they receive to a file system (the same one); nicbench also
# checksums every file on both ends. Each figure is the wall time of the whole
# command (nicbench's with --raw-time 0: no raw TCP trial), so connection setup
# counts for both. Needs netcat-openbsd (apt-get install netcat-openbsd).
#
#   bench/files.sh [ROUNDS] [BIG_SIZE] [SMALL_COUNT]   (defaults: 3, 2G, 20000 files of 8 KiB)
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-3}
BIG=${2:-2G}
SMALL=${3:-20000}
command -v nc >/dev/null || { echo "needs nc (apt-get install netcat-openbsd)" >&2; exit 1; }
cargo build --release --quiet
NB=$PWD/target/release/nicbench
work=$(mktemp -d /var/tmp/nicbench-files-bench.XXXXXX)
log=$work/agent.log
mkdir -p "$work/big" "$work/small" "$work/scratch" "$work/out"
"$NB" serve -B 127.0.0.1 -p 0 -v --scratch "$work/scratch" 2>"$log" &
agent=$!
trap 'kill "$agent" 2>/dev/null || true; wait "$agent" 2>/dev/null || true; rm -rf "$work"' EXIT
port=
for _ in $(seq 100); do
    port=$(sed -n 's/.*listening on 127\.0\.0\.1:\([0-9]*\).*/\1/p' "$log" | head -1)
    [ -n "$port" ] && break
    sleep 0.1
done
[ -n "$port" ] || { echo "the agent did not start:" >&2; cat "$log" >&2; exit 1; }

head -c "$(numfmt --from=iec "$BIG")" /dev/urandom > "$work/big/file"
python3 - "$work/small" "$SMALL" <<'PY'
import os, sys
root, count = sys.argv[1], int(sys.argv[2])
for i in range(count):
    d = os.path.join(root, f"d{i // 1000:03}")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, f"f{i:06}"), "wb") as f:
        f.write(os.urandom(8192))
PY
sync

now() { date +%s.%N; }
NCPORT=$((port + 1000))
ours() {
    local t0; t0=$(now)
    "$NB" files 127.0.0.1 -p "$port" --from "$1" --raw-time 0 --no-save --json > "$work/last.json"
    echo "$(now) - $t0" | bc
}
median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }

# One run of the plain pipeline: $1 = sender shell, $2 = receiver shell
# (run in the output directory); timed from the listener being ready.
plain() {
    rm -rf "$work/out"; mkdir -p "$work/out"
    bash -c "cd '$work/out' && nc -l 127.0.0.1 $NCPORT | $2" &
    local receiver=$!
    for _ in $(seq 200); do ss -ltn "sport = :$NCPORT" | grep -q LISTEN && break; sleep 0.01; done
    local t0; t0=$(now)
    bash -c "$1 | nc -N 127.0.0.1 $NCPORT"
    wait "$receiver"
    echo "$(now) - $t0" | bc
}

big_bytes=$(stat -c %s "$work/big/file")
small_bytes=$(du -sb "$work/small" | cut -f1)
: > "$work/ours-big"; : > "$work/nc-big"; : > "$work/ours-small"; : > "$work/tar-small"
for round in $(seq "$ROUNDS"); do
    ours "$work/big" >> "$work/ours-big"
    plain "cat '$work/big/file'" "cat > file" >> "$work/nc-big"
    ours "$work/small" >> "$work/ours-small"
    plain "tar c -C '$work/small' ." "tar x" >> "$work/tar-small"
    echo "round $round: big nicbench $(tail -1 "$work/ours-big") s, cat|nc $(tail -1 "$work/nc-big") s;" \
         "small nicbench $(tail -1 "$work/ours-small") s, tar|nc $(tail -1 "$work/tar-small") s"
done
report() {
    local label=$1 bytes=$2 ours theirs
    ours=$(median < "$work/ours-$3"); theirs=$(median < "$work/$4")
    python3 -c "
b, o, t = $bytes, $ours, $theirs
print(f'$label: nicbench {o:.2f} s ({b / o / 1e6:.1f} MB/s), $5 {t:.2f} s ({b / t / 1e6:.1f} MB/s); '
      f'nicbench/$5 speed ratio {t / o:.2f} (median of $ROUNDS)')"
}
report "one $BIG file" "$big_bytes" big nc-big "cat|nc"
report "$SMALL files of 8 KiB" "$small_bytes" small tar-small "tar|nc"
