"""The student hand-out: release notebooks and the runtime, never solutions or hidden cases."""
import json
import os
import re
import subprocess
import sys
import zipfile

import nbformat
import pytest

from nbgrader.auth import Authenticator
from nbgrader.coursedir import CourseDirectory
from nbgrader.exchange import ExchangeError
from nbgrader.exchange.default.exchange import Exchange
from traitlets.config import Config
from traitlets.config.loader import PyFileConfigLoader

from assignments.handin import SubmitAskingIfUnchanged
from graders.handout import (DEFAULT_EXCHANGE, INSTRUCTOR_PLUGINS, INSTRUCTOR_SERVER_EXTENSIONS, NEWS_PLUGIN,
                             SUBMIT_PLUGIN, build_handout, course_settings)

pytestmark = pytest.mark.stack_neutral  # the hand-out's contents and its exchange


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


def test_student_settings_hide_instructor_panels(handout, tmp_path):
    """Do the hand-out's Jupyter settings hide formgrader and Create Assignment, root JupyterLab
    at the folder it starts in, and point nbgrader at the course's exchange and hand-in check?"""
    read = lambda n: handout.read(f"handout-problem1/jupyter-config/{n}").decode()  # noqa: E731
    page = json.loads(read("labconfig/page_config.json"))["disabledExtensions"]
    assert all(page[p] for p in INSTRUCTOR_PLUGINS)
    # No "Would you like to get notified about official Jupyter news?" over the first output:
    # JupyterLab's documented switch (`jupyter labextension disable` writes the same file).
    assert NEWS_PLUGIN == "@jupyterlab/apputils-extension:announcements" and page[NEWS_PLUGIN]
    server = json.loads(read("jupyter_server_config.d/scaling-jax-student.json"))["ServerApp"]
    assert not any(server["jpserver_extensions"][e] for e in INSTRUCTOR_SERVER_EXTENSIONS)
    settings = config_of(read("jupyter_server_config.py"), cwd=str(tmp_path))
    assert settings.ServerApp.allow_root and settings.ServerApp.root_dir == str(tmp_path)
    nbgrader = config_of(read("nbgrader_config.py"))
    assert nbgrader.Exchange.root == "/srv/course/exchange" and nbgrader.CourseDirectory.course_id == "scaling-jax"
    assert nbgrader.ExchangeFactory.submit == SUBMIT_PLUGIN


def release_notebook(version: str, kernel: str = "python3") -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1 + 1")])
    nb.metadata.kernelspec = {"name": kernel, "display_name": "Python 3 (ipykernel)", "language": "python"}
    nb.metadata.language_info = {"name": "python", "version": version, "mimetype": "text/x-python"}
    return nb


def test_notebooks_open_unmodified_with_any_python(handout, tmp_path):
    """Does the student's server hand JupyterLab a Python notebook with this environment's
    kernel's language_info (which JupyterLab writes in when the kernel starts, marking the
    notebook modified if it differs), leaving the file itself, and other kernels', alone?"""
    import asyncio

    from ipykernel.ipkernel import IPythonKernel

    settings = config_of(handout.read("handout-problem1/jupyter-config/jupyter_server_config.py").decode())
    contents = settings.ServerApp.contents_manager_class(root_dir=str(tmp_path))
    nbformat.write(release_notebook("3.11.7"), tmp_path / "problem1.ipynb")
    nbformat.write(release_notebook("3.11.7", kernel="julia-1.10"), tmp_path / "other.ipynb")
    on_disk = (tmp_path / "problem1.ipynb").read_text()
    served = asyncio.run(contents.get("problem1.ipynb"))
    assert served["content"]["metadata"]["language_info"] == IPythonKernel.language_info
    assert (tmp_path / "problem1.ipynb").read_text() == on_disk
    other = asyncio.run(contents.get("other.ipynb"))
    assert other["content"]["metadata"]["language_info"]["version"] == "3.11.7"
    assert asyncio.run(contents.get("problem1.ipynb", content=False))["content"] is None
    assert asyncio.run(contents.get(""))["type"] == "directory"


