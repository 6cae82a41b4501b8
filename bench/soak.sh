#!/usr/bin/env bash
# Soak test of the agent: many short tests back to back (with a junk
# connection, a half-finished handshake and a vanished client mixed in
# every tenth round) for a fixed time, on loopback. Every tenth round also
# plays the hostile cases of issue 31: 12 silent sockets held from one
# address (127.0.0.2; the agent keeps 8 of them at most), a stalled -R
# client that reads nothing (the slot is freed 5 s after its 0.5 s test),
# and a test spec without a rate sent to a second agent started with
# --max-rate 1M (refused). And the families of issue 41 that loopback can
# play: the worst request the agent allows for memory (a reverse test of
# 16 streams x 64 MiB, the default --max-test-memory 1G) and one past it
# (32 x 64 MiB, refused), 40 silent sockets from 127.0.0.3 on the iperf3
# port (they count against the address's share there too), and an iperf3
# client on that port after them when iperf3 is installed. Each hostile
# round ends with a normal test, counted on its own ("after attacks").
# Prints both agents' open file descriptors, resident memory (VmRSS, and
# the peak VmHWM) and threads (from /proc/PID) after the first test, every
# 30 s, and at the end; they should be flat (the peak is the worst request).
#
#   bench/soak.sh            # 5 minutes, 0.2 s tests
#   bench/soak.sh 600        # the 10 minutes issue 41 asks for
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
"$bin" serve -B 127.0.0.1 -p 0 -v --max-connections-per-minute 0 --handshake-timeout 2s --iperf3-port 0 2>"$log" &
agent=$!
trap 'kill "$agent" 2>/dev/null || true; wait "$agent" 2>/dev/null || true; rm -f "$log"' EXIT
for _ in $(seq 50); do
    port=$(sed -n 's/.*listening on 127\.0\.0\.1:\([0-9]*\).*/\1/p' "$log" | head -1)
    [ -n "$port" ] && break
    sleep 0.1
done
[ -n "$port" ] || { echo "soak: the agent did not start:" >&2; cat "$log" >&2; exit 1; }
iperf3_port=$(sed -n 's/.*listening for iperf3 clients on 127\.0\.0\.1:\([0-9]*\).*/\1/p' "$log" | head -1)
[ -n "$iperf3_port" ] || { echo "soak: the agent has no iperf3 port:" >&2; cat "$log" >&2; exit 1; }

fds() { ls /proc/"${1:-$agent}"/fd | wc -l; }
rss_kib() { awk '/^VmRSS/ {print $2}' /proc/"${1:-$agent}"/status; }
hwm_kib() { awk '/^VmHWM/ {print $2}' /proc/"${1:-$agent}"/status; }
threads() { awk '/^Threads/ {print $2}' /proc/"${1:-$agent}"/status; }

# The second agent, which holds every test to --max-rate 1M.
limited_log=$(mktemp /tmp/nicbench-soak-limited.XXXXXX)
"$bin" serve -B 127.0.0.1 -p 0 -v --max-rate 1M --max-connections-per-minute 0 2>"$limited_log" &
limited=$!
trap 'kill "$agent" "$limited" 2>/dev/null || true; wait "$agent" "$limited" 2>/dev/null || true; rm -f "$log" "$limited_log"' EXIT
for _ in $(seq 50); do
    limited_port=$(sed -n 's/.*listening on 127\.0\.0\.1:\([0-9]*\).*/\1/p' "$limited_log" | head -1)
    [ -n "$limited_port" ] && break
    sleep 0.1
done
[ -n "$limited_port" ] || { echo "soak: the --max-rate agent did not start:" >&2; cat "$limited_log" >&2; exit 1; }

