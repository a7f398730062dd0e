"""Collecting submissions into nbgrader's `submitted/` without following links.

nbgrader copies what students hand in with `shutil.copytree` and `shutil.copy`, which follow
symbolic links: a link a student leaves in the exchange's inbound folder (or in an LMS
archive) would be collected as a copy of whatever it names that the instructor can read (the
course's secret, the solutions), and autograde and feedback would carry that copy back to the
student. `nbgrader_config.py` replaces the two steps that take files from outside:
- `CollectRegularFiles` (`nbgrader collect`): collects regular files and folders only, and
  only a student's own hand-ins (the exchange's inbound folder is writable by every student:
  nbgrader warns about a hand-in in another's name, and collects it);
- `ExtractRegularFiles` (`nbgrader zip_collect`): extracts and copies regular files only.
Everything left out is logged as a warning, naming the student's file.
"""
from __future__ import annotations

import os
import pwd

from nbgrader.exchange.default import ExchangeCollect
from nbgrader.plugins import ExtractorPlugin
from nbgrader.utils import ignore_patterns, unzip

from .files import NotASubmission, copy_regular_tree, read_submission


def _not_regular(folder: str, names: list[str]) -> set[str]:
    return {n for n in names if os.path.islink(os.path.join(folder, n))
            or not (os.path.isfile(os.path.join(folder, n)) or os.path.isdir(os.path.join(folder, n)))}


class CollectRegularFiles(ExchangeCollect):
    """nbgrader's collect, copying regular files and folders only: every file is opened without
    following a link and checked before it is read (`graders.files.copy_regular_tree`), so a
    link swapped in while collect runs is left out too."""

    def _forged(self, record) -> str | None:
        """Who made a hand-in in another student's name: the owner of its inbound folder, when
        the student is a user of this machine (whose `nbgrader submit` makes folders they own)
        and the owner is someone else; None otherwise (student ids that are no local users,
        as on a hub whose notebooks all run as one user, are not checked)."""
        try:
            student = pwd.getpwnam(record["username"])
            owner = os.lstat(os.path.join(self.inbound_path, record["filename"])).st_uid
        except (KeyError, OSError):
            return None
        if owner == student.pw_uid:
            return None
        try:
            return pwd.getpwuid(owner).pw_name
        except KeyError:
            return f"uid {owner}"

    def _sort_by_timestamp(self, records):
        """A student's own hand-ins first, newest first: a later one forged in their name
        never hides theirs."""
        return sorted(super()._sort_by_timestamp(records), key=lambda r: self._forged(r) is not None)

    def copy_files(self):
        kept = []
        for record in self.src_records:
            forger = self._forged(record)
            if forger is None:
                kept.append(record)
            else:
                self.log.warning("Not collected: %s is in %s's name but was made by %s (only a student's "
                                 "own hand-ins are collected)", record["filename"], record["username"], forger)
        self.src_records = kept
        super().copy_files()

    def do_copy(self, src, dest, log=None):
        dir_size = self.get_size(src)
        if dir_size > 1000 * self.coursedir.max_dir_size:
            raise RuntimeError(f"Directory size is too big. Size is {dir_size}, maximum size is "
                               f"{1000 * self.coursedir.max_dir_size}")
        ignore = ignore_patterns(exclude=self.coursedir.ignore, include=self.coursedir.include,
                                 max_file_size=self.coursedir.max_file_size, log=self.log)
        copy_regular_tree(src, dest, ignore, on_refused=lambda path: self.log.warning(
            "Not collected: %s is a link or special file (only regular files are graded)", path))
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
