"""Visible checks: instant, friendly, advisory feedback in the student's notebook.

`check(fn)` runs one small case of the graded function `fn` on one mesh, with the same
judging as the hidden graders (`assignments.evaluate`), and shows the communication
the function compiles to. Passing means "probably right"; the hidden graders decide,
on many meshes and shapes.
"""
from __future__ import annotations

import dataclasses
import functools
import os
import re
import traceback

import jax
from rich.panel import Panel
from rich.text import Text

from .contract import CHECKS, Assignment, Case, CaseResult, Part, Problem, arg_leaves, case_inputs
from .contracts import find_part
from .devices import setup_devices
from .diagnosis import exception_hint, not_implemented_message
from .display import communication_table, console
from .evaluate import eager_report, evaluate_compiled, evaluate_eager_report, make_mesh, place
from .hlo import ProgramAnalysis

VISIBLE_SEED = 0
_HERE = os.path.dirname(os.path.abspath(__file__))
SETUP_HINT = ("run the notebook's first cell (the set-up) after a kernel restart, then the cell "
              "that defines this function, then this check")


class CheckFailed(AssertionError):
    """A visible check failed: raised after the check's panel is shown, so that the cell
    ends in an error. JupyterLab's Validate button and `nbgrader validate` then report
    the function by name instead of "Success". Shown as these short lines, not a traceback:
    one line per problem, never broken by the kit, so that the browser (or terminal) wraps
    it once, to its own width; the panel above holds the whole text."""

    SHOWN = 90
    """Characters of a problem's first line shown here, cut at a word: a line fits a notebook's
    output area at 1280 px with the file browser open. JupyterLab breaks longer lines anywhere,
    mid-word included (`word-break: break-all`)."""

    def __init__(self, name: str, problems: list[Problem], case: str | None = None):
        self.name, self.problems, self.case = name, list(problems), case
        first = [_first_line(p) for p in self.problems] or ["failed"]
        super().__init__(f"{name}: " + "; ".join(first))

    def _render_traceback_(self) -> list[str]:  # IPython shows this instead of a traceback
        which = f"the visible check of {self.name}" if self.case is None else f"{self.name} at {self.case}"
        lines = [f"CheckFailed: {which} did not pass (details in its panel)"]
        for p in self.problems:
            first = _first_line(p)
            cut = first if len(first) + 2 <= self.SHOWN else first[:self.SHOWN - 4].rsplit(" ", 1)[0] + " \u2026"
            lines.append(("\u2192 " if p.kind == "hint" else "\u2717 ") + cut)  # a hint is no failure
        return lines


def _first_line(problem: Problem) -> str:
    """A problem's first line, led by the id of its rule (`explain("C001")` explains it)."""
    return f"{problem.rule} {(problem.message.splitlines() or [''])[0]}"


def _marked(problem: Problem) -> str:
    """A problem as the panel lists it: a failure crossed, a hint (advice, never a failure) marked as one."""
    return ("\u2192 hint " if problem.kind == "hint" else "\u2717 ") + f"{problem.rule} {problem.message}"


@dataclasses.dataclass
class CheckResult:
    """The outcome of one visible check."""

    part: Part
    """The graded function's contract."""
    result: CaseResult
    """The verdict on the visible case (its problems include those of the second mesh)."""
    second: CaseResult | None = None
    """The verdict on a second, differently shaped mesh (None when not tried)."""
    shown: bool = False
    """Whether the panel was already displayed (a notebook then shows nothing more)."""
    chosen: bool = False
    """Run at a case the student named (`check(..., case=...)`), not the visible one."""

    @property
    def passed(self) -> bool:
        return self.result.passed and (self.second is None or self.second.passed)

    @property
    def problems(self) -> list[Problem]:
        return list(self.result.problems) + list(self.second.problems if self.second else [])

    @property
    def messages(self) -> list[str]:
        """The problems' messages, in order."""
        return [p.message for p in self.problems]

    def __repr__(self) -> str:
        verdict = "passed" if self.passed else "failed"
        return f"<{self.name}: {verdict}>"

    @property
    def name(self) -> str:
        """What was checked: "visible check of roll_diff", or "roll_diff at <case>" for a case
        the student named."""
        return f"{self.part.name} at {self.result.case.label}" if self.chosen else f"visible check of {self.part.name}"

    def _ipython_display_(self) -> None:  # the last line of a cell: show the panel once
        if not self.shown:
            render(self)


def _cell_name(filename: str) -> str:
    """'Cell In[7]' for a notebook cell's code, else the file's name."""
    try:
        from IPython import get_ipython

        shell = get_ipython()
        number = shell.compile._filename_map.get(filename) if shell is not None else None
        if number is not None:
            return f"Cell In[{number}]"
    except Exception:
        pass
    return os.path.basename(filename)


