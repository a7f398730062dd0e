"""Every code fragment the notebooks quote runs, on this stack (the suite runs on both).

A fragment is an inline code span (or a fenced code block) in a markdown cell that parses as
Python and uses JAX: it names `jax`, `jnp`, `P`, `NamedSharding` or `AxisType`, or it is a
function of `jax`, `jax.lax` or `jax.sharding` written bare (`psum`,
`shard_map(..., check_vma=False)`), or a keyword argument of one (`check_vma=False`). Type
printouts (`float32[8@X,16@Y]`, `f32[S, F]`) and sizes (`S*D*F/nX`) are prose, not code.

`FRAGMENTS` says where each one runs; a fragment found in a notebook but missing from the table
fails, and so does a table entry no notebook quotes any more, so a new fragment cannot go
untested. Nothing is compiled large: the arrays are a few dozen floats on the 2x4 mesh.
"""
from __future__ import annotations

import ast
import builtins
import dataclasses
import functools
import glob
import inspect
import os
import re

import jax
import jax.numpy as jnp
import nbformat
import numpy as np
import pytest
from jax.sharding import AxisType, NamedSharding, PartitionSpec as P

import assignments

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROOTS = {"jax", "jnp", "P", "NamedSharding", "AxisType"}
"""Names the notebooks' set-up cells bind to JAX."""
KEYWORDS = {"check_vma", "in_specs", "out_specs", "in_shardings", "out_shardings", "out_sharding",
            "precision", "tiled", "axis_name", "scatter_dimension"}
"""Keyword arguments of JAX functions that a notebook may quote on their own."""
BLOCK = re.compile(r"```[^\n]*\n(.*?)```", re.S)
SPAN = re.compile(r"`([^`]+)`")


@dataclasses.dataclass(frozen=True)
class Run:
    """Where a fragment runs: `before` first, then `template` with the fragment in place of
    `{}`, each `...` of the fragment replaced in turn by the next of `fills`. With `inside`, in
    the body of a `jax.shard_map` over the 2x4 mesh (traced with `jax.eval_shape`), where
    `block` is the device's [4, 4] block of `x`. An expression's value is `_`, and `expect`,
    if given, must hold of it."""

    template: str = "{}"
    before: str = ""
    fills: tuple[str, ...] = ()
    inside: bool = False
    expect: str = ""


NAME = Run()
"""A reference to a JAX object: it must exist."""
LAX, JAX, SHARDING = Run("jax.lax.{}"), Run("jax.{}"), Run("jax.sharding.{}")
"""A function written bare, in the module it lives in."""
INSIDE = Run(inside=True)
SPEC_MAP = "jax.shard_map(lambda b: b, mesh=mesh, in_specs=P('X', 'Y'), {})(x)"
CHECK_MAP = "jax.shard_map(lambda b: b, mesh=mesh, in_specs=P('X', 'Y'), out_specs=P('X', 'Y'), {})(x)"
MATMUL = "jnp.matmul(x, x.T, {})"
JIT = "jax.jit(lambda a: a, {})(x)"
EXPLICIT = "jax.jit(lambda a, b: {}(a, b, out_sharding=NamedSharding(explicit_mesh, P('X', 'Y'))))(xe, we)"
MOE = "A = jnp.ones((4, 2)); W = jnp.ones((3, 2, 5)); B = jnp.array([0, 2, 1, 0]); e = 1"


def placed(ndim: int) -> Run:
    """A PartitionSpec, used to place an array of `ndim` dimensions on the mesh."""
    return Run(f"jax.device_put(jnp.ones((8,) * {ndim}), NamedSharding(mesh, {{}}))")


