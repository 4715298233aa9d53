"""An experiment's datasets and trials as the answer sees them (dslab/core/answer/scenarios.py), on small experiment
files whose figures are worked out by hand (issue 58): which trials share one answer, a dataset's shape from its
stats, its declaration or its generate: recipe, and the compute in the premise's words."""

from __future__ import annotations

from dslab.core.answer.scenarios import (
    GENERATE_MEAN_KB, compute_rate_of, compute_said, generated_shape, known_shape, samples_of, scenarios, shape_of,
)
from dslab.core.experiment import parse_experiment


def _experiment(**doc):
    base = {"name": "x", "datasets": [{"name": "d", "format": "jpg", "files": 1000, "bytes": 10_000_000}]}
    base.update(doc)
    return parse_experiment(base)


def _workload_trial(file: str, files: int = 1000, total: int = 10**10, **trial):
    """A trial on ml.p4d.24xlarge running the DLIO workload ``file`` (dslab/contracts/dlio/), on a dataset of ``files``
    and ``total`` bytes, and that dataset's known shape."""
    from pathlib import Path

    import yaml

    from dslab.core.answer.scenarios import KnownShape
    from dslab.core.shape import DatasetShape
    dlio = yaml.safe_load((Path(__file__).resolve().parents[1] / "dslab/contracts/dlio" / file).read_text())
    experiment = _experiment(datasets=[{"name": "d", "format": "npz", "files": files, "bytes": total}],
                             instance_type="ml.p4d.24xlarge",
                             trials=[{"name": "a", "modes": ["File"], "workload": {"file": file, "dlio": dlio}, **trial}])
    return experiment.trials[0], KnownShape(DatasetShape(files=files, bytes=total), "x")


def test_trials_that_differ_only_in_their_sources_share_one_answer():
    experiment = _experiment(datasets=[{"name": "d", "format": "jpg", "files": 1000, "bytes": 10_000_000},
                                       {"name": "e", "format": "jpg", "files": 10, "bytes": 100_000}], trials=[
        {"name": "a", "modes": ["File", "FSx"]},
        {"name": "b", "modes": ["FastFile"], "storage": "express"},
        {"name": "c", "modes": ["Pipe"], "instance_count": 2}])
    found = {s.label: s for s in scenarios(experiment)}
    # d: trials a and b share a cluster (one answer); c runs 2 instances (another). e alike. Where a dataset has two
    # answers, each is labelled by its trials.
    assert set(found) == {"d · a+b", "d · c", "e · a+b", "e · c"}
    assert found["d · a+b"].trial_names == ("a", "b")
    # In the lab's order: the general purpose bucket's sources first, each in MODES order, then Express's.
    assert found["d · a+b"].sources == (("File", "standard"), ("FSx", "standard"), ("FastFile", "express"))
    one = {s.label: s for s in scenarios(_experiment(trials=[{"name": "a", "modes": ["File"]}]))}
    assert set(one) == {"d"}   # one answer: the dataset's name alone


def test_a_datasets_shape_from_its_stats_then_its_declaration_then_its_recipe():
    experiment = _experiment(datasets=[
        {"name": "declared", "format": "jpg", "files": 1000, "bytes": 10_000_000},
        {"name": "made", "format": "jpg", "generate": {"images": 200, "copies": 3, "mean_kb": 10}},
        {"name": "shards", "format": "tfrecord", "generate": {"images": 1000, "mean_kb": 100, "shard_size_mb": 20}},
        {"name": "plain", "format": "jpg", "generate": {"images": 100}},
        {"name": "dlio", "format": "npz", "generate": {"files": 4, "samples_per_file": 8, "record_bytes": 1000,
                                                        "record_bytes_stdev": 0}}])
    d = {ds.name: ds for ds in experiment.datasets}
    stats = {"declared": {"files": 990, "bytes": 9_900_000}}
    found = known_shape(d["declared"], stats, "the stats file")
    assert (found.shape.files, found.shape.bytes, found.source) == (990, 9_900_000, "the stats file")
    assert known_shape(d["declared"], {"declared": {"files": 990}}).source == "the experiment's files and bytes"
    assert shape_of(d["declared"]).files == 1000
    # 200 images x 3 copies = 600 JPEGs of ~10 KiB: 600 x 10 x 1,024 = 6,144,000 bytes.
    made = known_shape(d["made"])
    assert (made.shape.files, made.shape.bytes, made.shape.samples) == (600, 6_144_000, 600)
    assert made.source == "its generate: recipe, predicted at ~10 KiB per image"
    assert made.describe() == "600 files, 6.1 MB, 600 samples (from its generate: recipe, predicted at ~10 KiB per image)"
    # 1,000 images of 100 KiB = 102,400,000 bytes in 20 MB shards: ceil(102.4 / 20) = 6 files.
    shards = generated_shape(d["shards"])
    assert (shards.files, shards.bytes, shards.samples) == (6, 102_400_000, 1000)
    # Caltech-256's mean JPEG where the recipe gives none: 100 x 39 KiB.
    assert GENERATE_MEAN_KB == 39.0 and generated_shape(d["plain"]).bytes == 100 * 39 * 1024
    assert samples_of(d["dlio"]) == 32 and samples_of(d["plain"]) == 100 and samples_of(d["declared"]) is None
    from dataclasses import replace
    assert known_shape(replace(d["declared"], files=None, bytes=None)) is None   # nothing says its size


