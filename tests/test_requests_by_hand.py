"""CreateTrainingJob requests written out by hand (issue 58): each field of one job per source, as the SageMaker API
reference defines it, held against what the one request builder (dslab/core/requests.py) sends. No expectation here
comes from the builder: the literals are the API's words and the lab's own conventions (docs/workflow.md)."""

from __future__ import annotations

import math
import re

import pytest

from dslab.core.errors import ConfigError
from dslab.core.requests import (
    CORE_PARAMETERS, FileSystemRef, LabEnvironment, build_request, core_parameter, is_express_bucket, plan,
    stats_key,
)

from .helpers import BUCKET, EFS_ID, FSX_ID, lab_environment, tiny_experiment

GPU_IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.6.0-gpu-py312"
CPU_IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.6.0-cpu-py312"
EXPRESS_BUCKET = "dslab--use1-az4--x-s3"
# The lab's metric lines (training/train.py prints "dslab_metric NAME=VALUE"), one regex each, a float's characters.
METRICS = ("samples_per_second", "mb_per_second", "au_percent", "end_to_end_efficiency_percent",
           "time_to_first_batch_seconds", "epoch_seconds", "data_stall_seconds", "samples")


def _jobs(**overrides) -> dict[tuple[str, str], dict]:
    return {(j.spec.dataset.name, j.spec.mode): j.request
            for j in plan(tiny_experiment(**overrides), lab_environment(), "exec-1") if j.request is not None}


def _tags(request: dict) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in request["Tags"]}


def test_a_file_job_on_a_cpu_instance_field_by_field():
    request = _jobs(modes=["File"])[("tiny-jpg", "File")]
    assert request["RoleArn"] == "arn:aws:iam::123456789012:role/DataSourceLabTraining"
    # An m5 has no accelerator: the CPU image (LabEnvironment.image_uri_cpu).
    assert request["AlgorithmSpecification"]["TrainingImage"] == CPU_IMAGE
    assert request["AlgorithmSpecification"]["TrainingInputMode"] == "File"
    assert request["AlgorithmSpecification"]["MetricDefinitions"] == [
        {"Name": name, "Regex": f"dslab_metric {name}=([0-9.eE+-]+)"} for name in METRICS]
    # Hyperparameters are strings (HyperParameters: map of string to string); the framework container JSON-decodes
    # each, so a string is sent with its quotes and a number bare.
    assert request["HyperParameters"] == {
        "sagemaker_program": '"train.py"',
        "sagemaker_submit_directory": f'"s3://{BUCKET}/code/test/sourcedir.tar.gz"',
        "sagemaker_region": '"us-east-1"', "sagemaker_container_log_level": "20",
        "dataset_format": '"jpg"', "epochs": "1", "seed": "0", "batch_size": "16",
        "compute_seconds_per_batch": "0.001", "accelerators": "1"}
    # One channel, "train", every object under the dataset's prefix (ending in "/"), on the one instance whole.
    assert request["InputDataConfig"] == [{"ChannelName": "train", "InputMode": "File", "DataSource": {
        "S3DataSource": {"S3DataType": "S3Prefix", "S3Uri": f"s3://{BUCKET}/datasets/tiny-jpg/",
                         "S3DataDistributionType": "FullyReplicated"}}}]
    assert request["OutputDataConfig"] == {"S3OutputPath": f"s3://{BUCKET}/output/tiny/"}
    assert request["ResourceConfig"] == {"InstanceType": "ml.m5.xlarge", "InstanceCount": 1, "VolumeSizeInGB": 10}
    assert request["VpcConfig"] == {"SecurityGroupIds": ["sg-0123456789abcdef0"], "Subnets": ["subnet-0123456789abcdef0"]}
    # The experiment's max_run_seconds (600) where no answer sized the job.
    assert request["StoppingCondition"] == {"MaxRuntimeInSeconds": 600}
    assert request["EnableManagedSpotTraining"] is False
    tags = _tags(request)
    assert {k: v for k, v in tags.items() if k != "dslab:experiment-hash"} == {
        "dslab:experiment": "tiny", "dslab:execution": "exec-1", "dslab:dataset": "tiny-jpg", "dslab:format": "jpg",
        "dslab:mode": "File", "dslab:storage": "standard", "dslab:repeat": "0", "dslab:trial": "base",
        "dslab:code-version": "test"}
    assert re.fullmatch(r"[0-9a-f]{16}", tags["dslab:experiment-hash"])


def test_each_source_gets_its_own_channel():
    jobs = _jobs(modes=["FastFile", "Pipe", "FSx", "EFS", "Script"])
    s3 = {"S3DataType": "S3Prefix", "S3Uri": f"s3://{BUCKET}/datasets/tiny-tfr/", "S3DataDistributionType": "FullyReplicated"}
    assert jobs[("tiny-tfr", "FastFile")]["InputDataConfig"] == [
        {"ChannelName": "train", "InputMode": "FastFile", "DataSource": {"S3DataSource": s3}}]
    # Pipe streams the objects as they are: no RecordIO wrapping of TFRecord shards.
    assert jobs[("tiny-tfr", "Pipe")]["InputDataConfig"] == [
        {"ChannelName": "train", "InputMode": "Pipe", "DataSource": {"S3DataSource": s3}, "RecordWrapperType": "None"}]
    # FSx for Lustre: DirectoryPath starts with the file system's mount name; the data repository is linked at
    # /datasets. Both file systems are read-only to the job and read in File mode.
    assert jobs[("tiny-tfr", "FSx")]["InputDataConfig"] == [{"ChannelName": "train", "InputMode": "File", "DataSource": {
        "FileSystemDataSource": {"FileSystemId": FSX_ID, "FileSystemType": "FSxLustre",
                                 "DirectoryPath": "/abcdefgh/datasets/tiny-tfr", "FileSystemAccessMode": "ro"}}}]
    assert jobs[("tiny-tfr", "EFS")]["InputDataConfig"] == [{"ChannelName": "train", "InputMode": "File", "DataSource": {
        "FileSystemDataSource": {"FileSystemId": EFS_ID, "FileSystemType": "EFS",
                                 "DirectoryPath": "/datasets/tiny-tfr", "FileSystemAccessMode": "ro"}}}]
    for mode in ("FSx", "EFS"):
        assert jobs[("tiny-tfr", mode)]["AlgorithmSpecification"]["TrainingInputMode"] == "File"
    # Script: no channel; the script reads S3 itself from --dataset_uri, which a tag records (no lineage otherwise).
    script = jobs[("tiny-tfr", "Script")]
    assert "InputDataConfig" not in script
    assert script["AlgorithmSpecification"]["TrainingInputMode"] == "File"
    assert script["HyperParameters"]["dataset_uri"] == f'"s3://{BUCKET}/datasets/tiny-tfr/"'
    assert _tags(script)["dslab:dataset-uri"] == f"s3://{BUCKET}/datasets/tiny-tfr/"
    assert "dslab:dataset-uri" not in _tags(jobs[("tiny-tfr", "FastFile")])


def test_several_instances_share_each_epoch_by_key_and_are_named_apart():
    jobs = _jobs(modes=["File", "FastFile"], instance_count=2)
    for mode in ("File", "FastFile"):
        request = jobs[("tiny-jpg", mode)]
        assert request["ResourceConfig"]["InstanceCount"] == 2
        # "each instance gets approximately 1/n of the number of S3 objects" (ShardedByS3Key).
        assert request["InputDataConfig"][0]["DataSource"]["S3DataSource"]["S3DataDistributionType"] == "ShardedByS3Key"
    assert _jobs(modes=["File"], instance_count=2, distribution="FullyReplicated")[("tiny-jpg", "File")][
        "InputDataConfig"][0]["DataSource"]["S3DataSource"]["S3DataDistributionType"] == "FullyReplicated"


