"""EFS that follows S3 and can be emptied: the lifecycle policy, DataSync's REMOVE within an execution's include
filters, `dslab efs empty`, and what `dslab doctor` says EFS holds. Written from the AWS documentation quoted in
stacks/components/efs_staging.py, stacks/components/efs.py and dslab/core/model/efs.py; the stand-in's EFS is a
folder (efs_root), so every check below moves and measures real bytes."""

from __future__ import annotations

import json
import os

import boto3
import pytest
from moto import mock_aws

from dslab.aws import efs as efs_aws
from dslab.cli import main
from dslab.core.model import efs as efs_core
from dslab.core.experiment.model import DEFAULT_DATASETS
from dslab.core.facts.prices import PriceTable
from dslab.core.requests import CORE_STACK, WORKFLOW_STACK
from dslab.emulator import patches
from dslab.emulator.lab import REMOVE_WHOLE_LOCATION, REMOVE_WITHIN_FILTERS

from .conftest import REPO
from .scripted_jobs import ScriptedJobs

KIB = 1024


def _resources(template: dict, kind: str) -> dict[str, dict]:
    return {k: r for k, r in template["Resources"].items() if r["Type"] == kind}


# ---- what EFS costs ------------------------------------------------------------------------------------

def test_the_costs_page_prices_the_default_experiments_datasets_in_efs():
    """Staged, every byte is Standard; a week later the shards (110 MB each) are in IA, and the JPEGs (35 KB each,
    under the 128 KiB floor of lifecycle management) are still in Standard."""
    prices = PriceTable()
    staged = settled = metered = 0.0
    for dataset in (d for d in DEFAULT_DATASETS if d["name"].startswith("caltech-")):
        estimate = efs_core.dataset_estimate(dataset["files"], dataset["bytes"])
        metered += estimate["metered_bytes"]
        staged += estimate["metered_bytes"] / 1e9 * prices["efs_standard_gb_month"]
        settled += (estimate["standard_bytes"] / 1e9 * prices["efs_standard_gb_month"]
                    + estimate["ia_bytes"] / 1e9 * prices["efs_ia_gb_month"])
        assert (estimate["ia_bytes"] > 0) == dataset["name"].startswith("caltech-tfr")
    readme = (REPO / "docs" / "costs.md").read_text()   # the costs page
    assert f"meter ≈ {metered / 1e9:.1f} GB: **${staged:.2f} / month**" in readme
    assert f"settles at **${settled:.2f} / month**" in readme


def test_metering_rounds_each_file_to_4_kib_blocks_with_2_kib_of_metadata():
    assert efs_core.metered_file_bytes(1) == efs_core.metered_file_bytes(4 * KIB) == 6 * KIB
    assert efs_core.metered_file_bytes(4 * KIB + 1) == 10 * KIB
    assert efs_core.monthly_usd({"Value": 3e9, "ValueInIA": 1e9, "ValueInStandard": 2e9}, PriceTable())["usd_per_month"] == \
        pytest.approx(2 * 0.30 + 1 * 0.016)


# ---- the templates -----------------------------------------------------------------------------------

def test_efs_moves_unread_files_to_infrequent_access_and_back_on_first_read(bound_lab):
    (efs,) = _resources(bound_lab.raw(CORE_STACK), "AWS::EFS::FileSystem").values()
    # One transition per LifecyclePolicy object, as EFS requires (API_LifecyclePolicy).
    assert efs["Properties"]["LifecyclePolicies"] == [{"TransitionToIA": "AFTER_7_DAYS"},
                                                      {"TransitionToPrimaryStorageClass": "AFTER_1_ACCESS"}]


