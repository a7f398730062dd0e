"""The shape of an exercise contract: what a graded function takes, returns and may communicate.

Each assignment's contract lives once, in `assignments/contracts/<assignment>.py`, and
drives the visible checks, the graders' hidden configurations and the reports.
The binding text is the course's PROBLEMS.md; these objects are that text in code.
"""
from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING, Any, Callable, Mapping

import numpy as np

if TYPE_CHECKING:
    from .hlo import ProgramAnalysis

MESH_AXES = ("X", "Y")


@dataclasses.dataclass(frozen=True)
class Arg:
    """One array argument or result of a graded function."""

    name: str
    """The name the problem uses (``A``, ``W``, ...)."""
    dims: tuple[str, ...]
    """Symbolic sizes, resolved per case; ``nX`` and ``nY`` are the mesh's axis sizes."""
    spec: tuple
    """PartitionSpec entries over the mesh axes ``('X', 'Y')``."""
    dtype: str = "float32"
    high: str | None = None
    """Integer arguments only: values lie in [0, high), a symbolic size such as ``'E'``."""

    def shape(self, case: "Case") -> tuple[int, ...]:
        sizes = case.all_sizes
        return tuple(sizes[d] if isinstance(d, str) else int(d) for d in self.dims)

    def splits(self, case: "Case") -> tuple[int, ...]:
        """Over how many devices each dimension is split on `case`'s mesh (1: kept whole)."""
        sizes = dict(zip(MESH_AXES, case.mesh))
        entries = tuple(self.spec) + (None,) * (len(self.dims) - len(self.spec))
        return tuple(math.prod(sizes[a] for a in (e if isinstance(e, tuple) else (e,) if e else ()))
                     for e in entries[:len(self.dims)])

    @property
    def partition_spec(self):
        """The `jax.sharding.PartitionSpec` (JAX loads only here: the graders' parent reads
        contracts without it)."""
        from jax.sharding import PartitionSpec

        return PartitionSpec(*self.spec)

    def describe(self, case: "Case | None" = None) -> str:
        dims = self.shape(case) if case else self.dims
        return f"{self.name}: {self.dtype}[{', '.join(map(str, dims))}] at {self.partition_spec}"


@dataclasses.dataclass(frozen=True)
class Tree:
    """A tuple of arguments or results that travel together as one pytree, e.g. the
    parameters ``params = (w, b)`` of a training step, or its result ``(params, loss)``.
    Graded leaf by leaf, in order (any container with the same leaves is accepted)."""

    name: str
    items: tuple
    """The members, each an `Arg` or a nested `Tree`."""

    @property
    def leaves(self) -> tuple[Arg, ...]:
        return tuple(leaf for item in self.items for leaf in arg_leaves(item))

    def describe(self, case: "Case | None" = None) -> str:
        return f"{self.name} = ({', '.join(item.describe(case) for item in self.items)})"


def arg_leaves(arg) -> tuple[Arg, ...]:
    """The `Arg`s inside an `Arg` or a `Tree`, in order."""
    return arg.leaves if isinstance(arg, Tree) else (arg,)


def map_args(fn, arg, value):
    """Apply ``fn(value_leaf, arg_leaf)`` leaf by leaf, keeping `arg`'s nesting (as tuples)."""
    if isinstance(arg, Tree):
        return tuple(map_args(fn, item, v) for item, v in zip(arg.items, value))
    return fn(value, arg)


@dataclasses.dataclass(frozen=True)
class Case:
    """One configuration a graded function is called with: a mesh, sizes, static arguments."""

    mesh: tuple[int, int]
    """(nX, nY)."""
    sizes: Mapping[str, int]
    """The problem's sizes, e.g. ``{'S': 16, 'D': 8}``."""
    statics: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    """Static keyword arguments, e.g. ``{'shift': 3}``."""

    @property
    def all_sizes(self) -> dict[str, int]:
        return {"nX": self.mesh[0], "nY": self.mesh[1], **self.sizes}

    @property
    def label(self) -> str:
        parts = [f"mesh {self.mesh[0]}x{self.mesh[1]}"]
        parts += [f"{k}={v}" for k, v in self.sizes.items()]
        parts += [f"{k}={v}" for k, v in self.statics.items()]
        return ", ".join(parts)

    def to_json(self) -> dict:
        return {"mesh": list(self.mesh), "sizes": dict(self.sizes), "statics": dict(self.statics)}