COMMON = {
    "jax.jit": NAME, "jax.shard_map": NAME, "jax.numpy": NAME, "jax.profiler": NAME, "jnp.zeros": NAME,
    "jax.lax.psum_scatter": NAME, "jax.lax.all_to_all": NAME, "jax.lax.while_loop": NAME,
    "P('X', 'Y')": placed(2), "P('X', None)": placed(2), "P('Y', None)": placed(2), "P(None, 'Y')": placed(2),
    "P('X')": placed(2), "P('X', None, 'Y')": placed(3),
    "out_specs=P('X', None)": Run("jax.shard_map(lambda b: b, mesh=mesh, in_specs=P('X', None), {})(x)"),
    "jax.jit(fn)": Run("{}(x)", "fn = lambda a: a + 1"),
    "jax.shard_map(..., check_vma=False)": Run(
        "{}(x)", fills=("lambda b: b, mesh=mesh, in_specs=P('X', 'Y'), out_specs=P('X', 'Y')",)),
    "out_shardings=NamedSharding(mesh, P('X', 'Y'))": Run(JIT),
    "precision=\"highest\"": Run(MATMUL),
    "shard_map": JAX, "pmap": JAX, "psum": LAX, "pmean": LAX, "all_gather": LAX, "fori_loop": LAX,
    "with_sharding_constraint": LAX, "psum_scatter": LAX, "all_to_all": LAX, "ragged_dot": LAX,
    "while_loop": LAX, "ragged_all_to_all": LAX,
}

