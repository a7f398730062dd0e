"""The class report on the graded corpora (end to end, through the command line a README reader
types), then in a real browser (marked `browser`). Hand-built classes: tests/unit/test_report.py."""
from __future__ import annotations

import html
import os
import re
import shutil
import subprocess
import sys
import urllib.parse

import pytest
from report_builders import ALL_GATHER_Y, FUNCTIONS, HOSTILE, PROBLEM1, judged, page_text, submission

from graders.class_results import WHOLE
from graders.report import main as report_main
from graders.results import write_results

pytestmark = pytest.mark.stack_neutral  # the class report


# --- end to end: the graded corpora -------------------------------------------------------------------------


GRADED_HERE = ("comm_gather_roll", "comm_whole_roll", "replicated_output", "wrong_dtype", "nan_output", "slice_roll")
"""Files of the problem1 corpus added to the batch's folder, graded in this process (as
test_graders_problem1.py grades them): programs that communicate, and values that are wrong
(whose messages are where a leaked hidden value would be quoted)."""


@pytest.fixture(scope="session")
def corpus_report(problem1_batch, tmp_path_factory):
    """The sandbox's files of the corpora as the session's batch graded them (one folder of
    results.json, as `graders.batch` writes), with `GRADED_HERE` added, reported by the
    command a README reader types; (folder, page, stdout)."""
    from grading import CORPUS, CORPUS_LIMITS, graded

    from graders.results import Provenance

    folder = str(tmp_path_factory.mktemp("report") / "problem1")
    shutil.copytree(problem1_batch.out, folder)
    for student in GRADED_HERE:
        path = os.path.join(CORPUS, student + ".py")
        result = graded(path, "problem1", CORPUS_LIMITS, here=True)
        result.provenance = Provenance(student=student, path=path)
        write_results(os.path.join(folder, student, "results.json"), result)
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    proc = subprocess.run([sys.executable, "-m", "graders.report", folder], cwd=repo, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return folder, os.path.join(folder, "report.html"), proc.stdout


def _who(text: str, function: str, kind: str) -> set[str]:
    """The students of the report's row for `function` and `kind` (empty if there is none)."""
    row = re.search(rf'<tr data-function="{re.escape(html.escape(function))}" data-kind="{re.escape(html.escape(kind))}" '
                    rf'data-students="\d+">(.*?)</tr>', text, re.S)
    return set() if row is None else {html.unescape(n) for n in re.findall(r">([^<>]+)</a>", row.group(1))}


def _rows(text: str, attribute: str) -> dict[tuple[str, str], int]:
    return {(html.unescape(f), html.unescape(k)): int(n) for f, k, n in
            re.findall(rf'<tr data-function="([^"]*)" data-{attribute}="([^"]*)" data-students="(\d+)">', text)}


@pytest.mark.slow
def test_the_report_on_the_graded_corpora_counts_what_the_corpora_hold(corpus_report):
    """Every student of the corpora on the page; each known fault in its kind, counted; the
    communication of the programs that communicate; the stub unfinished everywhere."""
    folder, path, stdout = corpus_report
    students = sorted(d for d in os.listdir(folder) if os.path.isdir(os.path.join(folder, d)))
    assert stdout.strip() == f"wrote {path}: problem1, {len(students)} student(s)"
    text = page_text(path)
    assert re.findall(r'<tr data-student="([^"]*)"', text) == students
    problems, patterns = _rows(text, "kind"), _rows(text, "pattern")
    whole = _who(text, WHOLE, "E004 submission-runs")             # counted by rule id, not by wording
    assert {"binary", "truncated", "forge_events"} <= whole       # a syntax error, a broken notebook, a forged event
    assert "crash_one_case" in _who(text, "roll_diff", "E002 traces")   # its export died on one case
    assert _who(text, "roll_diff", "C001 no-communication") >= {"comm_gather_roll"}
    assert "replicated_output" in _who(text, "shard_average_jit", "V004 sharding")
    assert "wrong_dtype" in _who(text, "shard_average_shard_map", "V003 dtype")
    assert "nan_output" in _who(text, "block_average_shard_map", "V005 values")
    assert all("stub" in _who(text, f, "E001 defined") for f in FUNCTIONS)   # not implemented
    assert patterns[("roll_diff", "ring of collective-permutes over X (one way)")] == 1   # comm_whole_roll
    assert patterns[("shard_average_jit", "all-gather over X + all-gather over Y")] == 1   # replicated_output
    for f in FUNCTIONS:   # every student counted once per function
        assert sum(n for (g, _), n in patterns.items() if g == f) == len(students)
    solution = re.search(r'<tr data-student="solution">.*?</tr>', text).group(0)
    assert ">10/10<" in solution


@pytest.mark.slow
def test_no_hidden_input_or_reference_value_reaches_the_page(corpus_report):
    """Are the hidden inputs and reference values of every case absent from the page (it may
    say where and how much, never what)?"""
    import numpy as np

    from graders.hidden import case_seed, hidden_cases, hidden_inputs

    text = page_text(corpus_report[1])
    secret = set()
    for part in PROBLEM1.parts:
        for i, case in enumerate(hidden_cases(PROBLEM1)[part.name]):
            arrays = hidden_inputs(PROBLEM1, part, case, case_seed("problem1", part.name, i))
            reference = part.reference(*[a.astype(np.float64) for a in arrays], mesh=case.mesh, **case.statics)
            secret |= {round(float(v), 3) for v in [*arrays[0].ravel(), *np.ravel(reference)] if abs(v) > 0.01}
    # The page's own numbers have at most 2 decimals (scores, seconds, coordinates): a value
    # with more is quoted from somewhere, and must not be a hidden one.
    quoted = [float(x) for x in re.findall(r"-?\d+\.\d{3,}(?:e[-+]?\d+)?", text)]
    assert [x for x in quoted if round(x, 3) in secret] == []


# --- in a browser ------------------------------------------------------------------------------------------

CONTRAST = """() => {
  const rgb = s => s.match(/[\\d.]+/g).slice(0, 3).map(Number);
  const lum = c => { const [r, g, b] = c.map(v => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; });
                     return 0.2126 * r + 0.7152 * g + 0.0722 * b; };
  const ratio = (a, b) => { const [x, y] = [lum(a), lum(b)].sort((p, q) => q - p); return (x + 0.05) / (y + 0.05); };
  const white = [255, 255, 255];
  const texts = [...document.querySelectorAll('body *')].filter(e => !e.closest('svg.kit-schedule')
      && [...e.childNodes].some(n => n.nodeType === 3 && n.textContent.trim()));
  const fills = [...document.querySelectorAll('svg:not(.kit-schedule) rect, svg:not(.kit-schedule) text')]
      .filter(e => !e.closest('svg.kit-schedule')).map(e => getComputedStyle(e).fill).filter(f => f.startsWith('rgb'));
  return {text: Math.min(...texts.map(e => ratio(rgb(getComputedStyle(e).color), white))),
          fills: Math.min(...fills.map(f => ratio(rgb(f), white))),
          charts: [...document.querySelectorAll('figure svg')].map(s => s.getBoundingClientRect().width),
          scroll: document.documentElement.scrollWidth, height: document.documentElement.scrollHeight};
}"""


@pytest.mark.browser
@pytest.mark.slow
def test_the_report_reads_in_a_browser_at_1280_px(busy_shared_memory, corpus_report, tmp_path, repo_root):
    """Opened from disk in Chromium at 1280 px: does it fetch nothing, run nothing (a student
    called <script> included), fit the width, draw every chart, and keep text and bars in
    readable contrast on white? Screenshots go to build/screenshots/report/."""
    from routes import launch_chromium, sync_playwright

    folder = str(tmp_path / "problem1")
    shutil.copytree(corpus_report[0], folder)
    write_results(os.path.join(folder, HOSTILE[0], "results.json"),
                  submission(HOSTILE[0], {"roll_diff": [judged("roll_diff", ALL_GATHER_Y)]}))
    assert report_main([folder]) == 0
    shots = os.path.join(os.environ.get("SCREENSHOTS") or os.path.join(repo_root, "build", "screenshots"), "report")
    os.makedirs(shots, exist_ok=True)
    with sync_playwright()() as p:
        browser = launch_chromium(p)
        page_ = browser.new_page(viewport={"width": 1280, "height": 900})
        requests, dialogs, errors = [], [], []
        page_.on("request", lambda r: requests.append(r.url))
        page_.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        page_.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page_.goto("file://" + os.path.join(folder, "report.html"))
        page_.screenshot(path=os.path.join(shots, "top.png"))
        page_.screenshot(path=os.path.join(shots, "whole.png"), full_page=True)
        measured = page_.evaluate(CONTRAST)
        print(measured)
        link = page_.locator(f'tr[data-student="{HOSTILE[0]}"] a')
        assert link.inner_text() == HOSTILE[0]
        link.click()
        page_.wait_for_load_state()
        assert urllib.parse.unquote(page_.url) == "file://" + os.path.join(folder, HOSTILE[0], "results.json")
        browser.close()
    assert [urllib.parse.unquote(r) for r in requests] == [   # the page, then the link clicked: nothing else
        "file://" + os.path.join(folder, "report.html"), "file://" + os.path.join(folder, HOSTILE[0], "results.json")]
    assert dialogs == [] and errors == []
    assert measured["scroll"] <= 1280 and len(measured["charts"]) >= 1 + len(FUNCTIONS)
    assert all(w > 200 for w in measured["charts"]), measured["charts"]
    assert measured["text"] >= 4.5 and measured["fills"] >= 4.5, measured
