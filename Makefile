# The two commands a newcomer runs: `make run` and `make test`.
CARGO ?= cargo
TAME := target/release/tame

.PHONY: run test deps test-deps build lint unit fuzz
.DEFAULT_GOAL := run

deps:
	@scripts/install-deps.sh

# What only the tests need (chromium for the browser tests): not part of `make run`.
test-deps:
	@scripts/install-test-deps.sh

build: deps
	$(CARGO) build --release --workspace

# The main job: can this machine run a 1 kHz task beside a loaded Linux, and what does it
# take? Measured shared and inside a partition of its own (reverted afterwards); about a minute.
# Builds only the `tame` binary: the C libraries and the rest of the workspace wait for `build`.
run: deps
	$(CARGO) build --release -p tame-cli
	$(TAME) assess

lint: deps
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

unit: deps test-deps
	$(CARGO) test --workspace

test: lint unit

# Fuzz the parsers of untrusted input (partition spec, plan, journal, IPC header) with FUZZ_CASES
# cases each: minutes. Release build with integer overflow checked, so a wrap on user
# input fails as in a debug build. `make test` runs 2000 cases each (docs/testing.md).
FUZZ_CASES ?= 1000000
FUZZ_ENV := CARGO_PROFILE_RELEASE_OVERFLOW_CHECKS=true TAME_FUZZ_CASES=$(FUZZ_CASES)

fuzz: deps
	$(FUZZ_ENV) $(CARGO) test --release -p tame-partition --test fuzz -- --nocapture
	$(FUZZ_ENV) $(CARGO) test --release -p tame-host --test fuzz_journal -- --nocapture
	$(FUZZ_ENV) $(CARGO) test --release -p tame-ipc --test fuzz_header -- --nocapture