def test_staging_removes_what_s3_no_longer_has_and_a_second_task_empties_efs(bound_lab):
    template = bound_lab.raw(WORKFLOW_STACK)
    tasks = {r["Properties"]["Name"]: r["Properties"] for r in _resources(template, "AWS::DataSync::Task").values()}
    staging, emptying = tasks["datasourcelab-datasets-to-efs"], tasks["datasourcelab-empty-efs"]
    for task in (staging, emptying):
        # REMOVE is only valid with TransferMode CHANGED (ALL does not scan the destination).
        assert task["Options"]["PreserveDeletedFiles"] == "REMOVE" and task["Options"]["TransferMode"] == "CHANGED"
    assert emptying["DestinationLocationArn"] == staging["DestinationLocationArn"]   # the same EFS folder
    locations = _resources(template, "AWS::DataSync::LocationS3")
    source = locations[emptying["SourceLocationArn"]["Fn::GetAtt"][0]]["Properties"]
    assert source["Subdirectory"] == f"/datasets/{efs_core.EMPTY_SOURCE_FOLDER}/"
    outputs = template["Outputs"]
    assert outputs["EfsEmptyTaskArn"]["Value"] == {"Fn::GetAtt": [next(k for k, r in _resources(template, "AWS::DataSync::Task").items()
                                                                       if r["Properties"]["Name"] == "datasourcelab-empty-efs"), "TaskArn"]}


# ---- the stand-in ------------------------------------------------------------------------------------

def _upload(lab, name: str, sizes: list[int]) -> dict[str, bytes]:
    """A dataset of distinct random files, and its stats file as `dslab dataset upload` writes it."""
    s3, files = lab.client("s3"), {}
    for i, size in enumerate(sizes):
        files[f"part-{i}.bin"] = os.urandom(size)
        s3.put_object(Bucket=lab.bucket, Key=f"datasets/{name}/part-{i}.bin", Body=files[f"part-{i}.bin"])
    s3.put_object(Bucket=lab.bucket, Key=f"datasets/{name}.stats.json",
                  Body=json.dumps({"files": len(sizes), "bytes": sum(sizes)}).encode())
    return files


def _sync(lab, includes: str, **overrides) -> str:
    """The workflow's StartEfsSync (one include pattern per dataset, as Plan writes them), followed to its end."""
    datasync = lab.client("datasync")
    arn = datasync.start_task_execution(TaskArn=lab.sync_task_arn, **overrides,
                                        Includes=[{"FilterType": "SIMPLE_PATTERN", "Value": includes}])["TaskExecutionArn"]
    while (status := datasync.describe_task_execution(TaskExecutionArn=arn)["Status"]) not in ("SUCCESS", "ERROR"):
        pass
    assert status == "SUCCESS", patches.HOOKS.errors
    return status


def _in_efs(lab, name: str) -> dict[str, bytes]:
    folder = lab.efs_root / "datasets" / name
    return {p.name: p.read_bytes() for p in folder.iterdir()} if folder.is_dir() else {}


def test_a_sync_removes_what_s3_deleted_within_its_own_dataset_only(emulated):
    """The stand-in's default reading of REMOVE with include filters (REMOVE_WITHIN_FILTERS: an inference, no
    document says it); the other reading is emulated below."""
    with emulated(ScriptedJobs()) as lab:
        jpg, tfr = _upload(lab, "tiny-jpg", [300, 301, 302]), _upload(lab, "tiny-tfr", [5000, 5001])
        _sync(lab, "/tiny-jpg|/tiny-tfr")
        assert _in_efs(lab, "tiny-jpg") == jpg and _in_efs(lab, "tiny-tfr") == tfr
        assert not (lab.efs_root / "datasets" / "tiny-jpg.stats.json").exists()   # only the included folders

        lab.client("s3").delete_object(Bucket=lab.bucket, Key="datasets/tiny-jpg/part-1.bin")
        _sync(lab, "/tiny-jpg")
        # "REMOVE: Delete destination files that aren't present in the source": gone from EFS too ...
        assert _in_efs(lab, "tiny-jpg") == {k: v for k, v in jpg.items() if k != "part-1.bin"}
        # ... and "DataSync scans ... only files and folders that match the include filters": the other stays.
        assert _in_efs(lab, "tiny-tfr") == tfr


