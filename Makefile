# The two commands a newcomer runs: `make run` and `make test`.
CARGO ?= cargo
TAME := target/release/tame

.PHONY: run test deps test-deps build lint unit python-test fuzz install install-files uninstall
.DEFAULT_GOAL := run

deps:
	@scripts/install-deps.sh

# What only the tests need (chromium for the browser tests, promtool and node_exporter for the Prometheus ones): not part of `make run`.
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

# CI builds from a fresh clone, so incremental compilation only writes caches that no later
# build reads: 37 s of a 2 min 17 s test build here (docs/testing.md, "Time budget"). A
# developer's tree keeps them (set CARGO_INCREMENTAL yourself to choose).
ifeq ($(CI),true)
export CARGO_INCREMENTAL ?= 0
endif

# The ipc bench's iceoryx2 transport is a cargo feature `make run` leaves off. Lint and tests
# build the workspace once, with it on, so iceoryx2 and everything above tame-bench are
# compiled once; `lint` checks tame-bench's own code without it too (its cfg(not) side).
TEST_FEATURES := --features tame-bench/iceoryx2

lint: deps
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets $(TEST_FEATURES) -- -D warnings
	$(CARGO) clippy -p tame-bench --lib -- -D warnings

unit: deps test-deps
	$(CARGO) test --workspace $(TEST_FEATURES)
	@# The tame-ipc Python bindings (`python-test` below, without installing the deps twice).
	scripts/python-test.sh

# The tame-ipc Python bindings (crates/tame-ipc-py): a venv in target/python with the
# package built from this checkout, then pytest (docs/python.md).
python-test: deps test-deps
	scripts/python-test.sh

test: lint unit

# Fuzz the parsers of untrusted input (partition spec, plan, journal, IPC header) with FUZZ_CASES
# cases each: minutes. Release build with integer overflow checked, so a wrap on user
# input fails as in a debug build. `make test` runs 2000 cases each (docs/testing.md).
FUZZ_CASES ?= 1000000
FUZZ_ENV := CARGO_PROFILE_RELEASE_OVERFLOW_CHECKS=true TAME_FUZZ_CASES=$(FUZZ_CASES)

fuzz: deps
	$(FUZZ_ENV) $(CARGO) test --release -p tame-partition --test it -- fuzz:: --nocapture
	$(FUZZ_ENV) $(CARGO) test --release -p tame-host --test it -- fuzz_journal:: --nocapture
	$(FUZZ_ENV) $(CARGO) test --release -p tame-ipc --test it -- fuzz_header:: --nocapture

# `make install` (PREFIX=/usr/local, DESTDIR honoured; docs/install.md says what goes where):
# builds the `tame` binary and the tame-ipc C libraries, then `install-files` copies them with
# the man pages and shell completions the binary generates from its own argument definitions
# (so they cannot drift), the systemd unit, the C header and the docs. `install-files` builds
# nothing: it takes the binary and libraries from INSTALL_BIN and INSTALL_LIBS.
PREFIX ?= /usr/local
BINDIR ?= $(PREFIX)/bin
LIBDIR ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
DATADIR ?= $(PREFIX)/share
MANDIR ?= $(DATADIR)/man
DOCDIR ?= $(DATADIR)/doc/tame
UNITDIR ?= $(LIBDIR)/systemd/system
RELEASE_DIR ?= $(or $(CARGO_TARGET_DIR),target)/release
INSTALL_BIN ?= $(RELEASE_DIR)/tame
INSTALL_LIBS ?= $(RELEASE_DIR)
IPC_LIBS := libtame_ipc.so libtame_ipc.a
# The systemd units in contrib/systemd, installed with ExecStart naming $(BINDIR)/tame.
UNITS := tame-serve.service tame-partition.service tame-guard.service
COMPLETIONS := $(DATADIR)/bash-completion/completions/tame $(DATADIR)/zsh/site-functions/_tame \
	$(DATADIR)/fish/vendor_completions.d/tame.fish

install:
	$(CARGO) build --release -p tame-cli -p tame-ipc
	@$(MAKE) --no-print-directory install-files

install-files:
	@for f in $(INSTALL_BIN) $(addprefix $(INSTALL_LIBS)/,$(IPC_LIBS)); do \
		[ -f "$$f" ] || { echo "$$f is missing: run 'make install' (it builds them first)" >&2; exit 2; }; \
	done
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(LIBDIR) $(DESTDIR)$(INCLUDEDIR) $(DESTDIR)$(MANDIR)/man1 \
		$(DESTDIR)$(UNITDIR) $(DESTDIR)$(DOCDIR) $(dir $(addprefix $(DESTDIR),$(COMPLETIONS)))
	install -m 755 $(INSTALL_BIN) $(DESTDIR)$(BINDIR)/tame
	install -m 755 $(INSTALL_LIBS)/libtame_ipc.so $(DESTDIR)$(LIBDIR)/libtame_ipc.so
	install -m 644 $(INSTALL_LIBS)/libtame_ipc.a $(DESTDIR)$(LIBDIR)/libtame_ipc.a
	install -m 644 crates/tame-ipc/include/tame_ipc.h $(DESTDIR)$(INCLUDEDIR)/tame_ipc.h
	@# Generated into a scratch directory, then installed with fixed modes (not the umask's).
	set -e; gen=$$(mktemp -d); trap 'rm -rf "$$gen"' EXIT; \
	$(INSTALL_BIN) man --out "$$gen/man1" >/dev/null; \
	install -m 644 "$$gen"/man1/*.1 $(DESTDIR)$(MANDIR)/man1/; \
	for shell in bash zsh fish; do $(INSTALL_BIN) completions $$shell > "$$gen/$$shell"; done; \
	install -m 644 "$$gen/bash" $(DESTDIR)$(DATADIR)/bash-completion/completions/tame; \
	install -m 644 "$$gen/zsh" $(DESTDIR)$(DATADIR)/zsh/site-functions/_tame; \
	install -m 644 "$$gen/fish" $(DESTDIR)$(DATADIR)/fish/vendor_completions.d/tame.fish; \
	for unit in $(UNITS); do \
		sed -e 's|/usr/local/bin/tame|$(BINDIR)/tame|g' -e 's|file:///usr/share/doc/tame|file://$(DOCDIR)|g' \
			contrib/systemd/$$unit > "$$gen/$$unit"; \
		install -m 644 "$$gen/$$unit" $(DESTDIR)$(UNITDIR)/$$unit; \
	done
	install -m 644 docs/*.md contrib/serve.toml $(DESTDIR)$(DOCDIR)/

uninstall:
	rm -f $(DESTDIR)$(BINDIR)/tame $(addprefix $(DESTDIR)$(LIBDIR)/,$(IPC_LIBS)) \
		$(DESTDIR)$(INCLUDEDIR)/tame_ipc.h $(addprefix $(DESTDIR)$(UNITDIR)/,$(UNITS)) \
		$(DESTDIR)$(MANDIR)/man1/tame.1 $(DESTDIR)$(MANDIR)/man1/tame-*.1 $(addprefix $(DESTDIR),$(COMPLETIONS))
	rm -rf $(DESTDIR)$(DOCDIR)
