"""The operator commands: plan, run, status, report, estimate, recommend, export, fsx, local."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any, Callable

from .core.errors import ConfigError
from .core.requests import CORE_STACK, FSX_ID_PARAMETER, FSX_STACK, WORKFLOW_STACK

REPO = Path(__file__).resolve().parent.parent
BUILD_DIR = REPO / "build" / "user-code"  # packaged user code (dslab/user_code.py)
EXIT_BAD_INPUT = 2


def _print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")


def _prices(path: str | None):
    from .core.prices import PriceTable
    if not path:
        return PriceTable()
    from .experiment_file import read_document
    return PriceTable.with_overrides(read_document(Path(path)), source=path)


# ---- stack outputs -------------------------------------------------------------------------------

def outputs_from_file(path: Path) -> dict[str, str]:
    """Flatten `cdk deploy --outputs-file` JSON ({stack: {key: value}}) into one mapping."""
    from .experiment_file import read_json_file
    data = read_json_file(path, "--outputs")
    if not isinstance(data, dict):
        raise ConfigError("--outputs", f"{path} is not a cdk --outputs-file document ({{stack: {{output: value}}}})")
    flat: dict[str, str] = {}
    for stack_outputs in data.values():
        if isinstance(stack_outputs, dict):
            flat.update({k: str(v) for k, v in stack_outputs.items()})
    return flat


# The stand-in lab's stack outputs (what `cdk deploy` writes for the embedded stand-in's account): plan
# and export read them with --offline, to show the requests without an AWS account. A test compares the
# file's keys with the outputs the stand-in's CloudFormation reports after a deploy.
OFFLINE_OUTPUTS = Path(__file__).resolve().parent / "local" / "stand-in-outputs.json"
OFFLINE_HINT = "or add --offline to use the stand-in lab's outputs (no account needed)"
LOCAL_HINT = "offline, `make lab` (dslab local) runs the whole lab on the embedded stand-in, no account needed"


def lab_outputs(args) -> dict[str, str]:
    """The deployed lab's stack outputs: --outputs FILE, --offline (the stand-in's), else CloudFormation's."""
    offline = getattr(args, "offline", None)
    if offline:
        if args.outputs:
            raise ConfigError("--offline", "reads the stand-in lab's outputs: give --offline or --outputs, not both")
        print(f"offline: the stand-in lab's stack outputs ({OFFLINE_OUTPUTS.name}, account 123456789012, us-east-1); "
              "deploy the lab and drop --offline for your account's", file=sys.stderr)
        return outputs_from_file(OFFLINE_OUTPUTS)
    if getattr(args, "outputs", None):
        return outputs_from_file(Path(args.outputs))
    return outputs_from_cloudformation(_region(args), hint=OFFLINE_HINT if offline is not None else LOCAL_HINT)


def outputs_from_cloudformation(region: str | None = None, hint: str = LOCAL_HINT) -> dict[str, str]:
    import boto3
    from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError
    client = boto3.client("cloudformation", region_name=region)
    flat: dict[str, str] = {}
    try:
        for stack in (CORE_STACK, FSX_STACK, WORKFLOW_STACK):
            try:
                described = client.describe_stacks(StackName=stack)["Stacks"][0]
            except ClientError as err:
                if "does not exist" in str(err) and stack == FSX_STACK:
                    continue  # FSx is down: that is a state, not an error
                raise
            flat.update({o["OutputKey"]: o["OutputValue"] for o in described.get("Outputs", [])})
    except NoCredentialsError:
        raise ConfigError("AWS credentials", f"none found: set AWS_PROFILE (or AWS_ACCESS_KEY_ID and "
                          f"AWS_SECRET_ACCESS_KEY) for the lab's account; {hint}") from None
    except ClientError as err:
        if "does not exist" in str(err):
            raise ConfigError("stack", "DataSourceLab is not deployed in this account/region: run `make deploy FSX=up`; "
                              f"{hint}") from None
        raise ConfigError("AWS", f"{err.response['Error']['Code']}: {err.response['Error']['Message']}") from None
    except BotoCoreError as err:
        raise ConfigError("AWS", f"{err}") from None
    return flat


def environment_from_outputs(outputs: dict[str, str], region: str):
    from .core.requests import LabEnvironment
    missing = [k for k in ("BucketName", "SubnetId", "TrainingSecurityGroupId", "TrainingRoleArn", "TrainingCodeUri",
                           "TrainingImageUri") if k not in outputs]
    if missing:
        raise ConfigError("--outputs", f"stack outputs {', '.join(missing)} are missing; deploy the whole lab with "
                          "`make deploy FSX=up` (it writes cdk-outputs.json), or use --offline for the stand-in lab's")
    fsx = None
    if outputs.get("FsxFileSystemId") and outputs.get("FsxMountName"):
        fsx = {"file_system_id": outputs["FsxFileSystemId"], "mount_name": outputs["FsxMountName"]}
    return LabEnvironment.from_dict({
        "bucket": outputs["BucketName"], "region": region, "role_arn": outputs["TrainingRoleArn"],
        "subnet_ids": outputs["SubnetId"], "security_group_ids": outputs["TrainingSecurityGroupId"],
        "image_uri": outputs["TrainingImageUri"], "image_uri_cpu": outputs.get("TrainingImageUriCpu"),
        "image_uris": outputs.get("TrainingImageUris"),
        "code_uri": outputs["TrainingCodeUri"], "code_version": outputs.get("TrainingCodeVersion"),
        "fsx": fsx, "efs": {"file_system_id": outputs["EfsFileSystemId"]} if outputs.get("EfsFileSystemId") else None,
        "express_bucket": outputs.get("ExpressBucketName") or None,
    })


def _region(args) -> str:
    return getattr(args, "region", None) or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"


# ---- plan / run / status -------------------------------------------------------------------------

