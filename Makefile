# gridxfer: `make demo` and `make test` work on a fresh Debian machine as root.
# Both are idempotent: a second run only re-checks stamps and takes seconds.
SHELL := /bin/bash
VENV  := .venv
PY    := $(VENV)/bin/python
PIP   := $(VENV)/bin/pip

# Debian packages the real stack needs (servers, clients, bindings, test tools).
APT_PACKAGES := xrootd-server xrootd-client python3-xrootd \
	gfal2 gfal2-plugin-file gfal2-plugin-xrootd gfal2-plugin-gridftp python3-gfal2 \
	gfal2-util-scripts python3-gfal2-util \
	xrootd-plugins xrootd-server-plugins xrootd-scitokens-plugins xrootd-client-http-plugins \
	gfal2-plugin-http davix curl python3-jwt python3-cryptography python3-m2crypto \
	globus-gridftp-server-progs globus-gass-copy-progs globus-proxy-utils openssl \
	iperf3 openssh-server nagios4 monitoring-plugins ansible \
	python3-venv iproute2 iputils-ping ethtool procps psmisc util-linux sudo \
	g++ libxrootd-client-dev zlib1g-dev

.PHONY: all deps venv native lint test test-all test-slow demo bench clean help
all: test

help:
	@echo "make demo   - install what is missing, bring up the local grid, run a real campaign"
	@echo "make test   - make lint, then unit, contract, CLI and integration tests on real servers"
	@echo "make native - build the small-file relay in C++ (make test, demo and bench do it too)"
	@echo "make lint   - ruff on src/ tests/ bench/ checks/ (seconds); mypy runs in the tests"
	@echo "make test-slow - the slow soak tests only"
	@echo "make bench  - benchmarks against real peers; appends to bench/results/*.jsonl"

# apt-get only when something is missing; `dpkg-query` is fast on a second run.
.stamp-apt: Makefile
	@missing=$$(for p in $(APT_PACKAGES); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q '^install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "installing: $$missing"; \
	  if [ "$$(id -u)" != 0 ]; then echo "need root to apt-get install: $$missing" >&2; exit 1; fi; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	fi
	@touch $@

deps: .stamp-apt

# The venv must come from Debian's python: only it has the gfal2 / XRootD bindings.
$(VENV)/bin/python:
	/usr/bin/python3 -m venv --system-site-packages $(VENV)

.stamp-venv: .stamp-apt $(VENV)/bin/python setup.cfg pyproject.toml
	$(PIP) install -q --disable-pip-version-check -e '.[test]'
	$(PY) -m compileall -q src >/dev/null
	@touch $@

venv: .stamp-venv

# The small-file relay in C++ (movers/xrootd/native/relay.cpp; why: its header and
# docs/ARCHITECTURE.md). Without it, relaynative.py falls back to the Python relay.
NATIVE := src/gridxfer/movers/xrootd/native/libgxrelay.so
$(NATIVE): src/gridxfer/movers/xrootd/native/relay.cpp .stamp-apt
	g++ -O2 -std=c++17 -fPIC -shared -Wall -Wextra -isystem /usr/include/xrootd \
	  -o $@.tmp $< -lXrdCl -lz && mv $@.tmp $@

native: $(NATIVE)

# ruff first: a second of checking before minutes of tests (config: pyproject.toml [tool.ruff]).
# mypy runs inside the tests (tests/unit/test_static_checks.py: a baseline that only shrinks).
lint: .stamp-venv
	$(VENV)/bin/ruff check src tests bench checks

test: .stamp-venv $(NATIVE) lint
	$(PY) -m pytest -q -ra tests

test-slow: .stamp-venv $(NATIVE)
	$(PY) -m pytest -q -ra -m slow tests

demo: .stamp-venv $(NATIVE)
	$(PY) -m gridxfer.testbed.demo

bench: .stamp-venv $(NATIVE)
	$(PY) -m bench

clean:
	-$(VENV)/bin/gridxfer testbed down >/dev/null 2>&1
	rm -rf $(VENV) .stamp-* src/*.egg-info .pytest_cache .mypy_cache .ruff_cache $(NATIVE)