def test_spot_waits_twice_the_runtime_and_says_so():
    request = _jobs(modes=["File"], spot=True, max_run_seconds=900)[("tiny-jpg", "File")]
    assert request["EnableManagedSpotTraining"] is True
    # MaxWaitTimeInSeconds "must be equal to or greater than MaxRuntimeInSeconds": the lab gives spot as long again.
    assert request["StoppingCondition"] == {"MaxRuntimeInSeconds": 900, "MaxWaitTimeInSeconds": 1800}


def test_an_express_job_reads_the_directory_bucket():
    env = lab_environment()
    env = LabEnvironment(**{**env.__dict__, "express_bucket": EXPRESS_BUCKET})
    jobs = {(j.spec.dataset.name, j.spec.mode): j.request
            for j in plan(tiny_experiment(modes=["FastFile"], storage="express"), env, "exec-1")}
    request = jobs[("tiny-jpg", "FastFile")]
    assert request["InputDataConfig"][0]["DataSource"]["S3DataSource"]["S3Uri"] == f"s3://{EXPRESS_BUCKET}/datasets/tiny-jpg/"
    assert _tags(request)["dslab:storage"] == "express"
    # The name says Express: "x" before the mode.
    assert "-xfastfile-" in request["TrainingJobName"]


def test_job_names_are_valid_readable_and_apart():
    jobs = _jobs(modes=["File", "FastFile", "Pipe", "FSx", "EFS", "Script"], repeats=2)
    names = [r["TrainingJobName"] for r in jobs.values()]
    assert len(set(names)) == len(names)
    for (dataset, mode), request in jobs.items():
        name = request["TrainingJobName"]
        # TrainingJobName: ^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$
        assert re.fullmatch(r"[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}", name), name
        assert name.startswith(f"dsl-{dataset}-{mode.lower()}-r"), name
    long = _jobs(modes=["FastFile"], datasets=[{"name": "a-dataset-with-a-very-long-name-indeed-x",
                                                "format": "jpg"}])
    (name,) = [r["TrainingJobName"] for r in long.values()]
    assert len(name) <= 63 and name.startswith("dsl-a-dataset-with-a-fastfile-r0-"), name


def test_the_image_follows_the_instances_accelerator():
    env = lab_environment()
    assert env.image_for("ml.p4d.24xlarge") == GPU_IMAGE
    assert env.image_for("ml.g5.2xlarge") == GPU_IMAGE
    assert env.image_for("ml.trn1.32xlarge") == GPU_IMAGE    # the accelerated image (no CPU one for Trainium)
    assert env.image_for("ml.inf2.xlarge") == GPU_IMAGE
    assert env.image_for("ml.m5.xlarge") == CPU_IMAGE
    assert env.image_for("ml.c5.4xlarge") == CPU_IMAGE
    no_cpu = LabEnvironment(**{**env.__dict__, "image_uri_cpu": ""})
    assert no_cpu.image_for("ml.m5.xlarge") == GPU_IMAGE       # one image for every instance where no CPU image is set
    by_family = LabEnvironment(**{**env.__dict__, "image_uris": {"p5": "p5-image", "g4dn": ""}})
    assert by_family.image_for("ml.p5.48xlarge") == "p5-image"
    assert by_family.image_for("ml.p4d.24xlarge") == GPU_IMAGE
    with pytest.raises(ConfigError) as refused:
        by_family.image_for("ml.g4dn.xlarge")
    assert refused.value.field == "instance_type" and "ml.g4dn.xlarge" in str(refused.value)


def test_the_lab_environment_from_stack_outputs():
    data = {"bucket": BUCKET, "region": "us-east-1", "role_arn": "arn:aws:iam::1:role/r", "subnet_ids": "subnet-a, subnet-b",
            "security_group_ids": ["sg-1"], "image_uri": GPU_IMAGE, "code_uri": "s3://b/code.tar.gz",
            "fsx": {"file_system_id": FSX_ID, "mount_name": "mnt"}, "efs": {"file_system_id": ""},
            "image_uris": '{"p5": "p5-image"}', "express_bucket": EXPRESS_BUCKET}
    env = LabEnvironment.from_dict(data)
    assert env.subnet_ids == ("subnet-a", "subnet-b")        # a Lambda environment's comma-separated list
    assert env.security_group_ids == ("sg-1",)
    assert env.fsx == FileSystemRef(FSX_ID, "mnt") and env.efs is None
    assert env.code_version == "unknown" and env.image_uris == {"p5": "p5-image"}
    assert env.express_bucket == EXPRESS_BUCKET
    for missing in ("bucket", "region", "role_arn", "subnet_ids", "security_group_ids", "image_uri", "code_uri"):
        with pytest.raises(ConfigError) as refused:
            LabEnvironment.from_dict({k: v for k, v in data.items() if k != missing})
        assert refused.value.field == f"environment.{missing}"
    with pytest.raises(ConfigError) as refused:
        LabEnvironment.from_dict({**data, "image_uris": "{not json"})
    assert refused.value.field == "environment.image_uris"


def test_the_stacks_hand_over_parameters_by_name_and_stats_sit_beside_the_prefix():
    assert core_parameter("vpc-id") == "/datasourcelab/core/vpc-id"
    assert core_parameter("express-bucket-name") == "/datasourcelab/core/express-bucket-name"
    assert len(CORE_PARAMETERS) == 9
    with pytest.raises(KeyError):
        core_parameter("not-a-parameter")
    # Beside the prefix, never inside it: a Pipe channel streams every object under the prefix.
    assert stats_key("datasets/tiny-jpg/") == "datasets/tiny-jpg.stats.json"
    assert stats_key("/datasets/tiny-jpg") == "datasets/tiny-jpg.stats.json"


def test_a_sized_runtime_replaces_the_trials_own():
    experiment = tiny_experiment(modes=["File"])
    job = plan(experiment, lab_environment(), "exec-1")[0]
    assert build_request(experiment, job.spec, lab_environment(), "exec-1")["StoppingCondition"] == {
        "MaxRuntimeInSeconds": 600}
    assert build_request(experiment, job.spec, lab_environment(), "exec-1", max_runtime=7200)["StoppingCondition"] == {
        "MaxRuntimeInSeconds": 7200}


