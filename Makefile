# replicalab: `make demo` and `make test` work on a fresh machine (they bootstrap everything).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

NATIVE := $(VENV)/.native

.PHONY: demo test lint bench clean setup browser servers native bytecode

# uv (PyPI) installs the dependencies: it keeps the wheels it downloaded in its cache, where
# pip here re-downloaded all of them every time (its HTTP cache stays empty): a fresh
# clone's install took 77 s with pip, 38 s with uv (the same 106 packages and versions).
# --compile-bytecode as pip does: uv writes no .pyc otherwise, and with
# PYTHONDONTWRITEBYTECODE set every process would compile numpy, pyarrow, Typer... again.
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip uv
	$(BIN)/uv pip install --quiet --compile-bytecode --python $(BIN)/python -e '.[test]'
	touch $(STAMP)

setup: $(STAMP)

# The native core of the checkers and the simulator (Rust, PyO3; maturin from PyPI, crates
# from crates.io): cargo comes from rustup. Without cargo it is left out, in one line, and
# replicalab runs in pure Python (the same results, slower): maturin would otherwise fetch a
# Rust toolchain of ~650 MB into the user's cache without asking.
# Cargo's build directory is shared by every clone (CARGO_TARGET_DIR, unless set): a fresh
# clone compiles only this crate, not its dependencies again (46 s -> 29 s).
$(NATIVE): export CARGO_TARGET_DIR ?= $(HOME)/.cache/replicalab/cargo-target
$(NATIVE): $(STAMP) native/Cargo.toml native/Cargo.lock native/pyproject.toml $(wildcard native/src/*.rs)
	@export PATH="$$HOME/.cargo/bin:$$PATH"; \
	if command -v cargo >/dev/null 2>&1; then \
	  echo "$(BIN)/pip install --quiet ./native"; \
	  $(BIN)/pip install --quiet ./native && touch $(NATIVE); \
	else \
	  echo "native core left out: no cargo on PATH or in ~/.cargo/bin; replicalab runs in pure Python (same results, slower); for the fast path install Rust (https://rustup.rs) and run make native"; \
	fi

native: $(NATIVE)

# Headless Chromium for the report-rendering test (Debian package; needs root or sudo).
browser:
	@scripts/install-chromium.sh

# Real servers for the integration tests: Debian packages and Toxiproxy (Go module proxy).
servers:
	@scripts/install-servers.sh

# The sources byte-compiled before anything runs: where PYTHONDONTWRITEBYTECODE is set (as
# on this project's CI machine) Python writes no .pyc itself, and every replicalab process
# compiled the modules it imports from source again (`replicalab probe --help`: 2,132 M
# instructions, 1,609 M compiled). Up-to-date files are skipped: a no-op once done.
bytecode: $(STAMP)
	@$(BIN)/python -m compileall -q src

demo: $(STAMP) $(NATIVE) bytecode
	$(BIN)/replicalab demo

# MinIO's build (minutes on 2 cores) runs in the background at the lowest priority (nice 19:
# the tests' processes come first, the build takes the CPU they leave idle while they wait
# on WAN delays) while the other tests run; its tests come last and wait for it
# (tests/minio_build.py). A build kept from an earlier clone is copied by `servers` instead,
# and then its tests are not put last: one xdist group of about 100 s, handed out last, runs
# on one worker after the others' work has all been handed out.
#
# pytest rewrites each test module's asserts when it imports it and, where
# PYTHONDONTWRITEBYTECODE is set (this project's CI machine), keeps none of it: each of the
# four workers rewrote and compiled all 200 test files again (a collection took 15.7 s of
# CPU, 5.0 s from the cache). The suite may write .pyc files (gitignored): one collection
# first fills the cache that the workers, and the commands the tests start, then read.
#
# Six workers on two cores: most tests wait on servers and emulated WAN links, not on the
# CPU. With four the cores were 145 % busy (fresh clone, 2026-11-30: pytest 10 min 4 s), with
# six 168 % (9 min 6 s). Beside a CPU hog: docs/testing.md has every run.
test: export REPLICALAB_MINIO_LATER = 1
test: export PYTHONDONTWRITEBYTECODE =
test: $(STAMP) $(NATIVE) bytecode browser servers
	$(BIN)/ruff check src tests benchmarks
	@mkdir -p .replicalab && (REPLICALAB_GO_JOBS=2 nice -n 19 scripts/install-servers.sh minio \
	  > .replicalab/minio-build.log 2>&1 & echo $$! > .replicalab/minio-build.pid)
	@$(BIN)/python -m pytest -q --collect-only -p no:cacheprovider > .replicalab/collect.log \
	  || { cat .replicalab/collect.log; exit 1; }
	REPLICALAB_MINIO_LATER=$$(test -x .replicalab/bin/minio && test -x .replicalab/bin/mc \
	  && echo 0 || echo 1) $(BIN)/python -m pytest -q -n 6 --dist loadgroup

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks

bench: $(STAMP)
	$(BIN)/python benchmarks/bench_sim_probe.py

clean:
	rm -rf $(VENV) runs .pytest_cache .ruff_cache
