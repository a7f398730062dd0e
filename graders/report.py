"""One HTML page on a graded class: what it got wrong and how its code communicates.

    python -m graders.report graded/problem1 [-o PAGE]

FOLDER is what `graders.batch` wrote (`graded/<assignment>`, one `<student>/results.json`
each) or, after `nbgrader autograde`, the course's `graded/<assignment>`. The page
(`FOLDER/report.html` unless -o says otherwise) shows the score distribution of every graded
function, the most frequent first problems grouped by kind, the communication patterns the
class's programs compiled to (with a picture of each), the slowest and failed gradings, and
a link to each student's results.json.

It is built from the results alone (`graders.class_results`): nothing is regraded and no
student code runs. It opens offline: one file, no script, no font or picture fetched, and a
content security policy that forbids both. Every name and message is escaped (they are
hostile text), and no hidden input appears: the messages are the ones students read.
"""
from __future__ import annotations

import argparse
import datetime
import html
import os
import sys
import urllib.parse

from .class_results import (NO_COMMUNICATION, NO_PROGRAM, WHOLE, ClassResults, Graded, NoResults,
                            example_case, first_problems, function_scores, grading_seconds, histogram,
                            pattern_table, problem_table, read_class, slowest_phase)
from .files import unwritable_folder, write_atomic
from .results import REPORT_PAGE as PAGE

TOP_PROBLEMS = 30
"""Kinds of problem listed before the rest fold away."""
PICTURES = 4
"""Communication patterns per function drawn as a schedule (the most common ones)."""
SLOWEST = 10
NAMES_SHOWN = 12
"""Students named beside a problem or pattern before the rest are counted."""
# Dark enough for 4.5:1 on white and distinct in grey print: red for nothing, green for full marks.
ZERO, PARTIAL, FULL, INK, MUTED = "#b3261e", "#1f5fa8", "#1b7a3a", "#1a1a1a", "#555555"
STYLE = f"""
body {{ font: 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: {INK};
       background: #fff; max-width: 1200px; margin: 0 auto; padding: 16px 24px 48px; }}
h1 {{ font-size: 24px; margin: 8px 0 4px; }} h2 {{ font-size: 19px; margin: 32px 0 8px;
       border-bottom: 1px solid #ccc; padding-bottom: 4px; }} h3 {{ font-size: 16px; margin: 20px 0 6px; }}
.meta, .note {{ color: {MUTED}; }} nav a {{ margin-right: 14px; }} a {{ color: #0b57d0; }}
table {{ border-collapse: collapse; margin: 6px 0 12px; }}
th, td {{ text-align: left; vertical-align: top; padding: 3px 10px 3px 0; border-bottom: 1px solid #e4e4e4; }}
th {{ font-weight: 600; }} td.n {{ text-align: right; font-variant-numeric: tabular-nums; }}
.msg, code {{ font: 12.5px/1.4 ui-monospace, "DejaVu Sans Mono", monospace; word-break: normal;
              overflow-wrap: break-word; }}
.msg {{ color: #333; min-width: 340px; max-width: 520px; }}
.who {{ max-width: 300px; }} .pattern {{ min-width: 240px; }} code.name {{ white-space: nowrap; }}
.charts {{ display: grid; grid-template-columns: repeat(auto-fill, minmax(330px, 1fr)); gap: 8px 20px; }}
figure {{ margin: 0; }} figcaption {{ font-size: 13px; color: {MUTED}; }}
.full {{ color: {FULL}; font-weight: 600; }} .zero {{ color: {ZERO}; }}
details {{ display: inline; }} details > summary {{ cursor: pointer; color: #0b57d0; }}
h3 code {{ font-size: 15px; }} h3 .note {{ font-weight: normal; font-size: 14px; }}
.pictures {{ display: grid; grid-template-columns: repeat(auto-fill, minmax(540px, 1fr)); gap: 12px 24px;
            margin: 4px 0 12px; }}
@media print {{ nav {{ display: none; }} body {{ max-width: none; padding: 0; }}
               details > summary {{ color: {INK}; }} }}
"""
CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"
"""No script, no request: the page shows what it holds and nothing else."""


def esc(text) -> str:
    return html.escape(str(text), quote=True)


def link(path: str, page: str, text: str) -> str:
    """A link from the page to `path`, relative, each part of the path percent-encoded (a
    student's folder named `javascript:...` stays a file name)."""
    relative = os.path.relpath(os.path.abspath(path), os.path.dirname(os.path.abspath(page)))
    href = "/".join(urllib.parse.quote(part, safe="") for part in relative.split(os.sep))
    return f'<a href="./{esc(href)}">{esc(text)}</a>'


