"""nbgrader settings for the course kit; run nbgrader commands from this folder."""
import os
import sys

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)  # so nbgrader can load graders.nbgrader_plugin

from nbconvert.preprocessors import ClearMetadataPreprocessor, CSSHTMLHeaderPreprocessor  # noqa: E402
from nbgrader.preprocessors import (  # noqa: E402
    AssignLatePenalties, CheckCellMetadata, ClearHiddenTests, GetGrades,
    IgnorePattern, LimitOutput, SaveAutoGrades,
)

from graders.nbgrader_plugin import FillGradeCells  # noqa: E402
from graders.nbgrader_plugin import DropClearedCellMetadata  # noqa: E402
from nbgrader.preprocessors import ClearOutput, DeduplicateIds, OverwriteCells, OverwriteKernelspec  # noqa: E402

c = get_config()  # noqa: F821

c.CourseDirectory.root = here
c.CourseDirectory.course_id = "scaling-jax"
c.CourseDirectory.source_directory = "source"
c.CourseDirectory.release_directory = "release"
c.CourseDirectory.submitted_directory = "submitted"
c.CourseDirectory.autograded_directory = "autograded"
c.CourseDirectory.feedback_directory = "feedback"
c.CourseDirectory.db_url = "sqlite:///" + os.path.join(here, "gradebook.db")
c.CourseDirectory.ignore = [".ipynb_checkpoints", "*.pyc", "__pycache__", "*.jaxexport"]

c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}
c.ClearSolutions.text_stub = "YOUR ANSWER HERE"

# No kernel runs student code during autograde: nbgrader's Execute would run it unsandboxed,
# as the grader's user. FillGradeCells grades the submitted code in the graders' sandbox and
# writes each grade cell's message and score; it must come before SaveAutoGrades (which
# reads its numbers). Feedback shows those messages; the student's own outputs are the ones
# they saw while working.
c.Autograde.autograde_preprocessors = [
    IgnorePattern,
    ClearMetadataPreprocessor,
    LimitOutput,
    FillGradeCells,
    SaveAutoGrades,
    AssignLatePenalties,
    CheckCellMetadata,
]
# Feedback shows the grader's messages, never the instructor's hidden test lines.
c.GenerateFeedback.preprocessors = [GetGrades, ClearHiddenTests, CSSHTMLHeaderPreprocessor]
# Duplicated grade cells: nbgrader keeps the last one; the others become ordinary cells
# (without DropClearedCellMetadata nbgrader 0.9 fails the whole notebook).
c.Autograde.sanitize_preprocessors = [
    ClearOutput, DeduplicateIds, DropClearedCellMetadata, OverwriteKernelspec, OverwriteCells,
    CheckCellMetadata,
]
