#!/usr/bin/env bash
# Partition benchmarks (docs/benchmarks.md, "## Partitions").
#
#   bench/partition.sh timing            plan+apply+revert here, and plan on the 256-CPU fixture
#   bench/partition.sh effect [SECONDS]  IRQs/s and busy-loop noise on the isolated CPU, with and
#                                        without the partition, stress-ng load, 3 interleaved rounds
#
# Needs root (apply/revert change the live system), a release build of tame
# (TAME=path to override) and, for `effect`, oslat (rt-tests) and stress-ng.
# Everything it applies it reverts, also when interrupted.
set -euo pipefail
cd "$(dirname "$0")/.."

TAME=${TAME:-target/release/tame}
SPEC=${SPEC:-examples/isolate-cpu0.toml}
JOURNAL=$(mktemp -d /tmp/tame-bench-journal.XXXXXX)
WORK=$(mktemp -d /dev/shm/partbench.XXXXXX 2>/dev/null || mktemp -d)
# stress-ng --hdd writes here: on disk, so the load makes disk interrupts.
DISK=$(mktemp -d /var/tmp/partbench-hdd.XXXXXX)
LOAD_PID=

cleanup() {
    [ -n "$LOAD_PID" ] && kill "$LOAD_PID" 2>/dev/null && wait "$LOAD_PID" 2>/dev/null
    "$TAME" revert --journal-dir "$JOURNAL" >/dev/null 2>&1 || "$TAME" revert --journal-dir "$JOURNAL"
    rm -rf "$JOURNAL" "$WORK" "$DISK"
}
trap cleanup EXIT INT TERM

need() { command -v "$1" >/dev/null || { echo "needs $1 ($2)" >&2; exit 2; }; }
[ -x "$TAME" ] || { echo "no $TAME: run cargo build --release -p tame-cli (or set TAME)" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "needs root: apply and revert change cpusets, IRQ affinity and idle limits" >&2; exit 2; }

now_ns() { date +%s%N; }
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

timing() {
    local runs=${RUNS:-7} i t0 t1 out=()
    for i in $(seq "$runs"); do
        t0=$(now_ns)
        "$TAME" plan "$SPEC" >/dev/null
        "$TAME" apply "$SPEC" --journal-dir "$JOURNAL" >/dev/null
        "$TAME" revert --journal-dir "$JOURNAL" >/dev/null
        t1=$(now_ns)
        out+=($(( (t1 - t0) / 1000000 )))
    done
    echo "plan+apply+revert on this machine ($SPEC), median of $runs: $(printf '%s\n' "${out[@]}" | median) ms (all: ${out[*]})"

    local gen=${SYNTHETIC:-target/release/examples/synthetic_host}
    [ -x "$gen" ] || { echo "no $gen: cargo build --release -p tame-testing --examples" >&2; return; }
    "$gen" big-256 "$WORK/big" >/dev/null
    cat >"$WORK/big.toml" <<'EOF'
[[partition]]
name = "system"
cpus = "0-15,128-143"
role = "system"

[[partition]]
name = "rt"
cpus = "16-63,144-191"
role = "isolated"
idle = "poll"
EOF
    out=()
    for i in $(seq "$runs"); do
        t0=$(now_ns)
        "$TAME" --root "$WORK/big" plan "$WORK/big.toml" >/dev/null
        t1=$(now_ns)
        out+=($(( (t1 - t0) / 1000000 )))
    done
    echo "plan on the 256-CPU, 2000-IRQ fixture, median of $runs: $(printf '%s\n' "${out[@]}" | median) ms (all: ${out[*]})"
}

# Device IRQs handled by CPU $1 so far (numbered lines of /proc/interrupts).
irq_count() {
    awk -v col=$(( $1 + 2 )) 'NR > 1 && $1 ~ /^[0-9]+:$/ { s += $col } END { print s + 0 }' /proc/interrupts
}

effect() {
    local secs=${1:-30} rounds=${ROUNDS:-3} cpu
    need oslat rt-tests
    need stress-ng stress-ng
    # The isolated CPU of the spec (one CPU).
    cpu=$(awk -F'"' '/^cpus/ {c=$2} /role *= *"isolated"/ {print c; exit}' "$SPEC")
    echo "round config      irqs/s  mean_us  min_us  noise_share"
    for round in $(seq "$rounds"); do
        for config in shared partitioned; do
            if [ "$config" = partitioned ]; then
                # This shell lands in the system partition; so does the load it starts.
                "$TAME" apply "$SPEC" --journal-dir "$JOURNAL" >/dev/null
            fi
            (cd "$DISK" && exec stress-ng --cpu 1 --io 1 --hdd 1 --hdd-bytes 64M --sock 1 --timeout "$((secs + 5))s") >/dev/null 2>&1 &
            LOAD_PID=$!
            sleep 1
            local before after result
            before=$(irq_count "$cpu")
            if [ "$config" = partitioned ]; then
                result=$(sh -c "echo \$\$ > /sys/fs/cgroup/cpuset/tame-rt/tasks; exec oslat --cpu-list $cpu -C $cpu -D $secs" 2>&1)
            else
                result=$(oslat --cpu-list "$cpu" -C "$cpu" -D "$secs" 2>&1)
            fi
            after=$(irq_count "$cpu")
            kill "$LOAD_PID" 2>/dev/null || true
            wait "$LOAD_PID" 2>/dev/null || true
            LOAD_PID=
            if [ "$config" = partitioned ]; then
                "$TAME" revert --journal-dir "$JOURNAL" >/dev/null
            fi
            local mean min
            mean=$(echo "$result" | awk '/Average:/ {print $2}')
            min=$(echo "$result" | awk '/Minimum:/ {print $2}')
            awk -v r="$round" -v c="$config" -v i=$((after - before)) -v s="$secs" -v m="$mean" -v n="$min" \
                'BEGIN { printf "%5d %-11s %7.1f %8.3f %7s %10.2f%%\n", r, c, i / s, m, n, (m / n - 1) * 100 }'
        done
    done
}

case "${1:-timing}" in
    timing) timing ;;
    effect) effect "${2:-30}" ;;
    *) echo "usage: $0 timing | effect [SECONDS]" >&2; exit 2 ;;
esac
