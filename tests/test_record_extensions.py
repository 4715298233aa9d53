"""The fields the lab adds beside the shared results contract (dslab/contracts/record-extensions.schema.json): a record
must satisfy the contract and these, so a reader of results.json can rely on the checkpoint and script fields' types.
Every report validates what it loads, so every lab run in the suite checks its records against both."""

from __future__ import annotations

import copy
import json

import jsonschema
import pytest

from dslab.contracts import extensions_schema, record_schema, validate_record, validate_results
from dslab.core.results import checkpoint_fields, skipped_record


def _record(**extra):
    record = skipped_record("dslab-x-s3-r0", mode="File", dataset="llama-8b", repeat=0, instance_type="ml.m5.xlarge",
                            instance_count=1, reason="why")
    record.update(extra)
    return record


def test_the_extensions_are_a_valid_schema_and_the_contract_stays_as_shared():
    jsonschema.Draft202012Validator.check_schema(extensions_schema())
    # The contract itself is untouched: the extensions are a second schema, not an edit of the shared one.
    assert "checkpoint_target" not in record_schema()["properties"]


def test_a_checkpoint_record_as_the_lab_writes_it_validates():
    uri = "s3://bucket/checkpoints/exec/trial/s3-r0/"
    describe = {"CheckpointConfig": {"S3Uri": uri, "LocalPath": "/opt/ml/checkpoints"}}
    record = _record(trial="ckpt", **checkpoint_fields("s3", False, describe))
    record["metrics"]["checkpoint"] = {"save_seconds": [1.5, 1.25], "save_seconds_mean": 1.375, "stall_seconds": [0.5],
                                       "load_seconds_mean": None, "mode": "subset", "processes": 8, "fsync": True}
    validate_record(record)
    assert record["checkpoint_s3_uri"] == uri


@pytest.mark.parametrize("change, field", [
    (lambda r: r.update(checkpoint_target="nfs"), "checkpoint_target"),
    (lambda r: r.update(checkpoint_target="s3", checkpoint_restore="yes"), "checkpoint_restore"),
    (lambda r: r.update(checkpoint_restore=True), "checkpoint_target"),           # a restore of nothing
    (lambda r: r.update(checkpoint_target="fsx"), "mode"),                        # FSx's checkpoints, File's mode
    (lambda r: r.update(mode="FSx", checkpoint_target="fsx", checkpoint_s3_uri="s3://b/k/"), "checkpoint_s3_uri"),
    (lambda r: r.update(checkpoint_target="express"), "storage"),                 # Express without its bucket
    (lambda r: r.update(ingestion="script"), "mode"),                             # a script's reads are FastFile
    (lambda r: r.update(storage="glacier"), "storage"),
    (lambda r: r.update(checkpoint_target="express", storage="standard"), "storage"),
    (lambda r: r["metrics"].update(checkpoint={"save_seconds_mean": -1.0}), "save_seconds_mean"),
    (lambda r: r["metrics"].update(checkpoint={"mode": "all"}), "mode"),
    (lambda r: r["metrics"].update(bytes_read=1.5), "bytes_read"),
])
def test_a_lab_field_typed_wrongly_is_refused_naming_it(change, field):
    record = _record()
    validate_record(record)
    broken = copy.deepcopy(record)
    change(broken)
    with pytest.raises(jsonschema.ValidationError) as caught:
        validate_record(broken)
    error = caught.value
    named = " ".join(map(str, [*error.absolute_path, *error.absolute_schema_path, error.message]))
    assert field in named, named


def test_results_with_a_wrong_checkpoint_field_are_refused_before_a_report():
    good = _record(**checkpoint_fields("s3", True))
    bad = _record(checkpoint_target="tape")
    validate_results({"experiment": {}, "backend": "local", "records": [good]})
    with pytest.raises(jsonschema.ValidationError, match="tape"):
        validate_results({"experiment": {}, "backend": "local", "records": [good, bad]})


def test_dslab_report_refuses_such_results_naming_the_record_and_field_and_writes_nothing(tmp_path, capsys):
    from dslab.cli import main
    good = _record(**checkpoint_fields("s3", False))
    bad = _record()
    bad["metrics"]["checkpoint"] = {"stall_seconds_mean": -0.5}
    results = tmp_path / "results.json"
    results.write_text(json.dumps({"experiment": {"name": "x"}, "backend": "local", "records": [good, bad]}))
    assert main(["report", "--results", str(results), "--out", str(tmp_path / "report")]) == 2
    said = capsys.readouterr().err
    assert "records[1].metrics.checkpoint.stall_seconds_mean" in said and "-0.5" in said, said
    assert not (tmp_path / "report").exists()
