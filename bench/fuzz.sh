#!/usr/bin/env bash
# Fuzzes nicbench's decoders of peer input for a bounded time with
# cargo-fuzz (libFuzzer, needs a nightly toolchain):
#   decode       the control-protocol decoder (fuzz/fuzz_targets/decode.rs)
#   iperf3_wire  iperf3's framing, parameters, results, cookies, states and
#                UDP headers (fuzz/fuzz_targets/iperf3_wire.rs)
#   files_wire   the files receiver on a sender's bytes, into a real scratch
#                directory under a budget (fuzz/fuzz_targets/files_wire.rs)
#   iperf3_port  what the agent's iperf3 port reads before admitting a
#                client: parameters and RSA credentials
#                (fuzz/fuzz_targets/iperf3_port.rs)
#
#   bench/fuzz.sh                  # 60 s for each target
#   bench/fuzz.sh 600              # 10 min for each
#   bench/fuzz.sh 300 iperf3_wire  # one target
#
# Without nightly or cargo-fuzz, it falls back to the stable property tests
# of the same paths (protocol::framing::properties, iperf3::properties,
# workload::files::properties),
# repeated with many more cases for about the same time
# (NICBENCH_FUZZ_STABLE=1 forces that path). A crash leaves its input in
# fuzz/artifacts/TARGET/.
set -euo pipefail
seconds="${1:-60}"
targets="${2:-decode iperf3_wire files_wire iperf3_port}"
cd "$(dirname "$0")/.."

if [ -z "${NICBENCH_FUZZ_STABLE:-}" ] && rustup toolchain list 2>/dev/null | grep -q '^nightly' \
    && cargo +nightly fuzz --version >/dev/null 2>&1; then
    cd fuzz
    for target in $targets; do
        echo "fuzz: cargo fuzz run ${target} for ${seconds} s (nightly, libFuzzer)" >&2
        mkdir -p "corpus/${target}"
        # New inputs go to corpus/TARGET (ignored by git); seeds/TARGET holds hand-made inputs.
        cargo +nightly fuzz run "${target}" "corpus/${target}" "seeds/${target}" -- \
            -max_total_time="${seconds}" -max_len=70000 -timeout=5 -rss_limit_mb=2048 -print_final_stats=1
    done
else
    echo "fuzz: stable fallback (nightly or cargo-fuzz missing, or NICBENCH_FUZZ_STABLE set;" >&2
    echo "fuzz: for libFuzzer: rustup toolchain install nightly; cargo install cargo-fuzz)" >&2
    for target in $targets; do
        case "$target" in
            decode) filter=protocol::framing::properties ;;
            iperf3_wire | iperf3_port) filter=iperf3::properties ;;
            files_wire) filter=workload::files::properties ;;
            *) echo "fuzz: unknown target '$target' (decode, iperf3_wire, files_wire, iperf3_port)" >&2; exit 2 ;;
        esac
        echo "fuzz: running the stable property tests ${filter} instead for about ${seconds} s" >&2
        end=$((SECONDS + seconds))
        rounds=0
        while [ "$SECONDS" -lt "$end" ]; do
            PROPTEST_CASES=20000 cargo test --release --quiet --lib "$filter" >/dev/null
            rounds=$((rounds + 1))
        done
        echo "fuzz: ${target}: ${rounds} rounds of ${filter} x 20000 cases passed" >&2
    done
fi
