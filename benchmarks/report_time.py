"""How long the class report (`python -m graders.report`) takes on a class of N students, and
how that splits between reading the results and writing the page.

    python benchmarks/report_time.py GRADED_FOLDER [--students 200] [--repeat 3]

GRADED_FOLDER is a folder of `<student>/results.json` (what `graders.batch` or nbgrader's
autograde writes, e.g. the output of `benchmarks/realistic_class.py`); its students are copied
under new names until there are N, so the figures are for a class of that size with that mix
of results. Everything printed is measured in this run (best of --repeat).
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def class_of(source: str, students: int, dest: str) -> int:
    """`dest` filled with `students` copies of `source`'s student folders; returns bytes of JSON."""
    found = sorted(d for d in os.listdir(source) if os.path.isfile(os.path.join(source, d, "results.json")))
    if not found:
        raise SystemExit(f"no <student>/results.json under {source}")
    size = 0
    for i in range(students):
        original = found[i % len(found)]
        os.makedirs(os.path.join(dest, f"s{i:04d}-{original}"))
        shutil.copy(os.path.join(source, original, "results.json"), os.path.join(dest, f"s{i:04d}-{original}", "results.json"))
        size += os.path.getsize(os.path.join(source, original, "results.json"))
    return size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folder")
    parser.add_argument("--students", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    from graders.class_results import read_class
    from graders.report import main as report_main, page

    with tempfile.TemporaryDirectory(prefix="report-bench-") as tmp:
        folder = os.path.join(tmp, "graded")
        size = class_of(args.folder, args.students, folder)
        reading, writing, whole = [], [], []
        for _ in range(args.repeat):
            started = time.perf_counter()
            results = read_class(folder)
            read = time.perf_counter()
            page(results, os.path.join(folder, "report.html"))
            reading.append(read - started)
            writing.append(time.perf_counter() - read)
            started = time.perf_counter()
            assert report_main([folder, "-o", os.path.join(tmp, "report.html")]) == 0
            whole.append(time.perf_counter() - started)
    print(f"class: {args.students} students, {size / 2**20:.1f} MiB of results.json")
    print(f"python -m graders.report: {min(whole):.2f} s (median {statistics.median(whole):.2f} s)")
    print(f"  reading the results:   {min(reading):.2f} s ({min(reading) / min(whole):.0%})")
    print(f"  writing the page:      {min(writing):.2f} s ({min(writing) / min(whole):.0%})")


if __name__ == "__main__":
    main()
