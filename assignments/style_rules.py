"""Style rules: how a graded function must be written, read from its lowered program.

A part may ask to be written with jax.jit only (`JitOnly`), with jax.shard_map (`UsesShardMap`),
to do its work inside that shard_map (`WorkInsideShardMap`), to keep an argument on the rows
that hold it (`KeepsOnAxis`), or to call a collective itself (`WritesCollective`). These are
properties of the code, not of its compiled communication, so they read the lowered
(StableHLO) program and its data flow (`assignments.lowered`). They are declared in the part's one list of rules beside the rules on
its compiled program (`Part.rules`), and run in their declared order: the first that fails
says why, since the later ones read what the earlier ones establish (a shard_map exists, lowered
by Shardy). JAX inlines a shard_map whose manual axes all have one device, collectives and all,
so they are judged where every mesh axis has two devices or more (`style_shows`); the grading
carries a verdict found there to the other meshes (`contract.style_on_every_mesh`).
"""
from __future__ import annotations

import dataclasses
from typing import ClassVar

from .contract import Case, Part, Problem, style_shows
from .lowered import lowered_program
from .rules import Program, Rule


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


WRITTEN = {"all_reduce": "jax.lax.psum", "all_gather": "jax.lax.all_gather", "all_to_all": "jax.lax.all_to_all",
           "collective_permute": "jax.lax.ppermute"}
"""The jax.lax call that lowers to each collective a part may require (`WritesCollective`) or
a message names."""
NAMED_BY_THE_RULE = frozenset({"all_to_all"})
"""Collectives whose absence the part's rule already names, read from the compiled program
(problem2's `TokensByAllToAll`: "no all-to-all over X moves the tokens"): `WritesCollective`
only asks what the written ones over its axis carry."""
WRITTEN_HINT = {
    "all_gather": "Bring the tokens to the experts: gathering the experts (W) to the tokens moves the matrices "
                  "the design keeps in place.",
    "all_to_all": "Send the tokens themselves to their experts' rows in the all_to_all (not as integers, not by "
                  "permutes or psums beside it, and not as a number computed from them), and their results back "
                  "the same way.",
}
"""What to do when a part's collective does not carry the argument it must (`WritesCollective.of`)."""


class StyleRule(Rule):
    """A rule on how the part is written, read from its lowered program (`Program.lowered`)."""

    reads_lowered: ClassVar[bool] = True
    problem_kind: ClassVar[str] = "style"

    judged_everywhere: ClassVar[bool] = False
    """Judged on every mesh (True), or only where a shard_map shows (`style_shows`), its
    verdict then carried to the other meshes (`contract.style_on_every_mesh`)."""


@dataclasses.dataclass(frozen=True)
class JitOnly(StyleRule):
    """The part is written with jax.jit only: its lowered program holds no shard_map."""

    code: ClassVar[str] = "S001"
    title: ClassVar[str] = "jit-only"
    checks: ClassVar[str] = "the function is written with jax.jit only, no shard_map"
    rationale: ClassVar[str] = (
        "Some parts teach what jax.jit does by itself with shardings and sharding constraints: a "
        "shard_map would write by hand what the part asks XLA to work out.")
    judged_everywhere: ClassVar[bool] = True

    def describe(self) -> str:
        return "written with jax.jit only (no shard_map)"

    def problems(self, program: Program, case: Case) -> list[str]:
        if program.lowered.uses_shard_map:
            return [f"{program.part.name} must use jax.jit only, but the program contains a shard_map."]
        return []


@dataclasses.dataclass(frozen=True)
class UsesShardMap(StyleRule):
    """The part is written with jax.shard_map: its lowered program holds one."""

    code: ClassVar[str] = "S002"
    title: ClassVar[str] = "uses-shard-map"
    checks: ClassVar[str] = "the function is written with jax.shard_map"
    rationale: ClassVar[str] = (
        "The part teaches writing per-device code and its communication by hand; jax.jit alone would "
        "leave both to XLA.")

    def describe(self) -> str:
        return "written with jax.shard_map"

    def problems(self, program: Program, case: Case) -> list[str]:
        if style_shows(case.mesh) and not program.lowered.uses_shard_map:
            return [f"{program.part.name} must be written with jax.shard_map, but the program has none."]
        return []


