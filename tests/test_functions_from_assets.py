"""What deploys is what runs: the stand-in invokes each Lambda function from the code CloudFormation deployed (the
asset the synthesis wrote to cdk.out), in an interpreter of its own whose import path holds that asset, the standard
library and the runtime's boto3, and nothing else (dslab/emulator/functions.py); environments stay warm.

A module the asset lacks fails here as it fails on AWS: a checkpoint trial's Plan imported ``dslab_train``, which the
asset lacked, and `make lab` could not see it while the stand-in imported each handler from the repository."""

from __future__ import annotations

import io
import json
import shutil
import threading
import time
import zipfile
from pathlib import Path
from types import SimpleNamespace

import pytest

from dslab.emulator import functions
from dslab.emulator.functions import FunctionRuntime, sdk_versions
from dslab.inputs.experiment_file import load_experiment

from .conftest import REPO
from .scripted_jobs import ScriptedJobs

CHECKPOINT_TRIAL = "llama3-8b-checkpoints"


def zipped(files: dict[str, str]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, text in files.items():   # fixed times: the same files are the same bytes, as CDK's assets are
            archive.writestr(zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0)), text)
    return buffer.getvalue()


def function(source: str, *, handler: str = "index.handler", name: str = "probe", **env) -> SimpleNamespace:
    """A function as moto's Lambda keeps it (what CreateFunction took), holding ``source`` as index.py."""
    return SimpleNamespace(run_time="python3.14", function_name=name, handler=handler,
                           function_arn=f"arn:aws:lambda:us-east-1:123456789012:function:{name}",
                           code_bytes=zipped({"index.py": source}), memory_size=128, timeout=30,
                           environment_vars=env, region="us-east-1")


@pytest.fixture
def runtime():
    service = FunctionRuntime()
    yield service
    service.close()


PROBE = """
import os, sys
CALLS = []
def handler(event, context):
    CALLS.append(event)
    print("log line", len(CALLS))
    return {"path": sys.path, "calls": len(CALLS), "env": dict(os.environ), "pid": os.getpid(),
            "remaining": context.get_remaining_time_in_millis(), "name": context.function_name}
"""


def test_a_function_imports_only_its_asset_the_standard_library_and_the_runtimes_sdk(runtime):
    answer = runtime.invoke(function(PROBE, LAB_SETTING="x"), {"n": 1}, {"DSLAB_TIME_SCALE": "0.5"})
    assert not answer.error, answer.payload
    result = answer.answer
    task_root, runtime_dir = result["path"][:2]
    assert sorted(p.name for p in Path(task_root).iterdir() if p.name != "__pycache__") == ["index.py"]
    # The runtime's folder holds boto3's closure and nothing else: no PyYAML, no jsonschema, no dslab.
    assert {p.name for p in Path(runtime_dir).iterdir()} - {"__pycache__"} == {"boto3", "botocore", "s3transfer", "jmespath",
                                                             "dateutil", "urllib3", "six.py"}
    import sysconfig
    stdlib = {sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["platstdlib"]}
    rest = result["path"][2:]
    assert all(Path(p).is_relative_to(Path(sysconfig.get_paths()["stdlib"]).parent) for p in rest), rest
    assert not any("site-packages" in p or str(REPO) in p for p in result["path"]), result["path"]
    assert stdlib & set(rest)
    env = result["env"]
    assert env["LAB_SETTING"] == "x" and env["DSLAB_TIME_SCALE"] == "0.5"                  # its own, the stand-in's
    assert env["AWS_EXECUTION_ENV"] == "AWS_Lambda_python3.14" and env["_HANDLER"] == "index.handler"
    assert env["AWS_LAMBDA_FUNCTION_NAME"] == result["name"] == "probe"
    assert not any(k.startswith("PYTHON") or k == "VIRTUAL_ENV" for k in env), env   # nothing of this process
    assert 0 < result["remaining"] <= 30_000
    assert answer.logs == "log line 1\n"


@pytest.mark.parametrize("source, error_type, words", [
    ("import yaml\ndef handler(e, c): return 1\n", "Runtime.ImportModuleError",
     "Unable to import module 'index': No module named 'yaml'"),
    ("import jsonschema\ndef handler(e, c): return 1\n", "Runtime.ImportModuleError",
     "Unable to import module 'index': No module named 'jsonschema'"),
    ("import dslab\ndef handler(e, c): return 1\n", "Runtime.ImportModuleError",
     "Unable to import module 'index': No module named 'dslab'"),
    ("def other(e, c): return 1\n", "Runtime.HandlerNotFound", "Handler 'handler' missing on module 'index'"),
])
def test_what_the_asset_or_the_runtime_lacks_fails_the_invocation_as_lambda_says(runtime, source, error_type, words):
    answer = runtime.invoke(function(source), {}, {})
    assert answer.error and answer.answer["errorType"] == error_type and answer.answer["errorMessage"] == words


