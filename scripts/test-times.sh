#!/usr/bin/env bash
# Where `make test`'s time goes (docs/testing.md, "Time budget"): each stage of `make test`
# timed as it runs, the builds with `cargo --timings` (the crates that took longest, from
# cargo's own report), and every test binary's run time, slowest first.
#
#   scripts/test-times.sh            # the whole of `make test`, stage by stage
#   scripts/test-times.sh --release  # also the release build of `tame` (`make run`'s build)
#
# Run it from a fresh clone (`git clone … && cd … && CI=true scripts/test-times.sh`) for the
# fresh-clone budget, and once more in the same tree for the warm one. The cargo timing
# reports stay in target/cargo-timings/ (HTML, open in a browser). The log of the run is
# target/test-times/log.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
release=false
[ "${1:-}" = --release ] && release=true

out=target/test-times
mkdir -p "$out"
log=$out/log
: >"$log"
stages=$out/stages
: >"$stages"

# stage NAME COMMAND…: runs it with its output (time-stamped) in the log, notes its seconds.
stage() {
    local name=$1 start end
    shift
    start=$(date +%s.%N)
    echo "== $name: $*" | tee -a "$log"
    "$@" 2>&1 | while IFS= read -r line; do printf '%(%s)T %s\n' -1 "$line"; done >>"$log"
    local rc=${PIPESTATUS[0]}
    end=$(date +%s.%N)
    awk -v n="$name" -v s="$start" -v e="$end" 'BEGIN { printf "%s\t%.0f\n", n, e - s }' >>"$stages"
    if [ "$rc" -ne 0 ]; then
        echo "test-times: '$name' failed (exit $rc): see $log" >&2
        exit "$rc"
    fi
}

# The stages of `make test` (Makefile: lint, unit), run one by one so each gets its time.
features=$(make -s -f Makefile --eval 'print-features: ; @echo $(TEST_FEATURES)' print-features)
incremental=$(make -s -f Makefile --eval 'print-inc: ; @echo $(CARGO_INCREMENTAL)' print-inc)
[ -n "$incremental" ] && export CARGO_INCREMENTAL=$incremental
stage deps make -s deps
stage test-deps make -s test-deps
stage fmt cargo fmt --all -- --check
# shellcheck disable=SC2086
stage clippy cargo clippy --workspace --all-targets $features --timings -- -D warnings
stage clippy-default cargo clippy -p tame-bench --lib -- -D warnings
# shellcheck disable=SC2086
stage test-build cargo test --workspace $features --no-run --timings
# shellcheck disable=SC2086
stage test-run cargo test --workspace $features
stage python scripts/python-test.sh
if $release; then
    stage release-build cargo build --release -p tame-cli --timings
fi

echo
echo "stage            seconds"
awk -F'\t' '{printf "%-16s %7d\n", $1, $2; t += $2} END {printf "%-16s %7d\n", "total", t}' "$stages"

# Each test binary: from its "Running" line to its result (process start included), named
# by crate and target (cargo names only the file, and every crate has a tests/it/main.rs).
# shellcheck disable=SC2086
cargo test --workspace $features --no-run --message-format=json 2>/dev/null >"$out/artifacts.json"
echo
echo "test binaries, slowest first (seconds, tests passed)"
python3 - "$log" "$out/artifacts.json" <<'EOF'
import json, os, re, sys
names = {}
for line in open(sys.argv[2]):
    try:
        msg = json.loads(line)
    except ValueError:
        continue
    if msg.get("reason") == "compiler-artifact" and msg.get("executable"):
        crate = msg["target"]["src_path"].split("/crates/")[-1].split("/")[0]
        kind = msg["target"]["kind"][0]
        names[os.path.basename(msg["executable"])] = f"{crate} {kind} {msg['target']['name']}"
rows, current = [], None
for line in open(sys.argv[1]):
    stamp, _, text = line.rstrip("\n").partition(" ")
    running = re.match(r"\s*Running .*\((?:.*/)?([^/)]+)\)", text)
    doc = re.match(r"\s*Doc-tests (\S+)", text)
    if running or doc:
        name = names.get(running.group(1), running.group(1)) if running else f"{doc.group(1)} doc"
        current = (int(stamp), name)
        continue
    result = re.match(r"test result: \S+\. (\d+) passed", text)
    if result and current:
        rows.append((int(stamp) - current[0], int(result.group(1)), current[1]))
        current = None
for secs, passed, name in sorted(rows, reverse=True)[:25]:
    print(f"{secs:5d} {passed:5d}  {name}")
print(f"{sum(r[0] for r in rows):5d} {sum(r[1] for r in rows):5d}  all {len(rows)} test runs")
EOF

# The longest units of the newest cargo timing report (clippy, test build, release build).
python3 - <<'EOF'
import glob, json, os, re
reports = sorted(glob.glob("target/cargo-timings/cargo-timing-*.html"), key=os.path.getmtime)
for path in reports[-3:]:
    text = open(path).read()
    m = re.search(r"const UNIT_DATA = (\[.*?\]);\n", text, re.S)
    if not m:
        continue
    units = json.loads(m.group(1))
    total = sum(u["duration"] for u in units)
    ours = sum(u["duration"] for u in units if u["name"].startswith("tame"))
    print(f"\n{os.path.basename(path)}: {len(units)} units, {total:.0f} unit-seconds "
          f"({ours:.0f} of them tame's own crates); the longest:")
    for u in sorted(units, key=lambda u: -u["duration"])[:12]:
        print(f"  {u['duration']:6.1f}  {u['name']} {u['target'].strip()}")
EOF
