"""Judge one compiled case of a graded function: values, shape, dtype, sharding, communication.

The visible checks (live student functions) and the graders (deserialized artifacts)
both end here, so a student sees exactly the verdicts the graders will apply.
"""
from __future__ import annotations

import collections
import dataclasses
import warnings

import jax
import numpy as np
from jax.sharding import AxisType, NamedSharding

from .contract import CHECKS, MESH_AXES, Case, CaseResult, Part, Problem, Tree, arg_leaves, as_float64, check_call, map_args
from .hlo import ProgramAnalysis, analyze
from .rules import Program, WrongValues
from .style_rules import style_problems


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


def place(arrays, part: Part, mesh) -> list:
    """Put each input on the mesh with its contract sharding (tuples for `Tree` arguments)."""
    return [
        map_args(lambda a, leaf: jax.device_put(a, NamedSharding(mesh, leaf.partition_spec)), arg, a)
        for a, arg in zip(arrays, part.args)
    ]


def _sharding_text(sharding, ndim: int) -> str:
    spec = getattr(sharding, "spec", None)
    return str(spec) if spec is not None else str(sharding)


RTOL = 1e-5
"""Per-element relative tolerance: float32 arithmetic is good to ~1e-7, while a bfloat16
round trip (8 bits of mantissa) is off by ~2e-3 on almost every random float."""
ATOL = 1e-5
"""Absolute tolerance, times the result's RMS (at least 1): for elements near zero, where a
relative error means nothing. Not the largest element, which would hide small ones."""


def _compare_values(got: np.ndarray, want: np.ndarray, show_values: bool = True,
                    retry: str = "") -> str | None:
    """What is wrong with `got` against the reference `want`, or None.

    With `show_values` (the visible check: the student knows its inputs) the message counts the
    wrong elements and shows the worst one's index, value and expected value. On hidden cases
    a submission's program chooses which elements to get wrong, so anything exact about them
    (how many, where, by how much) could carry a hidden value out, a few digits per grading:
    there the message says only how much of the result is off (some, most, all) and whether
    by a little or a lot, and `retry` names the call that runs the same case on inputs the
    student can see (none when empty)."""
    want = np.asarray(want, dtype=np.float64)
    if np.isnan(got).any() and not np.isnan(want).any():
        if not show_values:
            return "values wrong: the result has NaN elements" + (f"; to see where, run {retry}" if retry else "")
        return f"values wrong: the result has {int(np.isnan(got).sum())} NaN element(s)"
    rms = float(np.sqrt(np.mean(want ** 2))) if want.size else 0.0
    allowed = RTOL * np.abs(want) + ATOL * max(1.0, rms)
    err = np.abs(got.astype(np.float64) - want)
    bad = ~(err <= allowed)
    if not bad.any():
        return None
    worst = np.unravel_index(int(np.nanargmax(np.where(bad, err / allowed, 0))), err.shape) if err.ndim else ()
    i = tuple(map(int, worst))
    if show_values:
        return (f"values wrong: {int(bad.sum())} of {err.size} elements differ from the reference "
                f"(worst at index {i}: got {float(got[i]):.7g}, expected {float(want[i]):.7g}, "
                f"allowed error {float(allowed[i]):.2g})")
    share = ("every element of the result differs" if bad.all() else "most elements of the result differ"
             if bad.mean() > 0.5 else "some elements of the result differ")
    relative = float(err[i] / max(np.abs(want[i]), ATOL * max(1.0, rms)))
    size = ("by a little (more than float32 rounding allows: a bfloat16 step, or a slightly different "
            "formula?)" if relative < 1e-2 else "by a lot")
    return (f"values wrong: {share} from the reference, {size}"
            + (f"; to see them, run {retry} (this case, on inputs you can see)" if retry else ""))


