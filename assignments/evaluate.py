"""Judge one compiled case of a graded function: values, shape, dtype, sharding, communication.

The visible checks (live student functions) and the graders (deserialized artifacts)
both end here, so a student sees exactly the verdicts the graders will apply.
"""
from __future__ import annotations

import collections
import dataclasses
import functools
import re
import warnings
from typing import NamedTuple

import jax
import numpy as np
from jax.sharding import AxisType, NamedSharding

from .contract import (MESH_AXES, Case, CaseResult, DataFlow, Part, Tree, arg_attrs, arg_leaves, as_float64,
                       called_function, check_call, collective_axes, map_args, program_ops, style_shows,
                       uses_shard_map, work_outside_shard_map)
from .hlo import ProgramAnalysis, analyze
from .rules import ring_directions_note


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


def _hint(part: Part, out, arrays, case: Case) -> str:
    """What a wrong-values message adds: `part.values_hint` when it applies (always, or, with
    `part.hint_when`, the reference of the mistake it names, only when the result is exactly
    that mistake's), then `part.case_note`'s note on this case, if it has one."""
    hints = []
    if part.values_hint and (part.hint_when is None or _matches(out, part.hint_when(
            *[as_float64(a) for a in arrays], mesh=case.mesh, **case.statics))):
        hints.append(part.values_hint)
    if part.case_note is not None and (note := part.case_note(case)):
        hints.append(note)
    return " ".join(hints)


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
    rule_problems = _style_problems(part, case, stablehlo_text)
    try:
        args = place(arrays, part, mesh)
        out = jax.block_until_ready(compiled(*args))  # finished before count_when_run profiles a run
    except Exception as e:  # a runtime failure inside the compiled program
        rule_problems += part.rule.violations(analysis, case, arrays)
        problem = f"raised when run: {type(e).__name__}: {str(e).splitlines()[0][:300]}"
        return CaseResult(case, False, not rule_problems, [problem] + rule_problems, analysis, ran=False)
    analysis = count_when_run(compiled, args, analysis)
    rule_problems += part.rule.violations(analysis, case, arrays)
    reference = part.reference(*[as_float64(a) for a in arrays], mesh=case.mesh, **case.statics)
    if isinstance(part.result, Tree):
        problems = _tree_problems(out, part, reference, mesh, case, show_values)
        if any("values wrong" in p for p in problems) and (hint := _hint(part, out, arrays, case)):
            problems.append(hint)
    else:
        problems = _array_problems(part, case, mesh, out, reference, arrays, show_values)
    if any("values wrong" in p for p in problems) and _far_off(out, reference):
        # Which way the data went: a ring walking the other way than its schedule shows.
        problems += [note for note in [ring_directions_note(analysis)] if note]
    # Run counts the profiler could not read leave the verdict depending on this process: not
    # `ran`, so that no cache keeps it.
    settled = all(c.count is not None for c in analysis.collectives)
    return CaseResult(case, not problems, not rule_problems, problems + rule_problems, analysis, ran=settled)


def _far_off(out, reference) -> bool:
    """Whether a wrong result is off by about as much as the values themselves (whole blocks in
    the wrong place), not by a rounding or a slightly different formula."""
    try:
        got, want = np.asarray(out, dtype=np.float64), np.asarray(reference, dtype=np.float64)
    except (TypeError, ValueError):
        return False
    rms = float(np.sqrt(np.mean(want ** 2))) if want.size else 0.0
    return got.shape == want.shape and rms > 0 and float(np.sqrt(np.mean((got - want) ** 2))) > 0.1 * rms


COLLECTIVE_OPS = frozenset("stablehlo." + op for op in ("all_reduce", "all_gather", "all_to_all", "collective_permute",
                                                          "reduce_scatter", "collective_broadcast"))
"""The collectives of a lowered (StableHLO) program."""


class WrittenCollective(NamedTuple):
    op: str
    """``all_gather``, ``all_to_all``, ..."""
    axes: frozenset[str]
    sources: tuple[frozenset[int], ...]
    """Each operand's sources (`DataFlow.sources`)."""
    carried: tuple[frozenset[int], ...]
    """The arguments each operand carries as they are, not as results of a product
    (`DataFlow.carried_sources`)."""
    whole_sources: tuple[frozenset[int], ...]
    """`sources`, not through values of fewer elements than `written_collectives`'
    `narrower_than` (the same when it is 0)."""
    whole_carried: tuple[frozenset[int], ...]
    """`carried`, likewise."""


