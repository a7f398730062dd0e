"""Scaffold a new graded function, or a new assignment: the files a maintainer then fills in by
hand, each placeholder marked, nothing that earns a point before it is filled in.

    python -m assignments.scaffold ASSIGNMENT FUNCTION [--points N] [--like FUNCTION]
    python -m assignments.scaffold --assignment NAME [--title TEXT]

A function touches four files, all written here: the contract (a `Part` at the end of the
assignment's parts, and its NumPy reference), the hidden cases (`graders/hidden/<assignment>.py`),
the source notebook (the problem's text, the solution cell, the grade cell that runs the visible
check) and its own test (`tests/test_<assignment>_<function>.py`). `python -m graders.build all`
then regenerates release/ and solutions/ from the notebook. Every placeholder carries the mark
`TODO(scaffold: FUNCTION)`; the new test fails while one is left, and until then the function
earns nothing either: the reference answers 1e30 everywhere and the model solution raises
NotImplementedError. ADDING.md at the repository's root is the guide.

Nothing is overwritten: a function any assignment already grades, a notebook cell or a hidden
case already named after it, an existing test file or an existing assignment stops the scaffold
before it writes anything.
"""
from __future__ import annotations

import argparse
import ast
import hashlib
import json
import keyword
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
"""The kit's root: the scaffold edits the kit it is part of."""

MODEL_ASSIGNMENT = "problem1"
"""The assignment whose notebook metadata (kernel, language_info) and set-up cell a new one copies."""


class ScaffoldError(Exception):
    """Why the scaffold wrote nothing."""


def marker(function: str) -> str:
    """The mark on every placeholder of `function`, in every file the scaffold writes."""
    return f"TODO(scaffold: {function})"


def function_files(assignment: str, function: str) -> dict[str, str]:
    """The four files a new graded function is written in, relative to the kit's root."""
    return {
        "contract": f"assignments/contracts/{assignment}.py",
        "hidden cases": f"graders/hidden/{assignment}.py",
        "source notebook": f"source/{assignment}/{assignment}.ipynb",
        "test": f"tests/test_{assignment}_{function}.py",
    }


def assignment_files(assignment: str) -> dict[str, str]:
    """The four files a new assignment starts with, relative to the kit's root."""
    return {
        "contract": f"assignments/contracts/{assignment}.py",
        "hidden cases": f"graders/hidden/{assignment}.py",
        "source notebook": f"source/{assignment}/{assignment}.ipynb",
        "pytest graders": f"graders/test_{assignment}.py",
    }


def unfilled(assignment: str, function: str, root: str = ROOT) -> list[str]:
    """Every placeholder of `function`, or of its assignment when that was scaffolded too, still
    in their files, as ``path:line: text`` (a cell's number in a notebook); empty once the
    maintainer has filled them all in."""
    marks = (marker(function), marker(assignment))
    left = []
    for role, rel in function_files(assignment, function).items():
        path = os.path.join(root, rel)
        if role == "test" or not os.path.exists(path):
            continue
        if rel.endswith(".ipynb"):
            import nbformat

            cells = nbformat.read(path, as_version=4).cells
            left += [f"{rel}: cell {i}: {line.strip()}" for i, cell in enumerate(cells)
                     for line in cell.source.splitlines() if any(m in line for m in marks)]
        else:
            with open(path) as f:
                left += [f"{rel}:{n}: {line.strip()}" for n, line in enumerate(f, 1) if any(m in line for m in marks)]
    return left


# --- a new graded function ---------------------------------------------------------------------


