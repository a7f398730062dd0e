"""Hidden graders for problem2: one test per graded function, one case per hidden configuration.

    python -m pytest graders/test_problem2.py --submission PATH [-k FUNCTION] [-v]
"""
import pytest

from graders.pytest_plugin import case_tests

ASSIGNMENT = "problem2"
# test_<function> for every graded function of the contract (assignments/contracts/).
globals().update(case_tests(ASSIGNMENT))


@pytest.mark.points(1, part="moe_all_to_all")
def test_moe_all_to_all_holds_no_sdf_buffer(judged):
    """Does no value of the compiled program, in a loop body or not, hold as many elements as
    a device's share of an [S, D, F] buffer (the dense computation the routing avoids)?"""
    for result in judged:
        if result.analysis is None:  # it did not compile: the case tests say why
            continue
        s = result.case.all_sizes
        share = s["S"] * s["D"] * s["F"] // (s["nX"] * s["nY"])
        big = result.analysis.values_at_least(share)
        assert not big, (f"[{result.case.label}] {big[0].name} = {big[0].opcode} of "
                         f"{big[0].shape.dtype}{list(big[0].shape.dims)} holds an [S, D, F]-sized "
                         f"share ({share} elements or more)")
