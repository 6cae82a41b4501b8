#!/usr/bin/env bash
# Installs the Debian package on this machine and checks what installing,
# using, upgrading, removing and purging leave behind:
#
#   contrib/debian/check-install.sh target/release-artifacts/nicbench_VERSION_amd64.deb
#
# Needs root and a machine where the nicbench package is not installed (CI's
# clean machine; it refuses otherwise rather than replace someone's agent).
# The agent is started by hand on loopback, as the unit would start it:
# systemd does not run here, so the unit is checked with systemd-analyze.
set -euo pipefail

fail() { echo "check-install: $*" >&2; exit 1; }
step() { echo "check-install: $*"; }
[ $# -eq 1 ] || fail "usage: contrib/debian/check-install.sh DEB"
deb=$1
[ -f "$deb" ] || fail "$deb: no such file (contrib/release.sh writes it)"
[ "$(id -u)" = 0 ] || fail "needs root (it installs the package)"
if dpkg-query -W -f '${Status}' nicbench 2>/dev/null | grep -q installed; then
    fail "the nicbench package is installed already; this check installs and purges it: dpkg -P nicbench first"
fi
version=$(dpkg-deb -f "$deb" Version)
agent=
logs=$(mktemp -d)
cleanup() {
    [ -n "$agent" ] && kill "$agent" 2>/dev/null
    dpkg -P nicbench >/dev/null 2>&1 || true
    rm -rf "$logs"
}
trap cleanup EXIT

# Containers often keep dpkg from writing manual pages and docs
# (path-exclude in /etc/dpkg/dpkg.cfg.d); this package's must be there.
dpkg --path-include='/usr/share/man/man1/nicbench*' --path-include='/usr/share/doc/nicbench/*' \
    -i "$deb" > "$logs/dpkg.log" 2>&1 || { cat "$logs/dpkg.log"; fail "dpkg -i failed"; }
grep '^nicbench:' "$logs/dpkg.log" || fail "postinst did not say where the key is"

step "installed $(dpkg-query -W -f '${Package} ${Version}, ${Installed-Size} KiB' nicbench)"
[ "$(/usr/bin/nicbench --version)" = "nicbench $version" ] || fail "/usr/bin/nicbench --version: $(/usr/bin/nicbench --version)"
step "/usr/bin/nicbench --version: $(/usr/bin/nicbench --version)"
man -P cat nicbench 2>/dev/null | grep -q 'nicbench-serve' || fail "man nicbench does not show the page naming its subcommands"
man -w nicbench-serve >/dev/null || fail "man nicbench-serve: no page"
step "man nicbench and man nicbench-serve: $(ls /usr/share/man/man1/nicbench*.1.gz | wc -l) pages"
for f in /usr/share/bash-completion/completions/nicbench /usr/share/zsh/vendor-completions/_nicbench \
    /usr/share/fish/vendor_completions.d/nicbench.fish; do
    [ -s "$f" ] || fail "$f is missing or empty"
done
bash -n /usr/share/bash-completion/completions/nicbench || fail "the bash completion does not parse"

# The unit and its drop-in, as systemd would load them.
systemd-analyze verify /usr/lib/systemd/system/nicbench.service || fail "systemd-analyze verify found problems in the unit"
step "systemd-analyze verify nicbench.service: no problems"

# The key: made once, root only, long enough for the agent.
key=/etc/nicbench/psk
[ "$(stat -c '%U %a' "$key")" = "root 600" ] || fail "$key is $(stat -c '%U %a' "$key"), not root 600"
[ "$(tr -d '\n' < "$key" | wc -c)" = 64 ] || fail "$key does not hold 64 hex characters"
step "key $key: root, mode 600"

# The agent as the unit starts it (its options, the key), on loopback, and
# a client that proves the key; then one that does not.
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
/usr/bin/nicbench serve --log-format json -v --psk-file "$key" --port "$port" --bind 127.0.0.1 2>"$logs/agent.log" &
agent=$!
for _ in $(seq 50); do
    /usr/bin/nicbench host --remote 127.0.0.1 -p "$port" --psk-file "$key" >/dev/null 2>&1 && break
    sleep 0.1
done
/usr/bin/nicbench tcp 127.0.0.1 -p "$port" -t 1 --psk-file "$key" --no-save > "$logs/tcp.txt" \
    || { cat "$logs/agent.log"; fail "a test with the package's key failed"; }
step "tcp with the key: $(grep -m1 'Gbit/s\|Mbit/s' "$logs/tcp.txt")"
if /usr/bin/nicbench tcp 127.0.0.1 -p "$port" -t 1 --no-save >/dev/null 2>&1; then
    fail "the agent served a client without the key"
fi
step "tcp without the key: refused"
kill "$agent"
wait "$agent" 2>/dev/null || true
agent=

# An upgrade (the same package again) keeps the key and the options.
before=$(md5sum < "$key")
echo 'NICBENCH_SERVE_OPTS="--max-streams 8"' >> /etc/default/nicbench
dpkg -i "$deb" >/dev/null 2>&1 || fail "reinstalling failed"
[ "$(md5sum < "$key")" = "$before" ] || fail "an upgrade replaced the key"
grep -q -- '--max-streams 8' /etc/default/nicbench || fail "an upgrade lost the admin's options"
step "upgrade: key and /etc/default/nicbench kept"

# Removing keeps configuration; purging leaves nothing of the package.
dpkg -r nicbench >/dev/null
[ ! -e /usr/bin/nicbench ] || fail "dpkg -r left /usr/bin/nicbench"
[ -e "$key" ] && [ -e /etc/default/nicbench ] || fail "dpkg -r removed the configuration"
dpkg -P nicbench >/dev/null
for f in "$key" /etc/nicbench /etc/default/nicbench /usr/lib/systemd/system/nicbench.service /usr/share/doc/nicbench; do
    [ ! -e "$f" ] || fail "dpkg -P left $f"
done
step "remove kept the configuration; purge left nothing"