READINGS = [REMOVE_WITHIN_FILTERS, REMOVE_WHOLE_LOCATION]


def _in_s3(lab, name: str) -> dict[str, bytes]:
    s3 = lab.client("s3")
    listed = s3.list_objects_v2(Bucket=lab.bucket, Prefix=f"datasets/{name}/").get("Contents", [])
    return {o["Key"].rsplit("/", 1)[-1]: s3.get_object(Bucket=lab.bucket, Key=o["Key"])["Body"].read() for o in listed}


@pytest.mark.parametrize("reading", READINGS)
def test_under_either_reading_of_remove_a_sync_leaves_its_datasets_as_s3_holds_them(emulated, reading):
    """Whether REMOVE deletes only within the include filters is not documented: under the other reading one
    dataset's sync empties another's folder. Either way the datasets a sync names end as S3 holds them."""
    with emulated(ScriptedJobs(), datasync_remove=reading) as lab:
        a, b = _upload(lab, "tiny-a", [300, 301, 302]), _upload(lab, "tiny-b", [5000, 5001])
        _sync(lab, "/tiny-a")
        assert _in_efs(lab, "tiny-a") == a
        _sync(lab, "/tiny-b")
        assert _in_efs(lab, "tiny-b") == b
        assert _in_efs(lab, "tiny-a") == (a if reading == REMOVE_WITHIN_FILTERS else {})
        lab.client("s3").delete_object(Bucket=lab.bucket, Key="datasets/tiny-a/part-1.bin")
        _sync(lab, "/tiny-a")   # copied again where the other reading deleted it; its deleted file gone either way
        assert _in_efs(lab, "tiny-a") == _in_s3(lab, "tiny-a") == {k: v for k, v in a.items() if k != "part-1.bin"}
        assert _in_efs(lab, "tiny-b") == (b if reading == REMOVE_WITHIN_FILTERS else {})


class EfsReads:
    """Training jobs that check, as each EFS job starts, that its dataset's folder in EFS holds exactly what S3
    holds under the dataset's prefix (what the job would read), and again as it ends; ``during`` runs inside the
    first job (while it reads), e.g. another execution."""

    def __init__(self):
        self.lab = None
        self.jobs = ScriptedJobs()
        self.reads: list[tuple[str, str, bool]] = []   # (job, dataset, EFS == S3)
        self.during = None

    def _check(self, request: dict, when: str) -> None:
        path = request["InputDataConfig"][0]["DataSource"]["FileSystemDataSource"]["DirectoryPath"]
        folder = self.lab.efs_root / path.strip("/")
        name = path.rstrip("/").rsplit("/", 1)[-1]
        held = {p.name: p.read_bytes() for p in folder.iterdir()} if folder.is_dir() else {}
        self.reads.append((f"{request['TrainingJobName']} {when}", name, held == _in_s3(self.lab, name)))

    def __call__(self, request: dict, update) -> dict:
        self._check(request, "start")
        during, self.during = self.during, None
        if during:
            during()
        self._check(request, "end")
        return self.jobs(request, update)


def _efs_experiment(name: str, dataset: str) -> dict:
    return {"name": name, "datasets": [{"name": dataset, "format": "jpg"}], "instance_type": "ml.m5.xlarge",
            "compute": "v100", "modes": ["EFS"], "max_concurrency": 1}