def test_the_lab_environment_written_to_a_record_reads_back_whole():
    """The environment a run's plan records (its Plan state's input) reads back as the same lab, every field named
    as the workflow's functions read it."""
    from dslab.core.requests import FileSystemRef, LabEnvironment
    env = LabEnvironment(bucket=BUCKET, region="eu-west-1", role_arn="arn:aws:iam::123456789012:role/R",
                         subnet_ids=("subnet-1", "subnet-2"), security_group_ids=("sg-1",), image_uri=GPU_IMAGE,
                         code_uri="s3://b/code/v1/sourcedir.tar.gz", code_version="v1",
                         fsx=FileSystemRef(FSX_ID, "abcdefgh"), efs=FileSystemRef(EFS_ID),
                         express_bucket=EXPRESS_BUCKET, extra_tags={"team": "ml"}, image_uri_cpu=CPU_IMAGE,
                         image_uris={"p3": GPU_IMAGE, "inf1": ""})
    record = env.to_dict()
    assert record == {
        "bucket": BUCKET, "region": "eu-west-1", "role_arn": "arn:aws:iam::123456789012:role/R",
        "subnet_ids": ["subnet-1", "subnet-2"], "security_group_ids": ["sg-1"], "image_uri": GPU_IMAGE,
        "image_uri_cpu": CPU_IMAGE, "code_uri": "s3://b/code/v1/sourcedir.tar.gz", "code_version": "v1",
        "fsx": {"file_system_id": FSX_ID, "mount_name": "abcdefgh"}, "efs": {"file_system_id": EFS_ID},
        "express_bucket": EXPRESS_BUCKET, "extra_tags": {"team": "ml"}, "image_uris": {"p3": GPU_IMAGE, "inf1": ""}}
    assert LabEnvironment.from_dict(record) == env
    # Without FSx, EFS or Express: null, and read back as none. A comma-separated list reads as one.
    bare = LabEnvironment.from_dict({**record, "fsx": None, "efs": {"file_system_id": ""}, "express_bucket": "",
                                     "subnet_ids": "subnet-1, subnet-2,", "code_version": "", "image_uris": ""})
    assert (bare.fsx, bare.efs, bare.express_bucket, bare.subnet_ids, bare.code_version, bare.image_uris) == \
        (None, None, None, ("subnet-1", "subnet-2"), "unknown", {})
    assert bare.to_dict()["fsx"] is None and bare.to_dict()["efs"] is None
    # The Lambda's environment gives image_uris as JSON text.
    assert LabEnvironment.from_dict({**record, "image_uris": '{"g5": "x"}'}).image_uris == {"g5": "x"}
    for bad, problem in (('{"g5": 1}', "expected a JSON object {instance family: image URI}"),
                         ("not json", "'not json' is not JSON: expected {family: image URI}")):
        with pytest.raises(ConfigError) as refused:
            LabEnvironment.from_dict({**record, "image_uris": bad})
        assert (refused.value.field, refused.value.problem) == ("environment.image_uris", problem)
    with pytest.raises(ConfigError) as refused:
        LabEnvironment.from_dict({**record, "role_arn": ""})
    assert refused.value.field == "environment.role_arn"
    with pytest.raises(ConfigError) as refused:
        LabEnvironment.from_dict({**record, "express_bucket": "plain-bucket"})
    assert (refused.value.field, refused.value.problem) == ("environment.express_bucket",
                                                            "'plain-bucket' is not a directory bucket name")


def test_an_instance_family_without_an_image_is_refused_and_a_cpu_family_takes_the_cpu_image():
    env = lab_environment()
    from dataclasses import replace
    mapped = replace(env, image_uris={"inf1": "", "g5": "g5-image"})
    with pytest.raises(ConfigError) as refused:
        mapped.image_for("ml.inf1.xlarge")
    assert refused.value.field == "instance_type"
    assert refused.value.problem == ("ml.inf1.xlarge: no training image of the lab runs on its accelerator (see "
                                     "dslab/aws/images.py); choose another instance type, or set image_uri in the "
                                     "experiment to an image that supports it")
    assert mapped.image_for("ml.g5.xlarge") == "g5-image"
    # p, g, trn and inf families are accelerated: the GPU image; others the CPU image where the lab has one.
    assert [env.image_for(t) for t in ("ml.p3.2xlarge", "ml.g4dn.xlarge", "ml.trn1.2xlarge", "ml.inf2.xlarge",
                                       "ml.c5.xlarge", "local")] == [GPU_IMAGE] * 4 + [CPU_IMAGE, CPU_IMAGE]
    assert replace(env, image_uri_cpu=None).image_for("ml.c5.xlarge") == GPU_IMAGE


def test_a_source_the_lab_lacks_is_refused_naming_what_to_deploy():
    from dataclasses import replace

    from dslab.core.requests import efs_directory_path, fsx_directory_path
    # The file systems hold the datasets under /datasets (the S3 link's and the staging's path), FSx's under its mount.
    assert fsx_directory_path(lab_environment(), "/sets/tiny/") == "/abcdefgh/datasets/sets/tiny"
    assert efs_directory_path("/sets/tiny/") == "/datasets/sets/tiny"
    with pytest.raises(ConfigError) as refused:
        fsx_directory_path(lab_environment(fsx=False), "tiny")
    assert (refused.value.field, refused.value.problem) == ("environment.fsx", "FSx is not deployed: no file system "
                                                            "ID and mount name")
    assert str(refused.value).endswith("(allowed: deploy it with `dslab fsx up` (or `make fsx-up`), or drop FSx from "
                                       "modes)")
    # A manifest sits beside its prefix, the prefix's slashes dropped.
    from dslab.core.requests import dataset_s3_uri, manifest_s3_uri
    assert manifest_s3_uri(lab_environment(), "/sets/tiny/") == f"s3://{BUCKET}/datasets/sets/tiny.manifest"
    assert dataset_s3_uri(lab_environment(), "/sets/tiny/") == f"s3://{BUCKET}/datasets/sets/tiny/"
    no_efs = replace(lab_environment(), efs=None)
    with pytest.raises(ConfigError) as refused:
        plan(tiny_experiment(modes=["EFS"]), no_efs, "exec-1")
    assert (refused.value.field, refused.value.problem) == ("environment.efs", "the lab has no EFS file system")


def test_a_users_code_version_is_its_uploads_hash():
    from dslab.core.requests import user_code_version
    digest = "0123456789abcdef0123"
    assert user_code_version(f"s3://b/user-code/{digest}/sourcedir.tar.gz") == f"user-{digest}"
    assert user_code_version("s3://b/user-code/not-a-hash/sourcedir.tar.gz") == "user"
    assert user_code_version("sourcedir.tar.gz") == "user"


def test_a_script_jobs_tags_say_what_it_read():
    """A Script job has no channel, so SageMaker's lineage records no dataset: its tags carry the URI and the stats
    file's counts and digest, each under the lab's key."""
    from dslab.core.requests import lineage_tags
    job = next(j for j in plan(tiny_experiment(modes=["Script"]), lab_environment(), "exec-1")
               if j.request is not None)
    tags = lineage_tags(job.spec, lab_environment(), {"files": 12, "bytes": 3456, "sha256": "ab" * 32})
    assert tags == [{"Key": "dslab:dataset-uri", "Value": f"s3://{BUCKET}/datasets/{job.spec.dataset.name}/"},
                    {"Key": "dslab:dataset-files", "Value": "12"}, {"Key": "dslab:dataset-bytes", "Value": "3456"},
                    {"Key": "dslab:dataset-stats-sha256", "Value": "ab" * 32}]
    assert lineage_tags(job.spec, lab_environment(), None) == tags[:1]
    assert lineage_tags(job.spec, lab_environment(), {"files": 1, "bytes": 2}) == tags[:1] + [
        {"Key": "dslab:dataset-files", "Value": "1"}, {"Key": "dslab:dataset-bytes", "Value": "2"}]


def test_more_instances_than_objects_are_refused_saying_how_many_would_get_none():
    from dslab.core.requests import check_every_host_gets_data
    experiment = tiny_experiment(instance_count=4, modes=["File"],
                                 datasets=[{"name": "tiny-jpg", "format": "jpg", "files": 3}])
    with pytest.raises(ConfigError) as refused:
        check_every_host_gets_data(experiment)
    assert refused.value.field == "trial 'base': instance_count"
    assert refused.value.problem == ("4 instances but dataset 'tiny-jpg' has 3 objects (File: ShardedByS3Key gives "
                                     "each instance whole objects), so 1 instance would get none and fail the job")
    # Counted as found (the stats file): 1 object, 3 instances without.
    with pytest.raises(ConfigError) as refused:
        check_every_host_gets_data(experiment, {"tiny-jpg": 1})
    assert "has 1 object (File" in refused.value.problem and "so 3 instances would get none" in refused.value.problem
    check_every_host_gets_data(experiment, {"tiny-jpg": 4})   # one each: allowed


