"""The FSx idle guard's rounds (dslab/workflow/fsx_guard.py): what it deletes, what it keeps and the reason a user
reads, and the record `dslab fsx status` shows. Stacks, executions and training jobs stand in the fault world; where
AWS answers something the stand-in does not (a stack's LastUpdatedTime, a stack in progress, executions that ended at
given times), the answer is hand-built around the stand-in's."""

from __future__ import annotations

import datetime as dt
import json

from dslab.workflow import fsx_guard

from .fault_world import ACCOUNT, REGION, blockers_machine
from .fault_world import world  # noqa: F401

ROLE = f"arn:aws:iam::{ACCOUNT}:role/cdk-cfn-exec-role"
H = dt.timedelta(hours=1)


def _stack(world, name: str, *, role: bool = True, output: bool = True) -> tuple[str, dt.datetime]:
    """A stack of the guard's own (the stand-in's CloudFormation): its ID and its CreationTime."""
    cfn = world.c["cloudformation"]
    template = {"Resources": {"Handle": {"Type": "AWS::CloudFormation::WaitConditionHandle"}}}
    if output:
        template["Outputs"] = {"FsxFileSystemId": {"Value": world.fsx_id}}
    stack_id = cfn.create_stack(StackName=name, TemplateBody=json.dumps(template),
                                **({"RoleARN": ROLE} if role else {}))["StackId"]
    return stack_id, cfn.describe_stacks(StackName=name)["Stacks"][0]["CreationTime"]


def _status(world, stack_id: str) -> str:
    return world.c["cloudformation"].describe_stacks(StackName=stack_id)["Stacks"][0]["StackStatus"]


class StackAnswers:
    """CloudFormation whose DescribeStacks answers carry the fields given (as AWS sends them; the stand-in does not)."""

    def __init__(self, cfn, **fields):
        self.cfn, self.fields, self.exceptions = cfn, fields, cfn.exceptions

    def describe_stacks(self, **kwargs):
        answer = self.cfn.describe_stacks(**kwargs)
        return {**answer, "Stacks": [{**s, **self.fields} for s in answer["Stacks"]]}

    def delete_stack(self, **kwargs):
        return self.cfn.delete_stack(**kwargs)


class Executions:
    """Step Functions answering ListExecutions with the executions given, newest started first."""

    def __init__(self, executions: list[dict]):
        self.executions = executions

    def list_executions(self, stateMachineArn, maxResults=None, statusFilter=None, NextToken=None):
        listed = [e for e in self.executions if statusFilter in (None, e["status"])]
        return {"executions": listed[:maxResults]}

    def get_paginator(self, name):
        assert name == "list_executions"
        owner = self

        class Pages:
            def paginate(self, **kwargs):
                return [owner.list_executions(**kwargs)]
        return Pages()


def test_a_young_stack_is_kept_and_its_record_names_its_role_age_and_deadline(world):
    """A round before the deadline keeps the stack and reports it as `dslab fsx status` shows it: the stack, its
    status, file system and service role, when it was created and how old it is (to the hundredth of an hour), the
    idle hours asked for and the deadline they give."""
    cfn, sfn = world.c["cloudformation"], world.c["stepfunctions"]
    stack_id, created = _stack(world, "Young-Fsx")
    quiet = blockers_machine(world, "YoungQuiet", {})
    now = created + 20 * H + dt.timedelta(minutes=1)
    deadline = (created + 30.5 * H).isoformat()
    assert fsx_guard.guard(cfn, sfn, "Young-Fsx", quiet, 30.5, now=now) == {
        "up": True, "stack": "Young-Fsx", "stack_id": stack_id, "stack_status": "CREATE_COMPLETE",
        "file_system_id": world.fsx_id, "service_role": "arn:aws:iam::123456789012:role/cdk-cfn-exec-role",
        "created": created.isoformat(), "age_hours": 20.02, "running_executions": [],
        "last_activity": created.isoformat(), "idle_hours": 30.5, "deadline": deadline, "due": False,
        "action": "kept", "why": f"idle until {deadline}"}
    assert _status(world, stack_id) == "CREATE_COMPLETE"


def test_the_guard_turned_off_sets_no_deadline_however_long_fsx_sits_idle(world):
    """With fsxIdleHours=0 the record has no deadline and is never due, even long after the last activity."""
    cfn, sfn = world.c["cloudformation"], world.c["stepfunctions"]
    stack_id, created = _stack(world, "Off-Fsx")
    quiet = blockers_machine(world, "OffQuiet", {})
    off = fsx_guard.guard(cfn, sfn, "Off-Fsx", quiet, 0.0, now=created + 100 * H)
    assert (off["deadline"], off["due"], off["action"], off["why"]) == (
        None, False, "kept", "the idle guard is off (fsxIdleHours=0)")
    assert _status(world, stack_id) == "CREATE_COMPLETE"