@functools.lru_cache(maxsize=16)
def written_collectives(stablehlo_text: str, mesh_shape: tuple[int, ...],
                        narrower_than: int = 0) -> list[WrittenCollective]:
    """Each collective of a lowered program (``all_gather``, ...), parsed once per program as
    `program_ops` parses. Its replica groups are device lists (``dense<[[0, 4], ...]>``) or,
    on newer JAX, the mesh's axes by name (``#stablehlo.replica_group_mesh_axes<..., axes =
    [#stablehlo.axis_ref<name = "X">]>``); none at all means every device; a permute's axes
    are those its pairs cross.
    Sources: the positions of the program's arguments an operand is computed from
    (`DataFlow`; a correct answer uses every argument, so the exported program keeps them all,
    in order); `whole_sources` and `whole_carried`, not through values of fewer elements than
    `narrower_than` (one row of an argument)."""
    from jax._src.interpreters import mlir
    from jax._src.lib.mlir import ir

    found: list[WrittenCollective] = []
    with mlir.make_ir_context():
        module = ir.Module.parse(stablehlo_text)
        flow = DataFlow(module)

        def visit(operation):
            operation = operation.operation
            if operation.name not in COLLECTIVE_OPS:
                return ir.WalkResult.ADVANCE
            axes = collective_axes(operation, tuple(mesh_shape), MESH_AXES)
            sources = tuple(flow.sources([v]) for v in operation.operands)
            carried = tuple(flow.carried_sources([v]) for v in operation.operands)
            if narrower_than:
                whole = (tuple(flow.sources([v], narrower_than) for v in operation.operands),
                         tuple(flow.carried_sources([v], narrower_than) for v in operation.operands))
            else:
                whole = (sources, carried)
            found.append(WrittenCollective(operation.name.removeprefix("stablehlo."), frozenset(axes),
                                           sources, carried, *whole))
            return ir.WalkResult.ADVANCE

        module.operation.walk(visit)
    return found


class ShardMapInput(NamedTuple):
    carried: frozenset[int]
    """The arguments this input carries as they are (`DataFlow.carried_sources`)."""
    as_it_arrives: bool
    """Is it an argument itself, through reshapes, transposes, casts, calls and sharding
    constraints only (nothing jax.jit computes from it outside the shard_map)?"""
    split: frozenset[str]
    """The mesh axes its in_specs split it over."""
    left_whole: frozenset[str]
    """Where it keeps its argument's dimensions (no reshape or transpose between them): the axes
    the argument's own sharding splits a dimension over that its in_specs leave whole on that
    dimension (jax.jit gathers the argument over those axes at the boundary)."""


SAME_DIMENSIONS_OPS = frozenset({"stablehlo.convert", "stablehlo.bitcast_convert", "func.call", "stablehlo.composite",
                                 "sdy.sharding_constraint", "stablehlo.optimization_barrier"})
"""What leaves an argument as it is, dimension for dimension: casts, calls, a reshard."""
PASSING_OPS = SAME_DIMENSIONS_OPS | {"stablehlo.reshape", "stablehlo.transpose"}
"""What leaves an argument's values as they are: those, and reshapes and transposes."""


@functools.lru_cache(maxsize=16)
def shard_map_inputs(stablehlo_text: str) -> list[ShardMapInput]:
    """Each input of each outermost shard_map (Shardy's manual computation) of a lowered
    program: one nested in another (or in a function a shard_map calls) takes what the outer
    one's body computed on its own devices, where jax.jit moves nothing."""
    from jax._src.interpreters import mlir
    from jax._src.lib.mlir import ir

    def dims(text: str) -> list[frozenset[str]]:
        return [frozenset(re.findall(r'"(\w+)"', d)) for d in re.findall(r"\{[^{}]*\}", text)]

    found = []
    with mlir.make_ir_context():
        module = ir.Module.parse(stablehlo_text)
        flow = DataFlow(module)
        entry = {n: dims(sharding.group(1)) for f in flow.functions.values() if flow.is_entry(f)
                 for n, attrs in enumerate(arg_attrs(f))
                 if (sharding := re.search(r"sdy\.sharding<[^\[]*\[(.*?)\]", attrs))}
        inside: set[str] = set()  # the functions a shard_map's body calls, directly or not

        def calls(operation):
            operation = operation.operation
            if (callee := called_function(operation)) is not None:
                if callee in flow.functions and callee not in inside:
                    inside.add(callee)
                    flow.functions[callee].walk(calls)
            return ir.WalkResult.ADVANCE

        def bodies(operation):
            if operation.operation.name == "sdy.manual_computation":
                operation.operation.walk(calls)
            return ir.WalkResult.ADVANCE

        module.operation.walk(bodies)

        def visit(operation):
            operation = operation.operation
            if operation.name != "sdy.manual_computation":
                return ir.WalkResult.ADVANCE
            specs = re.findall(r"<@[\w.]+, \[(.*?)\]", str(operation.attributes["in_shardings"])) \
                if "in_shardings" in operation.attributes else []
            for k, value in enumerate(operation.operands):
                spec = dims(specs[k]) if k < len(specs) else []
                carried = flow.carried_sources([value])
                same = flow.only_through([value], SAME_DIMENSIONS_OPS)
                left_whole = frozenset(axis for n in (carried if same else ()) for d, axes in enumerate(entry.get(n, ()))
                                       for axis in axes if d >= len(spec) or axis not in spec[d])
                found.append(ShardMapInput(carried, flow.only_through([value], PASSING_OPS),
                                           frozenset().union(*spec), left_whole))
            return ir.WalkResult.SKIP  # a shard_map inside it is its body's business

        for name, function in flow.functions.items():
            if name not in inside:
                function.walk(visit, ir.WalkOrder.PRE_ORDER)
    return found


