"""Lessons consistent with the numbers: every figure a source notebook quotes from the cost
model is marked `<span title="fig:NAME">VALUE</span>`; this recomputes each one from the
kit's own model (`assignments.costs`, the solutions' compiled programs, the notebooks' own
cost code) and fails when a notebook's text drifts from what the model prints."""
from __future__ import annotations

import dataclasses
import functools
import glob
import os
import re

import jax
import jax.numpy as jnp
import nbformat
import numpy as np
import pytest
from jax.sharding import NamedSharding, PartitionSpec as P

import assignments
from assignments.costs import estimate, pipelined_seconds, slice_for

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIGURE = re.compile(r'<span title="fig:(\w+)">([^<]*)</span>')
B, D, F = 1024, 2048, 8192


def _abstract(mesh, shape, spec):
    return jax.ShapeDtypeStruct(shape, jnp.float32, sharding=NamedSharding(mesh, P(*spec)))


def _analyze(mesh, fn, *args):
    return assignments.analyze(jax.jit(functools.partial(fn, mesh=mesh)).lower(*args).compile(), mesh)


def _us(s):
    return f"{s * 1e6:.1f} us"


def _x(r):
    return f"{r:.2f}x"


def problem3_figures() -> dict:
    from assignments.contracts.problem3 import jit_block, jit_matmul
    from solutions.problem3 import allgather_matmul, reducescatter_matmul, transformer_block

    mesh = assignments.make_mesh((2, 4))
    v5e = slice_for("TPU v5e", (2, 4), ("X", "Y"))
    a = lambda *s: _abstract(mesh, *s)  # noqa: E731
    ag_args = (a((B, D), ("X", "Y")), a((D, F), (None, "Y")))
    rs_args = (a((B, F), ("X", "Y")), a((F, D), ("Y", None)))
    blk_args = (a((B, D), ("X", "Y")), a((D, F), (None, "Y")), a((F, D), ("Y", None)))
    plain = estimate(_analyze(mesh, jit_matmul("X", "Y"), *ag_args), v5e)
    ring = estimate(_analyze(mesh, allgather_matmul, *ag_args), v5e)
    ring_s = pipelined_seconds(ring.compute_s, ring.comm_s, steps=4)
    rs_plain = estimate(_analyze(mesh, jit_matmul("X", "Y"), *rs_args), v5e)
    rs_ring = estimate(_analyze(mesh, reducescatter_matmul, *rs_args), v5e)
    rs_ring_s = pipelined_seconds(rs_ring.compute_s, rs_ring.comm_s, steps=4)
    blk_plain = estimate(_analyze(mesh, jit_block, *blk_args), v5e)
    blk = estimate(_analyze(mesh, transformer_block, *blk_args), v5e)
    blk_s = 2 * pipelined_seconds(blk.compute_s / 2, blk.comm_s / 2, steps=4)
    # Where a chunk's matmul (compute / 4) stops hiding one permute (comm / 3), as F shrinks:
    # compute grows with F, the permutes do not.
    f_even = F * (ring.comm_s / 3) / (ring.compute_s / 4)
    return {
        "p3_compute": _us(plain.compute_s), "p3_gather": _us(plain.comm_s), "p3_plain": _us(plain.serialized_s),
        "p3_ring_comm": _us(ring.comm_s), "p3_ring": _us(ring_s), "p3_speedup": _x(plain.serialized_s / ring_s),
        "p3_sent_plain": f"{plain.comm_bytes / 1e6:.2f} MB", "p3_sent_ring": f"{ring.comm_bytes / 1e6:.2f} MB",
        "p3_rs_plain": _us(rs_plain.serialized_s), "p3_rs_speedup": _x(rs_plain.serialized_s / rs_ring_s),
        "p3_block_plain": _us(blk_plain.serialized_s), "p3_block": _us(blk_s),
        "p3_block_speedup": _x(blk_plain.serialized_s / blk_s), "p3_f_even": f"{f_even:,.0f}",
    }


def problem4_figures() -> dict:
    from solutions.problem3 import reducescatter_matmul
    from solutions.problem4 import reducescatter_matmul_bidirectional

    mesh = assignments.make_mesh((2, 4))
    out = {}
    for label, chip in (("v5e", "TPU v5e"), ("v5p", "TPU v5p")):
        s = slice_for(chip, (2, 4), ("X", "Y"))
        for f in (F, 1024):
            args = (_abstract(mesh, (B, f), ("X", "Y")), _abstract(mesh, (f, D), ("Y", None)))
            one = estimate(_analyze(mesh, reducescatter_matmul, *args), s)
            two = estimate(_analyze(mesh, reducescatter_matmul_bidirectional, *args), s)
            t1 = pipelined_seconds(one.compute_s, one.comm_s, steps=4)
            t2 = pipelined_seconds(one.compute_s, two.comm_s, steps=4)
            key = f"p4_{label}" + ("" if f == F else f"_f{f}")
            out.update({f"{key}_compute": _us(one.compute_s), f"{key}_comm1": _us(one.comm_s),
                        f"{key}_comm2": _us(two.comm_s), f"{key}_one": _us(t1), f"{key}_two": _us(t2),
                        f"{key}_speedup": _x(t1 / t2)})
    return out


