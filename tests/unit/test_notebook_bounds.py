"""A notebook is bounded on its bytes before anything parses it (`graders.notebook_bounds`): the
scan's depth and JSON values against a parser's own count, on hand-built and random JSON
(brackets, commas and escaped quotes inside strings count for nothing, blocks split anywhere);
the bomb that took nbgrader's process from 125 MiB to 627 MiB is refused with the limit and the
fix; the course's own notebooks pass; `read_submission` and nbgrader's exporter apply it; and
`nbgrader autograde`'s process group sits beside its workers' groups (on a folder laid out like
cgroup v2)."""
from __future__ import annotations

import json
import os
import random

import pytest

from assignments.contracts import ASSIGNMENTS
from graders import notebook_bounds
from graders.files import NotASubmission, read_submission
from graders.notebook_bounds import NotebookTooLarge, check_notebook, scan
from graders.settings import Limits

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SOLUTION = os.path.join(REPO_ROOT, "solutions", "problem1", "problem1.ipynb")


def parsed(value, level: int = 1) -> tuple[int, int]:
    """(depth, values) of a parsed JSON value, counted on the objects a parser built."""
    if isinstance(value, (dict, list)):
        children = [parsed(v, level + 1) for v in (value.values() if isinstance(value, dict) else value)]
        return max([level] + [d for d, _ in children]), 1 + sum(n for _, n in children)
    return level - 1, 1


def bomb(objects: int = 200_000) -> bytes:
    """The released notebook with `objects` empty objects in its metadata (0.6 MiB for 200,000)."""
    with open(os.path.join(REPO_ROOT, "release", "problem1", "problem1.ipynb")) as f:
        nb = json.load(f)
    nb["metadata"]["bomb"] = [{}] * objects
    return json.dumps(nb, separators=(",", ":")).encode()


HAND_MADE = [
    "[]", "{}", "[ ]", "{ \n}", "0", '"[{,"', "[[],[]]", "[[[]]]", '{"a":{"b":[1,{}]}}',
    '[1, 2, "a,b[{", "]}"]',                           # brackets and commas in strings
    r'["\"[[[", "\\", "\\\"{,", "x\\\\"]',             # escaped quotes and backslashes
    r'{"\\": [], "k\"": {"\"": [[1], ""]}}',           # ... in keys too
    '{"cells": [{"source": ["print(\\"{[\\")\\n", "x = [1, 2]"], "outputs": []}]}',
    '[null, true, false, -1.5e3, NaN, Infinity, "\\u005b"]',
]


@pytest.mark.parametrize("block", [1, 2, 3, 7, 1 << 22])
@pytest.mark.parametrize("text", HAND_MADE)
def test_the_scan_counts_what_a_parser_builds(text, block, monkeypatch):
    """Does the scan find the depth and values a parser finds, whatever is inside strings
    (brackets, commas, escaped quotes and backslashes), and wherever its blocks split the bytes?"""
    monkeypatch.setattr(notebook_bounds, "_BLOCK", block)
    shape = scan(text.encode())
    assert (shape.depth, shape.nodes) == parsed(json.loads(text)), text
    assert shape.size == len(text.encode())


def random_json(rng: random.Random, level: int = 0):
    kind = rng.randrange(6 if level < 8 else 3)
    if kind == 0:
        return rng.choice([None, True, False, 0, -2.5, 10**20])
    if kind in (1, 2):
        return "".join(rng.choice('ab"\\[]{},: \n\u00e9\u4e2d') for _ in range(rng.randrange(6)))
    if kind in (3, 4):
        return [random_json(rng, level + 1) for _ in range(rng.randrange(4))]
    return {random_json(rng, 9) if rng.random() < 0.9 else "": random_json(rng, level + 1)
            for _ in range(rng.randrange(4))}