def _user_frame(exc: BaseException) -> str:
    """Where in the student's code the exception came from: the deepest frame that is
    neither JAX, nor a library, nor this kit (notebook cells included)."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__)
              if "site-packages" not in f.filename and "dist-packages" not in f.filename
              and not f.filename.startswith(_HERE) and not f.filename.startswith("<frozen")
              and "/lib/python3" not in f.filename]
    if not frames:
        return ""
    f = frames[-1]
    code = f.line.strip() if f.line else ""
    return f" (in {f.name}, {_cell_name(f.filename)}, line {f.lineno}: {code})"


def _explain(e: BaseException) -> str:
    """The exception's whole message (JAX explains after the first line), without the
    note JAX appends about its filtered frames."""
    text = str(e).strip()
    text = re.split(r"\n-{10,}\nFor simplicity, JAX has removed", text)[0].rstrip() + exception_hint(e)
    if isinstance(e, NameError):
        text += (f". Hint: if the set-up cell defines this name (jax, jnp, P, NamedSharding, ...), "
                 f"{SETUP_HINT}.")
    return text


def _divides(spec: Part, case: Case) -> bool:
    """Whether every argument's sharded dimensions divide evenly on the case's mesh."""
    try:
        for arg in spec.args:
            for leaf in arg_leaves(arg):
                if any(dim % split for dim, split in zip(leaf.shape(case), leaf.splits(case))):
                    return False
    except Exception:
        return False
    return True


def second_case(spec: Part, case: Case) -> Case | None:
    """A cheap second configuration on a mesh of another shape (4x2 for 2x4), so sizes
    hard-coded for the first mesh fail here, before the hidden graders see them."""
    nX, nY = case.mesh
    if nX * nY == 1:
        return None
    for mesh in ((nY, nX), (1, nX * nY), (nX * nY, 1)):
        if mesh != tuple(case.mesh):
            other = dataclasses.replace(case, mesh=mesh)
            if _divides(spec, other):
                return other
    return None


def _run_case(fn, assignment: Assignment, spec: Part, case: Case) -> CaseResult:
    setup_devices(max(8, case.mesh[0] * case.mesh[1]))
    mesh = make_mesh(case.mesh, spec.axis_types)
    arrays = case_inputs(assignment, spec, case, VISIBLE_SEED)
    try:
        if spec.eager:  # judged on the concrete result, as the graders do
            described = eager_report(fn, mesh, dict(case.statics), arrays)
            return evaluate_eager_report(spec, case, mesh, described, arrays)
        jitted = jax.jit(functools.partial(fn, **spec.call_kwargs(mesh, case.statics)))
        lowered = jitted.lower(*place(arrays, spec, mesh))
        compiled = lowered.compile()
        return evaluate_compiled(spec, case, mesh, compiled, lowered.as_text(), arrays)
    except NotImplementedError as e:
        return CaseResult.failed(case, CHECKS["E001"].problem(not_implemented_message(e, spec.name)))
    except Exception as e:
        return CaseResult.failed(case, CHECKS["E002"].problem(
            f"raised {type(e).__name__} while tracing or compiling{_user_frame(e)}: {_explain(e)}"))


def parse_case(spec: Part, label: str) -> Case:
    """The case a label names, as the graders' messages print it ('mesh 1x3, S=7, D=9,
    shift=-15'): the mesh, then the sizes and the function's statics by name."""
    example = spec.visible_case.label
    fields = [f.strip() for f in str(label).split(",")]
    mesh = re.fullmatch(r"mesh ([1-9]\d*)x([1-9]\d*)", fields[0])
    pairs = [re.fullmatch(r"(\w+)\s*=\s*(-?\d+(?:\.\d*)?(?:e[-+]?\d+)?)", f) for f in fields[1:]]
    if mesh is None or not all(pairs):
        raise ValueError(f"check() could not read the case {label!r}: write it as the graders print "
                         f"it, e.g. case={example!r}")
    values = {m.group(1): float(m.group(2)) if re.search("[.e]", m.group(2)) else int(m.group(2)) for m in pairs}
    sizes = {k: v for k, v in values.items() if k not in spec.statics}
    case = Case((int(mesh.group(1)), int(mesh.group(2))), sizes,
                {k: v for k, v in values.items() if k in spec.statics})
    missing = sorted((set(spec.visible_case.sizes) | set(spec.statics)) - set(values))
    if missing:
        raise ValueError(f"check() needs {', '.join(missing)} in the case {label!r}, e.g. case={example!r}")
    if not all(isinstance(v, int) and v >= 1 for v in sizes.values()):
        raise ValueError(f"the sizes in the case {label!r} must be whole numbers of at least 1")
    if not _divides(spec, case):
        raise ValueError(f"the case {label!r} does not divide evenly: each sharded size must be a "
                         f"multiple of the mesh axes it is split over")
    return case


def check(fn, *, part: str | None = None, show: bool = True, raises: bool = True,
          case: str | None = None) -> CheckResult:
    """Run the visible check of a graded function and show what it communicates.

    It runs the contract's small visible case (a 2x4 mesh), then, if that passes, the
    same sizes on a mesh of another shape. With `raises` (the default) a failed check
    ends in `CheckFailed` after its panel is shown, so the cell is marked failed and
    nbgrader's Validate names the function. `part` names the contract's function when
    `fn` was given another name. `case` runs one other case instead, named as the graders'
    feedback names a case (``case='mesh 1x3, S=7, D=9, shift=-15'``), on inputs of the
    check's own: a hidden case's mesh, sizes and statics, with values you can see.
    """
    name = part or getattr(fn, "__name__", "")
    try:
        assignment, spec = find_part(name)
    except KeyError:
        raise ValueError(
            f"check() could not tell which exercise {name!r} is: name your function as the "
            f"problem says, or pass part='<function name>'.") from None
    first = spec.visible_case if case is None else parse_case(spec, case)
    result = _run_case(fn, assignment, spec, first)
    second = None
    if case is None and result.passed and (other := second_case(spec, spec.visible_case)) is not None:
        second = _run_case(fn, assignment, spec, other)
        if not second.passed:
            second.problems[:] = [dataclasses.replace(p, message=f"on mesh {other.mesh[0]}x{other.mesh[1]} "
                                                                 f"(sizes as above), {p.message}")
                                  for p in second.problems]
            second.problems.append(CHECKS["H003"].problem(
                f"it passes on mesh {spec.visible_case.mesh[0]}x{spec.visible_case.mesh[1]} but not on "
                f"{other.mesh[0]}x{other.mesh[1]}: read sizes from mesh.shape['X'], mesh.shape['Y'] "
                f"and the arrays' shapes instead of writing them in"))
    outcome = CheckResult(spec, result, second, chosen=case is not None)
    if show:
        render(outcome)
        outcome.shown = True
        if case is None and spec.baseline is not None and spec.cost_case is not None and result.analysis is not None:
            show_cost_comparison(spec, fn)
    if raises and not outcome.passed:
        raise CheckFailed(spec.name, outcome.problems, case=first.label if case is not None else None)
    return outcome


def compile_abstract(fn, part: Part, case, mesh):
    """Compile `fn` for a case from abstract inputs (shapes and shardings only: nothing runs)."""
    from jax.sharding import NamedSharding

    specs = [jax.ShapeDtypeStruct(a.shape(case), a.dtype, sharding=NamedSharding(mesh, a.partition_spec))
             for a in part.args]
    return jax.jit(functools.partial(fn, **part.call_kwargs(mesh, case.statics))).lower(*specs).compile()


def show_cost_comparison(spec: Part, fn, chip: str = "TPU v5e") -> dict:
    """Your function beside the contract's baseline (plain jax.jit, or what `baseline_label`
    names) at the contract's cost case, priced on `chip`."""
    from .costs import comparison_table
    from .hlo import analyze

    case = spec.cost_case
    mesh = make_mesh(case.mesh)
    programs = {}
    for name, f in ((spec.name, fn), (spec.baseline_label, spec.baseline)):
        try:
            programs[name] = analyze(compile_abstract(f, spec, case, mesh), mesh)
        except Exception as e:  # the student's function may not scale: say so, keep going
            console.print(Text(f"could not compile {name} at {case.label}: {type(e).__name__}"
                               f"{_user_frame(e)}: {_explain(e)}", style="yellow"))
    if programs:
        from .schedule import draw_schedule

        console.print(comparison_table(programs, on=chip, title=f"estimated on {chip} at {case.label} "
                                                            f"(the book's model, not a measurement)"))
        console.print(draw_schedule(programs, chip, compact=True, title=f"step by step at {case.label}"))
    return programs