def _points(x: float) -> str:
    return f"{x:.2f}".rstrip("0").rstrip(".")


# --- plots ------------------------------------------------------------------------------------------


def bar_chart(counts: list[int], labels: list[str], description: str, width: int = 320) -> str:
    """Vertical bars with their counts on top, the first one red (no points), the last green
    (full marks), in an inline SVG."""
    height, top, bottom = 150, 16, 22
    slot = width / len(counts)
    most = max(counts) or 1
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" role="img" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}" aria-label="{esc(description)}"><title>{esc(description)}</title>',
             f'<line x1="0" x2="{width}" y1="{height - bottom}" y2="{height - bottom}" stroke="#999"/>']
    for i, (count, label) in enumerate(zip(counts, labels)):
        colour = ZERO if i == 0 else FULL if i == len(counts) - 1 else PARTIAL
        h = (height - top - bottom) * count / most
        x, y = i * slot + slot * 0.15, height - bottom - h
        parts.append(f'<rect x="{x:.1f}" y="{y:.1f}" width="{slot * 0.7:.1f}" height="{h:.1f}" fill="{colour}">'
                     f'<title>{esc(label)}: {count}</title></rect>')
        parts.append(f'<text x="{x + slot * 0.35:.1f}" y="{y - 3:.1f}" text-anchor="middle" font-size="11" '
                     f'fill="{INK}">{count}</text>')
        parts.append(f'<text x="{x + slot * 0.35:.1f}" y="{height - 7}" text-anchor="middle" font-size="10.5" '
                     f'fill="{MUTED}">{esc(label)}</text>')
    return "".join(parts) + "</svg>"


def share_bar(count: int, most: int, width: int = 120) -> str:
    """A horizontal bar for a count out of the largest count in its table (prints, unlike CSS
    backgrounds)."""
    w = width * count / most if most else 0
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="10" aria-hidden="true">'
            f'<rect width="{w:.1f}" height="10" fill="{PARTIAL}"/></svg>')


def _bin_labels(bins: int) -> list[str]:
    if bins == 4:
        return ["0", "< \u00bc", "\u00bc\u2013\u00bd", "\u00bd\u2013\u00be", "\u00be\u20131", "full"]
    step = 100 // bins
    return ["0"] + [f"{k * step}\u2013{(k + 1) * step}%" for k in range(bins)] + ["full"]


def _distribution(scores: list[float], points: float, bins: int, what: str, width: int) -> str:
    counts = histogram(scores, points, bins)
    labels = _bin_labels(bins)
    said = ", ".join(f"{label}: {n}" for label, n in zip(labels, counts))
    return bar_chart(counts, labels, f"{what}, students per share of {_points(points)} points: {said}", width)


# --- sections ----------------------------------------------------------------------------------------


def _header(results: ClassResults) -> str:
    totals = [g.result.score for g in results.graded]
    most = sum(points for _, points in results.functions)
    dates = sorted(d for d in (g.result.provenance.graded_at for g in results.graded) if d)
    when = f"; graded {dates[0][:16]} to {dates[-1][:16]}" if dates else ""
    now = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="minutes")
    mean = sum(totals) / len(totals)
    return (f"<h1>{esc(results.title)}: class report</h1>"
            f'<p class="meta">{len(results.graded)} student(s) from <code>{esc(os.path.abspath(results.folder))}</code>'
            f"{esc(when)}; page written {esc(now)}. Mean {_points(mean)} of {_points(most)} auto-graded points; "
            f"{sum(t >= most for t in totals)} with full marks, {sum(t == 0 for t in totals)} with none"
            + (f"; {len(results.unread)} results file(s) could not be used (see Gradings)" if results.unread else "")
            + ".</p>"
            '<p class="note">Built from the results.json files alone: nothing was regraded and no student code ran. '
            "The messages are those the students read, which never hold a hidden input. Written answers are "
            "graded by hand and are not in these results.</p>"
            '<nav><a href="#scores">Scores</a><a href="#problems">First problems</a>'
            '<a href="#communication">Communication</a><a href="#gradings">Gradings</a>'
            '<a href="#students">Students</a></nav>')


def _scores(results: ClassResults) -> str:
    totals = [g.result.score for g in results.graded]
    most = sum(points for _, points in results.functions)
    out = ['<h2 id="scores">Scores</h2><figure>',
           _distribution(totals, most, 10, "Total", 720),
           f"<figcaption>Total auto-graded score, students per share of {_points(most)} points.</figcaption>"
           "</figure><h3>By graded function</h3><div class=\"charts\">"]
    for f in function_scores(results):
        out.append(f"<figure>{_distribution(f.scores, f.points, 4, f.name, 330)}<figcaption><code>{esc(f.name)}"
                   f"</code> ({_points(f.points)} points): mean {_points(f.mean)}, median {_points(f.median)}; "
                   f'<span class="full">{f.full} full</span>, <span class="zero">{f.zero} none</span> '
                   f"of {len(f.scores)}</figcaption></figure>")
    return "".join(out) + "</div>"