def test_a_trials_max_samples_reaches_the_script_and_a_script_jobs_stats_reach_its_tags():
    jobs = plan(tiny_experiment(modes=["Script"], max_samples=64), lab_environment(), "exec-1",
                dataset_stats={"tiny-jpg": {"files": 12, "bytes": 3456}})
    request = next(j.request for j in jobs if j.spec.dataset.name == "tiny-jpg")
    assert request["HyperParameters"]["max_samples"] == "64"
    assert {"Key": "dslab:dataset-files", "Value": "12"} in request["Tags"]
    assert {"Key": "dslab:dataset-bytes", "Value": "3456"} in request["Tags"]


def test_without_an_express_bucket_express_jobs_are_skipped_saying_how_to_deploy_one():
    from dataclasses import replace
    jobs = plan(tiny_experiment(modes=["FastFile"], storage="express"), replace(lab_environment(), express_bucket=None),
                "exec-1")
    assert {j.skip_reason for j in jobs} == {"the lab has no S3 Express One Zone bucket: it was deployed with -c "
                                             "express=false; deploy with -c express=true to run the Express jobs"}


def test_a_replicated_channel_is_split_by_the_labs_script_not_by_s3():
    from dslab.core.requests import check_every_host_gets_data
    experiment = tiny_experiment(instance_count=4, modes=["File"], distribution="FullyReplicated",
                                 datasets=[{"name": "tiny-jpg", "format": "jpg", "files": 3}])
    with pytest.raises(ConfigError) as refused:
        check_every_host_gets_data(experiment)
    assert "(File: the lab's script splits the files among the instances by SM_HOSTS)" in refused.value.problem


def _llama_8b(targets: list[str], *, instance_type: str = "ml.p5.48xlarge", count: int = 1, scale: float = 0.0001,
              writes: int = 1, reads: int = 0, **trial):
    """A checkpoint experiment of llama3 8B (DLIO's workload file) saving to ``targets``, at ``scale`` of its model."""
    import yaml
    from pathlib import Path

    from dslab.core.experiment import parse_experiment
    doc = yaml.safe_load((Path(__file__).resolve().parents[1] / "dslab/contracts/dlio/llama3_8b.yaml").read_text())
    return parse_experiment({"name": "ckpt", "instance_type": instance_type, "instance_count": count, "trials": [
        {"name": "save", "workload": {"file": "llama3_8b.yaml", "dlio": doc, "scale": scale}, **trial,
         "checkpoint": {"targets": targets, "writes": writes, "reads": reads, "seconds_between": 0}}]})


def _checkpoint_experiment(target: str):
    return _llama_8b([target])


def test_an_efs_checkpoint_target_on_a_lab_without_efs_is_refused():
    from dataclasses import replace
    with pytest.raises(ConfigError) as refused:
        plan(_checkpoint_experiment("efs"), replace(lab_environment(), efs=None), "exec-1")
    assert str(refused.value) == ("environment.efs: the lab has no EFS file system (allowed: deploy the DataSourceLab "
                                  "stack)")


def test_an_fsx_or_express_checkpoint_target_the_lab_lacks_is_refused_saying_how_to_get_it():
    from dataclasses import replace

    from dslab.core.requests import FileSystemRef, checkpoint_channel, checkpoint_s3_uri
    fsx_spec = plan(_checkpoint_experiment("fsx"), lab_environment(), "exec-1")[0].spec
    for no_fsx in (replace(lab_environment(), fsx=None), replace(lab_environment(), fsx=FileSystemRef(FSX_ID, None))):
        with pytest.raises(ConfigError) as refused:
            checkpoint_channel(fsx_spec, no_fsx)
        assert str(refused.value) == ("environment.fsx: FSx is not deployed: no file system ID and mount name (allowed: "
                                      "deploy it with `dslab fsx up` (or `make fsx-up`), or drop fsx from the targets)")
    express_spec = plan(_checkpoint_experiment("express"), replace(lab_environment(), express_bucket=EXPRESS_BUCKET),
                        "exec-1")[0].spec
    with pytest.raises(ConfigError) as refused:
        checkpoint_s3_uri(express_spec, replace(lab_environment(), express_bucket=None), "exec-1")
    assert str(refused.value) == ("checkpoint.targets: the lab has no S3 Express One Zone bucket (deployed with -c "
                                  "express=false) (allowed: deploy with -c express=true, or drop express from the "
                                  "targets)")


def test_the_lab_environments_refusals_say_what_provides_each_field():
    data = {"bucket": BUCKET, "region": "us-east-1", "role_arn": "arn:aws:iam::1:role/r", "subnet_ids": "subnet-a",
            "security_group_ids": ["sg-1"], "image_uri": GPU_IMAGE, "code_uri": "s3://b/code.tar.gz"}
    with pytest.raises(ConfigError) as refused:
        LabEnvironment.from_dict({k: v for k, v in data.items() if k != "role_arn"})
    assert str(refused.value) == ("environment.role_arn: is missing: the lab's stack outputs provide it (cdk deploy "
                                  "--outputs-file, or a deployed DataSourceLab stack)")
    # Text that is not JSON is quoted up to its first 60 characters.
    with pytest.raises(ConfigError) as refused:
        LabEnvironment.from_dict({**data, "image_uris": "{" + "x" * 80})
    assert str(refused.value) == ("environment.image_uris: " + repr("{" + "x" * 59) + " is not JSON: expected "
                                  "{family: image URI}")


def test_a_directory_buckets_name_is_checked_as_s3_names_them():
    # "<base>--<zone-id>--x-s3", at most 63 characters: 63 pass, 64 do not.
    base = "lab--use1-az4--x-s3"
    at_63 = "a" * (63 - len(base)) + base
    data = {"bucket": BUCKET, "region": "us-east-1", "role_arn": "arn:aws:iam::1:role/r", "subnet_ids": "subnet-a",
            "security_group_ids": ["sg-1"], "image_uri": GPU_IMAGE, "code_uri": "s3://b/code.tar.gz"}
    assert LabEnvironment.from_dict({**data, "express_bucket": at_63}).express_bucket == at_63
    for wrong in ("a" + at_63, "lab-bucket", 42):
        with pytest.raises(ConfigError) as refused:
            LabEnvironment.from_dict({**data, "express_bucket": wrong})
        assert str(refused.value) == (f"environment.express_bucket: {wrong!r} is not a directory bucket name (allowed: "
                                      "<base>--<zone-id>--x-s3, e.g. lab--use1-az4--x-s3)")
    assert is_express_bucket(base) and not is_express_bucket("lab-bucket")


def test_an_instance_type_without_a_family_takes_the_cpu_image():
    # "local" (no dots): no family, no accelerator: the CPU image.
    assert lab_environment().image_for("local") == CPU_IMAGE


def test_a_stats_key_keeps_a_datasets_own_letters():
    # Only slashes are stripped: a dataset named "Xrays" keeps its X.
    assert stats_key("datasets/Xrays/") == "datasets/Xrays.stats.json"
    assert stats_key("X/") == "X.stats.json"


