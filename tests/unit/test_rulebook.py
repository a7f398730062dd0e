"""The rules in one place: every graded function declares all of its rules in one list, each
kind of rule has an id, a name, what it checks and why, and `python -m assignments.rules`
lists and explains them (no JAX)."""
from __future__ import annotations

import pytest

from assignments.contract import CHECKS, PROBLEM_KINDS, Problem
from assignments.contracts import ASSIGNMENTS
from assignments.rulebook import explain, explain_rule, listing, main, rule_entries
from assignments.rules import RULES, AllOf, NoCommunication
from assignments.style_rules import JitOnly, StyleRule, UsesShardMap, WorkInsideShardMap


def test_every_kind_of_rule_says_what_it_checks_and_why():
    """Does each registered rule have a code of one letter and three digits, a kebab-case name,
    a line saying what it checks, a rationale and a docstring (how it is measured)?"""
    assert len(RULES) >= 20
    for code, cls in RULES.items():
        assert code == cls.code and len(code) == 4 and code[0] in "CHMRSW" and code[1:].isdigit(), code
        assert cls.title and cls.title == cls.title.lower() and " " not in cls.title, code
        assert cls.checks and cls.rationale and (cls.__doc__ or "").strip(), code
    assert len({cls.title for cls in RULES.values()}) == len(RULES)


def test_every_part_declares_its_rules_in_one_list_of_registered_rules():
    """Is every rule a part declares (combinators opened) a registered kind, its style rules
    among them (no style left in other fields), and is its compiled-program rule derived?"""
    for assignment in ASSIGNMENTS.values():
        for part in assignment.parts:
            entries = rule_entries(part)
            assert entries, part.name
            assert all(RULES.get(r.code) is type(r) for r, _ in entries), part.name
            assert part.style_rules == tuple(r for r in part.rules if isinstance(r, StyleRule))
            assert not any(isinstance(r, StyleRule) for r in getattr(part.rule, "rules", (part.rule,)))


def test_the_listing_names_every_part_of_every_assignment_with_its_rule_ids(capsys):
    """`python -m assignments.rules` prints every graded function with the ids of its rules."""
    assert main([]) == 0
    out = capsys.readouterr().out
    for assignment in ASSIGNMENTS.values():
        for part in assignment.parts:
            assert f"{assignment.name} / {part.name} (" in out
            for rule, _ in rule_entries(part):
                assert f"  {rule.code} {rule.title}: " in out
    problem1 = listing("problem1", "shard_average_jit")
    assert "C001 no-communication" in problem1 and "S001 jit-only" in problem1
    with pytest.raises(KeyError, match="no graded function 'nope'"):
        listing("problem1", "nope")


def test_explain_names_a_rule_or_a_function(capsys):
    """Does `explain("C001")` say what, why, how and who uses it, and `explain(fn)` a function's rules?"""
    text = explain_rule("c001")
    assert text.startswith("C001 no-communication\nWhat it checks: the compiled program holds no collective")
    assert "Why: " in text and "How it is measured: " in text and "problem1.roll_diff" in text

    def roll_diff():
        pass

    explain(roll_diff)
    assert capsys.readouterr().out.startswith("problem1 / roll_diff (2 points)")
    with pytest.raises(KeyError, match="neither a rule id"):
        explain("Z999")
    assert main(["C001"]) == 0 and "Used by: " in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["nothing-of-the-kind"])


def test_a_notebook_reaches_explain_from_the_package(capsys):
    """`assignments.explain` is the rulebook's, loaded on first use like the other names."""
    import assignments

    assignments.explain("S002")
    assert capsys.readouterr().out.startswith("S002 uses-shard-map\nWhat it checks: ")


def test_a_compiled_rule_of_one_kind_and_the_style_rules_split_as_the_graders_run_them():
    """A part's `rule` is its rules on the compiled program (one, or all of them together);
    its style rules run in the order declared."""
    from assignments.contract import Arg, Case, Part

    a = Arg("A", ("S",), ("X",))
    one = Part(name="f", points=1, task="t", args=(a,), result=a, rules=(NoCommunication(), JitOnly()),
               reference=lambda A, *, mesh: A, visible_case=Case((2, 4), {"S": 8}))
    assert isinstance(one.rule, NoCommunication) and one.style_rules == (JitOnly(),)
    two = Part(name="g", points=1, task="t", args=(a,), result=a,
               rules=(UsesShardMap(), NoCommunication(), WorkInsideShardMap(), NoCommunication(why="w")),
               reference=lambda A, *, mesh: A, visible_case=Case((2, 4), {"S": 8}))
    assert isinstance(two.rule, AllOf) and two.rule.rules == (NoCommunication(), NoCommunication(why="w"))
    assert two.style_rules == (UsesShardMap(), WorkInsideShardMap())


def test_the_kits_own_checks_are_listed_and_explained_like_rules(capsys):
    """Every check the kit makes of every function (E..., V..., P..., H003) has an id no rule
    has, a name, what it checks and why; the listing names each, and explain() explains it."""
    assert not set(CHECKS) & set(RULES)
    for code, check in CHECKS.items():
        assert check.code == code and len(code) == 4 and code[1:].isdigit(), code
        assert check.kind in PROBLEM_KINDS and check.title and check.checks and check.rationale, code
    assert main([]) == 0
    out = capsys.readouterr().out
    assert all(f"  {code} {check.title}: " in out for code, check in CHECKS.items())
    assert explain_rule("v005").startswith("V005 values\nWhat it checks: ")
    assert "every graded function" in explain_rule("E001")


def test_a_problem_round_trips_and_refuses_an_id_the_kit_lacks():
    """A problem read back from JSON is the same record; an unknown id or kind is refused."""
    problem = Problem("C001", "communication observed", "communication")
    assert Problem.from_json(problem.to_json()) == problem and str(problem) == "communication observed"
    with pytest.raises(ValueError, match="not a rule or check the kit has"):
        Problem.from_json({"rule": "C999", "kind": "communication", "message": "m"})
    with pytest.raises(ValueError, match="kind is not one of"):
        Problem.from_json({"rule": "C001", "kind": "advice", "message": "m"})
    assert not Problem("H001", "a hint", "hint").fails and problem.fails


def test_a_hint_is_attached_where_the_contract_says_only():
    """A ring's directions (H002) on every collective-matmul part, never where no ring of permutes
    is asked for (the warm-up, problem1's roll, problem2's routing); roll_diff's note on slices
    (H001) only on roll_diff."""
    hinted = {(a.name, p.name): {h.code for h in p.hints} for a in ASSIGNMENTS.values() for p in a.parts}
    assert hinted[("problem1", "roll_diff")] == {"H001"}
    assert all(codes == {"H002"} for (a, _), codes in hinted.items() if a in ("problem3", "problem4"))
    assert all("H002" not in codes for (a, _), codes in hinted.items() if a in ("warmup", "problem1", "problem2"))


def test_style_rules_and_hints_inside_a_combinator_are_refused():
    """A style rule or a hint inside AllOf would run as a rule of the compiled program (or never):
    is such a Part refused when it is made, naming the fix?"""
    from assignments.contract import Arg, Case, Part
    from assignments.rules import RingDirections

    a = Arg("A", ("S",), ("X",))
    for nested in (JitOnly(), RingDirections()):
        with pytest.raises(TypeError, match="declare style rules and hints in Part.rules itself, not inside AllOf"):
            Part(name="f", points=1, task="t", args=(a,), result=a, rules=(AllOf((NoCommunication(), nested)),),
                 reference=lambda A, *, mesh: A, visible_case=Case((2, 4), {"S": 8}))
