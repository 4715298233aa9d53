"""Progress while a run goes: jobs done of total, each job's phase, elapsed and time left; a live table on a
terminal, a plain line per change otherwise (`dslab local`, `dslab run --wait`)."""

from __future__ import annotations

import io
import sys
import json

import pytest
from rich.console import Console

from dslab.cli import main
from dslab.core.progress import RunProgress, clock
from dslab.progress_view import ProgressView

from .scripted_jobs import ScriptedJobs
from .test_workflow import put_datasets


def test_time_left_is_the_jobs_still_to_run_at_the_mean_duration_of_those_that_ended():
    run = RunProgress(total=4, concurrency=1, started=0.0)
    assert run.eta(5.0) is None                                   # nothing has ended: no estimate yet
    run.observe("a", "InProgress", "Training", 0.0)
    run.observe("a", "Completed", "Completed", 10.0)              # a took 10 s
    run.observe("b", "InProgress", "Downloading", 10.0)
    assert run.eta(14.0) == 6.0 + 2 * 10.0                        # b has 6 s left, c and d 10 s each
    assert run.counts() == "1/4 jobs done" and run.running == 1
    run.observe("b", "Failed", "Failed", 20.0)
    run.skipped = 1                                               # Plan skipped one (FSx down): never runs
    assert run.counts() == "2/3 jobs done (1 failed), 1 skipped"
    assert run.eta(20.0) == 10.0
    two_lanes = RunProgress(total=5, concurrency=2, started=0.0)
    two_lanes.observe("a", "InProgress", "Training", 0.0)
    two_lanes.observe("a", "Completed", "", 8.0)
    assert two_lanes.eta(8.0) == 4 * 8.0 / 2
    assert "1/5 jobs done, 0 running; 8s elapsed, about 16s left" == two_lanes.summary(8.0)
    assert [clock(s) for s in (0.4, 59, 61, 3599, 3720)] == ["0s", "59s", "1m01s", "59m59s", "1h02m"]


def test_an_unchanged_state_is_not_news():
    run = RunProgress(total=1)
    assert run.observe("a", "InProgress", "Training", 1.0)
    assert not run.observe("a", "InProgress", "Training", 2.0)
    assert run.observe("a", "InProgress", "Uploading", 3.0)
    assert run.jobs["a"].started == 1.0 and run.jobs["a"].ended is None


def test_plain_view_says_a_line_per_change_with_where_the_run_stands():
    now = {"t": 0.0}
    lines: list[str] = []
    run = RunProgress(total=2, started=0.0)
    with ProgressView(run, live=False, say=lines.append, clock_now=lambda: now["t"]) as view:
        view.observe("job-a", "InProgress", "Training")
        view.observe("job-a", "InProgress", "Training")   # polled again, nothing new
        now["t"] = 30.0
        view.observe("job-a", "Completed", "Completed")
        view.observe("job-b", "InProgress", "Starting")
    assert lines == ["  [   0.0s] job-a: InProgress/Training (0/2 done)",
                     "  [  30.0s] job-a: Completed/Completed (1/2 done, about 30s left)",
                     "  [  30.0s] job-b: InProgress/Starting (1/2 done, about 30s left)"]


def test_live_view_on_a_terminal_shows_every_job_its_phase_time_and_the_run_summary():
    now = {"t": 0.0}
    screen = io.StringIO()
    console = Console(file=screen, force_terminal=True, width=140, color_system=None)
    run = RunProgress(total=3, started=0.0)
    lines: list[str] = []
    with ProgressView(run, live=True, say=lines.append, console=console, clock_now=lambda: now["t"],
                      footer=lambda: "spend so far $0.12") as view:
        view.observe("job-a", "InProgress", "Training")
        now["t"] = 65.0
        view.observe("job-a", "Completed", "Completed")
        view.observe("job-b", "InProgress", "Downloading")
        final = view.render()
    assert lines == []                                        # the table, not lines
    shown = io.StringIO()
    Console(file=shown, width=140, color_system=None).print(final)
    text = shown.getvalue()
    assert "1/3 jobs done, 1 running; 1m05s elapsed, about 2m10s left" in text
    for expected in ("job-a", "Completed/Completed", "1m05s", "job-b", "InProgress/Downloading", "(1 more)",
                     "not started", "spend so far $0.12"):
        assert expected in text, expected
    assert "job-b" in screen.getvalue()                       # what the terminal was shown while it ran


