"""Every notebook runs top to bottom on the CPU: solved, every check passes; released, none errors."""
import os
import re

import nbformat
import pytest
from nbclient import NotebookClient

from graders.build import assignment_names, solved_notebook

pytestmark = pytest.mark.slow


def execute(nb, cwd):
    """Run `nb` in a kernel in `cwd`; what it writes to temporary folders (profiler traces) goes there too."""
    NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": cwd}}).execute(
        env={**os.environ, "TMPDIR": cwd})
    return nb


def outputs_text(cell) -> str:
    parts = []
    for o in cell.get("outputs", []):
        parts.append(o.get("text", ""))
        parts.append(o.get("data", {}).get("text/plain", ""))
    return "".join(parts)


@pytest.mark.parametrize("name", assignment_names())
def test_solved_notebook_runs_and_passes_its_checks(name, repo_root, tmp_path):
    """Does the solved notebook run without error, its set-up cell saying in one line that the
    devices are ready, with every visible check passing?"""
    nb = execute(solved_notebook(os.path.join(repo_root, "source", name, f"{name}.ipynb")), str(tmp_path))
    checks = [c for c in nb.cells if c.cell_type == "code" and "check(" in c.source]
    assert checks
    assert re.fullmatch(r"8 simulated CPU devices ready \(JAX [\w.]+\), ids 0-7\n", outputs_text(nb.cells[1]))
    for cell in nb.cells:
        assert not any(o.output_type == "error" for o in cell.get("outputs", [])), cell.source
    for cell in checks:
        assert "passed" in outputs_text(cell) and "failed" not in outputs_text(cell), cell.source


@pytest.mark.parametrize("name", assignment_names())
def test_released_notebook_runs_with_friendly_failures(name, repo_root, tmp_path):
    """Does a student's first run of the released notebook finish, each check saying 'not implemented
    yet' and ending in a CheckFailed that names its function (so Validate fails), one line per
    problem (the browser wraps them), nothing else erring?"""
    nb = nbformat.read(os.path.join(repo_root, "release", name, f"{name}.ipynb"), as_version=4)
    nb = execute(nb, str(tmp_path))  # check cells carry the raises-exception tag: the run goes on
    checks = [c for c in nb.cells if c.cell_type == "code" and c.metadata.get("nbgrader", {}).get("grade")]
    for cell in nb.cells:
        errors = [o for o in cell.get("outputs", []) if o.output_type == "error"]
        if cell in checks:
            function = cell.metadata.nbgrader["grade_id"]
            assert [e.ename for e in errors] == ["CheckFailed"] and function in errors[0].evalue, cell.source
            header, *problems = errors[0].traceback   # one line per problem, for the browser to wrap
            assert function in header and problems and all(p.startswith(("\u2717 ", "\u2192 ")) for p in problems), cell.source
        else:
            assert not errors, cell.source
    assert checks and all("not implemented yet" in outputs_text(c) for c in checks)