def _row_elements(arg, case: Case) -> int:
    """Elements of one row of `arg` on a device (its last dimension, divided over the mesh axes
    its sharding splits that dimension over): one token of A is D/nY floats at P('X', 'Y')."""
    shape = arg.shape(case)
    return shape[-1] // arg.splits(case)[-1] if shape else 1


def _alone(sources: frozenset[int], of: int, part: Part) -> bool:
    """Is a value with these sources computed from argument `of` and from no other float one
    (the tokens dispatched by a one-hot matmul, not mixed with W)?"""
    others = {i for i, a in enumerate(part.args) if i != of and a.dtype.startswith("float")}
    return of in sources and not sources & others


def _style_problems(part: Part, case: Case, stablehlo_text: str) -> list[str]:
    """Is the program written in the required style (jax.jit only, or with shard_map)?"""
    if part.style is None:
        return []
    has_shard_map = uses_shard_map(stablehlo_text)
    if part.style == "jit" and has_shard_map:
        return [f"{part.name} must use jax.jit only, but the program contains a shard_map."]
    # Judged where a shard_map shows (`style_shows`); the grading carries the verdict to the
    # other meshes (`style_on_every_mesh`).
    judged = style_shows(case.mesh)
    if part.style == "shard_map" and judged and not has_shard_map:
        return [f"{part.name} must be written with jax.shard_map, but the program has none."]
    if part.work_in_shard_map and judged and has_shard_map and "sdy.manual_computation" not in program_ops(stablehlo_text):
        return [f"{part.name} must be lowered with JAX's default partitioner (Shardy), which the graders read: "
                f"this program's shard_map was lowered with GSPMD (jax_use_shardy_partitioner was turned off). "
                f"Leave that flag at its default."]
    outside = work_outside_shard_map(stablehlo_text) if part.work_in_shard_map and judged else ()
    if outside:
        names = ", ".join(sorted(o.removeprefix("stablehlo.") for o in outside))
        return [f"{part.name} must do its work inside its shard_map, but jax.jit computes around it ({names} "
                f"outside the shard_map): a shard_map that passes its input through, declares each "
                f"device's own block replicated (out_specs=P() with check_vma=False and no psum over the "
                f"axes it is split over), or whose result is thrown away, leaves the work to jax.jit. Sum "
                f"(and multiply) each device's own block inside the shard_map."]
    names = [a.name for a in part.args]
    # One reading of the program's collectives serves both checks below; the tokens' check
    # reads it in pieces of one token's row at least (`_row_elements`).
    row = _row_elements(part.args[names.index(part.writes_of)], case) if part.writes_of else 0
    if part.stays_on and judged:
        arg, axis = part.stays_on
        of = names.index(arg)
        moved = sorted({c.op for c in written_collectives(stablehlo_text, case.mesh, row)
                        if axis in c.axes and any(of in carried for carried in c.carried)})
        if moved:
            return [f"{part.name} must keep {arg} where it lives, but its {', '.join(moved)} over {axis} carries "
                    f"{arg} itself (not multiplied by the tokens; reshaped, retyped or added to other data "
                    f"still counts). Each expert's matrix stays on its row: send the tokens to the experts, "
                    f"and their results back."]
        inputs = [i for i in shard_map_inputs(stablehlo_text) if of in i.carried]
        if not all(i.as_it_arrives for i in inputs):
            return [f"{part.name} must keep {arg} where it lives, but its shard_map takes what jax.jit built from "
                    f"{arg} around it (sliced, broadcast or combined with other data), which jax.jit may move "
                    f"between rows. Pass {arg} into the shard_map as it arrives, so each row keeps its experts: "
                    f"send the tokens to the experts, and their results back."]
        if any(axis not in i.split or axis in i.left_whole for i in inputs):
            return [f"{part.name} must keep {arg} where it lives, but its shard_map's in_specs do not split "
                    f"{arg} over {axis} as {arg} arrives: jax.jit then gathers every row's experts onto each "
                    f"device at the shard_map's boundary. Give {arg} the in_specs of its own sharding, so each "
                    f"row keeps its experts: send the tokens to the experts, and their results back."]
    if not (part.writes and judged):
        return []
    written = WRITTEN.get(part.writes, part.writes)
    collectives = [c for c in written_collectives(stablehlo_text, case.mesh, row) if c.op == part.writes]
    if part.writes in NAMED_BY_THE_RULE:
        collectives = [c for c in collectives if part.writes_over in c.axes]
        if not collectives:
            return []
    if "stablehlo." + part.writes not in program_ops(stablehlo_text):
        return [f"{part.name} must communicate with {written} inside its shard_map, but the program calls "
                f"none: its communication was inserted by jax.jit around the shard_map. Do the work "
                f"inside the shard_map and write the {written} yourself."]
    if not part.writes_over:
        return []
    over = [c for c in collectives if part.writes_over in c.axes and c.carried]
    if not over:
        seen = " and ".join(sorted(set().union(*(c.axes for c in collectives)))) or "no axis"
        return [f"{part.name} must call {written} over {part.writes_over} inside its shard_map, but its {written} "
                f"runs over {seen} only. Send the tokens over {part.writes_over} yourself: in_specs that "
                f"replicate an input over {part.writes_over} make jax.jit gather that input (all of it) at the "
                f"shard_map's boundary instead."]
    if part.writes_of is None:
        return []
    of = names.index(part.writes_of)
    # The tokens as they are (through any arithmetic but a product), or anything computed from
    # the tokens and from no other float input (a one-hot dispatch is a product of A alone);
    # either way in pieces of one token's row at least, never through a single number of them.
    def tokens(c):
        return any(of in carried or _alone(sources, of, part)
                   for carried, sources in zip(c.whole_carried, c.whole_sources))

    if any(map(tokens, over)):
        # ... and in it alone: tokens that also cross by permutes or psums beside it (in any type)
        # leave it a decoy to carry, a few of their rows made into nothing.
        beside = sorted({WRITTEN.get(c.op, c.op) for c in written_collectives(stablehlo_text, case.mesh, row)
                         if c.op != part.writes and part.writes_over in c.axes and tokens(c)})
        if not beside:
            return []
        return [f"{part.name} must send the tokens ({part.writes_of}) over {part.writes_over} with {written}, but "
                f"its {', '.join(beside)} over {part.writes_over} carries them too (as they are, in any type, or "
                f"computed from them alone). {WRITTEN_HINT[part.writes]}"]
    carried = sorted({names[i] for c in over for each in c.whole_carried for i in each if i < len(names)})
    what = " and ".join(carried) or "no input as it is (products of the inputs, or values made in the program)"
    return [f"{part.name} must send the tokens ({part.writes_of}) over {part.writes_over} with {written} inside "
            f"its shard_map, but no {written} over {part.writes_over} carries them: what they carry is {what}. "
            f"{WRITTEN_HINT[part.writes]}"]


