#!/usr/bin/env bash
# Builds the Debian package of nicbench from a built binary:
#
#   contrib/debian/build.sh BINARY OUTDIR
#
# writes OUTDIR/nicbench_VERSION_amd64.deb (VERSION from Cargo.toml). The
# binary's own `man` and `completions` subcommands write its manual pages
# and completion scripts, so the package documents exactly the binary it
# holds. Built with dpkg-deb around a staged tree rather than cargo-deb:
# the package needs maintainer scripts (the key), a drop-in beside the
# unit and a binary built elsewhere (cargo-zigbuild, for glibc 2.17), each
# of which cargo-deb handles through configuration of its own, and dpkg-deb
# is on every Debian machine already.
set -euo pipefail

fail() { echo "contrib/debian/build.sh: $*" >&2; exit 1; }
[ $# -eq 2 ] || fail "usage: contrib/debian/build.sh BINARY OUTDIR"
binary=$1
outdir=$2
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
[ -x "$binary" ] || fail "$binary is not an executable file (build it first: cargo build --release)"
for tool in dpkg-deb objdump strip gzip md5sum; do
    command -v "$tool" >/dev/null 2>&1 || fail "$tool is missing (Debian: apt-get install dpkg-dev binutils)"
done

version=$(sed -n '/^\[package\]/,/^\[/ s/^version *= *"\(.*\)"/\1/p' "$repo/Cargo.toml")
[ -n "$version" ] || fail "no version in $repo/Cargo.toml"
[ "$("$binary" --version)" = "nicbench $version" ] \
    || fail "$binary says '$("$binary" --version)', Cargo.toml says $version: rebuild it"

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
root=$stage/nicbench
mkdir -p "$root/DEBIAN"

# The binary, without its debug information.
install -D -m 0755 "$binary" "$root/usr/bin/nicbench"
strip --strip-unneeded --remove-section=.comment --remove-section=.note "$root/usr/bin/nicbench"

# Manual pages, one per subcommand, as the CLI defines them.
mkdir -p "$root/usr/share/man/man1"
"$binary" man --out "$root/usr/share/man/man1" >/dev/null
gzip -9n "$root"/usr/share/man/man1/*.1

# Completions where Debian's shells look for them.
install -d "$root/usr/share/bash-completion/completions" \
    "$root/usr/share/zsh/vendor-completions" "$root/usr/share/fish/vendor_completions.d"
"$binary" completions bash > "$root/usr/share/bash-completion/completions/nicbench"
"$binary" completions zsh > "$root/usr/share/zsh/vendor-completions/_nicbench"
"$binary" completions fish > "$root/usr/share/fish/vendor_completions.d/nicbench.fish"

# The agent's unit, its hardening drop-in and its options.
install -D -m 0644 "$here/nicbench.service" "$root/usr/lib/systemd/system/nicbench.service"
install -D -m 0644 "$repo/contrib/nicbench-hardening.conf" \
    "$root/usr/lib/systemd/system/nicbench.service.d/hardening.conf"
install -D -m 0644 "$here/default" "$root/etc/default/nicbench"
install -D -m 0644 "$here/lintian-overrides" "$root/usr/share/lintian/overrides/nicbench"

# Documentation.
doc=$root/usr/share/doc/nicbench
install -D -m 0644 "$here/copyright" "$doc/copyright"
install -m 0644 "$repo/README.md" "$repo/CHANGELOG.md" "$doc/"
install -m 0644 "$repo"/docs/*.md "$doc/"
gzip -9n "$doc/CHANGELOG.md"
# A native package's changelog, in Debian's format, from the version.
{
    echo "nicbench ($version) unstable; urgency=medium"
    echo
    echo "  * Release $version. The project's own changelog: CHANGELOG.md.gz."
    echo
    echo " -- nicbench developers <nicbench@localhost>  $(date -R -d "@${SOURCE_DATE_EPOCH:-$(stat -c %Y "$repo/Cargo.toml")}")"
} | gzip -9n > "$doc/changelog.gz"
chmod 0644 "$doc/changelog.gz"

# Shared libraries the binary needs, and the oldest glibc it runs on (its
# highest GLIBC_ symbol version).
needed=$(objdump -p "$root/usr/bin/nicbench" | awk '/NEEDED/ {print $2}')
glibc=$(objdump -T "$root/usr/bin/nicbench" | grep -o 'GLIBC_[0-9.]*' | sed 's/GLIBC_//' | sort -uV | tail -1)
[ -n "$glibc" ] || fail "no GLIBC symbol versions in $binary: is it a glibc binary?"
depends="libc6 (>= $glibc)"
for lib in $needed; do
    case $lib in
        libc.so.6 | libm.so.6 | libdl.so.2 | libpthread.so.0 | librt.so.1 | ld-linux-x86-64.so.2) ;;
        libgcc_s.so.1) depends="$depends, libgcc-s1" ;;
        *) fail "the binary needs $lib, which this script does not know the package of" ;;
    esac
done

install -m 0755 "$here/postinst" "$here/prerm" "$here/postrm" "$root/DEBIAN/"
echo /etc/default/nicbench > "$root/DEBIAN/conffiles"
size=$(du -sk --exclude=DEBIAN "$root" | cut -f1)
sed -e "s/@VERSION@/$version/" -e "s/@DEPENDS@/$depends/" -e "s/@SIZE@/$size/" \
    "$here/control.in" > "$root/DEBIAN/control"
(cd "$root" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | sort -z | xargs -0 md5sum) \
    > "$root/DEBIAN/md5sums"
chmod 0644 "$root/DEBIAN/md5sums" "$root/DEBIAN/control" "$root/DEBIAN/conffiles"

mkdir -p "$outdir"
deb=$outdir/nicbench_${version}_amd64.deb
dpkg-deb --root-owner-group -Zxz --build "$root" "$deb" >/dev/null
echo "$deb: $(du -k "$deb" | cut -f1) KiB, installed $size KiB, needs $depends"
