"""Collecting submissions into nbgrader's `submitted/` without following links.

nbgrader copies what students hand in with `shutil.copytree` and `shutil.copy`, which follow
symbolic links: a link a student leaves in the exchange's inbound folder (or in an LMS
archive) would be collected as a copy of whatever it names that the instructor can read (the
course's secret, the solutions), and autograde and feedback would carry that copy back to the
student. `nbgrader_config.py` replaces the two steps that take files from outside:
- `CollectRegularFiles` (`nbgrader collect`): collects regular files and folders only, only
  a student's own hand-ins (the exchange's inbound folder is writable by every student:
  nbgrader warns about a hand-in in another's name, and collects it), dated by the file
  system's change times, which no student can set back (nbgrader trusts the time a hand-in
  claims, which its student writes);
- `ExtractRegularFiles` (`nbgrader zip_collect`): extracts and copies regular files only.
Everything left out or redated is logged as a warning, naming the student's file and why.
"""
from __future__ import annotations

import contextlib
import datetime
import os
import pwd
import re
import shutil
import stat
from dataclasses import dataclass

from nbgrader.exchange.default import ExchangeCollect
from nbgrader.plugins import ExtractorPlugin
from nbgrader.utils import ignore_patterns, parse_utc, unzip

from .exchange import user_name
from .files import NotASubmission, copy_regular_tree, read_submission


def _not_regular(folder: str, names: list[str]) -> set[str]:
    return {n for n in names if os.path.islink(os.path.join(folder, n))
            or not (os.path.isfile(os.path.join(folder, n)) or os.path.isdir(os.path.join(folder, n)))}


REDATED_AFTER = datetime.timedelta(seconds=60)
"""A hand-in whose files changed this long after the time it claims is reported as redated
(nbgrader's own submit writes its files within a moment of the time it records)."""


@dataclass
class HandIn:
    """What collect knows of one hand-in folder in the exchange's inbound folder."""

    username: str
    filename: str
    timestamp: datetime.datetime
    """When it was handed in, in UTC: the latest change time of the folder and its files (which
    no user can set back), or the time it claims where that is later."""
    claimed: datetime.datetime | None
    """The latest time its name or timestamp.txt claims (the student writes both); None when
    neither reads as a time."""
    refusal: str | None
    """Why it is not the student's own work, or None."""

    def __getitem__(self, key):  # nbgrader's collect reads its records as dicts
        return getattr(self, key)


def _utc(seconds: float) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc).replace(tzinfo=None)


def _claimed_time(text: str) -> datetime.datetime | None:
    try:
        return parse_utc(text.strip())
    except Exception:  # dateutil's errors for anything a student writes (ValueError, OverflowError, ...)
        return None


STUDENT_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@-]*")
"""What a student id may be: a hand-in in another name is not collected (nbgrader would make
`submitted/<id>/`, and show the id in formgrader's pages: `..`, or markup, is no student)."""


def shown(text: str) -> str:
    """A name a student chose, safe to print in the instructor's terminal: control characters
    (a terminal's escape sequences) written as \\xNN."""
    return re.sub(r"[\x00-\x1f\x7f-\x9f]", lambda m: f"\\x{ord(m.group()):02x}", text)


def account_names(student: str) -> tuple[str, str]:
    """(first, last) name of a user of this machine from their account's full name (its GECOS
    field: `useradd -c "Alice Liddell"`), in letters, spaces, dots, hyphens and apostrophes
    only; ("", student id) for an account with no full name; ("", "") for no such user."""
    try:
        full = pwd.getpwnam(student).pw_gecos.split(",")[0]
    except KeyError:
        return "", ""
    words = re.sub(r"[^\w .'-]", "", full).split()
    if not words:
        return "", student
    return " ".join(words[:-1]), words[-1]


