"""nbgrader's Submit, asking again before it hands in a notebook with no work in it.

nbgrader hands in whatever lies in the student's copy of the assignment folder, with no word
when that copy is the release untouched (the student worked in another copy, or never saved).
`SubmitAskingIfUnchanged` refuses once when no answer cell of any notebook differs from the
release, naming the folder Submit reads; the same Submit again within ten minutes hands it
in as it is. The student's settings select it (`c.ExchangeFactory.submit`, written by
`graders/handout.py`); it serves the Assignment List's Submit and `nbgrader submit` alike.
"""
from __future__ import annotations

import hashlib
import json
import os
import textwrap
import time

import nbformat
from nbgrader.exchange.default.submit import ExchangeSubmit
from nbgrader.utils import find_all_notebooks

CONFIRM_SECONDS = 600
"""How long a refused Submit waits for the student's second press."""


def _answers(path: str) -> dict[str, str] | None:
    """The sources of a notebook's answer cells (nbgrader solution cells) by grade id; all
    cells by position when it has none; None when it is not a readable notebook."""
    try:
        nb = nbformat.read(path, as_version=4)
    except Exception:  # nbgrader and the graders report unreadable notebooks themselves
        return None
    cells = [(c.metadata.get("nbgrader", {}), c.source) for c in nb.cells]
    answers = {meta.get("grade_id", ""): source for meta, source in cells if meta.get("solution")}
    return answers or {str(i): source for i, (_, source) in enumerate(cells)}


def unchanged_notebooks(release_path: str, src_path: str) -> list[str]:
    """The notebooks of `src_path` whose answer cells are exactly the release's; [] as soon
    as any notebook differs (some work is being handed in)."""
    unchanged = []
    for name in find_all_notebooks(release_path):
        mine = os.path.join(src_path, name)
        if not os.path.exists(mine):
            continue
        released, submitted = _answers(os.path.join(release_path, name)), _answers(mine)
        if released is None or submitted is None or released != submitted:
            return []
        unchanged.append(name)
    return unchanged


def refusal(folder: str, unchanged: list[str]) -> str:
    """What the student reads (at the end of the Assignment List's error box, which does not
    wrap lines: so they are kept short)."""
    paragraphs = [
        f"Nothing was handed in: {', '.join(unchanged)} in {folder} has no answer cell changed since "
        f"the release (every '# YOUR CODE HERE' and 'YOUR ANSWER HERE' is as handed out).",
        "Submit hands in the notebook in that folder, as last saved. If you worked there, save it "
        "(File > Save Notebook) and press Submit again; if you worked in another copy, put your "
        "work into this one.",
        f"To hand it in unchanged anyway, press Submit again within {CONFIRM_SECONDS // 60} minutes.",
    ]
    return "\n" + "\n".join(textwrap.fill(p, 88, break_on_hyphens=False, break_long_words=False)
                          for p in paragraphs)


class SubmitAskingIfUnchanged(ExchangeSubmit):
    """nbgrader's Submit that refuses, once, a submission with no answer changed."""

    def _fingerprint(self, names: list[str]) -> str:
        digest = hashlib.sha256()
        for name in names:
            with open(os.path.join(self.src_path, name), "rb") as f:
                digest.update(name.encode() + b"\0" + f.read())
        return digest.hexdigest()

    def _confirmed(self, fingerprint: str) -> bool:
        """Was this same submission refused less than CONFIRM_SECONDS ago? Records it if not."""
        os.makedirs(self.cache_path, exist_ok=True)
        marker = os.path.join(self.cache_path, f"unchanged-{self.coursedir.assignment_id}.json")
        try:
            with open(marker) as f:
                earlier = json.load(f)
            if earlier["fingerprint"] == fingerprint and time.time() - earlier["time"] < CONFIRM_SECONDS:
                os.remove(marker)
                return True
        except (OSError, ValueError, KeyError, TypeError):
            pass
        with open(marker, "w") as f:
            json.dump({"fingerprint": fingerprint, "time": time.time()}, f)
        return False

    def copy_files(self):
        self.init_release()
        unchanged = unchanged_notebooks(self.release_path, self.src_path)
        if unchanged and not self._confirmed(self._fingerprint(unchanged)):
            self.fail(refusal(self.src_path, unchanged))
        super().copy_files()
