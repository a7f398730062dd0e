"""Files the graders read and write: submissions only as regular files, results atomically,
spreadsheets without formulas.

A submission reaches the graders through many routes (`python -m graders`, a folder given to
`graders.batch`, nbgrader's `submitted/`, Gradescope's `submission/`, a Dask task, an LMS
archive), and on each one it is hostile: a symbolic link to the course's secret or to the
instructor's solutions, a FIFO that never ends, a device. `read_submission` opens it without
following any link, from a trusted folder down to the file, and reads it only if it is a
regular file: anything else is refused, and nothing it names is ever read. A file to grade is
bounded too, before anything parses it: its size, and a notebook's JSON (`graders.notebook_bounds`).
"""
from __future__ import annotations

import contextlib
import csv
import hashlib
import io
import os
import secrets
import stat
import tempfile

class NotASubmission(ValueError):
    """A path that is not a regular file reached without links (a link, a FIFO, a device,
    a folder, nothing, or too large); its message says what it is and what to hand in."""


_KINDS = {stat.S_IFLNK: "a symbolic link", stat.S_IFIFO: "a FIFO", stat.S_IFCHR: "a device",
          stat.S_IFBLK: "a device", stat.S_IFSOCK: "a socket", stat.S_IFDIR: "a folder"}


def _kind(mode: int) -> str:
    return _KINDS.get(stat.S_IFMT(mode), "not a regular file")


def _open_beneath(path: str, trusted: str | None) -> int:
    """A file descriptor of `path`, opened from `trusted` (a folder it lies in) down, with no
    link followed on the way; with no `trusted` folder, only the file itself must not be a link."""
    path = os.path.abspath(path)
    start = os.path.abspath(trusted) if trusted else os.path.dirname(path)
    relative = os.path.relpath(path, start)
    if relative.startswith(".."):
        raise NotASubmission(f"{path} is not inside {start}")
    parts = relative.split(os.sep)
    try:
        fd = os.open(start, os.O_RDONLY | os.O_DIRECTORY)
    except OSError as e:
        raise NotASubmission(f"{start} cannot be read: {e.strerror}") from e
    try:
        for i, part in enumerate(parts):
            last = i == len(parts) - 1
            flags = os.O_RDONLY | os.O_NOFOLLOW | (os.O_NONBLOCK if last else os.O_DIRECTORY)
            try:
                child = os.open(part, flags, dir_fd=fd)
            except OSError as e:
                where = os.path.join(start, *parts[:i + 1])
                try:
                    what = _kind(os.lstat(where).st_mode)
                except OSError:
                    raise NotASubmission(f"{where} does not exist") from e
                raise NotASubmission(f"{where} is {what}: only regular files are graded, never "
                                     f"what a link points to") from e
            os.close(fd)
            fd = child
        return fd
    except BaseException:
        os.close(fd)
        raise


def check_submission(path: str, trusted: str | None = None) -> None:
    """Raise `NotASubmission` unless `path` is a regular file reached without links (from the
    folder `trusted` down, when given). Nothing is read."""
    fd = _open_beneath(path, trusted)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise NotASubmission(f"{path} is {_kind(mode)}: only regular files are graded")
    finally:
        os.close(fd)