@pytest.mark.parametrize("seed", range(4))
def test_the_scan_agrees_with_the_parser_on_random_json(seed, monkeypatch):
    """On random documents (strings full of quotes, backslashes, brackets and non-ASCII text,
    written with and without white space and escapes), split into blocks of 5 bytes, is the
    scan exact?"""
    monkeypatch.setattr(notebook_bounds, "_BLOCK", 5)
    rng = random.Random(seed)
    for _ in range(100):
        value = random_json(rng)
        expected = parsed(value)
        for text in (json.dumps(value), json.dumps(value, indent=1, ensure_ascii=False)):
            shape = scan(text.encode())
            assert (shape.depth, shape.nodes) == expected, text


def test_the_bomb_is_refused_naming_the_limit_and_the_fix():
    """The 0.6 MiB notebook of 200,000 empty objects in its metadata (nbgrader's process: 125 MiB
    to 627 MiB): refused on its bytes, its values counted, the limit and the fix named."""
    data = bomb()
    assert len(data) < 2**20
    shape = scan(data)
    assert shape.nodes == parsed(json.loads(data))[1] > 200_000
    with pytest.raises(NotebookTooLarge, match=r"^problem1.ipynb has 200,\d{3} JSON nodes, more than the 100,000 "
                                               r"allowed \(c.Limits.notebook_nodes\): clear the notebook's outputs"):
        check_notebook(data, Limits(), "problem1.ipynb")
    assert issubclass(NotebookTooLarge, NotASubmission)  # every route's refusal: a zero with the message


def test_too_deep_and_too_large_are_refused():
    deep = b'{"cells": [], "metadata": {"x": ' + b"[" * 100 + b"]" * 100 + b"}}"
    with pytest.raises(NotebookTooLarge, match=r"nests its JSON 102 levels deep, more than the 64 allowed "
                                               r"\(c.Limits.notebook_depth"):
        check_notebook(deep, Limits(), "problem1.ipynb")
    check_notebook(deep, Limits(notebook_depth=102))
    unclosed = b"[" * 70  # a parser recurses before it finds the end missing
    with pytest.raises(NotebookTooLarge, match="70 levels"):
        check_notebook(unclosed, Limits())
    with pytest.raises(NotebookTooLarge, match=r"larger than 1 MiB \(c.Limits.submission_mib\)"):
        check_notebook(b" " * (2**20 + 1), Limits(submission_mib=1))


def test_the_courses_notebooks_pass_far_below_the_limits():
    """Are the course's notebooks (solutions, releases) far within the default limits: depth
    at most 7 of 64, values at most 2,500 of 100,000 (run with outputs they hold about 2,100)?"""
    limits = Limits()
    for folder in ("solutions", "release"):
        for name in ASSIGNMENTS:
            with open(os.path.join(REPO_ROOT, folder, name, f"{name}.ipynb"), "rb") as f:
                data = f.read()
            shape = check_notebook(data, limits, name)
            assert (shape.depth, shape.nodes) == parsed(json.loads(data))
            assert shape.depth <= 7 and shape.nodes <= 2_500, (folder, name, shape)


def test_read_submission_bounds_a_notebook_to_grade_only(tmp_path):
    """Is a notebook to grade refused (a `NotASubmission`, as every route expects), with the
    limits given or the course's; a .py file not read as JSON; a file only copied (`limit`,
    nbgrader's collect) read whole?"""
    (tmp_path / "bomb.ipynb").write_bytes(bomb())
    (tmp_path / "bomb.py").write_bytes(bomb())
    with pytest.raises(NotASubmission, match=r"bomb.ipynb has 200,\d{3} JSON nodes, more than the 100,000 allowed"):
        read_submission(str(tmp_path / "bomb.ipynb"), str(tmp_path))
    assert read_submission(str(tmp_path / "bomb.py"), str(tmp_path)) == bomb()
    assert read_submission(str(tmp_path / "bomb.ipynb"), str(tmp_path), limit=2**40) == bomb()
    assert read_submission(str(tmp_path / "bomb.ipynb"), limits=Limits(notebook_nodes=300_000)) == bomb()
    with pytest.raises(NotebookTooLarge, match="more than the 500 allowed"):
        read_submission(SOLUTION, limits=Limits(notebook_nodes=500))
    (tmp_path / "large.py").write_bytes(b"#" * (2**20 + 1))
    with pytest.raises(NotASubmission, match=r"larger than 1 MiB \(c.Limits.submission_mib\)"):
        read_submission(str(tmp_path / "large.py"), limits=Limits(submission_mib=1))


