"""AWS's response fields mean what AWS says (issue 54, part 2): every field the product reads from a SageMaker, FSx,
EFS, DataSync or Step Functions response is listed in dslab/core/facts/aws_fields.py with the API reference's words,
and docs/reference/aws-fields.md is generated from it. Here each quote is checked word for word against botocore's
service models (the text the API reference is made from), each listed reader against its source, and, table-driven,
the stand-in and the product against the quotes a figure rests on: BillableTimeInSeconds is one instance's wall clock
(the instances cost billable x InstanceCount x hourly), spot's saving is 1 - billable / training time, and the phases
stay one instance's wall seconds."""

from __future__ import annotations

import ast
import datetime as dt
import html
import json
import math
import re
from functools import lru_cache
from pathlib import Path

import botocore.session
import pytest

from dslab.cli import main
from dslab.core import measured
from dslab.core.errors import ConfigError
from dslab.core.facts import aws_fields
from dslab.core.facts.aws_fields import FIELDS, NOT_FROM_A_RESPONSE, READERS
from dslab.core.facts.prices import PriceTable
from dslab.core.results import VERSION_NOTES, read_results, record_from_describe, spot_saving

from .synthetic_runs import synthetic_results
from .test_reactions_runner import Recording, clock, code, request, run_job  # noqa: F401  (clock: a fixture)

REPO = Path(__file__).resolve().parent.parent
PRICES = PriceTable()
P4D_HOURLY = 37.688   # ml.p4d.24xlarge on demand, the project's price table (dslab/core/facts/prices.py)


# ---- the table and its page ---------------------------------------------------------------------------------------

def test_the_documentation_holds_the_generated_table():
    assert aws_fields.PAGE.read_text() == aws_fields.markdown(), "run: python -m dslab.core.facts.aws_fields --write"


def _said(text: str) -> str:
    """Documentation as a reader sees it: tags gone, entities decoded, one space, none before punctuation."""
    text = " ".join(html.unescape(re.sub(r"<[^>]+>", " ", text or "")).split())
    return re.sub(r"\( ", "(", re.sub(r" ([.,;:)])", r"\1", text))


@lru_cache(maxsize=None)
def _model(service: str):
    return botocore.session.get_session().get_service_model(service)


@pytest.mark.parametrize("field", FIELDS, ids=lambda f: f"{f.service}.{f.name}")
def test_each_quote_is_the_api_references_own_words(field):
    shape = _model(field.service).shape_for(field.shape)
    assert field.member in shape.members, f"{field.shape} has no member {field.member}"
    assert _said(field.quote) in _said(shape.members[field.member].documentation), field.name
    # Its page: the operation's for a member of the response, else the data type's own.
    assert field.page.startswith(aws_fields.SERVICES[field.service][1]) and field.page.endswith(".html")
    operation = _model(field.service).operation_model(field.operation)
    if field.shape.endswith(("Response", "Output")):
        assert operation.output_shape.name == field.shape and field.page.endswith(f"API_{field.operation}.html")


# ---- every field a reader reads is listed, and each listed reader reads it -----------------------------------------

def _keys_read(module: str) -> set[str]:
    """String keys a module reads from a dict: x["Key"] and x.get("Key")."""
    out = set()
    for node in ast.walk(ast.parse((REPO / module).read_text())):
        if (isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and isinstance(node.slice, ast.Constant)
                and isinstance(node.slice.value, str)):
            out.add(node.slice.value)
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("get", "pop")
              and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            out.add(node.args[0].value)
    return out


def _response_members(service: str, operation: str) -> set[str]:
    found: set[str] = set()

    def walk(shape, seen: frozenset) -> None:
        if shape is None or shape.name in seen:
            return
        seen = seen | {shape.name}
        if shape.type_name == "structure":
            for name, member in shape.members.items():
                found.add(name)
                walk(member, seen)
        elif shape.type_name == "list":
            walk(shape.member, seen)
        elif shape.type_name == "map":
            walk(shape.value, seen)
    walk(_model(service).operation_model(operation).output_shape, frozenset())
    return found