def cmd_plan(args) -> int:
    from .core.requests import plan
    from .experiment_file import load_experiment
    from . import user_code
    experiment = load_experiment(Path(args.experiment))
    outputs = lab_outputs(args)
    env = environment_from_outputs(outputs, _region(args))
    # The user's code is checked and packaged (not uploaded): the requests name where `dslab run` puts it.
    experiment = user_code.prepare(experiment, Path(args.experiment), env.bucket, BUILD_DIR)
    jobs = plan(experiment, env, args.execution)
    if args.json:
        _print_json({"experiment": experiment.document, "experiment_hash": experiment.content_hash,
                     "jobs": [{"name": j.name, "mode": j.spec.mode, "dataset": j.spec.dataset.name,
                               "repeat": j.spec.repeat, "request": j.request, "skip_reason": j.skip_reason} for j in jobs]})
        return 0
    print(f"experiment {experiment.name} ({experiment.content_hash}): {len(jobs)} jobs")
    for job in jobs:
        if job.request is None:
            print(f"  {job.name:60s} SKIPPED: {job.skip_reason}")
            continue
        channel = job.request["InputDataConfig"][0]
        source = channel["DataSource"].get("S3DataSource", {}).get("S3Uri") or channel["DataSource"]["FileSystemDataSource"]["DirectoryPath"]
        print(f"  {job.name:60s} {job.spec.mode:8s} {job.request['ResourceConfig']['InstanceType']:16s} {source}")
    print("(--json prints the complete CreateTrainingJob requests)")
    return 0


def _sfn(region: str):
    import boto3
    return boto3.client("stepfunctions", region_name=region)


def _workflow(args) -> tuple[str, str | None]:
    """(state machine ARN, bucket) of the deployed lab."""
    outputs = lab_outputs(args)
    if "StateMachineArn" not in outputs:
        raise ConfigError("stack", "the DataSourceLab workflow stack has no StateMachineArn output: run `make deploy FSX=keep`")
    return outputs["StateMachineArn"], outputs.get("BucketName")


def cmd_run(args) -> int:
    from .experiment_file import load_experiment
    from . import user_code
    experiment = load_experiment(Path(args.experiment))
    user_code.package(experiment, Path(args.experiment).resolve().parent, BUILD_DIR)  # refuse bad code before any AWS call
    arn, bucket = _workflow(args)
    from botocore.exceptions import ClientError, NoCredentialsError
    try:
        if any(t.script is not None and t.script.source_dir for t in experiment.trials):
            if not bucket:
                raise ConfigError("stack", "the DataSourceLab stack has no BucketName output to upload the script to: "
                                  "run `make deploy FSX=keep`")
            import boto3
            experiment = user_code.prepare(experiment, Path(args.experiment), bucket, BUILD_DIR,
                                           s3_client=boto3.client("s3", region_name=_region(args)))
        # A readable, unique execution name: it names the results folder, results/<name>/.
        name = f"{experiment.name}-{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}-{uuid.uuid4().hex[:6]}"[:80]
        started = _sfn(_region(args)).start_execution(stateMachineArn=arn, name=name, input=json.dumps(experiment.document))
    except NoCredentialsError:
        raise ConfigError("AWS credentials", "none found: set AWS_PROFILE or keys") from None
    except ClientError as err:
        raise ConfigError("AWS", f"{err.response['Error']['Code']}: {err.response['Error']['Message']}") from None
    execution = started["executionArn"]
    print(f"started {execution}")
    if args.wait:
        return watch(execution, _region(args), bucket)
    print(f"follow it with: dslab status {execution}")
    return 0


def describe_progress(execution_arn: str, region: str, bucket: str | None = None) -> dict[str, Any]:
    """Jobs by state and spend so far: the plan Plan stored lists the execution's jobs."""
    import boto3
    from .core.prices import PriceTable
    sfn = _sfn(region)
    sagemaker = boto3.client("sagemaker", region_name=region)
    described = sfn.describe_execution(executionArn=execution_arn)
    name = described.get("name") or execution_arn.rsplit(":", 1)[-1]
    counts: dict[str, int] = {}
    spend = 0.0
    prices = PriceTable()
    jobs: list[dict[str, Any]] = []
    if bucket:
        try:
            plan_document = json.loads(boto3.client("s3", region_name=region).get_object(
                Bucket=bucket, Key=f"results/{name}/plan.json")["Body"].read())
            jobs = plan_document["jobs"]
        except Exception:
            jobs = []  # Plan has not written it yet
    for job in jobs:
        if job.get("skip_reason"):
            counts["Skipped"] = counts.get("Skipped", 0) + 1
            continue
        try:
            state = sagemaker.describe_training_job(TrainingJobName=job["name"])
        except Exception:
            counts["Pending"] = counts.get("Pending", 0) + 1
            continue
        counts[state["TrainingJobStatus"]] = counts.get(state["TrainingJobStatus"], 0) + 1
        hourly = prices.instance_hourly(state["ResourceConfig"]["InstanceType"]) or 0.0
        seconds = state.get("BillableTimeInSeconds")
        start = state.get("TrainingStartTime")
        if seconds is None and hasattr(start, "timestamp"):
            seconds = (time.time() - start.timestamp()) * state["ResourceConfig"]["InstanceCount"]
        spend += hourly * (seconds or 0) / 3600
    stop = described.get("stopDate")
    end = stop.timestamp() if hasattr(stop, "timestamp") else time.time()
    elapsed = end - described["startDate"].timestamp() if hasattr(described.get("startDate"), "timestamp") else 0.0
    return {"execution": execution_arn, "status": described["status"], "jobs": counts, "spend_usd": round(spend, 4),
            "elapsed_seconds": round(elapsed), "results": f"s3://{bucket or '<bucket>'}/results/{name}/results.json",
            "error": described.get("error"), "cause": described.get("cause")}


def watch(execution_arn: str, region: str, bucket: str | None = None) -> int:
    from rich.live import Live
    from rich.table import Table

    def render(state) -> Table:
        table = Table(title=f"{state['execution'].rsplit(':', 1)[-1]}: {state['status']}")
        for column in ("elapsed", "jobs by state", "spend so far"):
            table.add_column(column)
        table.add_row(f"{state['elapsed_seconds']} s", ", ".join(f"{k} {v}" for k, v in sorted(state["jobs"].items())) or "-",
                      f"${state['spend_usd']:.2f}")
        return table

    try:
        state = describe_progress(execution_arn, region, bucket)
        with Live(render(state), refresh_per_second=1) as live:
            while state["status"] == "RUNNING":
                time.sleep(15)
                state = describe_progress(execution_arn, region, bucket)
                live.update(render(state))
    except KeyboardInterrupt:
        print(f"\nstopped watching; the execution keeps running. Reattach with: dslab status {execution_arn} --wait")
        return 130
    print(f"{state['status']}: results in {state['results']}" + (f" ({state['error']}: {state['cause']})" if state.get("error") else ""))
    return 0 if state["status"] == "SUCCEEDED" else 1


