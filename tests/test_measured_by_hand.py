"""The calibration's own search and reading (dslab/core/measured.py) on inputs whose answers are known by hand (issue
58): the golden-section search, the log bisection, the valley of a loss (its minimum, the flat stretch, the support
within a band), a job's attempts and phases, the bounds a constant is searched within."""

from __future__ import annotations

import math

import pytest

from dslab.core import measured
from dslab.core.errors import ConfigError


def _v(at: float, flat: float = 0.0):
    """A loss with its valley at ``at`` (in log space), flat for ``flat`` either side of it (a factor, in log)."""
    return lambda x: max(0.0, abs(math.log(x) - math.log(at)) - flat)


def test_the_golden_section_finds_a_single_valleys_bottom_in_log_space():
    assert measured._golden(_v(7.0), 1.0, 100.0) == pytest.approx(7.0, rel=1e-3)
    assert measured._golden(_v(0.02), 0.001, 1.0, steps=40) == pytest.approx(0.02, rel=1e-6)


def test_the_edge_is_where_the_loss_crosses_its_level_between_inside_and_outside():
    # x under 10 is inside (x <= 10), above it outside: the edge is 10, approached from inside.
    found = measured._edge(lambda x: x, 1.0, 100.0, 10.0, steps=40)
    assert found == pytest.approx(10.0, rel=1e-9) and found <= 10.0
    # Searching downward (inside above the level's crossing): x >= 10 inside for 1 / x.
    assert measured._edge(lambda x: 1 / x, 100.0, 1.0, 0.1, steps=40) == pytest.approx(10.0, rel=1e-9)


def test_a_valley_gives_its_bottom_and_where_the_loss_stays_within_the_band():
    # |ln x - ln 7|: its bottom 7; within a band of ln 2 the loss stays from 7 / 2 = 3.5 to 7 x 2 = 14.
    valley = measured._valley(_v(7.0), 1.0, 100.0, band=math.log(2))
    assert valley.best == pytest.approx(7.0, rel=1e-3)
    assert valley.low == valley.high == valley.best
    assert valley.support[0] == pytest.approx(3.5, rel=1e-3) and valley.support[1] == pytest.approx(14.0, rel=1e-3)
    assert valley.depends and valley.loss == pytest.approx(0.0, abs=1e-3)
    # No band: no support asked.
    assert measured._valley(_v(7.0), 1.0, 100.0).support == (None, None)
    # A support that reaches the search's end is open on that side: within ln 20 of 7 reaches below 1 (0.35).
    assert measured._valley(_v(7.0), 1.0, 100.0, band=math.log(20)).support[0] is None


def test_a_flat_valley_is_its_whole_flat_stretch_and_keeps_the_value_as_it_stands_where_it_lies_in_it():
    # Flat from 7 / 2 = 3.5 to 7 x 2 = 14: the value as it stands (5) is kept; one outside is moved to the nearer end;
    # none given, the middle in log space, sqrt(3.5 x 14) = 7.
    flat = _v(7.0, flat=math.log(2))
    valley = measured._valley(flat, 1.0, 100.0, prefer=5.0)
    assert valley.low == pytest.approx(3.5, rel=1e-4) and valley.high == pytest.approx(14.0, rel=1e-4)
    assert valley.best == 5.0
    assert measured._valley(flat, 1.0, 100.0, prefer=20.0).best == pytest.approx(14.0, rel=1e-4)
    assert measured._valley(flat, 1.0, 100.0).best == pytest.approx(7.0, rel=1e-4)
    # A loss flat everywhere asks nothing of the constant: it does not depend on it.
    level = measured._valley(lambda x: 3.0, 1.0, 100.0, band=0.1)
    assert not level.depends and level.low == 1.0 and level.high == pytest.approx(100.0)
    assert level.best == pytest.approx(10.0)   # the middle of 1 to 100 in log space


def test_a_constant_is_searched_from_its_ranges_low_end_over_4_to_its_high_end_times_4():
    from types import SimpleNamespace
    ranges = {"pipe_mbps": SimpleNamespace(low=150.0, high=1350.0)}
    assert measured._bounds("pipe_mbps", 300.0, ranges) == (150.0 / 4, 1350.0 * 4)
    # A value outside its range widens it; a constant without a range is searched around its value.
    assert measured._bounds("pipe_mbps", 2000.0, ranges) == (150.0 / 4, 2000.0 * 4)
    assert measured._bounds("other", 10.0, ranges) == (2.5, 40.0)


def test_a_jobs_attempts_end_at_each_interruption_and_its_seconds_split_the_image_pull():
    transitions = [{"status": "Starting", "seconds": 60}, {"status": "Downloading", "seconds": 30},
                   {"status": "Interrupted", "seconds": 1},
                   {"status": "Starting", "seconds": 50},
                   {"status": "Training", "seconds": 20, "message": "Downloading the training image..."},
                   {"status": "Training", "seconds": 100, "message": "Training image download completed."},
                   {"status": "Training", "seconds": 5}]
    attempts = measured._attempts(transitions)
    assert [len(a) for a in attempts] == [3, 4]
    second = attempts[1]
    assert measured._seconds(second, "Training") == 125.0
    assert measured._seconds(second, "Training", pull=True) == 20.0
    assert measured._seconds(second, "Training", pull=False) == 105.0
    assert measured._seconds(attempts[0], "Downloading") == 30.0 and measured._seconds(second, "Downloading") == 0.0
    assert measured._attempts([]) == []


def _job(download_per_mbps: float = 1000.0):
    """A job whose downloading is 1,000 MB at the model's Pipe rate and whose training is a fixed 100 s."""
    from types import SimpleNamespace
    return SimpleNamespace(phases=("downloading", "training"), predict=lambda prices, model: {
        "downloading": download_per_mbps / model.pipe_mbps, "training": 100.0})


def test_a_phases_elasticity_is_how_far_it_moves_per_share_its_constant_moves():
    from dslab.core.facts.prices import PriceTable
    # Downloading = 1,000 / pipe_mbps: Pipe 25% faster makes it 1 / 1.25 as long: ln(0.8) / ln(1.25) = -1.0. Training
    # does not move, nor does anything with the mount: not listed.
    found = measured.elasticities(_job(), PriceTable(), names=["pipe_mbps", "mount_fixed"])
    assert found["training"] == {} and set(found["downloading"]) == {"pipe_mbps"}
    assert found["downloading"]["pipe_mbps"] == pytest.approx(-1.0)
    assert measured.rests_on(_job(), PriceTable()) == {"downloading": "pipe_mbps", "training": None}


def test_a_phase_rests_on_its_most_elastic_constant_and_of_two_alike_on_the_least_known():
    # Pipe's throughput and EFS's latency move the phase alike (1.0 per share): EFS's range is the wider, ln(10) =
    # 2.30 against Pipe's ln(1,420.2 / 157.8) = ln(9) = 2.20: the measurement calibrates EFS's. 0.29 is under 0.3:
    # nothing.
    assert measured._rests_on({"a": {"pipe_mbps": -1.0, "efs_read_latency": 1.0}, "b": {"pipe_mbps": 0.29},
                               "c": {"pipe_mbps": -0.5, "efs_read_latency": 0.45}, "d": {}}) == {
        "a": "efs_read_latency", "b": None, "c": "pipe_mbps", "d": None}


def test_a_job_beside_its_estimate_says_each_phase_far_from_it_and_what_it_rests_on():
    from types import SimpleNamespace

    from dslab.core.model.estimate import MODEL
    assumptions = measured.ranged_constants()
    job = SimpleNamespace(measured={"billable": 300.0})
    estimate = SimpleNamespace(billable_seconds=800.0, instance_count=2,
                               range=SimpleNamespace(billable_low=500.0, billable_high=700.0))
    phases = [measured.PhaseCheck("downloading", 58.0, 100.0, ["pipe_mbps"]),   # 42% shorter
              measured.PhaseCheck("training", 120.0, 100.0, []),                # 20% longer: under 25%
              measured.PhaseCheck("other", 4.0, 2.0, ["startup_file"])]         # under 5 s either way: noise
    check = measured.JobCheck(job, estimate, phases)
    # One instance's: 800 / 2 = 400 s estimated against 300 measured, +33.3%; its range 250-350 s holds it.
    assert (check.estimated, check.estimated_range, check.inside) == (400.0, (250.0, 350.0), True)
    assert check.error == pytest.approx(400 / 300 - 1)
    assert check.phase_lines(assumptions, MODEL) == [
        "downloading 42% shorter than estimated: Pipe throughput, assumed 300 MB/s"]
    # Outside its range the threshold is 10%: the 20% longer training is said too.
    outside = measured.JobCheck(SimpleNamespace(measured={"billable": 100.0}), estimate, phases)
    assert outside.inside is False
    assert outside.phase_lines(assumptions, MODEL)[1] == "training 20% longer than estimated"
    assert measured.PhaseCheck("x", 0.0, 5.0).error is None and measured.PhaseCheck("x", 4.0, 5.0).error == 0.25
    unranged = SimpleNamespace(billable_seconds=1.0, instance_count=1, range=None)
    assert measured.JobCheck(job, unranged, []).inside is None


