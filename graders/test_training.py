"""Hidden graders for training: one test per graded function, one case per hidden configuration.

    python -m pytest graders/test_training.py --submission PATH [-k FUNCTION] [-v]
"""
from graders.pytest_plugin import case_tests

ASSIGNMENT = "training"
# test_<function> for every graded function of the contract (assignments/contracts/).
globals().update(case_tests(ASSIGNMENT))
