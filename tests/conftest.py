"""Shared fixtures. JAX gets its 8 simulated devices before any test touches it."""
from __future__ import annotations

import os
import sys
import tempfile

import pytest

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO_ROOT)  # graders/ and solutions/ run from the repository
# Kernels and nbgrader's helpers are found on PATH: make it this environment's.
os.environ["PATH"] = os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")

# A fixed course secret, so hidden inputs (and the scores the tests expect) are the same on
# every machine; a real course keeps its own (`graders.hidden.grading_secret`).
os.environ.setdefault("KIT_GRADING_SECRET", "the kit's own tests")
# Verdicts cached for this test session only (identical artifacts are judged once).
os.environ.setdefault("KIT_VERDICT_CACHE", tempfile.mkdtemp(prefix="kit-verdicts-"))

import assignments  # noqa: E402

assignments.setup_devices(8)


@pytest.fixture(scope="session")
def repo_root() -> str:
    return REPO_ROOT


@pytest.fixture(scope="session")
def mesh_2x4():
    return assignments.make_mesh((2, 4))


FAST_MODULES = {"test_protocol", "test_hlo", "test_replica_groups", "test_costs", "test_devices"}
"""The fast tier (`make test-fast`, `pytest -m fast`): the protocol, the HLO reader, the
replica-group forms, the cost model, device set-up; hand-made inputs, no grading runs."""


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.module.__name__.rsplit(".", 1)[-1] in FAST_MODULES and not item.get_closest_marker("slow"):
            item.add_marker(pytest.mark.fast)