def test_the_compute_in_the_premises_words():
    given = _experiment(trials=[{"name": "a", "modes": ["File"]}],
                        compute={"batch_size": 32, "seconds_per_batch": 0.25}).trials[0]
    # 32 samples every 0.25 s = 128 samples/s per accelerator.
    assert compute_rate_of(given) == 128.0
    assert compute_said(given) == ("batch 32 every 0.25 s = 128.0 samples/s per accelerator (the experiment's compute)")
    preset = _experiment(trials=[{"name": "a", "modes": ["File"]}], compute={"preset": "v100"}).trials[0]
    assert "V100" in compute_said(preset) or "v100" in compute_said(preset)
    real = _experiment(trials=[{"name": "a", "modes": ["File"]}], compute={"model": "resnet50"}).trials[0]
    assert compute_said(real).startswith("resnet50 trained for real; estimated at the V100 preset's ")


def test_a_tfrecord_recipe_without_a_shard_size_packs_110_mb_shards():
    # 10,000 images of 39 KiB (Caltech-256's mean) = 399,360,000 bytes in 110 MB shards: ceil(399.36 / 110) = 4.
    experiment = _experiment(datasets=[{"name": "t", "format": "tfrecord", "generate": {"images": 10_000}}])
    found = generated_shape(experiment.datasets[0])
    assert (found.files, found.bytes, found.samples) == (4, 399_360_000, 10_000)


def test_a_trials_premise_names_the_defaults_it_took():
    from dslab.core.answer.scenarios import KnownShape, premise_of_trial
    from dslab.core.shape import DatasetShape
    known = KnownShape(DatasetShape(files=1000, bytes=10_000_000), "the experiment's files and bytes")
    # Nothing given: the instance, its count and the epochs are the defaults taken.
    bare = _experiment(trials=[{"name": "a", "modes": ["File"]}]).trials[0]
    premise = premise_of_trial(bare, known)
    assert premise.defaults == frozenset({"instance", "instance_count", "epochs"})
    assert (premise.au_target, premise.readers, premise.notes) == (90.0, None, ())
    # The instance type and the epochs given: only the count is a default; the volume asked for is the premise's.
    given = _experiment(instance_type="ml.p3.8xlarge", epochs=3, volume_size_gb=500,
                        trials=[{"name": "a", "modes": ["File"]}]).trials[0]
    premise = premise_of_trial(given, known)
    assert premise.defaults == frozenset({"instance_count"})
    assert (premise.instance_type, premise.epochs, premise.volume_size_gb, premise.accelerators) == (
        "ml.p3.8xlarge", 3, 500, 4)


def test_a_workload_trials_premise_takes_its_readers_au_target_and_epochs_and_says_its_size_against_mlperfs():
    from pathlib import Path

    import yaml

    from dslab.core.answer.scenarios import KnownShape, premise_of_trial
    from dslab.core.shape import DatasetShape
    dlio = Path(__file__).resolve().parents[1] / "dslab" / "contracts" / "dlio" / "unet3d_h100.yaml"
    trial = _experiment(datasets=[{"name": "d", "format": "npz", "files": 1000, "bytes": 10**10}],
                        instance_type="ml.p5.48xlarge", trials=[{"name": "a", "modes": ["File"], "workload": {
                            "file": "unet3d_h100.yaml", "dlio": yaml.safe_load(dlio.read_text())}}]).trials[0]
    premise = premise_of_trial(trial, KnownShape(DatasetShape(files=1000, bytes=10**10), "x"))
    # 4 read threads per accelerator x 8 H100s = 32 readers; unet3d's AU target, 90%; its file's 5 epochs are not a
    # default (only the count is). Its timing is the file's own (nothing to say), and its 168 files are said against
    # MLPerf Storage's 75,000 for one host.
    assert (premise.readers, premise.au_target, premise.epochs, premise.accelerators) == (32, 90.0, 5, 8)
    assert premise.defaults == frozenset({"instance_count"})
    assert len(premise.notes) == 1 and premise.notes[0].startswith(
        "these figures use unet3d_h100.yaml's 168 files, 3 steps an epoch: MLPerf Storage runs unet3d with 75,000 "
        "files on 1 host(s)")


