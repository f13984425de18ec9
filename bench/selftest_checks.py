"""check(), shared by the self tests that train_bench_selftest.py runs: raises on the first
failure, and counts the checks that held for the final line."""

_passed = [0]


def check(condition, message):
    if not condition:
        raise AssertionError(message)
    _passed[0] += 1


def checks_passed():
    return _passed[0]