@pytest.mark.parametrize("reading", READINGS)
def test_every_efs_job_reads_what_s3_holds_under_either_reading_of_remove(emulated, reading):
    """Each execution syncs the datasets its EFS jobs read before any of them starts, and names in its sync the
    datasets other running executions' EFS jobs read (Plan: efs_datasets_in_use). So under the reading where REMOVE
    deletes everything outside the filtered source, the cost is a copy again, never a job reading a folder another
    execution's sync emptied: run 1 reads A while run 2 syncs B; run 3 syncs B alone (A goes, under that reading);
    run 4 reads A again after a file of A was deleted from S3."""
    reads = EfsReads()
    with emulated(reads, datasync_remove=reading) as lab:
        reads.lab = lab
        a, b = _upload(lab, "tiny-a", [300, 301, 302]), _upload(lab, "tiny-b", [5000, 5001, 5002])
        second = []
        reads.during = lambda: second.append(lab.run(_efs_experiment("second", "tiny-b")))
        first = lab.run(_efs_experiment("first", "tiny-a"))
        assert first.status == "SUCCEEDED" and second[0].status == "SUCCEEDED", (first.cause, second[0].cause)
        assert [r for r in reads.reads if not r[2]] == []   # the first's job read all of A before and after
        # The second's sync named the first's dataset, which its EFS job was reading.
        assert lab.read_json(f"results/{second[0].name}/plan.json")["efs_in_use"] == {first.name: ["tiny-a"]}
        assert _in_efs(lab, "tiny-a") == a and _in_efs(lab, "tiny-b") == b

        third = lab.run(_efs_experiment("third", "tiny-b"))   # nothing else runs: its sync names B only
        assert third.status == "SUCCEEDED", third.cause
        assert "efs_in_use" not in lab.read_json(f"results/{third.name}/plan.json")
        assert _in_efs(lab, "tiny-a") == (a if reading == REMOVE_WITHIN_FILTERS else {})   # the cost: a copy again

        lab.client("s3").delete_object(Bucket=lab.bucket, Key="datasets/tiny-a/part-0.bin")
        fourth = lab.run(_efs_experiment("fourth", "tiny-a"))
        assert fourth.status == "SUCCEEDED", fourth.cause
        assert _in_efs(lab, "tiny-a") == {k: v for k, v in a.items() if k != "part-0.bin"}
    assert [(job.split()[1], dataset) for job, dataset, _ in reads.reads] == [
        ("start", "tiny-a"), ("start", "tiny-b"), ("end", "tiny-b"), ("end", "tiny-a"), ("start", "tiny-b"),
        ("end", "tiny-b"), ("start", "tiny-a"), ("end", "tiny-a")]
    assert [r for r in reads.reads if not r[2]] == []


def test_the_stand_in_records_the_lifecycle_and_refuses_remove_with_transfer_all(emulated):
    with emulated(ScriptedJobs()) as lab:
        efs = lab.client("efs")
        assert efs.describe_lifecycle_configuration(FileSystemId=lab.efs_id)["LifecyclePolicies"] == [
            {"TransitionToIA": "AFTER_7_DAYS"}, {"TransitionToPrimaryStorageClass": "AFTER_1_ACCESS"}]
        _upload(lab, "tiny-jpg", [10])
        with pytest.raises(lab.client("datasync").exceptions.InvalidRequestException, match="TransferMode ALL"):
            _sync(lab, "/tiny-jpg", OverrideOptions={"TransferMode": "ALL"})
        assert _in_efs(lab, "tiny-jpg") == {}


