# What the lab benchmarks against iperf 2 check before they start (sourced by
# bench/multicast.sh, bench/multicast-interop.sh and bench/owd-vs-iperf2.sh).

# bench_args SCRIPT DEFAULT_SECONDS [ROUNDS] [SECONDS]: sets ROUNDS (default 3) and
# SECONDS_PER_TEST, or says the usage and exits 2.
bench_args() {
  local script=$1 default_seconds=$2
  ROUNDS=${3:-3}
  SECONDS_PER_TEST=${4:-$default_seconds}
  if ! [[ $ROUNDS =~ ^[1-9][0-9]{0,2}$ && $SECONDS_PER_TEST =~ ^[1-9][0-9]{0,2}$ ]]; then
    echo "usage: $script [ROUNDS] [SECONDS]  (whole numbers, 1 to 999; not '$ROUNDS' '$SECONDS_PER_TEST')" >&2
    exit 2
  fi
}

# need_lab_and_iperf2 TOOL...: the tools (iproute2's by name), iperf 2 (sets
# IPERF_VERSION) and root for the lab's namespaces; exits 1 saying what is missing.
need_lab_and_iperf2() {
  local tool package
  for tool in "$@" iperf; do
    case $tool in ip | tc | ss | bridge) package=iproute2 ;; *) package=$tool ;; esac
    command -v "$tool" >/dev/null || { echo "missing $tool: apt-get install $package" >&2; exit 1; }
  done
  # iperf 2 prints its version on stderr and exits 1.
  IPERF_VERSION=$(iperf --version 2>&1 || true)
  [[ $IPERF_VERSION == "iperf version 2."* ]] \
    || { echo "iperf is not iperf 2 ($IPERF_VERSION): apt-get install iperf" >&2; exit 1; }
  if [ "$(id -u)" != 0 ]; then
    echo "the lab needs root (network namespaces): run with sudo" >&2
    exit 1
  fi
}

# nicbench_binary: NICBENCH, or a release build of this tree (run from its root).
nicbench_binary() {
  if [ -z "${NICBENCH:-}" ]; then
    cargo build --release --quiet
    NICBENCH=$PWD/target/release/nicbench
  fi
}