def _rule_label(rule) -> str:
    """"rule" for a rule that also limits memory (a value's size), whose text is not all about
    communication; "allowed communication" otherwise."""
    pending = [rule]
    while pending:
        r = pending.pop()
        if getattr(r, "limits_memory", False):
            return "rule"
        pending += list(getattr(r, "rules", ())) + ([r.rule] if hasattr(r, "rule") else [])
    return "allowed communication"


def render(outcome: CheckResult) -> None:
    spec, result, second = outcome.part, outcome.result, outcome.second
    if result.analysis is not None:
        console.print(communication_table(result.analysis, title=f"{spec.name}: {result.case.label}"))
    if second is not None and not second.passed and second.analysis is not None:
        console.print(communication_table(second.analysis, title=f"{spec.name}: {second.case.label}"))
    lines = Text()
    lines.append(f"{_rule_label(spec.rule)}: {spec.rule.describe()}\n")
    if outcome.passed:
        lines.append("\u2713 values, shape, dtype, sharding and communication all as expected", style="green")
        if second is not None:
            lines.append(f" on mesh {result.case.mesh[0]}x{result.case.mesh[1]} and "
                         f"{second.case.mesh[0]}x{second.case.mesh[1]}", style="green")
        lines.append("\nRight on these inputs; the hidden inputs of this case differ (a result can "
                     "depend on them, as a routing can)." if outcome.chosen else
                     "\nProbably right: the hidden graders try many more meshes and shapes.", style="dim")
    else:
        lines.append("\n".join(map(_marked, outcome.problems)), style="red")
    title = (f"{spec.name} at {result.case.label}: " if outcome.chosen else f"visible check: {spec.name} ") + (
        "[green]passed[/green]" if outcome.passed else "[red]failed[/red]")
    console.print(Panel(lines, title=title, title_align="left"))