def test_trials_running_other_scripts_do_not_share_an_answer():
    # The same cluster and dataset, two scripts of the user's: each its own answer (a script sets how data is read).
    experiment = _experiment(trials=[
        {"name": "a", "modes": ["File"], "script": {"source_dir": "code", "entry_point": "train.py"}},
        {"name": "b", "modes": ["File"], "script": {"source_dir": "code", "entry_point": "other.py"}},
        {"name": "c", "modes": ["FSx"], "script": {"source_dir": "code", "entry_point": "train.py"}}])
    assert {s.label: s.trial_names for s in scenarios(experiment)} == {"d · a+c": ("a", "c"), "d · b": ("b",)}


def test_a_trials_s3_concurrency_is_its_premises_and_its_script_jobs_are_answered_at_it():
    """The lab's script's GETs in flight (hyperparameter s3_concurrency) are the trial's premise: trials that differ in
    them get an answer each, and each Script row is priced at its own. A user's own script's s3_concurrency is its
    own business: its premise stays at the default, and its trials share an answer."""
    from dslab.core.answer.scenarios import estimated
    from dslab.core.facts.prices import PriceTable
    post = [{"name": "post", "format": "jpg", "files": 1_530_350, "bytes": 54_000_000_000}]
    experiment = _experiment(datasets=post, instance_type="ml.p4d.24xlarge", modes=["Script"],
                             compute={"batch_size": 262, "seconds_per_batch": 1.0}, trials=[
                                 {"name": "default"}, {"name": "seventy", "hyperparameters": {"s3_concurrency": 70}},
                                 {"name": "also", "hyperparameters": {"s3_concurrency": 70}, "modes": ["FastFile"]}])
    assert {s.label: s.trial_names for s in scenarios(experiment)} == {"post · default": ("default",),
                                                                      "post · seventy+also": ("seventy", "also")}
    found = {a.scenario.label: a for a in estimated(experiment, PriceTable())}
    assert found["post · default"].premise.s3_concurrency is None
    assert found["post · seventy+also"].premise.s3_concurrency == 70
    # 1,530,350 JPEGs on one p4d, 8 A100s at 262 samples/s (730.13 s of compute an epoch): at 64 in flight the epoch's
    # I/O is 186.17 s of listing + 42,589.6 / 64 s of GETs + 54,000 / 5,600 s of bytes = 861.27 s, AU 84.8%; at 70,
    # 186.17 + 608.42 + 8.82 = 803.41 s, AU 90.9% (tests/test_sizing_by_hand.py works the same figures).
    au = {label: round(a.answer.source("Script").estimate.au_percent, 1) for label, a in found.items()}
    assert au == {"post · default": 84.8, "post · seventy+also": 90.9}
    own = {"source_dir": "code", "entry_point": "train.py"}
    theirs = _experiment(datasets=post, modes=["Script"], trials=[
        {"name": "a", "script": own}, {"name": "b", "script": own, "hyperparameters": {"s3_concurrency": 70}}])
    (one,) = scenarios(theirs)
    assert one.trial_names == ("a", "b")


def test_a_known_shape_keeps_the_recipes_samples_and_names_where_it_came_from():
    experiment = _experiment(datasets=[
        {"name": "made", "format": "jpg", "files": 600, "bytes": 6_000_000, "generate": {"images": 200, "copies": 3}},
        {"name": "recipe", "format": "jpg", "files": 600, "generate": {"images": 200, "copies": 3, "mean_kb": 10}}])
    made, recipe = experiment.datasets
    # A run's stats: what was in S3, said as "a run's results" unless told; its samples still the recipe's 200 x 3.
    from_stats = known_shape(made, {"made": {"files": 601, "bytes": 6_100_000}})
    assert (from_stats.shape.files, from_stats.shape.bytes, from_stats.shape.samples, from_stats.source) == (
        601, 6_100_000, 600, "a run's results")
    assert shape_of(made, {"made": {"files": 601, "bytes": 6_100_000}}).files == 601
    declared = known_shape(made)
    assert (declared.shape.samples, declared.source) == (600, "the experiment's files and bytes")
    # Files without bytes say nothing of its size: the recipe does (600 JPEGs of 10 KiB = 6,144,000 bytes).
    from_recipe = known_shape(recipe)
    assert (from_recipe.shape.files, from_recipe.shape.bytes) == (600, 6_144_000)
    assert from_recipe.source == "its generate: recipe, predicted at ~10 KiB per image"
    from dataclasses import replace
    assert shape_of(replace(recipe, generate={})) is None