def add_function(assignment: str, function: str, points: float = 1, like: str | None = None,
                 root: str = ROOT) -> list[str]:
    """Scaffold `function` in `assignment` (see the module's docstring); returns the files
    written, relative to `root`. Its arguments, result, static arguments and visible case start
    as those of the graded function `like` (default: the assignment's last; "none": one array
    A f32[S, D]), so that the assignment's input generator takes them. Raises `ScaffoldError`,
    having written nothing, when the function exists or the assignment does not."""
    _check_name(function, "function")
    if not points > 0:
        raise ScaffoldError(f"--points must be positive, not {points:g}")
    files = function_files(assignment, function)
    missing = [rel for role, rel in files.items() if role != "test" and not os.path.exists(os.path.join(root, rel))]
    if missing:
        raise ScaffoldError(f"no assignment {assignment!r} here ({', '.join(missing)} missing): "
                            f"`python -m assignments.scaffold --assignment {assignment}` starts one")
    graded, template = _read_contracts(root, assignment, like)
    _refuse_existing_function(assignment, function, files, graded, root)

    texts = {rel: _read(root, rel) for role, rel in files.items() if role != "test"}
    new = {
        files["contract"]: _contract_with_part(texts[files["contract"]], function, points, template),
        files["hidden cases"]: _hidden_with_cases(texts[files["hidden cases"]], function),
        files["source notebook"]: _notebook_with_cells(texts[files["source notebook"]], function, points,
                                                       template, graded[assignment]),
        files["test"]: _function_test(assignment, function),
    }
    _write_all(root, new)
    return list(new)


def _check_name(name: str, what: str) -> None:
    if not name.isidentifier() or keyword.iskeyword(name) or not name.isascii():
        raise ScaffoldError(f"{name!r} is not a Python name: a {what} must be one")


def _refuse_existing_function(assignment: str, function: str, files: dict, graded: dict, root: str) -> None:
    """Stop before writing if anything of `function` exists already, saying where."""
    import nbformat

    found = []
    for name, other in graded.items():
        if function in other:
            found.append(f"assignment {name!r} already grades a function {function!r} "
                         f"(assignments/contracts/{name}.py)")
    notebook = nbformat.reads(_read(root, files["source notebook"]), as_version=4)
    ids = {c.metadata.get("nbgrader", {}).get("grade_id") for c in notebook.cells}
    if ids & {function, f"{function}_solution"}:
        found.append(f"{files['source notebook']} already has a cell {function!r} or {function + '_solution'!r}")
    if re.search(rf"['\"]{re.escape(function)}['\"]", _read(root, files["hidden cases"])):
        found.append(f"{files['hidden cases']} already names {function!r}")
    if os.path.exists(os.path.join(root, files["test"])):
        found.append(f"{files['test']} exists")
    if found:
        raise ScaffoldError(f"{function!r} exists already, nothing written: " + "; ".join(found))


_ARRAY = {"dims": ["S", "D"], "spec": ["X", "Y"], "dtype": "float32", "high": None}
GENERIC = {"like": None, "args": [{"name": "A", **_ARRAY}], "result": {"name": "out", **_ARRAY}, "statics": [],
           "takes_mesh": True, "case": {"mesh": [2, 4], "sizes": {"S": 16, "D": 8}, "statics": {}}}
"""The placeholder of a function like no other: one array A f32[S, D] at P('X', 'Y'), the same back."""

READ_CONTRACTS = r"""
import json, sys
from assignments.contract import Tree
from assignments.contracts import ASSIGNMENTS

def arg(a):
    if isinstance(a, Tree):
        return {"tree": a.name, "items": [arg(item) for item in a.items]}
    return {"name": a.name, "dims": list(a.dims), "spec": list(a.spec), "dtype": a.dtype, "high": a.high}

assignment, like = sys.argv[1:]
parts = ASSIGNMENTS[assignment].parts if assignment in ASSIGNMENTS else ()
part = None if like == "none" or not parts else parts[-1] if like == "" else ASSIGNMENTS[assignment].part(like)
template = part and {"like": part.name, "args": [arg(a) for a in part.args], "result": arg(part.result),
                     "statics": list(part.statics), "takes_mesh": part.takes_mesh,
                     "case": {"mesh": list(part.visible_case.mesh), "sizes": dict(part.visible_case.sizes),
                              "statics": dict(part.visible_case.statics)}}
print(json.dumps({"graded": {n: [p.name for p in a.parts] for n, a in ASSIGNMENTS.items()}, "template": template}))
"""
"""Run in the kit at `root`: every assignment's graded functions, and the template's contract, as JSON."""


