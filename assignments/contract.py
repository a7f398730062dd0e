"""The shape of an exercise contract: what a graded function takes, returns and may communicate.

Each assignment's contract lives once, in `assignments/contracts/<assignment>.py`, and
drives the visible checks, the graders' hidden configurations and the reports.
The binding text is the course's PROBLEMS.md; these objects are that text in code.
"""
from __future__ import annotations

import dataclasses
import math
import re
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


PROBLEM_KINDS = ("run", "values", "communication", "style", "policy", "hint")
"""What a problem is about: the code did not run to a result ("run"); its result is wrong
("values"); its compiled program breaks a rule on communication, memory or work
("communication"); it is not written as the part asks ("style"); a verdict across cases
("policy"); or advice on a failure, never a failure itself ("hint")."""

RULE_ID = re.compile(r"[A-Z][0-9]{3}")
"""How a rule's or check's id is written: a letter and three digits ("C001", "V005")."""


@dataclasses.dataclass(frozen=True)
class Problem:
    """One thing wrong with a case, in words a student can act on, with the id of the rule or
    check that found it: a rule a part declares (`assignments.rules.RULES`) or a check the kit
    makes of every graded function (`CHECKS`). `python -m assignments.rules ID` explains it.
    The class report counts problems by `rule`, never by their wording."""

    rule: str
    message: str
    kind: str

    def __str__(self) -> str:
        return self.message

    @property
    def fails(self) -> bool:
        """A hint is advice on a failure, never a failure of its own."""
        return self.kind != "hint"

    def to_json(self) -> dict:
        return {"rule": self.rule, "kind": self.kind, "message": self.message}

    @classmethod
    def from_json(cls, data, max_chars: int = 2000) -> "Problem":
        """A problem read back from JSON (a worker's event, a results file), checked field by
        field: a known id, a known kind, a message of at most `max_chars` (longer ones cut).
        Raises ValueError on anything else."""
        if not isinstance(data, dict):
            raise ValueError("a problem is an object with rule, kind and message")
        rule, kind, message = data.get("rule"), data.get("kind"), data.get("message")
        if not isinstance(rule, str) or not RULE_ID.fullmatch(rule) or not known_rule(rule):
            raise ValueError(f"a problem's rule is not a rule or check the kit has: {str(rule)[:20]!r}")
        if kind not in PROBLEM_KINDS:
            raise ValueError(f"a problem's kind is not one of {', '.join(PROBLEM_KINDS)}")
        if kind != kind_of(rule):
            raise ValueError(f"a problem of {rule} is of kind {kind_of(rule)}, not {kind}")
        if not isinstance(message, str):
            raise ValueError("a problem's message is not text")
        return cls(rule, message[:max_chars], kind)


@dataclasses.dataclass(frozen=True)
class Check:
    """A check the kit makes of every graded function, whatever its contract: that it runs,
    and that its result has the contract's structure, shape, dtype, sharding and values. Listed
    with the rules by `python -m assignments.rules`, with the same fields (an id, a name, what
    it checks, why)."""

    code: str
    title: str
    kind: str
    checks: str
    rationale: str

    def problem(self, message: str) -> Problem:
        return Problem(self.code, message, self.kind)


CHECKS: dict[str, Check] = {c.code: c for c in (
    Check("E001", "defined", "run",
          "the submission defines the function, with the contract's signature, and it is implemented",
          "The graders call the function by its name with the contract's arguments; a missing, renamed or "
          "unimplemented function leaves nothing to grade."),
    Check("E002", "traces", "run",
          "calling the function traces and lowers (jax.jit) without raising, in the time allowed",
          "A function that raises while JAX traces it (a shape that does not divide, a Python loop on a "
          "traced value) never becomes a program: the message names the call that raises it again."),
    Check("E003", "runs", "run",
          "the compiled program compiles and runs to its end, in the time and memory allowed",
          "A program that fails or hangs when run has no result to judge; the message names the case to "
          "run it on yourself."),
    Check("E004", "submission-runs", "run",
          "the submission reads as Python or a notebook, and its cells run to their end",
          "A cell that fails or never ends stops what it defines from existing; the functions it did not "
          "define cannot be graded, the others still are."),
    Check("E005", "graders-error", "run",
          "the graders themselves could judge the case",
          "A failure of the kit's own, never the submission's: the case is regraded once the kit is fixed."),
    Check("V001", "result-structure", "values",
          "the function returns what the contract names: one array, or the contract's tuple of arrays",
          "A result of another structure (a dict, a list of the wrong length, a NumPy array) cannot be "
          "compared with the reference."),
    Check("V002", "shape", "values", "the result has the contract's shape",
          "A result of another shape is usually one device's block where the whole array belongs, or the "
          "other way round."),
    Check("V003", "dtype", "values", "the result has the contract's dtype",
          "A narrower type (bfloat16) loses digits the reference keeps; a wider one is not what was asked."),
    Check("V004", "sharding", "values", "the result is laid out over the mesh as the contract says",
          "The next step of a model reads the result where the contract puts it: a result left replicated, "
          "or split another way, costs a reshuffle that the problem exists to avoid."),
    Check("V005", "values", "values", "the result's values match a float64 reference, within float32 rounding",
          "The reference is NumPy in float64 on the same inputs; the tolerance allows float32 rounding and "
          "nothing more (a bfloat16 step fails)."),
    Check("V006", "every-copy", "values",
          "every device holding a copy of a block of the result holds the right values",
          "Reading an array back reads one copy of each block; a result replicated over an axis must be "
          "right on every device along it, not only on the one read first."),
    Check("T001", "instructor-check", "policy",
          "the instructor's own checks of the function pass (pytest tests in graders/test_<assignment>.py "
          "marked @pytest.mark.points)",
          "An instructor may ask more of a function than its contract (a docstring, a helper used); such a "
          "check takes its points out of the function's."),
    Check("P001", "answers-depend-on-inputs", "policy",
          "right values on a case whose answer is the same whatever the inputs (all zeros, all ones) count "
          "only with right values on a case whose answer depends on them",
          "A function that ignores its inputs is right wherever the answer is constant; being right there "
          "shows nothing alone."),
    Check("P002", "style-on-every-mesh", "policy",
          "a style rule broken on a mesh that shows it is broken on every mesh",
          "JAX inlines a shard_map whose axes all have one device, so a mesh with a one-device axis cannot "
          "show how the code is written; the code is the same on every mesh."),
    Check("H003", "sizes-from-the-mesh", "hint",
          "nothing: when a visible check passes on its first mesh and fails on a second, it says to read sizes "
          "from the mesh and the arrays",
          "Sizes written into the code (a 2 for the mesh's X axis) pass on the mesh they were written for and "
          "fail on every other; the hidden cases use many meshes."),
)}
"""The checks the kit makes of every graded function, by id."""


