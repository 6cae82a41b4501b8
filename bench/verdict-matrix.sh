#!/usr/bin/env bash
# The verdict against labs built with one known cause (issue 40), as a table:
# scenario, what the lab built, the verdict (kind, side), and whether it names
# what was built. The same scenarios as tests/cli/verdict_scenarios.rs and
# the multi-link ones of tests/cli/links.rs, which assert them; this prints
# them with the verdict's line. Needs root and
# iproute2 (a lab). Every lab it makes is named vm<PID><n> and removed on exit.
#
#   bench/verdict-matrix.sh [NICBENCH]   (default: target/release/nicbench, built)
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -ge 1 ]; then
    NB=$1
else
    cargo build --release --quiet
    NB=$PWD/target/release/nicbench
fi
n=0
current=
cleanup() { [ -n "$current" ] && "$NB" lab down "$current" >/dev/null 2>&1 || true; }
trap cleanup EXIT

# scenario "NAME" "WHAT WAS BUILT" "EXPECTED KINDS|" "EXPECTED SIDE" "LAB UP ARGS" -- TEST ARGS
scenario() {
    local name=$1 built=$2 kinds=$3 side=$4 up=$5
    shift 6
    n=$((n + 1))
    current=vm$$$n
    # shellcheck disable=SC2086
    "$NB" lab up "$current" --hosts 2 $up >/dev/null
    local json
    json=$(mktemp)
    "$NB" lab exec "$current" a -- nicbench "$@" --json --no-save >"$json" 2>/dev/null || echo '{}' >"$json"
    "$NB" lab down "$current" >/dev/null
    current=
    python3 - "$name" "$built" "$kinds" "$side" "$json" <<'EOF'
import json, sys
name, built, kinds, side, path = sys.argv[1:]
v = (json.load(open(path)) or {}).get("verdict") or {}
kind, found = v.get("kind", "(no run)"), v.get("side") or "-"
right = kind in kinds.split("|") and (side == "*" or found == side)
print(f"| {name} | {built} | {kind} | {found} | {'right' if right else 'WRONG'} |")
print(f"|  |  | {v.get('summary', '')} |  |  |")
EOF
    rm -f "$json"
}

echo "| scenario | built | verdict kind | side | right? |"
echo "| --- | --- | --- | --- | --- |"
cpu="cgroup_throttled|cpu_starved|cpu_bound"
scenario "receiver CPU-starved, through a router" "b at 2% of a core, 1 Gbit/s router" "$cpu" receiver \
    "--via-router --rate 1gbit --cpu-limit b=2%" -- tcp b -t 3
scenario "sender CPU-starved, direct" "a at 2% of a core" "$cpu" sender \
    "--cpu-limit a=2%" -- tcp b -t 3
scenario "sender CPU-starved, through a router" "a at 2%, 10 Gbit/s router" "$cpu" sender \
    "--via-router --rate 10gbit --cpu-limit a=2%" -- tcp b -t 3
scenario "link-bound" "100 Mbit/s router" link_bound path \
    "--via-router --rate 100mbit" -- tcp b -t 3 -O 1
scenario "UDP into a slower router" "-b 200M into a 100 Mbit/s router" link_bound path \
    "--via-router --rate 100mbit" -- udp b -t 3 -O 1 -b 200M
scenario "UDP receiver starved" "b at 2%, -b 500M" "$cpu" receiver \
    "--cpu-limit b=2%" -- udp b -t 3 -b 500M
scenario "UDP sender below its offer" "a at 2%, -b 2G" "$cpu" sender \
    "--cpu-limit a=2%" -- udp b -t 3 -b 2G
scenario "deep router queue, cubic" "100 Mbit/s router, 200 ms queue" added_delay path \
    "--via-router --rate 100mbit --queue 200ms" -- loaded b -t 4 --idle 2s --phases download -C cubic
scenario "deep router queue, bbr" "100 Mbit/s router, 200 ms queue" "added_delay|no_added_delay" "*" \
    "--via-router --rate 100mbit --queue 200ms" -- loaded b -t 4 --idle 2s --phases download -C bbr
scenario "files onto a starved receiver" "b at 3%, 4x16M" "$cpu" receiver \
    "--cpu-limit b=3%" -- files b --generate 4x16M --raw-time 2s
scenario "files of a few kilobytes" "3000 files of 4 KiB" "files_per_file_overhead|$cpu" receiver \
    "" -- files b --generate 3000x4K --raw-time 2s
scenario "small receive window" "--remote-rcvbuf 4K, 10 Gbit/s router" "receive_window_limited|not_sure" "*" \
    "--via-router --rate 10gbit" -- tcp b -t 3 --remote-rcvbuf 4K
scenario "two causes: both ends starved" "a and b at 2% of a core" "$cpu" "*" \
    "--cpu-limit a=2% --cpu-limit b=2%" -- tcp b -t 3
scenario "two causes: starved receiver, small window" "b at 2%, --remote-rcvbuf 4K, 1 Gbit/s router" "$cpu" receiver \
    "--via-router --rate 1gbit --cpu-limit b=2%" -- tcp b -t 3 --remote-rcvbuf 4K
scenario "multi-link, one slow link" "3 links at 100 Mbit/s, one at 10" link_slow path \
    "--links 3 --via-router --rate 100mbit --rate 5:b=10mbit" -- tcp b --links auto -t 3
scenario "multi-link, starved receiver" "3 links at 100 Mbit/s, b at 1%" "$cpu" receiver \
    "--links 3 --via-router --rate 100mbit --cpu-limit b=1%" -- tcp b --links auto -t 3
scenario "multi-link UDP, starved receiver" "3 links, -b 200M each, b at 4%" "$cpu" receiver \
    "--links 3 --cpu-limit b=4%" -- udp b --links auto -t 3 -b 200M