def test_a_job_name_is_built_from_its_parts_within_sagemakers_63_characters():
    # dsl-<dataset, its first 16 characters less what the mode's name passes "fastfile" by>-<mode>-r<repeat>-<the first
    # 8 hex digits of SHA-256 of "<execution>/<index>">.
    import hashlib
    dataset = [{"name": "abcdefghijklmnopq-r", "format": "jpg"}]
    (request,) = _jobs(modes=["FastFile"], datasets=dataset).values()
    prefix, digest = request["TrainingJobName"].rsplit("-", 1)
    assert prefix == "dsl-abcdefghijklmnop-fastfile-r0"
    assert digest == hashlib.sha256(f"{_tags(request)['dslab:execution']}/0".encode()).hexdigest()[:8]
    # Express FastFile, "xfastfile", one longer than "fastfile": the dataset's first 15.
    env = LabEnvironment(**{**lab_environment().__dict__, "express_bucket": EXPRESS_BUCKET})
    (express,) = [j.request for j in plan(tiny_experiment(modes=["FastFile"], storage="express", datasets=dataset), env,
                                          "exec-1")]
    assert express["TrainingJobName"].startswith("dsl-abcdefghijklmno-xfastfile-r0-")


def test_a_dataset_on_the_directory_bucket_of_a_lab_without_one_is_refused_saying_how_to_get_one():
    from dataclasses import replace

    from dslab.core.requests import dataset_s3_uri
    with pytest.raises(ConfigError) as refused:
        dataset_s3_uri(replace(lab_environment(), express_bucket=None), "tiny-jpg", "express")
    assert str(refused.value) == ("storage: the lab has no S3 Express One Zone bucket (deployed with -c express=false) "
                                  "(allowed: deploy with -c express=true, or drop storage: express)")
    env = replace(lab_environment(), express_bucket=EXPRESS_BUCKET)
    assert dataset_s3_uri(env, "/tiny-jpg/", "express") == f"s3://{EXPRESS_BUCKET}/datasets/tiny-jpg/"


def test_a_channel_reads_a_manifest_only_where_the_mode_takes_one():
    # The experiment's parser refuses FastFile with a manifest first; the request builder refuses it again for any
    # other caller. File reads the manifest beside the prefix; an unknown mode is refused on modes.
    from dataclasses import replace

    from dslab.core.requests import build_channel
    jobs = {j.spec.mode: j for j in plan(tiny_experiment(modes=["File", "FastFile", "EFS"]), lab_environment(), "e")}

    def with_manifest(mode: str):
        spec = jobs[mode].spec
        return replace(spec, trial=replace(spec.trial, s3_data_type="ManifestFile"))
    with pytest.raises(ConfigError) as refused:
        build_channel(with_manifest("FastFile"), lab_environment())
    assert str(refused.value) == "s3_data_type: FastFile supports only S3Prefix (allowed: S3Prefix)"
    channel = build_channel(with_manifest("File"), lab_environment())
    prefix = jobs["File"].spec.dataset.prefix.strip("/")
    assert channel["DataSource"]["S3DataSource"]["S3Uri"] == f"s3://{BUCKET}/datasets/{prefix}.manifest"
    with pytest.raises(ConfigError) as refused:
        build_channel(replace(jobs["File"].spec, mode="Stream"), lab_environment())
    assert str(refused.value) == "modes: unknown mode 'Stream'"
    from dslab.core.requests import LabEnvironment as Env
    with pytest.raises(ConfigError) as refused:
        build_channel(jobs["EFS"].spec, Env(**{**lab_environment().__dict__, "efs": None}))
    assert str(refused.value) == ("environment.efs: the lab has no EFS file system (allowed: deploy the DataSourceLab "
                                  "stack)")


def test_a_trials_workers_and_prefetch_reach_the_script():
    jobs = plan(tiny_experiment(modes=["File"], workers=6, prefetch=3), lab_environment(), "exec-1")
    hp = next(j.request for j in jobs if j.spec.dataset.name == "tiny-jpg")["HyperParameters"]
    assert (hp["workers"], hp["prefetch"]) == ("6", "3")


# ---- Run 5's survivors (issue 58): plan's skips and keeps, the job count, volumes, a user's script, checkpoint jobs --

def test_one_execution_runs_at_most_160_jobs_and_a_161st_is_refused_naming_what_to_lower():
    # limits.py: history (25,000 - 5,480) / 120 = 162 jobs, kept to a multiple of ten: 160. Two datasets x one mode x
    # 80 repeats = 160; one dataset x seven trials x 23 repeats = 161.
    from dslab.core.requests import check_job_count
    one = [{"name": "tiny-jpg", "format": "jpg"}]
    seven = dict(modes=["File"], datasets=one, repeats=23, trials=[{"name": f"t{i}"} for i in range(7)])
    assert len(check_job_count(tiny_experiment(modes=["File"], repeats=80))) == 160
    with pytest.raises(ConfigError) as refused:
        check_job_count(tiny_experiment(**seven))
    assert str(refused.value) == (
        "repeats: the experiment expands to 161 jobs; one workflow execution runs at most 160 (Step Functions' "
        "25,000-event history and 256 KiB state limits) (allowed: lower repeats, datasets, modes or trials, or split "
        "the experiment into several files)")
    with pytest.raises(ConfigError) as refused:
        plan(tiny_experiment(**seven), lab_environment(), "exec-1")
    assert refused.value.field == "repeats"
    with pytest.raises(ConfigError) as refused:
        check_job_count(tiny_experiment(**seven), "--repeats")
    assert refused.value.field == "--repeats"


def test_jobs_an_earlier_attempt_finished_are_kept_and_a_name_of_another_execution_is_refused():
    from dslab.core.requests import KEPT_REASON
    experiment = tiny_experiment(modes=["File", "FastFile"])
    first = plan(experiment, lab_environment(), "exec-1")
    names = [j.name for j in first]
    again = plan(experiment, lab_environment(), "exec-1", keep=frozenset(names[:1]))
    # The kept job: its name and spec, no request, the reason; every other job is planned as before, same names.
    assert (again[0].spec, again[0].name, again[0].request, again[0].skip_reason, again[0].kept) == (
        first[0].spec, names[0], None, "kept: an earlier attempt of this execution finished it", True)
    assert KEPT_REASON == again[0].skip_reason
    assert [j.name for j in again] == names
    assert [j.request for j in again[1:]] == [j.request for j in first[1:]]
    assert not any(j.kept for j in again[1:])
    with pytest.raises(ConfigError) as refused:
        plan(experiment, lab_environment(), "exec-1", keep=frozenset({"dsl-zz-file-r0-00000000",
                                                                       "dsl-aa-file-r0-00000000"}))
    assert str(refused.value) == ("keep_jobs: dsl-aa-file-r0-00000000 is not a job of execution exec-1 (allowed: name "
                                  "only jobs of the same experiment and execution)")


def test_fsx_jobs_are_skipped_while_fsx_is_down_and_every_other_job_still_runs():
    from dataclasses import replace
    reason = "FSx for Lustre is not deployed (torn down?): bring it back with `dslab fsx up`"
    for env, available in ((replace(lab_environment(), fsx=None), None), (lab_environment(), False)):
        jobs = plan(tiny_experiment(modes=["FSx", "File"]), env, "exec-1", fsx_available=available)
        assert len(jobs) == 4
        for job in jobs:
            if job.spec.mode == "FSx":
                assert (job.request, job.skip_reason, job.kept, job.name) == (None, reason, False, job.name)
                assert job.name.startswith(f"dsl-{job.spec.dataset.name}-fsx-r0-")
            else:
                assert job.request["TrainingJobName"] == job.name and job.skip_reason is None


