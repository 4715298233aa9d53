"""Deploy once per template: the stand-in as `cdk deploy` left it is saved (dslab/emulator/snapshot.py) and a later
run of the same templates starts from it, with nothing of the earlier run's data, jobs or results; what cannot be
used (corrupt, another version, other templates, a half-written file) is refused with its reason."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from dslab.emulator import snapshot
from dslab.emulator.lab import EmulatedLab
from dslab.emulator.snapshot import SnapshotUnusable, snapshot_key
from dslab.local.job_storage import free_port

from .scripted_jobs import ScriptedJobs
from .test_workflow import TINY, put_datasets


def deployed(lab: EmulatedLab) -> dict:
    """What a deployment is: each stack's status, outputs and resources (type and physical ID)."""
    cf = lab.client("cloudformation")
    out = {}
    for stack in cf.describe_stacks()["Stacks"]:
        resources = cf.describe_stack_resources(StackName=stack["StackName"])["StackResources"]
        out[stack["StackName"]] = {"status": stack["StackStatus"],
                                   "outputs": sorted((o["OutputKey"], o["OutputValue"]) for o in stack.get("Outputs", [])),
                                   "resources": sorted((r["LogicalResourceId"], r["ResourceType"], r["PhysicalResourceId"])
                                                       for r in resources)}
    return out


@pytest.fixture(scope="module")
def saved(bound_lab, tmp_path_factory):
    """The bound lab deployed once (in-process: the scripted jobs write with in-process clients), saved, then used:
    datasets uploaded and the workflow run after the save, which a restored stand-in must not see."""
    folder = tmp_path_factory.mktemp("deployed")
    path, key = folder / f"lab{snapshot.SUFFIX}", snapshot_key(bound_lab.outdir, with_fsx=True, region="us-east-1")
    with EmulatedLab(bound_lab.outdir, executor=ScriptedJobs(), efs_root=folder / "efs", time_scale=0.001) as lab:
        lab.save_deployment(path, key)
        as_deployed = deployed(lab)
        put_datasets(lab, ["tiny-jpg", "tiny-tfr"])
        first = lab.run({**TINY, "modes": ["File"]})
        assert first.status == "SUCCEEDED", first.cause
    return path, key, as_deployed


def test_a_restored_stand_in_is_the_deployment_and_runs_the_workflow(saved, bound_lab, tmp_path):
    path, key, as_deployed = saved
    with EmulatedLab(bound_lab.outdir, executor=ScriptedJobs(), efs_root=tmp_path / "efs", time_scale=0.001,
                     restore=path, restore_key=key) as lab:
        assert deployed(lab) == as_deployed
        s3 = lab.client("s3")
        # nothing of the first lab's run: no datasets, no results, no training job
        assert s3.list_objects_v2(Bucket=lab.bucket).get("KeyCount", 0) == 0
        assert lab.training_job_names() == []
        put_datasets(lab, ["tiny-jpg", "tiny-tfr"])
        execution = lab.run({**TINY, "modes": ["File", "FastFile", "FSx", "EFS"]})
        assert execution.status == "SUCCEEDED", execution.cause
        assert len(lab.results(execution)["records"]) == 8
        # a later deploy through the stand-in's CloudFormation still works on the restored stacks
        lab.deployer.deploy("DataSourceLab-Fsx")
        assert deployed(lab)["DataSourceLab-Fsx"]["status"] in ("CREATE_COMPLETE", "UPDATE_COMPLETE")


def test_a_restored_stand_in_runs_its_state_machine_without_parsing_the_definition_again(saved, bound_lab, tmp_path,
                                                                                           monkeypatch):
    """The parsed definition is saved with the deployment: a new process's first execution does not parse it (ANTLR
    in pure Python, ~0.3 s of CPU on the execution's critical path), and runs as a parsed one does."""
    from moto.stepfunctions.parser.asl.parse.asl_parser import AmazonStateLanguageParser

    from dslab.emulator.patches import stepfunctions
    path, key, _ = saved
    monkeypatch.setattr(stepfunctions, "_PARSED", stepfunctions._ParsedDefinitions())   # as in a new process
    parses = []
    original = AmazonStateLanguageParser.parse
    monkeypatch.setattr(AmazonStateLanguageParser, "parse",
                        staticmethod(lambda definition: parses.append(definition) or original(definition)))
    with EmulatedLab(bound_lab.outdir, executor=ScriptedJobs(), efs_root=tmp_path / "efs", time_scale=0.001,
                     restore=path, restore_key=key) as lab:
        assert len(stepfunctions._PARSED.programs) == 1
        put_datasets(lab, ["tiny-jpg"])
        execution = lab.run({**TINY, "datasets": TINY["datasets"][:1], "modes": ["File"]})
        assert execution.status == "SUCCEEDED", execution.cause
    assert parses == []


def test_a_program_that_does_not_pickle_is_left_out_and_one_that_does_not_load_is_parsed_again():
    from dslab.emulator.patches import stepfunctions
    cache = stepfunctions._ParsedDefinitions()
    cache.put("kept", {"a": 1})
    cache.put("unpicklable", lambda: None)
    original = stepfunctions._PARSED
    stepfunctions._PARSED = cache
    try:
        saved = stepfunctions.saved_programs(["kept", "unpicklable", "never parsed"])
        assert sorted(saved) == ["kept"]
        stepfunctions._PARSED = stepfunctions._ParsedDefinitions()
        assert stepfunctions.restore_programs({**saved, "spoiled": b"not a pickle"}) == 1
        assert stepfunctions._PARSED.get("kept") == {"a": 1} and stepfunctions._PARSED.get("spoiled") is None
    finally:
        stepfunctions._PARSED = original