def test_a_constant_is_said_with_its_value_as_assumed_in_its_unit():
    from dslab.core.model.estimate import MODEL
    assumptions = measured.ranged_constants()
    assert measured.assumption_said("pipe_mbps", assumptions, MODEL) == "Pipe throughput, assumed 300 MB/s"
    assert measured.assumption_said("efs_read_latency", assumptions, MODEL) == \
        "EFS Max I/O per-file latency, assumed 3.0 ms"
    assert measured.assumption_said("network_payload", assumptions, MODEL) == \
        "network share carrying data, assumed 0.8"
    assert measured.assumption_said("pipe_mbps", {}, MODEL) == "pipe_mbps, assumed 300"


def test_a_constants_fit_records_its_change_and_its_figures_at_their_digits():
    fit = measured.ConstantFit("pipe_mbps", "Pipe throughput", 300.0, 345.0, "calibrated", "two runs", ["j1", "j2"],
                               {"j1": 340.1234567, "j2": 350.0}, "MB/s", 1.0, {"j1": (330.0000004, None)},
                               (330.0, 360.0), 0.043210987, 0.12345678)
    assert fit.to_dict() == {
        "name": "pipe_mbps", "what": "Pipe throughput", "unit": "MB/s", "scale": 1.0, "shipped": 300.0,
        "calibrated": 345.0, "change": 0.15, "status": "calibrated", "why": "two runs", "jobs": ["j1", "j2"],
        "per_job": {"j1": 340.123457, "j2": 350.0}, "supports": {"j1": [330.0, None]}, "range": [330.0, 360.0],
        "uncertainty": 0.0432, "noise": 0.1235}
    kept = measured.ConstantFit("x", "x", 0.0, 1.0, "kept", "").to_dict()
    assert kept["change"] is None and "range" not in kept and "uncertainty" not in kept and "noise" not in kept


def _bencher_job(**measured_figures):
    from dataclasses import replace
    job = measured.bencher_jobs()[0]
    return replace(job, measured={"downloading": 30.0, "training": 500.0, "other": 60.0, "billable": 590.0,
                                  **measured_figures})


def test_a_jobs_image_pull_inside_training_is_read_as_start_up():
    transitions = [{"status": "Starting", "seconds": 90}, {"status": "Downloading", "seconds": 30},
                   {"status": "Training", "seconds": 40, "message": "Downloading the training image"},
                   {"status": "Training", "seconds": 460, "message": "Training image download completed."}]
    (job,), why = measured.read_job(_bencher_job(), {"transitions": transitions}, False)
    # 40 s of the 500 s of Training were the image pull: training 460 s, other 60 + 40 = 100 s; all three fitted.
    assert why is None and (job.measured["training"], job.measured["other"]) == (460.0, 100.0)
    assert job.phases == ("downloading", "training", "other") and job.whole
    assert job.read_as == "image pull 40 s inside Training counted as start-up"


def test_a_warm_start_fits_no_start_up():
    quick = [{"status": "Starting", "seconds": 10}, {"status": "Downloading", "seconds": 30},
             {"status": "Training", "seconds": 500}]
    (job,), _ = measured.read_job(_bencher_job(), {"transitions": quick}, False)
    assert job.phases == ("downloading", "training") and not job.whole
    assert job.read_as == "warm start (Starting 10 s, under 30 s): its start-up is not fitted"
    (pooled,), _ = measured.read_job(_bencher_job(), {"transitions": [{"status": "Starting", "seconds": 90}]}, True)
    assert pooled.read_as == "warm start (WarmPoolStatus: reused a pool): its start-up is not fitted"
    (cold,), _ = measured.read_job(_bencher_job(), {"transitions": [{"status": "Starting", "seconds": 30}]}, False)
    assert cold.phases == ("downloading", "training", "other") and cold.read_as == ""   # 30 s is not under 30 s


def test_an_interrupted_jobs_finished_downloads_are_read_as_runs_of_their_own():
    transitions = [{"status": "Starting", "seconds": 60}, {"status": "Downloading", "seconds": 30},
                   {"status": "Training", "seconds": 100}, {"status": "Interrupted", "seconds": 1},
                   {"status": "Starting", "seconds": 60}, {"status": "Downloading", "seconds": 45},
                   {"status": "Interrupted", "seconds": 1},
                   {"status": "Starting", "seconds": 60}, {"status": "Downloading", "seconds": 28},
                   {"status": "Training", "seconds": 400}]
    runs, why = measured.read_job(_bencher_job(), {"transitions": transitions}, False)
    # Three attempts: the first and the third finished their download (a phase followed it); the second was cut in
    # its download. Each finished download is a run measuring its download alone.
    assert [(r.job.rsplit(" (", 1)[1], r.measured, r.phases) for r in runs] == [
        ("attempt 1 of 3)", {"downloading": 30.0}, ("downloading",)),
        ("attempt 3 of 3)", {"downloading": 28.0}, ("downloading",))]
    assert runs[0].read_as == "attempt 1 of 3: its download only"
    assert why == ("interrupted 2 time(s): 3 attempts, each downloading again; each finished download read as a run of "
                   "its own (2), training and start-up set aside (cut short, or resumed from a checkpoint)")
    cut = [{"status": "Downloading", "seconds": 30}, {"status": "Interrupted", "seconds": 1},
           {"status": "Downloading", "seconds": 30}]
    none, why = measured.read_job(_bencher_job(), {"transitions": cut}, False)
    assert none == [] and "no download to read, training and start-up set aside" in why


# ---- a checkpoint run read as a calibration reads it (issue 58, run 5: no test of the selection reached it) ---------

def _checkpoint_run(tmp_path):
    """An AWS run of llama3 8B (scale 0.2) saving twice and reading back twice on the sync targets (s3, express), one
    trial on ml.p4d.24xlarge (ckpt), one on ml.p5.48xlarge (ckpt-2), one repeat each: the writer's metrics and its
    restore job's Downloading as results.json records them."""
    import json

    from .synthetic_runs import checkpoint_experiment, synthetic_checkpoint_results
    return json.loads(json.dumps(synthetic_checkpoint_results(checkpoint_experiment(tmp_path, repeats=1))))


def test_each_checkpoint_target_is_read_with_its_writers_figures_and_its_restore_jobs_copy_in(tmp_path):
    from dslab.core.facts.prices import PriceTable
    run = _checkpoint_run(tmp_path)
    run["prices"]["region"] = "eu-west-1"   # the environment's Region (us-east-1) is where the jobs ran
    writers = {(r["trial"], r["checkpoint_target"]): r for r in run["records"] if not r["checkpoint_restore"]}
    restores = {(r["trial"], r["checkpoint_target"]): r for r in run["records"] if r["checkpoint_restore"]}
    jobs = measured.checkpoint_jobs(run, PriceTable())
    assert [j.job for j in jobs] == ["ckpt/s3", "ckpt/express", "ckpt-2/s3", "ckpt-2/express"]
    for job in jobs:
        key = (job.trial, job.mode)
        figures = writers[key]["metrics"]["checkpoint"]
        # The stall and the save (until durable in S3) are the writer's own means; the copy-in is SageMaker's
        # Downloading of the restore job, which copies the checkpoints in before the script starts.
        assert job.measured == {"stall": figures["stall_seconds_mean"], "save": figures["durable_seconds_mean"],
                                "copy_in": restores[key]["breakdown"]["downloading"]}
        assert job.phases == ("stall", "save", "copy_in")
        assert (job.execution, job.region, job.dataset, job.storage) == ("exec-ckpt", "us-east-1", "llama_8b",
                                                                         "standard")
        assert job.started == writers[key]["training_start"]
        assert job.scenario == f"exec-ckpt/{job.trial}/{job.mode}"
        assert job.provenance() == {"execution": "exec-ckpt", "job": job.job, "date": job.started,
                                    "region": "us-east-1"}
        assert job.source == {"s3": "S3 sync", "express": "Express sync"}[job.mode]
        instance = {"ckpt": "ml.p4d.24xlarge", "ckpt-2": "ml.p5.48xlarge"}[job.trial]
        assert job.question.instance_type == instance
        # The trial's own scale and cluster: one host of 8 GPUs; saved back to back (seconds_between 0), asked at the
        # premise's floor of one second between saves, both checkpoints kept.
        assert job.setting == ("llama_8b", instance, 1) and job.question.plan.hosts == 1
        assert (job.question.every_seconds, job.question.keep) == (1.0, 2)
        predicted = job.predict(PriceTable())
        assert set(predicted) == {"stall", "save", "copy_in"} and all(v > 0 for v in predicted.values())


def test_a_checkpoint_run_without_its_region_in_the_environment_takes_its_prices_region_and_skips_what_it_cannot_read(
        tmp_path):
    from dslab.core.facts.prices import PriceTable
    run = _checkpoint_run(tmp_path)
    run["environment"] = {}
    run["prices"]["region"] = "eu-west-1"
    assert {j.region for j in measured.checkpoint_jobs(run, PriceTable())} == {"eu-west-1"}
    # A trial the experiment no longer holds, and a target whose writer did not complete: nothing to read of either.
    for record in run["records"]:
        if record["trial"] == "ckpt-2":
            record["trial"] = "gone"
        if record["trial"] == "ckpt" and record["checkpoint_target"] == "express" and not record["checkpoint_restore"]:
            record["status"] = "Failed"
    assert [j.job for j in measured.checkpoint_jobs(run, PriceTable())] == ["ckpt/s3"]
    # The first target's writer failed: the targets after it are still read.
    run = _checkpoint_run(tmp_path)
    for record in run["records"]:
        if record["trial"] == "ckpt" and record["checkpoint_target"] == "s3" and not record["checkpoint_restore"]:
            record["status"] = "Failed"
    assert [j.job for j in measured.checkpoint_jobs(run, PriceTable())] == ["ckpt/express", "ckpt-2/s3",
                                                                          "ckpt-2/express"]
    # No checkpoint job at all: nothing.
    run["records"] = [r for r in run["records"] if not r.get("checkpoint_target")]
    assert measured.checkpoint_jobs(run, PriceTable()) == []