def test_dslab_efs_empty_deletes_one_dataset_then_all_and_doctor_reports_what_efs_holds(emulated, tmp_path, capsys):
    with emulated(ScriptedJobs()) as lab:
        outputs = tmp_path / "cdk-outputs.json"
        outputs.write_text(json.dumps(lab.outputs))
        jpg, tfr = _upload(lab, "tiny-jpg", [300, 301, 302]), _upload(lab, "tiny-tfr", [5000, 5001, 5002])
        _sync(lab, "/tiny-jpg|/tiny-tfr")

        # EFS meters each file and directory for "2 KiB of metadata" and its data in "increments of 4 KiB": the
        # 300-byte files take one block, the 5,000-byte ones two; four directories (the root, datasets/,
        # tiny-jpg/, tiny-tfr/) one each.
        expected = 3 * (2 * KIB + 4 * KIB) + 3 * (2 * KIB + 8 * KIB) + 4 * (2 * KIB + 4 * KIB)
        assert main(["doctor", "--outputs", str(outputs), "--instance-type", "ml.m5.xlarge", "--json"]) in (0, 1)
        stored = json.loads(capsys.readouterr().out)["efs"]
        assert stored["deployed"] and stored["file_system_id"] == lab.efs_id
        assert stored["size_in_bytes"]["Value"] == expected and stored["size_in_bytes"]["ValueInIA"] == 0
        assert stored["lifecycle_policies"][0] == {"TransitionToIA": "AFTER_7_DAYS"}
        assert main(["doctor", "--outputs", str(outputs), "--instance-type", "ml.m5.xlarge"]) in (0, 1)
        text = capsys.readouterr().out
        assert f"EFS {lab.efs_id} holds 0.00 GB" in text and "after 7 days unread" in text and "dslab efs empty" in text

        assert main(["efs", "empty", "--dataset", "tiny-jpg", "--yes", "--outputs", str(outputs), "--poll", "0.01"]) == 0
        said = capsys.readouterr().out
        assert "tiny-jpg: 3 files" in said and "SUCCESS" in said and "deleted tiny-jpg" in said
        assert efs_aws.UNSCOPED_CAVEAT in said   # what --dataset deletes under the other reading, said before it runs
        assert not (lab.efs_root / "datasets" / "tiny-jpg").exists()
        assert _in_efs(lab, "tiny-tfr") == tfr                      # the other dataset, byte for byte
        assert lab.client("s3").list_objects_v2(Bucket=lab.bucket, Prefix="datasets/tiny-jpg/")["KeyCount"] == 3
        after = lab.client("efs").describe_file_systems(FileSystemId=lab.efs_id)["FileSystems"][0]["SizeInBytes"]
        assert after["Value"] == expected - 4 * (2 * KIB + 4 * KIB)   # three files and their folder

        assert main(["efs", "empty", "--yes", "--outputs", str(outputs), "--poll", "0.01"]) == 0
        assert "deleted everything under EFS datasets/" in capsys.readouterr().out
        assert [p for p in lab.efs_root.rglob("*") if p.is_file()] == []
        # The staging brings a dataset back, only what the next EFS job needs.
        _sync(lab, "/tiny-tfr")
        assert _in_efs(lab, "tiny-tfr") == tfr and _in_efs(lab, "tiny-jpg") == {}


def test_efs_empty_waits_while_datasync_writes_into_efs(emulated, tmp_path, capsys):
    with emulated(ScriptedJobs()) as lab:
        outputs = tmp_path / "cdk-outputs.json"
        outputs.write_text(json.dumps(lab.outputs))
        _upload(lab, "tiny-jpg", [300])
        patches.HOOKS.datasync_seconds = 1e6   # the workflow's staging is still transferring
        lab.client("datasync").start_task_execution(TaskArn=lab.sync_task_arn,
                                                    Includes=[{"FilterType": "SIMPLE_PATTERN", "Value": "/tiny-jpg"}])
        assert main(["efs", "empty", "--yes", "--outputs", str(outputs), "--poll", "0.01"]) == 1
        assert "DataSync is writing into EFS now" in capsys.readouterr().err