def cmd_status(args) -> int:
    region = _region(args)
    execution = args.execution
    arn, bucket = _workflow(args)
    if not execution:
        executions = _sfn(region).list_executions(stateMachineArn=arn, maxResults=1)["executions"]
        if not executions:
            raise ConfigError("EXECUTION", "the workflow has no executions yet: start one with dslab run")
        execution = executions[0]["executionArn"]
    if args.wait:
        return watch(execution, region, bucket)
    state = describe_progress(execution, region, bucket)
    if args.json:
        _print_json(state)
    else:
        print(f"{state['status']}: {state['elapsed_seconds']} s, jobs {state['jobs']}, spend ${state['spend_usd']:.2f}; "
              f"results: {state['results']}")
    return 0


# ---- report --------------------------------------------------------------------------------------

def cmd_report(args) -> int:
    from .report import load_results, results_from_describe_dir, write_report
    chosen = [x for x in (args.execution, args.results, args.describe_json) if x]
    if len(chosen) != 1:
        raise ConfigError("EXECUTION | --results | --describe-json", "give exactly one source of results")
    prices = _prices(args.prices)
    if args.results:
        results = load_results(Path(args.results))
    elif args.describe_json:
        results = results_from_describe_dir(Path(args.describe_json), prices)
    else:
        results = _results_from_execution(args.execution, _region(args))
    paths = write_report(results, Path(args.out))
    print(f"report written to {args.out}: " + ", ".join(p.name for p in paths.values()))
    return 0


def _results_from_execution(execution: str, region: str) -> dict[str, Any]:
    import boto3
    outputs = outputs_from_cloudformation(region)
    name = execution.rsplit(":", 1)[-1]
    try:
        body = boto3.client("s3", region_name=region).get_object(
            Bucket=outputs["BucketName"], Key=f"results/{name}/results.json")["Body"].read()
    except Exception as err:
        raise ConfigError("EXECUTION", f"no results for {name} in s3://{outputs['BucketName']}/results/{name}/ ({type(err).__name__})") from None
    return json.loads(body)


# ---- estimate / recommend ------------------------------------------------------------------------

def _shape(args):
    from .core.estimate import DatasetShape
    if args.dataset and (args.files or args.bytes):
        raise ConfigError("--dataset", "give either --dataset or --files with --bytes, not both")
    if args.dataset:
        from .datasets import stats
        info = stats(args.dataset)
        return DatasetShape(files=info["files"], bytes=info["bytes"], samples=args.samples)
    if not (args.files and args.bytes):
        raise ConfigError("--files/--bytes", "give --dataset PATH|s3://..., or both --files N and --bytes B")
    from .datasets import parse_size
    return DatasetShape(files=args.files, bytes=parse_size(args.bytes, "--bytes"), samples=args.samples)


def _estimate_kwargs(args) -> dict[str, Any]:
    from .core.estimate import compute_rate
    if args.compute_rate is not None and args.compute_preset:
        raise ConfigError("--compute-rate", "give either --compute-rate or --compute-preset")
    rate, rate_note = compute_rate(args.compute_preset, args.compute_rate)
    args.instance = args.instance or "ml.p3.2xlarge"
    args.epochs = 1 if args.epochs is None else args.epochs
    from .validation import instance_type_problem
    if instance_type_problem(args.instance):
        raise ConfigError("--instance", instance_type_problem(args.instance))
    prices = _prices(args.prices)
    if prices.instance_hourly(args.instance) is None:
        prices.require_instance(args.instance, "--instance")
    return {"instance_type": args.instance, "epochs": args.epochs, "rate": rate, "prices": prices,
            "volume_size_gb": 100 if args.volume_size_gb is None else args.volume_size_gb}, rate_note


def cmd_estimate(args) -> int:
    from .core.estimate import estimate_all
    from .core.modes import MODES, canonical_mode
    shape = _shape(args)
    kwargs, rate_note = _estimate_kwargs(args)
    from .core.modes import EXPRESS, S3_MODES
    modes = MODES
    if args.mode:
        mode = canonical_mode(args.mode)
        if mode is None:
            raise ConfigError("--mode", f"unknown mode {args.mode!r}", MODES)
        modes = (mode,)
    if args.storage == "express":
        from .core.estimate import estimate_mode
        bad = [m for m in modes if m not in S3_MODES]
        if args.mode and bad:
            raise ConfigError("--storage", f"{bad[0]} reads its own file system, not S3 Express One Zone", list(S3_MODES))
        estimates = [estimate_mode(m, shape, storage=EXPRESS, **kwargs) for m in modes if m in S3_MODES]
    else:
        # Without --storage the S3 modes are shown on both buckets (unless one mode was asked for).
        estimates = estimate_all(shape, modes=modes, express=args.storage is None and not args.mode, **kwargs)
    for e in estimates:
        e.assumptions.insert(0, rate_note)
    from .core.decision import option_from_estimate, usd
    from .report import duration
    capacity = _lab_fsx_capacity(args)
    options = [option_from_estimate(e, shape, kwargs["prices"], fsx_capacity_gib=capacity,
                                    volume_size_gb=kwargs["volume_size_gb"]) for e in estimates]
    if args.json:
        _print_json({"estimates": [{**e.to_dict(), "setup": {"usd": round(o.setup.usd, 4), "seconds": round(o.setup.seconds, 1),
                                                             "what": o.setup.what},
                                    "cost_to_result_usd": round(o.cost_usd, 4), "time_to_result_seconds": round(o.seconds, 1)}
                                   for e, o in zip(estimates, options)], "prices": kwargs["prices"].label()})
        return 0
    print(f"{shape.files:,} files, {shape.bytes / 1e9:.2f} GB, {args.epochs} epoch(s) on {args.instance}; {rate_note}")
    print(f"{'source':17s} {'download':>9s} {'training':>9s} {'other':>7s} {'billable':>9s} {'job':>9s} {'set-up':>9s} "
          f"{'to a result':>11s} {'time':>8s}  bound")
    for e, o in sorted(zip(estimates, options), key=lambda pair: pair[1].cost_usd):
        print(f"{e.source:17s} {e.downloading:9.0f} {e.training:9.0f} {e.other:7.0f} {e.billable_seconds:9.0f} "
              f"{usd(o.job_usd):>9s} {usd(o.setup.usd):>9s} {usd(o.cost_usd):>11s} {duration(o.seconds):>8s}  {e.bound}")
    print("set-up: paid once per run before or beside the job (EFS: the DataSync copy; Express: the staging copy; "
          "FSx: its uptime while it imports); `dslab recommend` picks from these")
    print(kwargs["prices"].label())
    return 0