def _names(students: list[Graded] | list[str], results: ClassResults, page: str) -> str:
    """The students of a group, each a link to their results; past the first few, folded."""
    where = {g.student: g.path for g in results.graded}
    links = [link(where[n], page, n) for n in (s if isinstance(s, str) else s.student for s in students)]
    shown = ", ".join(links[:NAMES_SHOWN])
    if len(links) <= NAMES_SHOWN:
        return shown
    rest = ", ".join(links[NAMES_SHOWN:])
    return f"{shown} <details><summary>and {len(links) - NAMES_SHOWN} more</summary>{rest}</details>"


def _first(result) -> str:
    """A submission's first problem, with its function: "roll_diff: wrong values"."""
    first = next(iter(first_problems(result)), None)
    if first is None:
        return ""
    return first.kind if first.function == WHOLE else f"{first.function}: {first.kind}"


def _wrap(name: str) -> str:
    """A function's name that may break after its underscores (narrow table columns)."""
    return esc(name).replace("_", "_<wbr>")


def _problems(results: ClassResults, page: str) -> str:
    table = problem_table(results.graded)
    out = ['<h2 id="problems">Most frequent first problems</h2>',
           '<p class="note">Each student\'s first problem in each function (the first thing its feedback lists), '
           "counted by the rule or check that found it: its id and name (<code>python -m assignments.rules "
           "ID</code> explains it). A problem that stopped the whole submission counts once. The message is the "
           "first student's, as they read it; the next section groups the programs by what they send.</p>"]
    if not table:
        return "".join(out) + "<p>No problems: every graded function got full marks.</p>"
    most = len(table[0][1])
    rows = []
    for problem, students in table:
        function = (f'<code class="name">{esc(problem.function)}</code>' if problem.function != WHOLE
                    else f"<em>{WHOLE}</em>")
        rows.append(f'<tr data-function="{esc(problem.function)}" data-kind="{esc(problem.kind)}" '
                    f'data-students="{len(students)}"><td class="n">{len(students)}</td>'
                    f'<td>{share_bar(len(students), most, 80)}</td><td>{function}</td>'
                    f'<td>{esc(problem.kind)}</td><td class="msg">{esc(problem.message)}</td>'
                    f'<td class="who">{_names(students, results, page)}</td></tr>')
    head = "<tr><th>students</th><th></th><th>function</th><th>rule</th><th>e.g.</th><th>who</th></tr>"
    out.append(f"<table>{head}{''.join(rows[:TOP_PROBLEMS])}</table>")
    if len(rows) > TOP_PROBLEMS:
        out.append(f"<details><summary>{len(rows) - TOP_PROBLEMS} more kind(s), each of fewer students</summary>"
                   f"<table>{head}{''.join(rows[TOP_PROBLEMS:])}</table></details>")
    return "".join(out)


def _picture(group: list[Graded], function: str, pattern: str) -> str:
    """The schedule of one program with this pattern (its first student's case with the most
    collectives), as a figure."""
    from assignments.schedule import draw_schedule

    part = next(p for p in group[0].result.parts if p.name == function)
    case = example_case(part)
    caption = f"{pattern}: {group[0].student}'s program, {case.case.label}"
    try:
        svg = draw_schedule({function: case.analysis}, compact=True).svg()
    except Exception as e:  # one odd analysis must not cost the whole page
        svg = f'<p class="note">no picture: {esc(type(e).__name__)}: {esc(str(e)[:200])}</p>'
    return f"<figure>{svg}<figcaption>{esc(caption)}</figcaption></figure>"