FRAGMENTS: dict[str, dict[str, Run]] = {
    "warmup": {
        "jax.lax.with_sharding_constraint": NAME, "jax.device_put": NAME, "jax.lax.psum": NAME, "jax.pmap": NAME,
        "jnp.arange(512)": Run(expect="_.shape == (512,)"),
        "out_sharding=P('X', 'Y')": Run("with jax.set_mesh(explicit_mesh):\n"
                                        "    _ = jax.jit(lambda a, b: jnp.matmul(a, b, {}))(xe, we)"),
        "jax.grad": NAME, "jax.tree.map": NAME, "AxisType.Explicit": NAME, "jax.typeof": NAME,
        "vmap": JAX, "auto_axes": SHARDING, "explicit_axes": SHARDING,
        "NamedSharding(mesh, P(...))": Run(fills=("'X', 'Y'",)), "P(...)": Run(fills=("'X'",)),
        "P()": placed(2), "P(('X', 'Y'))": placed(2), "P(('X','Y'))": placed(2), "P(('Y', 'X'))": placed(2),
        "P(('X','Y'), None)": placed(2),
        "jax.device_put(x, jax.devices()[0])": Run(expect="_.devices() == {jax.devices()[0]}"),
        "jax.lax.with_sharding_constraint(value, sharding)": Run(
            "jax.jit(lambda value: {})(x)", "sharding = NamedSharding(mesh, P(('X', 'Y')))"),
        "jax.jit(..., out_shardings=...)": Run("{}(x)", fills=("lambda a: a", "NamedSharding(mesh, P('X', 'Y'))")),
        "jax.shard_map(f, mesh=..., in_specs=..., out_specs=...)": Run(
            "{}(x)", "f = lambda b: 2 * b", fills=("mesh", "P('X', 'Y')", "P('X', 'Y')")),
        "jax.lax.psum(v, 'X')": Run(before="v = block", inside=True),
        "jax.lax.psum(v, ('X', 'Y'))": Run(before="v = block", inside=True),
        "jax.lax.psum(c, axis_name)": Run(before="c = block; axis_name = 'X'", inside=True),
        "check_vma=True": Run(CHECK_MAP),
        "jnp.matmul": Run(EXPLICIT), "jnp.dot": Run(EXPLICIT),
        "jnp.einsum": Run("jax.jit(lambda a, b: {}('bd,df->bf', a, b, "
                          "out_sharding=NamedSharding(explicit_mesh, P('X', 'Y'))))(xe, we)"),
        "jax.sharding.reshard": Run("jax.jit(lambda a: {}(a, NamedSharding(explicit_mesh, P('X', None))))(xe)"),
        "jax.set_mesh": Run("with {}(mesh):\n    pass"),
        "jax.sharding.auto_axes(f, axes=..., out_sharding=...)": Run(
            "jax.jit({})(xe, we)", "f = lambda a, b: a @ b",
            fills=("('X', 'Y')", "NamedSharding(explicit_mesh, P('X', None))")),
        "jax.sharding.explicit_axes(f, axes=..., in_sharding=...)": Run(
            "with jax.set_mesh(mesh):\n    _ = jax.jit({})(x)", "f = lambda v: v.sum(axis=1)",
            fills=("('X', 'Y')", "P('X', 'Y')")),
    },
    "problem1": {
        "out_specs=P('X', 'Y')": Run(SPEC_MAP),
        "jax.jit(f).lower(*args).compile().as_text()": Run(
            before="f = lambda a: a.sum(0); args = (x,)", expect="'all-reduce' in _"),
        "jnp.roll(A, shift, axis=0)": Run(before="A = x; shift = -11"),
        "out_shardings=NamedSharding(mesh, P())": Run(JIT),
        "out_shardings=NamedSharding(mesh, P('X', 'Y'))": Run(JIT),
    },
    "problem2": {
        "jax.lax.scan": NAME, "jax.lax.ragged_dot": NAME, "jax.lax.pmax": NAME, "jax.lax.ragged_all_to_all": NAME,
        "jnp.where": NAME, "pmax": LAX,
        "P('X', None, None)": placed(3),
        "(P('X', None, 'Y'), P('X', 'Y'), P('X'))": NAME,
        "jnp.einsum('sd,sdf->sf', A, W[B])": Run(before=MOE),
        "jnp.arange(E)": Run(before="E = 4"),
        "jax.lax.scan(step, start, jnp.arange(E))[0]": Run(
            before=MOE + "; E = 3; start = jnp.zeros((4, 5))\n"
                   "def step(out, e):\n    return out + jnp.where((B == e)[:, None], A @ W[e], 0), None",
            expect="_.shape == (4, 5)"),
        "(out + jnp.where(mask, A @ W[e], 0), None)": Run(
            before=MOE + "; mask = (B == e)[:, None]; out = jnp.zeros((4, 5))"),
        "jnp.zeros_like(A @ W[0])": Run(before="A = block; W = jnp.ones((3, 4, 5))", inside=True,
                                       expect="jax.typeof(_).manual_axis_type.varying == {'X', 'Y'}"),
        "jnp.zeros((S, F))": Run(before="S, F = 4, 5"),
        "B = jnp.zeros(16, jnp.int32)": NAME,
        "tiled=True": Run("jax.lax.psum_scatter(block, 'X', scatter_dimension=0, {})", inside=True),
        "jax.lax.all_to_all(x, 'X', split_axis, concat_axis)": Run(
            before="x = block.reshape(2, 8); split_axis = concat_axis = 0", inside=True),
        "jax.lax.pcast(jnp.zeros(...), ('X', 'Y'), to='varying')": Run(
            fills=("(2, 3)",), inside=True, expect="jax.typeof(_).manual_axis_type.varying == {'X', 'Y'}"),
        "precision=jax.lax.Precision.HIGHEST": Run(MATMUL),
        "jax.lax.ragged_all_to_all(operand, output, input_offsets, send_sizes, output_offsets, recv_sizes, "
        "axis_name=...)": Run(  # traced only: XLA:CPU cannot run it, as the notebook says
            before="operand = output = block; input_offsets = output_offsets = jnp.zeros(2, jnp.int32); "
                   "send_sizes = recv_sizes = jnp.ones(2, jnp.int32)", fills=("'X'",), inside=True),
    },
    "problem3": {
        "ppermute": LAX, "pcast": LAX,
        "print(jax.typeof(x))": Run(before="x = block", inside=True),
        "jax.typeof(x).manual_axis_type.varying": Run(before="x = block", inside=True, expect="_ == {'X', 'Y'}"),
        "jnp.zeros(...)": Run(fills=("(2, 3)",)),
        "acc = jax.lax.pcast(acc, ('X', 'Y'), to='varying')": Run(
            before="acc = jnp.zeros((4, 4))", inside=True),
        "pcast(acc, ('X', 'Y'), to='varying')": Run(
            before="pcast = jax.lax.pcast; acc = jnp.zeros((4, 4))", inside=True),
        "jax.lax.pcast(..., to='varying')": Run(fills=("jnp.zeros(3), ('X', 'Y')",), inside=True),
        "pcast(..., to='varying')": Run(before="pcast = jax.lax.pcast", fills=("jnp.zeros(3), ('X', 'Y')",),
                                        inside=True, expect="jax.typeof(_).manual_axis_type.varying == {'X', 'Y'}"),
        "jax.lax.dynamic_slice_in_dim": NAME, "jnp.array_split": NAME,
        "jax.lax.axis_size('Y')": Run(inside=True, expect="_ == 4"),
        "jax.lax.axis_index('Y')": INSIDE,
        "jax.nn.gelu(In @ Win) @ Wout": Run(before="In = jnp.ones((4, 8)); Win = jnp.ones((8, 16)); "
                                                   "Wout = jnp.ones((16, 8))"),
        "precision=\"high\"": Run(MATMUL),
        "jax.default_matmul_precision": Run("with {}('highest'):\n    _ = jnp.ones((2, 2)) @ jnp.ones((2, 2))"),
        "check_vma=False": Run(CHECK_MAP),
    },
    "problem4": {
        "jax.lax.dynamic_update_slice_in_dim": NAME,
    },
    "training": {
        "jax.vjp": NAME, "jax.grad": NAME, "jax.lax.axis_size": NAME, "jax.lax.all_gather": NAME,
        "jax.lax.with_sharding_constraint": NAME,
        "jax.lax.pcast(..., to='varying')": Run(fills=("jnp.zeros(3), ('X', 'Y')",), inside=True),
        "jax.lax.all_gather(w, 'X', axis=0, tiled=True)": Run(
            before="w = block", inside=True, expect="_.shape == (8, 4)"),
        "check_vma=False": Run(CHECK_MAP),
        "NamedSharding(mesh, P())": Run(JIT.replace("{}", "out_shardings={}")),
    },
    "collectives": {
        "jax.lax.ppermute": NAME, "jax.lax.axis_size('Y')": Run(inside=True, expect="_ == 4"),
        "jax.lax.axis_index('Y')": INSIDE,
    },
}