@dataclasses.dataclass(frozen=True)
class Part:
    """One graded function."""

    name: str
    """The function's name, as students define it."""
    points: float
    task: str
    """One sentence: what it computes and how."""
    args: tuple[Arg, ...]
    result: Arg
    rules: tuple
    """Every rule the function's program must keep, in one declared list: on its compiled
    program's communication, memory and work (`assignments.rules`), and on how it is written
    (`assignments.style_rules`: jax.jit only, with shard_map, the work inside it, an argument
    kept on its axis, a collective written by the student). `python -m assignments.rules`
    lists them with their ids and explanations."""
    reference: Callable[..., np.ndarray]
    """Dense float64 NumPy reference: ``reference(*arrays, mesh=(nX, nY), **statics)``."""
    visible_case: Case
    """The one small configuration the notebook's visible check uses."""
    statics: tuple[str, ...] = ()
    """Names of static keyword arguments (after ``mesh``)."""
    eager: bool = False
    """Called eagerly on concrete arrays, not traced: graded on the result's shape, dtype,
    sharding and values as reported by the submission's process (no artifact, no HLO)."""
    values_hint: str = ""
    """Appended to a wrong-values message: the mistake it usually means and where to look."""
    hint_when: Callable | None = None
    """The reference of the mistake `values_hint` names (same signature as `reference`):
    when given, the hint is shown only if the result matches it, never on other wrong values."""
    axis_types: str = "auto"
    """The mesh's axis types for this function: ``'auto'`` (the course's default) or
    ``'explicit'`` (`jax.sharding.AxisType.Explicit`: shardings are part of the types)."""
    inputs: Callable | None = None
    """Optional generator of well-conditioned inputs: ``inputs(case, rng) -> list`` of
    arrays (a tuple of arrays for a `Tree` argument). Default: `make_inputs`'s."""
    baseline: Callable | None = None
    """The plain `jax.jit` version of the same computation (same signature), shown beside
    the student's in the visible check's cost table."""
    cost_case: Case | None = None
    """Where the cost table compares the student's function with `baseline`: usually the
    book's sizes (compiled from abstract inputs, never run)."""
    takes_mesh: bool = True
    """False for a single-device function called without ``mesh`` (e.g. problem2's
    ``moe_local(W, A, B)``): its cases use a 1x1 mesh, so every argument sits on one device."""

    @property
    def rule(self):
        """The rules on the compiled program (communication, memory, work), as one: what the
        visible check states as allowed, and what runs after the program ran."""
        from .rules import AllOf

        compiled = tuple(r for r in self.rules if not r.reads_lowered)
        return compiled[0] if len(compiled) == 1 else AllOf(compiled)

    @property
    def style_rules(self) -> tuple:
        """The rules on how the function is written, read from its lowered program, in order."""
        return tuple(r for r in self.rules if r.reads_lowered)

    def call_kwargs(self, mesh, statics) -> dict:
        """The keyword arguments the function is called with: ``mesh`` (unless it takes
        none), then the static arguments."""
        return ({"mesh": mesh} if self.takes_mesh else {}) | dict(statics)

    @property
    def signature(self) -> str:
        names = [a.name for a in self.args]
        keywords = (("mesh",) if self.takes_mesh else ()) + self.statics
        return f"{self.name}({', '.join(names)}{', *, ' + ', '.join(keywords) if keywords else ''})"


@dataclasses.dataclass(frozen=True)
class WrittenPart:
    """A manually graded written answer."""

    name: str
    points: float
    prompt: str


@dataclasses.dataclass(frozen=True)
class Assignment:
    name: str
    title: str
    parts: tuple[Part, ...]
    written: tuple[WrittenPart, ...] = ()
    book_url: str = ""
    inputs: Callable | None = None
    """``inputs(part, case, seed) -> list``: every case's input arrays, visible and hidden, when
    a case's sizes name more than shapes (problem2's ``experts_used``, the routing); default
    `make_inputs`. The seed is the only secret: a check run at a hidden case's label gets
    inputs of the same kind as the graders'."""

    def part(self, name: str) -> Part:
        for p in self.parts:
            if p.name == name:
                return p
        known = ", ".join(p.name for p in self.parts)
        raise KeyError(f"{self.name} has no graded function {name!r}; it has: {known}")

    @property
    def max_score(self) -> float:
        return sum(p.points for p in self.parts) + sum(w.points for w in self.written)


def case_request(part: Part, case: Case, case_id: str) -> dict:
    """One case as the export worker reads it (JSON): mesh, argument specs, statics."""
    def request(a):
        if isinstance(a, Tree):
            return {"tree": [request(item) for item in a.items]}
        return {"shape": list(a.shape(case)), "dtype": a.dtype, "spec": list(a.spec)}

    return {
        "id": case_id, "mesh": list(case.mesh), "statics": dict(case.statics),
        "args": [request(a) for a in part.args],
        "axis_types": part.axis_types,
        "takes_mesh": part.takes_mesh,
    }


def check_call(part: Part, case: Case) -> str:
    """The call that runs `part`'s visible check at `case`'s mesh, sizes and statics, on inputs
    of the check's own: what a hidden case's message tells the student to run."""
    return f"check({part.name}, case={case.label!r})"


