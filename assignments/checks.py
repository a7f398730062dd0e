"""Visible checks: instant, friendly, advisory feedback in the student's notebook.

`check(fn)` runs one small case of the graded function `fn` on one mesh, with the same
judging as the hidden graders (`assignments.evaluate`), and shows the communication
the function compiles to. Passing means "probably right"; the hidden graders decide,
on many meshes and shapes.
"""
from __future__ import annotations

import dataclasses
import functools
import traceback

import jax
from rich.panel import Panel
from rich.text import Text

from .contract import Part, case_request
from .contracts import find_part
from .devices import setup_devices
from .display import communication_table, console
from .evaluate import CaseResult, evaluate_compiled, evaluate_eager_report, make_inputs, make_mesh, place

VISIBLE_SEED = 0


@dataclasses.dataclass
class CheckResult:
    """The outcome of one visible check."""

    part: Part
    result: CaseResult

    @property
    def passed(self) -> bool:
        return self.result.passed

    def __repr__(self) -> str:
        verdict = "passed" if self.passed else "failed"
        return f"<visible check of {self.part.name}: {verdict}>"


def _user_frame(exc: BaseException) -> str:
    """Where in the student's code the exception came from (notebook cells included)."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__)
              if "site-packages" not in f.filename and "/assignments/" not in f.filename]
    if not frames:
        return ""
    f = frames[-1]
    return f" (in {f.name}, line {f.lineno}: {f.line.strip() if f.line else ''})"


def check(fn, *, part: str | None = None, show: bool = True) -> CheckResult:
    """Run the visible check of a graded function and show what it communicates.

    `part` names the contract's function when `fn` was given another name.
    """
    name = part or getattr(fn, "__name__", "")
    try:
        _, spec = find_part(name)
    except KeyError:
        raise ValueError(
            f"check() could not tell which exercise {name!r} is: name your function as the "
            f"problem says, or pass part='<function name>'.") from None
    case = spec.visible_case
    setup_devices(max(8, case.mesh[0] * case.mesh[1]))
    mesh = make_mesh(case.mesh)
    arrays = make_inputs(spec, case, VISIBLE_SEED)
    try:
        if spec.eager:  # judged on the concrete result, as the graders do
            from .export_worker import Exporter

            described = Exporter().eager_report(fn, case_request(spec, case, spec.name))
            result = evaluate_eager_report(spec, case, mesh, described)
        else:
            jitted = jax.jit(functools.partial(fn, mesh=mesh, **case.statics))
            lowered = jitted.lower(*place(arrays, spec, mesh))
            compiled = lowered.compile()
            result = evaluate_compiled(spec, case, mesh, compiled, lowered.as_text(), arrays)
    except NotImplementedError:
        result = CaseResult.failed(case, "not implemented yet: replace `raise NotImplementedError()` with your code")
    except Exception as e:
        result = CaseResult.failed(
            case, f"raised {type(e).__name__} while tracing or compiling{_user_frame(e)}: "
                  f"{str(e).splitlines()[0][:400] if str(e) else ''}")
    outcome = CheckResult(spec, result)
    if show:
        render(outcome)
    return outcome


def render(outcome: CheckResult) -> None:
    spec, result = outcome.part, outcome.result
    if result.analysis is not None:
        console.print(communication_table(result.analysis, title=f"{spec.name}: {result.case.label}"))
    lines = Text()
    lines.append(f"allowed communication: {spec.rule.describe()}\n")
    if result.passed:
        lines.append("✓ values, shape, dtype, sharding and communication all as expected\n", style="green")
        lines.append("Probably right: the hidden graders try many more meshes and shapes.", style="dim")
    else:
        for p in result.problems:
            lines.append(f"✗ {p}\n", style="red")
    title = f"visible check: {spec.name} " + ("[green]passed[/green]" if result.passed else "[red]failed[/red]")
    console.print(Panel(lines, title=title, title_align="left"))


def report(fn, *args, title: str | None = None, **kwargs):
    """Compile `jax.jit(fn)(*args, **kwargs)` and show the communication it compiles to.

    The arrays in `args` carry their shardings (place them with `jax.device_put`);
    the mesh is read from them. Returns the `ProgramAnalysis`.
    """
    from .hlo import analyze

    compiled = jax.jit(functools.partial(fn, **kwargs)).lower(*args).compile()
    mesh = next((a.sharding.mesh for a in args if hasattr(getattr(a, "sharding", None), "mesh")), None)
    if mesh is None:
        raise ValueError("report() reads the mesh from its array arguments: place at least one "
                         "with jax.device_put(x, NamedSharding(mesh, P(...))) first.")
    analysis = analyze(compiled, mesh)
    console.print(communication_table(analysis, title=title or getattr(fn, "__name__", "program")))
    return analysis
