#!/usr/bin/env bash
# The dry run's estimate against the real time of each example plan
# (issue 48: "the dry run's estimate counts repetitions, sweep rounds and
# files sets, and bench/ shows estimate against real time for the plans").
#
# For each plan in examples/ (or those named), the lab commands of its
# header are run as written (`nicbench` is this build), the plan is first
# run with --dry-run (its "estimated time"), then for real, timed; the
# table at the end gives estimate, real time and their ratio.
#
#   sudo bench/plan-estimate.sh                  # every example (~15 min)
#   sudo bench/plan-estimate.sh small-messages   # one
#
# Needs root and iproute2 (the lab). Each lab is taken down afterwards,
# also on failure.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet
NB=$PWD/target/release/nicbench
[ "$(id -u)" = 0 ] || { echo "plan-estimate.sh: the lab needs root" >&2; exit 1; }

plans=("$@")
if [ ${#plans[@]} -eq 0 ]; then
    for f in examples/*.toml; do plans+=("$(basename "$f" .toml)"); done
fi

work=$(mktemp -d /tmp/nicbench-plan-estimate.XXXXXX)
labs=()
agents=()
cleanup() {
    for pid in "${agents[@]}"; do kill "$pid" 2>/dev/null || true; done
    for lab in "${labs[@]}"; do "$NB" lab down "$lab" >/dev/null 2>&1 || true; done
    rm -rf "$work"
}
trap cleanup EXIT

# Seconds of a `human` duration: "42 s", "3 min 05 s", "2 h 10 min".
seconds_of() {
    awk '{ s = 0; for (i = 1; i < NF; i += 2) {
             if ($(i+1) == "s") s += $i; else if ($(i+1) == "min") s += 60 * $i; else if ($(i+1) == "h") s += 3600 * $i }
           print s }' <<<"$1"
}

results=()
for name in "${plans[@]}"; do
    file=examples/$name.toml
    [ -f "$file" ] || { echo "no plan $file" >&2; exit 1; }
    # The header's commands: "#   nicbench ..." lines and the key line.
    mapfile -t header < <(sed -n 's/^#   //p' "$file")
    run_line=
    for line in "${header[@]}"; do
        case "$line" in
        "nicbench lab up "*)
            lab=$(awk '{print $4}' <<<"$line")
            labs+=("$lab")
            eval "\"$NB\" ${line#nicbench }" >/dev/null
            ;;
        "head -c 32 /dev/urandom"*)
            eval "$line"
            ;;
        "nicbench lab exec "*" serve "*)
            line=${line% &}
            eval "\"$NB\" ${line#nicbench }" >"$work/$name-agent.log" 2>&1 &
            agents+=($!)
            sleep 1
            ;;
        "nicbench lab exec "*" run "*)
            run_line=$line
            ;;
        esac
    done
    [ -n "$run_line" ] || { echo "$file: no run command in its header" >&2; exit 1; }
    # nicbench lab exec LAB HOST -- nicbench run PLAN --db DB: this build, a fresh db.
    cmd=${run_line#nicbench }
    cmd=${cmd/-- nicbench/-- $NB}
    cmd="${cmd/%--db */--db $work/$name.db} --restart"
    dry=$(eval "\"$NB\" $cmd --dry-run" 2>&1) || { echo "$dry" >&2; exit 1; }
    estimate=$(sed -n 's/^estimated time: \(.*\) for [0-9]* case(s).*/\1/p' <<<"$dry")
    cases=$(sed -n 's/^estimated time: .* for \([0-9]*\) case(s).*/\1/p' <<<"$dry")
    echo "== $name: $cases cases, estimated $estimate" >&2
    start=$(date +%s.%N)
    eval "\"$NB\" $cmd" >"$work/$name.out" 2>&1 || { cat "$work/$name.out" >&2; exit 1; }
    end=$(date +%s.%N)
    tail -n 3 "$work/$name.out" | sed 's/^/   /' >&2
    real=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.0f", b - a }')
    est=$(seconds_of "$estimate")
    results+=("$(printf '%-16s %6s %10s %10s %7s' "$name" "$cases" "${est} s" "${real} s" \
        "$(awk -v e="$est" -v r="$real" 'BEGIN { printf "%.2f", r / e }')")")
    for pid in "${agents[@]}"; do kill "$pid" 2>/dev/null || true; done
    agents=()
    "$NB" lab down "$lab" >/dev/null 2>&1 || true
done

printf '%-16s %6s %10s %10s %7s\n' plan cases estimate real real/est
printf '%s\n' "${results[@]}"