def test_express_jobs_are_skipped_on_a_lab_without_a_directory_bucket_and_standard_jobs_still_run():
    from dataclasses import replace
    experiment = tiny_experiment(datasets=[{"name": "tiny-jpg", "format": "jpg"}], trials=[
        {"name": "express", "modes": ["FastFile"], "storage": "express"},
        {"name": "standard", "modes": ["FastFile"]}])
    jobs = plan(experiment, replace(lab_environment(), express_bucket=None), "exec-1")
    assert [(j.spec.trial.name, j.request is None) for j in jobs] == [("express", True), ("standard", False)]
    assert jobs[0].skip_reason == ("the lab has no S3 Express One Zone bucket: it was deployed with -c express=false; "
                                   "deploy with -c express=true to run the Express jobs")
    assert (jobs[0].spec.trial.name, jobs[0].kept) == ("express", False)
    assert "-xfastfile-r0-" in jobs[0].name


def test_two_jobs_with_one_name_are_refused_before_any_request(monkeypatch):
    # job_name's digest hashes the job's index, so only a changed job_name collides: the guard still holds.
    import dslab.core.requests as requests
    monkeypatch.setattr(requests, "job_name", lambda experiment, spec, execution_id: "dsl-same")
    with pytest.raises(ConfigError) as refused:
        plan(tiny_experiment(modes=["File"]), lab_environment(), "exec-1")
    assert str(refused.value) == "job_prefix: two jobs would share the name dsl-same"


def test_plan_sizes_each_jobs_runtime_from_the_answer_by_its_key():
    experiment = tiny_experiment(modes=["File", "FastFile"])
    runtimes = {("base", "tiny-jpg", "FastFile", "standard"): 5400}
    asked = {(j.spec.dataset.name, j.spec.mode): j.request["StoppingCondition"]["MaxRuntimeInSeconds"]
             for j in plan(experiment, lab_environment(), "exec-1", runtimes=runtimes)}
    # The keyed job asks the answer's 5,400 s; the rest their trial's max_run_seconds, 600.
    assert asked == {("tiny-jpg", "File"): 600, ("tiny-jpg", "FastFile"): 5400, ("tiny-tfr", "File"): 600,
                     ("tiny-tfr", "FastFile"): 600}


def test_a_file_jobs_volume_is_sized_from_the_stats_plan_read():
    # volume_size_gb left out, an EBS type (m5): File copies its share, plus 5% headroom, on at least 100 GB.
    one = [{"name": "tiny-jpg", "format": "jpg"}]
    doc = dict(modes=["File", "FastFile"], datasets=one, volume_size_gb=None)

    def volumes(stats, **more):
        return {j.spec.mode: j.request["ResourceConfig"]["VolumeSizeInGB"]
                for j in plan(tiny_experiment(**{**doc, **more}), lab_environment(), "exec-1", dataset_stats=stats)}
    # 300 GB on one instance: ceil(300 x 1.05) = 315 GB; FastFile copies nothing: the default 100.
    assert volumes({"tiny-jpg": {"files": 600, "bytes": 300_000_000_000}}) == {"File": 315, "FastFile": 100}
    # No stats and no bytes in the experiment: nothing to size for, 100.
    assert volumes(None) == {"File": 100, "FastFile": 100}
    # The experiment's bytes when the stats have none: 200 GB: 210.
    assert volumes(None, datasets=[{"name": "tiny-jpg", "format": "jpg", "bytes": "200GB"}]) == {
        "File": 210, "FastFile": 100}
    # Two instances, ShardedByS3Key: half each, 150 GB: ceil(157.5) = 158; FullyReplicated: all of it, 315.
    stats = {"tiny-jpg": {"files": 600, "bytes": 300_000_000_000}}
    assert volumes(stats, instance_count=2)["File"] == 158
    assert volumes(stats, instance_count=2, distribution="FullyReplicated")["File"] == 315
    # An NVMe type (g5) asks the default whatever the share: SageMaker provisions no EBS there.
    assert volumes(stats, instance_type="ml.g5.xlarge")["File"] == 100


def test_plan_checks_the_object_counts_its_stats_found():
    # The experiment says nothing of its objects; the stats file found 3 for 4 instances: refused before any request.
    experiment = tiny_experiment(modes=["File"], instance_count=4, datasets=[{"name": "tiny-jpg", "format": "jpg"}])
    with pytest.raises(ConfigError) as refused:
        plan(experiment, lab_environment(), "exec-1", dataset_stats={"tiny-jpg": {"files": 3, "bytes": 3000}})
    assert "has 3 objects" in refused.value.problem
    assert len(plan(experiment, lab_environment(), "exec-1", dataset_stats={"tiny-jpg": {"files": 4, "bytes": 4000}})) == 1


def test_two_instances_need_two_objects_and_each_trial_and_dataset_is_checked():
    from dslab.core.requests import check_every_host_gets_data
    two = tiny_experiment(modes=["File"], instance_count=2, datasets=[{"name": "tiny-jpg", "format": "jpg", "files": 1}])
    with pytest.raises(ConfigError) as refused:
        check_every_host_gets_data(two)
    assert str(refused.value) == (
        "trial 'base': instance_count: 2 instances but dataset 'tiny-jpg' has 1 object (File: ShardedByS3Key gives each "
        "instance whole objects), so 1 instance would get none and fail the job (allowed: at most 1 instances for "
        "'tiny-jpg', or more objects (smaller TFRecord shards: generate.shard_size_mb, dslab dataset pack "
        "--shard-size))")
    # The first dataset has objects enough; the second, checked after it, does not.
    datasets = [{"name": "big", "format": "jpg", "files": 100}, {"name": "small", "format": "jpg", "files": 3}]
    with pytest.raises(ConfigError) as refused:
        check_every_host_gets_data(tiny_experiment(modes=["File"], instance_count=4, datasets=datasets))
    assert "dataset 'small' has 3 objects" in refused.value.problem


def test_a_replicated_pipe_stream_is_split_by_records_one_per_jpg_and_tfrecord_shards_are_not_counted():
    from dslab.core.requests import check_every_host_gets_data
    jpg = tiny_experiment(modes=["Pipe"], instance_count=4, distribution="FullyReplicated",
                          datasets=[{"name": "tiny-jpg", "format": "jpg", "files": 3}])
    with pytest.raises(ConfigError) as refused:
        check_every_host_gets_data(jpg)
    assert ("(Pipe: the lab's script splits the Pipe stream's records (one per object) among the instances), so 1 "
            "instance would get none") in refused.value.problem
    # A TFRecord shard holds many records: 3 shards for 4 instances is not refused.
    check_every_host_gets_data(tiny_experiment(modes=["Pipe"], instance_count=4, distribution="FullyReplicated",
                                               datasets=[{"name": "tiny-tfr", "format": "tfrecord", "files": 3}]))