def test_the_latest_ended_execution_sets_the_deadline_and_the_stack_goes_exactly_then(world):
    """The last activity is the latest stop among the newest executions (not the newest started's, and not a running
    one's): kept one second before idle_hours after it, deleted at that very moment, saying since when."""
    cfn = world.c["cloudformation"]
    stack_id, created = _stack(world, "Ended-Fsx")
    sfn = Executions([{"name": "e3", "status": "SUCCEEDED", "stopDate": created + H},
                      {"name": "e2", "status": "FAILED", "stopDate": created + 3 * H},
                      {"name": "e1", "status": "ABORTED", "stopDate": created + 0.5 * H}])
    ended = (created + 3 * H).isoformat()
    early = fsx_guard.guard(cfn, sfn, "Ended-Fsx", "arn:machine", 2.0, now=created + 5 * H - dt.timedelta(seconds=1))
    assert (early["action"], early["why"], early["last_activity"], early["due"]) == (
        "kept", f"idle until {(created + 5 * H).isoformat()}", ended, False)
    assert _status(world, stack_id) == "CREATE_COMPLETE"
    due = fsx_guard.guard(cfn, sfn, "Ended-Fsx", "arn:machine", 2.0, now=created + 5 * H)
    assert (due["action"], due["why"], due["due"]) == ("deleted", f"no workflow execution for 2 hours (since {ended})",
                                                       True)
    assert _status(world, stack_id) == "DELETE_COMPLETE"


def test_a_stack_updated_after_the_last_execution_ended_restarts_the_idle_clock(world):
    """A stack change (LastUpdatedTime) later than any execution's end is the last activity: the deadline counts
    from it and FSx is kept until then."""
    stack_id, created = _stack(world, "Updated-Fsx")
    cfn = StackAnswers(world.c["cloudformation"], LastUpdatedTime=created + 4 * H)
    sfn = Executions([{"name": "e1", "status": "SUCCEEDED", "stopDate": created + 3 * H}])
    kept = fsx_guard.guard(cfn, sfn, "Updated-Fsx", "arn:machine", 2.0, now=created + 5 * H)
    assert (kept["action"], kept["why"], kept["last_activity"], kept["created"]) == (
        "kept", f"idle until {(created + 6 * H).isoformat()}", (created + 4 * H).isoformat(), created.isoformat())
    assert _status(world, stack_id) == "CREATE_COMPLETE"


def test_a_stack_whose_update_is_in_progress_is_left_alone_even_when_due(world):
    """An FSx stack in a *_IN_PROGRESS status is neither deleted nor kept by the guard: no action, naming the status."""
    stack_id, created = _stack(world, "Busy-Fsx")
    cfn = StackAnswers(world.c["cloudformation"], StackStatus="UPDATE_IN_PROGRESS")
    quiet = blockers_machine(world, "BusyQuiet", {})
    busy = fsx_guard.guard(cfn, world.c["stepfunctions"], "Busy-Fsx", quiet, 2.0, now=created + 3 * H)
    assert (busy["action"], busy["why"], busy["stack_status"], busy["due"]) == (
        "none", "the FSx stack is UPDATE_IN_PROGRESS", "UPDATE_IN_PROGRESS", True)
    assert _status(world, stack_id) == "CREATE_COMPLETE"


def test_a_due_stack_deployed_without_a_service_role_is_kept_with_the_fix(world):
    """Deleting a stack deployed without a CloudFormation service role would use the guard's own permissions: the
    stack is kept and the reason names the fix. Its record shows no role, and no file system where the stack has no
    FsxFileSystemId output."""
    cfn, sfn, sagemaker = world.c["cloudformation"], world.c["stepfunctions"], world.c["sagemaker"]
    stack_id, created = _stack(world, "Roleless-Fsx", role=False, output=False)
    quiet = blockers_machine(world, "RolelessQuiet", {})
    kept = fsx_guard.guard(cfn, sfn, "Roleless-Fsx", quiet, 2.0, now=created + 3 * H, sagemaker=sagemaker)
    assert (kept["action"], kept["due"], kept["service_role"], kept["file_system_id"]) == ("kept", True, None, "")
    assert kept["why"] == (
        "the FSx stack was deployed without a CloudFormation service role, so deleting it would use this function's "
        "own permissions, which cannot delete a file system (the stack would end DELETE_FAILED and FSx would go on "
        "billing): delete it with your credentials, `dslab fsx down`, and deploy it again with the CDK bootstrap's "
        "role (`make fsx-up`)")
    assert _status(world, stack_id) == "CREATE_COMPLETE"