@pytest.mark.parametrize("module", sorted(READERS))
def test_every_response_field_a_reader_reads_is_listed(module):
    held = set().union(*(_response_members(s, op) for s, ops in READERS[module].items() for op in ops))
    listed = {f.member for f in FIELDS if module in f.read_in}
    unlisted = sorted(k for k in _keys_read(module) & held - listed if (module, k) not in NOT_FROM_A_RESPONSE)
    assert not unlisted, f"{module} reads {unlisted} of an AWS response: add each to aws_fields.FIELDS"


def test_each_module_named_as_reading_a_field_reads_it():
    # In a dict read, or named as a key a loop reads (("ErrorCode", "ErrorDetail") in dslab/cli/efs.py).
    unread = [(f.name, m) for f in FIELDS for m in f.read_in
              if f.member not in _keys_read(m) and f'"{f.member}"' not in (REPO / m).read_text()]
    assert not unread
    assert all(m in READERS for f in FIELDS for m in f.read_in)


def test_every_module_that_calls_these_operations_is_a_reader():
    """A new module that reads one of these responses cannot slip past the table: the product's calls of the operations
    (the stand-in, dslab/emulator and dslab/local, plays them) are all from READERS."""
    operations = {op for ops in READERS.values() for names in ops.values() for op in names}
    snake = {re.sub(r"(?<!^)(?=[A-Z])", "_", op).lower(): op for op in operations}
    callers = set()
    for path in (REPO / "dslab").rglob("*.py"):
        if path.relative_to(REPO / "dslab").parts[0] in ("emulator", "local"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if ((isinstance(node, ast.Attribute) and node.attr in snake)
                    or (isinstance(node, ast.Constant) and node.value in snake)):   # get_paginator("list_executions")
                callers.add(str(path.relative_to(REPO)))
    assert callers and callers <= set(READERS), sorted(callers - set(READERS))


# ---- the rules: the stand-in and the product held to the quotes ----------------------------------------------------

def _describe(count: int, billable: int, training: int, phases: dict[str, float], *, spot: bool = False,
              instance: str = "ml.p4d.24xlarge") -> dict:
    """DescribeTrainingJob of a completed job whose transitions last ``phases`` seconds each (one instance's)."""
    at = dt.datetime(2026, 12, 1, 9, 0, tzinfo=dt.timezone.utc)
    transitions, start = [], at + dt.timedelta(seconds=60)   # billed from the end of Starting
    for status, seconds in [("Starting", 60.0), *phases.items()]:
        end = at + dt.timedelta(seconds=seconds)
        transitions.append({"Status": status, "StartTime": at, "EndTime": end})
        at = end
    transitions.append({"Status": "Completed", "StartTime": at, "EndTime": at})
    return {"TrainingJobName": "j-1", "TrainingJobStatus": "Completed", "SecondaryStatus": "Completed",
            "ResourceConfig": {"InstanceType": instance, "InstanceCount": count, "VolumeSizeInGB": 0},
            "AlgorithmSpecification": {"TrainingInputMode": "FastFile"}, "EnableManagedSpotTraining": spot,
            "InputDataConfig": [{"ChannelName": "train", "InputMode": "FastFile", "DataSource": {"S3DataSource": {
                "S3DataType": "S3Prefix", "S3Uri": "s3://b/datasets/d/", "S3DataDistributionType": "ShardedByS3Key"}}}],
            "SecondaryStatusTransitions": transitions, "TrainingStartTime": start, "TrainingEndTime": at,
            "BillableTimeInSeconds": billable, "TrainingTimeInSeconds": training}


def _stand_in_four_hosts(tmp_path, clock) -> dict:
    """The stand-in's DescribeTrainingJob of a job on four hosts, 1.3 s between the clock's looks: training from look 2
    to look 5 (3.9 s) is 4 s (whole seconds, rounded up)."""
    clock["step"] = 1.3
    outcome = run_job(request(count=4), Recording(tmp_path), tmp_path / "work", code_dir=code(tmp_path, "true\n"))
    assert outcome.status == "Completed", outcome.describe.get("FailureReason")
    return outcome.describe


def _billable_per_instance(tmp_path, clock):
    # The stand-in: BillableTimeInSeconds is those 4 s, one instance's (not 4 x 4 = 16).
    d = _stand_in_four_hosts(tmp_path, clock)
    assert d["ResourceConfig"]["InstanceCount"] == 4 and d["BillableTimeInSeconds"] == 4
    # The product: 4 x ml.p4d.24xlarge for 3,740 s (AWS's billable, one instance's).
    # Before: priced once, 37.688 x 3,740 / 3,600 = $39.15. After: x 4 = 37.688 x 3,740 x 4 / 3,600 = $156.61.
    record = record_from_describe(_describe(4, 3740, 3740, {"Downloading": 200.0, "Training": 3500.0,
                                                            "Uploading": 40.0}), prices=PRICES)
    assert record["billable_seconds"] == 3740.0 and record["instance_count"] == 4
    assert record["cost_usd"]["instance"] == pytest.approx(156.614578, abs=1e-6)
    # AWS's own example: "if BillableTimeInSeconds is 100 and TrainingTimeInSeconds is 500, the savings is 80%".
    assert spot_saving({"billable_seconds": 100.0, "training_time_seconds": 500.0}) == pytest.approx(0.80)


def _billed_interval(tmp_path, clock):
    # "You are billed for the time interval between" TrainingStartTime and TrainingEndTime: the stand-in's billable
    # and training seconds are that interval, 3.9 s, in whole seconds rounded up: 4.
    d = _stand_in_four_hosts(tmp_path, clock)
    interval = dt.datetime.fromisoformat(d["TrainingEndTime"]) - dt.datetime.fromisoformat(d["TrainingStartTime"])
    assert interval.total_seconds() == pytest.approx(3.9)
    assert d["BillableTimeInSeconds"] == d["TrainingTimeInSeconds"] == math.ceil(interval.total_seconds()) == 4


def _training_time(tmp_path, clock):
    # One instance: downloading 40 s, training 100 s, uploading 5 s; TrainingTimeInSeconds 145 = 40 + 100 + 5, and the
    # breakdown's other is the rest of it: 145 - 40 - 100 = 5.
    record = record_from_describe(_describe(1, 145, 145, {"Downloading": 40.0, "Training": 100.0, "Uploading": 5.0},
                                            instance="ml.m5.xlarge"), prices=PRICES)
    assert record["breakdown"] == {"downloading": 40.0, "training": 100.0, "other": 5.0}
    assert record["training_time_seconds"] == 145.0 and spot_saving(record) == 0.0


def _transitions_wall(tmp_path, clock):
    # The spot job: downloading 300 s, training 3,300 s, uploading 60 s of wall time: TrainingTimeInSeconds
    # 3,660; 70% saved, so BillableTimeInSeconds 0.3 x 3,660 = 1,098. Before, the phases were squeezed to the billable
    # time: 1,098 / 3,600 = 0.305 of each, downloading 300 x 0.305 = 91.5 and training 3,300 x 0.305 = 1,006.5, other 0.
    # After: the wall seconds as the transitions give them, other 3,660 - 300 - 3,300 = 60.
    record = record_from_describe(_describe(1, 1098, 3660, {"Downloading": 300.0, "Training": 3300.0,
                                                            "Uploading": 60.0}, spot=True), prices=PRICES)
    assert record["breakdown"] == {"downloading": 300.0, "training": 3300.0, "other": 60.0}
    assert spot_saving(record) == pytest.approx(0.70)
    # Spot prices the discounted time: 37.688 x 1,098 / 3,600 = $11.494840.
    assert record["cost_usd"]["instance"] == pytest.approx(11.494840, abs=1e-6)
    # The same job as the old Collect wrote it (schema version 1) reads as above.
    old = {**record, "breakdown": {"downloading": 91.5, "training": 1006.5, "other": 0.0}}
    del old["schema_version"]
    read = read_results({"backend": "aws", "experiment": {}, "records": [old]})["records"][0]
    assert read["breakdown"] == {"downloading": 300.0, "training": 3300.0, "other": 60.0}
    # Two instances: each instance's phases, never doubled.
    two = record_from_describe(_describe(2, 145, 145, {"Downloading": 40.0, "Training": 100.0, "Uploading": 5.0}),
                               prices=PRICES)
    assert two["phases"]["Training"] == 100.0 and two["breakdown"] == record_from_describe(
        _describe(1, 145, 145, {"Downloading": 40.0, "Training": 100.0, "Uploading": 5.0}), prices=PRICES)["breakdown"]


def _status_message(tmp_path, clock):
    # The product never acts on a status message ("we recommend not including them in code that programmatically
    # initiates actions"): results.py alone reads it, to record it beside its transition, where a calibration finds
    # the image pull (core/measured.py). The stand-in writes the reference's own words for Starting and Training.
    readers = [p for p in (REPO / "dslab").rglob("*.py") if p.relative_to(REPO / "dslab").parts[0] not in
               ("emulator", "local")]
    reading = [p for p in readers if "StatusMessage" in _keys_read(str(p.relative_to(REPO)))]
    assert reading == [REPO / "dslab/core/results.py"]
    listed = _said(_model("sagemaker").shape_for("SecondaryStatusTransition").members["StatusMessage"].documentation)
    runner = (REPO / "dslab" / "local" / "runner.py").read_text()
    for status, message in (("Starting", "Preparing the instances for training"),
                            ("Training", "Training image download completed. Training in progress.")):
        assert f'enter("{status}", "{message}")' in runner and message in listed
    # Training's first 50 s pull the image, then 100 s train: the record keeps both, in order, with their words; the
    # breakdown is the transitions' as SageMaker names them (Training 50 + 100 = 150).
    d = _describe(1, 210, 210, {"Training": 50.0, "Uploading": 10.0})
    d["SecondaryStatusTransitions"][1]["StatusMessage"] = "Downloading the training image"
    extra = {"Status": "Training", "StatusMessage": "Training image download completed. Training in progress.",
             "StartTime": d["SecondaryStatusTransitions"][1]["EndTime"],
             "EndTime": d["SecondaryStatusTransitions"][1]["EndTime"] + dt.timedelta(seconds=100)}
    d["SecondaryStatusTransitions"].insert(2, extra)
    record = record_from_describe(d, prices=PRICES)
    assert [(t["status"], t["seconds"], t.get("message")) for t in record["transitions"][:3]] == [
        ("Starting", 60.0, None), ("Training", 50.0, "Downloading the training image"),
        ("Training", 100.0, "Training image download completed. Training in progress.")]
    assert record["phases"]["Training"] == 150.0 and "message" in listed.lower()


def _warm_pool(tmp_path, clock):
    # No request keeps a warm pool (ResourceConfig's KeepAlivePeriodInSeconds), so nothing is billed for one and the
    # retained billable time is never read; a pool's status and the job that reused it are recorded (results.py).
    from dslab.core.experiment import parse_experiment
    from dslab.core.requests import plan
    from .helpers import lab_environment
    experiment = parse_experiment({"name": "w", "datasets": [{"name": "d", "format": "jpg", "files": 10, "bytes": 1000}],
                                   "modes": ["File", "FSx"], "instance_count": 2})
    requests = [j.request for j in plan(experiment, lab_environment(), "e1") if j.request is not None]
    assert requests and not any("KeepAlivePeriodInSeconds" in r["ResourceConfig"] for r in requests)
    product = [p for p in (REPO / "dslab").rglob("*.py") if p.relative_to(REPO / "dslab").parts[0] not in
               ("emulator", "local")]
    assert not [p for p in product if "ResourceRetainedBillableTimeInSeconds" in _keys_read(str(p.relative_to(REPO)))]
    reading = [p for p in product if "WarmPoolStatus" in _keys_read(str(p.relative_to(REPO)))]
    assert reading == [REPO / "dslab/core/results.py"]
    d = {**_describe(1, 145, 145, {"Training": 140.0}),
         "WarmPoolStatus": {"Status": "Reused", "ReusedByJob": "j-2", "ResourceRetainedBillableTimeInSeconds": 300}}
    assert record_from_describe(d, prices=PRICES)["warm_pool"] == {"status": "Reused", "reused_by_job": "j-2"}
    assert "warm_pool" not in record_from_describe(_describe(1, 145, 145, {"Training": 140.0}), prices=PRICES)


RULES = {"billable-per-instance": _billable_per_instance, "training-time": _training_time,
         "billed-interval": _billed_interval, "transitions-wall": _transitions_wall,
         "status-message": _status_message, "warm-pool": _warm_pool}


def test_every_rule_the_table_names_is_checked_here():
    assert {f.rule for f in FIELDS if f.rule} == set(RULES)
    # The fields the issue names all rest on a rule.
    named = {"BillableTimeInSeconds", "TrainingTimeInSeconds", "SecondaryStatusTransitions", "StatusMessage",
             "TrainingStartTime", "TrainingEndTime", "WarmPoolStatus"}
    assert named <= {f.member for f in FIELDS if f.rule}


@pytest.mark.parametrize("rule", sorted(RULES))
def test_the_stand_in_and_the_product_keep_to_the_quote(rule, tmp_path, clock):
    RULES[rule](tmp_path, clock)


# ---- reading results written before: schema versions ----------------------------------------------------------------

def _old_aws_p4d() -> dict:
    """The 4 x ml.p4d.24xlarge job as the old Collect recorded it (version 1): AWS's own 3,740 s, priced once,
    37.688 x 3,740 / 3,600 = $39.153644, and the phases x 4 squeezed to the 3,740 s."""
    return {"job_name": "p4d-1", "mode": "FastFile", "dataset": "d", "repeat": 0, "status": "Completed",
            "instance_type": "ml.p4d.24xlarge", "instance_count": 4, "billable_seconds": 3740.0,
            "training_time_seconds": 3740.0, "phases": {"Starting": 60.0, "Downloading": 200.0, "Training": 3500.0,
                                                        "Uploading": 40.0},
            "breakdown": {"downloading": 200.0, "training": 3540.0, "other": 0.0}, "metrics": {},
            "cost_usd": {"instance": 39.153644, "storage": 0.0, "requests": 0.0, "total": 39.153644}}


def test_an_aws_runs_old_record_is_read_at_every_instances_price_once():
    old_summary = {"total": 1, "completed": 1, "cost_usd": 39.153644, "results_uri": "s3://b/results/x/results.json"}
    read = read_results({"backend": "aws", "experiment": {}, "records": [_old_aws_p4d()], "summary": old_summary})
    record = read["records"][0]
    # AWS's own billable seconds, as they were; the instance cost at the record's own price x 4: 39.153644 x 4.
    assert record["billable_seconds"] == 3740.0 and record["schema_version"] == 2
    assert record["cost_usd"]["instance"] == pytest.approx(156.614576, abs=1e-6)
    assert record["cost_usd"]["total"] == pytest.approx(156.614576, abs=1e-6)
    # Phases: one instance's wall seconds; other 3,740 - 200 - 3,500 = 40.
    assert record["breakdown"] == {"downloading": 200.0, "training": 3500.0, "other": 40.0}
    assert read["read_as"]["records_changed"] == ["p4d-1"] and read["read_as"]["how"] == VERSION_NOTES[1]
    # The file's summary spends what the records now say (156.614576), and keeps what it held beside.
    assert read["summary"]["cost_usd"] == pytest.approx(156.614576, abs=1e-6)
    assert read["summary"]["results_uri"] == "s3://b/results/x/results.json"
    # Read again, nothing more changes: never multiplied twice.
    assert read_results(read) is read


def test_the_report_of_an_old_file_says_what_it_read_differently(tmp_path):
    from dslab.report import write_report
    write_report({"experiment": {"name": "old"}, "backend": "aws", "records": [_old_aws_p4d()]}, tmp_path)
    text = (tmp_path / "report.md").read_text()
    assert ("> Read from results schema version 1 (aws run) as version 2: 1 record read differently (p4d-1). "
            + VERSION_NOTES[1]) in text
    assert "| d | FastFile | $156.6146 |" in text   # 39.153644 x 4, as the record was priced
    assert json.loads((tmp_path / "results.json").read_text())["schema_version"] == 2


def test_a_local_runs_old_record_is_divided_by_its_instances_and_keeps_its_cost():
    # The old runner wrote 4 s x 2 instances = 8 billable seconds and priced all 8 (m5.xlarge $0.23/h: $0.000511).
    old = {**_old_aws_p4d(), "instance_type": "ml.m5.xlarge", "instance_count": 2, "billable_seconds": 8.0,
           "training_time_seconds": 4.0, "phases": {"Training": 3.0, "Uploading": 1.0},
           "breakdown": {"downloading": 0.0, "training": 6.0, "other": 2.0},
           "cost_usd": {"instance": 0.000511, "total": 0.000511}}
    record = read_results({"backend": "local", "experiment": {}, "records": [old]})["records"][0]
    assert record["billable_seconds"] == 4.0   # 8 / 2
    assert record["cost_usd"] == {"instance": 0.000511, "total": 0.000511}   # every instance already priced
    assert record["breakdown"] == {"downloading": 0.0, "training": 3.0, "other": 1.0}


def test_one_instance_without_spot_reads_as_it_was_written():
    one = {**_old_aws_p4d(), "instance_count": 1,
           "breakdown": {"downloading": 200.0, "training": 3500.0, "other": 40.0}}
    for backend in ("aws", "local"):
        read = read_results({"backend": backend, "experiment": {}, "records": [one]})
        assert {k: v for k, v in read["records"][0].items() if k != "schema_version"} == one
        assert read["read_as"]["records_changed"] == []


def _mixed(tmp_path) -> Path:
    new = record_from_describe(_describe(1, 145, 145, {"Training": 140.0, "Uploading": 5.0}, instance="ml.m5.xlarge"),
                               prices=PRICES)
    old = {**_old_aws_p4d(), "job_name": "old-1"}
    path = tmp_path / "results.json"
    path.write_text(json.dumps({"experiment": {"name": "x"}, "backend": "aws", "records": [new, old]}, default=str))
    return path


@pytest.mark.parametrize("command", ["report", "calibrate"])
def test_a_results_file_that_mixes_versions_gets_one_line_and_nothing_is_written(tmp_path, capsys, command):
    path = _mixed(tmp_path)
    out = tmp_path / "out"
    args = ["--results", str(path), "--out", str(out / "calibration.json" if command == "calibrate" else out)]
    if command == "calibrate":
        out.mkdir()
    assert main([command, *args]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert "records[1] (old-1): schema_version: version 1, where records[0] is version 2" in err
    assert (not out.exists()) if command == "report" else list(out.iterdir()) == []


def test_mixed_versions_are_refused_before_anything_is_read():
    new = {"job_name": "n", "schema_version": 2}
    with pytest.raises(ConfigError, match=r"records\[0\] \(n\): schema_version: version 2 in a file of "
                                          r"schema_version 1"):
        read_results({"schema_version": 1, "backend": "aws", "records": [new]})
    with pytest.raises(ConfigError, match=r"schema_version: results of schema version 3; this dslab reads "
                                          r"versions 1, 2"):
        read_results({"schema_version": 3, "backend": "aws", "records": [{"schema_version": 3}]})


# ---- the measured-beside-estimated table and calibrate read one instance's seconds ----------------------------------

def test_a_four_instance_job_is_compared_with_its_estimate_per_instance():
    """An AWS run whose truth is the shipped model itself (no noise), on 4 instances: SageMaker reports each instance's
    seconds, the estimate counts every instance; compared per instance, the estimate is within the describe's whole
    seconds of what was measured (before the fix it read 1/4 of the estimate's)."""
    experiment = {"name": "four", "repeats": 1, "datasets": [{"name": "shards-a", "format": "tfrecord"}],
                  "modes": ["FastFile"], "instance_type": "ml.p4d.24xlarge", "instance_count": 4, "epochs": 1,
                  "compute": {"batch_size": 1000, "seconds_per_batch": 0.01}}
    from dslab.core.model.estimate import MODEL
    run = json.loads(json.dumps(synthetic_results(MODEL, experiment, {"shards-a": {"files": 200, "bytes": 10**11}},
                                                  noise=0.0), default=str))
    (job,) = measured.measured_jobs(run)
    record = run["records"][0]
    assert job.premise.instance_count == 4 and job.measured["billable"] == record["billable_seconds"]
    assert job.measured["training"] == record["phases"]["Training"]   # one instance's, as the transitions give it
    (check,) = measured.compare([job], PRICES)
    assert check.estimated == pytest.approx(check.estimate.billable_seconds / 4)
    assert abs(check.estimated - check.measured) <= 1.0 and abs(check.error) < 0.01, (check.estimated, check.measured)
    for phase in check.phases:
        assert phase.estimated == pytest.approx(job.measured[phase.phase], abs=1.0), phase