def problem2_figures() -> dict:
    """Runs the notebook's own cost cells (compile_for, compare, ...) on the solutions."""
    import solutions.problem2 as sol
    from assignments.costs import estimate as est

    nb = nbformat.read(os.path.join(ROOT, "source", "problem2", "problem2.ipynb"), as_version=4)
    ns = dict(jax=jax, jnp=jnp, np=np, NamedSharding=NamedSharding, P=P, functools=functools,
              dataclasses=dataclasses, make_mesh=assignments.make_mesh, assignments=assignments,
              moe_allgather=sol.moe_allgather, moe_all_to_all=sol.moe_all_to_all)
    for cell in nb.cells:
        if cell.cell_type == "code" and cell.metadata.get("tags") and "cost-model" in cell.metadata["tags"]:
            exec(cell.source.split("\nif ready:")[0], ns)   # definitions only, not the printing
    routing, rounds, useful, rows = ns["compare"](1.0)
    g, a = (est(rows[n], "TPU v5e") for n in ("all-gather", "all-to-all"))
    more = {}
    for s in (1.5, 2.0):
        _, r, _, rs = ns["compare"](s)
        g2, a2 = (est(rs[n], "TPU v5e") for n in ("all-gather", "all-to-all"))
        key = str(s).replace(".", "")
        more.update({f"p2_s{key}_rounds": str(r), f"p2_s{key}_all_to_all": _us(a2.serialized_s),
                     f"p2_s{key}_speedup": _x(g2.serialized_s / a2.serialized_s)})
    return {**more,
            "p2_share": f"{np.bincount(routing, minlength=8).max() / len(routing):.0%}",
            "p2_sent_allgather": f"{g.comm_bytes / 1e6:.1f} MB", "p2_sent_all_to_all": f"{a.comm_bytes / 1e6:.1f} MB",
            "p2_flops_allgather": f"{rows['all-gather'].flops:.3g}", "p2_flops_all_to_all": f"{rows['all-to-all'].flops:.3g}",
            "p2_padding_all_to_all": f"{1 - useful / rows['all-to-all'].flops:.0%}","p2_rounds": str(rounds), "p2_allgather": _us(g.serialized_s), "p2_all_to_all": _us(a.serialized_s),
            "p2_speedup": _x(g.serialized_s / a.serialized_s),
            "p2_allgather_comm": _us(g.comm_s), "p2_all_to_all_comm": _us(a.comm_s),
            "p2_allgather_compute": _us(g.compute_s), "p2_all_to_all_compute": _us(a.compute_s),
            "p2_padding": f"{1 - useful / rows['all-gather'].flops:.0%}"}


def benchmark_figures() -> dict:
    """benchmarks/book_collective_matmul.py's predictions of the book's measurements."""
    import sys

    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    from book_collective_matmul import BOOK, predictions

    p = predictions()["predicted"]
    return {"bench_plain": _us(p["plain jax.jit"]).replace(".0 us", " us"),
            "bench_ring": _us(p["collective matmul"]),
            "bench_plain_ratio": f"{p['plain jax.jit'] / BOOK['plain jax.jit']:.2f}",
            "bench_ring_ratio": f"{p['collective matmul'] / BOOK['collective matmul']:.2f}",
            "bench_speedup": _x(p["plain jax.jit"] / p["collective matmul"])}


@functools.lru_cache(maxsize=None)
def figures() -> dict:
    return {**problem3_figures(), **problem4_figures(), **problem2_figures(), **benchmark_figures()}


def quoted() -> list[tuple[str, str, str]]:
    found = []
    for path in sorted(glob.glob(os.path.join(ROOT, "source", "*", "*.ipynb"))):
        nb = nbformat.read(path, as_version=4)
        for cell in nb.cells:
            for name, value in FIGURE.findall(cell.source):
                found.append((os.path.relpath(path, ROOT), name, value))
    return found


def test_notebooks_quote_figures():
    names = {name for _, name, _ in quoted()}
    assert {"p2_speedup", "p3_speedup", "p4_v5e_speedup", "p4_v5p_speedup"} <= names


@pytest.mark.parametrize("path,name,value", quoted())
def test_quoted_figure_is_what_the_model_prints(path, name, value):
    """Does each marked figure in a notebook equal the model's figure, as formatted?"""
    assert name in figures(), f"{path}: unknown figure {name!r}"
    assert value == figures()[name], f"{path}: {name} says {value!r}, the model gives {figures()[name]!r}"


if __name__ == "__main__":
    for k, v in figures().items():
        print(f"{k:24s} {v}")
