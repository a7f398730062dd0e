"""nbgrader's exchange on a shared machine: a layout no student can rearrange.

nbgrader's exchange is one folder every user can write (students hand in there). nbgrader
makes it mode 0777 and checks only the last three digits of a mode. In a folder any user may
write, without the sticky bit, any user may rename or remove any entry: a student could move
the course's folder aside and put a course of her own in its place (classmates would then fetch
her notebook, whose locked first cell each of them runs, and hand in to a folder she reads).
The layout this module requires, and the README's set-up line makes:

    /usr/local/share/nbgrader/exchange            root's, mode 1777: sticky, so only an entry's
                                                  owner (or root) may rename or remove it
        scaling-jax/                              the instructor's, 0755: only they release
            outbound/                             the instructor's, 0755 (nbgrader's mode)
            inbound/                              the instructor's, 3733: nbgrader's 2733 plus the
                                                  sticky bit, so no student renames another's hand-in
            feedback/                             the instructor's, 0711 (nbgrader's mode)

`exchange_problems` says, for each folder on the way, what would let someone else rename or
replace it, and the command that fixes it. `graders.build handout`, the hub's start
(`hub/jupyterhub_config.py`) and `nbgrader release_assignment` as the course runs it
(`graders.release.GuardedReleaseAssignment`, selected in `nbgrader_config.py`) refuse an
exchange with problems. This module reads the file system only (no nbgrader import).
"""
from __future__ import annotations

import os
import pwd
import stat
from dataclasses import dataclass
from stat import S_ISVTX

SET_UP = ("sudo install -d -m 1777 {root} && "
          "sudo install -d -m 0755 -o {owner} {root}/{course}")
"""The README's set-up line (as root, once): the exchange, sticky, and the course's folder,
the instructor's (made before any student could make it first)."""


@dataclass(frozen=True)
class ExchangeProblem:
    """One way someone other than the instructor could rearrange the exchange."""

    path: str
    """The folder at fault."""
    what: str
    """What is wrong with it, and what it would let a student do."""
    fix: str
    """The command that mends it."""

    def __str__(self) -> str:
        return f"{self.path}: {self.what}\n    fix: {self.fix}"


class UnsafeExchange(RuntimeError):
    """The exchange (or the course's folder in it) lets others rename or replace what students
    fetch and hand in; the message lists each problem and its fix."""

    def __init__(self, problems: list[ExchangeProblem]):
        self.problems = problems
        super().__init__("nbgrader's exchange is not safe to share with students:\n"
                         + "\n".join(f"  {p}" for p in problems))


def user_name(uid: int) -> str:
    """The name of user `uid`, or "uid N" where it has none."""
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def _mode(st: os.stat_result) -> str:
    return oct(stat.S_IMODE(st.st_mode))[2:].rjust(4, "0")


def _others_may_rename_in(st: os.stat_result) -> bool:
    """Can users other than the folder's owner rename or remove its entries?"""
    return bool(st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)) and not st.st_mode & S_ISVTX


def _ancestor_problems(path: str, trusted: set[int]) -> list[ExchangeProblem]:
    """Problems of the folders above `path` (each must be owned by a trusted user and let no
    one else rename its entries); a link on the way is followed after its own folder is checked."""
    problems = []
    real = os.path.realpath(path)
    folders = {os.path.dirname(real)}
    for p in (path, real):
        parent = os.path.dirname(os.path.abspath(p))
        while True:
            folders.add(parent)
            if parent == "/":
                break
            parent = os.path.dirname(parent)
    for folder in sorted(folders):
        try:
            st = os.stat(folder)
        except OSError:
            continue
        if st.st_uid not in trusted:
            problems.append(ExchangeProblem(folder, f"is owned by {user_name(st.st_uid)}, who could rename the "
                                            "exchange inside it", f"sudo chown root {folder}"))
        elif _others_may_rename_in(st):
            problems.append(ExchangeProblem(folder, f"mode {_mode(st)} lets other users rename the exchange "
                                            "inside it", f"sudo chmod go-w {folder}"))
    return problems


