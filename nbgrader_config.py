"""nbgrader settings for the course kit; run nbgrader commands from this folder."""
import os
import sys
import warnings

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)  # so nbgrader can load graders.preprocessors

import nbgrader  # noqa: E402
from nbconvert.preprocessors import ClearMetadataPreprocessor, CSSHTMLHeaderPreprocessor  # noqa: E402
from nbgrader.preprocessors import (  # noqa: E402
    AssignLatePenalties, CheckCellMetadata, ClearOutput,
    DeduplicateIds, IgnorePattern, LimitOutput, OverwriteKernelspec, SaveAutoGrades,
)

from graders.preprocessors import (  # noqa: E402
    ClearHiddenTestsInReleasedCells, ClearMarkSchemeInReleasedCells, DropClearedCellMetadata, FillGradeCells,
    GetGradesWithPending, RestoreLockedCells,
)

# nbgrader 0.9 adds a student's first submission to the gradebook in a way SQLAlchemy 2
# warns about (the submission is recorded all the same): not an error of the course.
warnings.filterwarnings("ignore", message=r"Object of type <\w+> not in session, add operation along",
                        module=r"nbgrader\.api")

c = get_config()  # noqa: F821
# The graders' limits (time, memory, judges, sandbox): one file, read by every grading route.
load_subconfig(os.path.join(here, "grading_config.py"))  # noqa: F821

c.CourseDirectory.root = here
c.CourseDirectory.course_id = "scaling-jax"
# nbgrader's own default exchange, named so the hand-out and the hub read the same folder
# (graders/handout.py takes the course id and this from here); change it here only.
c.Exchange.root = "/usr/local/share/nbgrader/exchange"
c.CourseDirectory.source_directory = "source"
c.CourseDirectory.release_directory = "release"
c.CourseDirectory.submitted_directory = "submitted"
c.CourseDirectory.autograded_directory = "autograded"
c.CourseDirectory.feedback_directory = "feedback"
c.CourseDirectory.db_url = "sqlite:///" + os.path.join(here, "gradebook.db")
c.CourseDirectory.ignore = [".ipynb_checkpoints", "*.pyc", "__pycache__", "*.jaxexport"]

c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}
c.ClearSolutions.text_stub = "YOUR ANSWER HERE"

# Submissions come in as regular files only: a link in the exchange's inbound folder or in an
# LMS archive is left out (nbgrader's own copies follow links, and feedback would carry back
# whatever a link names).
c.ExchangeFactory.collect = "graders.collect.CollectRegularFiles"
# Releases go only into an exchange no student can rearrange (sticky, the course folder the
# instructor's): graders/exchange.py says what is wrong and the command that mends it.
c.ExchangeFactory.release_assignment = "graders.release.GuardedReleaseAssignment"
c.ZipCollectApp.extractor_plugin = "graders.collect.ExtractRegularFiles"

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
# nbgrader parses every submitted notebook in this process: it reads one only within the
# course's bounds (c.Limits.submission_mib, notebook_depth, notebook_nodes, checked on its bytes
# before nbformat parses it; one beyond them fails for that student only, the log naming the
# bound), and `nbgrader autograde` holds at most c.Limits.nbgrader_memory_gib (a memory cgroup
# of its own where one can be made, else the log says why not; formgrader's server never).
c.Autograde.exporter_class = "graders.nbgrader_bounds.BoundedNotebookExporter"
# Written answers: each has a locked rubric cell for graders (a mark scheme region in a
# read-only markdown cell, not a "task" cell, which nbgrader would count as one more answer to
# grade by hand). The release and the feedback remove the mark scheme.
c.ClearMarkScheme.enforce_metadata = False
# Feedback shows the grader's messages, never the instructor's hidden test lines, rubrics or
# model answers (autograde restores locked cells from the database, which keeps both), and
# says which written answers still wait for a grader instead of showing 0. Only the course's
# locked cells hold those: a student's own text with the delimiters in it is left as written.
c.GenerateFeedback.preprocessors = [GetGradesWithPending, ClearHiddenTestsInReleasedCells,
                                    ClearMarkSchemeInReleasedCells,
                                    CSSHTMLHeaderPreprocessor]
# The kit's feedback page is named "feedback" like nbgrader's, and found first: formgrader's
# "Generate Feedback" asks for that name whatever the configuration says.
c.HTMLExporter.extra_template_basedirs = [
    os.path.join(here, "graders", "templates"),
    os.path.join(os.path.dirname(nbgrader.__file__), "server_extensions", "formgrader", "templates"),
]
# Student HTML never runs where anyone looks: formgrader's submission page (it reads this
# config and finds the kit's "formgrade" page first, as "feedback" above) and the feedback
# page keep only safe HTML of every markdown cell, written answer, comment and output
# (`clean_html`, graders/html_safety.py), and carry a content security policy: no script on
# the feedback page, only formgrader's own on its page (tests/test_hostile_html.py).
c.HTMLExporter.sanitize_html = True
c.HTMLExporter.filters = {"clean_html": "graders.html_safety.clean_html",
                          "formgrade_csp": "graders.html_safety.formgrade_csp"}
# Duplicated grade cells: nbgrader keeps the last one; the others become ordinary cells
# (without DropClearedCellMetadata nbgrader 0.9 fails the whole notebook). RestoreLockedCells
# is OverwriteCells without its tampering warnings for cells exactly as released.
c.Autograde.sanitize_preprocessors = [
    ClearOutput, DeduplicateIds, DropClearedCellMetadata, OverwriteKernelspec, RestoreLockedCells,
    CheckCellMetadata,
]
