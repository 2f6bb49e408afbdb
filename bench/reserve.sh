#!/usr/bin/env bash
# Reservations (docs/benchmarks.md, "## Reservations"): the scheduling-server study
# (overhead O_I/O_E for shares 10…90 %, stability S unloaded and with 0…10 background
# processes of computational and disk-I/O load, the 100 ms periodic client) for the
# server, deadline and cgroup backends — `tame bench reserve`, which this script runs.
#
#   bench/reserve.sh [--quick] [--append]
#
# Root, a release build of tame (TAME=path to override) and stress-ng. Runs about 8 minutes
# (--quick: about 1.5). Uses the last online CPU (CPU=… to change); BACKENDS=server,deadline,cgroup
# (the default) chooses the backends. The result (common schema) goes to RESULT (default
# a fresh /tmp/tame-reserve.XXXXXX/reserve.json): `tame report` draws it. Everything the
# study starts is stopped and every reservation released on exit, also after Ctrl-C.
# With --append the tables go to docs/benchmarks.md.
set -euo pipefail
cd "$(dirname "$0")/.."

TAME=${TAME:-target/release/tame}
[ "$(id -u)" = 0 ] || { echo "bench/reserve.sh needs root (real-time policies, cgroups)" >&2; exit 2; }
[ -x "$TAME" ] || { echo "no $TAME: cargo build --release -p tame-cli (or set TAME)" >&2; exit 2; }

ARGS=()
APPEND=0
for a in "$@"; do
    case "$a" in
        --quick) ARGS+=(--quick) ;;
        --append) APPEND=1 ;;
        *) echo "unknown argument $a (use --quick, --append)" >&2; exit 2 ;;
    esac
done
[ -n "${CPU:-}" ] && ARGS+=(--cpu "$CPU")

RESULT=${RESULT:-$(mktemp -d /tmp/tame-reserve.XXXXXX)/reserve.json}
MD=$(mktemp)
trap 'rm -f "$MD"' EXIT
"$TAME" bench reserve "${ARGS[@]}" --backends "${BACKENDS:-server,deadline,cgroup}" --json "$RESULT" --md "$MD" >/dev/null
cat "$MD"
echo "result: $RESULT (tame report $RESULT)"
if [ "$APPEND" = 1 ]; then
    {
        echo
        echo "## Reservations"
        echo
        echo "Script: \`bench/reserve.sh\` ($(date -u +%Y-%m-%d), $(uname -r)). The work kernel is a 48×48"
        echo "double matrix multiply counted in shared memory and read by wall clock (never rusage)."
        echo
        cat "$MD"
    } >> docs/benchmarks.md
fi
