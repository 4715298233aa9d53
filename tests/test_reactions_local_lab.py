"""`dslab local`'s run (dslab/local/lab.py LocalLab.run) as its user sees it, on the fault world's stand-in: the jobs
Plan skipped are counted as skipped (not as jobs still to run), and the results reported are those of the execution
the run waited for. The expected values are written here."""

from __future__ import annotations

from .fault_world import _local_lab_run, world  # noqa: F401


def test_jobs_plan_skipped_are_counted_skipped_and_the_report_is_the_executions_it_waited_for(world, monkeypatch):
    original = world.plan_document
    monkeypatch.setattr(world, "plan_document", lambda execution: {**original(execution), "jobs": [
        {**job, "skip_reason": "FSx for Lustre is not deployed"} if job["name"] == "job-b" else job
        for job in original(execution)["jobs"]]})
    seen = _local_lab_run(world, monkeypatch, interrupted=False)
    assert seen.raised is None, seen.raised
    summary = [line for line in seen.notes["said"] if line.startswith("jobs: ")]
    assert len(summary) == 1 and ", 1 skipped, " in summary[0], seen.notes["said"]
    assert seen.result.results["execution"] == "local-exec"