SOURCE_DESCRIPTIONS = {
    "File": "Amazon S3, File mode: the job copies the dataset onto its volume first",
    "FastFile": "Amazon S3, FastFile mode: the job streams files from S3 as it reads them",
    "Pipe": "Amazon S3, Pipe mode: the job reads each channel as one stream",
    "FSx": "FSx for Lustre linked to the S3 bucket",
    "EFS": "Amazon EFS, the dataset copied into it first",
}


def _describe_source(mode: str, storage: str) -> str:
    text = SOURCE_DESCRIPTIONS[mode]
    if storage == "express":
        text = text.replace("Amazon S3", "S3 Express One Zone (a directory bucket in the instances' zone)", 1)
    return text


def _lab_fsx_capacity(args=None) -> int:
    """FSx's size: --fsx-capacity, else the lab's deploy setting (cdk.json's fsxCapacity), else 1200 GiB."""
    from .core.limits import fsx_capacity_problem
    value = getattr(args, "fsx_capacity", None)
    if value is None:
        return int(lab_context().get("fsxCapacity") or 1200)
    if fsx_capacity_problem(value):
        raise ConfigError("--fsx-capacity", fsx_capacity_problem(value), "1200, 2400, 4800, ...")
    return value


def print_recommendation(rec, *, heading: str = "recommended") -> None:
    """A recommendation as `dslab recommend` prints it: the pick, why, the runner-up, the ranking, advice."""
    from .core.decision import usd, usd_difference
    from .report import duration
    d = rec.decision
    print(f"{heading}: {d.pick.source} ({_describe_source(d.pick.mode, d.pick.storage)}): {usd(d.pick.cost_usd)} per run, "
          f"{duration(d.pick.seconds)} to a result")
    print(f"  why: {d.why}")
    if d.runner_up is not None:
        print(f"  runner-up: {d.runner_up.source}: {usd(d.runner_up.cost_usd)} per run "
              f"({usd_difference(d.runner_up.cost_usd - d.pick.cost_usd)}), {duration(d.runner_up.seconds)} to a result")
    chart = "; ".join(rec.flowchart)
    agrees = "agrees" if rec.flowchart_source == d.pick.mode and d.pick.storage == "standard" else \
        f"the estimates pick {d.pick.source} instead, for the reason above"
    print(f"  the post's flowchart: {chart} ({agrees})")
    print("ranking by cost to a result (the job plus its set-up), cheapest first:")
    print(f"  {'#':>2s}  {'source':17s} {'job':>9s} {'set-up':>9s} {'to a result':>11s} {'time':>8s}  {'bound':8s} note")
    for i, o in enumerate(d.ranking, 1):
        print(f"  {i:2d}  {o.source:17s} {usd(o.job_usd):>9s} {usd(o.setup.usd):>9s} {usd(o.cost_usd):>11s} "
              f"{duration(o.seconds):>8s}  {o.bound or '-':8s} {d.note(o)}")
    for source, why in d.blocked.items():
        print(f"  --  {source:17s} cannot serve it: {why}")
    for line in rec.advice:
        print(f"advice: {line}")
    if rec.break_even is not None:
        print(f"FSx against Express FastFile, by epochs: {rec.break_even.sentence()}")


def cmd_recommend(args) -> int:
    from .core.recommend import recommend
    if args.experiment:
        return _recommend_experiment(args)
    shape = _shape(args)
    kwargs, rate_note = _estimate_kwargs(args)
    result = recommend(shape, random_access=args.random_access, data_in_efs=args.data_in_efs,
                       fsx_capacity_gib=_lab_fsx_capacity(args), **kwargs)
    if args.json:
        _print_json(result.to_dict())
        return 0
    print(f"{shape.files:,} files, {shape.bytes / 1e9:.2f} GB, {args.epochs} epoch(s) on {args.instance}; {rate_note}")
    print_recommendation(result)
    print(kwargs["prices"].label())
    return 0


def experiment_answers(experiment, prices=None, fsx_capacity_gib: int | None = None):
    """The estimated answer per scenario of an experiment: what recommend --experiment prints and what
    export exports by default (dslab/core/answers.py, as the report)."""
    from .core import answers
    from .core.prices import PriceTable
    return answers.estimated(experiment, prices or PriceTable(),
                             fsx_capacity_gib=fsx_capacity_gib if fsx_capacity_gib is not None else _lab_fsx_capacity())


def _recommend_experiment(args) -> int:
    from .experiment_file import load_experiment
    for flag in ("files", "bytes", "samples", "compute_rate", "compute_preset", "random_access", "data_in_efs", "instance",
                 "epochs", "volume_size_gb"):
        if getattr(args, flag, None):
            raise ConfigError(f"--{flag.replace('_', '-')}", "comes from the experiment file with --experiment; drop it")
    experiment = load_experiment(Path(args.experiment))
    found = experiment_answers(experiment, _prices(args.prices), _lab_fsx_capacity(args))
    names = sorted({a.scenario.dataset.name for a in found})
    if args.dataset and args.dataset not in names:
        raise ConfigError("--dataset", f"{args.dataset!r} is not a dataset of {args.experiment}", names)
    found = [a for a in found if not args.dataset or a.scenario.dataset.name == args.dataset]
    if args.json:
        _print_json({"experiment": experiment.name, "answers": [a.to_dict() for a in found]})
        return 0
    for a in found:
        print(f"== {a.scenario.label} (trials {', '.join(a.scenario.trial_names)}; sources the experiment runs)")
        if a.recommendation is None:
            print(f"no answer: {a.missing}")
            continue
        print_recommendation(a.recommendation)
        print()
    return 0