def kind_of(code: str) -> str:
    """The kind of problem the check or rule `code` finds (its `Check.kind`, its `Rule.problem_kind`)."""
    if code in CHECKS:
        return CHECKS[code].kind
    from .rules import RULES

    return RULES[code].problem_kind


def known_rule(code: str) -> bool:
    """Is `code` the id of a check (`CHECKS`) or of a kind of rule (`assignments.rules.RULES`)?"""
    if code in CHECKS:
        return True
    from .rules import RULES  # the rules' module imports this one
    from . import contracts  # noqa: F401  (rules defined by contracts register when they load)

    return code in RULES


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
    axis_types: str = "auto"
    """The mesh's axis types for this function: ``'auto'`` (the course's default) or
    ``'explicit'`` (`jax.sharding.AxisType.Explicit`: shardings are part of the types)."""
    inputs: Callable | None = None
    """Optional generator of well-conditioned inputs: ``inputs(case, rng) -> list`` of
    arrays (a tuple of arrays for a `Tree` argument). Default: `make_inputs`'s."""
    baseline: Callable | None = None
    """The plain `jax.jit` version of the same computation (same signature), or another
    reference program (`baseline_label` names it), shown beside the student's in the visible
    check's cost table."""
    cost_case: Case | None = None
    """Where the cost table compares the student's function with `baseline`: usually the
    book's sizes (compiled from abstract inputs, never run)."""
    baseline_label: str = "plain jax.jit"
    """The name the cost table gives `baseline` ("jax.lax's own collective" where the
    baseline is the collective the student builds by hand)."""
    takes_mesh: bool = True
    """False for a single-device function called without ``mesh`` (e.g. problem2's
    ``moe_local(W, A, B)``): its cases use a 1x1 mesh, so every argument sits on one device."""

    def __post_init__(self):
        for rule in self.rules:  # `rule`, `style_rules` and `hints` sort the declared list, not inside combinators
            if any(leaf is not rule and (leaf.reads_lowered or leaf.problem_kind == "hint") for leaf in rule.leaves()):
                raise TypeError(f"{self.name}: declare style rules and hints in Part.rules itself, not inside "
                                f"{type(rule).__name__}")

    @property
    def rule(self):
        """The rules on the compiled program (communication, memory, work), as one: what the
        visible check states as allowed, and what runs after the program ran."""
        from .rules import AllOf

        compiled = tuple(r for r in self.rules if not r.reads_lowered and r.problem_kind != "hint")
        return compiled[0] if len(compiled) == 1 else AllOf(compiled)

    @property
    def hints(self) -> tuple:
        """The advice the contract attaches to wrong values (`assignments.rules.Hint`), in order."""
        return tuple(r for r in self.rules if r.problem_kind == "hint")

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
             for p in c.problems if p.kind == "style"]
    if not shown:
        return cases
    problem, mesh = shown[0]
    carried = CHECKS["P002"].problem(f"{problem.message} (seen on the {'x'.join(map(str, mesh))} mesh: a mesh "
                                     f"with a one-device axis cannot show it)")
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
    return [dataclasses.replace(c, values_ok=False, problems=[CHECKS["P001"].problem(NEEDS_AN_INPUT_CASE)] + c.problems)
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
    problems: list[Problem]
    """What went wrong, each with the rule or check that found it (empty when all is well; a
    hint may follow a failure)."""
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

    @property
    def messages(self) -> list[str]:
        """The problems' messages, in order."""
        return [p.message for p in self.problems]

    @classmethod
    def failed(cls, case: Case, problem: Problem) -> "CaseResult":
        """A case that never got a result: `problem` says why (a check of kind "run")."""
        return cls(case, False, False, [problem], ran=False)