def test_a_tiny_tfrecord_recipe_makes_one_shard():
    # 10 images of 10 KiB = 102,400 bytes: under one 110 MB shard, and at least one.
    experiment = _experiment(datasets=[{"name": "t", "format": "tfrecord", "generate": {"images": 10, "mean_kb": 10}}])
    assert generated_shape(experiment.datasets[0]) == generated_shape(experiment.datasets[0]).__class__(
        files=1, bytes=102_400, samples=10)


def test_a_preset_and_a_real_models_rate_are_the_presets_own():
    # The V100 preset: batch 64 every 0.195 s = 328.2 samples/s per accelerator, said "328" for a real model.
    preset = _experiment(trials=[{"name": "a", "modes": ["File"]}], compute={"preset": "v100"}).trials[0]
    assert round(compute_rate_of(preset), 4) == round(64 / 0.195, 4) == 328.2051
    # Another preset's own: the A100's (MLPerf Storage's ResNet-50 timing), not the V100's.
    from dslab.core.facts.compute import COMPUTE_PRESETS
    a100 = _experiment(trials=[{"name": "a", "modes": ["File"]}], compute={"preset": "a100"}).trials[0]
    timing = COMPUTE_PRESETS["a100"]
    assert compute_rate_of(a100) == timing["batch_size"] / timing["seconds_per_batch"] != compute_rate_of(preset)
    real = _experiment(trials=[{"name": "a", "modes": ["File"]}], compute={"model": "resnet50"}).trials[0]
    assert compute_said(real) == ("resnet50 trained for real; estimated at the V100 preset's 328 samples/s per "
                                  "accelerator")


def test_a_checkpoint_trials_premise_is_its_plan_on_its_cluster_with_no_compute():
    # llama3 8B at 1/10,000 on ml.p5.48xlarge: 8 GPUs a host; 16 files of 11,242,568 bytes in all; one pass, no
    # compute; saved every 120 s, both writes kept; the trial's volume and the lab and calibration passed in.
    from pathlib import Path

    import yaml

    from dslab.core.answer.scenarios import checkpoint_premise_of_trial
    from dslab.core.model.calibration import SHIPPED, InUse
    from dslab.core.model.provisioning import Provisioning
    doc = yaml.safe_load((Path(__file__).resolve().parents[1] / "dslab/contracts/dlio/llama3_8b.yaml").read_text())
    trial = _experiment(instance_type="ml.p5.48xlarge", volume_size_gb=300, trials=[
        {"name": "save", "workload": {"file": "llama3_8b.yaml", "dlio": doc, "scale": 0.0001},
         "checkpoint": {"targets": ["s3"], "writes": 2, "reads": 1, "seconds_between": 120}}]).trials[0]
    lab, yours = Provisioning(fsx_idle_hours=2.0), InUse(source="calibration.json")
    premise = checkpoint_premise_of_trial(trial, lab, yours)
    assert (premise.instance_type, premise.instance_count, premise.accelerators, premise.epochs, premise.rate) == (
        "ml.p5.48xlarge", 1, 8, 1, 0.0)
    assert (premise.compute, premise.shape_origin, premise.volume_size_gb) == (
        "no compute: checkpoints", "llama3_8b.yaml", 300)
    assert (premise.shape.files, premise.shape.bytes, premise.lab, premise.calibration) == (16, 11_242_568, lab, yours)
    assert (premise.checkpoint.every_seconds, premise.checkpoint.keep) == (120.0, 2)
    assert checkpoint_premise_of_trial(trial).calibration is SHIPPED