def _read_contracts(root: str, assignment: str, like: str | None) -> tuple[dict[str, list[str]], dict]:
    """{assignment: its graded functions, in order}, and the new function's starting contract
    (`add_function`), as the contracts at `root` say when imported: in a process of their own,
    since the kit at `root` may not be the one this process imported, and a part's name may come
    from a helper, as problem1's averages' do."""
    import subprocess

    proc = subprocess.run([sys.executable, "-c", READ_CONTRACTS, assignment, like or ""], cwd=root,
                          capture_output=True, text=True)
    if proc.returncode != 0:
        error = proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else f"exit code {proc.returncode}"
        raise ScaffoldError(f"reading the contracts failed, nothing written: {error}")
    read = json.loads(proc.stdout)
    return read["graded"], read["template"] or GENERIC


def _code(value) -> str:
    """A JSON value as Python source: tuples for lists, double-quoted strings."""
    if isinstance(value, list):
        return "(" + ", ".join(map(_code, value)) + ("," if len(value) == 1 else "") + ")"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_code(k)}: {_code(v)}" for k, v in value.items()) + "}"
    return json.dumps(value) if isinstance(value, str) else repr(value)


def _arg_code(arg: dict) -> str:
    if "tree" in arg:
        items = ", ".join(map(_arg_code, arg["items"]))
        return f'Tree("{arg["tree"]}", ({items},))'
    extra = (f', dtype="{arg["dtype"]}"' if arg["dtype"] != "float32" else "") + (
        f', high="{arg["high"]}"' if arg["high"] else "")
    return f'Arg("{arg["name"]}", {_code(arg["dims"])}, {_code(arg["spec"])}{extra})'


def _leaf_paths(arg: dict, path: str):
    """(source that reaches the leaf, its dims) for each leaf of an argument."""
    if "tree" in arg:
        for i, item in enumerate(arg["items"]):
            yield from _leaf_paths(item, f"{path}[{i}]")
    else:
        yield path, arg["dims"]


def _placeholder_answer(result: dict, args: list[dict]) -> str:
    """Source for an answer of the result's shapes, every element 1e30 (no program's): each
    dimension read from the argument that has it, or the mesh."""
    if "tree" in result:
        return "(" + ", ".join(_placeholder_answer(item, args) for item in result["items"]) + ",)"
    known = {"nX": "mesh[0]", "nY": "mesh[1]"}
    for arg in reversed(args):
        for path, dims in _leaf_paths(arg, arg.get("name") or arg.get("tree")):
            known.update({d: f"{path}.shape[{k}]" for k, d in enumerate(dims) if isinstance(d, str)})
    shape = [str(d) if isinstance(d, int) else known.get(d, "1") for d in result["dims"]]
    return f"np.full(({', '.join(shape)}{',' if len(shape) == 1 else ''}), 1e30)"


def _names(template: dict) -> list[str]:
    return [a.get("name") or a.get("tree") for a in template["args"]]


def _signature(function: str, template: dict) -> str:
    keywords = (["mesh"] if template["takes_mesh"] else []) + template["statics"]
    return f"{function}({', '.join(_names(template))}{', *, ' + ', '.join(keywords) if keywords else ''})"


