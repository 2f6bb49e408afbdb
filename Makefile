# The two commands a newcomer runs: `make run` and `make test`.
CARGO ?= cargo
TAME := target/release/tame

.PHONY: run test deps build lint unit
.DEFAULT_GOAL := run

deps:
	@scripts/install-deps.sh

build: deps
	$(CARGO) build --release --workspace

# The main job: 10 s of periodic-wakeup latency on every CPU under mixed load.
run: build
	$(TAME) bench cycle --cpus all --duration 10s --load cpu,io,hdd,vm,sock --load-cpus all

lint: deps
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

unit: deps
	$(CARGO) test --workspace

test: lint unit
