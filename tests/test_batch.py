"""`python -m graders.batch`: finding submissions, atomic results, and resuming a stopped batch."""
from __future__ import annotations

import contextlib
import csv
import json
import os
import shutil
import signal
import subprocess
import sys
import time

import nbformat
import pytest
from grading import CODE_POINTS

from graders.batch import discover, is_current
from graders.files import sha256, write_atomic
from graders.results import Provenance, SubmissionResult
from graders.samples import notebook_from, sample_path

pytestmark = pytest.mark.stack_neutral  # the batch's bookkeeping (finding submissions, atomic results, resuming)

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SOLUTION_NB = os.path.join(REPO_ROOT, "solutions", "problem1", "problem1.ipynb")
RELEASE_NB = os.path.join(REPO_ROOT, "release", "problem1", "problem1.ipynb")
FAST = ["--cell-timeout", "10", "--case-timeout", "10", "--stall-timeout", "30"]


def batch_command(source, out, *extra):
    return [sys.executable, "-m", "graders.batch", "-a", "problem1", str(source), "-o", str(out),
            *FAST, *extra]


def submitted_tree(root) -> str:
    """An nbgrader submitted/ tree: alice (solution), bob (stub), carol (the sample mistakes),
    dave (a folder without a notebook)."""
    submitted = os.path.join(root, "submitted")
    with open(sample_path("problem1_mistakes.py")) as f:
        mistakes = notebook_from(RELEASE_NB, f.read())
    for student, nb in (("alice", nbformat.read(SOLUTION_NB, as_version=4)),
                        ("bob", nbformat.read(RELEASE_NB, as_version=4)), ("carol", mistakes)):
        folder = os.path.join(submitted, student, "problem1")
        os.makedirs(folder)
        nbformat.write(nb, os.path.join(folder, "problem1.ipynb"))
        with open(os.path.join(folder, "timestamp.txt"), "w") as f:
            f.write("2026-01-15 12:00:00.000000 UTC")
    os.makedirs(os.path.join(submitted, "dave", "problem1"))
    return submitted


def scores(out) -> dict[str, tuple]:
    """student -> (score, per-function outputs), from a batch's results.json files."""
    found = {}
    for student in sorted(os.listdir(out)):
        path = os.path.join(out, student, "results.json")
        if os.path.exists(path):
            with open(path) as f:
                data = json.load(f)
            found[student] = (data["score"], [(t["name"], t["score"], t["output"]) for t in data["tests"]])
    return found


def csv_rows(out) -> dict[str, dict]:
    with open(os.path.join(out, "gradebook.csv")) as f:
        return {r["student"]: r for r in csv.DictReader(f)}


def test_discover_nbgrader_tree(tmp_path):
    """Are students found in an nbgrader tree (or the course folder holding it), with the
    assignment's notebook preferred and a missing file reported?"""
    submitted = submitted_tree(tmp_path)
    extra = os.path.join(submitted, "carol", "problem1", "scratch.ipynb")
    shutil.copy(RELEASE_NB, extra)
    for source in (submitted, str(tmp_path)):
        found = {s.student: s for s in discover(source, "problem1")}
        assert sorted(found) == ["alice", "bob", "carol", "dave"]
        assert found["alice"].path.endswith(os.path.join("alice", "problem1", "problem1.ipynb"))
        assert found["carol"].path.endswith("problem1.ipynb") and "1 other file(s) ignored" in found["carol"].note
        assert found["dave"].path is None and "no .ipynb or .py file in dave/problem1/" in found["dave"].note


def test_discover_flat_folder(tmp_path):
    """In a folder of files, is each file one student named after it (the extension added
    only when two files share a name)?"""
    for name in ("erin.py", "frank.ipynb", "gus.py", "gus.ipynb", "notes.txt"):
        (tmp_path / name).write_text("")
    found = {s.student: s.path for s in discover(str(tmp_path), "problem1")}
    assert sorted(found) == ["erin", "frank", "gus.ipynb", "gus.py"]


def test_write_atomic_replaces_whole_files(tmp_path):
    """Does an atomic write leave the complete new text and no temporary file behind?"""
    path = tmp_path / "student" / "results.json"
    write_atomic(str(path), "old")
    write_atomic(str(path), "new text")
    assert path.read_text() == "new text"
    assert os.listdir(tmp_path / "student") == ["results.json"]