def _contract_with_part(text: str, function: str, points: float, template: dict) -> str:
    """The contract with a placeholder `Part` appended to ASSIGNMENT's parts, its reference
    defined before ASSIGNMENT, and the names they use imported."""
    todo = marker(function)
    tree = ast.parse(text)
    assign = next((node for node in tree.body if isinstance(node, ast.Assign)
                   and any(getattr(t, "id", None) == "ASSIGNMENT" for t in node.targets)
                   and isinstance(node.value, ast.Call)), None)
    parts = next((kw.value for kw in assign.value.keywords if kw.arg == "parts"), None) if assign else None
    if not isinstance(parts, ast.Tuple):
        raise ScaffoldError("the contract has no `ASSIGNMENT = Assignment(..., parts=(...), ...)` with its "
                            "parts written as a tuple: add the Part by hand (ADDING.md)")
    reference = f"{function}_reference"
    if any(isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name == reference for node in tree.body):
        raise ScaffoldError(f"the contract already defines {reference}: nothing written")
    lines = text.splitlines(keepends=True)
    indent = " " * (parts.elts[0].col_offset if parts.elts else assign.col_offset + 8)
    like = f" (as {template['like']}'s)" if template["like"] else ""
    case = template["case"]
    case_statics = f", statics={_code(case['statics'])}" if case["statics"] else ""
    part = [
        "Part(",
        f'    name="{function}", points={points:g},',
        f"    # {todo}: each line so marked is a placeholder: write the",
        "    # contract as PROBLEMS.md states it, then remove the mark (rules: python -m assignments.rules --all).",
        f'    task="{todo}: one sentence, what it computes and how.",',
        f"    args=({', '.join(map(_arg_code, template['args']))},),  # {todo}: its arguments{like}",
        f"    result={_arg_code(template['result'])},  # {todo}: its result{like}",
        f"    rules=(  # {todo}: every rule",
        f'        NoCommunication(why="{todo}: why", to_try="{todo}: what to try"),',
        "    ),",
        f"    reference={reference},",
        *([f"    statics={_code(template['statics'])},"] if template["statics"] else []),
        *(["    takes_mesh=False,"] if not template["takes_mesh"] else []),
        f"    visible_case=Case(mesh={_code(case['mesh'])}, sizes={_code(case['sizes'])}{case_statics}),"
        f"  # {todo}: the visible check",
        "),",
    ]
    block = "".join(f"{indent}{line}\n" for line in part)
    # After the last part (and its comma), or inside an empty `parts=()`.
    if parts.elts:
        row, col = parts.elts[-1].end_lineno - 1, parts.elts[-1].end_col_offset
        rest = lines[row][col:]
        if rest.lstrip().startswith(","):
            col += rest.index(",") + 1
        head, tail = lines[row][:col], lines[row][col:]
        head += "" if head.rstrip().endswith(",") else ","
        lines[row] = head + "\n" + block + (tail.lstrip(" ") if tail.strip() else "")
    else:
        row, col = parts.end_lineno - 1, parts.end_col_offset - 1  # the closing parenthesis
        lines[row] = lines[row][:col] + "\n" + block + " " * (assign.col_offset + 4) + lines[row][col:]
    keywords = ", ".join(("mesh", *template["statics"]))
    definition = (
        f"def {reference}({', '.join(_names(template))}, *, {keywords}):\n"
        f'    """{function}\'s dense float64 NumPy answer (`Part.reference`)."""\n'
        f"    return {_placeholder_answer(template['result'], template['args'])}"
        f"  # {todo}: the reference (1e30: every case fails)\n\n\n")
    at = assign.lineno - 1
    lines[at:at] = [definition]
    uses_tree = "Tree(" in block
    return _with_imports("".join(lines), {"..contract": ("Arg", "Case", "Part") + (("Tree",) if uses_tree else ()),
                                          "..rules": ("NoCommunication",)}, numpy=True)


def _with_imports(text: str, wanted: dict[str, tuple[str, ...]], numpy: bool) -> str:
    """`text` importing each of the `wanted` names ({module: names}): a name missing from a
    one-line ``from module import ...`` already there joins it, else a line of its own follows
    the imports; ``import numpy as np`` goes before the first ``from`` import of the kit."""
    tree = ast.parse(text)
    imports = [node for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom))]
    imported = {alias.asname or alias.name for node in imports for alias in node.names}
    lines = text.splitlines(keepends=True)
    added = []
    for module, names in wanted.items():
        needed = [n for n in names if n not in imported]
        level, name = len(module) - len(module.lstrip(".")), module.lstrip(".")
        same = next((node for node in imports if isinstance(node, ast.ImportFrom) and node.module == name
                     and node.level == level and node.lineno == node.end_lineno
                     and "(" not in lines[node.lineno - 1]), None)
        if needed and same is not None:
            names = sorted({alias.name for alias in same.names} | set(needed))
            lines[same.lineno - 1] = f"from {module} import {', '.join(names)}\n"
        elif needed:
            added.append(f"from {module} import {', '.join(needed)}\n")
    last = max((node.end_lineno for node in imports), default=0)
    lines[last:last] = added
    if numpy and "np" not in imported:
        first = next((node.lineno - 1 for node in imports if isinstance(node, ast.ImportFrom)
                      and node.module != "__future__"), last)
        lines[first:first] = ["import numpy as np\n", "\n"]
    return "".join(lines)


