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
from assignments.costs import estimate, program_seconds, slice_for

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
    """Each program at its own schedule (`program_seconds`: the estimate tables' column)."""
    from assignments.contracts.problem3 import jit_block, jit_matmul
    from solutions.problem3 import allgather_matmul, allreduce_matmul, reducescatter_matmul, transformer_block

    mesh = assignments.make_mesh((2, 4))
    v5e = slice_for("TPU v5e", (2, 4), ("X", "Y"))
    a = lambda *s: _abstract(mesh, *s)  # noqa: E731
    ag_args = (a((B, D), ("X", "Y")), a((D, F), (None, "Y")))
    ar_args = (a((B, D), ("X", "Y")), a((D, F), ("Y", None)))
    rs_args = (a((B, F), ("X", "Y")), a((F, D), ("Y", None)))
    blk_args = (a((B, D), ("X", "Y")), a((D, F), (None, "Y")), a((F, D), ("Y", None)))
    runs = {name: _analyze(mesh, fn, *args) for name, fn, args in (
        ("plain", jit_matmul("X", "Y"), ag_args), ("ring", allgather_matmul, ag_args),
        ("ar_plain", jit_matmul("X", None), ar_args), ("ar", allreduce_matmul, ar_args),
        ("rs_plain", jit_matmul("X", "Y"), rs_args), ("rs", reducescatter_matmul, rs_args),
        ("blk_plain", jit_block, blk_args), ("blk", transformer_block, blk_args))}
    t = {name: program_seconds(x, v5e) for name, x in runs.items()}
    plain, ring = estimate(runs["plain"], v5e), estimate(runs["ring"], v5e)
    # Where a chunk's matmul (compute / 4) would hide one permute (comm / 3), compute growing with F.
    f_even = F * (ring.comm_s / 3) / (ring.compute_s / 4)
    return {
        "p3_compute": _us(plain.compute_s), "p3_gather": _us(plain.comm_s), "p3_plain": _us(t["plain"]),
        "p3_ring_comm": _us(ring.comm_s), "p3_ring_compute": _us(ring.compute_s), "p3_ring": _us(t["ring"]),
        "p3_speedup": _x(t["plain"] / t["ring"]),
        "p3_sent_plain": f"{plain.comm_bytes / 1e6:.2f} MB", "p3_sent_ring": f"{ring.comm_bytes / 1e6:.2f} MB",
        "p3_rs_plain": _us(t["rs_plain"]), "p3_rs_ring": _us(t["rs"]), "p3_rs_speedup": _x(t["rs_plain"] / t["rs"]),
        "p3_ar_speedup": _x(t["ar_plain"] / t["ar"]),
        "p3_block_plain": _us(t["blk_plain"]), "p3_block": _us(t["blk"]),
        "p3_block_speedup": _x(t["blk_plain"] / t["blk"]), "p3_f_even": f"{f_even:,.0f}",
    }


def problem4_figures() -> dict:
    """The one-way and two-way reduce-scatter matmuls on a v5e (Y a line) and a v5p (Y a ring),
    at JAX's default precision and at Precision.HIGHEST."""
    from solutions.problem3 import reducescatter_matmul
    from solutions.problem4 import reducescatter_matmul_bidirectional

    mesh = assignments.make_mesh((2, 4))
    args = (_abstract(mesh, (B, F), ("X", "Y")), _abstract(mesh, (F, D), ("Y", None)))
    runs = {}
    for precision in ("default", "highest"):
        with jax.default_matmul_precision(precision):
            runs[precision] = [_analyze(mesh, fn, *args) for fn in (reducescatter_matmul, reducescatter_matmul_bidirectional)]
    out = {}
    for label, chip in (("v5e", "TPU v5e"), ("v5p", "TPU v5p")):
        s = slice_for(chip, (2, 4), ("X", "Y"))
        for precision, (one_a, two_a) in runs.items():
            one, two = estimate(one_a, s), estimate(two_a, s)
            t1, t2 = program_seconds(one_a, s), program_seconds(two_a, s)
            key = f"p4_{label}" + ("" if precision == "default" else f"_{precision}")
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
