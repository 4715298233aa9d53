"""CreateTrainingJob requests written out by hand (issue 58): each field of one job per source, as the SageMaker API
reference defines it, held against what the one request builder (dslab/core/requests.py) sends. No expectation here
comes from the builder: the literals are the API's words and the lab's own conventions (docs/workflow.md)."""

from __future__ import annotations

import re

import pytest

from dslab.core.errors import ConfigError
from dslab.core.requests import (
    CORE_PARAMETERS, FileSystemRef, LabEnvironment, build_request, core_parameter, plan, stats_key,
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