def test_is_current_needs_a_complete_grade_of_the_same_file():
    """Is a stored result reused only when complete (not a failure of the graders), for the
    same assignment, file and functions?"""
    stored = SubmissionResult("problem1", "a.py", [], provenance=Provenance(sha256="abc"))
    assert is_current(stored, "problem1", "abc", None)
    assert not is_current(stored, "problem1", "abd", None)
    assert not is_current(stored, "warmup", "abc", None)
    assert not is_current(stored, "problem1", "abc", ["roll_diff"])
    failed = SubmissionResult.failed("problem1", "a.py", "the graders crashed", graders_fault=True)
    failed.provenance = Provenance(sha256="abc")
    assert not is_current(failed, "problem1", "abc", None)
    assert not is_current(None, "problem1", "abc", None)


def gradings_of(submitted) -> dict[str, str]:
    """The gradings (`python -m graders`, not the batch) running on this machine of a file
    under `submitted`: student -> command line."""
    found = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                line = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if str(submitted) in line and "graders.batch" not in line:
            found[line.split(str(submitted))[1].split(os.sep)[1]] = line
    return found


@contextlib.contextmanager
def sigint_default():
    """SIGINT handled in this process for a moment, so that a child started now begins with
    SIGINT's default action (exec resets a handler, but keeps an ignored signal ignored)."""
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)