def test_a_users_script_gets_its_own_hyperparameters_metrics_and_tags():
    digest = "0123456789abcdef0123"
    experiment = tiny_experiment(modes=["FastFile"], datasets=[{"name": "tiny-jpg", "format": "jpg"}], trials=[
        {"name": "mine", "hyperparameters": {"lr": 0.01}, "script": {
            "code_uri": f"s3://user-bucket/user-code/{digest}/sourcedir.tar.gz", "entry_point": "fit.py",
            "metric_definitions": [{"Name": "loss", "Regex": "loss=([0-9.]+)"},
                                   {"Name": "samples_per_second", "Regex": "sps=([0-9.]+)"}]}}])
    (job,) = plan(experiment, lab_environment(), "exec-1")
    request = job.request
    assert request["AlgorithmSpecification"]["TrainingInputMode"] == "FastFile"
    # Its own two first; the lab's samples_per_second is replaced by its own, the other seven follow.
    assert request["AlgorithmSpecification"]["MetricDefinitions"] == [
        {"Name": "loss", "Regex": "loss=([0-9.]+)"}, {"Name": "samples_per_second", "Regex": "sps=([0-9.]+)"},
        *({"Name": name, "Regex": f"dslab_metric {name}=([0-9.eE+-]+)"} for name in METRICS[1:])]
    assert request["HyperParameters"] == {
        "sagemaker_program": '"fit.py"',
        "sagemaker_submit_directory": f'"s3://user-bucket/user-code/{digest}/sourcedir.tar.gz"',
        "sagemaker_region": '"us-east-1"', "sagemaker_container_log_level": "20", "lr": "0.01"}
    tags = _tags(request)
    assert (tags["dslab:code-version"], tags["dslab:script"]) == (f"user-{digest}", "fit.py")


def test_a_users_script_not_yet_uploaded_is_refused_saying_which_commands_upload_it():
    experiment = tiny_experiment(modes=["FastFile"], datasets=[{"name": "tiny-jpg", "format": "jpg"}],
                                 trials=[{"name": "mine", "script": {"source_dir": "src"}}])
    with pytest.raises(ConfigError) as refused:
        plan(experiment, lab_environment(), "exec-1")
    assert str(refused.value) == ("trials.mine.script.code_uri: the script in src has not been uploaded (allowed: start "
                                  "the run with `dslab run` or `dslab local`, which package and upload source_dir)")


def test_more_than_100_hyperparameters_are_refused_for_any_caller():
    # The parser keeps a user to 80; a caller that builds its own trial meets CreateTrainingJob's 100: the four
    # sagemaker_ entries and 96 of its own pass, 97 do not.
    from dataclasses import replace
    experiment = tiny_experiment(modes=["FastFile"], datasets=[{"name": "tiny-jpg", "format": "jpg"}], trials=[
        {"name": "mine", "script": {"code_uri": "s3://user-bucket/code/sourcedir.tar.gz"}}])
    (job,) = plan(experiment, lab_environment(), "exec-1")

    def with_own(n: int):
        spec = replace(job.spec, trial=replace(job.spec.trial, hyperparameters={f"h{i}": i for i in range(n)}))
        return build_request(experiment, spec, lab_environment(), "exec-1")
    assert len(with_own(96)["HyperParameters"]) == 100
    with pytest.raises(ConfigError) as refused:
        with_own(97)
    assert str(refused.value) == ("trials.mine.hyperparameters: the job would pass 101 hyperparameters; SageMaker takes "
                                  "at most 100 (allowed: fewer hyperparameters)")


def test_a_script_job_on_express_reads_the_directory_bucket_and_its_tag_says_so():
    from dataclasses import replace
    env = replace(lab_environment(), express_bucket=EXPRESS_BUCKET)
    (job,) = plan(tiny_experiment(modes=["Script"], storage="express", datasets=[{"name": "tiny-jpg", "format": "jpg"}]),
                  env, "exec-1")
    assert job.request["HyperParameters"]["dataset_uri"] == f'"s3://{EXPRESS_BUCKET}/datasets/tiny-jpg/"'
    assert _tags(job.request)["dslab:dataset-uri"] == f"s3://{EXPRESS_BUCKET}/datasets/tiny-jpg/"


def test_a_dataset_uri_longer_than_a_tag_value_is_refused():
    # s3:// (5) + a 40-letter bucket + /datasets/ (10) + the prefix + / (1): a 200-letter prefix makes 256, a tag
    # value's most; 201 make 257.
    from dataclasses import replace
    env = replace(lab_environment(), bucket="b" * 40)
    for length, refused_too in ((200, False), (201, True)):
        experiment = tiny_experiment(modes=["Script"], datasets=[{"name": "tiny-jpg", "format": "jpg",
                                                                  "prefix": "p" * length}])
        if not refused_too:
            (job,) = plan(experiment, env, "exec-1")
            assert len(_tags(job.request)["dslab:dataset-uri"]) == 256
            continue
        with pytest.raises(ConfigError) as refused:
            plan(experiment, env, "exec-1")
        assert str(refused.value) == ("datasets.tiny-jpg.prefix: the dataset URI is 257 characters; a tag value holds at "
                                      "most 256 (allowed: a shorter prefix)")


def test_the_labs_extra_tags_follow_in_order_and_a_long_execution_keeps_its_last_256_characters():
    from dataclasses import replace
    env = replace(lab_environment(), extra_tags={"team": "ml", "cost-center": "42"})
    execution = "a" * 10 + "b" * 256
    (request,) = [j.request for j in plan(tiny_experiment(modes=["File"], datasets=[{"name": "tiny-jpg",
                                                                                   "format": "jpg"}]), env, execution)]
    assert request["Tags"][-2:] == [{"Key": "cost-center", "Value": "42"}, {"Key": "team", "Value": "ml"}]
    assert _tags(request)["dslab:execution"] == "b" * 256


def test_a_job_prefix_at_its_most_leaves_room_for_capacity_retries_and_its_dashes_are_collapsed():
    # 20 + "-" + 16 + "-fastfile" (9) + "-r10" (4) + "-" + 8 = 59: the most a name takes, four short of 63 for "-a<N>".
    datasets = [{"name": "abcdefghijklmnopqrst", "format": "jpg"}]
    jobs = plan(tiny_experiment(modes=["FastFile"], datasets=datasets, repeats=11, job_prefix="p" * 20),
                lab_environment(), "exec-1")
    assert len(jobs[10].name) == 59 and jobs[10].name.startswith("p" * 20 + "-abcdefghijklmnop-fastfile-r10-")
    # "a--b" is a valid prefix; the name keeps single dashes.
    (job,) = plan(tiny_experiment(modes=["FastFile"], datasets=datasets[:1], job_prefix="a--b"), lab_environment(), "e")
    assert job.name.startswith("a-b-abcdefghijklmnop-fastfile-r0-")
    # A dataset cut at a dash: "abcdefghijklmno-" loses its dash.
    (job,) = plan(tiny_experiment(modes=["FastFile"], datasets=[{"name": "abcdefghijklmno-pq", "format": "jpg"}]),
                  lab_environment(), "e")
    assert job.name.startswith("dsl-abcdefghijklmno-fastfile-r0-")


def test_a_job_name_past_sagemakers_rule_is_refused_for_a_caller_that_skipped_the_parser():
    from dataclasses import replace

    from dslab.core.requests import job_name
    experiment = tiny_experiment(modes=["File"])
    spec = plan(experiment, lab_environment(), "e")[0].spec
    with pytest.raises(ConfigError) as refused:
        # 40 + "-tiny-jpg-file-r0-" (18) + 8 = 66 characters, past the 59 the lab allows itself.
        job_name(replace(experiment, job_prefix="p" * 40), spec, "e")
    assert refused.value.field == "job_prefix"
    assert refused.value.problem.startswith(f"job name '{'p' * 40}-tiny-jpg-file-r0-")
    assert refused.value.problem.endswith("' is not a valid SageMaker training-job name")


