"""DropClearedCellMetadata: a duplicated grade or solution cell becomes an ordinary cell."""
from __future__ import annotations

from nbgrader.preprocessors import NbGraderPreprocessor


class DropClearedCellMetadata(NbGraderPreprocessor):
    """Make a duplicated grade or solution cell an ordinary cell.

    nbgrader's DeduplicateIds keeps the last cell of each grade id and sets the others'
    nbgrader metadata to ``{}``, which CheckCellMetadata then rejects as an old metadata
    format, failing the whole notebook. Removing the empty metadata lets it be graded
    (`nbgrader_config.py` runs this right after DeduplicateIds)."""

    def preprocess(self, nb, resources):
        for cell in nb.cells:
            if "nbgrader" in cell.metadata and not cell.metadata["nbgrader"]:
                del cell.metadata["nbgrader"]
        return nb, resources
