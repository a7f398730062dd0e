"""Hidden graders for collectives: one test per graded function, one case per hidden configuration.

    python -m pytest graders/test_collectives.py --submission PATH [-k FUNCTION] [-v]
"""
from graders.pytest_plugin import case_tests

ASSIGNMENT = "collectives"
# test_<function> for every graded function of the contract (assignments/contracts/).
globals().update(case_tests(ASSIGNMENT))