def _copies_problem(out: jax.Array, want: np.ndarray, show_values: bool, retry: str = "") -> str | None:
    """What is wrong with a device's own copy of its block, or None. `np.asarray` reads one
    copy of each block, so a result replicated over an axis whose other copies are wrong (only
    one device along the axis finished the work) would pass on that one."""
    for shard in out.addressable_shards:
        wrong = _compare_values(np.asarray(shard.data), want[shard.index], show_values, retry)
        if wrong:
            whole = all(i == slice(None) for i in shard.index)
            block = "the whole result" if whole else "the block [" + ", ".join(
                ":" if i == slice(None) else f"{i.start or 0}:{i.stop}" for i in shard.index) + "]"
            return (f"values wrong on device {shard.device.id}, in its copy of {block}: "
                    f"{wrong.removeprefix('values wrong: ')}. Every device holding a copy must hold the right "
                    f"values, not only the copy read back first: a result replicated over an axis must be "
                    f"computed on (or sent to) every device along it")
    return None


def _matches(got, want) -> bool:
    """Does a result (array or pytree) equal `want` within the tolerances?"""
    got, want = jax.tree.leaves(got), jax.tree.leaves(want)
    return len(got) == len(want) and all(
        np.shape(g) == np.shape(w) and _compare_values(np.asarray(g), np.asarray(w, dtype=np.float64)) is None
        for g, w in zip(got, want))


def _hints(part: Part, case: Case, analysis: ProgramAnalysis | None, out, reference, arrays) -> list[Problem]:
    """The advice the contract attaches to wrong values (`Part.hints`), each where it fits what
    the program did: roll_diff's note on slices only for a result that is exactly that
    mistake's (never for a roll of the whole array), a ring's directions only for values off by
    whole blocks."""
    def matches(mistake) -> bool:
        return _matches(out, mistake(*[as_float64(a) for a in arrays], mesh=case.mesh, **case.statics))

    wrong = WrongValues(analysis, _far_off(out, reference), matches)
    return [Problem(hint.code, text, "hint") for hint in part.hints if (text := hint.advice(wrong))]


def _values_wrong(problems: list[Problem]) -> bool:
    return any(p.rule in ("V005", "V006") for p in problems)


def _check(code: str, message: str) -> Problem:
    return CHECKS[code].problem(message)


def count_when_run(compiled, args, analysis: ProgramAnalysis) -> ProgramAnalysis:
    """Fill in the run counts the compiled program cannot tell (a collective in a
    `while_loop` whose trip count depends on the data): run once more under JAX's profiler,
    which records every collective each device executes, by instruction name. Counts stay
    unknown (None) if the profiler is unavailable or recorded none of them. Collectives that
    never ran are left out (`_without_unrun`)."""
    unknown = {c.name for c in analysis.collectives if c.count is None}
    if not unknown:
        return _without_unrun(analysis)
    try:
        from jax._src import profiler
        from jax._src.lib import _profiler

        session = _profiler.ProfilerSession(_counting_options(_profiler))
        try:
            jax.block_until_ready(compiled(*args))
        finally:
            space = profiler.ProfileData.from_serialized_xspace(session.stop())
        runs = _runs_per_device(space, unknown, max(analysis.num_devices, 1))
    except Exception:  # no profiler here: the counts stay unknown
        return analysis
    if not runs:
        return analysis
    counted = [c if c.count is not None else dataclasses.replace(c, count=runs.get(c.name, 0))
               for c in analysis.collectives]
    return _without_unrun(dataclasses.replace(analysis, collectives=tuple(counted)))


def _without_unrun(analysis: ProgramAnalysis) -> ProgramAnalysis:
    """The analysis without the collectives that never ran (count 0: a branch of a `lax.cond`
    no device took, a loop that ran no time). They move nothing, and a rule that asks for
    something to exist (both ring directions, a reduction over every axis, pieces) must not
    find it in code that never runs. The ring phases keep their order: an event of a dropped
    collective stays as a step that depends on what it depended on, and counts as no permute."""
    keep = [i for i, c in enumerate(analysis.collectives) if c.count != 0]
    if len(keep) == len(analysis.collectives):
        return analysis
    new_index = {old: new for new, old in enumerate(keep)}
    stages = tuple(dataclasses.replace(stage, events=tuple(
        dataclasses.replace(e, collective=new_index.get(e.collective, -1)) if e.collective >= 0 else e
        for e in stage.events)) for stage in analysis.stages)
    return dataclasses.replace(analysis, collectives=tuple(analysis.collectives[i] for i in keep), stages=stages)


