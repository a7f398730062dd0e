"""Shared set-up for the kit's tests. Importing it loads no JAX: the fast tier (`tests/unit`,
`make test-fast`) collects and runs without it. Tests that use JAX in this process get its 8
simulated devices from XLA_FLAGS, set here before any of them imports JAX."""
from __future__ import annotations

import os
import sys
import tempfile

import pytest

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO_ROOT)  # graders/ and solutions/ run from the repository
# Kernels and nbgrader's helpers are found on PATH: make it this environment's.
os.environ["PATH"] = os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")
os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8").strip()

# A fixed course secret, so hidden inputs (and the scores the tests expect) are the same on
# every machine; a real course keeps its own (`graders.hidden.grading_secret`).
os.environ.setdefault("KIT_GRADING_SECRET", "the kit's own tests")
# Verdicts cached for this test session only (identical artifacts are judged once).
os.environ.setdefault("KIT_VERDICT_CACHE", tempfile.mkdtemp(prefix="kit-verdicts-"))


@pytest.fixture(scope="session")
def repo_root() -> str:
    return REPO_ROOT


@pytest.fixture(scope="session")
def mesh_2x4():
    import assignments

    assignments.setup_devices(8)
    return assignments.make_mesh((2, 4))


@pytest.fixture(scope="session")
def problem1_batch(tmp_path_factory):
    """The problem1 and fault corpora graded once per session by `graders.batch`; shared by
    every module that asserts on them (`tests/grading.py` `CorpusBatch`)."""
    from grading import CorpusBatch

    return CorpusBatch(str(tmp_path_factory.mktemp("corpus-batch")))


def pytest_collection_modifyitems(config, items):
    """Everything under tests/unit is the fast tier (`-m fast` selects it too)."""
    unit = os.path.join(REPO_ROOT, "tests", "unit") + os.sep
    for item in items:
        if str(item.fspath).startswith(unit):
            item.add_marker(pytest.mark.fast)
