"""The student hand-out: release notebooks and the runtime, never solutions or hidden cases."""
import json
import os
import re
import subprocess
import sys
import zipfile

import nbformat
import pytest

from graders.handout import INSTRUCTOR_PLUGINS, INSTRUCTOR_SERVER_EXTENSIONS, build_handout


@pytest.fixture(scope="module")
def handout(tmp_path_factory):
    out = tmp_path_factory.mktemp("dist")
    return zipfile.ZipFile(build_handout("problem1", str(out), exchange="/srv/course/exchange"))


def solution_lines(repo_root, name):
    """The lines of the source notebook's solution regions and hidden tests that appear
    nowhere else in it (worked examples share some, e.g. `def local(block):`)."""
    nb = nbformat.read(os.path.join(repo_root, "source", name, f"{name}.ipynb"), as_version=4)
    secret, public = set(), set()
    for cell in nb.cells:
        regions = re.findall(r"### BEGIN (?:SOLUTION|HIDDEN TESTS)\n(.*?)### END", cell.source, re.S)
        for region in regions:
            secret.update(line.strip() for line in region.splitlines() if len(line.strip()) > 12)
        rest = re.sub(r"### BEGIN (?:SOLUTION|HIDDEN TESTS)\n.*?### END[^\n]*", "", cell.source, flags=re.S)
        public.update(line.strip() for line in rest.splitlines())
    return secret - public


def solution_regions(repo_root, name):
    """Each solution region of the source notebook, whitespace-normalized."""
    nb = nbformat.read(os.path.join(repo_root, "source", name, f"{name}.ipynb"), as_version=4)
    return [" ".join(region.split()) for cell in nb.cells
            for region in re.findall(r"### BEGIN SOLUTION\n(.*?)### END", cell.source, re.S)]


def hidden_case_lines(repo_root, name):
    """The code lines of the assignment's hidden cases (graders/hidden/<name>.py)."""
    text = open(os.path.join(repo_root, "graders", "hidden", f"{name}.py")).read()
    text = re.sub(r'""".*?"""', "", text, flags=re.S)
    return {line.strip() for line in text.splitlines()
            if len(line.strip()) > 12 and not line.strip().startswith(("#", "from ", "import ", "return "))}


def test_handout_holds_the_release_and_runtime_only(handout):
    """Is the hand-out the release notebook, the runtime and its set-up, and nothing of graders/?"""
    names = handout.namelist()
    assert "handout-problem1/problem1/problem1.ipynb" in names
    assert "handout-problem1/assignments/checks.py" in names
    assert "handout-problem1/pyproject.toml" in names
    assert not [n for n in names if re.search(r"/(graders|solutions|source|tests)/|hidden|\.pyc$", n)], names


def test_handout_has_no_solution_or_hidden_case(handout, repo_root):
    """Does no file of the hand-out contain a solution line, a hidden test or a hidden case?"""
    secrets = solution_lines(repo_root, "problem1")
    regions = solution_regions(repo_root, "problem1")
    hidden = hidden_case_lines(repo_root, "problem1")
    assert secrets and regions and hidden
    for name in handout.namelist():
        text = handout.read(name).decode("utf-8", "replace")
        assert "BEGIN SOLUTION" not in text and "HIDDEN TESTS" not in text, name
        if name.endswith(".ipynb"):  # no line of any solution
            leaked = [s for s in secrets if s in text]
        else:  # the runtime's contract may share a line like `S, D = A.shape`, never a solution
            leaked = [r for r in regions if r in " ".join(text.split())]
        assert not leaked, (name, leaked)
        assert not [h for h in hidden if h in text], (name, [h for h in hidden if h in text])


def test_student_settings_hide_instructor_panels(handout):
    """Do the hand-out's Jupyter settings hide formgrader and Create Assignment, and point
    nbgrader at the course's exchange?"""
    read = lambda n: handout.read(f"handout-problem1/jupyter-config/{n}").decode()  # noqa: E731
    page = json.loads(read("labconfig/page_config.json"))["disabledExtensions"]
    assert all(page[p] for p in INSTRUCTOR_PLUGINS)
    server = json.loads(read("jupyter_server_config.d/scaling-jax-student.json"))["ServerApp"]
    assert not any(server["jpserver_extensions"][e] for e in INSTRUCTOR_SERVER_EXTENSIONS)
    assert json.loads(read("jupyter_server_config.json"))["ServerApp"]["allow_root"]
    assert "/srv/course/exchange" in read("nbgrader_config.py")


def test_handout_installs_with_one_command(handout, tmp_path):
    """Does `pip wheel` of the hand-out folder make a wheel with the runtime and the settings?"""
    handout.extractall(tmp_path)
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path / "wheel"),
                           str(tmp_path / "handout-problem1")], capture_output=True, text=True)
    if proc.returncode != 0 and "setuptools" in proc.stderr and "No matching distribution" in proc.stderr:
        pytest.skip("no package index to build the wheel with")
    assert proc.returncode == 0, proc.stderr[-2000:]
    (wheel,) = (tmp_path / "wheel").glob("*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "assignments/checks.py" in names and "assignments/contracts/problem1.py" in names
    assert any(n.endswith("data/etc/jupyter/labconfig/page_config.json") for n in names)
    assert not any(n.startswith(("graders/", "solutions/")) for n in names)
