"""Judge one compiled case of a graded function: values, shape, dtype, sharding, communication.

The visible checks (live student functions) and the graders (deserialized artifacts)
both end here, so a student sees exactly the verdicts the graders will apply.
"""
from __future__ import annotations

import dataclasses

import jax
import numpy as np
from jax.sharding import AxisType, NamedSharding, PartitionSpec as P

from .contract import MESH_AXES, Case, Part, Tree, arg_leaves, map_args, uses_shard_map
from .hlo import ProgramAnalysis, analyze


AXIS_TYPES = {"auto": AxisType.Auto, "explicit": AxisType.Explicit}


def make_mesh(shape: tuple[int, int], axis_types: str = "auto") -> jax.sharding.Mesh:
    """A mesh with axes ('X', 'Y') of the given sizes, in Auto mode (as the contract says),
    or in Explicit mode for the parts that ask for it (`Part.axis_types`)."""
    need = int(np.prod(shape))
    if jax.device_count() < need:
        raise RuntimeError(
            f"a {shape[0]}x{shape[1]} mesh needs {need} devices but JAX has "
            f"{jax.device_count()}: call assignments.setup_devices({max(need, 8)}) "
            f"before anything else touches JAX (restart the kernel first)."
        )
    kind = AXIS_TYPES[axis_types]
    return jax.make_mesh(tuple(shape), MESH_AXES, axis_types=(kind, kind))


def make_inputs(part: Part, case: Case, seed: int) -> list[np.ndarray]:
    """Random inputs: floats with distinct values in every shard (so a wrong shard shows),
    integers uniform in [0, high). A part with its own generator (`Part.inputs`) uses it.
    A `Tree` argument gets a tuple of arrays."""
    rng = np.random.default_rng(seed)
    if part.inputs is not None:
        return list(part.inputs(case, rng))

    def one(_, arg):
        shape = arg.shape(case)
        if np.issubdtype(np.dtype(arg.dtype), np.integer):
            return rng.integers(0, case.all_sizes[arg.high], size=shape).astype(arg.dtype)
        base = rng.standard_normal(shape) * 3.0
        if len(shape) >= 1:  # a per-row offset makes every row's mean different
            base += np.arange(shape[0]).reshape((-1,) + (1,) * (len(shape) - 1))
        return base.astype(arg.dtype)

    return [map_args(one, arg, _placeholder(arg)) for arg in part.args]


def _placeholder(arg):
    """A value with `arg`'s nesting, for `map_args` to walk."""
    return tuple(_placeholder(item) for item in arg.items) if isinstance(arg, Tree) else None


def place(arrays, part: Part, mesh) -> list:
    """Put each input on the mesh with its contract sharding (tuples for `Tree` arguments)."""
    return [
        map_args(lambda a, leaf: jax.device_put(a, NamedSharding(mesh, leaf.partition_spec)), arg, a)
        for a, arg in zip(arrays, part.args)
    ]


@dataclasses.dataclass
class CaseResult:
    """The verdict on one case (one mesh, one set of sizes and static arguments)."""

    case: Case
    values_ok: bool
    """Shape, dtype, sharding and values all match the contract."""
    rule_ok: bool
    """The communication rule and the required style (jit or shard_map) hold."""
    problems: list[str]
    """What went wrong, in words a student can act on (empty when all is well)."""
    analysis: ProgramAnalysis | None = None
    """The compiled program's communication, when it compiled."""

    @property
    def passed(self) -> bool:
        return self.values_ok and self.rule_ok

    @classmethod
    def failed(cls, case: Case, problem: str) -> "CaseResult":
        return cls(case, False, False, [problem])


def _sharding_text(sharding, ndim: int) -> str:
    spec = getattr(sharding, "spec", None)
    return str(spec) if spec is not None else str(sharding)


def _compare_values(got: np.ndarray, want: np.ndarray) -> str | None:
    if np.isnan(got).any() and not np.isnan(want).any():
        return f"values wrong: the result has {int(np.isnan(got).sum())} NaN element(s)"
    scale = max(1.0, float(np.abs(want).max(initial=0.0)))
    err = np.abs(got.astype(np.float64) - want)
    if not np.all(err <= 1e-5 * scale + 1e-5 * np.abs(want)):
        worst = np.unravel_index(int(np.nanargmax(err)), err.shape) if err.size else ()
        wrong = int((err > 1e-5 * scale + 1e-5 * np.abs(want)).sum())
        return (f"values wrong: {wrong} of {err.size} elements differ from the reference "
                f"(largest error {float(np.nanmax(err)):.3g} at index {tuple(map(int, worst))})")
    return None