WRITTEN = {"all_reduce": "jax.lax.psum", "all_gather": "jax.lax.all_gather", "all_to_all": "jax.lax.all_to_all",
           "collective_permute": "jax.lax.ppermute"}
"""The jax.lax call that lowers to each collective a part may require (`Part.writes`) or
a message names."""
NAMED_BY_THE_RULE = frozenset({"all_to_all"})
"""Collectives whose absence the part's rule already names, read from the compiled program
(problem2's `TokensByAllToAll`: "no all-to-all over X moves the tokens"): the style check
only asks what the written ones over `Part.writes_over` carry."""
WRITTEN_HINT = {
    "all_gather": "Bring the tokens to the experts: gathering the experts (W) to the tokens moves the matrices "
                  "the design keeps in place.",
    "all_to_all": "Send the tokens themselves to their experts' rows in the all_to_all (not as integers, not by "
                  "permutes or psums beside it, and not as a number computed from them), and their results back "
                  "the same way.",
}
"""What to do when a part's collective does not carry the argument it must (`Part.writes_of`)."""


def _array_problems(part: Part, case: Case, mesh, out, reference, arrays, show_values: bool) -> list[str]:
    """Shape, dtype, sharding and values of a single-array result."""
    want_shape, want_dtype = part.result.shape(case), np.dtype(part.result.dtype)
    if isinstance(out, (tuple, list)):
        return [f"returned {len(out)} values; expected one array {part.result.describe(case)}"]
    if not isinstance(out, jax.Array):  # a dict, None, or another pytree the program returned
        return [f"returned a {type(out).__name__}; expected one array {part.result.describe(case)}"]
    if tuple(out.shape) != want_shape:
        return [f"wrong shape: got {tuple(out.shape)}, expected {want_shape} ({part.result.describe(case)})"]
    if out.dtype != want_dtype:
        return [f"wrong dtype: got {out.dtype}, expected {want_dtype}"]
    problems = []
    if not out.sharding.is_equivalent_to(NamedSharding(mesh, part.result.partition_spec), out.ndim):
        problems.append(f"wrong sharding: got {_sharding_text(out.sharding, out.ndim)}, expected "
                        f"{part.result.partition_spec} ({_sharding_fix(part)})")
    retry = check_call(part, case)
    wrong = _compare_values(np.asarray(out), np.asarray(reference), show_values, retry)
    if wrong:
        hint = _hint(part, np.asarray(out), arrays, case)
        problems.append(wrong + (f". {hint}" if hint else ""))
    elif wrong := _copies_problem(out, np.asarray(reference, dtype=np.float64), show_values, retry):
        problems.append(wrong)
    return problems


