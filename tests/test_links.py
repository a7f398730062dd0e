"""Only regular files are submissions, on every route a submission reaches the kit by.

A symbolic link handed in as a submission (`alice.py -> /proc/self/cwd/solutions/problem1.py`,
`problem1.py -> ../source/.grading-secret`; an LMS zip unpacked with `unzip` keeps links, and a
tar archive too) must be refused with 0 and a clear message, and nothing it names may ever be
read: not graded, not copied into autograded/ or feedback/, not quoted in any output.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile

import nbformat
import pytest

from graders.batch import discover, run_batch
from graders.build import nbgrader
from graders.demo import prepare_course, read_gradebook
from graders.files import NotASubmission, check_submission, read_submission
from graders.settings import Limits

pytestmark = pytest.mark.stack_neutral  # links and special files refused on every route

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SOLUTION = os.path.join(REPO_ROOT, "solutions", "problem1.py")
SOLUTION_NB = os.path.join(REPO_ROOT, "solutions", "problem1", "problem1.ipynb")
SECRET = "the kit's own tests"  # tests/conftest.py's course secret
FAST = Limits(cell_timeout=10, case_timeout=10, stall_timeout=30)
ONLY = ["shard_average_jit"]


@pytest.fixture
def secret_file(tmp_path):
    """A file standing for the course's secret: what a link would try to have read."""
    path = tmp_path / "grading-secret"
    path.write_text("SECRET-5b1e-do-not-show\n")
    return str(path)


def test_reading_refuses_links_fifos_and_linked_folders(tmp_path, secret_file):
    """Does the one reader of submissions refuse a link, a link in a folder on the way, a FIFO
    (without blocking on it) and a folder, naming what it is, and read a regular file?"""
    (tmp_path / "ok.py").write_text("x = 1\n")
    assert read_submission(str(tmp_path / "ok.py"), str(tmp_path)) == b"x = 1\n"
    os.symlink(secret_file, tmp_path / "link.py")
    os.makedirs(tmp_path / "real")
    (tmp_path / "real" / "f.py").write_text("y = 2\n")
    os.symlink(tmp_path / "real", tmp_path / "linked")
    os.mkfifo(tmp_path / "fifo.py")
    for name, what in (("link.py", "a symbolic link"), ("linked/f.py", "a symbolic link"),
                       ("fifo.py", "a FIFO"), ("real", "a folder")):
        with pytest.raises(NotASubmission, match=what):
            read_submission(str(tmp_path / name), str(tmp_path))
    check_submission(str(tmp_path / "real" / "f.py"), str(tmp_path))
    for missing in (tmp_path / "gone.py", tmp_path / "gone" / "f.py"):  # no hint about links there
        with pytest.raises(NotASubmission, match=f"^{tmp_path / 'gone'}(.py)? does not exist$"):
            read_submission(str(missing), str(tmp_path))
    with pytest.raises(NotASubmission, match="cannot be read: No such file or directory"):
        read_submission(str(tmp_path / "gone" / "f.py"))  # no trusted folder: its own folder is missing