def test_an_fsx_channel_on_a_lab_without_fsx_is_refused_by_the_builder_too():
    from dataclasses import replace

    from dslab.core.requests import build_channel
    spec = plan(tiny_experiment(modes=["FSx"]), lab_environment(), "e")[0].spec
    with pytest.raises(ConfigError) as refused:
        build_channel(spec, replace(lab_environment(), fsx=None))
    assert refused.value.field == "environment.fsx"


def _llama_8b_on_two_p3(targets: list[str], reads: int = 1, instance_type: str = "ml.p3.16xlarge", **trial):
    # Two ml.p3.16xlarge (8 GPUs each, EBS only): 16 ranks of llama3 8B, 56,213,794,816 bytes a host, each checkpoint
    # (DLIO's formula, dslab/core/workloads/checkpoint.py).
    return _llama_8b(targets, instance_type=instance_type, count=2, scale=1, writes=2, reads=reads, **trial)


def test_a_sync_checkpoint_jobs_volume_holds_what_it_writes_and_its_restore_job_every_hosts():
    jobs = {(j.spec.target, j.spec.restore): j.request for j in plan(_llama_8b_on_two_p3(["s3", "fsx"]),
                                                                      lab_environment(), "exec-1")}
    host, writes = 56_213_794_816, 2
    # The S3 sync's writer keeps its host's two checkpoints: 112.43 GB x 1.05 = 118.05: 119 GB.
    assert jobs[("s3", False)]["ResourceConfig"]["VolumeSizeInGB"] == math.ceil(host * writes / 1e9 * 1.05) == 119
    # Its restore job gets the whole URI on each instance: both hosts' files, 224.86 GB x 1.05 = 236.1: 237 GB.
    assert jobs[("s3", True)]["ResourceConfig"]["VolumeSizeInGB"] == math.ceil(2 * host * writes / 1e9 * 1.05) == 237
    # FSx writes to the file system: the default volume.
    assert jobs[("fsx", False)]["ResourceConfig"]["VolumeSizeInGB"] == jobs[("fsx", True)]["ResourceConfig"][
        "VolumeSizeInGB"] == 100
    # A volume asked for is the volume, every target.
    asked = plan(_llama_8b_on_two_p3(["s3", "fsx"], volume_size_gb=500), lab_environment(), "exec-1")
    assert {j.request["ResourceConfig"]["VolumeSizeInGB"] for j in asked} == {500}


def test_a_checkpoint_jobs_hyperparameters_and_tags_say_what_it_writes_reads_and_keeps():
    import json
    jobs = {(j.spec.target, j.spec.restore): j.request for j in plan(_llama_8b_on_two_p3(["s3", "fsx"]),
                                                                      lab_environment(), "exec-1")}
    for request in jobs.values():
        hp = request["HyperParameters"]
        assert (hp["sagemaker_program"], hp["sagemaker_submit_directory"], hp["sagemaker_region"],
                hp["sagemaker_container_log_level"]) == ('"train.py"', f'"s3://{BUCKET}/code/test/sourcedir.tar.gz"',
                                                         '"us-east-1"', "20")
        assert request["AlgorithmSpecification"]["TrainingImage"] == GPU_IMAGE
        assert _tags(request)["dslab:code-version"] == "test"

    def phases(key):
        plan_of = json.loads(jobs[key]["HyperParameters"]["checkpoint_plan"])
        return plan_of["writes"], plan_of["reads"], jobs[key]["HyperParameters"]["checkpoint_cleanup"], _tags(
            jobs[key])["dslab:checkpoint-restore"]
    # The sync's writer reads its own volume back and keeps its checkpoints for the restore job, which deletes them;
    # FSx's writer only writes (its restore job reads on new instances).
    assert phases(("s3", False)) == (2, 1, "false", "false")
    assert phases(("s3", True)) == (0, 1, "true", "true")
    assert phases(("fsx", False)) == (2, 0, "false", "false")
    assert phases(("fsx", True)) == (0, 1, "true", "true")
    # No read back: no restore job, and the writer deletes what it wrote.
    (writer,) = [j.request for j in plan(_llama_8b_on_two_p3(["s3"], reads=0), lab_environment(), "exec-1")]
    assert writer["HyperParameters"]["checkpoint_cleanup"] == "true"


def test_a_checkpoint_hyperparameter_past_2500_characters_is_refused():
    # HyperParameterValue: at most 2,500 characters, JSON-encoded: a 2,498-letter string is 2,500 with its quotes.
    from dataclasses import replace

    from dslab.core.requests import build_checkpoint_request
    experiment = _llama_8b_on_two_p3(["s3"], reads=0)
    (job,) = plan(experiment, lab_environment(), "exec-1")

    def with_note(letters: int):
        spec = replace(job.spec, trial=replace(job.spec.trial, hyperparameters={"note": "n" * letters}))
        return build_checkpoint_request(experiment, spec, lab_environment(), "exec-1")
    assert len(with_note(2498)["HyperParameters"]["note"]) == 2500
    with pytest.raises(ConfigError) as refused:
        with_note(2499)
    assert str(refused.value) == ("trials.save.workload: the job's note hyperparameter is 2,501 characters; SageMaker "
                                  "takes at most 2,500")


def test_a_relative_code_uri_still_names_its_hash():
    from dslab.core.requests import user_code_version
    digest = "0123456789abcdef0123"
    assert user_code_version(f"{digest}/sourcedir.tar.gz") == f"user-{digest}"


def test_a_prefix_keeps_its_own_capital_x_where_only_its_slashes_are_dropped():
    # PREFIX_RE allows capitals: "Xrays/X" loses its slashes only, never an X.
    from dataclasses import replace

    from dslab.core.requests import dataset_s3_uri, efs_directory_path, fsx_directory_path, manifest_s3_uri
    express = replace(lab_environment(), express_bucket=EXPRESS_BUCKET)
    assert dataset_s3_uri(lab_environment(), "/Xrays/X/") == f"s3://{BUCKET}/datasets/Xrays/X/"
    assert dataset_s3_uri(express, "/Xrays/X/", "express") == f"s3://{EXPRESS_BUCKET}/datasets/Xrays/X/"
    assert manifest_s3_uri(lab_environment(), "/Xrays/X/") == f"s3://{BUCKET}/datasets/Xrays/X.manifest"
    assert fsx_directory_path(lab_environment(), "/Xrays/X/") == "/abcdefgh/datasets/Xrays/X"
    assert efs_directory_path("/Xrays/X/") == "/datasets/Xrays/X"


def test_a_sync_checkpoint_job_on_nvme_asks_the_default_volume_and_is_named_by_its_execution():
    # ml.p4d.24xlarge has 8,000 GB of NVMe: SageMaker provisions no EBS there, so the request asks the default 100 GB
    # whatever the checkpoints hold (two of 56 GB a host).
    import hashlib

    experiment = _llama_8b_on_two_p3(["s3"], reads=0, instance_type="ml.p4d.24xlarge")
    (job,) = plan(experiment, lab_environment(), "exec-1")
    assert job.request["ResourceConfig"]["InstanceType"] == "ml.p4d.24xlarge"
    assert job.request["ResourceConfig"]["VolumeSizeInGB"] == 100
    # dsl-<model>-cks3-r0-<SHA-256 of "exec-1/<index>", its first 8 hex digits>.
    digest = hashlib.sha256(f"exec-1/{job.spec.index}".encode()).hexdigest()[:8]
    assert job.request["TrainingJobName"] == job.name and job.name.endswith(f"-cks3-r0-{digest}")
