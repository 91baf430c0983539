# All set-up lives here so a fresh Debian/Ubuntu machine with Python 3.11 needs only `make run` or `make test`.
PYTHON ?= python3.11
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: run test lint bench clean

# The stamp makes a second call take seconds: pip runs again only when pyproject.toml changed.
$(BIN)/python:
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "error: $(PYTHON) not found; install Python 3.11 (apt-get install python3.11 python3.11-venv)" >&2; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

$(STAMP): $(BIN)/python pyproject.toml
	# torch first and pinned: an unpinned torch pulls a multi-GB CUDA build; 2.13.0 is the CPU build.
	$(BIN)/pip install --quiet torch==2.13.0
	$(BIN)/pip install --quiet -e '.[dev]'
	@touch $(STAMP)

# A real task on the example project: diagnose mode without a model, the full loop with one.
run: $(STAMP)
	@if [ -z "$$CODELOOP_MODEL" ]; then \
	  echo "No model configured: running in diagnose mode (retrieval and the test run are real; nothing is changed)."; \
	  echo "For the full loop name a model, e.g.  CODELOOP_MODEL=openai-chat:gpt-4o make run  (OPENAI_API_KEY, OPENAI_BASE_URL),"; \
	  echo "or the scripted stand-in:            CODELOOP_MODEL=function:examples/models/scripted.py:fix make run"; \
	fi
	$(BIN)/codeloop run @examples/bugfix-report.md --repo examples/bugfix --mode execute

# Two workers (pytest-xdist), each test file on one worker: most tests wait on subprocesses, the
# bus or the sandbox, so two at a time take little more than half the serial time on 2 cores.
TEST_WORKERS ?= 2

test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile

lint: $(STAMP)
	$(BIN)/ruff check .

# Scripts that need input (a development set, a repository to search) are named, not run.
NEEDS_INPUT := benchmarks/issue_latency.py benchmarks/localization_eval.py
# Modules the benchmarks (and tests) import, not benchmarks themselves.
BENCH_LIBRARIES := benchmarks/scale_cluster.py

bench: $(STAMP)
	@for b in benchmarks/*.py; do \
		case " $(NEEDS_INPUT) " in *" $$b "*) echo "== $$b: needs input, run it by hand (README, Benchmarks)"; continue;; esac; \
		case " $(BENCH_LIBRARIES) " in *" $$b "*) continue;; esac; \
		echo "== $$b"; $(BIN)/python $$b || exit 1; \
	done

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
