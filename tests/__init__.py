"""The test suite, a package so that its modules import each other as ``tests.*``.

Importing it (which pytest does before tests/conftest.py) makes Python's cyclic garbage
collector run less often in every process of the run: the workers, and the suite that
tests/test_new_environment.py runs inside a copy of the repository. A process of the suite holds
the modules of the program and its providers, the collected tests and the session's syntheses,
and under the default thresholds (700, 10, 10) the collector walks them again and again while
the mock engine allocates its futures: a quarter to a third of the CPU time of a whole-program
run under mocks, and of the collection. Only how often it runs changes: every cycle is still
collected.
"""

import gc

# A young collection every 10,000 net allocations instead of 700; the middle generation every
# 20 of those and the oldest every 50 of those (CPython also waits until a quarter of the
# objects a full collection would walk are new). Measured in one process, CPU seconds before
# and after: tests/test_network.py with tests/test_teams.py 35 and 21; tests/test_tenant_pods.py,
# tests/test_policies.py and tests/test_jobs.py 64 and 49 (for about 40 MB more memory).
gc.set_threshold(10_000, 20, 50)