def test_dslab_run_wait_follows_the_execution_job_by_job(emulated, tmp_path, capsys):
    with emulated(ScriptedJobs()) as lab:
        put_datasets(lab, ["tiny-jpg"])
        experiment = tmp_path / "tiny.json"
        experiment.write_text(json.dumps({"name": "tiny", "datasets": [{"name": "tiny-jpg", "format": "jpg"}],
                                          "modes": ["File", "FastFile"], "instance_type": "ml.m5.xlarge", "compute": "v100"}))
        outputs = tmp_path / "cdk-outputs.json"
        outputs.write_text(json.dumps({"DataSourceLab": {"StateMachineArn": lab.state_machine_arn, "BucketName": lab.bucket}}))
        assert main(["run", "--experiment", str(experiment), "--outputs", str(outputs), "--wait", "--poll", "0.2", "--plain"]) == 0
    out = capsys.readouterr().out.splitlines()
    changes = [line for line in out if line.startswith("  [")]
    completed = {line.split("] ", 1)[1].split(":", 1)[0] for line in changes if ": Completed" in line}
    assert len(completed) == 2, "\n".join(out)                # each job's end was said, once
    assert out[-1].startswith("SUCCEEDED: 2/2 jobs done, spend $"), out


def test_a_poll_interval_out_of_range_is_refused_naming_the_option(capsys):
    import pytest
    with pytest.raises(SystemExit) as exited:
        main(["status", "--wait", "--poll", "0"])
    assert exited.value.code == 2 and "--poll" in capsys.readouterr().err


def stand_in_function(source: str):
    """A Python function as the stand-in's Lambda holds it (tests/test_functions_from_assets.py)."""
    from .test_functions_from_assets import function
    return function(source)


def test_a_stand_in_functions_log_takes_only_its_own_output(capsys):
    """A stand-in Lambda's print() goes to its log; what this process prints meanwhile (`dslab run --wait` following
    the run) stays on the terminal. A process-wide redirect once swallowed the watcher's lines; the function now runs
    in an interpreter of its own (dslab/emulator/functions.py)."""
    import threading
    from dslab.emulator.functions import FunctionRuntime
    runtime = FunctionRuntime()
    watcher = threading.Thread(target=lambda: [print("from the watcher") for _ in range(3)])
    try:
        watcher.start()
        answer = runtime.invoke(stand_in_function("def handler(e, c):\n    print('from the function')\n"), {}, {})
        watcher.join()
    finally:
        runtime.close()
    assert answer.logs == "from the function\n" and capsys.readouterr().out == "from the watcher\n" * 3


def test_watching_describes_a_job_until_it_has_ended_then_never_again(monkeypatch):
    """A look costs a DescribeTrainingJob per job not yet seen ended (160 jobs at a 15-s poll was ~11 calls a
    second, ended or not); the ended ones keep their state and spend."""
    import datetime as dt
    import boto3
    from dslab.cli import runs
    described: list[str] = []
    status = {"job-a": "Completed", "job-b": "InProgress"}

    class Fake:
        def describe_execution(self, executionArn):
            return {"name": "exec-1", "status": "RUNNING", "startDate": dt.datetime.now(dt.timezone.utc)}

        def get_object(self, Bucket, Key):
            body = json.dumps({"jobs": [{"name": "job-a"}, {"name": "job-b"}], "quotas": {"concurrency": 2}}).encode()
            return {"Body": io.BytesIO(body)}

        def describe_training_job(self, TrainingJobName):
            described.append(TrainingJobName)
            return {"TrainingJobStatus": status[TrainingJobName], "SecondaryStatus": status[TrainingJobName],
                    "ResourceConfig": {"InstanceType": "ml.p3.2xlarge", "InstanceCount": 1}, "BillableTimeInSeconds": 3600}

    monkeypatch.setattr(boto3, "client", lambda *a, **k: Fake())
    ended: dict = {}
    first = runs.describe_progress("arn:exec-1", "us-east-1", "bucket", ended)
    second = runs.describe_progress("arn:exec-1", "us-east-1", "bucket", ended)
    assert described == ["job-a", "job-b", "job-b"]                   # job-a ended: described once
    assert first["jobs"] == second["jobs"] == {"Completed": 1, "InProgress": 1}
    assert second["spend_usd"] == first["spend_usd"] == pytest.approx(2 * 3.825)   # the ended job's spend kept
    status["job-b"] = "Completed"
    runs.describe_progress("arn:exec-1", "us-east-1", "bucket", ended)
    runs.describe_progress("arn:exec-1", "us-east-1", "bucket", ended)
    assert described == ["job-a", "job-b", "job-b", "job-b"] and set(ended) == {"job-a", "job-b"}