def test_kernels_name_the_set_up_cell_before_it_ran(handout, tmp_path):
    """With the hand-out's kernel settings, does a cell run before the set-up cell end in a
    NameError that says to run the set-up cell first (the kit is not imported yet then), and
    one after the set-up in the plainer "run the cells above"?"""
    from nbclient import NotebookClient

    from assignments.devices import NAME_HINT, NO_SETUP_HINT

    # A profile of its own, read as the environment's etc/ipython is (tests/test_first_open.py
    # installs the hand-out and uses that one).
    profile = tmp_path / "ipython" / "profile_default"
    profile.mkdir(parents=True)
    (profile / "ipython_kernel_config.py").write_bytes(
        handout.read("handout-problem1/ipython-config/ipython_kernel_config.py"))
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("mesh = make_mesh((2, 4))"),  # a worked example, before the set-up
        nbformat.v4.new_code_cell("import assignments\nassignments.setup_devices(8, announce=True)"),
        nbformat.v4.new_code_cell("mesh = make_mesh((2, 4))"),
    ])
    env = {**os.environ, "IPYTHONDIR": str(tmp_path / "ipython")}
    client = NotebookClient(nb, timeout=120, kernel_name="python3", allow_errors=True,
                            resources={"metadata": {"path": str(tmp_path)}})
    with client.setup_kernel(env=env):
        for index, cell in enumerate(nb.cells):
            client.execute_cell(cell, index)
    before, after = nb.cells[0].outputs[-1], nb.cells[2].outputs[-1]
    assert before.ename == "NameError" and NO_SETUP_HINT in "\n".join(before.traceback)
    assert "first cell (the set-up) first; after a kernel restart, run it again" in " ".join(NO_SETUP_HINT.split())
    assert after.ename == "NameError" and NAME_HINT in "\n".join(after.traceback)
    assert NO_SETUP_HINT not in "\n".join(after.traceback)


def config_of(text: str, cwd: str | None = None):
    """A Jupyter config file's settings, as Jupyter loads it with `cwd` as working folder."""
    import tempfile

    here = os.getcwd()
    with tempfile.TemporaryDirectory() as folder:
        with open(os.path.join(folder, "config.py"), "w") as f:
            f.write(text)
        try:
            os.chdir(cwd or folder)
            return PyFileConfigLoader("config.py", path=folder).load_config()
        finally:
            os.chdir(here)


def test_instructor_and_student_share_nbgrader_exchange(tmp_path):
    """Do the course's nbgrader_config.py, the hand-out built with no --exchange and nbgrader's
    own default name the same exchange folder and course?"""
    course_id, exchange = course_settings()
    assert (course_id, exchange) == ("scaling-jax", Exchange.class_traits()["root"].default_value)
    assert DEFAULT_EXCHANGE == exchange
    zipped = zipfile.ZipFile(build_handout("problem1", str(tmp_path)))
    student = config_of(zipped.read("handout-problem1/jupyter-config/nbgrader_config.py").decode())
    assert Exchange(config=student).root == exchange
    assert CourseDirectory(config=student).course_id == course_id
    readme = zipped.read("handout-problem1/README.md").decode()
    assert exchange in readme and "cd handout-problem1 && ../.venv/bin/jupyter lab problem1/problem1.ipynb" in readme


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
    for setting in ("jupyter/labconfig/page_config.json", "jupyter/jupyter_server_config.py",
                    "jupyter/nbgrader_config.py", "jupyter/jupyter_server_config.d/scaling-jax-student.json",
                    "ipython/ipython_kernel_config.py"):
        assert any(n.endswith(f"data/etc/{setting}") for n in names), setting
    assert not any(n.startswith(("graders/", "solutions/")) for n in names)


# --- the hand-in check (assignments/handin.py) ----------------------------------------------

@pytest.fixture
def exchange(tmp_path, repo_root):
    """A released problem1 in an exchange, and a student's fetched copy of it."""
    import shutil

    outbound = tmp_path / "exchange" / "scaling-jax" / "outbound" / "problem1"
    shutil.copytree(os.path.join(repo_root, "release", "problem1"), outbound)
    (tmp_path / "exchange" / "scaling-jax" / "inbound").mkdir()
    shutil.copytree(outbound, tmp_path / "student" / "problem1")
    return tmp_path


def submit(tmp_path):
    """`nbgrader submit problem1` with the hand-out's Submit, from the student's folder."""
    config = Config()
    config.Exchange.root = str(tmp_path / "exchange")
    config.Exchange.assignment_dir = str(tmp_path / "student")
    config.Exchange.cache = str(tmp_path / "cache")
    config.CourseDirectory.course_id = "scaling-jax"
    config.CourseDirectory.assignment_id = "problem1"
    SubmitAskingIfUnchanged(coursedir=CourseDirectory(config=config), authenticator=Authenticator(config=config),
                            config=config).start()
    return os.listdir(tmp_path / "exchange" / "scaling-jax" / "inbound")


def test_submit_asks_again_before_handing_in_the_release_unchanged(exchange):
    """Is a notebook whose answer cells are the release's refused once, saying where Submit
    reads and what to do, and handed in when Submit is pressed again?"""
    with pytest.raises(ExchangeError) as refused:
        submit(exchange)
    message = " ".join(str(refused.value).split())
    assert "Nothing was handed in" in message and str(exchange / "student" / "problem1") in message
    assert "File > Save Notebook" in message and "press Submit again" in message
    assert not os.listdir(exchange / "exchange" / "scaling-jax" / "inbound")
    assert len(submit(exchange)) == 1  # the second press: confirmed