def test_results_no_calibration_can_read_are_refused_in_one_line(tmp_path):
    from dslab.core.errors import ConfigError
    fix = "pass the results.json of an AWS run (`dslab report EXECUTION --out DIR` writes it)"
    for wrong in ([], {"records": {}}, {"experiment": {}}):
        with pytest.raises(ConfigError) as refused:
            measured.check_results(wrong, "run.json")
        assert str(refused.value) == f"run.json: not a results.json (no records list): {fix}"
    run = _checkpoint_run(tmp_path)
    run["backend"] = "local"
    with pytest.raises(ConfigError) as refused:
        measured.checkpoint_jobs(run, None, "mine.json")
    assert str(refused.value) == ("mine.json: backend: a local run's seconds are this machine's, not AWS's: they cannot "
                                  f"check or calibrate AWS estimates; {fix}")


def test_an_estimates_seconds_as_one_instances():
    # Four instances: 400 s downloading, 800 s training, 120 s other, 1,320 billable in all: a quarter each.
    from types import SimpleNamespace
    four = SimpleNamespace(instance_count=4, downloading=400.0, training=800.0, other=120.0, billable_seconds=1320.0)
    assert measured.per_instance(four) == {"downloading": 100.0, "training": 200.0, "other": 30.0, "billable": 330.0}
    # An estimate of no instances is read as one's.
    none = SimpleNamespace(instance_count=0, downloading=4.0, training=8.0, other=1.0, billable_seconds=13.0)
    assert measured.per_instance(none) == {"downloading": 4.0, "training": 8.0, "other": 1.0, "billable": 13.0}


def test_a_measured_jobs_provenance_names_where_and_when_it_ran():
    job = measured.bencher_jobs()[0]
    assert job.provenance() == {"execution": "bencher", "job": job.job, "date": "2022", "region": "us-east-1"}


# ---- an AWS run's data jobs read with their premises (read_runs), and what it refuses ------------------------------

FIX = "pass the results.json of an AWS run (`dslab report EXECUTION --out DIR` writes it)"


@pytest.fixture(scope="module")
def aws_run():
    """tests/aws_like_runs.py: 32 jobs told as DescribeTrainingJob tells them. Its first record, aws-one-shards-a-file-r0
    (trial one, 1 x ml.p4d.24xlarge): Downloading 76.935 s, Training 192.872 s of which 126.459 s "Downloading the
    training image", other 12.193 s, 282 s billable."""
    import json

    from .aws_like_runs import aws_like_results
    return json.loads(json.dumps(aws_like_results(), default=str))


def _copy(run):
    import json
    return json.loads(json.dumps(run))


def test_a_completed_job_is_read_with_its_premise_its_phases_and_where_it_ran(aws_run):
    jobs = {j.job: j for j in measured.read_runs(_copy(aws_run)).jobs}
    job = jobs["aws-one-shards-a-file-r0"]
    assert (job.execution, job.started, job.region, job.trial, job.dataset, job.mode, job.storage, job.data_in_efs) == (
        "exec-aws-like", "2026-12-03T09:01:31.070010+00:00", "us-east-1", "one", "shards-a", "File", "standard", False)
    # The image pull is start-up: training 192.872 - 126.459 = 66.413 s, other 12.193 + 126.459 = 138.652 s.
    assert job.measured == pytest.approx({"downloading": 76.935, "training": 66.413, "other": 138.652, "billable": 282.0})
    assert job.scenario == "exec-aws-like/one/shards-a/1xml.p4d.24xlarge"
    assert (job.premise.instance_type, job.premise.instance_count) == ("ml.p4d.24xlarge", 1)
    assert job.premise.lab.fsx.capacity_gib == 1200 and job.premise.lab.name == "the lab as deployed"
    four = jobs["aws-four-shards-b-script-r0"]
    assert (four.premise.instance_count, four.mode, four.scenario) == (4, "Script",
                                                                      "exec-aws-like/four/shards-b/4xml.p4d.24xlarge")


def test_a_jobs_instance_its_region_and_its_lab_come_from_the_run(aws_run):
    run = _copy(aws_run)
    run["records"][0].update(instance_type="ml.p3.2xlarge", instance_count=2)
    run["environment"] = {}
    run["prices"]["region"] = "eu-west-1"
    run.pop("lab")
    run["fsx_capacity_gib"] = 2400
    job = next(j for j in measured.read_runs(run).jobs if j.job == "aws-one-shards-a-file-r0")
    # The record's instance, not the trial's; the prices' Region where the environment has none; the lab as deployed
    # at the run's FSx capacity where the run records no lab.
    assert (job.premise.instance_type, job.premise.instance_count, job.region) == ("ml.p3.2xlarge", 2, "eu-west-1")
    assert job.premise.lab.fsx.capacity_gib == 2400
    run["records"][0].pop("instance_count")
    run.pop("fsx_capacity_gib")
    run["prices"].pop("region")
    job = next(j for j in measured.read_runs(run).jobs if j.job == "aws-one-shards-a-file-r0")
    assert (job.premise.instance_count, job.premise.lab.fsx.capacity_gib, job.region) == (1, 1200, None)
    # A lab recorded at 4,800 GiB is the premise.
    run = _copy(aws_run)
    run["lab"]["fsx_config"]["capacity_gib"] = 4800
    assert {j.premise.lab.fsx.capacity_gib for j in measured.read_runs(run).jobs} == {4800}


def test_failed_and_checkpoint_jobs_measure_nothing_here(aws_run):
    run = _copy(aws_run)
    every = len(measured.read_runs(run).jobs)
    run["records"][0]["status"] = "Failed"
    run["records"][2]["checkpoint_target"] = "s3"
    assert len(measured.read_runs(run).jobs) == every - 2
    assert "aws-one-shards-a-file-r0" not in {j.job for j in measured.measured_jobs(run)}


def test_a_record_without_its_trial_takes_the_one_trial_that_reads_its_dataset(aws_run):
    run = _copy(aws_run)
    run["records"][0].pop("trial")
    job = next(j for j in measured.read_runs(run).jobs if j.job == "aws-one-shards-a-file-r0")
    assert job.trial == "one"
    run["experiment"]["trials"][1]["datasets"].append(run["experiment"]["trials"][0]["datasets"][0])
    with pytest.raises(ConfigError) as refused:
        measured.read_runs(run, "run.json")
    assert str(refused.value) == (
        "run.json: records[0] (aws-one-shards-a-file-r0): trial: missing, and 2 trials of the run's experiment read "
        "dataset 'shards-a': its premise cannot be told; take the record as Collect writes it (with its trial)")


@pytest.mark.parametrize("change, refusal", [
    (lambda r: r.pop("experiment"),
     "run.json: experiment: no experiment: the estimate needs the premise each job ran on; " + FIX),
    (lambda r: r["records"][0].update(trial="gone"),
     "run.json: records[0] (aws-one-shards-a-file-r0): trial: trial 'gone' is not in the run's experiment"),
    (lambda r: (r["records"][0].update(trial="gone"), r["records"][0].pop("job_name")),
     "run.json: records[0] (?): trial: trial 'gone' is not in the run's experiment"),
    (lambda r: r["records"][0].update(dataset="nope"),
     "run.json: records[0] (aws-one-shards-a-file-r0): dataset: dataset 'nope' is not in trial one"),
    (lambda r: r["dataset_stats"].pop("shards-a"),
     "run.json: dataset_stats.shards-a: no files and bytes recorded for shards-a: the estimate needs what the run found "
     "in S3 (the stats file `dslab dataset upload` writes); rerun with it, or write it with `dslab dataset stats "
     "--write` and take results from a new run"),
    (lambda r: r["records"][0].update(phases={}),
     "run.json: records[0] (aws-one-shards-a-file-r0): phases: a completed job without its phases and billable "
     "seconds: nothing to compare (DescribeTrainingJob's SecondaryStatusTransitions and BillableTimeInSeconds); take "
     "the record as Collect writes it"),
    (lambda r: r["records"][0]["breakdown"].pop("other"),
     "run.json: records[0] (aws-one-shards-a-file-r0): phases: a completed job without its phases and billable "
     "seconds: nothing to compare (DescribeTrainingJob's SecondaryStatusTransitions and BillableTimeInSeconds); take "
     "the record as Collect writes it"),
])
def test_a_run_no_estimate_can_be_set_beside_is_refused_naming_the_field(aws_run, change, refusal):
    run = _copy(aws_run)
    change(run)
    with pytest.raises(ConfigError) as refused:
        measured.read_runs(run, "run.json")
    assert str(refused.value) == refusal
    with pytest.raises(ConfigError) as refused:
        measured.measured_jobs(run, "run.json")
    assert str(refused.value) == refusal