def _hidden_with_cases(text: str, function: str) -> str:
    """The hidden-cases module with `<function>_cases` defined before `cases`, and `cases`
    sending `function`'s part there first."""
    todo = marker(function)
    tree = ast.parse(text)
    cases = next((node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name == "cases"), None)
    if cases is None or not cases.args.args:
        raise ScaffoldError("the hidden cases module has no `def cases(part)`: add the cases by hand (ADDING.md)")
    part = cases.args.args[0].arg
    body = cases.body[1:] if ast.get_docstring(cases) is not None and len(cases.body) > 1 else cases.body
    first = body[0]
    lines = text.splitlines(keepends=True)
    indent = " " * first.col_offset
    lines.insert(first.lineno - 1,
                 f'{indent}if {part}.name == "{function}":\n{indent}    return {function}_cases({part})\n')
    definition = (
        f"def {function}_cases(part: Part) -> list[Case]:\n"
        f'    """{function}\'s hidden cases: the meshes PROBLEMS.md names (2x4, 4x2, 1x8, a 4- and\n'
        f"    a 3-device mesh), sizes that differ between meshes, the statics' hard values.\"\"\"\n"
        f"    return [part.visible_case]  # {todo}: its hidden cases\n\n\n")
    at = cases.lineno - 1 - len(cases.decorator_list)
    lines[at:at] = [definition]
    return _with_imports("".join(lines), {"assignments.contract": ("Case", "Part")}, numpy=False)


def _cell_id(function: str, role: str) -> str:
    """A notebook cell id that depends only on the function and the cell's role (nbformat 4.5
    wants one; a random one would differ on every scaffold)."""
    return hashlib.sha256(f"{function}/{role}".encode()).hexdigest()[:8]


def _notebook_with_cells(text: str, function: str, points: float, template: dict, graded: list[str]) -> str:
    """The source notebook with the problem's text, the solution cell and the grade cell (which
    runs the visible check) after the last graded function's grade cell."""
    import nbformat
    from nbformat.v4 import new_code_cell, new_markdown_cell

    todo = marker(function)
    nb = nbformat.reads(text, as_version=4)
    signature = _signature(function, template)
    problem = new_markdown_cell(
        f"## {todo}: the exercise's title\n\n"
        f"Write `{signature}`. {todo}: what it returns (shape, sharding) and how to write it, in the\n"
        f"student's words (PROBLEMS.md states the contract; quote no code that is not in\n"
        f"tests/test_fragments.py's table).\n\n"
        f"*Rule:* {todo}: the rule, as the student reads it.")
    solution = new_code_cell(
        f"def {signature}:\n"
        f"    ### BEGIN SOLUTION\n"
        f"    raise NotImplementedError()  # {todo}: the model solution\n"
        f"    ### END SOLUTION",
        metadata={"nbgrader": {"grade": False, "grade_id": f"{function}_solution", "locked": False,
                               "schema_version": 3, "solution": True, "task": False}})
    grade = new_code_cell(
        "from assignments import check   # also in the set-up cell; here so this cell runs after a restart\n"
        f"check({function})\n"
        "### BEGIN HIDDEN TESTS\n"
        f"# Graded outside the student's kernel (part '{function}').\n"
        "### END HIDDEN TESTS",
        metadata={"nbgrader": {"grade": True, "grade_id": function, "locked": True, "points": _number(points),
                               "schema_version": 3, "solution": False, "task": False},
                  "tags": ["raises-exception"]})
    for cell, role in ((problem, "problem"), (solution, "solution"), (grade, "grade")):
        cell.id = _cell_id(function, role)
    at = _insertion_point(nb, graded)
    nb.cells[at:at] = [problem, solution, grade]
    return nbformat.writes(nb) + "\n"


