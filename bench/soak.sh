#!/usr/bin/env bash
# Soak test of the agent: many short tests back to back (with a junk
# connection, a half-finished handshake and a vanished client mixed in
# every tenth round) for a fixed time, on loopback. Prints the agent's
# open file descriptors and resident memory (from /proc/PID) after the
# first test, every 30 s, and at the end; they should be flat.
#
#   bench/soak.sh            # 5 minutes, 0.2 s tests
#   bench/soak.sh 60 0.5     # 1 minute, 0.5 s tests
#
# Uses target/release/nicbench when it exists (cargo build --release),
# else the debug build.
set -euo pipefail
seconds="${1:-300}"
test_seconds="${2:-0.2}"
cd "$(dirname "$0")/.."
bin=target/release/nicbench
[ -x "$bin" ] || { cargo build --quiet; bin=target/debug/nicbench; }

log=$(mktemp /tmp/nicbench-soak.XXXXXX)
"$bin" serve -B 127.0.0.1 -p 0 -v --max-connections-per-minute 0 --handshake-timeout 2s 2>"$log" &
agent=$!
trap 'kill "$agent" 2>/dev/null || true; wait "$agent" 2>/dev/null || true; rm -f "$log"' EXIT
for _ in $(seq 50); do
    port=$(sed -n 's/.*listening on 127\.0\.0\.1:\([0-9]*\).*/\1/p' "$log" | head -1)
    [ -n "$port" ] && break
    sleep 0.1
done
[ -n "$port" ] || { echo "soak: the agent did not start:" >&2; cat "$log" >&2; exit 1; }

fds() { ls /proc/"$agent"/fd | wc -l; }
rss_kib() { awk '/^VmRSS/ {print $2}' /proc/"$agent"/status; }
threads() { awk '/^Threads/ {print $2}' /proc/"$agent"/status; }

"$bin" tcp 127.0.0.1 -p "$port" -t "$test_seconds" -q >/dev/null
fds_start=$(fds); rss_start=$(rss_kib); threads_start=$(threads)
echo "soak: agent pid $agent on port $port, ${seconds} s of ${test_seconds} s tests ($bin)"
echo "soak: start: ${fds_start} open fds, ${rss_start} KiB RSS, ${threads_start} threads"

ok=0; failed=0; round=0
end=$((SECONDS + seconds))
next_report=$((SECONDS + 30))
while [ "$SECONDS" -lt "$end" ]; do
    round=$((round + 1))
    if [ "$SECONDS" -ge "$next_report" ]; then
        echo "soak: at $((seconds - end + SECONDS)) s: $(fds) open fds, $(rss_kib) KiB RSS, $(threads) threads, ${ok} tests"
        next_report=$((SECONDS + 30))
    fi
    case $((round % 4)) in
        0) extra=(-R) ;;
        1) extra=(-P 4) ;;
        2) extra=(--bidir) ;;
        *) extra=() ;;
    esac
    if "$bin" tcp 127.0.0.1 -p "$port" -t "$test_seconds" -q --wait 30s "${extra[@]}" >/dev/null; then
        ok=$((ok + 1))
    else
        failed=$((failed + 1))
    fi
    if [ $((round % 10)) -eq 0 ]; then
        # Junk, a silent connection, and a client killed mid-test.
        { printf 'GET / HTTP/1.0\r\n\r\n' >/dev/tcp/127.0.0.1/"$port"; } 2>/dev/null || true
        exec 9<>/dev/tcp/127.0.0.1/"$port"; exec 9>&-
        "$bin" tcp 127.0.0.1 -p "$port" -t 5 -q >/dev/null 2>&1 &
        victim=$!
        sleep 0.3
        kill -9 "$victim" 2>/dev/null || true
        wait "$victim" 2>/dev/null || true
        sleep 0.2
    fi
done
# Let the agent notice the last vanished client and free its slot.
sleep 3
fds_end=$(fds); rss_end=$(rss_kib); threads_end=$(threads)
echo "soak: end:   ${fds_end} open fds, ${rss_end} KiB RSS, ${threads_end} threads"
echo "soak: ${ok} tests passed, ${failed} failed, $((round / 10)) rounds of hostile clients, in ${seconds} s"
echo "soak: change: $((fds_end - fds_start)) fds, $((rss_end - rss_start)) KiB RSS"
[ "$failed" -eq 0 ] && [ "$fds_end" -le "$fds_start" ]
