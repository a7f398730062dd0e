# The course kit's two entry points. Each creates its virtual environment from the
# project's files on first use (pip install -e .), then runs.
#   make demo    release problem1, autograde sample submissions with nbgrader, print the gradebook
#   make test    the kit's whole test suite
# PYTHON picks the interpreter (default: Python 3.11); VENV the environment's folder.

PYTHON ?= $(shell .ci/find-python 3.11)
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: demo test test-fast venv clean

# bubblewrap is the sandbox student code runs in (graders/sandbox.py); setpriv/prlimit come
# with util-linux.
$(BIN)/.installed: pyproject.toml
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

test-fast: $(BIN)/.installed   # the fast tier: tests/unit, no grading runs, no JAX
	$(BIN)/python -m pytest tests/unit $(PYTEST_ARGS)

clean:
	rm -rf .venv .venv311 .venv312 submitted autograded feedback gradebook.db