def _number(points: float):
    return int(points) if float(points).is_integer() else points


def _insertion_point(nb, graded: list[str]) -> int:
    """After the grade cell of the assignment's last graded function, else before its first
    written answer, else at the end."""
    ids = [c.metadata.get("nbgrader", {}).get("grade_id") for c in nb.cells]
    grades = [i for i, (c, gid) in enumerate(zip(nb.cells, ids))
              if gid in graded and c.metadata.get("nbgrader", {}).get("grade") and c.cell_type == "code"]
    if grades:
        return grades[-1] + 1
    written = [i for i, c in enumerate(nb.cells)
               if c.cell_type == "markdown" and c.metadata.get("nbgrader", {}).get("grade")]
    return written[0] if written else len(nb.cells)


def _function_test(assignment: str, function: str) -> str:
    return f'''"""{function} ({assignment}), end to end: its contract is filled in, the model solution earns its
points on every hidden case, and the released stub earns none. Scaffolded by `python -m
assignments.scaffold`; add a test for each mistake the graders must catch (a corpus file in
tests/submissions/{assignment}/ holding only {function}, graded as an overlay on the solution)."""
from __future__ import annotations

import os

from grading import graded

from assignments.contracts import get_assignment
from assignments.scaffold import unfilled
from graders.settings import Limits

ASSIGNMENT, FUNCTION = "{assignment}", "{function}"
LIMITS = Limits(cell_timeout=10, case_timeout=10, stall_timeout=30)


def test_{function}_is_filled_in(repo_root):
    """Is every placeholder the scaffold wrote for {function} replaced?"""
    left = unfilled(ASSIGNMENT, FUNCTION, repo_root)
    assert not left, "placeholders left to fill in:\\n" + "\\n".join(left)


def test_{function}_solution_earns_its_points_and_the_stub_none(repo_root):
    """Does the model solution earn all of {function}'s points, and the released stub none?"""
    points = get_assignment(ASSIGNMENT).part(FUNCTION).points
    solution = graded(os.path.join(repo_root, "solutions", f"{{ASSIGNMENT}}.py"), ASSIGNMENT, LIMITS,
                      only=[FUNCTION], here=True).part(FUNCTION)
    assert solution.score == points and solution.passed, solution.output
    stub = graded(os.path.join(repo_root, "release", ASSIGNMENT, f"{{ASSIGNMENT}}.ipynb"), ASSIGNMENT, LIMITS,
                  only=[FUNCTION], here=True).part(FUNCTION)
    assert stub.score == 0 and "not implemented" in stub.output, stub.output
'''


# --- a new assignment ----------------------------------------------------------------------------


def add_assignment(assignment: str, title: str = "", root: str = ROOT) -> list[str]:
    """A new assignment with no graded function yet: its contract, hidden cases, source notebook
    (a title cell and the locked set-up cell) and pytest graders. Returns the files written."""
    _check_name(assignment, "assignment")
    files = assignment_files(assignment)
    there = [rel for rel in files.values() if os.path.exists(os.path.join(root, rel))]
    if os.path.exists(os.path.join(root, "source", assignment)):
        there.append(f"source/{assignment}/")
    if there:
        raise ScaffoldError(f"assignment {assignment!r} exists already, nothing written: {', '.join(there)}")
    todo = marker(assignment)
    title = title or f"{todo}: the assignment's title"
    new = {
        files["contract"]: f'''"""Assignment {assignment}: {todo}: what it teaches, and the book's part it follows."""
from __future__ import annotations

from ..contract import Assignment


ASSIGNMENT = Assignment(
    name="{assignment}",
    title={json.dumps(title)},
    book_url="",  # {todo}: the book's page
    parts=(),
    written=(),
)
''',
        files["hidden cases"]: f'''"""Hidden cases for {assignment}: {todo}: the meshes and sizes, and why each."""
from __future__ import annotations

from assignments.contract import Case, Part


def cases(part: Part) -> list[Case]:
    raise KeyError(f"no hidden cases for {{part.name!r}}")
''',
        files["source notebook"]: _new_notebook(assignment, title, root),
        files["pytest graders"]: f'''"""Hidden graders for {assignment}: one test per graded function, one case per hidden configuration.

    python -m pytest graders/test_{assignment}.py --submission PATH [-k FUNCTION] [-v]
"""
from graders.pytest_plugin import case_tests

ASSIGNMENT = "{assignment}"
# test_<function> for every graded function of the contract (assignments/contracts/).
globals().update(case_tests(ASSIGNMENT))
''',
    }
    _write_all(root, new)
    return list(new)