def inspect_hand_in(path: str, student: str) -> tuple[str | None, float]:
    """(why the hand-in at `path` is not `student`'s own work or None, its latest change time).

    A hand-in is the student's when its folder and everything in it belong to the student (to
    the folder's owner where the student is no user of this machine, as on a hub whose
    servers all run as one user) and nothing in it could have been written since by anyone
    else: no file or folder in it is writable by group or others (nbgrader's submit makes
    files 0644, folders 0755, and the hand-in folder itself 0777: whatever another user put
    there is theirs, and refused)."""
    try:
        top = os.lstat(path)
    except OSError as e:
        return f"cannot be read ({e.strerror})", 0.0
    if not stat.S_ISDIR(top.st_mode):
        return "is not a folder", top.st_ctime
    try:
        owner = pwd.getpwnam(student).pw_uid
    except KeyError:
        owner = top.st_uid
    changed = top.st_ctime
    if top.st_uid != owner:
        return f"was made by {user_name(top.st_uid)}, not by {student}", changed
    refusal = None
    for folder, dirs, files in os.walk(path):
        for name in dirs + files:
            entry = os.path.join(folder, name)
            try:
                st = os.lstat(entry)
            except OSError:
                continue
            changed = max(changed, st.st_ctime)
            where = os.path.relpath(entry, path)
            if refusal is None and st.st_uid != owner:
                refusal = f"holds {where}, made by {user_name(st.st_uid)}"
            elif refusal is None and not stat.S_ISLNK(st.st_mode) and st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
                refusal = f"holds {where}, which other users may write (mode {oct(stat.S_IMODE(st.st_mode))})"
    return refusal, changed