@dataclasses.dataclass(frozen=True)
class WorkInsideShardMap(StyleRule):
    """The part's sums, matmuls and convolutions run inside its shard_map, not in jax.jit around
    it: not around a shard_map that passes its input through, declares each device's own block
    replicated (out_specs=P() with check_vma=False and no psum), or whose psum the compiler
    drops. Read in Shardy's form, so a program lowered with jax_use_shardy_partitioner off is
    refused, naming the flag."""

    code: ClassVar[str] = "S003"
    title: ClassVar[str] = "work-inside-shard-map"
    checks: ClassVar[str] = "the sums and matmuls run inside the shard_map, not in jax.jit around it"
    rationale: ClassVar[str] = (
        "A shard_map that leaves the work to jax.jit around it teaches nothing about per-device code, "
        "and its visible communication is XLA's, not the student's.")

    def describe(self) -> str:
        return "its work done inside the shard_map"

    def problems(self, program: Program, case: Case) -> list[str]:
        name, lowered = program.part.name, program.lowered
        judged = style_shows(case.mesh)
        if judged and lowered.uses_shard_map and "sdy.manual_computation" not in lowered.ops:
            return [f"{name} must be lowered with JAX's default partitioner (Shardy), which the graders read: "
                    f"this program's shard_map was lowered with GSPMD (jax_use_shardy_partitioner was turned "
                    f"off). Leave that flag at its default."]
        outside = lowered.work_outside_shard_map if judged else ()
        if outside:
            names = ", ".join(sorted(o.removeprefix("stablehlo.") for o in outside))
            return [f"{name} must do its work inside its shard_map, but jax.jit computes around it ({names} "
                    f"outside the shard_map): a shard_map that passes its input through, declares each "
                    f"device's own block replicated (out_specs=P() with check_vma=False and no psum over the "
                    f"axes it is split over), or whose result is thrown away, leaves the work to jax.jit. Sum "
                    f"(and multiply) each device's own block inside the shard_map."]
        return []


@dataclasses.dataclass(frozen=True)
class KeepsOnAxis(StyleRule):
    """`arg` stays where it lives along `axis`: no collective the submission writes carries it
    over `axis` as it is (only products of it: `DataFlow.carried_sources`; reshaped, retyped or
    added to other data still counts), and every shard_map takes it as it arrives, split over
    `axis` as its own sharding splits it (`LoweredProgram.shard_map_inputs`). What a collective
    carries is read in pieces of one row of `pieces_of` per device."""

    code: ClassVar[str] = "S004"
    title: ClassVar[str] = "keeps-on-its-axis"
    checks: ClassVar[str] = "an argument stays on the devices that hold it along an axis: nothing sends it over that axis"
    rationale: ClassVar[str] = (
        "The design keeps each expert's matrix on the row that holds it and moves the tokens to it: "
        "moving the matrices instead (by a collective, or by jax.jit at the shard_map's boundary) "
        "sends far more bytes.")

    arg: str
    axis: str
    pieces_of: str | None = None

    def describe(self) -> str:
        return f"{self.arg} kept on its {self.axis} rows (never sent over {self.axis})"

    def problems(self, program: Program, case: Case) -> list[str]:
        if not style_shows(case.mesh):
            return []
        part, lowered, arg, axis = program.part, program.lowered, self.arg, self.axis
        names = [a.name for a in part.args]
        row = _row_elements(part.args[names.index(self.pieces_of)], case) if self.pieces_of else 0
        of = names.index(arg)
        moved = sorted({c.op for c in lowered.written_collectives(case.mesh, row)
                        if axis in c.axes and any(of in carried for carried in c.carried)})
        if moved:
            return [f"{part.name} must keep {arg} where it lives, but its {', '.join(moved)} over {axis} carries "
                    f"{arg} itself (not multiplied by the tokens; reshaped, retyped or added to other data "
                    f"still counts). Each expert's matrix stays on its row: send the tokens to the experts, "
                    f"and their results back."]
        inputs = [i for i in lowered.shard_map_inputs if of in i.carried]
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
        return []