def test_submit_hands_in_work_at_once(exchange):
    """Is a notebook with one answer cell changed handed in at the first press, and outputs
    alone (cells run, nothing typed) not counted as work?"""
    path = exchange / "student" / "problem1" / "problem1.ipynb"
    nb = nbformat.read(path, as_version=4)
    code = next(c for c in nb.cells if c.cell_type == "code")
    code.outputs = [nbformat.v4.new_output("stream", name="stdout", text="ran\n")]
    nbformat.write(nb, path)
    with pytest.raises(ExchangeError):
        submit(exchange)
    answer = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("solution"))
    answer.source = answer.source.replace("raise NotImplementedError()", "return A")
    nbformat.write(nb, path)
    assert len(submit(exchange)) == 1


def test_submit_confirmation_is_for_the_same_notebook(exchange):
    """After a refusal, does a Submit of a different (still unchanged-answer) notebook ask again
    rather than take the first refusal as confirmation?"""
    with pytest.raises(ExchangeError):
        submit(exchange)
    path = exchange / "student" / "problem1" / "problem1.ipynb"
    nb = nbformat.read(path, as_version=4)
    nb.metadata["edited"] = True  # other bytes, the same answers
    nbformat.write(nb, path)
    with pytest.raises(ExchangeError):
        submit(exchange)


# --- a laptop: no course exchange, a hand-in uploaded instead ------------------------------------

def test_on_a_laptop_the_assignment_list_lists_the_handout_and_submit_names_the_upload(tmp_path, monkeypatch):
    """Where the course's exchange does not exist (a student's laptop), does nbgrader's
    Assignment List, run as JupyterLab runs it in the hand-out's folder with the hand-out's
    settings, list the course and problem1 as downloaded (no "exchange directory does not
    exist"), and does its Submit hand in nothing and name the file to upload, the one the
    hand-out's README says to upload?"""
    from nbgrader.server_extensions.assignment_list.handlers import AssignmentList

    zipped = zipfile.ZipFile(build_handout("problem1", str(tmp_path / "dist"),
                                           exchange=str(tmp_path / "no-exchange-here")))
    zipped.extractall(tmp_path / "laptop")
    folder = tmp_path / "laptop" / "handout-problem1"
    monkeypatch.setenv("JUPYTER_CONFIG_PATH", str(folder / "jupyter-config"))
    monkeypatch.setenv("JUPYTER_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.chdir(folder)  # the server's working folder, its root_dir (jupyter_server_config.py)
    manager = AssignmentList()
    manager.root_dir = str(folder)
    assert manager.list_courses() == {"success": True, "value": ["scaling-jax"]}
    listed = manager.list_assignments(course_id="scaling-jax")
    assert listed["success"], listed
    assert [(a["assignment_id"], a["status"], a["path"]) for a in listed["value"]] == [
        ("problem1", "fetched", "problem1")]
    for _ in range(2):  # the second press hands in nothing either (no "press again" here)
        submitted = manager.submit_assignment("scaling-jax", "problem1")
        assert not submitted["success"]
        note = submitted["value"].split("ExchangeError:", 1)[1]
        assert "Nothing was handed in: this computer has no course exchange" in note
        assert f"    {folder / 'problem1' / 'problem1.ipynb'}\n" in note, note
        assert "Careful: problem1.ipynb has no answer cell changed" in note
        assert all(len(line) <= 88 for line in note.splitlines() if "/" not in line), note  # a box that does not wrap
    assert manager.list_assignments(course_id="scaling-jax")["value"] == listed["value"]  # nothing submitted
    readme = (folder / "README.md").read_text()
    assert "**on your own computer**" in readme and "upload\n     `problem1/problem1.ipynb`" in readme
    # Answers typed in: the note says to upload, without the warning.
    path = folder / "problem1" / "problem1.ipynb"
    nb = nbformat.read(path, as_version=4)
    answer = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("solution"))
    answer.source = answer.source.replace("raise NotImplementedError()", "return A")
    nbformat.write(nb, path)
    note = manager.submit_assignment("scaling-jax", "problem1")["value"]
    assert "upload this" in note and "Careful" not in note


def test_where_the_course_exchange_exists_the_handout_uses_it(tmp_path, monkeypatch):
    """On the course's shared machine (its exchange there, the course's folder in it), does the
    same hand-out's nbgrader use that exchange and the Submit that hands in, not the stand-in?"""
    zipped = zipfile.ZipFile(build_handout("problem1", str(tmp_path / "dist"), exchange=str(tmp_path / "exchange")))
    zipped.extractall(tmp_path / "shared")
    (tmp_path / "exchange" / "scaling-jax").mkdir(parents=True)
    folder = tmp_path / "shared" / "handout-problem1"
    settings = config_of(zipped.read("handout-problem1/jupyter-config/nbgrader_config.py").decode(), cwd=str(folder))
    assert settings.Exchange.root == str(tmp_path / "exchange") and settings.ExchangeFactory.submit == SUBMIT_PLUGIN
    (tmp_path / "exchange" / "scaling-jax").rmdir()
    settings = config_of(zipped.read("handout-problem1/jupyter-config/nbgrader_config.py").decode(), cwd=str(folder))
    assert settings.Exchange.root == str(folder / ".exchange")
    assert settings.ExchangeFactory.submit.__name__ == "UploadInstead"
