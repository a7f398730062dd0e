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

from .build import REPO_ROOT, nbgrader, solved_notebook
from .samples import notebook_from, sample_path

console = Console(width=max(120, Console().width))

SAMPLES = {  # student id -> where the submission comes from
    "solution": "the solutions notebook",
    "stub": "the released notebook, untouched",
    "mistakes": "the released notebook filled with graders/samples/{assignment}_mistakes.py",
}


def course_config(course: str) -> str:
    """A course folder's nbgrader_config.py: the kit's settings with this folder as root."""
    kit_config = os.path.join(REPO_ROOT, "nbgrader_config.py")
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
    """Scores per student and per graded cell, from nbgrader's database."""
    from nbgrader.api import Gradebook

    rows = {}
    with Gradebook(f"sqlite:///{course}/gradebook.db") as gb:
        for sub in gb.assignment_submissions(assignment):
            student = sub.student.id
            for nb in sub.notebooks:
                for grade in nb.grades:
                    rows.setdefault(student, {})[grade.name] = (grade.score, grade.max_score,
                                                                grade.needs_manual_grade)
    return rows


def print_gradebook(course: str, assignment: str, export_csv: str) -> None:
    rows = read_gradebook(course, assignment)
    cells = sorted({name for r in rows.values() for name in r},
                   key=lambda n: list(next(iter(rows.values()))).index(n) if n in next(iter(rows.values())) else 99)
    table = Table(title=f"gradebook: {assignment} (from nbgrader's database)", box=box.SIMPLE_HEAVY)
    table.add_column("student")
    for name in cells:
        table.add_column(name.replace("_", " "), justify="right")
    table.add_column("auto total", justify="right")
    for student in sorted(rows):
        scores = rows[student]
        values = []
        total = maximum = 0.0
        for name in cells:
            score, max_score, manual = scores.get(name, (0, 0, False))
            values.append("[dim]by hand[/dim]" if manual else f"{score:g}/{max_score:g}")
            if not manual:
                total += score
                maximum += max_score
        table.add_row(student, *values, f"{total:g}/{maximum:g}")
    console.print(table)
    with open(export_csv) as f:
        exported = list(csv.DictReader(f))
    console.print(f"nbgrader export wrote {len(exported)} row(s) to {export_csv}: " +
                  ", ".join(f"{r['student_id']}={float(r['score']):g}/{float(r['max_score']):g}"
                            for r in exported))


def print_feedback(course: str, assignment: str, student: str) -> None:
    nb_path = os.path.join(course, "autograded", student, assignment, f"{assignment}.ipynb")
    nb = nbformat.read(nb_path, as_version=4)
    console.print(f"\n[bold]What student '{student}' reads in the grade cells[/bold] "
                  f"(feedback HTML: feedback/{student}/{assignment}/{assignment}.html):")
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type == "code" and meta.get("grade"):
            text = "".join(o.get("text", "") for o in cell.outputs if o.get("output_type") == "stream")
            first = text.strip().splitlines()[:2]
            console.print("  " + "\n    ".join(first), markup=False, highlight=False)


def prepare_course(assignment: str, course: str) -> None:
    """A scratch course folder: the assignment's source, a config, the release."""
    shutil.copytree(os.path.join(REPO_ROOT, "source", assignment),
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


def run(assignment: str, course: str) -> None:
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
    print_feedback(course, assignment, "mistakes")
    console.print(f"\ndone in {time.perf_counter() - started:.0f} s; course folder: {course}")


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
        run(args.assignment, course)
    else:
        with tempfile.TemporaryDirectory(prefix="course-demo-") as course:
            run(args.assignment, course)
    return 0


if __name__ == "__main__":
    sys.exit(main())