@dataclasses.dataclass(frozen=True)
class WritesCollective(StyleRule):
    """The part calls the collective `op` itself inside its shard_map (as the lowered program
    names it: ``'all_reduce'`` for psum, ``'all_gather'``): jax.jit's own collectives appear only
    when XLA partitions the program, so an identity shard_map with jax.jit doing the work
    around it lowers without one. With `over`, one of them runs over that mesh axis; with `of`,
    one of those carries that argument as it is (not only products of it, nor integers) or is
    computed from it and from no other float argument (a one-hot dispatch), by the lowered
    program's data flow, in pieces of at least one of its rows per device (a number made from it
    carries none of it), and no other collective over `over` carries it beside."""

    code: ClassVar[str] = "S005"
    title: ClassVar[str] = "writes-the-collective"
    checks: ClassVar[str] = "the function calls the collective itself, inside its shard_map, carrying the data named"
    rationale: ClassVar[str] = (
        "The part teaches a collective by writing it: the same result with the communication left "
        "to jax.jit at the shard_map's boundary, or with another collective carrying the data, is "
        "not the design the problem asks for.")

    op: str
    over: str | None = None
    of: str | None = None

    def describe(self) -> str:
        over = f" over {self.over}" if self.over else ""
        of = f", carrying {self.of}" if self.of else ""
        return f"calls {WRITTEN.get(self.op, self.op)}{over} inside the shard_map{of}"

    def problems(self, program: Program, case: Case) -> list[str]:
        if not style_shows(case.mesh):
            return []
        part, lowered = program.part, program.lowered
        names = [a.name for a in part.args]
        row = _row_elements(part.args[names.index(self.of)], case) if self.of else 0
        written = WRITTEN.get(self.op, self.op)
        collectives = [c for c in lowered.written_collectives(case.mesh, row) if c.op == self.op]
        if self.op in NAMED_BY_THE_RULE:
            collectives = [c for c in collectives if self.over in c.axes]
            if not collectives:
                return []
        if "stablehlo." + self.op not in lowered.ops:
            return [f"{part.name} must communicate with {written} inside its shard_map, but the program calls "
                    f"none: its communication was inserted by jax.jit around the shard_map. Do the work "
                    f"inside the shard_map and write the {written} yourself."]
        if not self.over:
            return []
        over = [c for c in collectives if self.over in c.axes and c.carried]
        if not over:
            seen = " and ".join(sorted(set().union(*(c.axes for c in collectives)))) or "no axis"
            return [f"{part.name} must call {written} over {self.over} inside its shard_map, but its {written} "
                    f"runs over {seen} only. Send the tokens over {self.over} yourself: in_specs that "
                    f"replicate an input over {self.over} make jax.jit gather that input (all of it) at the "
                    f"shard_map's boundary instead."]
        if self.of is None:
            return []
        of = names.index(self.of)

        # The tokens as they are (through any arithmetic but a product), or anything computed from
        # the tokens and from no other float input (a one-hot dispatch is a product of A alone);
        # either way in pieces of one token's row at least, never through a single number of them.
        def tokens(c):
            return any(of in carried or _alone(sources, of, part)
                       for carried, sources in zip(c.whole_carried, c.whole_sources))

        if any(map(tokens, over)):
            # ... and in it alone: tokens that also cross by permutes or psums beside it (in any type)
            # leave it a decoy to carry, a few of their rows made into nothing.
            beside = sorted({WRITTEN.get(c.op, c.op) for c in lowered.written_collectives(case.mesh, row)
                             if c.op != self.op and self.over in c.axes and tokens(c)})
            if not beside:
                return []
            return [f"{part.name} must send the tokens ({self.of}) over {self.over} with {written}, but "
                    f"its {', '.join(beside)} over {self.over} carries them too (as they are, in any type, or "
                    f"computed from them alone). {WRITTEN_HINT[self.op]}"]
        carried = sorted({names[i] for c in over for each in c.whole_carried for i in each if i < len(names)})
        what = " and ".join(carried) or "no input as it is (products of the inputs, or values made in the program)"
        return [f"{part.name} must send the tokens ({self.of}) over {self.over} with {written} inside "
                f"its shard_map, but no {written} over {self.over} carries them: what they carry is {what}. "
                f"{WRITTEN_HINT[self.op]}"]


