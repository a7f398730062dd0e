"""Attacks on nbgrader's exchange, as a student of a course set up exactly as the README says.

Real Unix users (the instructor is root, as on the README's one-machine route; the students are
not), nbgrader's real default exchange under /usr/local/share (in a private mount namespace:
`tests/routes.py`), the README's set-up line, and real nbgrader commands typed by each user:
- an exchange made the way nbgrader makes it (0777), or a course folder a student made first,
  is refused by the release and by the hand-out's build, naming the fix;
- on the README's exchange a student can neither move the course's folder aside nor put
  anything of hers in it, nor rename a classmate's hand-in;
- a hand-in another student made in a classmate's name, or slipped a file into, is not
  collected (the classmate's own earlier hand-in is), and the instructor is told;
- a hand-in whose name and timestamp.txt say 2020 is recorded in the gradebook as made today,
  late, and the instructor is told; a hand-in name that is no date stops nobody's collect;
- a hand-in in a name that is no student id (markup, `..`, a terminal's escape sequence) is
  not collected, and the name is printed harmless.
"""
from __future__ import annotations

import datetime
import os
import shlex
import sys

import pytest

from routes import (EXCHANGE_PARENT, Namespace, add_user, copy_kit, let_users_run_stack_python, release_scratch,
                    remove_user, require_root_machine, scratch_folder, unique_name)
from test_browser import MAKE_EXCHANGE

pytestmark = [pytest.mark.slow, pytest.mark.stack_neutral]

ASSIGNMENT = "problem1"
EXCHANGE = "/usr/local/share/nbgrader/exchange"
COURSE = f"{EXCHANGE}/scaling-jax"
STUDENT_FLAGS = ["--CourseDirectory.course_id=scaling-jax"]
DUE = "2021-01-01 00:00:00 UTC"
"""The course's due date: a hand-in claiming 2020 would be on time."""


@pytest.fixture(scope="module")
def course():
    """A private /usr/local/share, a copy of the kit as the instructor's course, two students."""
    require_root_machine()
    scratch = scratch_folder("kit-exchange-")
    ns = Namespace(scratch)
    people = {"alice": unique_name("a"), "mallory": unique_name("m")}
    try:
        ns.writable_overlay(EXCHANGE_PARENT)
        let_users_run_stack_python(ns, sys.prefix)
        homes = {role: add_user(name, homes=scratch) for role, name in people.items()}
        kit = copy_kit(os.path.join(scratch, "kit"))
        yield {"ns": ns, "kit": kit, "people": people, "homes": homes}
    finally:
        for name in people.values():
            remove_user(name)
        ns.close()
        release_scratch(scratch)


def instructor(course, *args: str, check: bool = True):
    env = {**os.environ, "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"]}
    return course["ns"].run([sys.executable, *args], cwd=course["kit"], check=check, env=env)


def nbgrader_as(course, role: str, *args: str, check: bool = True):
    """`nbgrader ARGS` typed by a student in their home."""
    return course["ns"].run([sys.executable, "-m", "nbgrader", *args, *STUDENT_FLAGS], user=course["people"][role],
                            cwd=course["homes"][role], check=check)


def shell_as(course, role: str, script: str):
    return course["ns"].shell(script, user=course["people"][role], check=False)


def output(proc) -> str:
    return proc.stdout + proc.stderr


