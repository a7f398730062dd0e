"""The Gradescope autograder bundle, run in a temporary folder laid out like /autograder."""
from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import zipfile

import pytest

from graders.gradescope import VISIBILITIES, build_bundle

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SOLUTION_NB = os.path.join(REPO_ROOT, "solutions", "problem1", "problem1.ipynb")
MISTAKES = os.path.join(REPO_ROOT, "tests", "submissions", "problem1", "comm_whole_roll.py")
LEVELS = {"roll_diff": "after_published", "block_average_shard_map": "hidden"}


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    out = tmp_path_factory.mktemp("bundle") / "gradescope-problem1.zip"
    build_bundle("problem1", str(out), "visible", LEVELS)
    return out


def autograder(tmp_path, bundle, submission: dict[str, str]) -> str:
    """/autograder as Gradescope lays it out: source/ (the unpacked zip), submission/, results/."""
    root = tmp_path / "autograder"
    source = root / "source"
    with zipfile.ZipFile(bundle) as z:
        z.extractall(source)
        for info in z.infolist():  # zipfile does not restore permissions
            os.chmod(source / info.filename, (info.external_attr >> 16) & 0o777 or 0o644)
    (root / "submission").mkdir()
    (root / "results").mkdir()
    for name, path in submission.items():
        shutil.copy(path, root / "submission" / name)
    shutil.copy(source / "run_autograder", root / "run_autograder")  # as Gradescope does
    return str(root)


def run_autograder(root: str) -> dict:
    env = {**os.environ, "GRADESCOPE_AUTOGRADER_ROOT": root, "AUTOGRADER_PYTHON": sys.executable}
    proc = subprocess.run(["bash", os.path.join(root, "run_autograder")], cwd=root, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    with open(os.path.join(root, "results", "results.json")) as f:
        return json.load(f)


def assert_valid_results(results: dict) -> None:
    """The fields Gradescope reads, with the types it accepts."""
    assert isinstance(results["score"], (int, float))
    assert isinstance(results["output"], str)
    assert isinstance(results["execution_time"], (int, float))
    assert results["stdout_visibility"] in VISIBILITIES
    for test in results["tests"]:
        assert isinstance(test["name"], str)
        assert isinstance(test["score"], (int, float)) and isinstance(test["max_score"], (int, float))
        assert 0 <= test["score"] <= test["max_score"]
        assert test["status"] in ("passed", "failed")
        assert test["visibility"] in VISIBILITIES
        assert isinstance(test["output"], str) and test["output"]
    assert results["score"] == pytest.approx(sum(t["score"] for t in results["tests"]))


def test_bundle_contents(bundle):
    """Has the zip Gradescope's two scripts (executable), pinned requirements, the runtime and
    graders, the visibilities, and no solutions, samples or tests?"""
    with zipfile.ZipFile(bundle) as z:
        names = set(z.namelist())
        modes = {i.filename: (i.external_attr >> 16) & 0o777 for i in z.infolist()}
        config = json.loads(z.read("gradescope.json"))
        requirements = z.read("requirements.txt").decode()
    assert {"setup.sh", "run_autograder", "requirements.txt", "gradescope.json"} <= names
    assert modes["setup.sh"] & stat.S_IXUSR and modes["run_autograder"] & stat.S_IXUSR
    assert {"graders/harness.py", "assignments/judge_worker.py", "graders/hidden/problem1.py",
            "assignments/export_worker.py", "assignments/contracts/problem1.py"} <= names
    assert not [n for n in names if n.startswith(("solutions", "tests", "source", "graders/samples"))
                or n.endswith(".ipynb") or "__pycache__" in n]
    import jax
    assert f"jax=={jax.__version__}" in requirements.splitlines()
    assert config["assignment"] == "problem1"
    assert config["visibility"] == {"shard_average_jit": "visible", "shard_average_shard_map": "visible",
                                    "block_average_jit": "visible", **LEVELS}


def test_bad_visibility_is_refused(tmp_path):
    """Is a misspelt level or function refused, saying what is allowed?"""
    with pytest.raises(ValueError, match="is not one of hidden, after_due_date"):
        build_bundle("problem1", str(tmp_path / "a.zip"), "visible", {"roll_diff": "later"})
    with pytest.raises(ValueError, match="problem1 has no graded function rol_diff; it has"):
        build_bundle("problem1", str(tmp_path / "a.zip"), "visible", {"rol_diff": "hidden"})


def test_run_autograder_grades_the_solution(tmp_path, bundle):
    """In a simulated /autograder, does run_autograder write a valid results.json with full
    marks for the solution notebook, each test with its visibility?"""
    root = autograder(tmp_path, bundle, {"problem1.ipynb": SOLUTION_NB, "notes.py": MISTAKES})
    results = run_autograder(root)
    assert_valid_results(results)
    assert results["score"] == 10
    assert {t["name"]: t["visibility"] for t in results["tests"]}["roll_diff"] == "after_published"
    assert "graded problem1.ipynb; 1 other file(s) ignored" in results["output"]


def test_run_autograder_partial_credit_from_a_module(tmp_path, bundle):
    """Is a .py submission graded too, with the same score as `python -m graders`?"""
    results = run_autograder(autograder(tmp_path, bundle, {"my_work.py": MISTAKES}))
    assert_valid_results(results)
    assert results["score"] == pytest.approx(8.8)


def test_run_autograder_without_a_notebook(tmp_path, bundle):
    """With nothing gradable uploaded, is the result still valid: 0, saying what to upload?"""
    readme = tmp_path / "README.txt"
    readme.write_text("I forgot the notebook")
    results = run_autograder(autograder(tmp_path, bundle, {"README.txt": str(readme)}))
    assert_valid_results(results)
    assert results["score"] == 0
    assert "no notebook or Python file was found in your submission; upload problem1.ipynb" in results["output"]
    assert len(results["tests"]) == 5
