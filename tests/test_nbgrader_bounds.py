"""nbgrader's own process is bounded (issue 49): a notebook bomb (200,000 empty objects in its
metadata, 0.6 MiB, which took `nbgrader autograde` from 125 MiB to 627 MiB) is refused on its
bytes before nbformat parses it, on nbgrader's route and the kit's, failing only its student,
and `nbgrader autograde` runs in a memory cgroup of its own. Limits scaled down: 50,000 JSON
values, 1 GiB for nbgrader."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time

import nbformat
import pytest

from graders import cgroups
from graders.build import solved_notebook
from graders.demo import prepare_course, read_gradebook
from graders.results import read_results

pytestmark = [pytest.mark.slow, pytest.mark.nbgrader]

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PEAK_BOUND_MIB = 400
"""nbgrader autograde's peak here: about 135 MiB with the bounds, 620 MiB without (the bomb
parsed), on this course of two."""


def bomb_notebook(release: str) -> str:
    with open(release) as f:
        nb = json.load(f)
    nb["metadata"]["bomb"] = [{}] * 200_000
    return json.dumps(nb)


def run_measured(command: list[str], cwd: str) -> tuple[subprocess.CompletedProcess, int, list[int]]:
    """Run `command`, polling its own process's peak resident memory (VmHWM: its workers, in
    processes of their own, not counted) and the peak of the memory cgroup it bounds itself in
    (what it allocates once there): (completed process, peak bytes, the cgroup's peaks seen)."""
    env = {**os.environ, "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")}
    proc = subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out: dict[str, str] = {}
    readers = [threading.Thread(target=lambda n=n, s=s: out.__setitem__(n, s.read()))
               for n, s in (("stdout", proc.stdout), ("stderr", proc.stderr))]
    for reader in readers:
        reader.start()
    peak, group_peaks = 0, []
    own = cgroups._own_cgroups()
    group = os.path.join(cgroups._v2_folder(own) or cgroups._v1_folder("memory", own) or "/nowhere",
                         f"{cgroups.PROCESS}-{proc.pid}")
    while proc.poll() is None:
        try:
            with open(f"/proc/{proc.pid}/status") as f:
                peak = max([peak] + [int(line.split()[1]) * 1024 for line in f if line.startswith("VmHWM:")])
            for name in ("memory.max_usage_in_bytes", "memory.peak"):  # cgroup v1, v2
                if os.path.exists(os.path.join(group, name)):
                    with open(os.path.join(group, name)) as f:
                        group_peaks.append(int(f.read()))
        except (OSError, ValueError):
            pass
        time.sleep(0.02)
    for reader in readers:
        reader.join()
    return subprocess.CompletedProcess(command, proc.returncode, out["stdout"], out["stderr"]), peak, group_peaks


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    """A course of two: `bomb` hands in the release with the bomb in its metadata, `solution`
    the solved notebook; autograded once, its peak memory measured."""
    course = str(tmp_path_factory.mktemp("bounds"))
    prepare_course("problem1", course)
    with open(os.path.join(course, "nbgrader_config.py"), "a") as f:
        f.write("c.Limits.notebook_nodes = 50_000\nc.Limits.nbgrader_memory_gib = 1.0\n")
    notebooks = {"bomb": bomb_notebook(os.path.join(course, "release", "problem1", "problem1.ipynb")),
                 "solution": nbformat.writes(solved_notebook(os.path.join(course, "source", "problem1",
                                                                          "problem1.ipynb")))}
    for student, text in notebooks.items():
        folder = os.path.join(course, "submitted", student, "problem1")
        os.makedirs(folder)
        with open(os.path.join(folder, "problem1.ipynb"), "w") as f:
            f.write(text)
    command = [sys.executable, "-m", "nbgrader", "autograde", "problem1", "--force"]
    proc, peak, group_peaks = run_measured(command, course)
    return course, proc, peak, group_peaks


def test_autograde_fails_only_the_bomb_naming_the_limit(course):
    """Does `nbgrader autograde` refuse the bomb before parsing it, its log naming the count,
    the limit and the fix, fail that student only, and grade the other fully?"""
    path, proc, _, _ = course
    log = proc.stdout + proc.stderr
    assert re.search(r"not reading \S+/submitted/bomb/problem1/problem1.ipynb: \S+ has 200,\d{3} JSON nodes, more "
                     r"than the 50,000 allowed \(c.Limits.notebook_nodes\): clear the notebook's outputs", log), log
    assert proc.returncode != 0  # nbgrader's way of saying one student failed
    assert "There was an error processing assignment 'problem1' for student 'bomb'" in log
    assert "for student 'solution'" not in log
    assert not os.path.exists(os.path.join(path, "autograded", "bomb", "problem1", "problem1.ipynb"))
    book = read_gradebook(path, "problem1")
    auto = {name: score for name, (score, _, manual) in book["solution"].items() if not manual}
    assert sum(auto.values()) == 10 and len(auto) == 5, book["solution"]
    assert not any(score for score, _, _ in book.get("bomb", {}).values())


def test_autograde_memory_stays_bounded(course):
    """Does the nbgrader process stay far below what parsing the bomb takes (620 MiB here), in
    a memory cgroup of its own at the configured 1 GiB where one can be made (the log says
    which), removed when it exits?"""
    _, proc, peak, group_peaks = course
    log = proc.stdout + proc.stderr
    assert 0 < peak < PEAK_BOUND_MIB * 2**20, f"nbgrader autograde peaked at {peak / 2**20:.0f} MiB"
    if cgroups.problem() is None:
        found = re.search(r"nbgrader autograde holds at most 1 GiB \(c.Limits.nbgrader_memory_gib\): "
                          r"memory cgroup (\S+)", log)
        assert found, log
        assert os.path.basename(found.group(1)).startswith(cgroups.PROCESS + "-")
        assert not os.path.exists(found.group(1)), "the process's cgroup outlived it"
        assert group_peaks and max(group_peaks) < PEAK_BOUND_MIB * 2**20
    else:
        assert "nbgrader autograde runs without a memory bound of its own" in log, log


def test_the_kits_routes_give_the_bomb_zero_with_the_message(course, tmp_path):
    """`python -m graders` on the bomb: 0, with the count, the limit and the fix (default limits);
    `graders.batch` over the course: the bomb 0 with the same message, the solution full marks."""
    path, _, _, _ = course
    bomb = os.path.join(path, "submitted", "bomb", "problem1", "problem1.ipynb")
    out = tmp_path / "results.json"
    proc = subprocess.run([sys.executable, "-m", "graders", bomb, "-a", "problem1", "-o", str(out)],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    message = r"has 200,\d{3} JSON nodes, more than the 100,000 allowed \(c.Limits.notebook_nodes\)"
    assert re.search(message, proc.stdout), proc.stdout
    result = read_results(str(out))
    assert result.score == 0 and re.search(message, " ".join(result.messages))
    graded = tmp_path / "graded"
    proc = subprocess.run([sys.executable, "-m", "graders.batch", "-a", "problem1", os.path.join(path, "submitted"),
                           "-o", str(graded), "--workers", "2"], cwd=REPO_ROOT, capture_output=True, text=True,
                          timeout=900)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    bombed, solved = (read_results(str(graded / s / "results.json")) for s in ("bomb", "solution"))
    assert bombed.score == 0 and re.search(message, " ".join(bombed.messages))
    assert solved.score == solved.max_score
