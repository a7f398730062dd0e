# The course kit's two entry points. Each creates its virtual environment from the
# project's files on first use (pip install -e .), then runs.
#   make demo    release problem1, autograde sample submissions with nbgrader, print the gradebook
#   make test    the kit's whole test suite
# PYTHON_VERSION picks the stack (3.11, the default, or 3.12), found on PATH or in pyenv's
# versions (.ci/find-python); PYTHON an interpreter by path instead; VENV the environment's folder
# (.venv for 3.11, .venv312 for 3.12).

PYTHON_VERSION ?= 3.11
ifndef PYTHON
PYTHON := $(shell .ci/find-python $(PYTHON_VERSION))
endif
VENV ?= $(if $(filter 3.11,$(PYTHON_VERSION)),.venv,.venv$(subst .,,$(PYTHON_VERSION)))
BIN := $(VENV)/bin

.PHONY: demo test test-fast venv clean

# bubblewrap is the sandbox student code runs in (graders/sandbox.py); setpriv/prlimit come
# with util-linux.
$(BIN)/.installed: pyproject.toml
	@test -n "$(PYTHON)" || { echo "make: no Python $(PYTHON_VERSION) (see find-python's message above)"; exit 1; }
	.ci/system-packages bubblewrap:bwrap util-linux:setpriv
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[browser,tests]'   # playwright drives Debian's chromium; pytest-xdist
	$(BIN)/python -c "import jax, sys; print('stack: Python', sys.version.split()[0], '| JAX', jax.__version__)"
	touch $@

venv: $(BIN)/.installed

demo: $(BIN)/.installed
	$(BIN)/python -m graders.demo

# Three workers keep 2 cores busy while one waits on pip, JupyterLab or a browser; each test
# module runs whole on one worker, the longest first (tests/conftest.py).
TEST_WORKERS ?= 3

test: $(BIN)/.installed
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder $(PYTEST_ARGS)

# The fast tier (tests/unit: no grading runs, no JAX) waits more than it computes (the
# protocol's deadline tests sleep), so 4 workers on 2 cores: about 8 s against 13 serially. The
# tests that import nbconvert and nbgrader (a second each) share one worker (tests/conftest.py ONE_WORKER).
FAST_WORKERS ?= 4

test-fast: $(BIN)/.installed
	$(BIN)/python -m pytest -n $(FAST_WORKERS) --dist loadgroup tests/unit $(PYTEST_ARGS)

clean:
	rm -rf .venv .venv311 .venv312 submitted autograded feedback gradebook.db
