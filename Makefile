# ragrade: the two commands of the quick start are `make demo` and `make test`.
# Each creates .venv/ and installs what it needs (pinned by constraints.txt, torch==2.13.0 CPU).

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
OUT ?= out/demo
# two or more workers (pytest-xdist): the suite waits on servers and subprocesses as much as it computes
PYTEST_ARGS ?= -n auto --dist loadfile

export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false
export RAY_AUTH_MODE := disabled
# Material for MkDocs prints a banner about MkDocs 2.0 on every build; the pins keep MkDocs 1.6
export NO_MKDOCS_2_WARNING := 1

.PHONY: install demo test lint typecheck unit docs screenshots bench clean chromium

$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q torch==2.13.0
	$(BIN)/python -m pip install -q -c constraints.txt -e ".[all,dev,docs]"
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/ragrade demo --out $(OUT)

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks scripts

# src/ragrade, tests, benchmarks and scripts: the files of pyproject's [tool.mypy] (tests and benchmarks at --strict)
typecheck: $(STAMP)
	$(BIN)/mypy

# headless Chromium for the report's browser tests (Debian's package; installed when missing and root)
chromium:
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing chromium for the browser tests"; \
	    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; } \
	      || echo "chromium could not be installed: the browser tests will be skipped"; \
	  else echo "chromium is missing and cannot be installed here: the browser tests will be skipped"; fi; }

unit: $(STAMP) chromium
	$(BIN)/pytest $(PYTEST_ARGS); rc=$$?; if [ $$rc -eq 5 ]; then echo "no tests collected"; rc=0; fi; exit $$rc

# the documentation site (docs/, mkdocs.yml) into site/: a warning (a broken link, a page missing from the nav) fails
# it; the reference pages are written from the code during the build (scripts/docs/hooks.py)
docs: $(STAMP)
	$(BIN)/mkdocs build --strict --quiet

# the report's pictures in docs/img/, taken by headless Chromium from a fresh demo run (out/docs-demo)
screenshots: $(STAMP) chromium
	rm -rf out/docs-demo
	$(BIN)/ragrade demo --out out/docs-demo
	$(BIN)/python -m scripts.docs.screenshots out/docs-demo/report.html docs/img

test: lint typecheck docs unit

bench: $(STAMP)
	for f in benchmarks/bench_*.py; do echo "== $$f"; $(BIN)/python $$f || exit 1; done

clean:
	rm -rf $(VENV) out site .pytest_cache .mypy_cache .ruff_cache
