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
from grading import CODE_POINTS, expected_score, submission_file

from graders.gradescope import VISIBILITIES, build_bundle

pytestmark = pytest.mark.gradescope

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SOLUTION_NB = os.path.join(REPO_ROOT, "solutions", "problem1", "problem1.ipynb")
MISTAKES = submission_file(os.path.join(REPO_ROOT, "tests", "submissions", "problem1", "comm_whole_roll.py"))
LEVELS = {"roll_diff": "after_published", "block_average_shard_map": "hidden"}


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    """The bundle as the README builds it: `python -m graders.gradescope build ...`."""
    out = tmp_path_factory.mktemp("bundle") / "gradescope-problem1.zip"
    levels = [f"{name}={level}" for name, level in LEVELS.items()]
    built = subprocess.run([sys.executable, "-m", "graders.gradescope", "build", "-a", "problem1", "-o", str(out),
                            "--visibility", *levels], cwd=REPO_ROOT, check=True, capture_output=True, text=True)
    # The instructor is told what the zip carries: the secret every hidden input comes from.
    assert "It holds the course's grading secret (.grading-secret" in built.stdout, built.stdout
    return out


def image_env(folder) -> dict:
    """The environment of a Gradescope-like image: the machine's own PATH and settings, but
    none of the test environment (no venv on PATH, no kit variables such as the tests' course
    secret). `python3` is this stack's interpreter, as on an image that has that Python, and a
    broken `python3.X` (a pyenv shim that exits 127, as on these machines) comes first, so
    setup.sh must try what it finds before using it."""
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    shims, real = folder / "shims", folder / "bin"
    shims.mkdir()
    real.mkdir()
    broken = shims / f"python{version}"
    broken.write_text("#!/bin/sh\necho 'pyenv: python: command not found' >&2\nexit 127\n")
    broken.chmod(0o755)
    interpreter = os.path.join(sys.base_prefix, "bin", f"python{version}")
    (real / "python3").write_text(f'#!/bin/sh\nexec {interpreter} "$@"\n')  # as /usr/bin/python3 would
    (real / "python3").chmod(0o755)
    venv_bin = os.path.dirname(sys.executable)
    path = [p for p in os.environ["PATH"].split(os.pathsep) if p and p != venv_bin]
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("KIT_", "PYTHON", "VIRTUAL_ENV", "GRADESCOPE"))}
    return {**env, "PATH": os.pathsep.join([str(shims), str(real), *path]), "HOME": str(folder)}


@pytest.fixture(scope="module")
def image(tmp_path_factory, bundle):
    """/autograder after Gradescope built the image: the zip unpacked into source/, setup.sh
    run from there (it makes its own environment from requirements.txt), run_autograder copied."""
    root = tmp_path_factory.mktemp("gradescope") / "autograder"
    source = root / "source"
    with zipfile.ZipFile(bundle) as z:
        z.extractall(source)
        for info in z.infolist():  # zipfile does not restore permissions
            os.chmod(source / info.filename, (info.external_attr >> 16) & 0o777 or 0o644)
    env = {**image_env(tmp_path_factory.mktemp("image")), "GRADESCOPE_AUTOGRADER_ROOT": str(root)}
    proc = subprocess.run(["bash", str(source / "setup.sh")], cwd=source, env=env,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "autograder ready" in proc.stdout
    shutil.copy(source / "run_autograder", root / "run_autograder")  # as Gradescope does
    return root, env, proc.stdout


def autograder(image, submission: dict[str, str]) -> str:
    """A fresh submission/ and results/ in the image's /autograder, as for each submission."""
    root, _, _ = image
    for folder in ("submission", "results"):
        shutil.rmtree(root / folder, ignore_errors=True)
        (root / folder).mkdir()
    for name, path in submission.items():
        shutil.copy(path, root / "submission" / name)
    return str(root)


def run_autograder(image) -> dict:
    root, env, _ = image
    proc = subprocess.run(["bash", str(root / "run_autograder")], cwd=root, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    with open(root / "results" / "results.json") as f:
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
    assert {"graders/harness.py", "graders/sandboxed/judge.py", "graders/hidden/problem1.py",
            "graders/sandboxed/export.py", "assignments/contracts/problem1.py", "grading_config.py"} <= names
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


def test_setup_makes_its_own_environment(image):
    """Did setup.sh skip the broken interpreter, and build a venv of its own holding what
    grading imports (pytest included), not the test environment's?"""
    root, env, log = image
    real = env["PATH"].split(os.pathsep)[1]  # image_env's bin/ with the working python3
    assert f"using {os.path.join(real, 'python3')} (Python {sys.version.split()[0]})" in log
    venv = root / "venv" / "bin" / "python"
    out = subprocess.run([str(venv), "-c", "import sys, pytest, jax; print(sys.prefix)"],
                         capture_output=True, text=True, check=True).stdout.strip()
    assert out == str(root / "venv")


def test_run_autograder_grades_the_solution(image):
    """In a simulated /autograder, does run_autograder write a valid results.json with full
    marks for the solution notebook, each test with its visibility?"""
    autograder(image, {"problem1.ipynb": SOLUTION_NB, "notes.py": MISTAKES})
    results = run_autograder(image)
    assert_valid_results(results)
    assert results["score"] == CODE_POINTS
    assert {t["name"]: t["visibility"] for t in results["tests"]}["roll_diff"] == "after_published"
    assert "graded problem1.ipynb; 1 other file(s) ignored" in results["output"]
    assert f"{CODE_POINTS:g}/" not in results["output"], "the total would show the score roll_diff's visibility hides"


def test_run_autograder_gives_the_graders_score(image):
    """Is a .py submission graded too, with the same score, function by function, as
    `python -m graders` gives it with the course's secret (carried by the bundle)?"""
    autograder(image, {"my_work.py": MISTAKES})
    results = run_autograder(image)
    assert_valid_results(results)
    local = subprocess.run([sys.executable, "-m", "graders", MISTAKES, "-a", "problem1", "--quiet",
                            "-o", os.path.join(str(image[0].parent), "local.json")],
                           cwd=REPO_ROOT, capture_output=True, text=True)
    assert local.returncode == 0, local.stderr
    with open(os.path.join(str(image[0].parent), "local.json")) as f:
        expected = json.load(f)
    assert {t["name"]: t["score"] for t in results["tests"]} == {t["name"]: t["score"] for t in expected["tests"]}
    assert results["score"] == pytest.approx(expected_score("comm_whole_roll"))


def test_run_autograder_without_a_notebook(tmp_path, image):
    """With nothing gradable uploaded, is the result still valid: 0, saying what to upload?"""
    readme = tmp_path / "README.txt"
    readme.write_text("I forgot the notebook")
    autograder(image, {"README.txt": str(readme)})
    results = run_autograder(image)
    assert_valid_results(results)
    assert results["score"] == 0
    assert "no notebook or Python file was found in your submission; upload problem1.ipynb" in results["output"]
    assert len(results["tests"]) == 5