def test_a_run_whose_experiment_does_not_parse_is_refused_with_the_parsers_words(aws_run):
    run = _copy(aws_run)
    run["experiment"]["repeats"] = 0
    with pytest.raises(ConfigError) as refused:
        measured.read_runs(run)
    assert str(refused.value) == ("results.json: experiment: the run's experiment does not parse (0 is out of range): "
                                  + FIX)


def test_a_checkpoint_jobs_question_is_asked_on_the_runs_lab_and_the_trials_volume(tmp_path):
    from dslab.core.facts.prices import PriceTable
    run = _checkpoint_run(tmp_path)
    run["lab"]["fsx_config"]["capacity_gib"] = 4800
    run["experiment"]["trials"][0]["volume_size_gb"] = 500
    run.pop("execution")
    jobs = measured.checkpoint_jobs(run, PriceTable())
    assert {j.question.lab.fsx.capacity_gib for j in jobs} == {4800}
    assert [j.question.volume_size_gb for j in jobs] == [500, 500, None, None]
    # No execution recorded: "?" in its name and its scenario.
    assert (jobs[0].execution, jobs[0].scenario) == ("?", "?/ckpt/s3")
    # No lab recorded: the lab as deployed at the run's FSx capacity, else 1,200 GiB.
    run.pop("lab")
    run["fsx_capacity_gib"] = 2400
    assert {j.question.lab.fsx.capacity_gib for j in measured.checkpoint_jobs(run, PriceTable())} == {2400}
    run.pop("fsx_capacity_gib")
    assert {j.question.lab.fsx.capacity_gib for j in measured.checkpoint_jobs(run, PriceTable())} == {1200}
    # Refused as results.json where no other name is given.
    run["backend"] = "local"
    with pytest.raises(ConfigError) as refused:
        measured.checkpoint_jobs(run, PriceTable())
    assert str(refused.value).startswith("results.json: backend: a local run's seconds")


# ---- a job beside its estimate (compare, JobCheck) and an experiment's jobs before they run (planned_jobs) --------

def test_a_job_check_is_one_instances_seconds_beside_the_measured_written_out_by_hand():
    from types import SimpleNamespace
    job = _bencher_job(billable=1000.0)
    # Two instances: the estimate's 2,400 billable seconds are 1,200 each, its range 1,800-2,600 is 900-1,300 each:
    # 20% over the 1,000 measured, inside the range.
    estimate = SimpleNamespace(billable_seconds=2400.0, instance_count=2,
                               range=SimpleNamespace(billable_low=1800.0, billable_high=2600.0))
    phases = [measured.PhaseCheck("downloading", 30.0, 36.04, ["file_per_object"]),
              measured.PhaseCheck("training", 0.0, 450.0)]
    check = measured.JobCheck(job, estimate, phases)
    assert (check.measured, check.estimated, check.estimated_range, check.error, check.inside) == (
        1000.0, 1200.0, (900.0, 1300.0), pytest.approx(0.2), True)
    assert check.to_dict() == {
        "execution": "bencher", "job": job.job, "date": "2022", "region": "us-east-1", "dataset": job.dataset,
        "source": job.source, "instance_type": "ml.p3.2xlarge", "instance_count": 1, "epochs": 1,
        "measured_billable_seconds": 1000.0, "estimated_billable_seconds": 1200.0, "estimated_range": [900.0, 1300.0],
        "error": 0.2, "inside": True,
        # 36.04 / 30 - 1 = 0.20133: to four places; a phase measured at 0 has no error.
        "phases": {"downloading": {"measured": 30.0, "estimated": 36.0, "error": 0.2013, "rests_on": ["file_per_object"]},
                   "training": {"measured": 0.0, "estimated": 450.0, "error": None, "rests_on": []}}}
    # Outside: a range of 1,100-1,300 each misses 1,000. No range: nothing to be inside. No instance: read as one.
    estimate.range = SimpleNamespace(billable_low=2200.0, billable_high=2600.0)
    assert check.inside is False
    estimate.range = None
    assert (check.estimated_range, check.inside, check.to_dict()["estimated_range"]) == (None, None, None)
    estimate.instance_count = 0
    assert check.estimated == 2400.0
    assert measured.JobCheck(_bencher_job(billable=0.0), estimate, []).error == 0.0


def test_each_measured_job_is_set_beside_its_own_estimate_and_what_each_phase_rests_on():
    from dataclasses import replace

    from dslab.core.facts.prices import PriceTable
    from dslab.core.model.calibration import InUse
    from dslab.core.model.estimate import MODEL
    fastfile = measured.bencher_jobs()[0]   # Bencher's A FastFile: 30,607 JPEGs, 1.1 GB, on ml.p3.2xlarge
    assert fastfile.job == "A FastFile"
    attempt = replace(fastfile, job="an attempt", measured={"downloading": 20.0}, phases=("downloading",))
    (check,) = measured.compare([fastfile, attempt], PriceTable())   # an attempt's download alone: no whole job
    assert check.job is fastfile and [p.phase for p in check.phases] == ["downloading", "training", "other"]
    assert [p.measured for p in check.phases] == [18.8, 181.9, 212.3] and check.measured == 413.0
    assert {p.phase: p.estimated for p in check.phases} == pytest.approx(
        {k: v for k, v in fastfile.predict(PriceTable()).items() if k != "billable"})
    # FastFile's first bytes rest on its fixed set-up, its training on its per-file GET, its start-up on its own.
    assert [p.rests_on for p in check.phases] == [["fastfile_fixed"], ["fastfile_get_latency"], ["startup_fastfile"]]
    assert check.estimated_range is not None and check.inside is True
    # On a calibration whose FastFile GET takes twice as long, training is estimated longer.
    slower = InUse(model=replace(MODEL, fastfile_get_latency=2 * MODEL.fastfile_get_latency), source="mine.json")
    (again,) = measured.compare([fastfile], PriceTable(), slower)
    assert again.phases[1].estimated > check.phases[1].estimated * 1.5


def test_an_experiments_jobs_before_they_run_are_each_priced_with_its_repeats():
    from dslab.core.experiment import parse_experiment
    from dslab.core.facts.prices import PriceTable
    experiment = parse_experiment({"name": "plan", "repeats": 3, "instance_type": "ml.p3.2xlarge", "trials": [
        {"name": "a", "modes": ["File", "FastFile"], "datasets": [
            {"name": "jpegs", "format": "jpg", "files": 30607, "bytes": 1_100_000_000}]},
        {"name": "e", "modes": ["EFS"], "datasets": [
            {"name": "in-efs", "format": "jpg", "files": 1000, "bytes": 100_000_000, "source": "efs"}]},
        {"name": "x", "modes": ["FastFile"], "storage": "express", "datasets": [
            {"name": "jpegs", "format": "jpg", "files": 30607, "bytes": 1_100_000_000}]}]})
    planned = measured.planned_jobs(experiment, PriceTable())
    assert [(j.job, j.mode, j.storage, j.data_in_efs, repeats) for j, repeats in planned] == [
        ("a/jpegs/File", "File", "standard", False, 3), ("a/jpegs/FastFile", "FastFile", "standard", False, 3),
        ("e/in-efs/EFS", "EFS", "standard", True, 3),
        ("x/jpegs/FastFile", "FastFile", "express", False, 3)]
    for job, _ in planned:
        assert (job.execution, job.started, job.region, job.trial) == ("planned", None, None, job.job.split("/")[0])
        # Its "measurement" is its estimate: what `dslab estimate --experiment` prices.
        assert job.measured == pytest.approx(job.predict(PriceTable()))
        assert job.premise.instance_type == "ml.p3.2xlarge" and job.premise.shape.files in (30607, 1000)
    # A dataset of unknown size: refused, saying what to give.
    unknown = parse_experiment({"name": "plan", "trials": [{"name": "a", "modes": ["File"], "datasets": [
        {"name": "mystery", "format": "jpg"}]}]})
    with pytest.raises(ConfigError) as refused:
        measured.planned_jobs(unknown, PriceTable())
    assert str(refused.value) == ("datasets.mystery: its size is not known: give files: and bytes: (or a generate: "
                                  "recipe), or pass a run's --results")
    # A run's stats give it.
    (job, _), = measured.planned_jobs(unknown, PriceTable(), stats={"mystery": {"files": 10, "bytes": 10_000_000}})
    assert (job.premise.shape.files, job.premise.shape.bytes) == (10, 10_000_000)


def test_a_measured_jobs_estimate_is_asked_on_its_own_premise_storage_and_model():
    from dataclasses import replace

    from dslab.core.facts.prices import PriceTable
    from dslab.core.model.estimate import MODEL
    fastfile = measured.bencher_jobs()[0]
    standard = fastfile.estimate(PriceTable())
    assert standard.instance_count == 1 and standard.mode == "FastFile"
    # Express's first byte is the model's Express figure: another estimate than Standard's.
    express = replace(fastfile, storage="express").estimate(PriceTable())
    assert express.training != standard.training
    # Another model's GET latency moves training.
    slower = fastfile.estimate(PriceTable(), replace(MODEL, fastfile_get_latency=2 * MODEL.fastfile_get_latency))
    assert slower.training > standard.training * 1.5
    # Each phase as one instance's: per_instance of the estimate.
    assert fastfile.predict(PriceTable()) == measured.per_instance(standard)


