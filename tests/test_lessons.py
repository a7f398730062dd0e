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
from assignments.costs import cube_slice, estimate, program_seconds, slice_for

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
    """The one-way and two-way reduce-scatter matmuls on a v5e (Y a line) and a v5p (the 2x4 mesh
    inside a 4x4x4 cube, Y on one of its 4-chip axes: a ring),
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
    for label, s in (("v5e", slice_for("TPU v5e", (2, 4), ("X", "Y"))),
                     ("v5p", cube_slice("TPU v5p", (2, 4), ("X", "Y"), ring="Y"))):
        for precision, (one_a, two_a) in runs.items():
            one, two = estimate(one_a, s), estimate(two_a, s)
            t1, t2 = program_seconds(one_a, s), program_seconds(two_a, s)
            key = f"p4_{label}" + ("" if precision == "default" else f"_{precision}")
            out.update({f"{key}_compute": _us(one.compute_s), f"{key}_comm1": _us(one.comm_s),
                        f"{key}_comm2": _us(two.comm_s), f"{key}_one": _us(t1), f"{key}_two": _us(t2),
                        f"{key}_speedup": _x(t1 / t2)})
    out.update(problem4_allreduce_figures())
    return out


def problem4_allreduce_figures() -> dict:
    """Plain jax.jit's all-reduce matmul (one matmul, one all-reduce over Y) against the two-way
    rings of allreduce_matmul_bidirectional, at the book's sizes on both slices: the same bytes
    on the busiest link, so the same communication; only the estimated time differs."""
    from assignments.contracts.problem3 import jit_matmul
    from solutions.problem4 import allreduce_matmul_bidirectional

    mesh = assignments.make_mesh((2, 4))
    args = (_abstract(mesh, (B, D), ("X", "Y")), _abstract(mesh, (D, F), ("Y", None)))
    plain = _analyze(mesh, jit_matmul("X", None), *args)
    two = _analyze(mesh, allreduce_matmul_bidirectional, *args)
    out = {}
    for label, s in (("v5e", slice_for("TPU v5e", (2, 4), ("X", "Y"))),
                     ("v5p", cube_slice("TPU v5p", (2, 4), ("X", "Y"), ring="Y"))):
        e1, e2 = estimate(plain, s), estimate(two, s)
        assert e1.link_bytes == e2.link_bytes and abs(e1.comm_s - e2.comm_s) < 1e-9
        t1, t2 = program_seconds(plain, s), program_seconds(two, s)
        out.update({f"p4_ar_{label}_link": f"{e1.link_bytes / 1e6:.2f} MB", f"p4_ar_{label}_comm": _us(e1.comm_s),
                    f"p4_ar_{label}_plain": _us(t1), f"p4_ar_{label}_two": _us(t2),
                    f"p4_ar_{label}_speedup": _x(t1 / t2)})
    return out


def collectives_figures() -> dict:
    """collectives' model answer: the solutions beside jax.lax's own collectives (the contract's
    baselines) at the written question's sizes, A f32[1024, 4096], on a 4-chip TPU v5e line and on
    an 8-chip ring (the notebook's pricing cell), each at its own schedule (`program_seconds`)."""
    import solutions.collectives as sol
    from assignments.contracts import get_assignment

    parts = get_assignment("collectives").parts
    t = {}
    for where, shape, chip in (("line", (1, 4), slice_for("TPU v5e", (1, 4), ("X", "Y"))),
                               ("ring", (1, 8), slice_for("TPU v5e", (1, 8), ("X", "Y"), wraparound={"Y": True}))):
        mesh, n = assignments.make_mesh(shape), shape[1]
        for part in parts:
            (a,) = part.args
            arg = _abstract(mesh, (n, 1024, 4096) if a.dims[0] == "nY" else (1024, 4096), a.spec)
            for who, fn in (("mine", getattr(sol, part.name)), ("lax", part.baseline)):
                t[where, part.name, who] = program_seconds(_analyze(mesh, fn, arg), chip)

    def alike(*keys):
        return len({round(t[k], 12) for k in keys}) == 1

    gathers = ("ring_all_gather", "ring_reduce_scatter", "bidirectional_all_gather")
    # what the answer says of them: on the line every all-gather and reduce-scatter costs the same
    # (mine and jax.lax's), and each all-reduce and all-to-all as jax.lax's; on the ring jax.lax's
    # and the bidirectional ring alike, the one-way rings twice that, the all-to-alls alike
    assert alike(*(("line", p, w) for p in gathers for w in ("mine", "lax")))
    assert all(alike((where, p, "mine"), (where, p, "lax"))
               for where, p in (("line", "ring_all_reduce"), ("line", "direct_all_to_all"),
                                ("ring", "direct_all_to_all")))
    assert alike(*(("ring", p, "lax") for p in gathers), ("ring", "bidirectional_all_gather", "mine"))
    assert alike(("ring", "ring_all_gather", "mine"), ("ring", "ring_reduce_scatter", "mine"))
    ms = lambda s: f"{s * 1e6:.0f} us"  # noqa: E731
    return {"c_line_gather": _us(t["line", "ring_all_gather", "mine"]),
            "c_line_all_reduce": _us(t["line", "ring_all_reduce", "mine"]),
            "c_line_all_to_all": _us(t["line", "direct_all_to_all", "mine"]),
            "c_ring_lax_gather": ms(t["ring", "ring_all_gather", "lax"]),
            "c_ring_lax_all_reduce": ms(t["ring", "ring_all_reduce", "lax"]),
            "c_ring_gather": ms(t["ring", "ring_all_gather", "mine"]),
            "c_ring_all_reduce": ms(t["ring", "ring_all_reduce", "mine"]),
            "c_ring_all_to_all": ms(t["ring", "direct_all_to_all", "mine"])}


def problem2_figures() -> dict:
    """Runs the notebook's own cost cells (compile_for, compare, ...) on the solutions. The times
    are the tables' *estimated* column (`program_seconds`, the loop's body run once per round),
    which the notebook's plot shows too; it can never be less than the row's own communication."""
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
    tg, ta = (program_seconds(rows[n], "TPU v5e") for n in ("all-gather", "all-to-all"))
    assert ta >= a.comm_s and tg >= g.comm_s, "an estimated time below the program's own communication"
    more = {}
    for s in (1.5, 2.0):
        _, r, _, rs = ns["compare"](s)
        tg2, ta2 = (program_seconds(rs[n], "TPU v5e") for n in ("all-gather", "all-to-all"))
        key = str(s).replace(".", "")
        more.update({f"p2_s{key}_rounds": str(r), f"p2_s{key}_all_to_all": _us(ta2),
                     f"p2_s{key}_speedup": _x(tg2 / ta2)})
    return {**more,
            "p2_share": f"{np.bincount(routing, minlength=8).max() / len(routing):.0%}",
            "p2_sent_allgather": f"{g.comm_bytes / 1e6:.1f} MB", "p2_sent_all_to_all": f"{a.comm_bytes / 1e6:.1f} MB",
            "p2_flops_allgather": f"{rows['all-gather'].flops:.3g}", "p2_flops_all_to_all": f"{rows['all-to-all'].flops:.3g}",
            "p2_padding_all_to_all": f"{1 - useful / rows['all-to-all'].flops:.0%}", "p2_rounds": str(rounds), "p2_allgather": _us(tg), "p2_all_to_all": _us(ta),
            "p2_speedup": _x(tg / ta),
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


WARMUP_EXAMPLES = {"w_two_": "example_two_matmuls", "w_saa_": "example_slice_and_average",
                   "w_rs_": "example_scatter_or_reduce", "w_ar_": "example_scatter_or_reduce"}
"""The warm-up's worked examples of the book's Part 10 (ungraded, predict then run): the prefix
of the figures each one's reading quotes, and the grade_id of the code cell that prints them."""


def _warmup_examples() -> dict:
    """The warm-up's own example cells (the Explicit-mode set-up, then the three worked
    examples), run for their definitions with `report` analysing instead of printing."""
    import contextlib
    import io

    nb = nbformat.read(os.path.join(ROOT, "source", "warmup", "warmup.ipynb"), as_version=4)
    cells = {c.metadata.get("nbgrader", {}).get("grade_id"): c.source for c in nb.cells if c.cell_type == "code"}

    def report(fn, *args, title=None, **kwargs):
        mesh = next(a.sharding.mesh for a in args if hasattr(a, "sharding"))
        return assignments.analyze(jax.jit(functools.partial(fn, **kwargs)).lower(*args).compile(), mesh)

    ns = dict(jax=jax, jnp=jnp, np=np, NamedSharding=NamedSharding, P=P, functools=functools, ALL=("X", "Y"),
              make_mesh=assignments.make_mesh, mesh=assignments.make_mesh((2, 4)), report=report)
    with contextlib.redirect_stdout(io.StringIO()):
        for grade_id in ("example_11", *dict.fromkeys(WARMUP_EXAMPLES.values())):
            exec(cells[grade_id], ns)
    return ns


def _shape(a) -> str:
    return f"{a.dtype}[{','.join(map(str, a.dims))}]"


def warmup_figures() -> dict:
    """The worked examples' figures, from the notebook's own functions compiled here, with the
    claims their text makes about the programs checked on the way (on whichever JAX runs)."""
    ns = _warmup_examples()
    out = {}
    # the book's two matmuls: free, nothing moves; forced, one all-reduce over Y and a quarter of the work
    free, forced = (ns["report"](ns["two_matmuls"], ns["x_batch"], ns["w_in"], ns["w_out"], constrain=c)
                    for c in (False, True))
    assert free.collectives == ()
    (ar,) = forced.collectives
    assert ar.kind == "all-reduce" and ar.axes == ("Y",)
    out.update({"w_two_free_flops": f"{sum(f for _, f in free.dot_flops):,.0f}",
                "w_two_forced_flops": f"{sum(f for _, f in forced.dot_flops):,.0f}",
                "w_two_allreduce": _shape(ar.results[0])})
    # slice_and_average: the values, float32 from int32, one all-reduce of the int32 slices over X and Y
    result = ns["sliced_mean"](ns["x_512"])
    assert result.dtype == jnp.float32 and ns["x_512"].dtype == jnp.int32
    (ar,) = ns["report"](ns["sliced_mean"], ns["x_512"]).collectives
    assert ar.kind == "all-reduce" and set(ar.axes) == {"X", "Y"}
    out.update({"w_saa_out": str(np.asarray(result)), "w_saa_allreduce": _shape(ar.operands[0])})
    # out_sharding: XLA:CPU writes an all-reduce (+ a dynamic-slice for P('X', 'Y')), never a reduce-scatter
    times = {}
    for name, sliced in (("scattered", True), ("replicated", False)):
        compiled = jax.jit(ns[name]).lower(ns["xe"], ns["we"]).compile()
        text = compiled.as_text()
        assert " all-reduce(" in text and " reduce-scatter(" not in text
        assert (" dynamic-slice(" in text) == sliced, name
        (c,) = (analysis := assignments.analyze(compiled, ns["explicit_mesh"])).collectives
        assert c.kind == "all-reduce" and _shape(c.operands[0]) == "f32[4,8]"
        assert c.priced_kind == ("reduce-scatter" if sliced else "all-reduce")
        times[name] = program_seconds(analysis, "TPU v5e")
    out.update({"w_rs_time": _us(times["scattered"]), "w_ar_time": _us(times["replicated"])})
    return out


def training_figures() -> dict:
    """training's model answers: the FSDP step's sweep on 8 v5e chips (its communication, the
    matmul time per row of the batch, where they cross) and the memory per device of data
    parallelism and the two FSDP steps, at the notebook's sizes (D=4096, H=16384, 256 rows each)."""
    from assignments.contracts.training import dp_train_step
    from solutions.training import fsdp_train_step, fsdp_train_step_jit

    mesh = assignments.make_mesh((8, 1))
    Db, Hb, rows = 4096, 16384, 256
    batch = (_abstract(mesh, (8 * rows, Db), ("X", None)),) * 2
    split = (_abstract(mesh, (Db, Hb), ("X", None)), _abstract(mesh, (Hb, Db), ("X", None))) + batch
    whole = (_abstract(mesh, (Db, Hb), ()), _abstract(mesh, (Hb, Db), ())) + batch

    def compiled(fn, args):
        return jax.jit(functools.partial(fn, mesh=mesh, lr=0.1)).lower(*args).compile()

    fsdp = compiled(fsdp_train_step, split)
    est = estimate(assignments.analyze(fsdp, mesh), "TPU v5e")
    per_row = est.matmul_s / rows
    mb = lambda n: f"{n / 2**20:,.0f} MB"  # noqa: E731
    return {"tr_comm": f"{est.comm_s * 1e3:.1f} ms", "tr_matmul_row": f"{per_row * 1e6:.1f} us",
            "tr_crossover": f"{round(est.comm_s / per_row, -2):,.0f}",
            "tr_dp_args": mb(compiled(dp_train_step, whole).memory_analysis().argument_size_in_bytes),
            "tr_fsdp_args": mb(fsdp.memory_analysis().argument_size_in_bytes),
            "tr_jit_temp": mb(compiled(fsdp_train_step_jit, split).memory_analysis().temp_size_in_bytes)}


def test_worked_examples_ask_before_they_answer():
    """Each worked example of the warm-up asks (a "Predict" cell just before its code cell)
    before anything quotes what its code prints: every figure of its reading comes after its
    code cell, in the release that students read."""
    nb = nbformat.read(os.path.join(ROOT, "release", "warmup", "warmup.ipynb"), as_version=4)
    at = {c.metadata.get("nbgrader", {}).get("grade_id"): i for i, c in enumerate(nb.cells)}
    quoted = [(i, name) for i, c in enumerate(nb.cells) for name, _ in FIGURE.findall(c.source)]
    for prefix, example in WARMUP_EXAMPLES.items():
        code = at[example]
        assert "Predict" in nb.cells[code - 1].source and not FIGURE.search(nb.cells[code - 1].source), example
        cells = [i for i, name in quoted if name.startswith(prefix)]
        assert cells and min(cells) > code, (example, cells)


@functools.lru_cache(maxsize=None)
def figures() -> dict:
    return {**problem3_figures(), **problem4_figures(), **problem2_figures(), **benchmark_figures(),
            **warmup_figures(), **collectives_figures(), **training_figures()}


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