def style_problems(part: Part, case: Case, lowered: str) -> list[Problem]:
    """The part's style rules on its lowered program, in their declared order: the first that
    fails says why (the later ones read what the earlier ones establish)."""
    program = Program(part, None, lowered_program(lowered))
    for rule in part.style_rules:
        found = rule.check(program, case)
        if found:
            return found
    return []


# --- collectives built by hand from permutes (first used by `collectives`): S006 -----------------

BUILT_IN = {"all_reduce": "jax.lax.psum (or pmean, pmax, pmin)", "all_gather": "jax.lax.all_gather",
            "reduce_scatter": "jax.lax.psum_scatter", "all_to_all": "jax.lax.all_to_all",
            "collective_broadcast": "a collective broadcast", "ragged_all_to_all": "jax.lax.ragged_all_to_all"}
"""The collectives a part built by hand must not call, by their lowered (StableHLO) names, with
the jax.lax call each comes from (`ByHand`)."""


@dataclasses.dataclass(frozen=True)
class ByHand(StyleRule):
    """The lowered program calls no collective but those in `allowed` (StableHLO names:
    ``collective_permute`` for jax.lax.ppermute), anywhere: inside the shard_map, in a jax.jit
    or any function it calls, or around it. Read from the lowered program, not the compiled one,
    because XLA drops a collective over a one-device axis (a psum over Y on a mesh with nY = 1)
    before the compiled program shows it, while the code still asks for it. Judged on every
    mesh: the lowered program of each case says what that case's code calls."""

    code: ClassVar[str] = "S006"
    title: ClassVar[str] = "collectives-by-hand"
    checks: ClassVar[str] = ("the lowered program calls no built-in collective (psum, all_gather, psum_scatter, "
                             "all_to_all): only the ones the part builds with")
    rationale: ClassVar[str] = (
        "The part teaches how a collective is made out of neighbour-to-neighbour sends and what that costs; "
        "calling jax.lax's own collective skips both, even where the compiler then finds it has nothing to "
        "do (a psum over an axis of one device compiles to nothing, but the code still calls it).")
    judged_everywhere: ClassVar[bool] = True

    allowed: tuple[str, ...] = ("collective_permute",)

    def describe(self) -> str:
        return (f"built by hand from {' and '.join(WRITTEN.get(a, a) for a in self.allowed)}: no psum, all_gather, "
                f"psum_scatter or all_to_all in the program")

    def problems(self, program: Program, case: Case) -> list[str]:
        ops = program.lowered.ops
        called = [name for name in BUILT_IN if name not in self.allowed
                  and ("stablehlo." + name in ops or any(o.startswith("custom_call:") and name in o for o in ops))]
        if not called:
            return []
        calls = ", ".join(BUILT_IN[name] for name in called)
        built = " and ".join(WRITTEN.get(a, a) for a in self.allowed)
        return [f"{program.part.name} must build its collective from {built} alone, but its program calls {calls} "
                f"(found in the lowered program, whether or not the compiler keeps it: a psum over an axis of one "
                f"device compiles to nothing, and still counts). Write the steps yourself: each device sends one "
                f"block to another with {built}, and you add or place what arrives."]
