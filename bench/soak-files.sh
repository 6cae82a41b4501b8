#!/usr/bin/env bash
# A files-flood round for the soak (issue 31): an agent with its own
# scratch directory and --max-files-bytes 1M takes sets of many empty
# files back to back — accepted ones (2000 files: their entries fit),
# ones refused up front (5000 files: 256 B of entry each pass 1 MiB),
# and deep trees refused by the client (more than 16 directories) —
# then shows the agent's fds, threads and RSS flat and the scratch
# directory empty. The hostile senders themselves (more files than
# declared, deep trees of long names) are in tests/cli/files.rs.
#
#   bench/soak-files.sh [BIN] [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
bin="${1:-target/debug/nicbench}"
rounds="${2:-20}"
[ -x "$bin" ] || { cargo build --quiet; bin=target/debug/nicbench; }

work=$(mktemp -d /tmp/nicbench-soak-files.XXXXXX)
mkdir -p "$work/scratch" "$work/deep"
"$bin" serve -B 127.0.0.1 -p 0 -v --scratch "$work/scratch" --max-files-bytes 1M 2>"$work/log" &
agent=$!
trap 'kill "$agent" 2>/dev/null || true; wait "$agent" 2>/dev/null || true; rm -rf "$work"' EXIT
for _ in $(seq 50); do
    port=$(sed -n 's/.*listening on 127\.0\.0\.1:\([0-9]*\).*/\1/p' "$work/log" | head -1)
    [ -n "$port" ] && break
    sleep 0.1
done
[ -n "$port" ] || { echo "soak-files: the agent did not start:" >&2; cat "$work/log" >&2; exit 1; }
deep="$work/deep/$(printf 'd/%.0s' $(seq 17))"
mkdir -p "$deep" && : >"$deep/f"

fds() { ls /proc/"$agent"/fd | wc -l; }
rss_kib() { awk '/^VmRSS/ {print $2}' /proc/"$agent"/status; }
threads() { awk '/^Threads/ {print $2}' /proc/"$agent"/status; }
files() { "$bin" files 127.0.0.1 -p "$port" --raw-time 0 --no-save -q "$@" >/dev/null 2>&1; }

files --generate 2000x0
fds_start=$(fds); rss_start=$(rss_kib); threads_start=$(threads)
echo "soak-files: start: ${fds_start} open fds, ${rss_start} KiB RSS, ${threads_start} threads"
accepted=0; refused=0; wrong=0
for _ in $(seq "$rounds"); do
    if files --generate 2000x0; then accepted=$((accepted + 1)); else wrong=$((wrong + 1)); fi
    if files --generate 5000x0; then wrong=$((wrong + 1)); else refused=$((refused + 1)); fi
    if files --from "$work/deep"; then wrong=$((wrong + 1)); else refused=$((refused + 1)); fi
done
fds_end=$(fds); rss_end=$(rss_kib); threads_end=$(threads)
left=$(find "$work/scratch" -mindepth 1 | wc -l)
echo "soak-files: end:   ${fds_end} open fds, ${rss_end} KiB RSS, ${threads_end} threads"
echo "soak-files: ${accepted} sets accepted, ${refused} refused, ${wrong} not as expected; ${left} entries left in the scratch directory"
echo "soak-files: change: $((fds_end - fds_start)) fds, $((threads_end - threads_start)) threads, $((rss_end - rss_start)) KiB RSS"
[ "$wrong" -eq 0 ] && [ "$left" -eq 0 ] && [ "$fds_end" -le "$fds_start" ] && [ "$threads_end" -le "$threads_start" ]