def evaluate_compiled(part: Part, case: Case, mesh, compiled, stablehlo_text: str,
                      arrays: list[np.ndarray]) -> CaseResult:
    """Run a compiled case on `arrays` and judge it against the contract."""
    problems: list[str] = []
    rule_problems: list[str] = []
    analysis = analyze(compiled, mesh)

    if part.style == "jit" and uses_shard_map(stablehlo_text):
        rule_problems.append(f"{part.name} must use jax.jit only, but the program contains a shard_map.")
    # On a one-device mesh JAX inlines a shard_map (nothing to map over), so it leaves no
    # trace in the program: the style can only be judged on larger meshes.
    if part.style == "shard_map" and np.prod(case.mesh) > 1 and not uses_shard_map(stablehlo_text):
        rule_problems.append(f"{part.name} must be written with jax.shard_map, but the program has none.")
    rule_problems += part.rule.violations(analysis, case)

    values_ok = False
    try:
        out = compiled(*place(arrays, part, mesh))
    except Exception as e:  # a runtime failure inside the compiled program
        problems.append(f"raised when run: {type(e).__name__}: {str(e).splitlines()[0][:300]}")
        return CaseResult(case, False, not rule_problems, problems + rule_problems, analysis)

    reference = part.reference(*[_as_float64(a) for a in arrays], mesh=case.mesh, **case.statics)
    if isinstance(part.result, Tree):
        problems += _tree_problems(out, part.result, reference, mesh, case)
        if part.values_hint and any("values wrong" in p for p in problems):
            problems.append(part.values_hint)
        values_ok = not problems
        return CaseResult(case, values_ok, not rule_problems, problems + rule_problems, analysis)
    want_shape, want_dtype = part.result.shape(case), np.dtype(part.result.dtype)
    if isinstance(out, (tuple, list)):
        problems.append(f"returned {len(out)} values; expected one array {part.result.describe(case)}")
    elif tuple(out.shape) != want_shape:
        problems.append(f"wrong shape: got {tuple(out.shape)}, expected {want_shape} "
                        f"({part.result.describe(case)})")
    elif out.dtype != want_dtype:
        problems.append(f"wrong dtype: got {out.dtype}, expected {want_dtype}")
    else:
        want_sharding = NamedSharding(mesh, part.result.partition_spec)
        if not out.sharding.is_equivalent_to(want_sharding, out.ndim):
            problems.append(
                f"wrong sharding: got {_sharding_text(out.sharding, out.ndim)}, expected "
                f"{part.result.partition_spec} (add out_shardings to jax.jit, or fix out_specs)")
        wrong = _compare_values(np.asarray(out), np.asarray(reference))
        if wrong:
            problems.append(wrong + (f". {part.values_hint}" if part.values_hint else ""))
        values_ok = not problems
    return CaseResult(case, values_ok, not rule_problems, problems + rule_problems, analysis)


def _as_float64(value):
    """An input as float64 NumPy (tuples for `Tree` arguments), for the reference."""
    if isinstance(value, tuple):
        return tuple(_as_float64(v) for v in value)
    return np.asarray(value).astype(np.float64)


def _tree_problems(out, result: Tree, reference, mesh, case: Case) -> list[str]:
    """Check a pytree result leaf by leaf: shape, dtype, sharding, values."""
    want = arg_leaves(result)
    got = jax.tree.leaves(out)
    ref = jax.tree.leaves(reference)
    if len(got) != len(want) or not all(isinstance(g, jax.Array) for g in got):
        return [f"returned {len(got)} value(s) ({type(out).__name__}); expected {len(want)} arrays "
                f"in the structure {result.describe(case)}"]
    problems = []
    for g, leaf, r in zip(got, want, ref):
        shape, dtype = leaf.shape(case), np.dtype(leaf.dtype)
        if tuple(g.shape) != shape:
            problems.append(f"{leaf.name}: wrong shape: got {tuple(g.shape)}, expected {shape} "
                            f"({leaf.describe(case)})")
        elif g.dtype != dtype:
            problems.append(f"{leaf.name}: wrong dtype: got {g.dtype}, expected {dtype}")
        else:
            want_sharding = NamedSharding(mesh, leaf.partition_spec)
            if not g.sharding.is_equivalent_to(want_sharding, g.ndim):
                problems.append(f"{leaf.name}: wrong sharding: got {_sharding_text(g.sharding, g.ndim)}, "
                                f"expected {leaf.partition_spec}")
            wrong = _compare_values(np.asarray(g), np.asarray(r, dtype=np.float64))
            if wrong:
                problems.append(f"{leaf.name}: {wrong}")
    return problems


def evaluate_eager_report(part: Part, case: Case, mesh, report: dict) -> CaseResult:
    """Judge an eagerly called function from what the submission's process reported.

    Only for parts the contract grades eagerly (e.g. placing a concrete array): the result
    exists only in that process, so its description is all there is to judge.
    """
    problems: list[str] = []
    want_shape, want_dtype = part.result.shape(case), np.dtype(part.result.dtype)
    if report.get("type") != "Array":
        problems.append(f"returned a {report.get('type')}; expected a jax.Array {part.result.describe(case)}")
    elif tuple(report["shape"]) != want_shape:
        problems.append(f"wrong shape: got {tuple(report['shape'])}, expected {want_shape}")
    elif np.dtype(report["dtype"]) != want_dtype:
        problems.append(f"wrong dtype: got {report['dtype']}, expected {want_dtype}")
    else:
        want = NamedSharding(mesh, part.result.partition_spec)
        spec = report.get("spec")
        got = None if spec is None else NamedSharding(
            mesh, P(*[tuple(e) if isinstance(e, list) else e for e in spec]))
        if got is None or not got.is_equivalent_to(want, len(want_shape)):
            problems.append(f"wrong sharding: got {report.get('sharding')}, expected "
                            f"{part.result.partition_spec} on the given mesh")
        if not report.get("equal_to_input"):
            problems.append("values wrong: the result's values differ from the input's")
    ok = not problems
    return CaseResult(case, ok, ok, problems)