def read_submission(path: str, trusted: str | None = None, limit: int | None = None, limits=None) -> bytes:
    """The bytes of the submission at `path`, if it is a regular file reached without links
    (from the folder `trusted` down, when given) and within its bounds; `NotASubmission`
    otherwise (`notebook_bounds.NotebookTooLarge`, one, for a notebook beyond its bounds).

    Without `limit` the file is one to grade, bounded by `limits` (`graders.settings.Limits`;
    by default the course's, `grading_config.py`): at most `submission_mib`, and a notebook
    (`.ipynb`) within `notebook_depth` and `notebook_nodes`, measured on its bytes
    (`notebook_bounds.check_notebook`) before anything parses it. With `limit` it is a file
    only read or copied, never parsed here: at most `limit` bytes."""
    from .notebook_bounds import FIX, check_notebook

    if limit is None:
        from .settings import course_limits

        limits = limits or course_limits()
    cap = limits.submission_bytes if limit is None else limit
    fd = _open_beneath(path, trusted)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise NotASubmission(f"{path} is {_kind(info.st_mode)}: only regular files are graded")
        where = " (c.Limits.submission_mib)" if limit is None else ""
        too_large = NotASubmission(f"{path} is larger than {cap / 2**20:g} MiB{where}; {FIX}")
        if info.st_size > cap:
            raise too_large
        with os.fdopen(os.dup(fd), "rb") as f:
            data = f.read(info.st_size + 1)
            if len(data) > cap or f.read(1):  # it grew while being read
                raise too_large
    finally:
        os.close(fd)
    if limit is None and path.endswith(".ipynb"):
        check_notebook(data, limits, path)
    return data


def copy_regular_tree(source: str, dest: str, ignore=lambda folder, names: set(), on_refused=print) -> None:
    """Copy the regular files and folders under `source` to `dest` without following any link,
    even one swapped in while it copies: every folder and file is opened with O_NOFOLLOW from
    its parent's descriptor and checked on that descriptor before anything is read.
    `ignore(folder, names)` is `shutil.copytree`'s; `on_refused(path)` hears of each link or
    special file left out."""
    os.makedirs(dest, exist_ok=True)
    for folder, dirs, files, dir_fd in os.fwalk(source, follow_symlinks=False):
        skipped = set(ignore(folder, dirs + files))
        dirs[:] = [d for d in dirs if d not in skipped]
        target = os.path.join(dest, os.path.relpath(folder, source))
        os.makedirs(target, exist_ok=True)
        for name in files:
            if name in skipped:
                continue
            try:
                fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=dir_fd)
            except OSError:
                on_refused(os.path.join(folder, name))
                continue
            with os.fdopen(fd, "rb") as f:
                if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                    on_refused(os.path.join(folder, name))
                    continue
                with open(os.path.join(target, name), "wb") as out:
                    for block in iter(lambda: f.read(1 << 20), b""):
                        out.write(block)


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def write_atomic(path: str, text: str, mode: int | None = None, durable: bool = True) -> None:
    """Write `text` to `path` so that a reader (or a rerun after a crash) sees the old file
    or the new one, never half of one; with `mode`, the new file has those permissions
    before anyone can see it. `durable=False` skips the two fsyncs, for a file whose loss in
    a power cut costs only time (a cache)."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    # A name of its own ("x": created here, never opened twice), so that two threads writing
    # the same path at once (the sandbox's /etc files) never write into each other's file.
    tmp = os.path.join(folder, f".{os.path.basename(path)}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    try:
        with open(tmp, "x", encoding="utf-8") as f:
            f.write(text)
            if durable:
                f.flush()
                os.fsync(f.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    if not durable:
        return
    try:
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError:
        pass


FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
"""What makes a spreadsheet read a cell as a formula (OWASP's CSV injection list)."""


def unwritable_folder(folder: str) -> str | None:
    """Why nothing can be written into `folder` (made if missing), or None if it can:
    checked before grading, so that no grade is lost to a folder that refuses it at the end."""
    if os.path.lexists(folder) and not os.path.isdir(folder):
        return f"cannot write into {folder}: it is a file, not a folder"
    try:
        os.makedirs(folder, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as e:
        return f"cannot write into {folder} ({e.strerror})"
    return None


def safe_cell(value):
    """A CSV cell a spreadsheet shows as text: one that starts like a formula gets a `'`."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def csv_text(header: list[str], rows: list[dict]) -> str:
    """A CSV table (every text cell neutralized: `safe_cell`)."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=header)
    writer.writeheader()
    writer.writerows({k: safe_cell(v) for k, v in row.items()} for row in rows)
    return buffer.getvalue()