def test_a_workload_timed_on_another_accelerator_says_so_beside_its_size_against_mlperfs():
    # unet3d_h100.yaml on ml.p4d.24xlarge (A100s): MLPerf's own A100 timing is used, batch 7 every 0.636 s = 11.0
    # samples/s, and said first; then its 168 files against MLPerf Storage's 42,187 for one host of 1,152 GiB. The lab
    # and the calibration given are the premise's.
    from dslab.core.answer.scenarios import premise_of_trial
    from dslab.core.model.calibration import InUse
    from dslab.core.model.provisioning import Provisioning
    trial, known = _workload_trial("unet3d_h100.yaml")
    lab, yours = Provisioning(fsx_idle_hours=2.0), InUse(source="calibration.json")
    premise = premise_of_trial(trial, known, lab, yours)
    assert round(premise.rate, 3) == round(7 / 0.636, 3) == 11.006
    assert premise.notes == (
        "unet3d_h100.yaml emulates H100 and the instance has A100: MLPerf's own A100 timing of unet3d is used "
        "(unet3d_a100.yaml: batch 7 every 0.636 s); --instance ml.p5.48xlarge runs it on H100",
        "these figures use unet3d_h100.yaml's 168 files, 3 steps an epoch: MLPerf Storage runs unet3d with 42,187 "
        "files on 1 host(s) of 1,152 GiB (8 accelerators): at least 5 x their memory and 500 steps an epoch, so they "
        "are not an MLPerf-valid run")
    assert (premise.lab, premise.calibration) == (lab, yours)


def test_a_workload_that_gives_no_step_on_the_trials_cluster_is_refused_on_its_instance_count():
    # unet3d_h100.yaml's 168 files on 4 x ml.p4d.24xlarge at batch 7: 168 / (7 x 32 accelerators) = 0.75, no whole step.
    import pytest

    from dslab.core.answer.scenarios import premise_of_trial
    from dslab.core.errors import ConfigError
    trial, known = _workload_trial("unet3d_h100.yaml", instance_count=4)
    with pytest.raises(ConfigError) as refused:
        premise_of_trial(trial, known)
    assert refused.value.field == "instance_count"
    assert "168 files of 1 sample(s) give 0 steps an epoch on 32 accelerators of batch 7" in str(refused.value)


# ---- an experiment's estimates, questions and job checks, as plan, run, local and export see them ----------------

D = {"name": "d", "format": "jpg", "files": 1000, "bytes": 10_000_000}
UNSIZED = {"name": "u", "format": "jpg"}
IN_EFS = {"name": "e", "format": "jpg", "files": 1000, "bytes": 10_000_000, "source": "efs"}


def _two_trials(**b):
    return parse_experiment({"name": "x", "trials": [{"name": "a", "modes": ["File", "FSx"], "datasets": [D, UNSIZED]},
                                                     {"name": "b", "modes": ["EFS"], "datasets": [IN_EFS], **b}]})


def test_each_scenarios_estimate_says_the_shape_it_assumed_or_what_is_missing():
    from dslab.core.answer.scenarios import UNKNOWN_SHAPE_FIX, estimated, for_dataset
    from dslab.core.facts.prices import PriceTable
    from dslab.core.model.provisioning import Provisioning
    experiment, prices = _two_trials(), PriceTable()
    found = estimated(experiment, prices)
    records = [a.to_dict() for a in found]
    assert [r["scenario"] for r in records] == ["d", "u", "e"]
    # d: 1,000 JPEGs are 1,000 samples, as the experiment declares them; its answer's record beside it.
    assert {k: v for k, v in records[0].items() if k != "answer"} == {
        "scenario": "d", "dataset": "d", "trials": ["a"],
        "assumed": {"files": 1000, "bytes": 10_000_000, "samples": 1000, "from": "the experiment's files and bytes"}}
    assert records[0]["answer"]["pick"] in ("File", "FSx")
    # u: no size anywhere: no answer, and what to give.
    assert records[1] == {"scenario": "u", "dataset": "u", "trials": ["a"],
                          "missing": f"the size of dataset u is not known: {UNKNOWN_SHAPE_FIX}"}
    # A run's stats win, said as a run's results unless told otherwise; the lab given is the answers'.
    stats = {"d": {"files": 999, "bytes": 9_990_000}}
    assert estimated(experiment, prices, stats=stats)[0].to_dict()["assumed"]["from"] == "a run's results"
    told = estimated(experiment, prices, stats=stats, stats_source="the stats file")[0]
    assert (told.known.shape.files, told.known.source) == (999, "the stats file")
    lab = Provisioning(fsx_idle_hours=3.0)
    assert estimated(experiment, prices, lab=lab)[0].premise.lab == lab
    # A scenario by its dataset, and by a trial that runs it.
    assert for_dataset(found, "e").scenario.trial_names == ("b",)
    assert for_dataset(found, "d", "a") is found[0] and for_dataset(found, "d", "b") is None


