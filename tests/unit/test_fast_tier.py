"""The fast tier itself: collected without JAX, so `make test-fast` starts in a moment."""
from __future__ import annotations

import os
import subprocess
import sys

UNIT = os.path.dirname(os.path.abspath(__file__))


def test_the_fast_tier_collects_without_importing_jax():
    """Does collecting tests/unit (with the suite's conftest) leave JAX unimported?"""
    script = ("import sys, pytest\n"
              f"code = pytest.main([{UNIT!r}, '--collect-only', '-q', '-p', 'no:cacheprovider'])\n"
              "sys.exit(2 if code else 'jax' in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