# hostile CASE PORT: one of issue 31's clients, as a raw protocol client.
#   hold:    12 silent sockets from 127.0.0.2, held 1 s; prints how many
#            the agent closed at once with a refusal
#   stall:   a 0.5 s -R test whose client reads nothing, held 8 s
#   rateless: a udp spec without a rate; prints the agent's answer
#   silent:  40 silent sockets from 127.0.0.3 on PORT (the iperf3 port),
#            held 1 s; prints how many the agent closed at once
hostile() {
    python3 - "$@" <<'PY'
import json, socket, struct, sys, time
case, port = sys.argv[1], int(sys.argv[2])
def frame(obj):
    body = json.dumps(obj).encode()
    return struct.pack(">I", len(body)) + body
def recv(sock):
    head = b""
    while len(head) < 4:
        chunk = sock.recv(4 - len(head))
        if not chunk:
            return None
        head += chunk
    (length,) = struct.unpack(">I", head)
    body = b""
    while len(body) < length:
        chunk = sock.recv(length - len(body))
        if not chunk:
            return None
        body += chunk
    return json.loads(body)
hello = {"type": "hello", "magic": "nicbench", "protocol_version": 1, "software_version": "soak",
         "workloads": ["tcp", "udp"]}
def connect(source="127.0.0.1"):
    sock = socket.socket()
    sock.bind((source, 0))
    sock.connect(("127.0.0.1", port))
    sock.settimeout(10)
    return sock
if case == "hold":
    held = [connect("127.0.0.2") for _ in range(12)]
    refused = 0
    for sock in held:
        sock.settimeout(0.2)
        try:
            message = recv(sock)
            refused += message is not None and "max-connections-per-address" in message.get("message", "")
        except socket.timeout:
            pass
    time.sleep(1)
    print(refused)
elif case == "silent":
    held = [connect("127.0.0.3") for _ in range(40)]
    closed = 0
    for sock in held:
        sock.settimeout(0.2)
        # An admitted socket hears nothing until it sends iperf3's cookie:
        # any answer (a refusal, or the end) within 0.2 s is a cut.
        try:
            sock.recv(1)
            closed += 1
        except socket.timeout:
            pass
        except OSError:
            closed += 1
    time.sleep(1)
    print(closed)
elif case == "stall":
    control = connect()
    control.sendall(frame(hello))
    recv(control)
    spec = {"workload": "tcp", "direction": "reverse", "streams": 1, "message_bytes": 131072, "duration_seconds": 0.5,
            "interval_seconds": 1}
    control.sendall(frame({"type": "test_request", "spec": spec, "wait_seconds": 30}))
    message = recv(control)
    while message and message["type"] == "queued":
        message = recv(control)
    if not message or message["type"] != "accepted":
        print(message)
        sys.exit(0)
    data = socket.create_connection(("127.0.0.1", message["data_ports"][0]))
    data.sendall(bytes.fromhex(message["token"]) + struct.pack(">I", 1))
    recv(control)
    control.sendall(frame({"type": "start"}))
    time.sleep(8)
elif case == "rateless":
    control = connect()
    control.sendall(frame(hello))
    recv(control)
    spec = {"workload": "udp", "direction": "reverse", "streams": 1, "message_bytes": 1200, "duration_seconds": 2,
            "interval_seconds": 1, "params": {}}
    control.sendall(frame({"type": "test_request", "spec": spec}))
    print(recv(control))
PY
}

"$bin" tcp 127.0.0.1 -p "$port" -t "$test_seconds" -q >/dev/null
"$bin" udp 127.0.0.1 -p "$limited_port" -t "$test_seconds" -b 500K -q >/dev/null
fds_start=$(fds); rss_start=$(rss_kib); threads_start=$(threads)
lfds_start=$(fds "$limited"); lrss_start=$(rss_kib "$limited"); lthreads_start=$(threads "$limited")
echo "soak: agent pid $agent on port $port (iperf3 port $iperf3_port), ${seconds} s of ${test_seconds} s tests ($bin)"
echo "soak: start: ${fds_start} open fds, ${rss_start} KiB RSS (peak $(hwm_kib)), ${threads_start} threads"
echo "soak: --max-rate 1M agent pid $limited on port $limited_port"
echo "soak: start: ${lfds_start} open fds, ${lrss_start} KiB RSS, ${lthreads_start} threads (--max-rate agent)"
held_refused=0; rateless_refused=0; stalls=0; stall_pids=()
worst_ok=0; past_refused=0; silent_closed=0; silent_cut=0; iperf3_ok=0; after_ok=0; after_failed=0
have_iperf3=0; command -v iperf3 >/dev/null && have_iperf3=1