# ---- export --------------------------------------------------------------------------------------

def cmd_export(args) -> int:
    """One job of the experiment, as the lab would request it, printed as SageMaker Python SDK code."""
    from .core.modes import MODES, canonical_mode
    from .core.requests import plan
    from .experiment_file import load_experiment
    from .export import generate
    experiment = load_experiment(Path(args.experiment))
    datasets = {d.name: d for d in experiment.datasets}
    dataset = datasets.get(args.dataset or next(iter(datasets)))
    if dataset is None:
        raise ConfigError("--dataset", f"{args.dataset!r} is not a dataset of the experiment", sorted(datasets))
    readers = [t for t in experiment.trials if dataset.name in (d.name for d in t.datasets)]
    trials = [t for t in readers if not args.trial or t.name == args.trial]
    if not trials:
        raise ConfigError("--trial", f"no trial {args.trial!r} reads {dataset.name}", [t.name for t in readers])
    if args.repeat is not None and not 0 <= args.repeat < experiment.repeats:
        raise ConfigError("--repeat", f"{args.repeat} is not a repeat of the experiment", f"0..{experiment.repeats - 1}")
    modes = [m for m in MODES if any(m in t.modes for t in trials)]
    mode = canonical_mode(args.mode) if args.mode else None
    if args.mode and mode is None:
        raise ConfigError("--mode", f"unknown mode {args.mode!r}", MODES)
    outputs = lab_outputs(args)
    env = environment_from_outputs(outputs, _region(args))
    # Your own code is packaged as `dslab plan` and `dslab run` package it (byte-reproducibly): the
    # request names its content-addressed URI; --upload puts it there (the same object `dslab run` uploads).
    from . import user_code
    s3 = None
    if args.upload:
        import boto3
        s3 = boto3.client("s3", region_name=_region(args))
    experiment = user_code.prepare(experiment, Path(args.experiment), env.bucket, BUILD_DIR, s3_client=s3)
    trials = [next(t for t in experiment.trials if t.name == trial.name) for trial in trials]
    execution, record, storage = "export", None, None
    if args.results:
        if args.trial or args.repeat is not None:
            raise ConfigError("--trial/--repeat", "--results picks the job (the cheapest completed one); "
                              "drop --trial/--repeat, or drop --results to choose the job yourself")
        record, execution = _cheapest_completed(Path(args.results), experiment, dataset.name, mode)
        mode, storage = record["mode"], record.get("storage") or None
    elif mode is None:
        mode, storage = _recommended_source(experiment, args.experiment, dataset, args.trial)
    if mode not in modes:
        raise ConfigError("--mode", f"the experiment does not run {mode} on {dataset.name}", modes)
    repeat = record["repeat"] if record else (args.repeat or 0)
    jobs = [j for j in plan(experiment, env, execution) if j.spec.dataset.name == dataset.name and j.spec.mode == mode
            and j.spec.repeat == repeat and j.spec.trial in trials
            and (storage is None or (j.spec.trial.storage or "standard") == storage)]
    if not jobs:  # only a results file of another experiment gets here
        raise ConfigError("--results", f"the experiment has no {mode} job of {dataset.name}, repeat {repeat}")
    # A results record names its job (a capacity retry adds "-a<N>"): that job's trial, not just the first.
    job = next((j for j in jobs if record and record["job_name"].startswith(j.name)), jobs[0])
    if job.request is None:
        raise ConfigError("--mode", f"the {mode} job of {dataset.name} is skipped: {job.skip_reason}",
                          [m for m in modes if m != mode] or None)
    code = generate(job.request, env.region)
    script = job.spec.trial.script
    if script is not None and not args.upload:
        print(f"note: the job runs your code from {script.code_uri}; it is there once `dslab run` ran this trial, "
              "or put it there now with --upload", file=sys.stderr)
    if args.out:
        Path(args.out).write_text(code)
        print(f"wrote {args.out}: job {job.name} ({mode} on {dataset.name}); run it with: python {args.out} [--wait]",
              file=sys.stderr)
    else:
        sys.stdout.write(code)
    return 0


def _recommended_source(experiment, experiment_path: str, dataset, trial_name: str | None) -> tuple[str, str]:
    """The (mode, storage) `dslab recommend --experiment` picks for the dataset among the sources the
    experiment runs on it (the same answer the report gives)."""
    from .core.answers import for_dataset
    answer = for_dataset(experiment_answers(experiment), dataset.name, trial_name)
    if answer is None or answer.recommendation is None:
        raise ConfigError("--mode", f"no answer for {dataset.name}: {answer.missing if answer else 'no trial reads it'}; "
                          "give --mode")
    pick = answer.decision.pick
    print(f"recommended for {answer.scenario.label}: {pick.source} (as `dslab recommend --experiment {experiment_path} "
          f"--dataset {dataset.name}`); --mode chooses another", file=sys.stderr)
    return pick.mode, pick.storage


def _cheapest_completed(path: Path, experiment, dataset: str, mode: str | None) -> tuple[dict[str, Any], str]:
    """The completed job of the source the report's answer picks for the dataset (cost to a result),
    its cheapest repeat, and the run's execution."""
    from .report import Answers, aggregate, load_results
    results = load_results(path)
    if results.get("experiment_hash") not in (None, experiment.content_hash):
        raise ConfigError("--results", f"{path} is a run of experiment hash {results['experiment_hash']}, not of "
                          f"--experiment ({experiment.content_hash}): give the experiment file that run used")
    done = [r for r in results["records"] if r["dataset"] == dataset and r["status"] == "Completed"
            and r["billable_seconds"] is not None and (mode is None or r["mode"] == mode)]
    if not done:
        raise ConfigError("--results", f"{path} has no completed {mode or ''} job on {dataset}".replace("  ", " "),
                          sorted({r["dataset"] for r in results["records"] if r["status"] == "Completed"}) or None)
    decided = [m for m in Answers(results, aggregate(done)).measured if m.decision is not None]
    pick = decided[0].decision.pick
    best = min((r for r in done if r["mode"] == pick.mode and (r.get("storage") or "standard") == pick.storage),
               key=lambda r: (r["cost_usd"]["total"], r["billable_seconds"]))
    print(f"the report's pick on {dataset} in {path}: {pick.source}; its cheapest completed job {best['job_name']} "
          f"(${best['cost_usd']['total']:.4f})", file=sys.stderr)
    return best, results.get("execution") or "export"