def _bare_function(word: str) -> bool:
    return not hasattr(builtins, word) and any(
        callable(getattr(m, word, None)) and not inspect.ismodule(getattr(m, word))
        for m in (jax.lax, jax, jax.sharding))


def uses_jax(code: str) -> bool:
    """Whether a quoted piece of text is Python that uses JAX (see the module's docstring)."""
    try:
        body = ast.parse(code).body
    except SyntaxError:
        return False
    if {n.id for n in ast.walk(ast.Module(body=body, type_ignores=[])) if isinstance(n, ast.Name)} & ROOTS:
        return True
    if len(body) != 1:
        return False
    (stmt,) = body
    if isinstance(stmt, ast.Expr):
        head = stmt.value.func if isinstance(stmt.value, ast.Call) else stmt.value
        return isinstance(head, ast.Name) and _bare_function(head.id)
    return (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)
            and stmt.targets[0].id in KEYWORDS)


def quoted_code(name: str) -> list[str]:
    return fragments_of(nbformat.read(os.path.join(ROOT, "source", name, f"{name}.ipynb"), as_version=4))


def fragments_of(nb) -> list[str]:
    """The fragments a notebook's markdown quotes, in order, each once (a span that breaks
    across lines is joined with a space, as Markdown shows it)."""
    found = []
    for cell in nb.cells:
        if cell.cell_type != "markdown":
            continue
        blocks = BLOCK.findall(cell.source)
        spans = [" ".join(s.split("\n")) for s in SPAN.findall(BLOCK.sub("", cell.source)) if "\n\n" not in s]
        for code in blocks + spans:
            if code not in found and uses_jax(code):
                found.append(code)
    return found


def notebooks() -> list[str]:
    return sorted(os.path.basename(os.path.dirname(p)) for p in glob.glob(os.path.join(ROOT, "source", "*", "*.ipynb")))


def table(name: str) -> dict[str, Run]:
    return {**COMMON, **FRAGMENTS.get(name, {})}


@functools.lru_cache(maxsize=None)
def namespace() -> dict:
    """What the notebooks' set-up cells define, and small arrays on the 2x4 mesh (Auto and
    Explicit) for the fragments to use."""
    assignments.setup_devices(8)
    mesh, explicit_mesh = assignments.make_mesh((2, 4)), assignments.make_mesh((2, 4), "explicit")
    grid = np.arange(8 * 16, dtype=np.float32).reshape(8, 16)
    return dict(jax=jax, jnp=jnp, np=np, P=P, NamedSharding=NamedSharding, AxisType=AxisType,
                functools=functools, mesh=mesh, explicit_mesh=explicit_mesh,
                x=jax.device_put(grid, NamedSharding(mesh, P('X', 'Y'))),
                xe=jax.device_put(grid, NamedSharding(explicit_mesh, P('X', 'Y'))),
                we=jax.device_put(grid.T, NamedSharding(explicit_mesh, P('Y', None))))


