"""The export worker: run a submission, export each graded function as an artifact.

Started by the graders in their sandbox (`graders.sandbox`), never imported by them. It
reads its request (the submission's text and the cases) on stdin, executes the student's
notebook or module, then for each requested case traces the function with abstract inputs
(`jax.ShapeDtypeStruct` carrying the sharding) and serializes it with `jax.export`. It never
sees a hidden input value: a part graded eagerly (called on concrete arrays) gets inputs
drawn from a public seed, which hide nothing. Each result goes to the parent as one JSON
line on stdout (`graders.sandboxed.protocol`), artifact bytes included, so a parent that has
to kill this process loses nothing already done.
"""
from __future__ import annotations

import contextlib
import functools
import importlib.abc
import inspect
import io
import json
import linecache
import os
import re
import signal
import sys
import traceback

from assignments.diagnosis import exception_hint, not_implemented_message

from .protocol import TRACING_ERROR, decode_tree, encode_array, encode_bytes, event_channel, read_request

BLOCKED_MODULES = ("graders", "solutions")
"""Packages a submission may not import (in the sandbox they are not there at all; this
also holds when grading runs without one). `graders.sandboxed`, this worker's own package,
is the exception (its modules are loaded before the submission runs)."""


def _blocked(name: str) -> bool:
    return (name.split(".")[0] in BLOCKED_MODULES and name != __package__
            and not name.startswith(__package__ + "."))