# ---- leave one scenario out, a calibration file's cells and the file itself -----------------------------------------

def test_the_errors_summary_is_the_worst_under_the_worst_over_and_the_mean_of_their_sizes():
    # -0.2, 0.1, 0.05: under -0.2, over 0.1, mean |e| (0.2 + 0.1 + 0.05) / 3 = 0.116667 -> 0.1167.
    assert measured.OutOfSample._summary([-0.2, 0.1, 0.05]) == {"under": -0.2, "over": 0.1, "mean_abs": 0.1167}
    # All over: nothing under (0); one error alone; none at all.
    assert measured.OutOfSample._summary([0.123456]) == {"under": 0.0, "over": 0.1235, "mean_abs": 0.1235}
    assert measured.OutOfSample._summary([-0.3]) == {"under": -0.3, "over": 0.0, "mean_abs": 0.3}
    assert measured.OutOfSample._summary([]) is None
    found = measured.OutOfSample(["s1", "s2"], [-0.2, 0.1, 0.05], [0.01])
    assert found.to_dict() == {"scenarios": ["s1", "s2"], "jobs": 3,
                               "shipped": {"under": -0.2, "over": 0.1, "mean_abs": 0.1167},
                               "calibrated_without_it": {"under": 0.0, "over": 0.01, "mean_abs": 0.01}}


class _Told:
    """A job whose estimate is told by hand: ``model`` maps to its predicted headline figure."""
    headline = "billable"

    def __init__(self, job, scenario, measured_seconds, whole=True):
        self.job, self.scenario, self.measured, self.whole = job, scenario, {"billable": measured_seconds}, whole

    def predict(self, prices, model):
        return {"billable": model[self.job]}


def test_each_scenario_is_predicted_by_the_shipped_model_and_by_a_calibration_on_the_others(monkeypatch):
    # Three jobs in two scenarios (a, b) and one interrupted attempt (not whole) in b. Leaving a out calibrates on b's
    # jobs, leaving b out on a's; each left-out whole job is predicted by the shipped model and by that calibration.
    jobs = [_Told("a1", "a", 100.0), _Told("b1", "b", 200.0), _Told("b2", "b", 400.0, whole=False)]
    shipped = {"a1": 110.0, "b1": 150.0}              # +10%, -25%
    without = {("b1", "b2"): {"a1": 105.0}, ("a1",): {"b1": 210.0}}   # +5%, +5%
    calibrated_on = []

    def calibrate(rest, prices, base):
        names = tuple(j.job for j in rest)
        calibrated_on.append(names)
        from types import SimpleNamespace
        return SimpleNamespace(model=without[names])
    monkeypatch.setattr(measured, "calibrate", calibrate)
    found = measured.out_of_sample(jobs, None, shipped)
    assert calibrated_on == [("b1", "b2"), ("a1",)]
    assert found.scenarios == ["a", "b"]
    assert found.before == pytest.approx([0.10, -0.25]) and found.after == pytest.approx([0.05, 0.05])
    # One scenario: nothing to leave out.
    assert measured.out_of_sample(jobs[:1], None, shipped) is None
    # A scenario whose jobs are all attempts is not one.
    assert measured.out_of_sample([jobs[0], jobs[2]], None, shipped) is None


def test_a_jobs_error_is_its_headline_estimated_over_measured():
    # 150 estimated for 200 measured: -25%.
    assert measured._error(_Told("b1", "b", 200.0), None, {"b1": 150.0}) == pytest.approx(-0.25)


def test_a_calibration_files_cell_says_where_it_came_from_what_it_measured_and_both_estimates(monkeypatch):
    from dataclasses import replace

    from dslab.core.model.estimate import MODEL
    calibrated = replace(MODEL, fastfile_get_latency=0.05)

    def told(self, prices, model=MODEL):
        # 100 s shipped, 80 s calibrated, each phase and the billable alike.
        value = 100.0 if model is MODEL else 80.0
        return {"downloading": value, "training": value, "other": value, "billable": value}
    monkeypatch.setattr(measured.MeasuredJob, "predict", told)
    job = _bencher_job(billable=123.456)
    assert measured._cell(job, None, calibrated) == {
        "execution": "bencher", "job": job.job, "date": "2022", "region": "us-east-1", "dataset": job.dataset,
        "source": job.source, "measured": {"downloading": 30.0, "training": 500.0, "other": 60.0, "billable": 123.5},
        "estimated_shipped": 100.0, "estimated_calibrated": 80.0, "compared": "billable",
        "instance_type": "ml.p3.2xlarge", "instance_count": 1, "epochs": 1}
    # A warm start fits two phases, a spot job saved a share, an attempt compares its download: each said.
    warm = replace(job, phases=("downloading", "training"), spot_saving=0.654321, read_as="warm start")
    cell = measured._cell(warm, None, calibrated)
    assert (cell["fitted"], cell["spot_saving"], cell["read_as"]) == (["downloading", "training"], 0.6543, "warm start")
    attempt = replace(job, measured={"downloading": 28.04}, phases=("downloading",))
    cell = measured._cell(attempt, None, calibrated)
    assert (cell["compared"], cell["measured"], "fitted" in cell) == ("downloading", {"downloading": 28.0}, True)


def test_a_checkpoint_cell_names_its_instance_and_hosts(tmp_path):
    from dslab.core.facts.prices import PriceTable
    from dslab.core.model.estimate import MODEL
    job = measured.checkpoint_jobs(_checkpoint_run(tmp_path), PriceTable())[0]
    cell = measured._cell(job, PriceTable(), MODEL)
    assert (cell["instance_type"], cell["instance_count"], cell["compared"], "epochs" in cell) == (
        "ml.p4d.24xlarge", 1, "save", False)
    assert cell["estimated_shipped"] == cell["estimated_calibrated"]   # the same model both times


def test_the_calibration_file_holds_the_model_the_constants_the_cells_and_the_errors():
    from dataclasses import replace

    from dslab.core.facts.prices import PriceTable
    from dslab.core.model.estimate import MODEL
    moved = replace(MODEL, fastfile_get_latency=2 * MODEL.fastfile_get_latency)
    job = measured.bencher_jobs()[0]
    found = measured.Calibrated(moved, [], [job], [("aws-x", "interrupted")])
    document = measured.calibration_document(found, PriceTable(), None, ["run.json"])
    assert (document["calibration_version"], document["written_by"], document["results"]) == (
        measured.CALIBRATION_VERSION, "dslab calibrate", ["run.json"])
    assert document["model"]["fastfile_get_latency"] == 2 * MODEL.fastfile_get_latency
    assert document["constants"] == [] and len(document["cells"]) == 1 and document["cells"][0]["job"] == "A FastFile"
    assert document["set_aside"] == [{"job": "aws-x", "why": "interrupted"}]
    assert document["not_measured_by_a_job"] == {"fsx_import_rate": (
        "FSx's S3 metadata import runs before any job: no phase of a job shows it; kept as shipped (the post's ~2 M "
        "objects an hour)")}
    errors = document["out_of_sample"]
    assert errors["your_runs"] == {"note": "fewer than two data scenarios (a trial's dataset on one premise): nothing "
                                           "to leave out; the in-sample errors are in cells"}
    assert "your_checkpoints" not in errors
    # Bencher's cells on the found model: FastFile's GET twice as slow estimates its cells longer than the shipped
    # model's leave-one-out does.
    assert errors["bencher_calibrated_in_sample"]["over"] > errors["bencher_shipped"]["over"]
    checked = measured.OutOfSample(["a", "b"], [0.1], [0.05])
    document = measured.calibration_document(found, PriceTable(), checked, ["run.json"], checked)
    assert document["out_of_sample"]["your_runs"] == checked.to_dict() == document["out_of_sample"]["your_checkpoints"]


def test_a_calibration_changed_only_what_it_calibrated():
    from types import SimpleNamespace

    from dslab.core.model.estimate import MODEL
    found = measured.Calibrated(MODEL, [SimpleNamespace(name="a", value=1.5, status="calibrated"),
                                        SimpleNamespace(name="b", value=2.0, status="kept")], [])
    assert found.changed() == {"a": 1.5}


def test_bencher_s_cells_are_jobs_on_one_p3_2xlarge_at_the_v100_preset():
    # Bencher's notebook (the post's runs): ml.p3.2xlarge, one V100, one epoch, ResNet-50 as MLPerf Storage emulates it
    # (batch 64 every 0.195 s = 328.2 samples/s). Cell A FastFile: 30,607 JPEGs, 1.1 GB; Downloading 18.8 s, Training
    # 181.9 s, the rest 212.3 s, 413 s billable.
    jobs = measured.bencher_jobs()
    first = jobs[0]
    assert (first.execution, first.job, first.started, first.region, first.trial, first.dataset, first.mode,
            first.storage, first.scenario) == ("bencher", "A FastFile", "2022", "us-east-1", None, "caltech-jpg-1x",
                                               "FastFile", "standard", "bencher/" + first.scenario.split("/", 1)[1])
    assert first.measured == {"downloading": 18.8, "training": 181.9, "other": 212.3, "billable": 413.0}
    premise = first.premise
    assert (premise.instance_type, premise.instance_count, premise.accelerators, premise.epochs) == (
        "ml.p3.2xlarge", 1, 1, 1)
    assert premise.rate == pytest.approx(64 / 0.195)
    assert (premise.compute, premise.shape_origin) == ("the V100 preset", "Bencher's notebook")
    assert (premise.shape.files, premise.shape.bytes) == (30607, 1_100_000_000)
    assert {j.mode for j in jobs} == {"File", "FastFile", "FSx"} and all(j.scenario.startswith("bencher/") for j in jobs)


