"""The demonstration: release an assignment, autograde sample submissions with nbgrader,
and print the gradebook.

    python -m graders.demo [--assignment problem1] [--keep DIR]

It works in a scratch course folder (the repository is not touched): nbgrader
generate_assignment, three submissions (the solution, the untouched stub and a typical
first attempt with mistakes), nbgrader autograde, generate_feedback and export.
"""
from __future__ import annotations

import argparse
import csv
import os
import shutil
import sys
import tempfile
import time

import nbformat
from rich import box
from rich.console import Console
from rich.table import Table

from .build import nbgrader, solved_notebook
from .samples import notebook_from, sample_path
from .settings import KIT_ROOT

console = Console(width=max(120, Console().width))

SAMPLES = {  # student id -> where the submission comes from
    "solution": "the solutions notebook",
    "stub": "the released notebook, untouched",
    "mistakes": "the released notebook filled with graders/samples/{assignment}_mistakes.py",
}


def course_config(course: str) -> str:
    """A course folder's nbgrader_config.py: the kit's settings with this folder as root."""
    kit_config = os.path.join(KIT_ROOT, "nbgrader_config.py")
    return (f"c = get_config()  # noqa: F821\n"
            f"load_subconfig({kit_config!r})  # noqa: F821\n"
            f"c.CourseDirectory.root = {course!r}\n"
            f"c.CourseDirectory.db_url = 'sqlite:///{course}/gradebook.db'\n")


def write_submissions(course: str, assignment: str) -> None:
    release_nb = os.path.join(course, "release", assignment, f"{assignment}.ipynb")
    notebooks = {
        "solution": solved_notebook(os.path.join(course, "source", assignment, f"{assignment}.ipynb")),
        "stub": nbformat.read(release_nb, as_version=4),
    }
    mistakes = sample_path(f"{assignment}_mistakes.py")
    if os.path.exists(mistakes):
        with open(mistakes) as f:
            notebooks["mistakes"] = notebook_from(release_nb, f.read())
    for student, nb in notebooks.items():
        folder = os.path.join(course, "submitted", student, assignment)
        os.makedirs(folder, exist_ok=True)
        nbformat.write(nb, os.path.join(folder, f"{assignment}.ipynb"))


def read_gradebook(course: str, assignment: str):
    """{student: {cell: (score, max_score, waiting for a human)}}, from nbgrader's database."""
    from nbgrader.api import Gradebook

    rows = {}
    with Gradebook(f"sqlite:///{course}/gradebook.db") as gb:
        for sub in gb.assignment_submissions(assignment):
            for nb in sub.notebooks:
                for grade in nb.grades:
                    waiting = bool(grade.needs_manual_grade and grade.manual_score is None)
                    rows.setdefault(sub.student.id, {})[grade.name] = (grade.score, grade.max_score, waiting)
    return rows


def print_gradebook(course: str, assignment: str, export_csv: str) -> None:
    """The gradebook as nbgrader's database holds it: each cell's score, then the total that
    `nbgrader export` writes (written answers count 0 until a human grades them)."""
    rows = read_gradebook(course, assignment)
    cells = list(next(iter(rows.values())))
    table = Table(title=f"gradebook: {assignment} (from nbgrader's database)", box=box.SIMPLE_HEAVY)
    table.add_column("student")
    for name in cells:  # headings wrap between words, never inside one
        heading = name.replace("_", " ")
        table.add_column(heading, justify="right", min_width=max(map(len, heading.split())))
    table.add_column("total", justify="right", no_wrap=True)  # "10/12 (2 waiting)" on one line
    for student in sorted(rows):
        scores = [rows[student].get(name, (0.0, 0.0, False)) for name in cells]
        values = ["[dim]waiting[/dim]" if waiting else f"{score:g}/{points:g}" for score, points, waiting in scores]
        waiting = sum(points for _, points, w in scores if w)
        total = f"{sum(s for s, _, _ in scores):g}/{sum(p for _, p, _ in scores):g}"
        table.add_row(student, *values, total + (f" ({waiting:g} waiting)" if waiting else ""))
    console.print(table)
    with open(export_csv) as f:
        exported = list(csv.DictReader(f))
    console.print(f"nbgrader export wrote {len(exported)} row(s) to {os.path.basename(export_csv)}: " +
                  ", ".join(f"{r['student_id']}={float(r['score']):g}/{float(r['max_score']):g}"
                            for r in exported))
    console.print("[dim]'waiting': a written answer for a human to grade in formgrader; it counts 0 until "
                  "then. An unchanged 'YOUR ANSWER HERE' is scored 0 by nbgrader itself.[/dim]")