def test_a_scenarios_question_is_asked_in_the_experiments_own_words():
    from dataclasses import replace

    from dslab.core.answer.scenarios import known_shape, scenario_question
    from dslab.core.facts.limits import EXPERIMENT_RUNTIME_FIX
    from dslab.core.facts.prices import PriceTable
    from dslab.core.model.calibration import InUse
    from dslab.core.model.provisioning import Provisioning
    yours = InUse(source="calibration.json")
    experiment = replace(_two_trials(), calibration=yours)
    found = {s.label: s for s in scenarios(experiment)}
    lab = Provisioning(fsx_idle_hours=3.0)
    d = scenario_question(experiment, found["d"], known_shape(found["d"].dataset), PriceTable(), lab)
    assert (d.runtime_field, d.runtime_fix, d.runtime_what) == (
        "trials[0].epochs", EXPERIMENT_RUNTIME_FIX, "trial a's {source} job on d")
    assert (d.count_field, d.dataset_name, d.data_in_efs) == ("trial 'a': instance_count", "d", False)
    assert (d.premise.lab, d.premise.calibration) == (lab, yours)
    assert d.sources == (("File", "standard"), ("FSx", "standard"))
    # A dataset whose source is EFS: the data lives there.
    e = scenario_question(experiment, found["e"], known_shape(found["e"].dataset), PriceTable())
    assert (e.data_in_efs, e.runtime_field, e.runtime_what) == (True, "trials[1].epochs", "trial b's {source} job on e")


def test_each_planned_job_is_checked_under_the_keys_the_experiment_names_it_by():
    from dslab.core.answer.scenarios import job_checks
    from dslab.core.facts.prices import PriceTable
    checks = {c.key: c for c in job_checks(_two_trials(max_run_seconds=600), PriceTable())}
    # Every job of a dataset with a known size (u has none), one per trial, mode and dataset.
    assert set(checks) == {("a", "d", "File", "standard"), ("a", "d", "FSx", "standard"), ("b", "e", "EFS", "standard")}
    file_job = checks[("a", "d", "File", "standard")]
    assert (file_job.what, file_job.field, file_job.max_run_field, file_job.modes_field) == (
        "trial a's File job on d", "trials[0].epochs", "trials[0].max_run_seconds", "trials[0].modes")
    # The others of its answer that could serve: FSx only (itself left out).
    assert set(file_job.others_top) == {"FSx"}
    # No max_run_seconds given: the answer's; given: the experiment's own (b: 600 s), which covers its job here.
    assert file_job.max_runtime_seconds == file_job.source.max_runtime_seconds and not file_job.max_run_given
    efs_job = checks[("b", "e", "EFS", "standard")]
    assert (efs_job.max_run_given, efs_job.max_runtime_seconds, efs_job.problem, dict(efs_job.others_top)) == (
        True, 600, None, {})
    # With a run's stats the unsized dataset u is known too: its File and FSx jobs are checked; on a lab as it stands
    # with a 2,400 GiB FSx, the FSx job is checked on that one.
    from dslab.core.model.provisioning import as_deployed
    known = job_checks(_two_trials(), PriceTable(), stats={"u": {"files": 500, "bytes": 5_000_000}},
                       lab=as_deployed(2400))
    assert {c.key for c in known} >= {("a", "u", "File", "standard"), ("a", "u", "FSx", "standard")}
    fsx = next(c for c in known if c.key == ("a", "u", "FSx", "standard"))
    assert fsx.source.deployed_estimate.provisioning.fsx.capacity_gib == 2400
    # One trial: its keys are the experiment's own.
    one = job_checks(parse_experiment({"name": "x", "trials": [{"name": "a", "modes": ["File"], "datasets": [D]}]}),
                     PriceTable())
    assert [(c.field, c.max_run_field, c.modes_field) for c in one] == [("epochs", "max_run_seconds", "modes")]


def test_a_max_run_seconds_shorter_than_the_job_may_take_is_refused_with_what_to_give():
    from dslab.core.answer.scenarios import job_checks
    from dslab.core.facts.prices import PriceTable
    efs_job = next(c for c in job_checks(_two_trials(max_run_seconds=60), PriceTable()) if c.source.mode == "EFS")
    top = efs_job.source.top_job_seconds
    assert top > 60
    assert efs_job.problem == (
        "trials[1].max_run_seconds",
        f"60 s is shorter than trial b's EFS job on e may take on AWS (up to {top / 3600:,.1f} h, the top of its "
        f"estimate): SageMaker would stop it; give at least {efs_job.source.max_runtime_seconds:,}, or leave it out (it "
        "is then sized from the estimate)")