def test_a_fitted_constant_without_a_range_is_said_in_its_unit(monkeypatch):
    # A constant fitted on the cells and not among the assumptions is its own range, said by its rule's first words:
    # under 1 in ms (x 1,000), a rate in MB/s, else seconds. An assumption keeps its own range.
    from types import SimpleNamespace
    fitted = {"x_latency": SimpleNamespace(value=0.045, rule="X's GET: how it is fitted"),
              "x_mbps": SimpleNamespace(value=150.0, rule="X's rate: how"),
              "x_fixed": SimpleNamespace(value=15.0, rule="X's start: how"),
              "ranged": SimpleNamespace(value=2.0, rule="ranged: how")}
    assumption = SimpleNamespace(name="ranged")
    fake = SimpleNamespace(ranges=lambda: {"ranged": assumption}, fitted=fitted)
    monkeypatch.setattr(measured.shipped, "calibration", lambda: fake)
    found = measured.ranged_constants()
    assert found["ranged"] is assumption
    said = {name: (a.name, a.what, a.low, a.high, a.source, a.unit, a.scale) for name, a in found.items()
            if name != "ranged"}
    assert said == {"x_latency": ("x_latency", "X's GET", 0.045, 0.045, "fitted on Bencher's cells", "ms", 1000.0),
                    "x_mbps": ("x_mbps", "X's rate", 150.0, 150.0, "fitted on Bencher's cells", "MB/s", 1.0),
                    "x_fixed": ("x_fixed", "X's start", 15.0, 15.0, "fitted on Bencher's cells", "s", 1.0)}
    # Exactly 1: not under 1, so seconds.
    fitted["x_one"] = SimpleNamespace(value=1.0, rule="one: how")
    assert measured.ranged_constants()["x_one"].unit == "s"


# ---- the judge of one constant (_judge), each of its rules on supports written by hand --------------------------

def _judging(monkeypatch, valleys, fitted=0.06, cells=(), with_range=True, settings=("a", "b")):
    """_judge on FastFile's GET latency (shipped 0.0447 s; its plausible range 0.02-0.08 here: searched from 0.02 / 4 =
    0.005 to 0.08 x 4 = 0.32), the fit asking ``fitted``, the runs' noise 6%; one job per valley, each job on its own
    setting (datasets ``settings``), each valley what that job's loss gives."""
    from dataclasses import replace
    from types import SimpleNamespace

    from dslab.core.model.estimate import MODEL
    jobs = [SimpleNamespace(job=f"j{i + 1}", setting=(settings[i % len(settings)], "ml.p3.2xlarge", 1))
            for i in range(len(valleys))]
    given = iter(valleys)
    bands = []

    def valley(objective, low, high, band=0.0, prefer=None):
        bands.append((low, high, band))
        return next(given)
    monkeypatch.setattr(measured, "_valley", valley)
    story = measured.ConstantFit("fastfile_get_latency", "FastFile's per-file GET", MODEL.fastfile_get_latency,
                                 MODEL.fastfile_get_latency, "calibrated", "")
    ranges = {"fastfile_get_latency": SimpleNamespace(low=0.02, high=0.08)} if with_range else {}
    moved = measured._judge(story, [(j, "training") for j in jobs], replace(MODEL, fastfile_get_latency=fitted), None,
                            MODEL, ranges, 0.06, list(cells))
    return moved, story, bands


def _asks(best, support, depends=True):
    return measured.Valley(best, best, best, support, depends, 0.0)


def test_a_constant_no_job_moves_is_kept_saying_its_search(monkeypatch):
    moved, story, bands = _judging(monkeypatch, [_asks(0.05, (0.04, 0.06), depends=False)] * 2)
    assert not moved and story.status == "kept"
    assert story.why == ("no job's phase moves with it beyond the runs' noise (±6%) over its search (0.005 to 0.32): "
                         "kept as shipped")
    # Each job's support is asked within its phases' noise: one phase, 0.06 squared.
    assert bands[0] == (pytest.approx(0.005), pytest.approx(0.32), pytest.approx(0.0036))


def test_one_scenario_alone_does_not_move_a_constant(monkeypatch):
    moved, story, _ = _judging(monkeypatch, [_asks(0.05, (0.04, 0.06)), _asks(0.052, (0.04, 0.07))], settings=("a",))
    assert not moved and story.status == "kept"
    assert story.why == ("one scenario: only a on 1 x ml.p3.2xlarge rests on it (2 job(s), repeats of one another); a "
                         "constant moves on 2 scenarios or more (other datasets or instance types): "
                         "experiments/calibrate.yaml measures each assumption twice")
    assert story.per_job == {"j1": 0.05, "j2": 0.052} and story.supports == {"j1": (0.04, 0.06), "j2": (0.04, 0.07)}


def test_a_value_at_the_end_of_the_search_is_not_one_the_model_can_take(monkeypatch):
    for fitted in (0.31, 0.0051):   # 0.32 / 0.31 = 1.03 and 0.0051 / 0.005 = 1.02: within 5% of an end
        moved, story, _ = _judging(monkeypatch, [_asks(fitted, (None, None))] * 2, fitted=fitted)
        assert not moved
        assert story.why == (f"the measurements ask for {fitted:.4g}, at the end of the search (0.005 to 0.32): not a "
                             "value this model can take")


def test_jobs_whose_supports_do_not_meet_are_inconsistent_naming_the_two_furthest_apart(monkeypatch):
    moved, story, _ = _judging(monkeypatch, [_asks(0.015, (0.01, 0.02)), _asks(0.045, (0.04, 0.05)),
                                             _asks(0.03, (0.005, 0.03))])
    assert not moved and story.why == ("inconsistent: beyond the runs' noise (±6% a phase), j2 supports 0.04 or more "
                                       "and j1 0.02 or less")


def test_jobs_that_bound_a_constant_without_pinning_it_keep_the_shipped_value_among_what_they_allow(monkeypatch):
    # Supports open at the top (None: to the search's end) from 0.03 and 0.02: they allow 0.03 or more, the shipped
    # 0.0447 among them.
    for supports, allowed in (([(0.03, None), (0.02, None)], "0.03 or more"),
                              ([(None, 0.05), (None, 0.06)], "0.05 or less"),
                              ([(0.03, None), (None, 0.05)], "0.03 to 0.05")):
        moved, story, _ = _judging(monkeypatch, [_asks(0.04, s) for s in supports])
        assert not moved and story.status == "kept" and story.per_job == {}
        assert story.why == ("the jobs bound it but pin no value (each one's loss is flat beyond its bound): they allow "
                             f"{allowed}, the shipped value among them: kept")


def test_jobs_that_bound_a_constant_on_one_side_away_from_the_shipped_value_move_it_to_the_nearest_they_allow(
        monkeypatch):
    # From 0.05 and 0.06 up, the shipped 0.0447 outside: moved to 0.06 (the fit). The range: 0.05 (the lowest support)
    # to the plausible range's top, 0.08, above the value. Its uncertainty: the wider side, ln(0.08 / 0.06) = 0.2877.
    moved, story, _ = _judging(monkeypatch, [_asks(0.06, (0.05, None)), _asks(0.07, (0.06, None))], cells=["B", "A", "A"])
    assert moved and story.status == "calibrated"
    assert story.range == pytest.approx((0.05, 0.08)) and story.uncertainty == pytest.approx(math.log(0.08 / 0.06))
    assert story.why == ("2 jobs of 2 scenarios rest on it; they bound it on one side only (0.06 or more), the shipped "
                         "value outside: moved to the nearest value they allow; within the runs' noise (±6% a phase) "
                         "they support 0.05 to 0.08; fitted together with Bencher's cells A, B, which ask for 0.0447")
    # No plausible range: the search's own end, 0.0447 x 4 = 0.1788.
    moved, story, _ = _judging(monkeypatch, [_asks(0.06, (0.05, None)), _asks(0.07, (0.06, None))], with_range=False)
    assert story.range == pytest.approx((0.05, 4 * 0.0447))
    # Open at the bottom instead, from 0.03 down, the value 0.025: the plausible range's bottom, 0.02, under it.
    moved, story, _ = _judging(monkeypatch, [_asks(0.02, (None, 0.03)), _asks(0.02, (None, 0.035))], fitted=0.025)
    assert moved and story.range == pytest.approx((0.02, 0.035))
    # A plausible end on the wrong side of the value is not a range: the search's end is.
    moved, story, _ = _judging(monkeypatch, [_asks(0.2, (0.1, None)), _asks(0.2, (0.12, None))], fitted=0.15)
    assert story.range == pytest.approx((0.1, 0.32))


