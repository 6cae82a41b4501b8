#!/usr/bin/env bash
# Builds what goes onto hosts that have no Rust, into target/release-artifacts/:
#
#   nicbench-VERSION-x86_64-linux-gnu    one binary for glibc 2.17 and later
#                                        (RHEL/CentOS 7+, Ubuntu 14.04+, Debian 8+)
#   nicbench_VERSION_amd64.deb           that binary, man pages, completions,
#                                        the systemd unit with its hardening, a key
#   nicbench-VERSION-image.tar           a FROM-scratch image (podman load -i),
#                                        where podman runs
#
#   contrib/release.sh            all three (the image is skipped, with the
#                                 reason, when podman cannot run here)
#   contrib/release.sh --no-image the binary and the package only
#
# The binary is built by cargo-zigbuild, which links against glibc 2.17's
# symbol versions with zig's cross toolchain (the bundled SQLite is compiled
# by zig cc too). Needs: cargo-zigbuild (cargo install --locked
# cargo-zigbuild) and zig (pip install ziglang, or a zig on the PATH).
set -euo pipefail
cd "$(dirname "$0")/.."

fail() { echo "contrib/release.sh: $*" >&2; exit 1; }
image=yes
for arg in "$@"; do
    case $arg in
        --no-image) image=no ;;
        *) fail "unknown option $arg (use --no-image, or nothing)" ;;
    esac
done

# The glibc the compat binary is linked for: the oldest that Rust's standard
# library supports on x86_64 Linux.
glibc=2.17
target=x86_64-unknown-linux-gnu
version=$(sed -n '/^\[package\]/,/^\[/ s/^version *= *"\(.*\)"/\1/p' Cargo.toml)
out=target/release-artifacts
mkdir -p "$out"

command -v cargo-zigbuild >/dev/null 2>&1 \
    || fail "cargo-zigbuild is missing: cargo install --locked cargo-zigbuild"
if ! command -v zig >/dev/null 2>&1 && ! python3 -c 'import ziglang' 2>/dev/null; then
    fail "zig is missing: pip install ziglang (cargo-zigbuild uses Python's ziglang package when no zig is on the PATH)"
fi

# A target directory of its own: the compat build must not replace the
# binaries the tests run (target/release).
echo "contrib/release.sh: building nicbench $version for glibc $glibc (cargo zigbuild)"
# The dist profile (Cargo.toml): thin LTO for what ships, while the
# release profile stays quick to build for a first `cargo run --release`.
CARGO_TARGET_DIR=target/compat cargo zigbuild --profile dist --locked --bin nicbench --target "$target.$glibc"
binary=$out/nicbench-$version-x86_64-linux-gnu
cp "target/compat/$target/dist/nicbench" "$binary"
strip --strip-unneeded --remove-section=.comment --remove-section=.note "$binary"

# The promise the name makes: no symbol newer than glibc $glibc.
highest=$(objdump -T "$binary" | grep -o 'GLIBC_[0-9.]*' | sed 's/GLIBC_//' | sort -uV | tail -1)
if [ "$(printf '%s\n%s\n' "$highest" "$glibc" | sort -V | tail -1)" != "$glibc" ]; then
    fail "$binary needs GLIBC_$highest, newer than $glibc"
fi
[ "$("$binary" --version)" = "nicbench $version" ] || fail "$binary --version: $("$binary" --version)"
echo "$binary: $(du -k "$binary" | cut -f1) KiB, highest symbol version GLIBC_$highest"

contrib/debian/build.sh "$binary" "$out"

if [ "$image" = yes ]; then
    if command -v podman >/dev/null 2>&1; then
        contrib/container/build.sh "$binary" "$out"
    else
        echo "contrib/release.sh: no image: podman is missing (Debian: apt-get install podman runc)"
    fi
fi
ls -l "$out"
