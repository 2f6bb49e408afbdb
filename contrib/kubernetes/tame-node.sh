#!/bin/sh
# The loop of tame's node DaemonSet (contrib/kubernetes/02-daemonset.yaml): every
# TAME_INTERVAL seconds, audit the host (`tame check`, `tame status`, through the host's
# /proc, /sys, /etc, /boot and /var/lib/tame mounted below /host), measure a short cycle
# bench on the CPUs this pod may use (no partition: the bench only watches), and write
# the results as Prometheus text where node_exporter's textfile collector reads them.
# The last round's JSON results stay in $out/json (the collector reads only *.prom files
# at the top), for `kubectl cp` and `tame compare` across nodes (docs/fleet.md).
set -u

out=${TAME_METRICS_DIR:-/var/lib/tame-metrics}
interval=${TAME_INTERVAL:-900}
duration=${TAME_BENCH_DURATION:-5s}
work=$out/json
mkdir -p "$work" || exit 1
trap 'exit 0' TERM INT

# keep FILE CMD...: FILE holds CMD's JSON when CMD printed a result; else FILE is removed,
# so a failed step drops its series instead of breaking the export of the others.
keep() {
    file=$1
    shift
    if "$@" >"$file.new" && [ -s "$file.new" ]; then
        mv "$file.new" "$file"
    else
        echo "tame-node: $* failed; its series are left out this round" >&2
        rm -f "$file.new" "$file"
    fi
}

while :; do
    # The kubelet may confine this pod to a CPU set: measure on the CPUs it may use.
    cpus=$(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/self/status)
    keep "$work/check.json" tame --root /host check --json
    keep "$work/status.json" tame --root /host status --json
    keep "$work/cycle.json" tame bench cycle --cpus "$cpus" --duration "$duration" --json -
    set -- "$work"/*.json
    if [ -e "$1" ]; then
        tame export prometheus "$@" -o "$out/tame.prom" ||
            echo "tame-node: tame export prometheus failed; $out/tame.prom keeps the last round" >&2
    fi
    sleep "$interval" &
    wait $!
done