# ---- fsx -----------------------------------------------------------------------------------------

def fsx_state(region: str, state_machine_arn: str, idle_hours: float, capacity_gib: int) -> dict[str, Any]:
    """FSx as it is: stack, file system, age, cost per hour, the idle guard's deadline, and how far the
    S3 metadata import of the datasets has come (the same checks the workflow makes)."""
    import boto3
    from .core.prices import PriceTable
    from .workflow.fsx_data import import_status
    from .workflow.fsx_guard import idle_status
    hourly = PriceTable().fsx_hourly(capacity_gib)
    cfn, sfn = boto3.client("cloudformation", region_name=region), boto3.client("stepfunctions", region_name=region)
    state = {**idle_status(cfn, sfn, FSX_STACK, state_machine_arn, idle_hours), "capacity_gib": capacity_gib,
             "usd_per_hour": round(hourly, 4)}
    if not state["up"]:
        return state
    state["cost_so_far_usd"] = round(hourly * state["age_hours"], 2)
    found = boto3.client("ssm", region_name=region).get_parameters(Names=[FSX_ID_PARAMETER]).get("Parameters", [])
    if found:
        state["file_system_id"] = found[0]["Value"]
        state["data"] = import_status(boto3.client("fsx", region_name=region), found[0]["Value"], ["/datasets"])
    return state


def cmd_fsx(args) -> int:
    from .core.prices import PriceTable
    context = json.loads((REPO / "cdk.json").read_text())["context"]
    capacity = int(context.get("fsxCapacity", 1200))
    hourly = PriceTable().fsx_hourly(capacity)
    cdk = REPO / "node_modules" / ".bin" / "cdk"
    if args.action == "status":
        outputs = lab_outputs(args)
        idle_hours = float(outputs.get("FsxIdleHours", context.get("fsxIdleHours", 0)) or 0)
        state = fsx_state(_region(args), outputs.get("StateMachineArn", ""), idle_hours,
                          int(outputs.get("FsxCapacityGiB", capacity)))
        if args.json:
            _print_json(state)
            return 0
        if not state["up"]:
            print(f"FSx: DOWN (no {FSX_STACK} stack); `dslab fsx up` brings it back "
                  f"(${state['usd_per_hour']:.3f} per hour while up)")
            return 0
        print(f"FSx: UP ({state.get('file_system_id', '?')}, stack {state['stack_status']}), up {state['age_hours']:.1f} h: "
              f"{state['capacity_gib']} GiB Scratch 2 at ${state['usd_per_hour']:.3f}/h (${state['usd_per_hour'] * 24:.2f}/day), "
              f"about ${state['cost_so_far_usd']:.2f} so far")
        if state["running_executions"]:
            print(f"in use: execution {', '.join(state['running_executions'])} is running")
        elif state["deadline"]:
            print(f"idle guard: deletes FSx at {state['deadline']} ({state['idle_hours']:g} h after the last activity, "
                  f"{state['last_activity']}) unless a workflow execution runs")
        else:
            print("idle guard: off (deploy with -c fsxIdleHours=N to turn it on); `dslab fsx down` when done")
        data = state.get("data")
        if data:
            print(f"datasets: {'ready' if data['ready'] else 'NOT READY'}: {data['reason']}")
            for task in data.get("imports", []):
                print(f"  S3 metadata import {task['task']}: {task['lifecycle']}, {task['done']:,} of {task['total']:,} objects")
        return 0
    if args.action == "follow-zone":
        return cmd_fsx_follow_zone(args)
    command = ([str(cdk), "destroy", FSX_STACK, "--exclusively", "--force"] if args.action == "down"
               else [str(cdk), "deploy", FSX_STACK, "--exclusively", "--require-approval", "never"])
    print(f"{'removing' if args.action == 'down' else 'creating'} FSx ({capacity} GiB, ${hourly:.3f}/hour while up): {' '.join(command[1:])}")
    return subprocess.call(command, cwd=REPO)


# ---- FSx follows the lab's zone ------------------------------------------------------------------------

def fsx_zone(ssm, fsx, ec2) -> str | None:
    """The zone ID FSx for Lustre is in (from its subnet), or None while the FSx stack is down."""
    try:
        file_system_id = ssm.get_parameter(Name=FSX_ID_PARAMETER)["Parameter"]["Value"]
    except ssm.exceptions.ParameterNotFound:
        return None
    found = fsx.describe_file_systems(FileSystemIds=[file_system_id])["FileSystems"]
    if not found:
        return None
    subnets = ec2.describe_subnets(SubnetIds=found[0]["SubnetIds"][:1])["Subnets"]
    return subnets[0].get("AvailabilityZoneId") if subnets else None


def follow_zone(current: str | None, target: str, take_down: Callable[[], int], say: Callable[[str], None]) -> int:
    """Before a deploy moves the lab to ``target``: FSx up in another zone goes down first.

    Core replaces the subnet when the zone changes, and EC2 refuses to delete a subnet that still holds a
    network interface ("has dependencies and cannot be deleted"): FSx's would keep the old subnet, and
    CloudFormation would leave it behind in the clean-up (the stack still ends UPDATE_COMPLETE). So FSx
    leaves first, through its stack; the deploy (FSX=up) brings it back in the new zone."""
    if current is None or current == target:
        return 0
    say(f"FSx for Lustre is up in {current} and the lab moves to {target}: taking FSx down first (its subnet is "
        f"replaced), through the {FSX_STACK} stack; FSX=up brings it back in {target}")
    return take_down()