def test_the_key_names_the_templates_the_stacks_and_the_versions(bound_lab, tmp_path):
    base = snapshot_key(bound_lab.outdir, with_fsx=True, region="us-east-1")
    assert snapshot_key(bound_lab.outdir, with_fsx=True, region="us-east-1") == base
    assert snapshot_key(bound_lab.outdir, with_fsx=False, region="us-east-1") != base
    copy = tmp_path / "cdk.out"
    shutil.copytree(bound_lab.outdir, copy)
    template = copy / "DataSourceLab-Core.template.json"
    document = json.loads(template.read_text())
    document["Description"] = "changed"
    template.write_text(json.dumps(document))
    assert snapshot_key(copy, with_fsx=True, region="us-east-1") != base


@pytest.mark.parametrize("spoil, reason", [
    (lambda raw: raw[:-10], "it is corrupt (its checksum does not match)"),
    (lambda raw: raw[:70] + bytes([raw[70] ^ 1]) + raw[71:], "it is corrupt (its checksum does not match)"),
    (lambda raw: b"", "it is corrupt (its checksum does not match)"),
])
def test_a_corrupt_file_is_refused(saved, tmp_path, spoil, reason):
    path, key, _ = saved
    spoiled = tmp_path / "spoiled.deployed"
    spoiled.write_bytes(spoil(path.read_bytes()))
    with pytest.raises(SnapshotUnusable) as refused:
        snapshot.load(spoiled, key)
    assert str(refused.value) == reason


def test_another_key_or_format_is_refused(saved, tmp_path):
    path, key, _ = saved
    with pytest.raises(SnapshotUnusable) as refused:
        snapshot.load(path, "another-key")
    assert str(refused.value) == "it was saved for other templates, settings or versions"
    import hashlib
    import pickle
    body = pickle.dumps({"format": 0, "key": key})
    old = tmp_path / "old.deployed"
    old.write_bytes(hashlib.sha256(body).hexdigest().encode() + b"\n" + body)
    with pytest.raises(SnapshotUnusable) as refused:
        snapshot.load(old, key)
    assert str(refused.value) == "it is of another format (0)"
    with pytest.raises(SnapshotUnusable) as refused:
        snapshot.load(tmp_path / "absent.deployed", key)
    assert str(refused.value) == "cannot read it (No such file or directory)"


def test_a_save_interrupted_leaves_nothing_to_trust(monkeypatch, tmp_path):
    """Ctrl-C while the file is written: no file at its name, no half-written one beside it."""
    target = tmp_path / "deployed" / "k.deployed"

    def interrupted(fd):
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "fsync", interrupted)
    with pytest.raises(KeyboardInterrupt):
        snapshot.save(target, "k", {"stacks": []})
    assert list(target.parent.iterdir()) == []


def test_a_new_save_removes_the_deployments_that_no_longer_match(tmp_path):
    old = tmp_path / f"old{snapshot.SUFFIX}"
    snapshot.save(old, "old", {})
    new = tmp_path / f"new{snapshot.SUFFIX}"
    snapshot.save(new, "new", {})
    assert sorted(p.name for p in tmp_path.iterdir()) == [new.name]
    assert snapshot.load(new, "new") == {}


def test_the_local_lab_discards_an_unusable_deployment_in_one_line_and_deploys_afresh(saved, bound_lab, tmp_path):
    from dslab.local.lab import deployed_before, deployed_path
    said: list[str] = []
    cache = tmp_path / "cache"
    path = deployed_path(cache, bound_lab.outdir, True)
    path.parent.mkdir(parents=True)
    path.write_bytes(b"not a deployment")
    settings = dict(executor=ScriptedJobs(), efs_root=tmp_path / "efs", server_port=free_port(), time_scale=0.001)
    assert deployed_before(bound_lab.outdir, tmp_path / "cdk", cache, True, settings, said.append) is None
    assert said == [f"stacks: the saved deployment {path.name} cannot be used (it is corrupt (its checksum does not "
                    "match)): deploying afresh"]
    assert not path.exists()
    # the saved deployment of these templates is used, saying so
    shutil.copy(saved[0], path)
    settings["server_port"] = free_port()
    restored = deployed_before(bound_lab.outdir, tmp_path / "cdk", cache, True, settings, said.append)
    try:
        assert restored is not None and said[-1] == ("stacks: as the last `cdk deploy` of these templates left them "
                                                     "(--redeploy deploys again)")
        assert restored.deployer is not None and restored.state_machine_arn
    finally:
        restored.__exit__(None, None, None)


def test_a_deployment_that_cannot_be_saved_costs_the_next_run_a_deploy_not_this_run(bound_lab, tmp_path):
    import pickle

    from dslab.local.lab import deployed_path, save_deployed
    said: list[str] = []
    saved: list[tuple] = []

    class Lab:
        def __init__(self, error=None):
            self.error = error

        def save_deployment(self, path, key):
            if self.error:
                raise self.error
            saved.append((path, key))

    save_deployed(Lab(pickle.PicklingError("a lock moto added")), tmp_path, bound_lab.outdir, True, said.append)
    assert said == ["stacks: the deployment could not be saved (PicklingError: a lock moto added): the next run "
                    "deploys again"]
    save_deployed(Lab(), tmp_path, bound_lab.outdir, True, said.append)
    assert saved == [(deployed_path(tmp_path, bound_lab.outdir, True),
                      snapshot_key(bound_lab.outdir, with_fsx=True, region="us-east-1"))] and len(said) == 1
