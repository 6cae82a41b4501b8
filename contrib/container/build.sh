#!/usr/bin/env bash
# Builds the nicbench image from a binary already built, with podman and no
# registry (FROM scratch), and saves it as a tar for `podman load`,
# `docker load` or `ctr -n k8s.io images import`:
#   contrib/container/build.sh BINARY OUTDIR [IMAGE]
#   contrib/container/build.sh --image-name       (prints IMAGE's default)
# BINARY is any nicbench build (target/release/nicbench, or the release's
# glibc-2.17 build); the image holds it as /usr/bin/nicbench with the
# shared libraries `ldd BINARY` names, at the same absolute paths. IMAGE
# defaults to nicbench:VERSION, VERSION being Cargo.toml's; a name without
# a registry is tagged as docker.io/library/NAME, which is what Kubernetes
# and docker read `image: nicbench:VERSION` as (podman finds it by the short
# name too). The tar is OUTDIR/nicbench-VERSION-image.tar. Podman runs with
# contrib/container/containers.conf (CONTAINERS_CONF), so nothing in
# /etc/containers is changed. Runs as root.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
fail() {
  echo "build.sh: $*" >&2
  exit 1
}

# The version line of Cargo.toml's [package] table.
version=$(sed -n '/^\[package\]/,/^\[/ s/^version *= *"\([^"]*\)".*/\1/p' "$root/Cargo.toml" | head -n 1)
[ -n "$version" ] || fail "no version in the [package] table of $root/Cargo.toml"

if [ "${1-}" = --image-name ]; then
  echo "nicbench:$version"
  exit 0
fi
[ $# -ge 2 ] && [ $# -le 3 ] || fail "usage: build.sh BINARY OUTDIR [IMAGE]   (or build.sh --image-name)"
binary=$1
outdir=$2
image=${3:-nicbench:$version}
case $image in
  */*) ;;
  *) image=docker.io/library/$image ;;
esac
[ -f "$binary" ] && [ -x "$binary" ] || fail "$binary is no executable file; build one first: cargo build --release --bin nicbench"
command -v podman >/dev/null 2>&1 \
  || fail "podman is not installed, and it builds the image; install it with: apt-get install podman runc"
command -v ldd >/dev/null 2>&1 || fail "ldd is not installed (it names the libraries to copy); apt-get install libc-bin"
export CONTAINERS_CONF="$here/containers.conf"

context=$(mktemp -d "${TMPDIR:-/tmp}/nicbench-image.XXXXXX")
trap 'rm -rf "$context"' EXIT
rootfs=$context/rootfs
# /var/lib root's, /var/lib/nicbench (the Containerfile's second COPY) uid 10001's.
mkdir -p "$rootfs/usr/bin" "$rootfs/etc" "$rootfs/var/lib" "$context/home"
install -m 0755 "$binary" "$rootfs/usr/bin/nicbench"
# Debug info is most of a release build's size and nothing the image uses.
if command -v strip >/dev/null 2>&1; then
  strip --strip-debug "$rootfs/usr/bin/nicbench"
fi

# Every library ldd names, by absolute path (the loader too: its line has
# no "=>"); linux-vdso has no file. A static binary needs none.
ldd_out=$(LC_ALL=C ldd "$binary" 2>&1 || true)
if grep -q 'not found' <<<"$ldd_out"; then
  fail "ldd cannot find libraries $binary needs:
$ldd_out"
fi
libraries=$(awk '$2 == "=>" && $3 ~ /^\// { print $3; next } $1 ~ /^\// { print $1 }' <<<"$ldd_out")
if [ -z "$libraries" ] && ! grep -qE 'statically linked|not a dynamic executable' <<<"$ldd_out"; then
  fail "ldd named no libraries for $binary:
$ldd_out"
fi
for library in $libraries; do
  mkdir -p "$rootfs$(dirname "$library")"
  cp -L "$library" "$rootfs$library"
done

# Only root and the agent's user: USER 10001 needs no name, but tools that
# look the user up (and Kubernetes' runAsNonRoot checks) find one.
cat >"$rootfs/etc/passwd" <<'EOF'
root:x:0:0:root:/root:/sbin/nologin
nicbench:x:10001:10001:nicbench agent:/var/lib/nicbench:/sbin/nologin
EOF
cat >"$rootfs/etc/group" <<'EOF'
root:x:0:
nicbench:x:10001:
EOF
# What an agent reports as its `os` fact: the image (a container cannot
# see the node's OS).
cat >"$rootfs/etc/os-release" <<EOF
NAME="nicbench"
ID=nicbench
VERSION_ID="$version"
PRETTY_NAME="nicbench $version container image"
EOF
cp "$here/Containerfile" "$context/Containerfile"

# --layers=false: one image, no intermediate images left behind.
podman build --quiet --layers=false --file "$context/Containerfile" --build-arg "VERSION=$version" \
  --tag "$image" "$context" >/dev/null
mkdir -p "$outdir"
tar_path=$outdir/nicbench-$version-image.tar
rm -f "$tar_path"
podman save --quiet --format docker-archive --output "$tar_path" "$image"

echo "built image $image from $binary with: /usr/bin/nicbench" $libraries
echo "size: $(podman image inspect --format '{{.Size}}' "$image") bytes"
echo "wrote $tar_path ($(stat -c %s "$tar_path") bytes)"
