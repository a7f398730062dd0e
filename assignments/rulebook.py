"""Every graded function's rules, listed and explained (`python -m assignments.rules`).

    python -m assignments.rules                        # every assignment, each part's rules by id
    python -m assignments.rules problem2               # one assignment
    python -m assignments.rules problem2 moe_local     # one graded function
    python -m assignments.rules C001                   # one rule: what it checks, why, who uses it
    python -m assignments.rules --all                  # every kind of rule

In a notebook, `explain("C001")` or `explain(roll_diff)` prints the same. A part's rules are the
one list its contract declares (`Part.rules`): on the compiled program's communication,
memory and work (`assignments.rules`) and on how the function is written
(`assignments.style_rules`). Nothing here needs JAX.
"""
from __future__ import annotations

import argparse
import sys
import textwrap

from .contract import CHECKS, Assignment, Part
from .rules import RULES, AllOf, OnlyWhen, Rule

WIDTH = 96


def rule_entries(part: Part) -> list[tuple[Rule, str]]:
    """The part's rules one by one, each with the condition it applies under ("" for always):
    combinators (`AllOf`, `OnlyWhen`) opened up."""
    entries: list[tuple[Rule, str]] = []

    def add(rule, condition: str) -> None:
        if isinstance(rule, AllOf):
            for r in rule.rules:
                add(r, condition)
        elif isinstance(rule, OnlyWhen):
            add(rule.rule, rule.condition if not condition else f"{condition}, {rule.condition}")
        else:
            entries.append((rule, condition))

    for rule in part.rules:
        add(rule, "")
    return entries


def entry(code: str):
    """The kind of rule (`RULES`) or the check (`CHECKS`) with this id: each has a code, a title,
    what it checks and why. KeyError if the kit has none."""
    code = code.upper()
    if code in CHECKS:
        return CHECKS[code]
    if code in RULES:
        return RULES[code]
    raise KeyError(f"no rule or check {code!r}; the kit has {', '.join(sorted(CHECKS) + sorted(RULES))}")


def rule_title(code: str) -> str:
    """A rule's or check's name ("no-communication"), "" for an id the kit does not have."""
    try:
        return entry(code).title
    except KeyError:
        return ""


def _wrapped(text: str, indent: str) -> str:
    return textwrap.fill(" ".join(text.split()), WIDTH, initial_indent=indent, subsequent_indent=indent,
                         break_long_words=False, break_on_hyphens=False)


def describe_part(assignment: Assignment, part: Part) -> str:
    """A part's rules, each with its id, what it asks of this part and why."""
    lines = [f"{assignment.name} / {part.name} ({part.points:g} points): {part.task}"]
    for rule, condition in rule_entries(part):
        when = f" ({condition})" if condition else ""
        lines.append(f"  {rule.code} {rule.title}: {rule.describe()}{when}")
        why = getattr(rule, "why", "") or rule.rationale
        lines.append(_wrapped(why, "        "))
    return "\n".join(lines)


def users(code: str) -> list[str]:
    """The graded functions whose contracts declare a rule of kind `code`."""
    from .contracts import ASSIGNMENTS

    return [f"{a.name}.{p.name}" for a in ASSIGNMENTS.values() for p in a.parts
            if any(r.code == code for r, _ in rule_entries(p))]


def explain_rule(code: str) -> str:
    """What a kind of rule (or a check of the kit's) checks, why, how it is measured, and which
    functions use it."""
    found = entry(code)
    lines = [f"{found.code} {found.title}", _wrapped(f"What it checks: {found.checks}.", ""),
             _wrapped(f"Why: {found.rationale}", "")]
    if found.code in CHECKS:
        lines.append("Used by: every graded function (a check the kit makes of all of them).")
        return "\n".join(lines)
    doc = [" ".join(p.split()) for p in (found.__doc__ or "").strip().split("\n\n")]
    lines += [_wrapped(f"How it is measured: {' '.join(doc)}", "")]
    used = users(found.code)
    lines.append(_wrapped(f"Used by: {', '.join(used) if used else 'no graded function yet'}", ""))
    return "\n".join(lines)


def checks_block() -> str:
    """The checks the kit makes of every graded function, one line each."""
    lines = ["Every graded function (the kit's own checks, whatever its contract):"]
    lines += [f"  {c.code} {c.title}: {c.checks}" for c in CHECKS.values()]
    return "\n".join(lines)


def _all_rules() -> str:
    return checks_block() + "\n\nThe rules contracts declare:\n" + "\n".join(
        f"  {code} {cls.title}: {cls.checks}" for code, cls in sorted(RULES.items()))


def listing(assignment: str | None = None, part: str | None = None) -> str:
    """Every part's rules: of one assignment (and one part), or of all of them."""
    from .contracts import ASSIGNMENTS, get_assignment

    chosen = [get_assignment(assignment)] if assignment else list(ASSIGNMENTS.values())
    blocks = [describe_part(a, p) for a in chosen for p in a.parts if part is None or p.name == part]
    if part is not None and not blocks:
        raise KeyError(f"{assignment} has no graded function {part!r}; it has: "
                       f"{', '.join(p.name for p in chosen[0].parts)}")
    return "\n\n".join(([checks_block()] if part is None else []) + blocks)


def explain(what) -> None:
    """Print a rule's explanation (`explain("C001")`), or a graded function's rules (`explain(roll_diff)`,
    or its name)."""
    from .contracts import ASSIGNMENTS

    name = getattr(what, "__name__", what)
    if isinstance(name, str) and (name.upper() in RULES or name.upper() in CHECKS):
        print(explain_rule(name))
        return
    for assignment in ASSIGNMENTS.values():
        for part in assignment.parts:
            if part.name == name:
                print(describe_part(assignment, part))
                return
    raise KeyError(f"{what!r} is neither a rule id ({', '.join(sorted(CHECKS) + sorted(RULES))}) "
                   f"nor a graded function")


def main(argv: list[str] | None = None) -> int:
    from .contracts import ASSIGNMENTS

    parser = argparse.ArgumentParser(prog="python -m assignments.rules", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", nargs="?", help="an assignment (e.g. problem2) or a rule id (e.g. C001)")
    parser.add_argument("part", nargs="?", help="one graded function of the assignment")
    parser.add_argument("--all", action="store_true", help="list every kind of rule")
    args = parser.parse_args(argv)
    try:
        if args.all:
            print(_all_rules())
        elif args.what and (args.what.upper() in RULES or args.what.upper() in CHECKS):
            print(explain_rule(args.what))
        elif args.what is None or args.what in ASSIGNMENTS:
            print(listing(args.what, args.part))
        else:
            parser.error(f"{args.what!r} is neither an assignment ({', '.join(ASSIGNMENTS)}) "
                         f"nor a rule id ({', '.join(sorted(RULES))})")
    except KeyError as e:
        parser.error(str(e.args[0]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