def interrupt(submitted, out, sig, printed, times: int = 1) -> tuple[int, list[str], set[str]]:
    """Run a batch of one worker into `out` (what it prints into the file `printed`) and send
    `sig` to its process alone once a grading is in flight after its first result (`times`
    times, 0.05 s apart). Returns its exit code, the results.json paths of the gradings in
    flight then, and the students whose grading ran after the signal."""
    # Started with SIGINT's default action, as a shell starts a command: an xdist worker
    # ignores SIGINT, and a child inherits that (Python then never raises KeyboardInterrupt).
    with open(printed, "w") as log, sigint_default():
        batch = subprocess.Popen(batch_command(submitted, out, "--workers", "1"), cwd=REPO_ROOT,
                                 stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        while batch.poll() is None and not (out.exists() and scores(out) and gradings_of(submitted)):
            time.sleep(0.1)  # until a grading is in flight after the first result
        in_flight = gradings_of(submitted)
        assert batch.poll() is None and in_flight, "the batch ended before it could be interrupted"
        for i in range(times):
            time.sleep(0.05 if i else 0)
            with contextlib.suppress(ProcessLookupError):
                os.kill(batch.pid, sig)
        after, deadline = set(), time.monotonic() + 30
        while time.monotonic() < deadline:
            running = gradings_of(submitted)
            after |= running.keys()
            if batch.poll() is not None and not running:
                break
            time.sleep(0.05)
    finally:
        if batch.poll() is None:
            os.killpg(batch.pid, signal.SIGKILL)
        batch.wait()
    outs = [line.split(" -o ")[1].split()[0] for line in in_flight.values()]
    return batch.returncode, outs, after - in_flight.keys()


def test_interrupted_batch_resumes_to_the_same_grades(tmp_path):
    """Stopped after its first result by Ctrl-C (twice), or killed (SIGKILL to the batch's process
    alone, as the kernel's OOM killer sends it), and run again: does a batch stop at once,
    leaving no grading running, keep what it had, grade the rest, and end with the grades of a
    batch run straight through?"""
    submitted = submitted_tree(tmp_path)
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    proc = subprocess.run(batch_command(submitted, straight, "--workers", "2"), cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr

    # Ctrl-C, pressed twice as an impatient instructor does: nothing queued starts, what runs
    # is stopped (the second press does not interrupt the stopping), and it says how to go on.
    code, _, started_after = interrupt(submitted, resumed, signal.SIGINT, tmp_path / "interrupted.out", times=2)
    printed = (tmp_path / "interrupted.out").read_text()
    assert code == 130 and "run the same command again to grade the rest" in " ".join(printed.split()), printed
    assert started_after == set(), f"gradings started after Ctrl-C: {started_after}"
    # SIGKILL: the grading in flight dies with the batch (left running, it would write its results).
    code, in_flight, _ = interrupt(submitted, resumed, signal.SIGKILL, tmp_path / "killed.out")
    assert code == -signal.SIGKILL
    for out in in_flight:
        assert not os.path.exists(out), "a grading outlived its killed batch"
        shutil.rmtree(os.path.dirname(out), ignore_errors=True)  # the killed batch's scratch
    first = scores(resumed)
    assert 1 <= len(first) <= 4
    assert not (resumed / "gradebook.csv").exists() or len(first) == 4

    proc = subprocess.run(batch_command(submitted, resumed, "--workers", "2"), cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert scores(resumed) == scores(straight)
    assert {s: first[s] for s in first} == {s: scores(resumed)[s] for s in first}, "a kept grade changed"
    rows = csv_rows(resumed)
    assert sum(r["status"] == "kept" for r in rows.values()) == len(first)
    assert {s: r["score"] for s, r in rows.items()} == {s: r["score"] for s, r in csv_rows(straight).items()}
    assert float(rows["alice"]["score"]) == CODE_POINTS and float(rows["bob"]["score"]) == 0
    assert 0 < float(rows["carol"]["score"]) < CODE_POINTS
    assert float(rows["dave"]["score"]) == 0
    dave = json.loads((resumed / "dave" / "results.json").read_text())
    assert "no submission: no .ipynb or .py file in dave/problem1/" in dave["output"]
    assert not [n for n in os.listdir(straight / "alice") if n != "results.json"]

    # A changed submission and a damaged results.json are graded again; the rest are kept.
    bob = os.path.join(submitted, "bob", "problem1", "problem1.ipynb")
    shutil.copy(SOLUTION_NB, bob)
    (resumed / "carol" / "results.json").write_text('{"score": 11, "tests": [')
    proc = subprocess.run(batch_command(submitted, resumed, "--workers", "2"), cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = csv_rows(resumed)
    assert {s: r["status"] for s, r in rows.items()} == {
        "alice": "kept", "bob": "graded", "carol": "graded", "dave": "kept"}
    assert float(rows["bob"]["score"]) == CODE_POINTS and rows["bob"]["sha256"] == sha256(open(bob, "rb").read())
    assert rows["carol"]["score"] == csv_rows(straight)["carol"]["score"]


def test_unknown_assignment_is_refused(tmp_path):
    """Does an unknown assignment name stop the command at once, listing the known ones?"""
    proc = subprocess.run([sys.executable, "-m", "graders.batch", "-a", "nope", str(tmp_path)],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "unknown assignment 'nope'; known: " in proc.stderr


def test_workers_below_one_are_refused(tmp_path):
    """Is `--workers 0` an error saying what to give (it graded with one worker, silently)?"""
    proc = subprocess.run([sys.executable, "-m", "graders.batch", "-a", "problem1", str(tmp_path), "--workers", "0"],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "--workers/-j: '0': give a whole number of at least 1" in proc.stderr


@pytest.mark.parametrize("command", ["graders.batch", "graders"])
def test_a_results_folder_that_cannot_be_written_is_refused_before_grading(tmp_path, command):
    """Does an output folder that cannot be made (here under a file) stop `graders.batch` and
    `python -m graders` before any grading, saying which folder and what to do, rather than
    with a traceback once the grades are in?"""
    (tmp_path / "alice.py").write_text("x = 1\n")
    (tmp_path / "a-file").write_text("")
    folder = tmp_path / "a-file" / "graded"
    source, out = ((tmp_path, folder) if command == "graders.batch"
                   else (tmp_path / "alice.py", folder / "results.json"))
    proc = subprocess.run([sys.executable, "-m", command, str(source), "-a", "problem1", "-o", str(out)],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert f"cannot write into {folder} (Not a directory): pass -o a" in proc.stderr, proc.stderr


def test_gradebook_csv_cells_never_start_a_formula(tmp_path):
    """Do student names and problem texts that start like a spreadsheet formula (=, +, -, @,
    tab, carriage return) land in gradebook.csv as text, the scores as numbers?"""
    from assignments.contracts import get_assignment
    from graders.gradebooks import write_gradebook_csv
    from graders.results import PartResult

    parts = get_assignment("problem1").parts
    hostile = ['=HYPERLINK("http://evil","alice")', "+1+1", "-2", "@SUM(A1)", "\tx", "\rx"]
    rows = []
    for name in hostile:
        result = SubmissionResult("problem1", name, [PartResult(p.name, p.points, [], note=name) for p in parts])
        result.provenance = Provenance(student=name, path=f"/x/{name}.py")
        rows.append((name, "graded", result))
    path = tmp_path / "gradebook.csv"
    write_gradebook_csv(str(path), rows, parts)
    with open(path, newline="") as f:
        table = list(csv.DictReader(f))
    assert [r["student"] for r in table] == ["'" + name for name in hostile]
    for row in table:
        assert all(not str(v).startswith(("=", "+", "-", "@", "\t", "\r")) for v in row.values()), row
        assert float(row["score"]) == 0
