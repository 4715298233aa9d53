"""The operator commands: plan, run, status, report, estimate, recommend, fsx, local."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

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


def outputs_from_cloudformation(region: str | None = None) -> dict[str, str]:
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
        raise ConfigError("AWS credentials", "none found: set AWS_PROFILE or keys, or pass --outputs cdk-outputs.json") from None
    except ClientError as err:
        if "does not exist" in str(err):
            raise ConfigError("stack", "DataSourceLab is not deployed in this account/region: run `make deploy FSX=up` "
                              "(or pass --outputs cdk-outputs.json)") from None
        raise ConfigError("AWS", f"{err.response['Error']['Code']}: {err.response['Error']['Message']}") from None
    except BotoCoreError as err:
        raise ConfigError("AWS", f"{err}") from None
    return flat


def environment_from_outputs(outputs: dict[str, str], region: str):
    from .core.requests import LabEnvironment
    missing = [k for k in ("BucketName", "SubnetId", "TrainingSecurityGroupId", "TrainingRoleArn", "TrainingCodeUri",
                           "TrainingImageUri") if k not in outputs]
    if missing:
        raise ConfigError("--outputs", f"stack output {missing[0]} is missing; deploy the whole lab with "
                          "`make deploy FSX=up` (cdk deploy DataSourceLab -c fsx=up --outputs-file cdk-outputs.json)")
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
    })


def _region(args) -> str:
    return getattr(args, "region", None) or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"


# ---- plan / run / status -------------------------------------------------------------------------

def cmd_plan(args) -> int:
    from .core.requests import plan
    from .experiment_file import load_experiment
    from . import user_code
    experiment = load_experiment(Path(args.experiment))
    outputs = outputs_from_file(Path(args.outputs)) if args.outputs else outputs_from_cloudformation(_region(args))
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
    outputs = outputs_from_file(Path(args.outputs)) if getattr(args, "outputs", None) else outputs_from_cloudformation(_region(args))
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
    prices = _prices(args.prices)
    if prices.instance_hourly(args.instance) is None:
        prices.require_instance(args.instance, "--instance")
    return {"instance_type": args.instance, "epochs": args.epochs, "rate": rate, "prices": prices,
            "volume_size_gb": args.volume_size_gb}, rate_note


def cmd_estimate(args) -> int:
    from .core.estimate import estimate_all
    from .core.modes import MODES, canonical_mode
    shape = _shape(args)
    kwargs, rate_note = _estimate_kwargs(args)
    modes = MODES
    if args.mode:
        mode = canonical_mode(args.mode)
        if mode is None:
            raise ConfigError("--mode", f"unknown mode {args.mode!r}", MODES)
        modes = (mode,)
    estimates = estimate_all(shape, modes=modes, **kwargs)
    for e in estimates:
        e.assumptions.insert(0, rate_note)
    if args.json:
        _print_json({"estimates": [e.to_dict() for e in estimates], "prices": kwargs["prices"].label()})
        return 0
    print(f"{shape.files:,} files, {shape.bytes / 1e9:.2f} GB, {args.epochs} epoch(s) on {args.instance}; {rate_note}")
    print(f"{'mode':9s} {'download':>9s} {'training':>9s} {'other':>7s} {'billable':>9s} {'cost':>9s}  bound")
    for e in sorted(estimates, key=lambda e: e.cost_usd["total"]):
        print(f"{e.mode:9s} {e.downloading:9.0f} {e.training:9.0f} {e.other:7.0f} {e.billable_seconds:9.0f} "
              f"${e.cost_usd['total']:8.2f}  {e.bound}")
    print(kwargs["prices"].label())
    return 0


def cmd_recommend(args) -> int:
    from .core.recommend import recommend
    shape = _shape(args)
    kwargs, rate_note = _estimate_kwargs(args)
    result = recommend(shape, random_access=args.random_access, data_in_efs=args.data_in_efs, **kwargs)
    if args.json:
        _print_json(result.to_dict())
        return 0
    print(f"recommended: {result.mode} ({result.source})")
    for step in result.branch:
        print(f"  because {step}")
    print("estimates (cheapest first):")
    for e in sorted(result.estimates, key=lambda e: e.cost_usd["total"]):
        print(f"  {e.mode:9s} {e.billable_seconds:8.0f} s billable  ${e.cost_usd['total']:8.2f}  ({e.bound}-bound)")
    for line in result.advice:
        print(f"advice: {line}")
    return 0


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
        outputs = outputs_from_file(Path(args.outputs)) if args.outputs else outputs_from_cloudformation(_region(args))
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
    command = ([str(cdk), "destroy", FSX_STACK, "--exclusively", "--force"] if args.action == "down"
               else [str(cdk), "deploy", FSX_STACK, "--exclusively", "--require-approval", "never"])
    print(f"{'removing' if args.action == 'down' else 'creating'} FSx ({capacity} GiB, ${hourly:.3f}/hour while up): {' '.join(command[1:])}")
    return subprocess.call(command, cwd=REPO)


# ---- local ---------------------------------------------------------------------------------------

def cmd_local(args) -> int:
    from .local.lab import run_local
    run = run_local(Path(args.experiment) if args.experiment else None, Path(args.out),
                    cache=Path(args.cache) if args.cache else None)
    print()
    print(f"local run {run.execution_status}" + (f" ({run.execution_error})" if run.execution_error else ""))
    from .report import scenario
    several_trials = len({r.get("trial") for r in run.results["records"]}) > 1
    width = 28 if several_trials else 12
    print(f"{'mode':9s} {'dataset':{width}s} {'status':10s} {'samples/s':>10s} {'MB/s':>8s} {'AU %':>6s} {'e2e %':>6s} "
          f"{'1st batch s':>11s} {'billable s':>10s}")
    for r in run.results["records"]:
        m = r["metrics"]
        print(f"{r['mode']:9s} {scenario(r, several_trials)[:width]:{width}s} {r['status']:10s} {_num(m.get('samples_per_second')):>10s} "
              f"{_num(m.get('mb_per_second')):>8s} {_num(m.get('au_percent')):>6s} {_num(m.get('end_to_end_efficiency_percent')):>6s} "
              f"{_num(m.get('time_to_first_batch_seconds'), 2):>11s} {_num(r['billable_seconds'], 0):>10s}")
    t = run.timings
    training = sum((r["phases"] or {}).get("Training", 0.0) for r in run.results["records"])
    print(f"wall time {t.get('total', 0):.1f} s: set-up {t.get('setup', 0):.1f} s, data preparation {t.get('data', 0):.1f} s, "
          f"jobs {t.get('jobs', 0):.1f} s (of which Training phases {training:.1f} s), reporting {t.get('reporting', 0):.1f} s; "
          f"lab overhead {100 * (1 - training / t['total']):.0f}% of the wall time" if t.get("total") else "")
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
    if args.experiment or not instance_types:
        from .core.experiment import expand
        from .experiment_file import load_experiment
        experiment = load_experiment(Path(args.experiment) if args.experiment else DEFAULT_DOCTOR_EXPERIMENT)
        instance_types += [spec.trial.instance_type for spec in expand(experiment)]
    report = check_zone(boto3.client("ec2", region_name=region), boto3.client("fsx", region_name=region),
                        region=region, az_id=az_id, instance_types=instance_types)
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
            "with --outputs).", "dslab plan --experiment experiments/post-12-jobs.yaml --outputs cdk-outputs.json --json")
    p.add_argument("--experiment", required=True)
    p.add_argument("--outputs", help="cdk deploy --outputs-file JSON (else read from CloudFormation)")
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
            ("recommend", cmd_recommend, "The post's decision flowchart: which data source, why, and advice.",
             "dslab recommend --files 1530350 --bytes 54GB --epochs 1")):
        p = add(sub, name, handler, text, example)
        p.add_argument("--dataset", help="a folder or s3:// prefix to measure")
        p.add_argument("--files", type=int)
        p.add_argument("--bytes", help="total size, e.g. 1.1GB")
        p.add_argument("--samples", type=int, help="samples in the dataset (default: files, or bytes / 35.9 KB for large files)")
        p.add_argument("--instance", default="ml.p3.2xlarge")
        p.add_argument("--compute-rate", type=float, help="samples per second the model consumes")
        p.add_argument("--compute-preset", help="v100, a100 or h100 (default v100)")
        p.add_argument("--epochs", type=int, default=1)
        p.add_argument("--volume-size-gb", type=int, default=100)
        p.add_argument("--prices", help="YAML file overriding prices")
        p.add_argument("--json", action="store_true")
        if name == "estimate":
            p.add_argument("--mode")
        else:
            p.add_argument("--random-access", action="store_true")
            p.add_argument("--data-in-efs", action="store_true")

    p = add(sub, "fsx", cmd_fsx, "FSx for Lustre: status (age, cost per hour, the idle guard's deadline, S3 import "
            "progress), down (delete its stack), up (deploy it again).", "dslab fsx status")
    p.add_argument("action", choices=["status", "down", "up"])
    p.add_argument("--region")
    p.add_argument("--outputs", help="cdk deploy --outputs-file JSON (else read from CloudFormation)")
    p.add_argument("--json", action="store_true")

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
