#!/bin/sh
# The loop of tame's node DaemonSet (contrib/kubernetes/02-daemonset.yaml): every
# TAME_INTERVAL seconds, audit the host (`tame check`, `tame status`, through the host's
# /proc, /sys, /etc, /boot and /var/lib/tame mounted below /host), measure a short cycle
# bench on the CPUs this pod may use (no partition: the bench only watches), and write
# the results as Prometheus text where node_exporter's textfile collector reads them.
# The last round's JSON results stay in $out/json (the collector reads only *.prom files
# at the top), for `kubectl cp` and `tame compare` across nodes (docs/fleet.md).
# Between rounds `tame guard` watches the applied partitions live (reporting only: one log
# line per event, `kubectl logs`; its counts at :TAME_GUARD_PORT/metrics, docs/guard.md);
# it is started again each round while a partition is applied and it is not running.
set -u

out=${TAME_METRICS_DIR:-/var/lib/tame-metrics}
interval=${TAME_INTERVAL:-900}
duration=${TAME_BENCH_DURATION:-5s}
# Each measuring thread costs its locked 1 MiB stack and buffers (about 1.8 MiB measured)
# against the container's memory limit (256Mi in 02-daemonset.yaml): at most this many.
max_cpus=${TAME_BENCH_MAX_CPUS:-64}
guard_port=${TAME_GUARD_PORT:-9641}
work=$out/json
mkdir -p "$work" || exit 1
guard=
trap '[ -n "$guard" ] && kill -TERM "$guard" 2>/dev/null; exit 0' TERM INT

# guard_running: start `tame guard` when it is not running (it exits 2 while nothing is
# applied, and is tried again next round). Through /host: the /proc scan, no tracepoints.
guard_running() {
    if [ -n "$guard" ] && kill -0 "$guard" 2>/dev/null; then
        return
    fi
    tame --root /host guard --journal-dir /host/var/lib/tame \
        --metrics "0.0.0.0:$guard_port" --metrics-remote &
    guard=$!
}

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

# spread LIST MAX: at most MAX CPUs of a kernel CPU list (N and N-M joined by commas, as
# /proc/self/status writes it), spread evenly over it so every socket is sampled.
spread() {
    echo "$1" | awk -F, -v max="$2" '{
        n = 0
        for (i = 1; i <= NF; i++) {
            if (split($i, r, "-") == 2) { for (c = r[1] + 0; c <= r[2] + 0; c++) cpu[n++] = c }
            else cpu[n++] = $i + 0
        }
        m = n < max ? n : max
        out = ""
        for (j = 0; j < m; j++) out = out (j ? "," : "") cpu[int(j * n / m)]
        print out
    }'
}

while :; do
    guard_running
    # The kubelet may confine this pod to a CPU set: measure on the CPUs it may use.
    cpus=$(spread "$(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/self/status)" "$max_cpus")
    keep "$work/check.json" tame --root /host check --json
    keep "$work/status.json" tame --root /host status --json
    keep "$work/cycle.json" tame bench cycle --cpus "$cpus" --duration "$duration" --json -
    # No result, or no export of them: remove tame.prom rather than let node_exporter serve
    # an old round's series as if they were current (their absence is what alerts see).
    set -- "$work"/*.json
    if [ ! -e "$1" ]; then
        echo "tame-node: every step failed; $out/tame.prom removed until one succeeds" >&2
        rm -f "$out/tame.prom"
    elif ! tame export prometheus "$@" -o "$out/tame.prom"; then
        echo "tame-node: tame export prometheus failed; $out/tame.prom removed" >&2
        rm -f "$out/tame.prom"
    fi
    sleep "$interval" &
    wait $!
done