ok=0; failed=0; round=0
end=$((SECONDS + seconds))
next_report=$((SECONDS + 30))
while [ "$SECONDS" -lt "$end" ]; do
    round=$((round + 1))
    if [ "$SECONDS" -ge "$next_report" ]; then
        echo "soak: at $((seconds - end + SECONDS)) s: $(fds) open fds, $(rss_kib) KiB RSS (peak $(hwm_kib)), $(threads) threads, ${ok} tests;" \
            "--max-rate agent: $(fds "$limited") fds, $(rss_kib "$limited") KiB RSS, $(threads "$limited") threads"
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
        # Issue 31: sockets held from one address, a stalled -R client (in
        # the background: the next tests wait in line for its slot), and a
        # spec without a rate against --max-rate.
        held=$(hostile hold "$port")
        [ "$held" -ge 4 ] && held_refused=$((held_refused + 1))
        hostile stall "$port" >/dev/null &
        stall_pids+=($!)
        stalls=$((stalls + 1))
        answer=$(hostile rateless "$limited_port")
        case "$answer" in *"its --max-rate"*) rateless_refused=$((rateless_refused + 1)) ;; esac
        # Issue 41: the most memory one request may ask for, and past it.
        "$bin" tcp 127.0.0.1 -p "$port" -R -P 16 -l 64M -t "$test_seconds" -q --wait 30s --no-save >/dev/null \
            && worst_ok=$((worst_ok + 1))
        answer=$("$bin" tcp 127.0.0.1 -p "$port" -R -P 32 -l 64M -t "$test_seconds" -q --wait 30s --no-save 2>&1 \
            >/dev/null || true)
        case "$answer" in *"max-test-memory"*) past_refused=$((past_refused + 1)) ;; esac
        # Silent sockets on the iperf3 port, then an iperf3 client there.
        closed=$(hostile silent "$iperf3_port")
        [ "$closed" -ge 1 ] && silent_closed=$((silent_closed + 1))
        silent_cut=$((silent_cut + closed))
        if [ "$have_iperf3" -eq 1 ] && iperf3 -c 127.0.0.1 -p "$iperf3_port" -t 1 >/dev/null 2>&1; then
            iperf3_ok=$((iperf3_ok + 1))
        fi
        # A normal test after the attacks: the agent still serves.
        if "$bin" tcp 127.0.0.1 -p "$port" -t "$test_seconds" -q --wait 30s >/dev/null; then
            after_ok=$((after_ok + 1))
        else
            after_failed=$((after_failed + 1))
        fi
    fi
done
# Let the agents notice the last vanished and stalled clients and free their slots.
for job in "${stall_pids[@]}"; do wait "$job" 2>/dev/null || true; done
sleep 3
fds_end=$(fds); rss_end=$(rss_kib); threads_end=$(threads)
lfds_end=$(fds "$limited"); lrss_end=$(rss_kib "$limited"); lthreads_end=$(threads "$limited")
echo "soak: end:   ${fds_end} open fds, ${rss_end} KiB RSS (peak $(hwm_kib)), ${threads_end} threads"
echo "soak: end:   ${lfds_end} open fds, ${lrss_end} KiB RSS, ${lthreads_end} threads (--max-rate agent)"
echo "soak: ${ok} tests passed, ${failed} failed, $((round / 10)) rounds of hostile clients, in ${seconds} s"
echo "soak: issue 31 rounds: ${held_refused} of held sockets refused past the address's share," \
    "${stalls} stalled -R clients, ${rateless_refused} rate-less specs refused"
rounds=$((round / 10))
echo "soak: issue 41 rounds: ${worst_ok} 16 x 64 MiB reverse tests served, ${past_refused} 32 x 64 MiB refused," \
    "silent iperf3-port sockets cut in ${silent_closed} rounds (${silent_cut} of $((rounds * 40)) sockets)," \
    "${iperf3_ok} iperf3 clients served after them" \
    "(iperf3 installed: ${have_iperf3}); normal test after each: ${after_ok} passed, ${after_failed} failed"
echo "soak: change: $((fds_end - fds_start)) fds, $((rss_end - rss_start)) KiB RSS, $((threads_end - threads_start)) threads;" \
    "--max-rate agent: $((lfds_end - lfds_start)) fds, $((lrss_end - lrss_start)) KiB RSS, $((lthreads_end - lthreads_start)) threads"
# The files-flood round (issue 31, item 3): its own agent and scratch.
files_ok=0
bench/soak-files.sh "$bin" 5 && files_ok=1
[ "$files_ok" -eq 1 ] && [ "$failed" -eq 0 ] && [ "$fds_end" -le "$fds_start" ] && [ "$lfds_end" -le "$lfds_start" ] \
    && [ "$held_refused" -eq "$rounds" ] && [ "$rateless_refused" -eq "$rounds" ] \
    && [ "$after_failed" -eq 0 ] && [ "$after_ok" -eq "$rounds" ] && [ "$worst_ok" -eq "$rounds" ] \
    && [ "$past_refused" -eq "$rounds" ] && [ "$silent_closed" -eq "$rounds" ] \
    && { [ "$have_iperf3" -eq 0 ] || [ "$iperf3_ok" -eq "$rounds" ]; }