def test_jobs_that_pin_a_constant_move_it_and_its_range_is_every_value_they_support(monkeypatch):
    # j1 asks 0.05 (supports 0.04-0.07), j2 0.06 (0.045-0.08): the fit 0.055; the range 0.04 to 0.08; uncertainty the
    # wider side, ln(0.08 / 0.055) = 0.3747.
    moved, story, _ = _judging(monkeypatch, [_asks(0.05, (0.04, 0.07)), _asks(0.06, (0.045, 0.08))], fitted=0.055)
    assert moved and story.status == "calibrated"
    assert story.per_job == {"j1": 0.05, "j2": 0.06}
    assert story.range == pytest.approx((0.04, 0.08)) and story.uncertainty == pytest.approx(math.log(0.08 / 0.055))
    assert story.why == ("2 jobs of 2 scenarios rest on it; alone they ask for 0.05 to 0.06 (median 0.055); within the "
                         "runs' noise (±6% a phase) they support 0.04 to 0.08")


# ---- the noise, a phase far from its estimate, a constant in words, a constant's record, a loss ------------------

class _Run:
    def __init__(self, scenario, source="File", phases=("downloading",), **figures):
        self.scenario, self.source, self.phases, self.measured = scenario, source, phases, figures


def test_the_runs_noise_is_bencher_s_or_their_own_repeats_half_range_where_wider():
    bencher = 0.060010436597669164   # C FastFile's 6% (log) of its total
    assert measured.run_noise([]) == pytest.approx(bencher)
    # One scenario's repeats at 100 and 150 s: half of ln(1.5) = 0.2027.
    assert measured.run_noise([_Run("a", downloading=100.0), _Run("a", downloading=150.0)]) == pytest.approx(
        math.log(1.5) / 2)
    # Three repeats 100, 110, 150: the widest over the narrowest, the same 0.2027.
    assert measured.run_noise([_Run("a", downloading=v) for v in (100.0, 110.0, 150.0)]) == pytest.approx(
        math.log(1.5) / 2)
    # Two scenarios, or two sources, are not repeats; one job alone has no spread.
    assert measured.run_noise([_Run("a", downloading=100.0), _Run("b", downloading=150.0)]) == pytest.approx(bencher)
    assert measured.run_noise([_Run("a", downloading=100.0), _Run("a", "FastFile", downloading=150.0)]) == \
        pytest.approx(bencher)
    # A phase under 5 s is start-up noise, not a repeat's figure; 5 s is one. A phase not measured counts nothing.
    assert measured.run_noise([_Run("a", downloading=4.0), _Run("a", downloading=100.0)]) == pytest.approx(bencher)
    assert measured.run_noise([_Run("a", downloading=5.0), _Run("a", downloading=10.0)]) == pytest.approx(
        math.log(2) / 2)
    assert measured.run_noise([_Run("a", phases=("downloading", "training"), downloading=100.0),
                               _Run("a", phases=("downloading", "training"), downloading=100.0)]) == pytest.approx(
        bencher)


def test_a_phase_far_from_its_estimate_is_said_with_the_constants_it_rests_on():
    from types import SimpleNamespace

    from dslab.core.model.estimate import MODEL
    assumptions = measured.ranged_constants()

    def lines(phases, inside=True):
        # phase_lines reads the check's phases and whether its billable time fell inside the range.
        return measured.JobCheck.phase_lines(SimpleNamespace(inside=inside, phases=phases), assumptions, MODEL)
    P = measured.PhaseCheck
    # 58 s measured for 100 estimated: 42% shorter; it rests on NVMe's rate (two constants said at most, the third
    # not), in the assumption's words and unit: the model's 1,000 MB/s and 0.00632 s = 6.3 ms.
    assert lines([P("downloading", 58.0, 100.0, ["nvme_download_mbps", "express_first_byte", "pipe_mbps"])]) == [
        "downloading 42% shorter than estimated: File mode onto NVMe, assumed 1,000 MB/s; S3 Express One Zone first "
        "byte, assumed 6.3 ms"]
    # Twice the estimate: 100% longer, resting on nothing said.
    assert lines([P("training", 200.0, 100.0)]) == ["training 100% longer than estimated"]
    # 25% off is said (within 25% is not), 24% is not; where the billable time fell outside its range, 10% is enough.
    assert lines([P("other", 12.5, 10.0)]) == ["other 25% longer than estimated"]
    assert lines([P("other", 12.4, 10.0)]) == []
    assert lines([P("other", 11.0, 10.0)], inside=False) == ["other 10% longer than estimated"]
    # Nothing estimated, nothing measured, or both under 5 s: nothing said; a phase skipped does not stop the next.
    assert lines([P("downloading", 10.0, 0.0), P("training", 0.0, 10.0), P("other", 4.0, 1.0),
                  P("training", 5.0, 10.0)]) == ["training 50% shorter than estimated"]
    assert lines([P("training", 10.0, 1.0), P("other", 1.0, 10.0)]) == ["training 900% longer than estimated",
                                                                        "other 90% shorter than estimated"]
    # 5 s is evidence (5 measured for 2.5 estimated: twice); a phase within its threshold does not stop the next.
    assert lines([P("other", 5.0, 2.5)]) == ["other 100% longer than estimated"]
    assert lines([P("downloading", 10.0, 10.0), P("training", 20.0, 10.0)]) == ["training 100% longer than estimated"]


def test_a_constant_is_said_with_its_value_in_its_unit_at_three_sizes():
    from types import SimpleNamespace
    def say(value, unit="u"):
        return measured.assumption_said("x", {"x": SimpleNamespace(what="w", unit=unit, scale=1.0)},
                                        SimpleNamespace(x=value))
    # 100 and up: whole, with thousands; 1 and up: one decimal; under 1: two significant digits.
    assert [say(v) for v in (1234.5, 100.0, 100.4, 99.96, 1.04, 1.0, 0.5, 0.01234)] == [
        "w, assumed 1,234 u", "w, assumed 100 u", "w, assumed 100 u", "w, assumed 100.0 u", "w, assumed 1.0 u",
        "w, assumed 1.0 u", "w, assumed 0.5 u", "w, assumed 0.012 u"]
    assert say(5.0, unit="") == "w, assumed 5.0"
    # A constant without words: its name and value.
    assert measured.assumption_said("x", {}, SimpleNamespace(x=0.25)) == "x, assumed 0.25"


def test_a_constants_record_rounds_each_figure_to_its_digits():
    fit = measured.ConstantFit("n", "w", 2.0, 2.123456, "calibrated", "y", ["a"], {"a": 2.1234567}, "u", 1.0,
                               {"a": (2.1234567, None)}, (2.1234567, 2.9876543), 0.123456, 0.0600104)
    # 2.123456 / 2 - 1 = 0.061728: to four places, 0.0617.
    assert fit.to_dict() == {"name": "n", "what": "w", "unit": "u", "scale": 1.0, "shipped": 2.0,
                             "calibrated": 2.123456, "change": 0.0617, "status": "calibrated", "why": "y",
                             "jobs": ["a"], "per_job": {"a": 2.123457}, "supports": {"a": [2.123457, None]},
                             "range": [2.123457, 2.987654], "uncertainty": 0.1235, "noise": 0.06}
    bare = measured.ConstantFit("n", "w", 0.0, 1.0, "kept", "y").to_dict()
    assert bare["change"] is None and not {"range", "uncertainty", "noise"} & set(bare)


def test_of_two_constants_that_move_a_phase_alike_it_rests_on_the_least_known():
    # Ties to two places: 0.501 and 0.499 are alike. Express's first byte (range 5.9-7.0 ms, ln 1.19 = 0.17 wide) is
    # less known than a fitted constant (its range a point: 0 wide) and than none at all (not ranged: 0).
    assert measured._rests_on({"p": {"fastfile_get_latency": 0.501, "express_first_byte": 0.499}}) == {
        "p": "express_first_byte"}
    assert measured._rests_on({"p": {"not_ranged": 0.501, "express_first_byte": 0.499}}) == {"p": "express_first_byte"}
    # Apart at two places: the more elastic, however well known.
    assert measured._rests_on({"p": {"fastfile_get_latency": 0.52, "pipe_mbps": 0.50}}) == {"p": "fastfile_get_latency"}
    assert measured._rests_on({"p": {}}) == {"p": None}


def test_a_loss_is_the_sum_of_each_phases_squared_log_error_each_job_predicted_once():
    from types import SimpleNamespace
    calls = []

    def job(predicted, **figures):
        def predict(prices, model):
            calls.append(model)
            return predicted
        return SimpleNamespace(predict=predict, measured=figures)
    two = job({"downloading": 200.0, "training": 50.0}, downloading=100.0, training=100.0)
    tiny = job({"other": 0.0}, other=1.0)
    # ln 2 squared + ln(1/2) squared + ln(0.001 / 1) squared (a prediction of 0 is taken as 1 ms).
    loss = measured._loss([(two, "downloading"), (two, "training"), (tiny, "other")], None, "m")
    assert loss == pytest.approx(2 * math.log(2) ** 2 + math.log(1e-3) ** 2)
    assert calls == ["m", "m"]
    half = job({"other": 0.5}, other=1.0)
    assert measured._loss([(half, "other")], None, "m") == pytest.approx(math.log(0.5) ** 2)


# ---- a job's transitions read by hand: spot, attempts without a download, short pulls, no Starting ------------------

