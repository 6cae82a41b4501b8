#!/usr/bin/env bash
# Fuzzes the control-protocol decoder (fuzz/fuzz_targets/decode.rs) for a
# bounded time with cargo-fuzz (libFuzzer, needs a nightly toolchain).
#
#   bench/fuzz.sh            # 60 s
#   bench/fuzz.sh 600        # 10 min
#
# Without nightly or cargo-fuzz, it falls back to the stable property tests
# of the framing (random and mutated frames), repeated with many more cases
# for about the same time (NICBENCH_FUZZ_STABLE=1 forces that path). A
# crash leaves its input in fuzz/artifacts/decode/.
set -euo pipefail
seconds="${1:-60}"
cd "$(dirname "$0")/.."

if [ -z "${NICBENCH_FUZZ_STABLE:-}" ] && rustup toolchain list 2>/dev/null | grep -q '^nightly' \
    && cargo fuzz --version >/dev/null 2>&1; then
    echo "fuzz: cargo fuzz run decode for ${seconds} s (nightly, libFuzzer)" >&2
    mkdir -p fuzz/corpus/decode
    cd fuzz
    # New inputs go to corpus/decode (ignored by git); seeds/decode holds hand-made frames.
    cargo +nightly fuzz run decode corpus/decode seeds/decode -- \
        -max_total_time="${seconds}" -max_len=70000 -timeout=5 -rss_limit_mb=2048 -print_final_stats=1
else
    echo "fuzz: stable fallback (nightly or cargo-fuzz missing, or NICBENCH_FUZZ_STABLE set;" >&2
    echo "fuzz: for libFuzzer: rustup toolchain install nightly; cargo install cargo-fuzz)" >&2
    echo "fuzz: running the stable property tests of the framing instead for about ${seconds} s" >&2
    end=$((SECONDS + seconds))
    rounds=0
    while [ "$SECONDS" -lt "$end" ]; do
        PROPTEST_CASES=20000 cargo test --quiet --lib protocol::framing::properties >/dev/null
        rounds=$((rounds + 1))
    done
    echo "fuzz: ${rounds} rounds of 5 properties x 20000 cases passed" >&2
fi