def cmd_fsx_follow_zone(args) -> int:
    import boto3
    overrides = dict(item.split("=", 1) for item in (args.context or []) if "=" in item)
    local = Path.cwd() / "cdk.json"
    context = {**lab_context(local if local.exists() else REPO / "cdk.json"), **overrides}
    region = args.region or context.get("region") or _region(args)
    target = context.get("azId")
    if not target:
        raise ConfigError("azId", "not set in cdk.json or -c azId=...", "a zone ID such as use1-az4")
    try:
        current = fsx_zone(boto3.client("ssm", region_name=region), boto3.client("fsx", region_name=region),
                           boto3.client("ec2", region_name=region))
    except Exception as err:  # noqa: BLE001 - no credentials, no access: the deploy itself will say more
        raise ConfigError("AWS credentials", f"could not read where FSx is ({type(err).__name__}: {err})",
                          "credentials for the lab's account (the deploy needs them too)") from None
    cdk = REPO / "node_modules" / ".bin" / "cdk"
    context_args = [arg for key, value in overrides.items() for arg in ("-c", f"{key}={value}")]
    return follow_zone(current, target, lambda: subprocess.call(
        [str(cdk), "destroy", FSX_STACK, "--exclusively", "--force", *context_args], cwd=Path.cwd()), print)


# ---- local ---------------------------------------------------------------------------------------

def cmd_local(args) -> int:
    from .local.lab import run_local
    run = run_local(Path(args.experiment) if args.experiment else None, Path(args.out),
                    cache=Path(args.cache) if args.cache else None)
    print()
    print(f"local run {run.execution_status}" + (f" ({run.execution_error})" if run.execution_error else ""))
    from .report import scenario, source, trials_collide
    several_trials = trials_collide(run.results["records"])
    width = 28 if several_trials else 12
    print(f"{'source':16s} {'dataset':{width}s} {'status':10s} {'samples/s':>10s} {'MB/s':>8s} {'AU %':>6s} {'e2e %':>6s} "
          f"{'1st batch s':>11s} {'billable s':>10s}")
    for r in run.results["records"]:
        m = r["metrics"]
        print(f"{source(r):16s} {scenario(r, several_trials)[:width]:{width}s} {r['status']:10s} {_num(m.get('samples_per_second')):>10s} "
              f"{_num(m.get('mb_per_second')):>8s} {_num(m.get('au_percent')):>6s} {_num(m.get('end_to_end_efficiency_percent')):>6s} "
              f"{_num(m.get('time_to_first_batch_seconds'), 2):>11s} {_num(r['billable_seconds'], 0):>10s}")
    t = run.timings
    training = sum((r["phases"] or {}).get("Training", 0.0) for r in run.results["records"])
    print(f"wall time {t.get('total', 0):.1f} s: set-up {t.get('setup', 0):.1f} s, data preparation {t.get('data', 0):.1f} s, "
          f"jobs {t.get('jobs', 0):.1f} s (of which Training phases {training:.1f} s), reporting {t.get('reporting', 0):.1f} s; "
          f"lab overhead {100 * (1 - training / t['total']):.0f}% of the wall time" if t.get("total") else "")
    from .report import Answers, aggregate, answer_lines
    print()
    print("the answer (as report.md's ## Answer; local seconds are this machine's, not AWS's):")
    for line in answer_lines(Answers(run.results, aggregate(run.results["records"])), bold=str,
                             heading=lambda label: f"{label}:"):
        print(f"  {line}" if line else "")
    print(f"report: {Path(args.out) / 'report.html'} (also report.md, results.json, results.csv, breakdown.png)")
    return 0 if run.execution_status == "SUCCEEDED" else 1


# ---- doctor --------------------------------------------------------------------------------------

DEFAULT_DOCTOR_EXPERIMENT = REPO / "experiments" / "all-modes-20-jobs.yaml"


def lab_context(path: Path = REPO / "cdk.json") -> dict[str, Any]:
    """The lab's deploy settings (cdk.json's context), for commands that check them before a deploy."""
    try:
        return json.loads(path.read_text()).get("context", {})
    except (OSError, ValueError):
        return {}


def cmd_doctor(args) -> int:
    import boto3

    from .doctor import check_zone
    context = lab_context()
    region = args.region or context.get("region") or _region(args)
    az_id = args.az_id or context.get("azId")
    if not az_id:
        raise ConfigError("azId", "not set: pass --az-id or set azId in cdk.json", "a zone ID such as use1-az4")
    instance_types = list(args.instance_type or [])
    needs_express = False
    if args.experiment or not instance_types:
        from .core.experiment import expand
        from .experiment_file import load_experiment
        experiment = load_experiment(Path(args.experiment) if args.experiment else DEFAULT_DOCTOR_EXPERIMENT)
        specs = expand(experiment)
        instance_types += [spec.trial.instance_type for spec in specs]
        needs_express = any(spec.trial.storage == "express" for spec in specs)
    report = check_zone(boto3.client("ec2", region_name=region), boto3.client("fsx", region_name=region),
                        region=region, az_id=az_id, instance_types=instance_types, needs_express=needs_express,
                        logs=boto3.client("logs", region_name=region))
    if args.json:
        _print_json(report.to_dict())
    else:
        print("\n".join(report.lines()))
    return 0 if report.ok else 1


