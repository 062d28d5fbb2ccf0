# The two commands of the README: `make run` and `make test`. Everything else is their parts.

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
INSTALLED := $(VENV)/.installed
TOOLS := .data/tools
PROMTOOL := $(TOOLS)/prometheus/usr/bin/promtool
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: run test install tools browser nginx lint typecheck pytest screenshots bench db-stop clean

run: export DEBUG ?= true
run: install
	$(BIN)/python manage.py migrate --no-input
	$(BIN)/python manage.py seed_demo --base-url http://$(HOST):$(PORT)
	$(BIN)/python manage.py runserver $(HOST):$(PORT)

test: install tools lint typecheck pytest

install: $(INSTALLED)

# The platform, and the adapters' client (clients/python), which its tests drive.
$(INSTALLED): pyproject.toml clients/python/pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]' -e ./clients/python
	touch $@

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
pytest: install tools browser nginx
	PROMTOOL=$(CURDIR)/$(PROMTOOL) $(BIN)/pytest

# The cabinet's screenshots in docs/screenshots (docs/cabinet.md), by the browser tests.
screenshots: install browser
	SCREENSHOTS_DIR=$(CURDIR)/docs/screenshots $(BIN)/pytest tests/browser

# The exchange benchmark (docs/performance.md): wrk is the HTTP load generator.
bench: install
	command -v wrk >/dev/null || apt-get install -y -qq wrk || (apt-get update -qq && apt-get install -y -qq wrk)
	test -n "$$REDIS_URL" || command -v redis-server >/dev/null || apt-get install -y -qq redis-server || (apt-get update -qq && apt-get install -y -qq redis-server)
	$(BIN)/python bench/exchange.py

db-stop: install
	$(BIN)/python -m platform_site.embedded stop

clean: db-stop
	rm -rf $(VENV) .data .mypy_cache .ruff_cache .pytest_cache