def _new_notebook(assignment: str, title: str, root: str) -> str:
    """A title cell and the locked set-up cell, with an existing notebook's metadata."""
    import nbformat
    from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

    model = nbformat.read(os.path.join(root, "source", MODEL_ASSIGNMENT, f"{MODEL_ASSIGNMENT}.ipynb"),
                          as_version=4)
    setup = next(c for c in model.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "setup")
    nb = new_notebook(metadata=model.metadata)
    intro = new_markdown_cell(f"# {title}\n\n{marker(assignment)}: what the student writes, and how it is graded.")
    cell = new_code_cell(setup.source, metadata=setup.metadata)
    intro.id, cell.id = _cell_id(assignment, "intro"), _cell_id(assignment, "setup")
    nb.cells = [intro, cell]
    return nbformat.writes(nb) + "\n"


# --- files and the command line ------------------------------------------------------------------


def _read(root: str, rel: str) -> str:
    with open(os.path.join(root, rel)) as f:
        return f.read()


def _write_all(root: str, new: dict[str, str]) -> None:
    """Write every file, once each Python file is known to compile: a scaffold that would leave
    the kit broken writes nothing."""
    for rel, text in new.items():
        if rel.endswith(".py"):
            try:
                compile(text, rel, "exec")
            except SyntaxError as e:
                raise ScaffoldError(f"the scaffold made {rel} unparsable ({e}), nothing written: "
                                    f"add the function by hand (ADDING.md)") from None
    for rel, text in new.items():
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m assignments.scaffold", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("names", nargs="*", metavar="ASSIGNMENT FUNCTION",
                        help="the assignment, and the new graded function's name")
    parser.add_argument("--points", type=float, default=1, help="the function's points (default 1)")
    parser.add_argument("--like", metavar="FUNCTION", default=None,
                        help="start its arguments, result, static arguments and visible case as this graded "
                             "function's (default: the assignment's last; 'none': one array A f32[S, D])")
    parser.add_argument("--assignment", metavar="NAME", help="start a new assignment instead")
    parser.add_argument("--title", default="", help="with --assignment: its title")
    args = parser.parse_args(argv)
    try:
        if args.assignment:
            if args.names:
                parser.error("--assignment NAME takes no other names: scaffold its functions afterwards")
            written = add_assignment(args.assignment, args.title)
            after = f"then: python -m assignments.scaffold {args.assignment} FUNCTION --points N"
        elif len(args.names) == 2:
            assignment, function = args.names
            written = add_function(assignment, function, args.points, args.like)
            after = (f"then: fill in each {marker(function)} (grep -rn '{marker(function)}' .), "
                     f"python -m graders.build all -a {assignment}, "
                     f"python -m pytest -n 0 tests/test_{assignment}_{function}.py")
        else:
            parser.error("give ASSIGNMENT FUNCTION, or --assignment NAME")
    except ScaffoldError as e:
        print(f"scaffold: {e}", file=sys.stderr)
        return 1
    print("\n".join(f"wrote {rel}" for rel in written))
    print(after)
    return 0


if __name__ == "__main__":
    sys.exit(main())