def style_shows(mesh: tuple[int, ...]) -> bool:
    """Can a program show on `mesh` whether it has a shard_map, and the collective a part must
    write in it? JAX inlines a shard_map whose manual axes all have one device (nothing to map
    over), collectives and all: on a 1x8 mesh one manual over X only (`axis_names={'X'}`, Y
    left to the partitioner) leaves no trace. So only where every axis has two devices or more."""
    return min(mesh) > 1


def style_on_every_mesh(part: Part, cases: list[CaseResult]) -> list[CaseResult]:
    """The cases of `part` with its style verdict carried to every mesh: the style is a property
    of the code, so a program that shows on one mesh that it lacks its shard_map (or the
    collective written in it) lacks it on the meshes that cannot show it (`style_shows`)."""
    if all(r.judged_everywhere for r in part.style_rules):
        return cases
    shown = [(p, c.case.mesh) for c in cases if style_shows(c.case.mesh)
             for p in c.problems if p.startswith(f"{part.name} must ")]
    if not shown:
        return cases
    problem, mesh = shown[0]
    carried = f"{problem} (seen on the {'x'.join(map(str, mesh))} mesh: a mesh with a one-device axis cannot show it)"
    return [c if style_shows(c.case.mesh) or problem in c.problems
            else dataclasses.replace(c, rule_ok=False, problems=c.problems + [carried]) for c in cases]


# --- a case's inputs and verdict (no JAX: the graders' parent makes inputs and reads verdicts) ---


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


def case_inputs(assignment: Assignment, part: Part, case: Case, seed: int) -> list:
    """A case's input arrays, by the assignment's generator (`Assignment.inputs`)."""
    return (assignment.inputs or make_inputs)(part, case, seed)


def as_float64(value):
    """An input as float64 NumPy (tuples for `Tree` arguments), for the reference."""
    if isinstance(value, tuple):
        return tuple(as_float64(v) for v in value)
    return np.asarray(value).astype(np.float64)


_CONSTANT_ANSWERS: dict[tuple[str, str, str], bool] = {}


def answer_is_constant(assignment: Assignment, part: Part, case: Case) -> bool:
    """Is `case`'s right answer the same whatever its inputs hold? (roll_diff with a shift that
    is a whole number of shards' rows: all zeros; a normalization over one row: all ones.) A
    function that ignores its inputs is right there, so being right there shows nothing alone.
    Two independent draws of the inputs, compared."""
    key = (assignment.name, part.name, case.label)
    if key not in _CONSTANT_ANSWERS:
        answers = [part.reference(*[as_float64(a) for a in case_inputs(assignment, part, case, seed)],
                                  mesh=case.mesh, **case.statics) for seed in (1, 2)]
        first, second = ([np.asarray(x) for x in _leaves(answer)] for answer in answers)
        _CONSTANT_ANSWERS[key] = all(a.shape == b.shape and np.allclose(a, b, rtol=1e-9, atol=1e-12)
                                     for a, b in zip(first, second))
    return _CONSTANT_ANSWERS[key]


def _leaves(value) -> list:
    return [leaf for item in value for leaf in _leaves(item)] if isinstance(value, (tuple, list)) else [value]


NEEDS_AN_INPUT_CASE = ("values right, but this case's answer is the same whatever the inputs hold, so a function "
                       "that ignores its inputs is right here too: it counts once your function is right on a case "
                       "whose answer depends on its inputs")


def counted_where_answers_depend(cases: list[CaseResult], constant: list[bool]) -> list[CaseResult]:
    """The cases with right values on cases of constant answer (`answer_is_constant`) counted
    only if the values are right on some case whose answer depends on the inputs: a function
    that returns zeros must not earn roll_diff's shift-0 cases."""
    if all(constant) or any(c.values_ok for c, fixed in zip(cases, constant) if not fixed):
        return cases
    return [dataclasses.replace(c, values_ok=False, problems=[NEEDS_AN_INPUT_CASE] + c.problems)
            if fixed and c.values_ok else c for c, fixed in zip(cases, constant)]


def _placeholder(arg):
    """A value with `arg`'s nesting, for `map_args` to walk."""
    return tuple(_placeholder(item) for item in arg.items) if isinstance(arg, Tree) else None


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
    ran: bool = True
    """The program compiled and ran to the end, so the verdict depends on nothing but the
    program, the case and its inputs (False: it failed to compile or raised when run, or the
    profiler could not count how often its collectives ran, all of which can depend on the
    process it ran in; such a verdict is never cached)."""

    @property
    def passed(self) -> bool:
        return self.values_ok and self.rule_ok

    @classmethod
    def failed(cls, case: Case, problem: str) -> "CaseResult":
        return cls(case, False, False, [problem], ran=False)