def test_the_exchange_is_the_instructors_and_hand_ins_are_their_students(course):
    """Walked in order: a refused exchange, the README's set-up, a release, students' attacks
    on the course folder and on each other's hand-ins, collect, autograde and the gradebook."""
    ns, alice, mallory = course["ns"], course["people"]["alice"], course["people"]["mallory"]
    ns.run(["chfn", "--full-name", "Alice Liddell", alice])  # her account's name: formgrader shows it
    instructor(course, "-m", "nbgrader", "db", "assignment", "add", ASSIGNMENT, f"--duedate={DUE}")
    instructor(course, "-m", "nbgrader", "generate_assignment", ASSIGNMENT, "--force")

    # nbgrader's own exchange (0777): the release and the hand-out refuse it, naming the fix;
    # nbgrader alone would have released into it.
    ns.shell(f"mkdir -p {EXCHANGE} && chmod 0777 {EXCHANGE}")
    refused = instructor(course, "-m", "nbgrader", "release_assignment", ASSIGNMENT, check=False)
    assert refused.returncode != 0 and f"sudo chmod 1777 {EXCHANGE}" in output(refused), output(refused)
    assert not os.path.exists(ns.path(COURSE))
    refused = instructor(course, "-m", "graders.build", "handout", "-a", ASSIGNMENT, check=False)
    assert refused.returncode == 1 and "no sticky bit" in output(refused) and "1777" in output(refused)

    # A student makes the course's folder first: the release refuses it, naming her.
    shell_as(course, "mallory", f"mkdir -p {COURSE}/outbound/{ASSIGNMENT}")
    ns.shell(f"chmod 1777 {EXCHANGE}")
    refused = instructor(course, "-m", "nbgrader", "release_assignment", ASSIGNMENT, check=False)
    assert refused.returncode != 0 and f"owned by {mallory}" in output(refused), output(refused)
    ns.shell(f"rm -r {COURSE}")

    # The README's line, then the release: the course is the instructor's, its inbound sticky.
    ns.shell(MAKE_EXCHANGE.replace("sudo ", ""), env={**os.environ, "PATH": os.environ["PATH"]})
    instructor(course, "-m", "nbgrader", "release_assignment", ASSIGNMENT)
    instructor(course, "-m", "graders.build", "handout", "-a", ASSIGNMENT)
    for folder, mode in ((EXCHANGE, 0o1777), (COURSE, 0o755), (f"{COURSE}/inbound", 0o3733)):
        st = os.stat(ns.path(folder))
        assert (st.st_uid, st.st_mode & 0o7777) == (0, mode), (folder, oct(st.st_mode))

    # Mallory cannot move the course aside, nor put anything of hers in it.
    for attack in (f"mv {COURSE} {EXCHANGE}/aside", f"mkdir {COURSE}/outbound/{ASSIGNMENT}x",
                   f"rm -rf {COURSE}/outbound/{ASSIGNMENT}",
                   f"cp /etc/hostname {COURSE}/outbound/{ASSIGNMENT}/{ASSIGNMENT}.ipynb"):
        assert shell_as(course, "mallory", attack).returncode != 0, attack
    assert sorted(os.listdir(ns.path(EXCHANGE))) == ["scaling-jax"]

    # Alice fetches the instructor's notebook and hands it in twice.
    nbgrader_as(course, "alice", "fetch_assignment", ASSIGNMENT)
    fetched = os.path.join(course["homes"]["alice"], ASSIGNMENT, f"{ASSIGNMENT}.ipynb")
    with open(fetched, "rb") as f, open(os.path.join(course["kit"], "release", ASSIGNMENT, f"{ASSIGNMENT}.ipynb"), "rb") as g:
        assert f.read() == g.read()
    nbgrader_as(course, "alice", "submit", ASSIGNMENT)
    nbgrader_as(course, "alice", "submit", ASSIGNMENT)
    first, second = sorted(n for n in os.listdir(ns.path(f"{COURSE}/inbound")) if n.startswith(alice))

    # Mallory, who guessed the names: renames one (the sticky inbound refuses), slips her own
    # notebook into the other (its folder is 0777, as nbgrader makes it), and forges a later
    # hand-in in Alice's name.
    later = (datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(hours=1)).strftime(
        "%Y-%m-%d %H:%M:%S.%f UTC")
    assert shell_as(course, "mallory", f"mv {shlex.quote(f'{COURSE}/inbound/{first}')} "
                                       f"{shlex.quote(f'{COURSE}/inbound/{first}x')}").returncode != 0
    slipped = shlex.quote(f"{COURSE}/inbound/{second}/{ASSIGNMENT}.ipynb")
    assert shell_as(course, "mallory", f"rm -f {slipped} && echo '{{}}' > {slipped}").returncode == 0
    forged = shlex.quote(f"{COURSE}/inbound/{alice}+{ASSIGNMENT}+{later}")
    assert shell_as(course, "mallory", f"mkdir {forged} && echo '{{}}' > {forged}/{ASSIGNMENT}.ipynb").returncode == 0

    # Mallory's own hand-ins: one that says 2020 (its name and timestamp.txt), one whose name is
    # no date at all.
    nbgrader_as(course, "mallory", "fetch_assignment", ASSIGNMENT)
    for stamp in ("2020-06-01 12:00:00.000000 UTC", "not-a-date"):
        folder = shlex.quote(f"{COURSE}/inbound/{mallory}+{ASSIGNMENT}+{stamp}")
        assert shell_as(course, "mallory", f"mkdir {folder} && cp {ASSIGNMENT}/{ASSIGNMENT}.ipynb {folder}/ && "
                                           f"echo '2020-06-01 12:00:00.000000 UTC' > {folder}/timestamp.txt"
                        ).returncode == 0

    # Hand-ins in names that are no student ids: markup formgrader would show, a folder above
    # submitted/ (nbgrader never lists it: glob skips names that start with a dot), a
    # terminal's escape sequence.
    for name in ("<img src=x onerror=alert(1)>", "..", "\x1b]0;pwned\x07eve"):
        folder = shlex.quote(f"{COURSE}/inbound/{name}+{ASSIGNMENT}+2026-01-01 00:00:00.000000 UTC")
        assert shell_as(course, "mallory", f"mkdir {folder} && cp {ASSIGNMENT}/{ASSIGNMENT}.ipynb {folder}/").returncode == 0

    collected = instructor(course, "-m", "nbgrader", "collect", ASSIGNMENT)
    log = output(collected)
    assert log.count("is in a name that is no student id") == 2 and "\x1b" not in log and "\\x1b]0;pwned" in log, log
    assert sorted(os.listdir(os.path.join(course["kit"], "submitted"))) == sorted([alice, mallory])
    assert not os.path.exists(os.path.join(course["kit"], ASSIGNMENT))
    assert f"Not collected: {alice}+{ASSIGNMENT}+{later}" in log and f"made by {mallory}" in log, log
    assert f"Not collected: {second}" in log and f"holds {ASSIGNMENT}.ipynb, made by {mallory}" in log, log
    assert f"Redated: {mallory}+{ASSIGNMENT}+" in log, log
    assert "Redated" not in log.replace(f"Redated: {mallory}", ""), log  # Alice's own are dated as they say
    submitted = os.path.join(course["kit"], "submitted")
    with open(os.path.join(submitted, alice, ASSIGNMENT, f"{ASSIGNMENT}.ipynb"), "rb") as f:
        assert b'"cells"' in f.read()  # Alice's first hand-in, not Mallory's '{}'
    with open(os.path.join(submitted, alice, ASSIGNMENT, "timestamp.txt")) as f:  # when her files were written
        dated = datetime.datetime.strptime(f.read().strip(), "%Y-%m-%d %H:%M:%S.%f UTC")
    claimed = datetime.datetime.strptime(first.split("+")[2], "%Y-%m-%d %H:%M:%S.%f UTC")
    assert datetime.timedelta(0) <= dated - claimed < datetime.timedelta(seconds=2)

    instructor(course, "-m", "nbgrader", "autograde", ASSIGNMENT)
    from nbgrader.api import Gradebook

    today = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
    with Gradebook(f"sqlite:///{course['kit']}/gradebook.db") as gb:
        mine = gb.find_submission(ASSIGNMENT, mallory)
        assert abs(mine.timestamp - today) < datetime.timedelta(minutes=10), mine.timestamp
        assert mine.total_seconds_late > 3600 * 24 * 365
        hers = gb.find_submission(ASSIGNMENT, alice)
        assert abs(hers.timestamp - today) < datetime.timedelta(minutes=10)
        # Students named as their accounts name them, not "None, None".
        assert (gb.find_student(alice).first_name, gb.find_student(alice).last_name) == ("Alice", "Liddell")
        assert (gb.find_student(mallory).first_name, gb.find_student(mallory).last_name) == ("", mallory)