def test_a_live_view_started_while_a_stand_in_function_runs_draws_its_table_on_the_terminal(monkeypatch):
    """`dslab local` starts its view as the workflow's first function (Plan) starts. The in-process function's log
    redirect once answered isatty() False for every thread, so a view started then chose plain lines, or made a
    rich console that is not interactive for good: its table was drawn only at the end (issue 28). Under a
    pseudo-terminal, the table must be drawn while the function still runs."""
    import os
    import threading
    import time
    from dslab.emulator.functions import FunctionRuntime
    master, slave = os.openpty()
    terminal = open(slave, "w", buffering=1)
    monkeypatch.setattr(sys, "stdout", terminal)
    runtime = FunctionRuntime()
    answers = []
    # a stand-in Lambda function: its print() goes to its log while it runs, for 3 s
    sleeper = stand_in_function("import time\ndef handler(e, c):\n    print('from the function')\n    time.sleep(3)\n")
    thread = threading.Thread(target=lambda: answers.append(runtime.invoke(sleeper, {}, {})))
    thread.start()
    time.sleep(0.5)
    try:
        view = ProgressView(RunProgress(total=2, started=time.monotonic()), live=None, say=lambda _: None)
        with view:
            view.observe("job-a", "InProgress", "Training")
            time.sleep(1.5)   # two refreshes at rich's 2 per second, the function still running
            os.set_blocking(master, False)
            try:
                drawn = os.read(master, 1 << 20).decode(errors="replace")
            except BlockingIOError:
                drawn = ""
            assert thread.is_alive()
    finally:
        thread.join()
        runtime.close()
        monkeypatch.undo()
        terminal.close()
        os.close(master)
    assert view.live, "standard output is a terminal: the view should be the live table"
    assert "job-a" in drawn and "InProgress/Training" in drawn and "━" in drawn, drawn
    assert answers[0].logs == "from the function\n"


def test_status_leaves_an_unpriced_instances_spend_out_and_says_so(monkeypatch, capsys):
    """Issue 26: no instance is priced at $0. A job on an instance the price table lacks (a table older than
    the run's --prices) is not counted in the spend, and the line says which instance types are left out."""
    import datetime as dt
    import boto3
    from dslab.cli import runs

    class Fake:
        def describe_execution(self, executionArn):
            return {"name": "exec-1", "status": "RUNNING", "startDate": dt.datetime.now(dt.timezone.utc)}

        def get_object(self, Bucket, Key):
            return {"Body": io.BytesIO(json.dumps({"jobs": [{"name": "priced"}, {"name": "unpriced"}]}).encode())}

        def describe_training_job(self, TrainingJobName):
            instance = "ml.p3.2xlarge" if TrainingJobName == "priced" else "ml.x99.large"
            return {"TrainingJobStatus": "Completed", "SecondaryStatus": "Completed", "BillableTimeInSeconds": 3600,
                    "ResourceConfig": {"InstanceType": instance, "InstanceCount": 1}}

    monkeypatch.setattr(boto3, "client", lambda *a, **k: Fake())
    state = runs.describe_progress("arn:exec-1", "us-east-1", "bucket")
    assert state["spend_usd"] == pytest.approx(3.825) and state["unpriced_instance_types"] == ["ml.x99.large"]
    assert runs.spend_text(state) == "$3.83 (not counting the jobs on ml.x99.large: not in the price table)"