def _sharding_fix(part: Part) -> str:
    """What sets a result's sharding: on an Explicit mesh the sharding is part of the type,
    set on the operation that makes the value; on an Auto mesh, jax.jit or shard_map sets it."""
    if part.axis_types == "explicit":
        return ("on an Explicit mesh the sharding is part of the type: pass out_sharding= to the "
                "operation that makes the result, e.g. jnp.matmul(x, w, out_sharding=P('X', 'Y'))")
    return "add out_shardings to jax.jit, or fix out_specs"


def _tree_problems(out, part: Part, reference, mesh, case: Case, show_values: bool) -> list[str]:
    """Check a pytree result leaf by leaf: shape, dtype, sharding, values."""
    result, retry = part.result, check_call(part, case)
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
            r = np.asarray(r, dtype=np.float64)
            wrong = (_compare_values(np.asarray(g), r, show_values, retry)
                     or _copies_problem(g, r, show_values, retry))
            if wrong:
                problems.append(f"{leaf.name}: {wrong}")
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
    problems: list[str] = []
    want_shape, want_dtype = part.result.shape(case), np.dtype(part.result.dtype)
    if report.get("type") != "Array":
        problems.append(f"returned a {report.get('type')}; expected a jax.Array {part.result.describe(case)}")
    elif tuple(report["shape"]) != want_shape:
        problems.append(f"wrong shape: got {tuple(report['shape'])}, expected {want_shape}")
    elif report["dtype"] != want_dtype.name:
        problems.append(f"wrong dtype: got {report['dtype']}, expected {want_dtype}")
    else:
        problems += _shard_problems(part, mesh, report, np.asarray(arrays[0]))
    ok = not problems
    return CaseResult(case, ok, ok, problems)


def _shard_problems(part: Part, mesh, report: dict, source: np.ndarray) -> list[str]:
    """Compare reported shards with the contract's placement of `source` on `mesh`."""
    shape = source.shape
    want = NamedSharding(mesh, part.result.partition_spec).devices_indices_map(shape)
    want = {d.id: [[s.start or 0, s.stop if s.stop is not None else n] for s, n in zip(index, shape)]
            for d, index in want.items()}
    got = {shard["device"]: shard for shard in report.get("shards", [])}
    if set(got) != set(want) or any(got[d]["index"] != want[d] for d in want):
        return [f"wrong sharding: got {report.get('sharding')}, expected "
                f"{part.result.partition_spec} on the given mesh (each device holds its own block)"]
    for device, index in want.items():
        block = source[tuple(slice(a, b) for a, b in index)]
        data = got[device]["data"]
        if data.shape != block.shape or data.dtype != block.dtype or not np.array_equal(data, block):
            return [f"values wrong: the block on device {device} differs from the input's "
                    f"(placing an array must not change its values or dtype)"]
    return []
