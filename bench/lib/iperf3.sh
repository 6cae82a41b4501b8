# Sourced by the bench scripts that compare with iperf3: sets IPERF3 to the
# binary to run (and LD_LIBRARY_PATH for its libiperf).
#
# Upstream iperf3 is built when asked, never committed: IPERF3_SRC=DIR names a source
# tree (built into IPERF3_PREFIX, default /tmp/iperf3-bin, unless already built there)
# or a git directory (e.g. the bare copy a `fetch` of github:esnet/iperf gives), whose
# latest release tag (3.N, or IPERF3_TAG) is exported into /tmp/iperf3-src first.
# Without IPERF3_SRC the `iperf3` on PATH runs (Debian's may be older).
IPERF3=iperf3
if [ -n "${IPERF3_SRC:-}" ]; then
  prefix=${IPERF3_PREFIX:-/tmp/iperf3-bin}
  src=$IPERF3_SRC
  if git --git-dir="$src" rev-parse --git-dir >/dev/null 2>&1 && [ ! -f "$src/configure" ]; then
    tag=${IPERF3_TAG:-$(git --git-dir="$src" tag | grep -E '^3\.[0-9]+$' | sort -V | tail -1)}
    [ -n "$tag" ] || { echo "no iperf3 release tag (3.N) in $src" >&2; exit 1; }
    src=/tmp/iperf3-src
    if [ ! -f "$src/configure" ]; then
      echo "exporting iperf3 $tag from $IPERF3_SRC into $src" >&2
      mkdir -p "$src" && git --git-dir="$IPERF3_SRC" archive "$tag" | tar x -C "$src"
    fi
  fi
  [ -f "$src/configure" ] || { echo "IPERF3_SRC=$IPERF3_SRC is neither an iperf3 source tree nor a git directory" >&2; exit 1; }
  if [ ! -x "$prefix/bin/iperf3" ]; then
    echo "building iperf3 from $src into $prefix" >&2
    (cd "$src" && ./configure --prefix="$prefix" >/dev/null && make -j2 >/dev/null && make install >/dev/null)
  fi
  IPERF3=$prefix/bin/iperf3
  export LD_LIBRARY_PATH=$prefix/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