class CollectRegularFiles(ExchangeCollect):
    """nbgrader's collect, taking only what each student made, dated by what no student can set.

    - Each hand-in is inspected (`inspect_hand_in`): one another user made in a student's name,
      or in which another user put or could have rewritten a file, is not collected; the
      student's newest hand-in of their own is (nbgrader only warns, and collects the newest).
    - Each is dated by the file system: the latest change time of its folder and files, or the
      time its name and timestamp.txt claim where that is later. nbgrader trusts the claim, which
      the student writes (a hand-in made today could say 2020, and never be late). The date goes
      into the collected copy's timestamp.txt, which autograde records in the gradebook and late
      penalties follow.
    - Files are copied regular only: every file is opened without following a link and checked
      before it is read (`graders.files.copy_regular_tree`), so a link swapped in while collect
      runs is left out too.
    Every hand-in left out or redated is logged as a warning, naming it and why."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._hand_ins: dict[str, HandIn] = {}
        """Every hand-in of this collect's assignment by folder name, collected or not."""

    def init_src(self):
        self._hand_ins.clear()
        super().init_src()

    def _path_to_record(self, path):
        filename = os.path.basename(path)
        parts = filename.rsplit("+", 3)
        username = parts[0]
        claims = [_claimed_time(parts[2]) if len(parts) >= 3 else None]
        with contextlib.suppress(NotASubmission, OSError):
            text = read_submission(os.path.join(path, "timestamp.txt"), trusted=path, limit=256)
            claims.append(_claimed_time(text.decode("utf-8", "replace")))
        claims = [c for c in claims if c is not None]
        claimed = max(claims) if claims else None
        refusal, changed = inspect_hand_in(path, username)
        if not STUDENT_ID.fullmatch(username):
            refusal = "is in a name that is no student id"
        date = max([_utc(changed), *claims])
        self._hand_ins[filename] = record = HandIn(username, filename, date, claimed, refusal)
        return record

    def _sort_by_timestamp(self, records):
        """A student's own hand-ins first, newest first: one refused never hides theirs."""
        return sorted(super()._sort_by_timestamp(records), key=lambda r: r.refusal is not None)

    def copy_files(self):
        for hand_in in self._hand_ins.values():
            if hand_in.refusal:
                self.log.warning("Not collected: %s (in %s's name) %s; only a student's own hand-ins are "
                                 "collected", shown(hand_in.filename), shown(hand_in.username),
                                 shown(hand_in.refusal))
        self.src_records = [r for r in self.src_records if r.refusal is None]
        super().copy_files()
        self._name_students(sorted({r.username for r in self.src_records}))

    def _name_students(self, students: list[str]) -> None:
        """Give each collected student who is a user of this machine, and has no name in the
        gradebook yet, their account's full name (formgrader shows "None, None" otherwise)."""
        from nbgrader.api import Gradebook, MissingEntry

        with Gradebook(self.coursedir.db_url, self.coursedir.course_id) as gb:
            for student in students:
                try:
                    known = gb.find_student(student)
                    if known.first_name or known.last_name:
                        continue
                except MissingEntry:
                    pass
                first, last = account_names(student)
                if last:
                    gb.update_or_create_student(student, first_name=first, last_name=last)

    def do_copy(self, src, dest, log=None):
        self._copy_regular(src, dest)
        hand_in = self._hand_ins.get(os.path.basename(src))
        if hand_in is None:
            return
        # Inspected again once copied: what changed while it was copied is dated, or refused.
        refusal, changed = inspect_hand_in(src, hand_in.username)
        if refusal:
            shutil.rmtree(dest)
            self.log.warning("Not collected: %s (in %s's name) %s while it was collected", shown(hand_in.filename),
                             shown(hand_in.username), shown(refusal))
            return
        hand_in.timestamp = max(hand_in.timestamp, _utc(changed))
        if hand_in.claimed is None or hand_in.timestamp - hand_in.claimed > REDATED_AFTER:
            self.log.warning("Redated: %s claims %s, but its files were last changed at %s UTC; it is "
                             "recorded as handed in then", shown(hand_in.filename),
                             f"{hand_in.claimed} UTC" if hand_in.claimed else "no readable time", hand_in.timestamp)
        with open(os.path.join(dest, "timestamp.txt"), "w") as f:
            f.write(hand_in.timestamp.strftime("%Y-%m-%d %H:%M:%S.%f UTC"))

    def _copy_regular(self, src, dest):
        dir_size = self.get_size(src)
        if dir_size > 1000 * self.coursedir.max_dir_size:
            raise RuntimeError(f"Directory size is too big. Size is {dir_size}, maximum size is "
                               f"{1000 * self.coursedir.max_dir_size}")
        ignore = ignore_patterns(exclude=self.coursedir.ignore, include=self.coursedir.include,
                                 max_file_size=self.coursedir.max_file_size, log=self.log)
        copy_regular_tree(src, dest, ignore, on_refused=lambda path: self.log.warning(
            "Not collected: %s is a link or special file (only regular files are graded)", shown(path)))
        if self.coursedir.groupshared:  # as nbgrader's own collect: group members may grade too
            for folder, _, _ in os.walk(dest):
                os.chmod(folder, (os.stat(folder).st_mode | 0o2770) & 0o2777)


class ExtractRegularFiles(ExtractorPlugin):
    """nbgrader's zip_collect extraction, keeping regular files only: a link in the
    downloaded folder is not copied, and one an archive held (tar keeps them) is removed."""

    def extract(self, archive_path: str, extracted_path: str) -> None:
        for root, dirs, files in os.walk(archive_path):
            dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(root, d))]
            extract_to = os.path.normpath(os.path.join(extracted_path, os.path.relpath(root, archive_path)))
            os.makedirs(extract_to, exist_ok=True)
            for name in files:
                path = os.path.join(root, name)
                if name in _not_regular(root, [name]):
                    self.log.warning("Not collected: %s is a link or special file", path)
                elif os.path.splitext(name)[1] in self.zip_ext:
                    unzip(path, extract_to, zip_ext=self.zip_ext, create_own_folder=True, tree=True)
                else:
                    try:
                        data = read_submission(path, trusted=root, limit=2**40)
                    except NotASubmission as e:
                        self.log.warning("Not collected: %s", e)
                        continue
                    with open(os.path.join(extract_to, name), "wb") as out:
                        out.write(data)
        for root, dirs, files in os.walk(extracted_path):
            for name in sorted(_not_regular(root, dirs + files)):
                self.log.warning("Removed %s: an archive held a link or special file", os.path.join(root, name))
                os.unlink(os.path.join(root, name))