def source_of(fragment: str, run: Run) -> str:
    """The code to run: the fragment with its `...` filled, put into the template; an
    expression's value kept as `_`."""
    filled = fragment
    assert filled.count("...") == len(run.fills), f"{fragment!r} has {filled.count('...')} `...`, fills {run.fills}"
    for fill in run.fills:
        filled = filled.replace("...", fill, 1)
    code = run.template.replace("{}", filled)
    tree = ast.parse(code)
    if len(tree.body) == 1 and isinstance(tree.body[0], ast.Expr):
        code = f"_ = {code}"
    return f"{run.before}\n{code}"


def execute(fragment: str, run: Run) -> None:
    code = compile(source_of(fragment, run), f"<fragment {fragment!r}>", "exec")
    ns = dict(namespace())

    def body(block):
        local = {**ns, "block": block}
        exec(code, local)
        if run.expect:
            assert eval(run.expect, local), f"{run.expect} is false; _ = {local.get('_')!r}"
        return block

    if run.inside:
        jax.eval_shape(jax.shard_map(body, mesh=ns["mesh"], in_specs=P('X', 'Y'), out_specs=P('X', 'Y')), ns["x"])
    else:
        body(None)


def test_every_quoted_fragment_is_in_the_table():
    """Is every fragment the notebooks quote listed with where it runs, and every listed one
    still quoted somewhere?"""
    quoted = {name: quoted_code(name) for name in notebooks()}
    for name, found in quoted.items():
        untested, stale = set(found) - set(table(name)), set(FRAGMENTS.get(name, {})) - set(found)
        assert not untested, f"{name} quotes fragments FRAGMENTS does not list: {sorted(untested)}"
        assert not stale, f"{name} no longer quotes {sorted(stale)}"
    unused = set(COMMON) - {code for found in quoted.values() for code in found}
    assert not unused, f"no notebook quotes {sorted(unused)}"


def test_a_new_fragment_is_found():
    """Would a fragment a notebook starts to quote, inline or in a code block, be found (and
    so fail the table check until it is listed)?"""
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(
        "Reduce with `jax.lax.psum(v,\n'Y')` over `f32[S]`:\n\n```python\nout = jnp.ones(3)\n```\n")])
    found = fragments_of(nb)
    assert found == ["out = jnp.ones(3)\n", "jax.lax.psum(v, 'Y')"]
    assert not set(found) & set(table("problem3"))


def test_the_rule_finds_code_and_leaves_prose():
    """Does the rule take Python that uses JAX, bare JAX functions and their keywords, and
    leave type printouts, sizes and the notebooks' own names alone?"""
    code = ["jax.jit", "jnp.roll(block, shift, axis=0)", "psum", "shard_map(..., check_vma=False)", "tiled=True",
            "acc = jax.lax.pcast(acc, ('X', 'Y'), to='varying')"]
    prose = ["float32[8@X,16@Y]", "f32[S, F]", "S*D*F/nX", "max(1, (S/nX) // 4)", "moe_local(W, A, B)",
             "mode='drop'", "all-reduce", "Y (+1)"]
    assert [c for c in code if not uses_jax(c)] == [] and [p for p in prose if uses_jax(p)] == []


def test_a_broken_fragment_fails():
    """Does a fragment that raises (a name JAX does not have, a wrong type) fail its run?"""
    with pytest.raises(AttributeError):
        execute("jax.lax.no_such_collective", NAME)
    with pytest.raises(Exception):
        execute("jax.jit(lambda a: a, out_shardings=P('X', 'Y'))(x)", NAME)   # a bare P needs jax.set_mesh
    with pytest.raises(AssertionError):
        execute("jax.lax.axis_size('Y')", Run(inside=True, expect="_ == 3"))


@pytest.mark.parametrize("name,fragment", [(n, f) for n in notebooks() for f in quoted_code(n)])
def test_fragment_runs(name, fragment):
    """Does the fragment run, on this stack, where the table says it runs?"""
    execute(fragment, table(name)[fragment])
