"""Shared set-up for the kit's tests. Importing it loads no JAX: the fast tier (`tests/unit`,
`make test-fast`) collects and runs without it. Tests that use JAX in this process compile as
the judges do: XLA_FLAGS, set here before any of them imports JAX, are the workers' own (8
simulated devices, LLVM at -O0; `graders.sandbox.XLA_FLAGS`)."""
from __future__ import annotations

import atexit
import fcntl
import os
import shutil
import sys
import tempfile

import pytest

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO_ROOT)  # graders/ and solutions/ run from the repository
# Kernels and nbgrader's helpers are found on PATH: make it this environment's.
os.environ["PATH"] = os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")
from graders.sandbox import XLA_FLAGS  # noqa: E402  (no JAX: graders.sandbox only names the flags)

os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " " + XLA_FLAGS).strip()

# A fixed course secret, so hidden inputs (and the scores the tests expect) are the same on
# every machine; a real course keeps its own (`graders.hidden.grading_secret`).
os.environ.setdefault("KIT_GRADING_SECRET", "the kit's own tests")
# Verdicts cached for this test session only (identical artifacts are judged once): made by
# the first process (xdist's workers inherit it) and removed when that process exits.
if "KIT_VERDICT_CACHE" not in os.environ:
    os.environ["KIT_VERDICT_CACHE"] = tempfile.mkdtemp(prefix="kit-verdicts-")
    atexit.register(shutil.rmtree, os.environ["KIT_VERDICT_CACHE"], True)


@pytest.fixture(scope="session")
def repo_root() -> str:
    return REPO_ROOT


@pytest.fixture(scope="session")
def mesh_2x4():
    import assignments

    assignments.setup_devices(8)
    return assignments.make_mesh((2, 4))


def _host_shared_memory_lock(mode: int):
    with open(os.path.join(tempfile.gettempdir(), "scaling-jax-kit-tests-shmem.lock"), "a") as f:
        fcntl.flock(f, mode)
        yield


@pytest.fixture
def quiet_shared_memory():
    """For a test that reads the host's shared memory (/proc/meminfo Shmem) before and after:
    no browser of another xdist worker runs meanwhile (Chromium's own shared memory is
    hundreds of MiB)."""
    yield from _host_shared_memory_lock(fcntl.LOCK_EX)


@pytest.fixture
def busy_shared_memory():
    """For a test that runs Chromium: held (shared) while it runs, so `quiet_shared_memory` waits."""
    yield from _host_shared_memory_lock(fcntl.LOCK_SH)


@pytest.fixture(scope="session")
def problem1_batch(tmp_path_factory):
    """The sandbox's files of the problem1 and fault corpora, the solution and the stub, graded
    once per test run by `graders.batch`; shared by every module that asserts on them, on
    every xdist worker (`tests/grading.py` `CorpusBatch`)."""
    from grading import CorpusBatch

    base = tmp_path_factory.getbasetemp()
    return CorpusBatch.shared(str((base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "corpus-batch"))


# `make test` runs the modules on pytest-xdist's workers (`--dist loadfile`: each module on
# one worker, its module fixtures built once), the longest first, so that no long module starts
# last. Seconds: one serial run on 2 cores (`--durations`); a module not named is short.
SECONDS = {"test_hub": 110, "test_browser": 85, "test_problem2": 55, "test_batch_faults": 50,
           "test_attacks": 45, "test_graders_problem1": 25, "test_nbgrader": 25, "test_warmup": 25,
           "test_problem4": 25, "test_problem3": 25, "test_notebooks": 25, "test_gradescope": 20,
           "test_feedback": 15, "test_canonical_artifacts": 15, "test_dask": 12, "test_links": 12,
           "test_schedule": 12, "test_build": 12, "test_batch_nbgrader": 12, "test_nbgrader_faults": 12,
           "test_checks": 10, "test_exchange_attacks": 20, "test_hostile_html": 20, "test_nbgrader_bounds": 12,
           "test_first_open": 50, "test_collectives": 45, "test_training": 55}


ONE_WORKER = {"test_hostile_html_unit": "nbconvert", "test_feedback_regions": "nbconvert",
              "test_notebook_bounds": "nbconvert"}
"""`make test-fast` runs the fast tier test by test on its workers (`--dist loadgroup`), but for
these modules: each group runs whole on one worker. They import nbconvert and nbgrader (a CPU
second each), which would otherwise be imported on every worker. (pytest-xdist's own
`xdist_group` mark does nothing with pytest 9.2, pytest-dev/pytest-xdist#1386; the controller
sees only node ids, so the groups are named here by module.)"""


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """`--dist loadgroup` with `ONE_WORKER`'s groups: every other test its own unit of work."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class OneWorkerGroups(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = os.path.splitext(os.path.basename(nodeid.split("::", 1)[0]))[0]
            return ONE_WORKER.get(module, nodeid)

    return OneWorkerGroups(config, log)


PYTHON_SPECIFIC = {"test_submission_text"}
"""Fast-tier modules whose subject changes with the Python version (how deeply nested JSON and
source the parser and compile() take: 3.12 changed the C recursion limit): on both stacks."""


def _module(item) -> str:
    return os.path.splitext(os.path.basename(str(item.fspath)))[0]


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Everything under tests/unit is the fast tier (`-m fast` selects it too; no JAX runs
    there, so it is `stack_neutral` too, but for `PYTHON_SPECIFIC`); the longest modules
    first, in collection order within a module."""
    unit = os.path.join(REPO_ROOT, "tests", "unit") + os.sep
    for item in items:
        if str(item.fspath).startswith(unit):
            item.add_marker(pytest.mark.fast)
            if _module(item) not in PYTHON_SPECIFIC:
                item.add_marker(pytest.mark.stack_neutral)
    _mark_more_corpora(items)
    order = {id(item): i for i, item in enumerate(items)}
    items.sort(key=lambda item: (-SECONDS.get(_module(item), 0), order[id(item)]))


def _mark_more_corpora(items) -> None:
    """In the rule corpora's modules, a test that grades corpus files (its `grade` fixture) and
    that `tests/older_stack.py` does not name is `more_corpora` (.ci/run: Python 3.12 only); one
    it names as a rule's sample is `rule_sample`, with the rule ids its gradings must find."""
    from older_stack import on_the_older_stack

    named = on_the_older_stack()
    modules = {"tests/" + node.split("::", 1)[0] for node in named}
    for item in items:
        node = item.nodeid.removeprefix("tests/")
        if item.nodeid.split("::", 1)[0] in modules:
            if node in named:
                if named[node]:
                    item.add_marker(pytest.mark.rule_sample(*sorted(named[node])))
            elif "grade" in getattr(item, "fixturenames", ()):
                item.add_marker(pytest.mark.more_corpora)


@pytest.fixture(autouse=True)
def rule_sample_met(request):
    """A test `tests/older_stack.py` names as a rule's sample must still break that rule: its
    gradings (fresh or from the session's cache) find a problem of each rule id named for it."""
    marker = request.node.get_closest_marker("rule_sample")
    if marker is None:
        yield
        return
    import grading

    with grading.rules_found() as found:
        yield
    missing = sorted(set(marker.args) - found)
    assert not missing, (f"tests/older_stack.py names {request.node.nodeid} as the compiled sample of "
                         f"{', '.join(missing)}, but its gradings found no problem of "
                         f"{'that rule' if len(missing) == 1 else 'those rules'} (found: {sorted(found) or 'none'}); "
                         "name another test for it there")