def test_a_job_past_28_days_names_the_quickest_other_source_that_fits():
    from dataclasses import replace

    from dslab.core.answer.scenarios import job_checks
    from dslab.core.facts.limits import EXPERIMENT_RUNTIME_FIX
    from dslab.core.facts.prices import PriceTable
    job = next(c for c in job_checks(_two_trials(), PriceTable()) if c.source.mode == "File")
    day = 86_400
    # Of FSx at 10 days, EFS at 12 and Pipe at 30 (past 28): FSx, the quickest that fits, at 10.0 days.
    assert replace(job, others_top={"FSx": 10 * day, "EFS": 12 * day, "Pipe": 30 * day}).runtime_fix == (
        "fewer epochs: or FSx (up to 10.0 days)")
    assert replace(job, others_top={"Pipe": 30 * day}).runtime_fix == EXPERIMENT_RUNTIME_FIX


def test_a_source_the_lab_as_it_stands_cannot_run_is_refused_with_its_provisioning():
    # 2 TB of 200 MB files on FSx: the lab's 1,200 GiB Scratch 2 cannot hold it; the answer sizes a larger one, and the
    # job is refused on the trial's modes with the deploy that provisions it.
    from dslab.core.answer.scenarios import job_checks
    from dslab.core.facts.prices import PriceTable
    big = {"name": "big", "format": "npz", "files": 10_000, "bytes": 2_000_000_000_000}
    job = job_checks(parse_experiment({"name": "x", "instance_type": "ml.p4d.24xlarge",
                                       "trials": [{"name": "a", "modes": ["FSx"], "datasets": [big]}]}),
                     PriceTable())[0]
    field, why = job.problem
    assert field == "modes" and why.startswith("trial a's FSx job on big: FSx as the lab stands cannot run it (")
    assert why.endswith(f": provision it first ({'; '.join(job.source.commands)}), or drop FSx")
    assert job.source.commands and job.source.commands[0].startswith("make deploy FSX=up ")


def test_files_that_do_not_fit_each_instances_storage_are_refused_on_the_volume_or_the_count():
    # 500 GB through File onto a 100 GB EBS volume: raise volume_size_gb. On ml.p4d.24xlarge's fixed 8 x 1,000 GB of
    # NVMe the share fits; on ml.g5.xlarge's 250 GB of NVMe it does not: more instances, each holding its shard.
    from dslab.core.answer.scenarios import job_checks
    from dslab.core.facts.prices import PriceTable
    big = {"name": "big", "format": "npz", "files": 1_000, "bytes": 500_000_000_000}

    def check(instance_type: str, **trial):
        # FSx beside File, so that the answer has a source to pick where File cannot serve.
        experiment = parse_experiment({"name": "x", "instance_type": instance_type, "trials": [
            {"name": "a", "modes": ["File", "FSx"], "datasets": [big], **trial}]})
        return next(c for c in job_checks(experiment, PriceTable()) if c.source.mode == "File").problem

    # 500 GB and File's 5% headroom (volume.py VOLUME_HEADROOM): 525 GB.
    assert check("ml.p3.2xlarge", volume_size_gb=100) == (
        "volume_size_gb", "trial a's File job on big: File mode copies 525 GB onto each instance, more than the 100 GB "
        "volume asked for: raise volume_size_gb to at least 525 (or leave it out: it is then sized for the data)")
    assert check("ml.p4d.24xlarge") is None
    field, why = check("ml.g5.xlarge")
    assert field == "instance_count" and why.startswith("trial a's File job on big: ")


def test_a_local_runs_set_up_is_what_it_measured_for_the_branch_that_prepares_the_source():
    from dslab.core.answer.scenarios import local_setup_seconds
    measured = {"EFS": 12.5, "FSx": 30.0, "Express": 7.0, "File": 99.0}
    assert [local_setup_seconds(measured, mode, storage) for mode, storage in (
        ("EFS", "standard"), ("FSx", None), ("File", "express"), ("FastFile", "express"), ("File", "standard"),
        ("Pipe", None))] == [12.5, 30.0, 7.0, 7.0, 0.0, 0.0]
    assert local_setup_seconds({}, "EFS", None) == 0.0 and local_setup_seconds({}, "FastFile", "express") == 0.0