def _num(value, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


# ---- registration --------------------------------------------------------------------------------

def register(sub, add) -> None:
    p = add(sub, "plan", cmd_plan, "Print the exact CreateTrainingJob requests an experiment would run (no AWS call "
            "with --outputs or --offline).", "dslab plan --experiment experiments/post-12-jobs.yaml --offline")
    p.add_argument("--experiment", required=True)
    p.add_argument("--outputs", help="cdk deploy --outputs-file JSON (else read from CloudFormation)")
    p.add_argument("--offline", action="store_true", help="use the stand-in lab's stack outputs: no AWS account needed")
    p.add_argument("--execution", default="plan-preview", help="execution name used in job names (default plan-preview)")
    p.add_argument("--region")
    p.add_argument("--json", action="store_true")

    p = add(sub, "run", cmd_run, "Start the workflow on the deployed lab.",
            "dslab run --experiment experiments/all-modes-20-jobs.yaml --wait")
    p.add_argument("--experiment", required=True)
    p.add_argument("--outputs")
    p.add_argument("--region")
    p.add_argument("--wait", action="store_true", help="live progress until the execution ends (Ctrl-C leaves it running)")

    p = add(sub, "status", cmd_status, "Show an execution's progress: jobs by state, elapsed, spend so far.",
            "dslab status arn:aws:states:us-east-1:123456789012:execution:DataSourceLabWorkflow:abc --wait")
    p.add_argument("execution", nargs="?", metavar="EXECUTION")
    p.add_argument("--outputs")
    p.add_argument("--region")
    p.add_argument("--wait", action="store_true")
    p.add_argument("--json", action="store_true")

    p = add(sub, "report", cmd_report, "Write results.json, results.csv, report.md, report.html and breakdown.png.",
            "dslab report --results lab-out/results.json --out report-out")
    p.add_argument("execution", nargs="?", metavar="EXECUTION")
    p.add_argument("--results", help="a results.json file")
    p.add_argument("--describe-json", help="a folder of DescribeTrainingJob JSON files")
    p.add_argument("--out", required=True)
    p.add_argument("--prices", help="YAML file overriding prices")
    p.add_argument("--region")

    for name, handler, text, example in (
            ("estimate", cmd_estimate, "Predict Downloading / Training / Other seconds and dollars per mode.",
             "dslab estimate --files 30607 --bytes 1.1GB --instance ml.p3.2xlarge --compute-preset v100"),
            ("recommend", cmd_recommend, "Which data source to pick for a dataset, why, the runner-up, every source "
             "ranked by cost to a result (job plus set-up), and advice; with --experiment, the answer per dataset among "
             "the sources the experiment runs (what `dslab export` exports and the report answers).",
             "dslab recommend --files 1530350 --bytes 54GB --epochs 1\n"
             "  dslab recommend --experiment experiments/post-12-jobs.yaml")):
        p = add(sub, name, handler, text, example)
        p.add_argument("--dataset", help="a folder or s3:// prefix to measure" + (
            "; with --experiment, one of its datasets by name" if name == "recommend" else ""))
        p.add_argument("--files", type=int)
        p.add_argument("--bytes", help="total size, e.g. 1.1GB")
        p.add_argument("--samples", type=int, help="samples in the dataset (default: files, or bytes / 35.9 KB for large files)")
        p.add_argument("--instance", help="training instance type (default ml.p3.2xlarge)")
        p.add_argument("--compute-rate", type=float, help="samples per second the model consumes")
        p.add_argument("--compute-preset", help="v100, a100 or h100 (default v100)")
        p.add_argument("--epochs", type=int, help="epochs per job (default 1)")
        p.add_argument("--volume-size-gb", type=int, help="the training volume (default 100)")
        p.add_argument("--fsx-capacity", type=int, help="FSx for Lustre size in GiB (default: fsxCapacity in cdk.json, else 1200)")
        p.add_argument("--prices", help="YAML file overriding prices")
        p.add_argument("--json", action="store_true")
        if name == "recommend":
            p.add_argument("--experiment", help="an experiment file: answer per dataset among the sources it runs")
        if name == "estimate":
            p.add_argument("--mode")
            p.add_argument("--storage", choices=["standard", "express"],
                           help="where the S3 modes read (default: both, the general purpose bucket and S3 Express One Zone)")
        else:
            p.add_argument("--random-access", action="store_true")
            p.add_argument("--data-in-efs", action="store_true")

    p = add(sub, "export", cmd_export, "Print one job of an experiment (the recommended mode by default, or the "
            "cheapest completed job of --results) as ready-to-run SageMaker Python SDK code: the lab's own request.",
            "dslab export --experiment experiments/post-12-jobs.yaml --offline --out winner.py")
    p.add_argument("--experiment", required=True)
    p.add_argument("--outputs", help="cdk deploy --outputs-file JSON (else read from CloudFormation)")
    p.add_argument("--offline", action="store_true", help="use the stand-in lab's stack outputs: no AWS account needed")
    p.add_argument("--region")
    p.add_argument("--mode", help="the job's mode (default: what `dslab recommend --experiment` picks for the dataset)")
    p.add_argument("--dataset", help="the job's dataset (default: the experiment's first)")
    p.add_argument("--trial", help="the job's trial (default: the first that reads the dataset)")
    p.add_argument("--repeat", type=int, help="the job's repeat (default 0)")
    p.add_argument("--results", help="a finished run's results.json: export the job of the source its report picks")
    p.add_argument("--out", help="write the code to this file instead of printing it")
    p.add_argument("--upload", action="store_true",
                   help="with your own script (script.source_dir): upload its package to the content-addressed URI the code names")

    p = add(sub, "fsx", cmd_fsx, "FSx for Lustre: status (age, cost per hour, the idle guard's deadline, S3 import "
            "progress), down (delete its stack), up (deploy it again), follow-zone (before a deploy that moves the "
            "lab to another zone: take FSx down first; `make deploy` runs it).", "dslab fsx status")
    p.add_argument("action", choices=["status", "down", "up", "follow-zone"])
    p.add_argument("-c", "--context", action="append", metavar="KEY=VALUE",
                   help="follow-zone: the deploy's settings on top of cdk.json's, as given to cdk (e.g. -c azId=use1-az6)")
    p.add_argument("--region")
    p.add_argument("--outputs", help="cdk deploy --outputs-file JSON (else read from CloudFormation)")
    p.add_argument("--json", action="store_true")

    from .express_ops import register_express
    register_express(sub, add)  # dslab express status|empty: the S3 Express One Zone bucket

    p = add(sub, "doctor", cmd_doctor, "With your credentials: does the lab's zone (azId) offer the experiment's "
            "training instance types and FSx for Lustre, and which zone IDs of the region would? Exit 1 when it does not.",
            "dslab doctor --experiment experiments/post-12-jobs.yaml --az-id use1-az4")
    p.add_argument("--experiment", help=f"experiment whose instance types to check (default {DEFAULT_DOCTOR_EXPERIMENT.relative_to(REPO)})")
    p.add_argument("--instance-type", action="append", help="a SageMaker training instance type (repeatable), e.g. ml.g5.xlarge")
    p.add_argument("--az-id", help="zone ID to check (default: azId in cdk.json)")
    p.add_argument("--region", help="region (default: region in cdk.json)")
    p.add_argument("--json", action="store_true")

    p = add(sub, "local", cmd_local, "Run the whole lab offline on the embedded AWS stand-in and write its report.",
            "dslab local --out lab-out --experiment experiments/local.yaml")
    p.add_argument("--experiment", help=f"experiment YAML (default {Path('experiments/local.yaml')})")
    p.add_argument("--out", required=True)
    p.add_argument("--cache", help="where datasets and templates are kept between runs (default .lab-cache)")