def test_python_m_graders_says_when_there_is_no_file(tmp_path):
    """Is a mistyped path to `python -m graders` an error at once, not a zero for every case?"""
    proc = subprocess.run([sys.executable, "-m", "graders", str(tmp_path / "alcie.py"), "-a", "problem1"],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f"no file at {tmp_path / 'alcie.py'}: pass the student's .ipynb or .py" in proc.stderr


def test_python_m_graders_refuses_a_linked_file(tmp_path):
    """Does `python -m graders` on a link to the solutions give 0, saying it is a link?"""
    os.symlink(SOLUTION, tmp_path / "alice.py")
    out = tmp_path / "results.json"
    proc = subprocess.run([sys.executable, "-m", "graders", str(tmp_path / "alice.py"), "-a", "problem1",
                           "--only", *ONLY, "-o", str(out), "--quiet"], cwd=REPO_ROOT, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    results = json.loads(out.read_text())
    assert results["score"] == 0 and "is a symbolic link: only regular files are graded" in results["output"]


def test_a_batch_folder_refuses_links_and_grades_the_rest(tmp_path, secret_file):
    """In a flat folder and in an nbgrader tree, are a linked file (the issue's
    `alice.py -> /proc/self/cwd/solutions/problem1.py`), a linked student folder and a FIFO
    refused with 0 and nothing read, while a regular file is graded?"""
    flat = tmp_path / "flat"
    flat.mkdir()
    os.symlink("/proc/self/cwd/solutions/problem1.py", flat / "alice.py")
    os.symlink(secret_file, flat / "eve.py")
    os.mkfifo(flat / "fifo.py")
    (flat / "bob.py").write_text(open(SOLUTION).read())
    tree = tmp_path / "submitted"
    (tree / "carol" / "problem1").mkdir(parents=True)
    (tree / "carol" / "problem1" / "problem1.py").write_text(open(SOLUTION).read())
    os.symlink(tree / "carol", tree / "dave")  # dave's folder is carol's
    for source, expected in ((flat, {"alice": 0, "eve": 0, "fifo": 0, "bob": 2}),
                             (tree, {"carol": 2, "dave": 0})):
        outcomes = run_batch(discover(str(source), "problem1"), "problem1", str(tmp_path / f"graded-{source.name}"),
                             workers=1, limits=FAST, only=ONLY)
        scores = {o.submission.student: o.result.score for o in outcomes}
        assert scores == expected
        for o in outcomes:
            if not scores[o.submission.student]:
                assert "only regular files are graded" in o.result.failure.message
                assert not o.result.failure.graders_fault
                assert "SECRET" not in json.dumps(o.result.to_json())


def test_gradescope_refuses_a_linked_submission(tmp_path, secret_file):
    """Does the Gradescope run refuse `submission/problem1.py -> ../source/.grading-secret`,
    with 0 and a message that quotes nothing of the file?"""
    from graders.gradescope import run

    root = tmp_path / "autograder"
    (root / "source").mkdir(parents=True)
    (root / "source" / "gradescope.json").write_text(json.dumps({"assignment": "problem1", "visibility": {}}))
    (root / "source" / ".grading-secret").write_text(open(secret_file).read())
    (root / "submission").mkdir()
    os.symlink("../source/.grading-secret", root / "submission" / "problem1.py")
    result = run(str(root))
    written = (root / "results" / "results.json").read_text()
    assert result.score == 0 and "is a symbolic link" in result.failure.message
    assert "SECRET" not in written


@pytest.mark.slow
@pytest.mark.nbgrader
def test_nbgrader_refuses_linked_files_and_keeps_nothing_they_name(tmp_path, secret_file):
    """In nbgrader's submitted/ tree, does autograde give a linked notebook 0 (saying why),
    and does neither autograded/ nor feedback/ keep a copy of a linked file handed in beside a
    real notebook?"""
    course = str(tmp_path / "course")
    os.makedirs(course)
    prepare_course("problem1", course)
    alice = os.path.join(course, "submitted", "alice", "problem1")
    bob = os.path.join(course, "submitted", "bob", "problem1")
    os.makedirs(alice)
    os.makedirs(bob)
    os.symlink(SOLUTION_NB, os.path.join(alice, "problem1.ipynb"))
    nbformat.write(nbformat.read(SOLUTION_NB, 4), os.path.join(bob, "problem1.ipynb"))
    os.symlink(secret_file, os.path.join(bob, "notes.txt"))
    nbgrader(["autograde", "problem1"], cwd=course)
    nbgrader(["generate_feedback", "problem1"], cwd=course)
    book = read_gradebook(course, "problem1")
    assert sum(score for name, (score, _, waiting) in book["alice"].items() if not waiting) == 0
    assert sum(score for name, (score, _, waiting) in book["bob"].items() if not waiting) == 0
    graded = nbformat.read(os.path.join(course, "autograded", "alice", "problem1", "problem1.ipynb"), 4)
    assert "only regular files are graded" in json.dumps(graded)
    for root, _, files in os.walk(course):
        for name in files:
            if root.startswith(os.path.join(course, "submitted")):
                continue
            with open(os.path.join(root, name), "rb") as f:
                assert b"SECRET-5b1e" not in f.read(), os.path.join(root, name)


@pytest.mark.slow
@pytest.mark.nbgrader
def test_nbgrader_collect_and_zip_collect_leave_links_out(tmp_path, secret_file):
    """Does `nbgrader collect` (the exchange) leave out a link a student planted in the inbound
    folder, and `nbgrader zip_collect` one an LMS tar archive held, so that submitted/ never
    holds a copy of what they name?"""
    course = str(tmp_path / "course")
    os.makedirs(course)
    prepare_course("problem1", course)
    exchange = tmp_path / "exchange"
    inbound = exchange / "scaling-jax" / "inbound" / "mallory+problem1+2026-01-30 15:00:00.000000 UTC"
    inbound.mkdir(parents=True)
    nbformat.write(nbformat.read(SOLUTION_NB, 4), str(inbound / "problem1.ipynb"))
    (inbound / "timestamp.txt").write_text("2026-01-30 15:00:00.000000 UTC")
    os.symlink(secret_file, inbound / "secret.txt")
    proc = nbgrader(["collect", "problem1", f"--Exchange.root={exchange}"], cwd=course, check=False)
    collected = os.path.join(course, "submitted", "mallory", "problem1")
    assert os.path.isfile(os.path.join(collected, "problem1.ipynb")), proc.stdout + proc.stderr
    assert not os.path.lexists(os.path.join(collected, "secret.txt"))
    assert "Not collected" in proc.stdout + proc.stderr

    archive = tmp_path / "course" / "downloaded" / "problem1" / "archive"
    archive.mkdir(parents=True)
    with tarfile.open(archive / "lms.tar.gz", "w:gz") as tar:
        tar.add(SOLUTION_NB, arcname="trudy_problem1.ipynb")
        link = tarfile.TarInfo("oscar_problem1.ipynb")
        link.type, link.linkname = tarfile.SYMTYPE, secret_file
        tar.addfile(link)
    regexp = r".*/(?P<student_id>[a-z]+)_(?P<file_id>problem1\.ipynb)"
    proc = nbgrader(["zip_collect", "problem1", f"--FileNameCollectorPlugin.named_regexp={regexp}",
                     "--zip_ext=.gz"], cwd=course, check=False)
    assert os.path.isfile(os.path.join(course, "submitted", "trudy", "problem1", "problem1.ipynb")), proc.stderr
    assert not os.path.lexists(os.path.join(course, "submitted", "oscar", "problem1", "problem1.ipynb"))
    for root, _, files in os.walk(os.path.join(course, "submitted")):
        for name in files:
            assert not os.path.islink(os.path.join(root, name))
            with open(os.path.join(root, name), "rb") as f:
                assert b"SECRET-5b1e" not in f.read()


def test_collect_is_not_raced_into_copying_what_a_link_names(tmp_path):
    """While collect runs, a student swaps their notebook with a link to the instructor's file
    again and again (renameat2's exchange): does any collected copy ever hold the linked file's
    text, or a link? (A check-then-copy loses this race a few times in a few hundred.)"""
    import logging

    from nbgrader.auth import Authenticator
    from nbgrader.coursedir import CourseDirectory

    from graders.collect import CollectRegularFiles

    secret = tmp_path / "instructor-source.ipynb"
    secret.write_text('{"SECRET": 1}')
    inbound = tmp_path / "inbound" / "mallory+problem1"
    inbound.mkdir(parents=True)
    (inbound / "problem1.ipynb").write_text('{"student work": 1}')
    os.symlink(secret, inbound / ".link")

    # A process of its own, started by exec: forking this process (JAX's threads) could deadlock.
    swap_forever = ("import ctypes, sys\n"
                    "libc = ctypes.CDLL(None, use_errno=True)\n"
                    "a, b = (p.encode() for p in sys.argv[1:])\n"
                    "while True:\n"
                    "    libc.renameat2(-100, a, -100, b, 2)  # AT_FDCWD, RENAME_EXCHANGE\n")
    collect = CollectRegularFiles(coursedir=CourseDirectory(), authenticator=Authenticator())
    collect.log.setLevel(logging.ERROR)
    swapper = subprocess.Popen([sys.executable, "-c", swap_forever, str(inbound / "problem1.ipynb"),
                                str(inbound / ".link")])
    try:
        for i in range(300):
            dest = tmp_path / f"submitted-{i}"
            collect.do_copy(str(inbound), str(dest))
            for name in os.listdir(dest):
                assert not os.path.islink(dest / name)
                assert "SECRET" not in (dest / name).read_text(), "collect copied what a link names"
    finally:
        swapper.kill()
        swapper.wait()


def test_a_hand_in_in_another_students_name_is_not_collected(tmp_path, monkeypatch):
    """The exchange's inbound folder is writable by every student: does collect take a student's
    own latest hand-in, never a later one that another user made in their name (nbgrader only
    warns), nor one holding a file another user made, and, for students who are no users of
    this machine, take a hand-in whose files all belong to its folder's owner?"""
    import logging
    import pwd

    from nbgrader.auth import Authenticator
    from nbgrader.coursedir import CourseDirectory
    from nbgrader.exchange.default import ExchangeCollect

    from graders.collect import CollectRegularFiles

    if os.geteuid() != 0:
        pytest.skip("making a hand-in owned by another user needs root")
    student = pwd.getpwnam("daemon")  # a user of every Debian machine, not root
    collect = CollectRegularFiles(coursedir=CourseDirectory(), authenticator=Authenticator())
    collect.log.setLevel(logging.ERROR)
    collect.inbound_path = str(tmp_path)

    def hand_in(name: str, hour: int, uid: int, file_uid: int | None = None):
        filename = f"{name}+problem1+2026-11-27 {hour:02}:00:00.000000 UTC"
        (tmp_path / filename).mkdir()
        (tmp_path / filename / "problem1.ipynb").write_text("{}")
        os.chown(tmp_path / filename / "problem1.ipynb", uid if file_uid is None else file_uid, -1)
        os.chown(tmp_path / filename, uid, -1)
        return collect._path_to_record(str(tmp_path / filename))

    own, forged = hand_in("daemon", 10, student.pw_uid), hand_in("daemon", 11, 0)
    tampered = hand_in("daemon", 12, student.pw_uid, file_uid=0)
    not_a_user = hand_in("student-0042", 10, 0)
    assert (own.refusal, not_a_user.refusal) == (None, None)
    assert "made by root" in forged.refusal and "holds problem1.ipynb, made by root" in tampered.refusal
    assert collect._sort_by_timestamp([forged, tampered, own])[0] is own
    copied = []
    monkeypatch.setattr(ExchangeCollect, "copy_files", lambda self: copied.extend(self.src_records))
    collect.src_records = [forged, not_a_user]
    collect.copy_files()
    assert copied == [not_a_user]