def exchange_problems(root: str, course_id: str, instructors: set[int] | None = None,
                      course_must_exist: bool = True) -> list[ExchangeProblem]:
    """What would let anyone but root and `instructors` (default: the user running this) rename,
    replace or write the exchange's course folders. [] for a safe exchange.

    `course_must_exist`: a course folder not made yet is a problem (a student could make it
    first); the release itself passes False, since it makes the folder as the instructor."""
    instructors = {os.geteuid()} if instructors is None else set(instructors)
    trusted = instructors | {0}
    owner = user_name(min(instructors - {0} or instructors))
    set_up = SET_UP.format(root=root, owner=owner, course=course_id)
    problems = _ancestor_problems(root, trusted)
    try:
        st = os.lstat(root)
    except FileNotFoundError:
        return problems + [ExchangeProblem(root, "does not exist", set_up)]
    if stat.S_ISLNK(st.st_mode):
        st = os.stat(root)
    if not stat.S_ISDIR(st.st_mode):
        return problems + [ExchangeProblem(root, "is not a folder", set_up)]
    if st.st_uid not in trusted:
        problems.append(ExchangeProblem(root, f"is owned by {user_name(st.st_uid)}, who could rename or replace "
                                        "the course's folder in it", f"sudo chown root {root}"))
    if stat.S_IMODE(st.st_mode) & 0o777 != 0o777:
        problems.append(ExchangeProblem(root, f"mode {_mode(st)}: students cannot hand in there",
                                        f"sudo chmod 1777 {root}"))
    elif _others_may_rename_in(st):
        problems.append(ExchangeProblem(
            root, f"mode {_mode(st)} (no sticky bit) lets any user rename or remove the course's folder and "
            "put one of their own in its place", f"sudo chmod 1777 {root}"))
    course = os.path.join(root, course_id)
    try:
        course_st = os.lstat(course)
    except FileNotFoundError:
        if course_must_exist:
            problems.append(ExchangeProblem(course, "does not exist yet, so any student could make it first",
                                            f"sudo install -d -m 0755 -o {owner} {course}"))
        return problems
    problems += _course_problems(course, course_st, instructors, owner)
    return problems


def _course_problems(course: str, st: os.stat_result, instructors: set[int], owner: str) -> list[ExchangeProblem]:
    """The course's folder and nbgrader's folders in it: the instructor's, written by no one
    else (hand-ins are made in inbound/, whose sticky bit keeps each one its maker's)."""
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        return [ExchangeProblem(course, "is not a folder (a link, or a file)",
                                f"sudo rm {course} && sudo install -d -m 0755 -o {owner} {course}")]
    if st.st_uid == 0 and 0 not in instructors:  # an earlier release by root
        return [ExchangeProblem(course, "is root's, not the instructor's: the instructor cannot release into it",
                                f"sudo chown -R {owner} {course}")]
    if st.st_uid not in instructors:  # what is in it may be anyone's: made anew
        return [ExchangeProblem(course, f"is owned by {user_name(st.st_uid)}, not by the instructor: its owner "
                                "can replace what students fetch and read what they hand in",
                                f"sudo rm -r {course} && sudo install -d -m 0755 -o {owner} {course}")]
    problems = []
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        problems.append(ExchangeProblem(course, f"mode {_mode(st)} lets other users write it",
                                        f"chmod 0755 {course}"))
    for name, sticky_needed in (("outbound", False), ("inbound", True), ("feedback", False)):
        folder = os.path.join(course, name)
        try:
            sub = os.lstat(folder)
        except FileNotFoundError:
            continue
        if stat.S_ISLNK(sub.st_mode) or not stat.S_ISDIR(sub.st_mode) or sub.st_uid not in instructors:
            problems.append(ExchangeProblem(folder, f"is not a folder of the instructor's (owner {user_name(sub.st_uid)})",
                                            f"sudo rm -r {folder}, then release again"))
        elif sticky_needed and _others_may_rename_in(sub):
            problems.append(ExchangeProblem(folder, f"mode {_mode(sub)} (no sticky bit) lets a student rename or "
                                            "remove another's hand-in", f"chmod +t {folder}"))
        elif not sticky_needed and sub.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            problems.append(ExchangeProblem(folder, f"mode {_mode(sub)} lets other users write it",
                                            f"chmod go-w {folder}"))
    return problems


def require_safe_exchange(root: str, course_id: str, instructors: set[int] | None = None,
                          course_must_exist: bool = True) -> None:
    """Raise `UnsafeExchange`, listing every problem and its fix, unless the exchange is safe."""
    problems = exchange_problems(root, course_id, instructors, course_must_exist)
    if problems:
        raise UnsafeExchange(problems)