def test_a_deleted_stack_is_fsx_down_whether_named_or_looked_up_by_its_id(world):
    """Once deleted, the stack is FSx down: by its name (it no longer exists) and by its ID (DELETE_COMPLETE), and
    where DescribeStacks lists no stack at all. The record names what was looked up."""
    cfn, sfn = world.c["cloudformation"], world.c["stepfunctions"]
    stack_id, created = _stack(world, "Gone-Fsx")
    cfn.delete_stack(StackName="Gone-Fsx")
    assert _status(world, stack_id) == "DELETE_COMPLETE"
    for looked_up in ("Gone-Fsx", stack_id):
        assert fsx_guard.guard(cfn, sfn, looked_up, "", 2.0, now=created + 3 * H) == {
            "up": False, "stack": looked_up, "action": "none", "why": "FSx is down"}

    class NoStacks(StackAnswers):
        def describe_stacks(self, **kwargs):
            return {"Stacks": []}
    assert fsx_guard.idle_status(NoStacks(cfn), sfn, "Listed-Fsx", "", 2.0) == {"up": False, "stack": "Listed-Fsx"}


def test_a_training_job_reading_the_file_system_keeps_it_until_the_job_ends(world):
    """A due FSx is kept while an InProgress training job reads its file system (a channel's FileSystemDataSource,
    not the first channel), naming the job; jobs reading S3, another file system or nothing do not keep it. Once the
    job has ended the stack is deleted."""
    from moto.sagemaker.models import sagemaker_backends
    cfn, sfn, sagemaker = world.c["cloudformation"], world.c["stepfunctions"], world.c["sagemaker"]
    jobs = sagemaker_backends[ACCOUNT][REGION].training_jobs
    s3_channel = {"ChannelName": "train", "DataSource": {"S3DataSource": {
        "S3DataType": "S3Prefix", "S3Uri": "s3://b/datasets/tiny/", "S3DataDistributionType": "FullyReplicated"}}}

    def fsx_channel(fs_id):
        return {"ChannelName": "fsx", "DataSource": {"FileSystemDataSource": {
            "FileSystemId": fs_id, "FileSystemAccessMode": "ro", "FileSystemType": "FSxLustre",
            "DirectoryPath": "/abcdefgh/datasets/tiny"}}}
    for name, channels in (("reads-other-fs", [fsx_channel("fs-0123456789abcdef0")]), ("reads-nothing", None),
                           ("reads-fsx", [s3_channel, fsx_channel(world.fsx_id)])):
        world.training_job(name, "InProgress")
        jobs[name].input_data_config = channels
    stack_id, created = _stack(world, "Read-Fsx")
    quiet = blockers_machine(world, "ReadQuiet", {})
    try:
        kept = fsx_guard.guard(cfn, sfn, "Read-Fsx", quiet, 2.0, now=created + 3 * H, sagemaker=sagemaker)
        assert (kept["action"], kept["why"]) == ("kept", "training job reads-fsx reads it (InProgress)")
        assert _status(world, stack_id) == "CREATE_COMPLETE"
        jobs["reads-fsx"].training_job_status = "Completed"
        deleted = fsx_guard.guard(cfn, sfn, "Read-Fsx", quiet, 2.0, now=created + 3 * H, sagemaker=sagemaker)
        assert deleted["action"] == "deleted"
        assert _status(world, stack_id) == "DELETE_COMPLETE"
    finally:
        for name in ("reads-other-fs", "reads-nothing", "reads-fsx"):
            jobs[name].training_job_status = "Completed"


def test_every_running_execution_is_found_beyond_the_first_page_of_the_listing(world):
    """All RUNNING executions keep FSx, however many: 101 of them span two pages of ListExecutions and the record
    lists each one."""
    cfn = world.c["cloudformation"]
    stack_id, created = _stack(world, "Crowded-Fsx")
    names = {f"crowd-{i:03d}" for i in range(101)}
    crowded = blockers_machine(world, "Crowded", dict.fromkeys(names))
    kept = fsx_guard.guard(cfn, world.c["stepfunctions"], "Crowded-Fsx", crowded, 2.0, now=created + 3 * H)
    assert kept["action"] == "kept" and kept["why"].startswith("execution crowd-")
    assert len(kept["running_executions"]) == 101 and set(kept["running_executions"]) == names
    assert _status(world, stack_id) == "CREATE_COMPLETE"
