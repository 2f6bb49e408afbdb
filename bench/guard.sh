#!/bin/sh
# What guarding costs: tame guard's own CPU time (utime + stime from /proc/PID/stat) over
# DURATION seconds, as CPU seconds per hour of running, with a partition applied (CPU 1
# isolated; guard needs one) on a quiet machine and under stress-ng load on the system CPUs.
# Usage: sudo bench/guard.sh [TAME] — TAME defaults to target/release/tame; DURATION=60.
# Leaves the machine as found: the partition reverted, the load and the guard stopped.
set -eu
tame=${1:-${CARGO_TARGET_DIR:-target}/release/tame}
duration=${DURATION:-60}
dir=$(mktemp -d)
spec=$dir/spec.toml
journal=$dir/journal
printf '[[partition]]\nname = "system"\ncpus = "0"\nrole = "system"\n\n[[partition]]\nname = "rt"\ncpus = "1"\nrole = "isolated"\n' >"$spec"
guard=
load=
cleanup() {
    [ -n "$guard" ] && kill -TERM "$guard" 2>/dev/null && wait "$guard" 2>/dev/null
    [ -n "$load" ] && kill -TERM "$load" 2>/dev/null && wait "$load" 2>/dev/null
    [ -e "$journal/journal" ] && "$tame" revert --journal-dir "$journal" >/dev/null
    rm -rf "$dir"
}
trap cleanup EXIT INT TERM
ticks=$(getconf CLK_TCK)
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

# measure LABEL ARGS...: run tame guard ARGS for DURATION s, print its CPU s/hour.
measure() {
    label=$1
    shift
    "$tame" guard --journal-dir "$journal" "$@" >"$dir/$label.log" &
    guard=$!
    sleep 2 # its start (tracing set up, the first pass) is not the steady cost
    a=$(cpu_ticks "$guard")
    sleep "$duration"
    b=$(cpu_ticks "$guard")
    kill -TERM "$guard"
    wait "$guard" || true
    guard=
    awk -v l="$label" -v t="$((b - a))" -v hz="$ticks" -v d="$duration" \
        -v e="$(grep -c . "$dir/$label.log")" \
        'BEGIN { printf "%-28s %6.2f CPU s/hour (%.3f %% of a CPU), %d log lines\n", l, t / hz * 3600 / d, t / hz / d * 100, e }'
}

"$tame" apply "$spec" --journal-dir "$journal" >/dev/null
measure quiet-tracepoints
measure quiet-proc-scan --no-trace
stress-ng --cpu 1 --fork 1 --io 1 --timeout 0 --quiet &
load=$!
measure load-tracepoints
measure load-proc-scan --no-trace