def _runs_per_device(space, names: set[str], devices: int) -> dict[str, int]:
    """How many times the busiest device ran each collective in `names`: the profiler names
    the device of each event (`device_ordinal`), and devices may loop different numbers of
    times (a loop some devices skip is no loop for the others), so the count is the most any
    device ran, never an average. Without device names: the total over the devices, rounded up."""
    by_device: collections.Counter = collections.Counter()
    total: collections.Counter = collections.Counter()
    named = True
    with warnings.catch_warnings():  # jaxlib's event_stats type warns on Python 3.12 ("no __module__")
        warnings.simplefilter("ignore", DeprecationWarning)
        for plane in space.planes:
            for line in plane.lines:
                for event in line.events:
                    if event.name not in names:
                        continue
                    total[event.name] += 1
                    device = next((value for key, value in event.stats if key == "device_ordinal"), None)
                    named = named and device is not None
                    by_device[(event.name, device)] += 1
    if named:
        return {name: max(n for (k, _), n in by_device.items() if k == name) for name in total}
    return {name: -(-n // devices) for name, n in total.items()}


def _counting_options(_profiler):
    """Profiler options that record what executes and nothing else: without the Python tracer
    and the HLO of every program the process has loaded (on by default, and the HLO grows with
    each program a judge compiles), a profiled run costs about 20 ms instead of 50-150 ms."""
    options = _profiler.ProfileOptions()
    options.python_tracer_level = 0
    options.enable_hlo_proto = False
    options.host_tracer_level = 1
    return options


def evaluate_compiled(part: Part, case: Case, mesh, compiled, stablehlo_text: str,
                      arrays: list[np.ndarray], show_values: bool = True) -> CaseResult:
    """Run a compiled case on `arrays` and judge it against the contract. Without
    `show_values` (the graders' hidden cases) no message quotes a value of the case."""
    analysis = analyze(compiled, mesh)
    rule_problems = style_problems(part, case, stablehlo_text)
    try:
        args = place(arrays, part, mesh)
        out = jax.block_until_ready(compiled(*args))  # finished before count_when_run profiles a run
    except Exception as e:  # a runtime failure inside the compiled program
        rule_problems += part.rule.check(Program(part, analysis, inputs=tuple(arrays)), case)
        problem = _check("E003", f"raised when run: {type(e).__name__}: {str(e).splitlines()[0][:300]}")
        return CaseResult(case, False, not rule_problems, [problem] + rule_problems, analysis, ran=False)
    analysis = count_when_run(compiled, args, analysis)
    rule_problems += part.rule.check(Program(part, analysis, inputs=tuple(arrays)), case)
    reference = part.reference(*[as_float64(a) for a in arrays], mesh=case.mesh, **case.statics)
    if isinstance(part.result, Tree):
        problems = _tree_problems(out, part, reference, mesh, case, show_values)
    else:
        problems = _array_problems(part, case, mesh, out, reference, show_values)
    hints = _hints(part, case, analysis, out, reference, arrays) if _values_wrong(problems) else []
    # Run counts the profiler could not read leave the verdict depending on this process: not
    # `ran`, so that no cache keeps it.
    settled = all(c.count is not None for c in analysis.collectives)
    return CaseResult(case, not problems, not rule_problems, problems + hints + rule_problems, analysis,
                      ran=settled)


def _far_off(out, reference) -> bool:
    """Whether a wrong result is off by about as much as the values themselves (whole blocks in
    the wrong place), not by a rounding or a slightly different formula; a tuple result (a step's
    new weights, dA and dW) when any of its arrays is."""
    if isinstance(out, (tuple, list)) and isinstance(reference, (tuple, list)):
        return len(out) == len(reference) and any(map(_far_off, out, reference))
    try:
        got, want = np.asarray(out, dtype=np.float64), np.asarray(reference, dtype=np.float64)
    except (TypeError, ValueError):
        return False
    rms = float(np.sqrt(np.mean(want ** 2))) if want.size else 0.0
    return got.shape == want.shape and rms > 0 and float(np.sqrt(np.mean((got - want) ** 2))) > 0.1 * rms



def _array_problems(part: Part, case: Case, mesh, out, reference, show_values: bool) -> list[Problem]:
    """Shape, dtype, sharding and values of a single-array result."""
    want_shape, want_dtype = part.result.shape(case), np.dtype(part.result.dtype)
    if isinstance(out, (tuple, list)):
        return [_check("V001", f"returned {len(out)} values; expected one array {part.result.describe(case)}")]
    if not isinstance(out, jax.Array):  # a dict, None, or another pytree the program returned
        return [_check("V001", f"returned a {type(out).__name__}; expected one array {part.result.describe(case)}")]
    if tuple(out.shape) != want_shape:
        return [_check("V002", f"wrong shape: got {tuple(out.shape)}, expected {want_shape} "
                               f"({part.result.describe(case)})")]
    if out.dtype != want_dtype:
        return [_check("V003", f"wrong dtype: got {out.dtype}, expected {want_dtype}")]
    problems = []
    if not out.sharding.is_equivalent_to(NamedSharding(mesh, part.result.partition_spec), out.ndim):
        problems.append(_check("V004", f"wrong sharding: got {_sharding_text(out.sharding, out.ndim)}, expected "
                                       f"{part.result.partition_spec} ({_sharding_fix(part)})"))
    retry = check_call(part, case)
    if wrong := _compare_values(np.asarray(out), np.asarray(reference), show_values, retry):
        problems.append(_check("V005", wrong))
    elif wrong := _copies_problem(out, np.asarray(reference, dtype=np.float64), show_values, retry):
        problems.append(_check("V006", wrong))
    return problems


def _sharding_fix(part: Part) -> str:
    """What sets a result's sharding: on an Explicit mesh the sharding is part of the type,
    set on the operation that makes the value; on an Auto mesh, jax.jit or shard_map sets it."""
    if part.axis_types == "explicit":
        return ("on an Explicit mesh the sharding is part of the type: pass out_sharding= to the "
                "operation that makes the result, e.g. jnp.matmul(x, w, out_sharding=P('X', 'Y'))")
    return "add out_shardings to jax.jit, or fix out_specs"


def _tree_problems(out, part: Part, reference, mesh, case: Case, show_values: bool) -> list[Problem]:
    """Check a pytree result leaf by leaf: shape, dtype, sharding, values."""
    result, retry = part.result, check_call(part, case)
    want = arg_leaves(result)
    got = jax.tree.leaves(out)
    ref = jax.tree.leaves(reference)
    if len(got) != len(want) or not all(isinstance(g, jax.Array) for g in got):
        return [_check("V001", f"returned {len(got)} value(s) ({type(out).__name__}); expected {len(want)} "
                               f"arrays in the structure {result.describe(case)}")]
    problems = []
    for g, leaf, r in zip(got, want, ref):
        shape, dtype = leaf.shape(case), np.dtype(leaf.dtype)
        if tuple(g.shape) != shape:
            problems.append(_check("V002", f"{leaf.name}: wrong shape: got {tuple(g.shape)}, expected {shape} "
                                           f"({leaf.describe(case)})"))
        elif g.dtype != dtype:
            problems.append(_check("V003", f"{leaf.name}: wrong dtype: got {g.dtype}, expected {dtype}"))
        else:
            want_sharding = NamedSharding(mesh, leaf.partition_spec)
            if not g.sharding.is_equivalent_to(want_sharding, g.ndim):
                problems.append(_check("V004", f"{leaf.name}: wrong sharding: got "
                                               f"{_sharding_text(g.sharding, g.ndim)}, expected {leaf.partition_spec}"))
            r = np.asarray(r, dtype=np.float64)
            if wrong := _compare_values(np.asarray(g), r, show_values, retry):
                problems.append(_check("V005", f"{leaf.name}: {wrong}"))
            elif wrong := _copies_problem(g, r, show_values, retry):
                problems.append(_check("V006", f"{leaf.name}: {wrong}"))
    return problems


def eager_report(fn, mesh, statics: dict, inputs: list) -> dict:
    """Call `fn` eagerly on single-device copies of `inputs` and describe what it returned:
    shape, dtype, and each shard's device, index and data (what `evaluate_eager_report`
    judges). The graders call it in the submission's process and check the shards against
    the input, so a forged report must contain exactly what a right answer places where: it
    gains nothing over writing the function."""
    from jax._src.array import ArrayImpl

    out = fn(*[jax.device_put(np.asarray(x), jax.devices()[0]) for x in inputs], mesh=mesh, **statics)
    if not isinstance(out, jax.Array):
        return {"type": type(out).__name__}
    if type(out) is not ArrayImpl:  # a subclass could describe shards it never placed
        return {"type": f"{type(out).__name__} (a subclass of jax.Array, not an array JAX made)"}
    shards = []
    for shard in out.addressable_shards[:64]:
        index = [[s.start or 0, s.stop if s.stop is not None else n] for s, n in zip(shard.index, out.shape)]
        shards.append({"device": shard.device.id, "index": index, "data": np.asarray(shard.data)})
    return {"type": "Array", "shape": list(out.shape), "dtype": str(out.dtype),
            "sharding": str(out.sharding)[:300], "shards": shards}


def evaluate_eager_report(part: Part, case: Case, mesh, report: dict, arrays: list) -> CaseResult:
    """Judge an eagerly called function from what the submission's process reported.

    Only for parts the contract grades eagerly (placing a concrete array): the result exists
    only in that process, so the report carries every shard's device, index and data, and
    each is checked against where the contract's sharding puts that slice of the hidden
    input. A report can only pass by holding exactly what a right answer places where.
    """
    problems: list[Problem] = []
    want_shape, want_dtype = part.result.shape(case), np.dtype(part.result.dtype)
    if report.get("type") != "Array":
        problems.append(_check("V001", f"returned a {report.get('type')}; expected a jax.Array "
                                       f"{part.result.describe(case)}"))
    elif tuple(report["shape"]) != want_shape:
        problems.append(_check("V002", f"wrong shape: got {tuple(report['shape'])}, expected {want_shape}"))
    elif report["dtype"] != want_dtype.name:
        problems.append(_check("V003", f"wrong dtype: got {report['dtype']}, expected {want_dtype}"))
    else:
        problems += _shard_problems(part, mesh, report, np.asarray(arrays[0]))
    ok = not problems
    return CaseResult(case, ok, ok, problems)


def _shard_problems(part: Part, mesh, report: dict, source: np.ndarray) -> list[Problem]:
    """Compare reported shards with the contract's placement of `source` on `mesh`."""
    shape = source.shape
    want = NamedSharding(mesh, part.result.partition_spec).devices_indices_map(shape)
    want = {d.id: [[s.start or 0, s.stop if s.stop is not None else n] for s, n in zip(index, shape)]
            for d, index in want.items()}
    got = {shard["device"]: shard for shard in report.get("shards", [])}
    if set(got) != set(want) or any(got[d]["index"] != want[d] for d in want):
        return [_check("V004", f"wrong sharding: got {report.get('sharding')}, expected "
                               f"{part.result.partition_spec} on the given mesh (each device holds its own block)")]
    for device, index in want.items():
        block = source[tuple(slice(a, b) for a, b in index)]
        data = got[device]["data"]
        if data.shape != block.shape or data.dtype != block.dtype or not np.array_equal(data, block):
            return [_check("V005", f"values wrong: the block on device {device} differs from the input's "
                                   f"(placing an array must not change its values or dtype)")]
    return []