def test_a_handlers_error_is_the_invocations_error_with_its_log(runtime):
    answer = runtime.invoke(function("def handler(e, c):\n    print('before')\n    raise ValueError('bad event')\n"),
                            {}, {})
    assert answer.error and answer.answer["errorType"] == "ValueError" and answer.answer["errorMessage"] == "bad event"
    assert answer.logs.startswith("before\nTraceback") and "ValueError: bad event" in answer.logs


def test_a_warm_function_keeps_its_module_state_and_answers_in_milliseconds(runtime):
    probe = function(PROBE)
    started = time.perf_counter()
    first = runtime.invoke(probe, {"n": 1}, {}).answer
    cold = time.perf_counter() - started
    started = time.perf_counter()
    second = runtime.invoke(probe, {"n": 2}, {}).answer
    warm = time.perf_counter() - started
    assert runtime.cold_starts == 1 and runtime.environments() == 1
    assert second["pid"] == first["pid"] and (first["calls"], second["calls"]) == (1, 2)   # the module's state kept
    print(f"cold start {cold * 1000:.0f} ms, warm invocation {warm * 1000:.1f} ms")
    assert warm < cold / 5 and warm < 0.1, (cold, warm)


def test_overlapping_invocations_get_environments_of_their_own_then_reuse_them(runtime):
    slow = function("import os, time\ndef handler(e, c):\n    time.sleep(0.3)\n    return os.getpid()\n")
    pids: list[int] = []
    threads = [threading.Thread(target=lambda: pids.append(runtime.invoke(slow, {}, {}).answer)) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(set(pids)) == 2 and runtime.cold_starts == 2
    assert runtime.invoke(slow, {}, {}).answer in pids and runtime.cold_starts == 2


def test_a_prewarm_is_not_waited_for_and_the_first_invocation_takes_its_environment(runtime):
    """prewarm returns at once (the environment starts in a thread of its own); an invocation that comes before it is
    ready waits for it rather than starting another."""
    probe = function(PROBE)
    started = time.perf_counter()
    runtime.prewarm(probe, {})
    assert time.perf_counter() - started < 0.1
    first = runtime.invoke(probe, {"n": 1}, {}).answer
    assert runtime.cold_starts == 1 and runtime.environments() == 1 and first["calls"] == 1
    assert runtime.invoke(probe, {"n": 2}, {}).answer["pid"] == first["pid"]


def test_a_prewarmed_environment_nobody_took_is_idle_and_close_waits_for_one_still_starting(runtime):
    probe = function(PROBE)
    runtime.prewarm(probe, {})
    runtime.close()   # while it may still be starting: none is left after the close
    assert runtime.environments() == 0
    runtime.prewarm(probe, {})
    runtime._starters[-1].join(30)
    assert runtime.environments() == 1
    runtime.invoke(probe, {}, {})
    assert runtime.cold_starts == 2 and runtime.environments() == 1


def test_a_changed_environment_or_code_is_a_new_environment(runtime):
    probe = function(PROBE)
    runtime.invoke(probe, {}, {"DSLAB_TIME_SCALE": "1"})
    runtime.invoke(probe, {}, {"DSLAB_TIME_SCALE": "2"})
    runtime.invoke(function(PROBE + "\n# new code\n"), {}, {"DSLAB_TIME_SCALE": "2"})
    assert runtime.cold_starts == 3


def test_a_runtime_that_exits_is_an_exit_error_and_the_next_invocation_starts_afresh(runtime):
    dying = function("import os\ndef handler(e, c):\n    os._exit(3)\n")
    answer = runtime.invoke(dying, {}, {})
    assert answer.error and answer.answer == {"errorType": "Runtime.ExitError",
                                              "errorMessage": "Runtime exited with error: exit status 3"}
    assert runtime.environments() == 0


def test_an_injected_aws_error_reaches_a_call_the_function_makes():
    """The stand-in's fault hook (HOOKS.api_fault) answers calls made in a function's own interpreter too, in the
    service's protocol, so botocore there raises the ClientError AWS would cause."""
    from dslab.emulator.patches.services import function_fault
    from dslab.emulator.patches.hooks import HOOKS
    source = ("import boto3\nfrom botocore.config import Config\n"
              "def handler(e, c):\n"
              "    s3 = boto3.client('s3', region_name='us-east-1', endpoint_url='http://127.0.0.1:9',\n"
              "                      config=Config(retries={'max_attempts': 1}))\n"
              "    try:\n        s3.get_object(Bucket='b', Key='k')\n"
              "    except s3.exceptions.ClientError as err:\n        return err.response['Error']\n")
    seen = []
    HOOKS.api_fault = lambda service, operation, request: seen.append((service, operation, request.method,
                                                                      request.function)) or \
        (403, "AccessDenied", "not for you")
    service = FunctionRuntime()
    try:
        answer = service.invoke(function(source), {}, {}, fault=function_fault)
    finally:
        HOOKS.api_fault = None
        service.close()
    assert {k: answer.answer[k] for k in ("Code", "Message")} == {"Code": "AccessDenied", "Message": "not for you"}
    assert seen == [("s3", "GetObject", "GET", "index.handler")]   # the call, and the function that made it


def test_the_runtimes_sdk_is_the_pinned_one():
    pins = dict(line.split("==") for line in (REPO / "requirements.txt").read_text().splitlines()
                if "==" in line and not line.startswith("#"))
    versions = sdk_versions()
    assert versions["boto3"] == pins["boto3"] and versions["botocore"] == pins["botocore"]


def test_the_stacks_functions_use_the_runtime_the_stand_in_runs(bound_lab):
    """Every Python function is on the runtime the stand-in emulates; the one Node.js function is CDK's own provider
    for Custom::VpcRestrictDefaultSG, which the stand-in answers with a Python equivalent (providers/custom.py)."""
    from dslab.emulator.cloudformation.providers.custom import NODE_HANDLERS
    found = [(resource["Properties"].get("Runtime"), logical_id)
             for stack in bound_lab.template_files()
             for logical_id, resource in json.loads(stack.read_text())["Resources"].items()
             if resource["Type"] == "AWS::Lambda::Function"]
    assert {runtime for runtime, _ in found if runtime.startswith("python")} == {functions.RUNTIME}
    node = [logical_id for runtime, logical_id in found if not runtime.startswith("python")]
    assert len(node) == 1 and node[0].startswith("CustomVpcRestrictDefaultSGCustomResourceProvider")
    assert "Custom::VpcRestrictDefaultSG" in NODE_HANDLERS


# ---- the deployed lab --------------------------------------------------------------------------------------------

def checkpoint_document() -> dict:
    experiment = load_experiment(REPO / "experiments" / "local.yaml")
    document = dict(experiment.document)
    document["trials"] = [t for t in document["trials"] if t.get("name") == CHECKPOINT_TRIAL]
    return document


def invoke_plan(lab, document: dict) -> dict:
    names = [f["FunctionName"] for f in lab.client("lambda").list_functions()["Functions"]
             if f.get("Handler") == "dslab.workflow.handlers.plan"]
    answer = lab.client("lambda").invoke(FunctionName=names[0],
                                         Payload=json.dumps({"experiment": document, "execution": "exec-assets"}))
    return json.loads(answer["Payload"].read())


def test_a_checkpoint_trial_plans_from_the_deployed_asset(emulated):
    with emulated(ScriptedJobs()) as lab:
        answer = invoke_plan(lab, checkpoint_document())
        assert "error" not in answer["plan"], answer["plan"]
        stored = lab.read_json(answer["plan"]["plan_key"])
    # experiments/local.yaml's trial on AWS: four targets (the S3 sync, the Express sync, FSx, EFS), each a writer and
    # its restore right after it
    assert answer["plan"]["job_count"] == 8 and len(stored["jobs"]) == 8
    assert json.dumps(stored["jobs"]).count(CHECKPOINT_TRIAL) >= 8


def lambda_asset(assembly: Path) -> Path:
    """The asset folder in cdk.out holding the workflow's functions (dslab/workflow/handlers.py)."""
    found = [p for p in assembly.glob("asset.*") if (p / "dslab" / "workflow" / "handlers.py").is_file()]
    assert len(found) == 1, found
    return found[0]


def test_a_module_the_asset_lacks_fails_plan_as_it_would_on_aws(bound_lab, tmp_path):
    """The run-breaker of issue 54, made again: the asset without dslab_train (the checkpoint layout). The deployed
    Plan cannot import it, and the execution fails at Plan, before any job."""
    assembly = tmp_path / "cdk.out"
    shutil.copytree(bound_lab.outdir, assembly)
    shutil.rmtree(lambda_asset(assembly) / "dslab_train")
    from dslab.emulator.lab import EmulatedLab
    with EmulatedLab(assembly, executor=ScriptedJobs(), efs_root=tmp_path / "efs", time_scale=0.001) as lab:
        answer = invoke_plan(lab, checkpoint_document())
    # The core imports the layout when it parses a checkpoint workload: Plan catches that, as any failure, and the
    # execution fails with PlanFailed naming the module.
    assert answer["plan"]["error"] == "PlanFailed" and answer["lanes"] == [], answer
    assert "No module named 'dslab_train'" in answer["plan"]["failed"], answer


def test_the_functions_run_the_bytes_cdk_wrote(emulated, bound_lab):
    """Every function's code in the stand-in is its asset from cdk.out, zipped as the CLI zips a folder."""
    from dslab.emulator.deploy import _zip_directory
    with emulated(ScriptedJobs()) as lab:
        client = lab.client("lambda")
        deployed = {f["Handler"]: client.get_function(FunctionName=f["FunctionName"])["Configuration"]["CodeSha256"]
                    for f in client.list_functions()["Functions"]}
    import base64
    import hashlib
    workflow_asset = _zip_directory(lambda_asset(bound_lab.outdir))
    expected = base64.b64encode(hashlib.sha256(workflow_asset).digest()).decode()
    handlers = [h for h in deployed if h.startswith("dslab.workflow.handlers.")]
    assert len(handlers) >= 5 and {deployed[h] for h in handlers} == {expected}


def test_an_error_raised_from_none_is_not_told_as_the_aws_error_it_replaced():
    """`dslab local` whose workflow ended without results says why (Step Functions' error and cause), not the
    S3 NoSuchKey of the results it then could not read (`raise ... from None` is not followed); a wrapped AWS error
    (boto3's S3UploadFailedError) still is."""
    from botocore.exceptions import ClientError

    from dslab.cli.common import find_client_error
    from dslab.local.lab import WorkflowFailed
    missing = ClientError({"Error": {"Code": "NoSuchKey", "Message": "The specified key does not exist."}}, "GetObject")
    try:
        try:
            raise missing
        except ClientError:
            raise WorkflowFailed("the workflow ended FAILED without results: PlanFailed: ...") from None
    except WorkflowFailed as failed:
        assert find_client_error(failed) is None
    try:
        try:
            raise missing
        except ClientError as err:
            raise RuntimeError("upload failed") from err
    except RuntimeError as wrapped:
        assert find_client_error(wrapped) is missing



def test_an_upload_that_failed_is_told_as_its_aws_error_even_where_its_context_was_replaced(capsys):
    """boto3's S3UploadFailedError quotes the ClientError it caught. Re-raised while another error is handled, it takes
    that one as its context: the AWS error is then read back from its words (code, operation, retries, message), and
    `dslab` prints one line with the fix, exit 2, not a traceback (a CI run once met this)."""
    from boto3.exceptions import S3UploadFailedError

    from dslab.cli import _aws_error
    from dslab.cli.common import find_client_error
    words = ("Failed to upload code.tar.gz to bucket/code/abc.tar.gz: An error occurred (EncryptionTypeMismatch) when "
             "calling the PutObject operation: The encryption type does not match the bucket's")
    try:
        try:
            raise KeyError("another error being handled")
        except KeyError:
            raise S3UploadFailedError(words)
    except S3UploadFailedError as err:
        failed = err
    found = find_client_error(failed)
    assert found.operation_name == "PutObject"
    assert found.response["Error"] == {"Code": "EncryptionTypeMismatch",
                                       "Message": "The encryption type does not match the bucket's"}
    assert "EncryptionTypeMismatch" in _aws_error(failed)
    retried = S3UploadFailedError("Failed to upload x to b/k: An error occurred (SlowDown) when calling the PutObject "
                                  "operation (reached max retries: 4): Please reduce your request rate.")
    assert find_client_error(retried).response["ResponseMetadata"]["RetryAttempts"] == 4
    assert find_client_error(S3UploadFailedError("Failed to upload x to b/k: the disk is full")) is None
    assert find_client_error(RuntimeError("An error occurred (X) when calling the Y operation: z")) is None

def test_the_functions_code_goes_with_their_stand_in():
    """Each stand-in unzips its functions' code once per content, and removes it when it closes: repeated labs leave
    no code behind."""
    service = FunctionRuntime()
    try:
        first = service.invoke(function(PROBE), {}, {}).answer
        again = service.invoke(function(PROBE, OTHER="1"), {}, {}).answer   # another environment, the same code
        task_root = Path(first["path"][0])
        assert again["path"][0] == first["path"][0] and task_root.is_dir()
    finally:
        service.close()
    assert not task_root.exists() and not task_root.parent.exists()