def print_feedback(course: str, assignment: str, student: str, kept: bool) -> None:
    nb_path = os.path.join(course, "autograded", student, assignment, f"{assignment}.ipynb")
    nb = nbformat.read(nb_path, as_version=4)
    where = (f" (feedback page: {os.path.join(course, 'feedback', student, assignment, assignment + '.html')})"
             if kept else "")
    console.print(f"\n[bold]What student '{student}' reads in the grade cells[/bold]{where}:")
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type == "code" and meta.get("grade"):
            text = "".join(o.get("text", "") for o in cell.outputs if o.get("output_type") == "stream")
            first = text.strip().splitlines()[:2]
            console.print("  " + "\n    ".join(first), markup=False, highlight=False)


def prepare_course(assignment: str, course: str) -> None:
    """A scratch course folder: the assignment's source, a config, the release."""
    shutil.copytree(os.path.join(KIT_ROOT, "source", assignment),
                    os.path.join(course, "source", assignment))
    with open(os.path.join(course, "nbgrader_config.py"), "w") as f:
        f.write(course_config(course))
    nbgrader(["generate_assignment", assignment, "--force"], cwd=course)


def autograde_course(assignment: str, course: str) -> str:
    """nbgrader autograde, generate_feedback and export; returns the exported CSV's path."""
    proc = nbgrader(["autograde", assignment, "--force"], cwd=course, check=False)
    if proc.returncode != 0:
        console.print(proc.stdout[-3000:], proc.stderr[-3000:], markup=False)
        raise SystemExit(f"nbgrader autograde failed (exit code {proc.returncode})")
    nbgrader(["generate_feedback", assignment, "--force"], cwd=course)
    export_csv = os.path.join(course, "grades.csv")
    nbgrader(["export", "--to", export_csv], cwd=course)
    return export_csv


def run(assignment: str, course: str, kept: bool = False) -> None:
    started = time.perf_counter()
    console.rule(f"1. nbgrader generate_assignment {assignment}")
    prepare_course(assignment, course)
    console.print(f"release/{assignment}/ written")
    console.rule("2. three sample submissions")
    write_submissions(course, assignment)
    for student, where in SAMPLES.items():
        console.print(f"  {student}: {where.format(assignment=assignment)}")
    console.rule(f"3. nbgrader autograde, generate_feedback, export (scores come from the hidden graders)")
    t0 = time.perf_counter()
    export_csv = autograde_course(assignment, course)
    console.print(f"took {time.perf_counter() - t0:.1f} s for {len(SAMPLES)} submissions")
    print_gradebook(course, assignment, export_csv)
    print_feedback(course, assignment, "mistakes", kept)
    where = (f"course folder: {course}" if kept else
             "the scratch course folder is deleted now (--keep DIR keeps one)")
    console.print(f"\ndone in {time.perf_counter() - started:.0f} s; {where}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m graders.demo", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--assignment", default="problem1")
    parser.add_argument("--keep", metavar="DIR", help="build the course here and keep it")
    args = parser.parse_args(argv)
    if args.keep:
        course = os.path.abspath(args.keep)
        if os.path.exists(course):
            shutil.rmtree(course)
        os.makedirs(course)
        run(args.assignment, course, kept=True)
    else:
        with tempfile.TemporaryDirectory(prefix="course-demo-") as course:
            run(args.assignment, course)
    return 0


if __name__ == "__main__":
    sys.exit(main())
