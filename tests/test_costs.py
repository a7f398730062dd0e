"""The cost model: the book's ring formulas, and its predictions of the book's measurements."""
import os
import subprocess
import sys

import pytest

from assignments.costs import CHIPS, collective_seconds, communication_seconds, pipelined_seconds
from assignments.hlo import ArrayShape, Collective, ProgramAnalysis

V5E = CHIPS["TPU v5e"]
MIB = ArrayShape("f32", (512, 512))  # 1 MiB


def coll(kind, n=4, operands=(MIB,), results=None, count=1, shifts=()):
    return Collective(kind, ("Y",), tuple(operands), tuple(results or operands), count, n, shifts)


def test_ring_formulas():
    """Do the collectives cost what the book's formulas say on a 4-device ring?"""
    w = V5E.link_bytes_per_s
    gathered = ArrayShape("f32", (512, 2048))  # 4 MiB result
    assert collective_seconds(coll("all-gather", results=(gathered,)), V5E) == pytest.approx(0.75 * 4 * 2**20 / (2 * w))
    assert collective_seconds(coll("all-reduce"), V5E) == pytest.approx(2 * 0.75 * 2**20 / (2 * w))
    assert collective_seconds(coll("collective-permute", shifts=(1,)), V5E) == pytest.approx(2**20 / w)


def test_opposite_permutes_overlap():
    """Do permutes in opposite ring directions share no link (the bidirectional speed-up)?"""
    half = ArrayShape("f32", (512, 256))
    one_way = ProgramAnalysis((coll("collective-permute", count=3, shifts=(1,)),), (), None, 8)
    two_way = ProgramAnalysis((coll("collective-permute", operands=(half,), count=3, shifts=(1,)),
                               coll("collective-permute", operands=(half,), count=3, shifts=(3,))), (), None, 8)
    assert communication_seconds(two_way, V5E) == pytest.approx(communication_seconds(one_way, V5E) / 2)


def test_pipelined_schedule():
    """Is a ring compute-bound when each step's matmul outlasts a permute, link-bound otherwise?"""
    assert pipelined_seconds(224e-6, 70e-6, steps=4) == pytest.approx(224e-6)
    assert pipelined_seconds(40e-6, 90e-6, steps=4) == pytest.approx(90e-6 + 10e-6)
    assert pipelined_seconds(5e-6, 1e-6, steps=1) == 5e-6


@pytest.mark.slow
def test_book_benchmark_predicts_within_a_fifth(repo_root):
    """Does the model land within 20% of the book's TPU v5e measurements (311 us and 244 us)?"""
    out = subprocess.run([sys.executable, os.path.join(repo_root, "benchmarks", "book_collective_matmul.py")],
                         capture_output=True, text=True, check=True, cwd=repo_root).stdout
    ratios = {line.split()[0] + " " + line.split()[1]: float(line.split()[-1])
              for line in out.splitlines() if line.startswith(("plain jax.jit", "collective matmul"))}
    assert set(ratios) == {"plain jax.jit", "collective matmul"}, out
    for name, ratio in ratios.items():
        assert 0.8 <= ratio <= 1.2, out