def test_nbgraders_exporter_checks_before_parsing(tmp_path, monkeypatch):
    """Does the exporter `nbgrader autograde` reads notebooks with refuse the bomb before
    nbformat parses it, read the solution as nbconvert's own would, and bound no process that
    is not the `nbgrader autograde` command (this one is pytest)?"""
    import nbformat

    from graders import nbgrader_bounds

    monkeypatch.setattr(nbformat, "reads", lambda *a, **k: pytest.fail("parsed before it was checked"))
    (tmp_path / "bomb.ipynb").write_bytes(bomb())
    exporter = nbgrader_bounds.BoundedNotebookExporter()
    with pytest.raises(NotebookTooLarge, match=r"bomb.ipynb has 200,\d{3} JSON nodes"):
        exporter.from_filename(str(tmp_path / "bomb.ipynb"))
    monkeypatch.undo()
    from nbconvert.exporters import NotebookExporter

    assert exporter.from_filename(SOLUTION)[0] == NotebookExporter().from_filename(SOLUTION)[0]
    assert not nbgrader_bounds.is_autograde_command()


@pytest.fixture
def fake_v2(tmp_path, monkeypatch):
    """A v2 hierarchy with memory and pids; this process alone in /course, no controllers handed down."""
    from graders import cgroups

    (tmp_path / "cgroup.controllers").write_text("cpu memory pids\n")
    course = tmp_path / "course"
    course.mkdir()
    (course / "cgroup.controllers").write_text("memory pids\n")
    (course / "cgroup.subtree_control").write_text("")
    (course / "cgroup.procs").write_text(f"{os.getpid()}\n")
    monkeypatch.setattr(cgroups, "ROOT", str(tmp_path))
    monkeypatch.setattr(cgroups, "_own_cgroups", lambda: {"": "/course"})
    monkeypatch.setattr(cgroups.atexit, "register", lambda *a: None)
    return course


def test_a_bounded_process_has_its_group_and_its_workers_theirs_beside_it(fake_v2, monkeypatch):
    """Does `bound_process` make `PROCESS`-<pid> beneath the process's group (its controllers
    handed down first), bounded, with the process in it; and once there, are its workers'
    groups made beside it (never beneath, where its bound would be theirs), and is it not
    moved twice?"""
    from graders import cgroups

    bounded, where = cgroups.bound_process(2**30)
    group = fake_v2 / f"{cgroups.PROCESS}-{os.getpid()}"
    assert bounded and where == str(group)
    assert (group / "memory.max").read_text() == str(2**30) and (group / "memory.swap.max").read_text() == "0"
    assert (group / "cgroup.procs").read_text() == str(os.getpid())
    assert (fake_v2 / "cgroup.subtree_control").read_text() == "+memory +pids"
    monkeypatch.setattr(cgroups, "_own_cgroups", lambda: {"": f"/course/{group.name}"})
    assert cgroups.bound_process(2**30) == (True, f"already in its own memory cgroup (/course/{group.name})")
    worker = cgroups._make("w1", 2**29, 64)
    assert worker.folders["memory"] == str(fake_v2 / "w1")


def test_no_bound_where_no_group_can_be_made(tmp_path, monkeypatch):
    """Where no memory controller is mounted, does `bound_process` say so, and change nothing?"""
    from graders import cgroups

    monkeypatch.setattr(cgroups, "ROOT", str(tmp_path))
    monkeypatch.setattr(cgroups, "_own_cgroups", lambda: {"": "/"})
    assert cgroups.bound_process(2**30) == (False, "no cgroup hierarchy with a memory controller is mounted")
    assert os.listdir(tmp_path) == []