class _BlockHiddenModules(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if _blocked(name):
            raise ImportError(f"{name!r} is not available to submissions")
        return None


class CaseTimeout(Exception):
    pass


@contextlib.contextmanager
def time_limit(seconds: float):
    """Raise CaseTimeout in this thread after `seconds` (Python code only; the parent
    kills the process for anything that hangs outside Python)."""

    def on_alarm(signum, frame):
        raise CaseTimeout(f"took longer than {seconds:g} s")

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def _where(exc: BaseException) -> str:
    """The submission's own frame an exception came from, e.g. ' (cell 4, line 3)'."""
    for frame in reversed(traceback.extract_tb(exc.__traceback__)):
        if frame.filename.startswith("<cell") or frame.filename.startswith("<submission"):
            where = frame.filename.strip("<>")
            return f" ({where}, line {frame.lineno}: {(frame.line or '').strip()[:120]})"
    return ""


def describe_exception(exc: BaseException) -> str:
    first = str(exc).strip().splitlines()[0][:400] if str(exc).strip() else ""
    return f"{type(exc).__name__}{_where(exc)}: {first}" if first else f"{type(exc).__name__}{_where(exc)}"


_MAGIC = re.compile(r"^\s*[%!]")


def code_cells(notebook: dict, setup_cells: dict[str, str]) -> list[tuple[int, str]]:
    """The notebook's code cells to run, numbered from 1, without test cells or magics.

    nbgrader test cells (graded, not solution) hold the visible checks and the hidden
    grader markers; the graders judge the functions themselves, so those are skipped, and
    so are the instructor's locked worked examples (slow, and not part of the answer).
    Setup cells (grade_id 'setup' or 'setup_...'), solution cells and any cell the
    student added are run, in order; a locked set-up cell the course released runs as
    released (`setup_cells`, by grade_id), whatever the student's copy holds, as nbgrader's
    autograde restores locked cells.
    """
    cells = []
    for number, cell in enumerate(notebook.get("cells", []), start=1):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        meta = cell.get("metadata", {})
        meta = meta.get("nbgrader", {}) if isinstance(meta, dict) else {}
        meta = meta if isinstance(meta, dict) else {}
        if meta.get("grade") and not meta.get("solution"):
            continue
        if meta.get("locked") and not str(meta.get("grade_id", "")).startswith("setup"):
            continue  # the instructor's worked examples: graded functions may not rely on them
        source = cell.get("source", "")
        source = "".join(map(str, source)) if isinstance(source, list) else str(source)
        if meta.get("locked"):
            source = setup_cells.get(str(meta.get("grade_id")), source)
        source = "\n".join("# " + line if _MAGIC.match(line) else line for line in source.splitlines())
        cells.append((number, source))
    return cells


def load_submission(name: str, text: str, cell_timeout: float, after_cell=lambda: None,
                    setup_cells: dict[str, str] | None = None) -> tuple[dict, list[str]]:
    """Execute a submission (`text` of the file called `name`); return its namespace and the
    problems met on the way. `after_cell()` is called after each cell (progress);
    `setup_cells`: the released set-up cells (see `code_cells`)."""
    namespace: dict = {"__name__": "submission"}
    problems: list[str] = []
    if name.endswith(".ipynb"):
        try:
            notebook = json.loads(text)
            if not isinstance(notebook, dict) or not isinstance(notebook.get("cells"), list):
                raise ValueError("it has no 'cells' list")
            chunks = [(f"<cell {n}>", src) for n, src in code_cells(notebook, setup_cells or {})]
        except (ValueError, TypeError, AttributeError, RecursionError) as e:  # RecursionError: JSON nested too deep
            raise SubmissionUnreadable(
                f"the notebook file is not a valid notebook ({str(e)[:200]}); open it in "
                f"JupyterLab, save it again and resubmit") from None
    else:
        chunks = [("<submission>", text)]
    for filename, source in chunks:
        after_cell()
        # Let tracebacks quote the submission's own lines.
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        try:
            code = compile(source, filename, "exec")
        except SyntaxError as e:
            where = f" at line {e.lineno}" if e.lineno else ""
            problems.append(f"{filename.strip('<>')} has a syntax error{where}: {e.msg}; "
                            f"it was skipped")
            continue
        except ValueError as e:  # Python 3.11: null bytes (a binary file saved as .py)
            problems.append(f"{filename.strip('<>')} is not Python source ({e}); it was skipped")
            continue
        except (RecursionError, MemoryError):  # nested too deeply for the compiler
            problems.append(f"{filename.strip('<>')} is nested too deeply for Python to compile; it was skipped")
            continue
        try:
            with time_limit(cell_timeout):
                exec(code, namespace)
        except CaseTimeout:
            problems.append(f"{filename.strip('<>')} ran longer than {cell_timeout:g} s and was "
                            f"stopped (an infinite loop?)")
        except BaseException as e:  # SystemExit and KeyboardInterrupt from student code too
            problems.append(f"{filename.strip('<>')} raised {describe_exception(e)}")
    return namespace, problems


class SubmissionUnreadable(Exception):
    pass


def signature_problem(fn, part: dict) -> str | None:
    args = [None] * part["num_args"]
    statics = {name: None for name in part["statics"]}
    if part.get("takes_mesh", True):
        statics["mesh"] = None
    try:
        inspect.signature(fn).bind(*args, **statics)
    except TypeError:
        pass
    except ValueError:
        return None  # no signature to read (a builtin or a jax transform): try it
    else:
        return None
    try:
        have = str(inspect.signature(fn))
    except (TypeError, ValueError):
        have = "(?)"
    return f"wrong signature: expected {part['signature']}, but {part['name']}{have} cannot be called that way"


class Exporter:
    """Traces and serializes one case. It holds its own references to the JAX functions it
    needs, taken before any student code runs, so a submission that reassigns `jax.jit` or
    `jax.export` in a cell does not change how it is exported."""

    def __init__(self):
        import jax
        from jax.sharding import AxisType, NamedSharding, PartitionSpec

        self.jit, self.export, self.make_mesh = jax.jit, jax.export.export, jax.make_mesh
        self.sds, self.named, self.spec = jax.ShapeDtypeStruct, NamedSharding, PartitionSpec
        self.auto = AxisType.Auto
        self.axis_types = {"auto": AxisType.Auto, "explicit": AxisType.Explicit}

    def mesh(self, case: dict):
        kind = self.axis_types[case.get("axis_types", "auto")]
        from assignments.contract import MESH_AXES

        return self.make_mesh(tuple(case["mesh"]), MESH_AXES, axis_types=(kind, kind))

    def abstract(self, mesh, arg: dict):
        """The abstract input of one argument: a ShapeDtypeStruct carrying its sharding, or a
        tuple of them for a pytree argument (``{"tree": [...]}``)."""
        if "tree" in arg:
            return tuple(self.abstract(mesh, item) for item in arg["tree"])
        spec = self.spec(*[tuple(e) if isinstance(e, list) else e for e in arg["spec"]])
        return self.sds(tuple(arg["shape"]), arg["dtype"], sharding=self.named(mesh, spec))

    def eager_report(self, fn, case: dict, inputs: list) -> dict:
        """Call `fn` eagerly on `inputs` and describe what it returned (the shards of its
        result, for the judge to check against the inputs)."""
        from assignments.evaluate import eager_report

        return eager_report(fn, self.mesh(case), case["statics"], inputs)

    def __call__(self, fn, case: dict) -> bytes:
        mesh = self.mesh(case)
        specs = [self.abstract(mesh, a) for a in case["args"]]
        keywords = {"mesh": mesh} if case.get("takes_mesh", True) else {}
        return bytes(self.export(self.jit(canonical_program(fn, keywords | case["statics"])))(*specs).serialize())


def canonical_program(fn, keywords: dict):
    """`fn` with its keyword arguments bound, as a function of `*args` named `program`: the
    exported program then records neither the student's function name nor argument names.
    With `jax_traceback_in_locations_limit` at 0 (set in `main`) it records no source file or
    line either, so the same function gives the same artifact bytes whatever cell, line, file
    or names it came from, and the verdict cache (keyed by those bytes) serves a whole class.
    The operations keep their names, so the compiled program is the same, names included."""
    bound = functools.partial(fn, **keywords)

    def program(*args):
        return bound(*args)

    return program


def _not_implemented_message(exc: NotImplementedError, part: dict) -> str:
    """The student's own `raise NotImplementedError()` means an unfinished function; one
    raised by JAX (e.g. `jax.export` refusing a host callback) is a different fault."""
    frames = traceback.extract_tb(exc.__traceback__)
    if frames and frames[-1].filename.startswith(("<cell", "<submission")):
        return not_implemented_message(exc, part["name"], "not implemented (the function raises NotImplementedError)")
    return (f"jax.export could not serialize {part['name']}: {describe_exception(exc)}. Graded "
            f"functions must be pure JAX: host callbacks (jax.pure_callback, io_callback, "
            f"jax.debug.print) cannot be exported; remove them")


def export_one(export_case: Exporter, fn, part: dict, case: dict, timeout: float) -> dict:
    """Trace and export (or, for an eager part, call) one case; the event's fields."""
    try:
        with time_limit(timeout):
            if part.get("eager"):
                report = export_case.eager_report(fn, case, [decode_tree(x) for x in case["inputs"]])
                for shard in report.get("shards", []):
                    shard["data"] = encode_array(shard["data"])
                return {"status": "ok", "report": report}
            return {"status": "ok", "artifact": encode_bytes(export_case(fn, case))}
    except NotImplementedError as e:  # the student's own: not implemented yet (E001)
        message = _not_implemented_message(e, part)
        return {"status": "error", "message": message,
                "rule": "E002" if message.startswith("jax.export could not serialize") else "E001"}
    except CaseTimeout as e:
        return {"status": "error", "timed_out": True,
                "message": f"tracing {part['name']} {e}: an infinite loop, or Python work that "
                           f"grows with the input? Keep loops over array values in JAX"}
    except BaseException as e:
        return {"status": "error", "while_tracing": True,
                "message": f"{TRACING_ERROR}{describe_exception(e)}{exception_hint(e)}"}


def export_part(export_case: Exporter, namespace: dict, part: dict, done: set, timeout: float,
                emit, max_strikes: int = 2) -> None:
    """Every requested case of one graded function."""
    fn = namespace.get(part["name"])
    problem = None
    if fn is None or not callable(fn):
        why = "is not callable" if fn is not None else "was not defined"
        problem = f"function {part['name']} {why}; define it as {part['signature']}"
    else:
        problem = signature_problem(fn, part)
    rule = "E001" if problem else "E002"
    timeouts, exported = 0, {}
    for case in part["cases"]:
        if case["id"] in done:
            continue
        if problem or timeouts >= max_strikes:
            message = problem or (f"not traced: {max_strikes} earlier cases of {part['name']} "
                                  f"timed out")
            emit(event="case", id=case["id"], status="error", message=message, rule=rule)
            continue
        emit(event="start", id=case["id"])
        # Cases that differ only in their input values (problem2's routings) have the same
        # abstract inputs, so the same program: traced once, its artifact sent for each.
        signature = None if part.get("eager") else json.dumps(
            {k: v for k, v in case.items() if k != "id"}, sort_keys=True)
        fields = exported.get(signature) or export_one(export_case, fn, part, case, timeout)
        if signature is not None and fields["status"] == "ok":
            exported[signature] = fields
        timeouts += bool(fields.get("timed_out"))
        emit(event="case", id=case["id"], **fields)


def main() -> int:
    # Events go to the parent on the original stdout; everything else written to fd 1 or 2
    # (student prints, C-level output) goes nowhere.
    emit = event_channel(silence=(1, 2))
    sys.meta_path.insert(0, _BlockHiddenModules())
    for name in [n for n in sys.modules if _blocked(n)]:
        del sys.modules[name]

    import time

    from assignments.devices import setup_devices

    # JAX and its devices start before the request is read: the grader starts this worker
    # before it knows the submission, and the start-up overlaps its own.
    setup_devices()  # the runtime's device count (assignments.devices.DEFAULT_DEVICES)
    import jax

    jax.config.update("jax_traceback_in_locations_limit", 0)  # see canonical_program
    export_case = Exporter()
    request = read_request(sys.stdin.readline(), "export")
    setup_devices(request["devices"])  # no more than JAX has: a mismatched kit fails here, saying so
    jax_ready = time.perf_counter()
    # Python-level output too (student code may hold sys.stdout).
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        try:
            namespace, problems = load_submission(
                request["submission_name"], request["submission_text"], request["cell_timeout"],
                after_cell=lambda: emit(event="progress"), setup_cells=request.get("setup_cells", {}))
        except SubmissionUnreadable as e:
            emit(event="loaded", problems=[str(e)], run_submission_s=0.0)
            for part in request["parts"]:
                for case in part["cases"]:
                    emit(event="case", id=case["id"], status="error", message=str(e), rule="E004")
            emit(event="finished", timings={})
            return 0
        loaded = time.perf_counter()
        emit(event="loaded", problems=problems, run_submission_s=loaded - jax_ready)
        done = set(request.get("skip", []))
        for part in request["parts"]:
            export_part(export_case, namespace, part, done, request["case_timeout"], emit,
                        request["max_strikes"])
    emit(event="finished", timings={"export: trace and export": time.perf_counter() - loaded})
    os._exit(0)  # every event is flushed: skip the interpreter's teardown (0.1-0.3 s with JAX loaded)


if __name__ == "__main__":
    sys.exit(main())