def test_measured_runs_pick_by_their_own_cost_and_time_per_scenario():
    from types import SimpleNamespace

    from dslab.core.answer.scenarios import measured
    from dslab.core.facts.prices import PriceTable
    from dslab.core.shape import DatasetShape

    def row(scenario, mode, cost, wall, trials=("a",), storage=None, runs=None):
        return {"dataset": scenario, "dataset_name": "d", "trials": list(trials), "mode_name": mode,
                "storage": storage, "cost_total": cost, "wall_mean": wall,
                **({"cost": SimpleNamespace(runs=runs, interval=(cost * 0.9, cost * 1.1))} if runs else {})}
    rows = [row("d · b", "File", None, None, trials=("b",)),
            row("d · a", "File", 1.00, 3600.0), row("d · a", "FastFile", 0.50, 3600.0, trials=("a", "", "c"), runs=3),
            row("d · a", "FSx", 2.00, 3600.0), row("d · a", "FastFile", 0.90, 3600.0, storage="express"),
            row("d · a", "EFS", 0.01, None)]   # a cost without a time: not a completed job
    found = measured(rows, PriceTable(), shapes={"d": DatasetShape(1000, 10_000_000)},
                     local_setup={"FSx": 30.0, "Express": 12.0})
    b, a = found
    assert {o.source for o in a.decision.ranking} == {"File", "FastFile", "FSx", "Express FastFile"}
    # Measured locally: FSx's import and Express's staging as this machine timed them.
    setups = {o.source: o.setup.seconds for o in a.decision.ranking}
    assert (setups["FSx"], setups["Express FastFile"], setups["File"]) == (30.0, 12.0, 0.0)
    # d · a: FastFile at half File's cost, the same time: its pick, from its 3 runs with their range; the trials that
    # ran it, sorted, the empty name left out.
    assert (a.label, a.dataset, a.trials) == ("d · a", "d", ("a", "c"))
    assert a.decision.pick.source == "FastFile" and a.decision.pick.runs == 3
    assert a.decision.pick.job_usd_interval == (0.45, 0.55) and a.decision.runner_up.runs == 1
    # Measured locally: a source that prepares nothing took no set-up time.
    assert a.decision.pick.setup.seconds == 0.0
    # d · b: no job finished: nothing to pick, said so.
    assert (b.decision, b.missing) == (None, "no job completed")
    assert b.to_dict() == {"scenario": "d · b", "dataset": "d", "trials": ["b"], "missing": "no job completed"}
    assert a.to_dict()["scenario"] == "d · a" and a.to_dict()["pick"] == "FastFile"


def test_measured_runs_on_aws_price_each_set_up_from_the_shape_on_the_lab_they_ran_on():
    # FSx's import: 1,000 objects at 2,000,000 an hour = 1.8 s, billed at the lab's FSx: 2,400 GiB x $0.140 / 730 h =
    # $0.46027 an hour: $0.00023. Data in EFS: File copies it out first (DataSync: 120 s + 1,000 / 500 = 2 s + 10 MB
    # at 104.86 MB/s = 0.095 s: 122.095 s).
    from dslab.core.answer.scenarios import measured
    from dslab.core.facts.prices import PriceTable
    from dslab.core.model.provisioning import as_deployed
    from dslab.core.shape import DatasetShape
    rows = [{"dataset": "d", "dataset_name": "d", "trials": ["a"], "mode_name": mode, "storage": None,
             "cost_total": 1.0, "wall_mean": 600.0} for mode in ("FSx", "File")]
    shapes = {"d": DatasetShape(1000, 10_000_000)}
    (on_aws,) = measured(rows, PriceTable(), shapes=shapes, lab=as_deployed(2400))
    fsx = next(o for o in on_aws.decision.ranking if o.mode == "FSx")
    assert (round(fsx.setup.seconds, 2), round(fsx.setup.usd, 5)) == (1.8, 0.00023)
    (in_efs,) = measured(rows, PriceTable(), shapes=shapes, data_in_efs={"d": True})
    file_mode = next(o for o in in_efs.decision.ranking if o.mode == "File")
    assert (file_mode.setup.what, round(file_mode.setup.seconds, 2)) == (
        "a DataSync copy of 0.01 GB from EFS to S3", 122.1)


def test_a_workloads_own_au_target_is_the_premises():
    # cosmoflow's AU target is 70% (MLPerf Storage's rule for it), not the 90% default.
    from dslab.core.answer.scenarios import premise_of_trial
    trial, known = _workload_trial("cosmoflow_a100.yaml", files=100_000, total=10**12)
    assert premise_of_trial(trial, known).au_target == 70.0
