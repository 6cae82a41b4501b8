#!/usr/bin/env bash
# `bench/store.sh scale [SIZE...]`: the store at 10k, 100k and 1M generated
# runs, SQLite and PostgreSQL (see bench/store.sh for what it measures).
set -euo pipefail
cd "$(dirname "$0")/../.."
SIZES=("$@")
[ ${#SIZES[@]} -gt 0 ] || SIZES=(10000 100000 1000000)
CACHE=/tmp/nicbench-store-scale
NB=${NB:-./target/release/nicbench}
FILL=${FILL:-./target/release/examples/store_fill}
PGBIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
[ -x "$PGBIN/initdb" ] || { echo "missing PostgreSQL's server programs: apt-get install postgresql" >&2; exit 1; }
[ -n "${NO_BUILD:-}" ] || cargo build --release --quiet --bin nicbench --example store_fill
mkdir -p "$CACHE"
chmod 755 "$CACHE"

# The PostgreSQL server: one cluster in the cache, a database per size.
as_server() { if [ "$(id -u)" = 0 ]; then setpriv --reuid=nobody --regid=nogroup --clear-groups "$@"; else "$@"; fi; }
PGDIR=$CACHE/pg
if [ ! -d "$PGDIR/data" ]; then
    mkdir -p "$PGDIR"
    [ "$(id -u)" = 0 ] && chown nobody:nogroup "$PGDIR"
    as_server "$PGBIN/initdb" -D "$PGDIR/data" -A trust -U nicbench --no-sync -E UTF8 --locale=C >/dev/null
fi
as_server "$PGBIN/pg_ctl" -D "$PGDIR/data" -l "$PGDIR/server.log" -w \
    -o "-k $PGDIR -c listen_addresses= -c shared_buffers=512MB -c max_wal_size=4GB" start >/dev/null
trap 'as_server "$PGBIN/pg_ctl" -D "$PGDIR/data" -m fast -w stop >/dev/null' EXIT
pg_url() { echo "postgres://nicbench@/runs_$1?host=$PGDIR"; }
psql_do() { "$PGBIN/psql" -h "$PGDIR" -U nicbench -d postgres -qAtc "$1"; }

# Seconds of the median of 5 calls of `nicbench ARGS`; the last call's
# output in $CACHE/last.out.
median5() {
    local times=() t0 t1
    for _ in 1 2 3 4 5; do
        t0=$(date +%s.%N)
        "$NB" "$@" >"$CACHE/last.out" 2>"$CACHE/last.err" || { cat "$CACHE/last.err" >&2; return 1; }
        t1=$(date +%s.%N)
        times+=("$(echo "$t1 - $t0" | bc)")
    done
    printf '%s\n' "${times[@]}" | sort -n | sed -n 3p
}

declare -A RESULT
QUERIES=(runs-tag runs-host runs-since compare-tag report-tag)
for size in "${SIZES[@]}"; do
    for backend in sqlite postgres; do
        if [ $backend = sqlite ]; then db=$CACHE/runs-$size.db; else db=$(pg_url "$size"); fi
        marker=$CACHE/loaded-$backend-$size
        if [ ! -e "$marker" ]; then
            if [ $backend = sqlite ]; then rm -f "$db" "$db-wal" "$db-shm"; else
                psql_do "DROP DATABASE IF EXISTS runs_$size" && psql_do "CREATE DATABASE runs_$size"; fi
            t0=$(date +%s.%N)
            "$FILL" "$db" "$size" >/dev/null
            t1=$(date +%s.%N)
            echo "$t1 - $t0" | bc >"$marker"
        fi
        RESULT[$backend,$size,load]=$(cat "$marker")
        RESULT[$backend,$size,runs-tag]=$(median5 runs --db "$db" --tag src=host-17 --limit 50)
        RESULT[$backend,$size,runs-host]=$(median5 runs --db "$db" --host host-17 --limit 50)
        RESULT[$backend,$size,runs-since]=$(median5 runs --db "$db" --since 2h --limit 50)
        RESULT[$backend,$size,compare-tag]=$(median5 compare --db "$db" --tag src=host-17 --tag mtu=9000 \
            --rows tag:dst --format csv)
        RESULT[$backend,$size,compare-rows]=$(wc -l <"$CACHE/last.out")
        RESULT[$backend,$size,report-tag]=$(median5 report --db "$db" --tag src=host-17 --tag dst=host-42 \
            -o "$CACHE/report.html")
        echo "$backend $size: load ${RESULT[$backend,$size,load]} s; $(for q in "${QUERIES[@]}"; do
            printf '%s %s s; ' "$q" "${RESULT[$backend,$size,$q]}"; done)" >&2
    done
done

echo
echo "generated runs (a 100-host mesh every 30 min), seconds: load once, then the median of 5 calls"
printf '%-9s %9s %9s %9s %9s %10s %11s %10s\n' backend runs load runs-tag runs-host runs-since compare-tag report-tag
for backend in sqlite postgres; do
    for size in "${SIZES[@]}"; do
        printf '%-9s %9s %9.1f' $backend "$size" "${RESULT[$backend,$size,load]}"
        for q in "${QUERIES[@]}"; do printf ' %9.3f' "${RESULT[$backend,$size,$q]}"; done
        echo
    done
done
echo
echo "growth from each size to the next (ratio of times; the runs grow by the ratio of the sizes)"
for backend in sqlite postgres; do
    prev=
    for size in "${SIZES[@]}"; do
        if [ -n "$prev" ]; then
            printf '%-9s %8s -> %-8s x%-5s' $backend "$prev" "$size" "$(echo "scale=0; $size / $prev" | bc)"
            for q in load "${QUERIES[@]}"; do
                printf ' %s x%.1f' "$q" "$(echo "${RESULT[$backend,$size,$q]} / ${RESULT[$backend,$prev,$q]}" | bc -l)"
            done
            echo
        fi
        prev=$size
    done
done
du -sh "$CACHE"/runs-*.db "$PGDIR/data" 2>/dev/null || true
