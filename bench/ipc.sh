#!/usr/bin/env bash
# tame bench ipc: one-way latency (ping-pong round trip / 2) and throughput of 8-, 56-, 64-,
# 256- and 1024-byte messages between CPU 0 and CPU 1 for the raw cache-line floor, tame-ipc's
# ring and register, rtrb, iceoryx2, a pipe, a Unix socket and a POSIX message queue —
# interleaved in one run. Builds tame with the `iceoryx2` feature (about a minute more, once).
#
#   bench/ipc.sh [--cpus A,B] [--rounds R] [--round-trips N] [--messages M] [--sizes LIST] [--out DIR]
#
# Writes DIR/ipc.json (the versioned result) and DIR/ipc.txt (the table with the ratios between transports).
# Leaves nothing behind: the tame channels are anonymous memfd segments, the message queues
# are unlinked as soon as they are opened, iceoryx2 removes its /dev/shm segments and
# /tmp/iceoryx2 node files when each segment of the run ends.
set -euo pipefail
cd "$(dirname "$0")/.."

cpus=0,1 rounds=5 round_trips=200000 messages=2000000 sizes=8,56,64,256,1024 out=""
while [ $# -gt 0 ]; do
    case "$1" in
        --cpus) cpus=$2; shift 2 ;;
        --rounds) rounds=$2; shift 2 ;;
        --round-trips) round_trips=$2; shift 2 ;;
        --messages) messages=$2; shift 2 ;;
        --sizes) sizes=$2; shift 2 ;;
        --out) out=$2; shift 2 ;;
        *) echo "unknown option $1 — see the usage at the top of $0" >&2; exit 2 ;;
    esac
done
out=${out:-$(mktemp -d /tmp/tame-ipc-bench.XXXXXX)}
mkdir -p "$out"
cargo build --release -q -p tame-cli --features iceoryx2
target=${CARGO_TARGET_DIR:-target}
"$target/release/tame" bench ipc --cpus "$cpus" --rounds "$rounds" --round-trips "$round_trips" \
    --messages "$messages" --sizes "$sizes" --json "$out/ipc.json" | tee "$out/ipc.txt"
echo "result: $out/ipc.json"
