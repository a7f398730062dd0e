"""nbgrader's `release_assignment` into an exchange no student can rearrange (`graders/exchange.py`)."""
from __future__ import annotations

import contextlib
import os
import stat

from nbgrader.exchange.default.release_assignment import ExchangeReleaseAssignment

from .exchange import UnsafeExchange, exchange_problems


class GuardedReleaseAssignment(ExchangeReleaseAssignment):
    """nbgrader's release_assignment into a safe exchange only: it refuses, naming each fix, an
    exchange others could rearrange (nbgrader would make a missing one 0777, and accepts any
    mode whose last three digits are 777), and makes its inbound folder sticky."""

    def ensure_root(self):
        # In place of nbgrader's, which makes a missing exchange 0777 and sets any other to 0777.
        problems = exchange_problems(self.root, self.coursedir.course_id, course_must_exist=False)
        if problems:
            self.fail(str(UnsafeExchange(problems)))

    def init_dest(self):
        # A sticky bit missing from the course's inbound folder is this release's to add; the
        # rest is the instructor's to mend.
        inbound = os.path.join(self.root, self.coursedir.course_id, "inbound")
        with contextlib.suppress(OSError):
            st = os.lstat(inbound)
            if stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid() and not st.st_mode & stat.S_ISVTX:
                os.chmod(inbound, stat.S_IMODE(st.st_mode) | stat.S_ISVTX)
        problems = exchange_problems(self.root, self.coursedir.course_id, course_must_exist=False)
        if problems:
            self.fail(str(UnsafeExchange(problems)))
        super().init_dest()
        st = os.stat(self.inbound_path)
        if not st.st_mode & stat.S_ISVTX:  # made just now, 2733 (nbgrader's mode)
            os.chmod(self.inbound_path, stat.S_IMODE(st.st_mode) | stat.S_ISVTX)
