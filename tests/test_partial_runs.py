"""Work that finished is kept (issue 28): `dslab report` of an execution stopped before its results were stored
reports the jobs that ended, marked partial; `dslab run --repeats N` runs every job N times."""

from __future__ import annotations

import json
import threading
import time

from dslab.cli import main

from .scripted_jobs import ScriptedJobs
from .test_workflow import put_datasets

TINY = {"name": "tiny", "datasets": [{"name": "tiny-jpg", "format": "jpg"}], "instance_type": "ml.m5.xlarge", "compute": "v100",
        "max_concurrency": 1}


def _wait(condition, seconds: float = 60.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_report_of_a_stopped_execution_reports_the_jobs_that_ended_marked_partial(emulated, tmp_path, capsys):
    scripted, started, release = ScriptedJobs(), [], threading.Event()

    def jobs(request, update):
        started.append(request["TrainingJobName"])
        if len(started) < 3:
            return scripted(request, update)
        release.wait(60)   # the third job runs until the execution is stopped, which stops it
        return {"TrainingJobStatus": "Stopped", "SecondaryStatus": "Stopped", "SecondaryStatusTransitions": []}

    with emulated(jobs) as lab:
        put_datasets(lab, ["tiny-jpg"])
        arn = lab.start({**TINY, "modes": ["File", "FastFile", "Pipe", "EFS"]})
        _wait(lambda: len(started) == 3)
        sfn = lab.client("stepfunctions")
        sfn.stop_execution(executionArn=arn)
        release.set()
        _wait(lambda: sfn.describe_execution(executionArn=arn)["status"] != "RUNNING")
        assert sfn.describe_execution(executionArn=arn)["status"] == "ABORTED"   # Collect never ran
        name = arn.rsplit(":", 1)[-1]
        assert "Contents" not in lab.client("s3").list_objects_v2(Bucket=lab.bucket, Prefix=f"results/{name}/results.json")
        _wait(lambda: lab.client("sagemaker").describe_training_job(TrainingJobName=started[2])["TrainingJobStatus"] == "Stopped")
        capsys.readouterr()
        assert main(["report", name, "--out", str(tmp_path / "report")]) == 0   # by name, as by ARN
        said = capsys.readouterr().out
    results = json.loads((tmp_path / "report" / "results.json").read_text())
    assert results["partial"] == {"done": 3, "total": 4, "reason": "the execution ended ABORTED"}
    assert [(r["job_name"], r["status"]) for r in results["records"]] == [
        (started[0], "Completed"), (started[1], "Completed"), (started[2], "Stopped")]
    assert results["records"][0]["metrics"]["samples_per_second"] == 320.0   # from the job's own output archive
    report = (tmp_path / "report" / "report.md").read_text()
    assert "**Partial: the execution ended ABORTED at 3/4 jobs. The answer and the tables rest on the 3 that finished.**" in report
    assert "partial report: the execution ended ABORTED at 3/4 jobs" in said


def test_report_of_an_execution_that_failed_before_its_results_were_stored_reports_the_jobs_that_ended(
        emulated, tmp_path, capsys):
    """A FAILED execution (here Collect itself failing: S3 refuses its results.json, ResultsNotStored) is reported like
    a stopped one: every job that ended, marked partial with how the execution ended."""
    from dslab.emulator.patches import HOOKS

    def refuse_results(service, operation, request):   # the deployed Collect's PutObject, in its own interpreter
        if (service, operation) == ("s3", "PutObject") and request.url.split("?")[0].endswith("/results.json"):
            return 403, "AccessDenied", "S3 refused the results"
        return None

    with emulated(ScriptedJobs()) as lab:
        put_datasets(lab, ["tiny-jpg"])
        HOOKS.api_fault = refuse_results
        execution = lab.run({**TINY, "modes": ["File", "FastFile"]})
        HOOKS.api_fault = None
        assert execution.status == "FAILED" and execution.error == "ResultsNotStored", execution.cause
        name = execution.arn.rsplit(":", 1)[-1]
        assert "Contents" not in lab.client("s3").list_objects_v2(Bucket=lab.bucket, Prefix=f"results/{name}/results.json")
        capsys.readouterr()
        assert main(["report", execution.arn, "--out", str(tmp_path / "report")]) == 0
        said = capsys.readouterr().out
    results = json.loads((tmp_path / "report" / "results.json").read_text())
    assert results["partial"] == {"done": 2, "total": 2, "reason": "the execution ended FAILED"}
    assert sorted((r["mode"], r["status"]) for r in results["records"]) == [("FastFile", "Completed"), ("File", "Completed")]
    assert "**Partial: the execution ended FAILED at 2/2 jobs." in (tmp_path / "report" / "report.md").read_text()
    assert "partial report: the execution ended FAILED at 2/2 jobs" in said


def test_run_repeats_overrides_the_files_repeats(emulated, tmp_path, capsys):
    """MLPerf Storage reports the mean of 5 runs; `--repeats` asks for them without editing the file."""
    with emulated(ScriptedJobs()) as lab:
        put_datasets(lab, ["tiny-jpg"])
        experiment = tmp_path / "tiny.json"
        experiment.write_text(json.dumps({**TINY, "modes": ["File", "FastFile"], "repeats": 1}))
        outputs = tmp_path / "cdk-outputs.json"
        outputs.write_text(json.dumps({"DataSourceLab": {"StateMachineArn": lab.state_machine_arn, "BucketName": lab.bucket}}))
        assert main(["run", "--experiment", str(experiment), "--repeats", "3", "--outputs", str(outputs), "--wait",
                     "--poll", "0.2", "--plain"]) == 0
        execution = capsys.readouterr().out.split("started ", 1)[1].split()[0]
        results = lab.read_json(f"results/{execution.rsplit(':', 1)[-1]}/results.json")
    assert results["experiment"]["repeats"] == 3
    assert sorted((r["mode"], r["repeat"]) for r in results["records"]) == [
        (m, i) for m in ("FastFile", "File") for i in range(3)]


def _out_with_a_run(tmp_path, experiment, partial: bool):
    """An --out as an interrupted (or finished) `dslab local` left it: results.json, a report, a log per job."""
    out = tmp_path / "out"
    (out / "jobs").mkdir(parents=True)
    records = [{"job_name": "dsl-a-file-r0-1", "status": "Completed"}, {"job_name": "dsl-a-pipe-r0-2", "status": "Failed"}]
    results = {"experiment": experiment.document, "backend": "local", "records": records, "execution": "exec-1",
               "local_run": {"experiment_hash": experiment.content_hash, "attempt": 1}}
    if partial:
        results["partial"] = {"done": 2, "total": 3, "reason": "interrupted"}
    (out / "results.json").write_text(json.dumps(results))
    (out / "report.md").write_text("# report")
    for name in ("dsl-a-file-r0-1", "dsl-a-pipe-r0-2", "dsl-a-efs-r0-3"):
        (out / "jobs" / f"{name}.log").write_text("log")
    return out


def test_an_interrupted_out_is_resumed_fresh_starts_over_and_another_experiments_is_refused(tmp_path):
    import pytest

    from dslab.core.errors import ConfigError
    from dslab.inputs.experiment_file import load_experiment
    from dslab.local.lab import prepare_out, resume_of
    path = tmp_path / "e.yaml"
    path.write_text("name: a\ninstance_type: ml.m5.xlarge\ncompute: v100\nmodes: [File, Pipe, EFS]\n"
                    "datasets: [{name: a, format: tfrecord, generate: {images: 10}}]\n")
    experiment = load_experiment(path)
    said: list[str] = []
    # Interrupted: resumed with its execution's name, the completed job kept; the others' logs set apart.
    out = _out_with_a_run(tmp_path, experiment, partial=True)
    resume = resume_of(out, experiment, fresh=False)
    assert (resume.execution, [r["job_name"] for r in resume.kept], resume.attempt) == ("exec-1", ["dsl-a-file-r0-1"], 2)
    prepare_out(out, resume, experiment, False, said.append)
    assert sorted(p.name for p in (out / "jobs").glob("*.log")) == ["dsl-a-file-r0-1.log"]
    assert sorted(p.name for p in (out / "jobs" / "attempt-1").glob("*.log")) == ["dsl-a-efs-r0-3.log", "dsl-a-pipe-r0-2.log"]
    assert said[-1].endswith("2 logs of attempt 1's unfinished jobs moved to " f"{out / 'jobs' / 'attempt-1'}/")
    # Another experiment's interrupted run in the same --out: refused, naming --out and --fresh, nothing touched.
    other = load_experiment(path, repeats=2)
    with pytest.raises(ConfigError, match="--out.*another experiment.*--fresh"):
        resume_of(out, other, fresh=False)
    assert (out / "results.json").exists()
    # --fresh: starts over; the earlier run's results, report and logs (set-apart ones too) move aside until it ends.
    assert resume_of(out, experiment, fresh=True) is None
    aside = prepare_out(out, None, experiment, True, said.append)
    assert not (out / "results.json").exists() and not (out / "jobs").exists()
    assert (aside / "results.json").exists() and len(list((aside / "jobs").rglob("*.log"))) == 3
    assert said[-1].startswith(f"{out}: starting over (--fresh): the earlier run's 2 result and report files and 3 job "
                               f"logs are kept in {aside}/ until this run ends")


def test_a_finished_run_in_out_is_replaced_not_resumed(tmp_path):
    from dslab.inputs.experiment_file import load_experiment
    from dslab.local.lab import prepare_out, resume_of
    path = tmp_path / "e.yaml"
    path.write_text("name: a\ninstance_type: ml.m5.xlarge\ncompute: v100\nmodes: [File]\n"
                    "datasets: [{name: a, format: tfrecord, generate: {images: 10}}]\n")
    experiment = load_experiment(path)
    out = _out_with_a_run(tmp_path, experiment, partial=False)
    said: list[str] = []
    assert resume_of(out, experiment, fresh=False) is None     # `make bench-lab` runs twice: both run every job
    aside = prepare_out(out, None, experiment, False, said.append)   # kept aside until the new run ends
    assert not (out / "jobs").exists() and len(list((aside / "jobs").glob("*.log"))) == 3
    assert said[0].startswith(f"{out}: starting over: the earlier run's 2 result and report files and 3 job logs are kept")


def test_local_repeats_overrides_the_files_repeats(tmp_path, monkeypatch):
    """`dslab local --repeats 3` runs every job of the file three times (r0, r1, r2), as `dslab run --repeats` does;
    checked on the experiment the local lab loads, before anything is generated or started."""
    from dslab.local import lab as local_lab

    class Started(Exception):
        pass

    given = []

    def capture(experiment, field):   # the first thing run_local does with the loaded experiment
        given.append((experiment, field))
        raise Started()

    monkeypatch.setattr(local_lab, "check_job_count", capture)
    path = tmp_path / "e.yaml"
    path.write_text("name: a\ninstance_type: ml.p3.2xlarge\nmodes: [File, EFS]\nrepeats: 1\n"
                    "datasets: [{name: a, format: tfrecord, generate: {images: 10}}]\n")
    import pytest
    with pytest.raises(Started):
        main(["local", "--experiment", str(path), "--out", str(tmp_path / "out"), "--cache", str(tmp_path / "cache"),
              "--repeats", "3"])
    from dslab.core.experiment import expand
    experiment, field = given[0]
    assert experiment.repeats == 3 and field == "--repeats"   # a job count past the cap would name the flag
    assert sorted((s.mode, s.repeat) for s in expand(experiment)) == [(m, i) for m in ("EFS", "File") for i in range(3)]
    assert not (tmp_path / "cache").exists() and not (tmp_path / "out").exists()
