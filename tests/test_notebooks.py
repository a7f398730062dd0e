"""Every notebook runs top to bottom on the CPU: solved, every check passes; released, none errors."""
import os

import nbformat
import pytest
from nbclient import NotebookClient

from graders.build import assignment_names, solved_notebook

pytestmark = pytest.mark.slow


def execute(nb, cwd):
    NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": cwd}}).execute()
    return nb


def outputs_text(cell) -> str:
    parts = []
    for o in cell.get("outputs", []):
        parts.append(o.get("text", ""))
        parts.append(o.get("data", {}).get("text/plain", ""))
    return "".join(parts)


@pytest.mark.parametrize("name", assignment_names())
def test_solved_notebook_runs_and_passes_its_checks(name, repo_root, tmp_path):
    """Does the solved notebook run without error, with every visible check passing?"""
    nb = execute(solved_notebook(os.path.join(repo_root, "source", name, f"{name}.ipynb")), str(tmp_path))
    checks = [c for c in nb.cells if c.cell_type == "code" and "check(" in c.source]
    assert checks
    for cell in nb.cells:
        assert not any(o.output_type == "error" for o in cell.get("outputs", [])), cell.source
    for cell in checks:
        assert "passed" in outputs_text(cell) and "failed" not in outputs_text(cell), cell.source


@pytest.mark.parametrize("name", assignment_names())
def test_released_notebook_runs_with_friendly_failures(name, repo_root, tmp_path):
    """Does a student's first run of the released notebook finish, each check saying 'not implemented yet'?"""
    nb = nbformat.read(os.path.join(repo_root, "release", name, f"{name}.ipynb"), as_version=4)
    nb = execute(nb, str(tmp_path))
    for cell in nb.cells:
        assert not any(o.output_type == "error" for o in cell.get("outputs", [])), cell.source
    checks = [c for c in nb.cells if c.cell_type == "code" and c.source.startswith("check(")]
    assert checks and all("not implemented yet" in outputs_text(c) for c in checks)
