"""`make test` runs on two workers; the tests that start training scripts or FUSE mounts must share one
(test_local_lab.assert_clean looks for leftover s3fs and train.py processes machine-wide)."""

from __future__ import annotations

import re

from .conftest import ONE_WORKER_MODULES, REPO

# What starts training-script processes or s3fs mounts.
STARTS_PROCESSES = re.compile(r"\b(run_local|LocalLab|run_training_job|run_request_file)\(|\"run-local\"|\"dslab\.cli\", \"local\"")


def test_every_module_that_starts_jobs_or_mounts_runs_on_the_lab_worker():
    starting = {f"tests/{path.name}" for path in (REPO / "tests").glob("test_*.py")
                if STARTS_PROCESSES.search(path.read_text())}
    assert "tests/test_local_lab.py" in starting   # the pattern still finds what it is for
    assert starting <= set(ONE_WORKER_MODULES), f"add to conftest.ONE_WORKER_MODULES: {sorted(starting - set(ONE_WORKER_MODULES))}"