@pytest.mark.parametrize("reading", READINGS)
def test_efs_empty_waits_while_a_running_executions_efs_jobs_may_read_efs(emulated, tmp_path, capsys, reading):
    """Emptying one dataset might empty them all (REMOVE's scope is not documented), so `dslab efs empty` waits for
    every running execution with EFS jobs, not only those reading the dataset named; under either reading the job
    reading EFS keeps its files, and once it has ended the dataset is emptied."""
    import threading
    release, reading_now = threading.Event(), threading.Event()
    reads = EfsReads()

    def hold():
        reading_now.set()
        assert release.wait(60)

    with emulated(reads, datasync_remove=reading) as lab:
        reads.lab, reads.during = lab, hold
        outputs = tmp_path / "cdk-outputs.json"
        outputs.write_text(json.dumps(lab.outputs))
        a, b = _upload(lab, "tiny-a", [300, 301]), _upload(lab, "tiny-b", [5000])
        _sync(lab, "/tiny-b")
        arn = lab.start(_efs_experiment("reader", "tiny-a"))
        assert reading_now.wait(60)
        capsys.readouterr()
        for argv in (["--dataset", "tiny-b"], ["--dataset", "tiny-a"], []):
            assert main(["efs", "empty", *argv, "--yes", "--outputs", str(outputs), "--poll", "0.01"]) == 1, argv
            err = capsys.readouterr().err
            name = arn.rsplit(":", 1)[-1]
            assert "a running execution may read EFS now" in err and f"execution {name}'s EFS jobs read tiny-a" in err
            assert ("if REMOVE is not limited to the include filter" in err) == (argv == ["--dataset", "tiny-b"])
        release.set()
        assert lab.wait(arn).status == "SUCCEEDED"
        assert [r for r in reads.reads if not r[2]] == [] and _in_efs(lab, "tiny-a") == a
        assert _in_efs(lab, "tiny-b") == (b if reading == REMOVE_WITHIN_FILTERS else {})   # the reader's own sync
        assert main(["efs", "empty", "--dataset", "tiny-b", "--yes", "--outputs", str(outputs), "--poll", "0.01"]) == 0
        assert _in_efs(lab, "tiny-b") == {} and _in_efs(lab, "tiny-a") == (a if reading == REMOVE_WITHIN_FILTERS else {})


def test_efs_empty_prints_what_datasync_deleted_beside_the_datasets_own_count():
    """DescribeTaskExecution FilesDeleted: "The number of files, objects, and directories that DataSync actually
    deletes in your destination location" (the stand-in does not count it): on AWS it tells the readings apart."""
    line = efs_aws.deleted_line({"Status": "SUCCESS", "FilesDeleted": 30710}, "caltech-jpg-1x", {"files": 30607, "bytes": 1})
    assert line.startswith("DataSync deleted 30,710 files and folders; caltech-jpg-1x has 30,607 files")
    assert "outside the include filter" in line
    assert efs_aws.deleted_line({"Status": "SUCCESS", "FilesDeleted": 12}, None, None) == "DataSync deleted 12 files and folders"
    assert efs_aws.deleted_line({"Status": "SUCCESS"}, "d", {"files": 3, "bytes": 1}) is None


@pytest.mark.parametrize("argv, words", [
    (["--dataset", "../x"], ["--dataset", "not a dataset name"]),
    (["--dataset", "a|b"], ["--dataset"]),
    (["--dataset", ".dslab-empty"], ["--dataset"]),
    (["--poll", "0"], ["--poll"]),
])
def test_efs_empty_bad_input_is_one_line_and_exit_2(argv, words, capsys):
    assert main(["efs", "empty", "--yes", *argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and all(w in err for w in words)


def test_a_script_must_pass_yes_and_a_lab_deployed_before_emptying_is_told_to_deploy_again(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr("sys.stdin.isatty", lambda: False)
    assert main(["efs", "empty", "--dataset", "tiny-jpg"]) == 2   # before any AWS call
    assert "--yes" in capsys.readouterr().err
    old = tmp_path / "old.json"
    old.write_text(json.dumps({CORE_STACK: {"EfsFileSystemId": "fs-0123456789abcdef0"}}))
    assert main(["efs", "empty", "--yes", "--outputs", str(old)]) == 2
    err = capsys.readouterr().err
    assert "EfsEmptyTaskArn is missing" in err and "make deploy FSX=keep" in err


def test_doctor_without_a_deployed_lab_says_nothing_is_stored(capsys):
    with mock_aws():
        zone = boto3.client("ec2", region_name="us-east-1").describe_availability_zones()["AvailabilityZones"][0]["ZoneId"]
        main(["doctor", "--az-id", zone, "--instance-type", "ml.m5.xlarge"])
    assert "EFS: no lab deployed in this account and region" in capsys.readouterr().out
