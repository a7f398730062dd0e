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
    mesh = make_mesh(case.mesh, spec.axis_types)
    arrays = make_inputs(spec, case, VISIBLE_SEED)
    try:
        if spec.eager:  # judged on the concrete result, as the graders do
            from .export_worker import Exporter

            described = Exporter().eager_report(fn, case_request(spec, case, spec.name))
            result = evaluate_eager_report(spec, case, mesh, described)
        else:
            jitted = jax.jit(functools.partial(fn, **spec.call_kwargs(mesh, case.statics)))
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
        if spec.baseline is not None and spec.cost_case is not None and result.analysis is not None:
            show_cost_comparison(spec, fn)
    return outcome


def compile_abstract(fn, part: Part, case, mesh):
    """Compile `fn` for a case from abstract inputs (shapes and shardings only: nothing runs)."""
    from jax.sharding import NamedSharding

    specs = [jax.ShapeDtypeStruct(a.shape(case), a.dtype, sharding=NamedSharding(mesh, a.partition_spec))
             for a in part.args]
    return jax.jit(functools.partial(fn, **part.call_kwargs(mesh, case.statics))).lower(*specs).compile()


def show_cost_comparison(spec: Part, fn, chip: str = "TPU v5e") -> dict:
    """Your function beside plain jax.jit at the contract's cost case, priced on `chip`."""
    from .costs import comparison_table
    from .hlo import analyze

    case = spec.cost_case
    mesh = make_mesh(case.mesh)
    programs = {}
    for name, f in ((spec.name, fn), ("plain jax.jit", spec.baseline)):
        try:
            programs[name] = analyze(compile_abstract(f, spec, case, mesh), mesh)
        except Exception as e:  # the student's function may not scale: say so, keep going
            console.print(f"[yellow]could not compile {name} at {case.label}: {type(e).__name__}: "
                          f"{str(e).splitlines()[0][:200] if str(e) else ''}[/yellow]")
    if programs:
        console.print(comparison_table(programs, on=chip, title=f"estimated on {chip} at {case.label} "
                                                            f"(the book's model, not a measurement)"))
    return programs


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

    mesh = _mesh_of(args, "report")
    analysis = analyze(jax.jit(functools.partial(fn, **kwargs)).lower(*args).compile(), mesh)
    console.print(communication_table(analysis, title=title or getattr(fn, "__name__", "program")))
    return analysis


def compare(programs: dict, *args, chip: str = "TPU v5e", title: str | None = None, **kwargs) -> dict:
    """Compile each `jax.jit(fn)(*args, **kwargs)` and show them side by side, priced on `chip`.

    `args` may be arrays or `jax.ShapeDtypeStruct`s carrying shardings (nothing runs, so
    large shapes cost only compile time). Returns {name: ProgramAnalysis}.
    """
    from .costs import comparison_table
    from .hlo import analyze

    mesh = _mesh_of(args, "compare")
    analyses = {name: analyze(jax.jit(functools.partial(fn, **kwargs)).lower(*args).compile(), mesh)
                for name, fn in programs.items()}
    console.print(comparison_table(analyses, on=chip, title=title))
    return analyses


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