def test_a_spot_jobs_saving_is_said_and_a_saving_under_half_a_percent_is_none():
    # 600 s billed of 1,000 trained: 1 - 600 / 1,000 = 40% saved; with an image pull of 40 s, both said, in order.
    transitions = [{"status": "Starting", "seconds": 90}, {"status": "Training", "seconds": 40,
                                                          "message": "Downloading the training image"}]
    (job,), _ = measured.read_job(_bencher_job(), {"billable_seconds": 600, "training_time_seconds": 1000,
                                                   "transitions": transitions}, False)
    assert job.spot_saving == pytest.approx(0.4)
    assert job.read_as == "spot: 40% saved, recorded, not fitted; image pull 40 s inside Training counted as start-up"
    # 996 of 1,000: 0.4%, under half a percent: an on-demand job.
    (job,), _ = measured.read_job(_bencher_job(), {"billable_seconds": 996, "training_time_seconds": 1000}, False)
    assert job.spot_saving is None and job.read_as == ""
    # Each attempt of an interrupted spot job says the saving too.
    attempts = [{"status": "Downloading", "seconds": 30}, {"status": "Training", "seconds": 10},
                {"status": "Interrupted", "seconds": 1}, {"status": "Starting", "seconds": 60}]
    runs, _ = measured.read_job(_bencher_job(), {"billable_seconds": 600, "training_time_seconds": 1000,
                                                 "transitions": attempts}, False)
    assert [r.read_as for r in runs] == ["spot: 40% saved, recorded, not fitted; attempt 1 of 2: its download only"]


def test_an_attempt_that_never_downloaded_or_downloaded_nothing_is_no_run():
    # Attempt 1 was interrupted while Starting (no Downloading at all); attempt 2 downloaded for 0 s; attempt 3 for
    # half a second: only the third is a run of its own.
    transitions = [{"status": "Starting", "seconds": 60}, {"status": "Interrupted", "seconds": 1},
                   {"status": "Downloading", "seconds": 0}, {"status": "Training", "seconds": 5},
                   {"status": "Interrupted", "seconds": 1},
                   {"status": "Downloading", "seconds": 0.5}, {"status": "Training", "seconds": 400}]
    runs, why = measured.read_job(_bencher_job(), {"transitions": transitions}, False)
    assert [(r.job.rsplit(" (", 1)[1], r.measured) for r in runs] == [("attempt 3 of 3)", {"downloading": 0.5})]
    assert why.startswith("interrupted 2 time(s): 3 attempts")


def test_an_image_pull_of_half_a_second_is_still_start_up_and_training_never_goes_below_zero():
    short = [{"status": "Starting", "seconds": 90},
             {"status": "Training", "seconds": 0.5, "message": "Downloading the training image"}]
    (job,), _ = measured.read_job(_bencher_job(), {"transitions": short}, False)
    assert (job.measured["training"], job.measured["other"]) == (499.5, 60.5)
    # A pull longer than the Training the record kept (500 s): training 0, not negative.
    long = [{"status": "Starting", "seconds": 90},
            {"status": "Training", "seconds": 700, "message": "Downloading the training image"}]
    (job,), _ = measured.read_job(_bencher_job(), {"transitions": long}, False)
    assert (job.measured["training"], job.measured["other"]) == (0.0, 760.0)


def test_a_job_whose_transitions_have_no_starting_phase_is_a_cold_start():
    (job,), _ = measured.read_job(_bencher_job(), {"transitions": [{"status": "Downloading", "seconds": 30},
                                                                   {"status": "Training", "seconds": 500}]}, False)
    assert job.phases == ("downloading", "training", "other") and job.read_as == ""


def test_a_transitions_missing_seconds_count_as_none():
    assert measured._seconds([{"status": "Downloading", "seconds": None}, {"status": "Downloading"},
                              {"status": "Downloading", "seconds": 2.5}], "Downloading") == 2.5
    # A Training transition without a message is not the image pull.
    assert measured._seconds([{"status": "Training", "seconds": 7}], "Training", pull=False) == 7.0


def test_a_results_file_of_another_version_is_refused_naming_the_file():
    with pytest.raises(ConfigError) as refused:
        measured.check_results({"schema_version": 99, "records": []}, "run.json")
    assert str(refused.value).startswith("run.json: schema_version: results of schema version 99")
    with pytest.raises(ConfigError) as refused:
        measured.measured_jobs({"records": {}})
    assert str(refused.value).startswith("results.json: not a results.json")


def test_a_measured_jobs_phases_rest_on_the_constants_that_move_them_most():
    from dslab.core.facts.prices import PriceTable
    # Bencher's A FastFile: its first bytes on FastFile's mount, its training on its per-file GET, its start-up on
    # FastFile's own.
    assert measured.rests_on(measured.bencher_jobs()[0], PriceTable()) == {
        "downloading": "fastfile_fixed", "training": "fastfile_get_latency", "other": "startup_fastfile"}


def test_a_small_constant_is_searched_from_a_quarter_of_it_to_four_times_it():
    # FastFile's GET, 0.0447 s, not ranged here: 0.011175 to 0.1788.
    assert measured._bounds("fastfile_get_latency", 0.0447, {}) == pytest.approx((0.0447 / 4, 0.0447 * 4))


class _Flat:
    """A job whose one phase is measured at 100 s and predicted at 100 s wherever constant ``name`` lies between half
    and four times ``at``, and further off outside: a loss flat over that stretch."""
    headline = "downloading"

    def __init__(self, name, at):
        self.name, self.at, self.measured = name, at, {"downloading": 100.0}

    def predict(self, prices, model):
        ratio = getattr(model, self.name) / self.at
        return {"downloading": 100.0 * (ratio * 2 if ratio < 0.5 else ratio / 4 if ratio > 4 else 1.0)}


def test_a_fit_keeps_the_value_as_it_stands_where_the_loss_is_flat_and_fits_each_constant_it_can():
    from dslab.core.model.estimate import MODEL
    name = "pipe_mbps"
    job = _Flat(name, MODEL.pipe_mbps)
    # Flat from half to four times the shipped value: the value as it stands is kept, not the stretch's middle
    # (sqrt(0.5 x 4) = 1.41 times it).
    fitted = measured._fit([name], [(job, "downloading")], None, MODEL, {}, {name: {id(job)}})
    assert getattr(fitted, name) == pytest.approx(MODEL.pipe_mbps)
    # Flat from 4 to 32 times the shipped value, beyond the search's top (4 times it, pipe_mbps not ranged here): moved
    # to the top. A constant no pair moves (Express's first byte, listed first) is left as it is; the next is fitted.
    far = _Flat(name, MODEL.pipe_mbps * 8)
    fitted = measured._fit(["express_first_byte", name], [(far, "downloading")], None, MODEL, {}, {name: {id(far)}})
    assert getattr(fitted, name) == pytest.approx(4 * MODEL.pipe_mbps, rel=1e-3)
    assert fitted.express_first_byte == MODEL.express_first_byte


def test_a_valley_is_found_over_a_search_that_starts_below_one():
    # The grid runs from 0.5 to 100 in log space: a valley at 50 is found there, and one at 0.8 near its bottom end.
    assert measured._valley(_v(50.0), 0.5, 100.0).best == pytest.approx(50.0, rel=1e-3)
    assert measured._valley(_v(0.8), 0.5, 100.0).best == pytest.approx(0.8, rel=1e-3)
    # Flat from 25 to 100 (within ln 2 of 50), the search's top inside it: the flat stretch runs to the top.
    valley = measured._valley(_v(50.0, flat=math.log(2)), 0.5, 100.0)
    assert valley.low == pytest.approx(25.0, rel=1e-3) and valley.high == pytest.approx(100.0)


# ---- run 5's last survivors (measured again: 92.5%) --------------------------------------------------------------

def test_a_jobs_region_is_its_environments_before_its_prices_and_its_storage_and_efs_its_records(aws_run):
    run = _copy(aws_run)
    run["prices"]["region"] = "eu-west-1"          # the prices' Region, where the environment names us-east-1
    run["records"][0]["storage"] = "express"
    run.pop("execution")
    job = next(j for j in measured.read_runs(run).jobs if j.job == "aws-one-shards-a-file-r0")
    assert (job.region, job.storage, job.execution) == ("us-east-1", "express", "?")
    assert job.scenario == "?/one/shards-a/1xml.p4d.24xlarge"


def test_a_job_checks_record_rounds_seconds_to_a_tenth_and_the_error_to_four_places():
    from types import SimpleNamespace
    job = _bencher_job(billable=1000.04)
    estimate = SimpleNamespace(billable_seconds=1200.06, instance_count=1,
                               range=SimpleNamespace(billable_low=900.04, billable_high=1300.06))
    check = measured.JobCheck(job, estimate, [measured.PhaseCheck("training", 30.04, 36.06)])
    found = check.to_dict()
    # 1,200.06 / 1,000.04 - 1 = 0.200012: 0.2000 to four places.
    assert (found["measured_billable_seconds"], found["estimated_billable_seconds"], found["estimated_range"],
            found["error"]) == (1000.0, 1200.1, [900.0, 1300.1], 0.2)
    assert found["phases"]["training"] == {"measured": 30.0, "estimated": 36.1, "error": 0.2004, "rests_on": []}