@dataclasses.dataclass(frozen=True, repr=False)
class ShownAnalysis(ProgramAnalysis):
    """A `ProgramAnalysis` whose table `report` already showed: as a cell's last value it
    adds nothing (no repr line under the table)."""

    def _ipython_display_(self) -> None:
        pass


class ShownAnalyses(dict):
    """{name: ProgramAnalysis} whose table `compare` already showed (no dict repr under it)."""

    def _ipython_display_(self) -> None:
        pass


def _shown(analysis: ProgramAnalysis) -> ShownAnalysis:
    return ShownAnalysis(**{f.name: getattr(analysis, f.name) for f in dataclasses.fields(analysis)})


def _mesh_of(args, caller: str):
    """The mesh of the first argument that carries a NamedSharding."""
    mesh = next((a.sharding.mesh for a in args if hasattr(getattr(a, "sharding", None), "mesh")), None)
    if mesh is None:
        raise ValueError(f"{caller}() reads the mesh from its arguments: place at least one with "
                         f"jax.device_put(x, NamedSharding(mesh, P(...))), or give a "
                         f"jax.ShapeDtypeStruct a sharding.")
    return mesh


def report(fn, *args, title: str | None = None, **kwargs):
    """Compile `jax.jit(fn)(*args, **kwargs)` and show the communication it compiles to.

    The arrays in `args` carry their shardings (place them with `jax.device_put`);
    the mesh is read from them. Returns the `ProgramAnalysis`.
    """
    from .hlo import analyze
    from .schedule import draw_schedule

    mesh = _mesh_of(args, "report")
    analysis = analyze(jax.jit(functools.partial(fn, **kwargs)).lower(*args).compile(), mesh)
    name = title or getattr(fn, "__name__", "program")
    console.print(communication_table(analysis, title=name))
    if analysis.collectives:  # where it moves data, step by step (one loop iteration for all)
        console.print(draw_schedule({name: analysis}, compact=True))
    return _shown(analysis)


def compare(programs: dict, *args, chip: str = "TPU v5e", title: str | None = None, **kwargs) -> dict:
    """Compile each `jax.jit(fn)(*args, **kwargs)` and show them side by side, priced on `chip`.

    `args` may be arrays or `jax.ShapeDtypeStruct`s carrying shardings (nothing runs, so
    large shapes cost only compile time). Returns {name: ProgramAnalysis}.
    """
    from .costs import comparison_table

    analyses = compile_programs(programs, args, kwargs, "compare")
    console.print(comparison_table(analyses, on=chip, title=title))
    return ShownAnalyses(analyses)


def compile_programs(programs: dict, args, kwargs: dict, caller: str) -> dict[str, ProgramAnalysis]:
    """{name: the analysis of `jax.jit(fn)(*args, **kwargs)`}, on the mesh of the arguments."""
    from .hlo import analyze

    mesh = _mesh_of(args, caller)
    return {name: analyze(jax.jit(functools.partial(fn, **kwargs)).lower(*args).compile(), mesh)
            for name, fn in programs.items()}


def is_implemented(fn, *args, **kwargs) -> bool:
    """Whether `fn(*args, **kwargs)` traces without `NotImplementedError` (nothing runs;
    args may be `jax.ShapeDtypeStruct`s). Worked examples use it to wait for your code."""
    try:
        jax.eval_shape(functools.partial(fn, **kwargs), *args)
    except NotImplementedError:
        print(f"({getattr(fn, '__name__', 'this function')} is not implemented yet: "
              f"this cell will show it once it is)")
        return False
    return True