def _communication(results: ClassResults, page: str) -> str:
    out = ['<h2 id="communication">How the programs communicate</h2>',
           '<p class="note">What each student\'s compiled programs send, over all of a function\'s hidden cases: '
           "the collectives and mesh axes, a ring of collective-permutes one way or both ways (on rings of 3 or "
           f"more devices), \"in a loop\" when a collective runs more than once. \"{NO_PROGRAM}\": no case "
           "compiled. Pictures show one program of each pattern step by step, with times estimated on a TPU v5e "
           "by the book's model.</p>"]
    for name, _ in results.functions:
        table = pattern_table(results.graded, name)
        most = max((len(g) for _, g in table), default=0)
        rows, pictures = [], []
        for pattern, group in table:
            rows.append(f'<tr data-function="{esc(name)}" data-pattern="{esc(pattern)}" data-students="{len(group)}">'
                        f'<td class="n">{len(group)}</td><td>{share_bar(len(group), most)}</td>'
                        f'<td class="pattern">{esc(pattern)}</td><td>{_names(group, results, page)}</td></tr>')
            if pattern not in (NO_PROGRAM, NO_COMMUNICATION) and len(pictures) < PICTURES:
                pictures.append(_picture(group, name, pattern))
        rule = results.rules.get(name)
        out.append(f"<h3><code>{esc(name)}</code>" + (f' <span class="note">rule: {esc(rule)}</span>' if rule else "")
                   + "</h3><table><tr><th>students</th><th></th><th>pattern</th><th>who</th></tr>"
                   + "".join(rows) + "</table>")
        if pictures:
            out.append(f'<div class="pictures">{"".join(pictures)}</div>')
    return "".join(out)


def _gradings(results: ClassResults, page: str) -> str:
    out = ['<h2 id="gradings">Gradings</h2><h3>Failed or not graded</h3>']
    rows = []
    for g in results.graded:
        failure = g.result.failure
        if failure is not None:
            who = "the graders' fault: rerun the batch" if failure.graders_fault else "not graded"
            rows.append(f"<tr><td>{link(g.path, page, g.student)}</td><td>{who}</td>"
                        f'<td class="msg">{esc(failure.message)}</td></tr>')
    rows += [f'<tr><td>{esc(u.student)}</td><td>results not readable</td><td class="msg">{esc(u.why)}</td></tr>'
             for u in results.unread]
    out.append(f"<table><tr><th>student</th><th>what</th><th>why</th></tr>{''.join(rows)}</table>" if rows
               else "<p>None: every submission was graded.</p>")
    slowest = sorted(results.graded, key=lambda g: (-grading_seconds(g.result), g.student))[:SLOWEST]
    out.append(f"<h3>The {len(slowest)} slowest</h3><table><tr><th>student</th><th>seconds</th>"
               "<th>longest phase</th><th>first problem</th></tr>")
    for g in slowest:
        out.append(f'<tr><td>{link(g.path, page, g.student)}</td><td class="n">{grading_seconds(g.result):.1f}</td>'
                   f"<td>{esc(slowest_phase(g.result))}</td><td>{esc(_first(g.result))}</td></tr>")
    return "".join(out) + "</table>"


def _students(results: ClassResults, page: str) -> str:
    names = [name for name, _ in results.functions]
    most = sum(points for _, points in results.functions)
    head = "".join(f"<th><code>{_wrap(n)}</code></th>" for n in names)
    out = ['<h2 id="students">Students</h2><p class="note">Each name links to that student\'s results.json '
           "(every case's verdict, message and communication).</p>",
           f"<table><tr><th>student</th><th>total</th>{head}<th>first problem</th></tr>"]
    for g in results.graded:
        parts = {p.name: p for p in g.result.parts}
        cells = []
        for name, points in results.functions:
            score = parts[name].score if name in parts else None
            css = "" if score is None else ' full' if score >= points else ' zero' if score == 0 else ""
            cells.append(f'<td class="n{css}">{"" if score is None else _points(score)}</td>')
        out.append(f'<tr data-student="{esc(g.student)}"><td>{link(g.path, page, g.student)}</td>'
                   f'<td class="n">{_points(g.result.score)}/{_points(most)}'
                   f"</td>{''.join(cells)}<td>{esc(_first(g.result))}</td></tr>")
    return "".join(out) + "</table>"


def page(results: ClassResults, path: str) -> str:
    """The whole page, to be written at `path` (its links are relative to it)."""
    body = (_header(results) + _scores(results) + _problems(results, path) + _communication(results, path)
            + _gradings(results, path) + _students(results, path))
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
            f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{esc(results.title)}: class report</title><style>{STYLE}</style></head>"
            f"<body>{body}</body></html>\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m graders.report", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folder", help="graders.batch's output folder, or nbgrader's <course>/graded/<assignment>")
    parser.add_argument("-o", "--out", help=f"the page to write (default: FOLDER/{PAGE})")
    args = parser.parse_args(argv)
    try:
        results = read_class(args.folder)
    except NoResults as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    out = args.out or os.path.join(args.folder, PAGE)
    if problem := unwritable_folder(os.path.dirname(os.path.abspath(out))):
        print(f"error: {problem}: pass -o a path in a folder you can write",
              file=sys.stderr)
        return 2
    write_atomic(out, page(results, out))
    unread = f"; {len(results.unread)} results file(s) not readable, listed in it" if results.unread else ""
    print(f"wrote {out}: {results.assignment}, {len(results.graded)} student(s){unread}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
