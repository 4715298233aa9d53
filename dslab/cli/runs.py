"""``dslab plan``, ``run``, ``status`` and ``report``: an experiment's jobs, its execution on the deployed lab, its results."""

from __future__ import annotations

import json
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from ..core.errors import ConfigError
from ..core.experiment.parsing import MAX_REPEATS
from .asked import ask_plan, check_jobs, experiment_of
from .common import print_ignored
from .question import add_calibration_flag, add_instance_flags, add_workload_flags, workload_json
from .common import (
    BUILD_DIR,
    add_command,
    aws_failure,
    explain_aws,
    lab_provisioning,
    outputs_from_cloudformation,
    price_table,
    print_json,
    region_of,
    stepfunctions,
    whole,
    workflow_of,
)


def cmd_plan(args) -> int:
    return show_plan(ask_plan(args))


def show_plan(asked) -> int:
    """The experiment's jobs as `dslab run` would request them, on the lab as it stands (cli/asked.py ask_plan)."""
    from ..core.requests import plan
    from ..inputs import user_code
    env, lab = asked.env, asked.lab
    # The user's code is checked and packaged (not uploaded): the requests name where `dslab run` puts it.
    experiment = user_code.prepare(asked.experiment, asked.where, env.bucket, BUILD_DIR)
    jobs = plan(experiment, env, asked.execution, runtimes=asked.runtimes)
    workloads = _workloads(experiment)
    if asked.json:
        print_json({"experiment": experiment.document, "experiment_hash": experiment.content_hash,
                     "jobs": [{"name": j.name, "mode": j.spec.mode, "dataset": j.spec.dataset.name,
                               "repeat": j.spec.repeat, "request": j.request, "skip_reason": j.skip_reason} for j in jobs],
                     **({"workloads": [workload_json(w) for w in workloads]} if workloads else {})})
        return 0
    print(f"experiment {experiment.name} ({experiment.content_hash}): {len(jobs)} jobs")
    print_premises(experiment, lab)
    print_ignored(workloads)   # the DLIO fields the lab does not use, one line each
    from .render import fit, print_lines, table
    rows, buckets = [], {}
    for job in jobs:
        if job.request is None:
            rows.append([job.name, "SKIPPED", "", job.skip_reason])
            continue
        what = job.spec.mode if job.spec.target is None else checkpoint_target_label(job.spec.target, job.spec.restore)
        rows.append([job.name, what, job.request["ResourceConfig"]["InstanceType"],
                     _reads_from(job.request, buckets, env)])
    # Two spaces in, as the jobs were listed; each bucket named once below, so that a line holds its job.
    print_lines(["  " + line for line in table(["job", "source", "instance", "reads from"], rows)])
    for name, uri in buckets.items():
        print(fit(f"{name}: {uri}"))
    print("(--json prints the complete CreateTrainingJob requests)")
    return 0


def checkpoint_target_label(target: str, restore: bool) -> str:
    from ..core.modes import checkpoint_target_label as label
    return label(target, restore)


def _reads_from(request: dict, buckets: dict[str, str] | None = None, env=None) -> str:
    """Where a job's data comes from: its channel's S3 URI or file-system path; a Script job has no channel and
    reads the dataset_uri it is given. With ``buckets``, the lab's two buckets are named by role ("data bucket/...")
    and each added there once (name -> s3:// URI), for a line that says them."""
    channels = request.get("InputDataConfig")
    if request.get("CheckpointConfig"):
        said = f"{_bucket_said(request['CheckpointConfig']['S3Uri'], buckets, env)} (sync)"
    elif not channels:
        said = f"{_bucket_said(request['HyperParameters']['dataset_uri'].strip(chr(34)), buckets, env)} (the script reads it)"
    else:
        source = channels[0]["DataSource"]
        said = (_bucket_said(source["S3DataSource"]["S3Uri"], buckets, env) if "S3DataSource" in source
                else source["FileSystemDataSource"]["DirectoryPath"])
    return said


def _bucket_said(uri: str, buckets: dict[str, str] | None, env) -> str:
    """``uri`` with the lab's data bucket or directory bucket named by its role (recorded in ``buckets``)."""
    if buckets is None or env is None:
        return uri
    for name, bucket in (("data bucket", getattr(env, "bucket", None)),
                         ("directory bucket", getattr(env, "express_bucket", None))):
        if bucket and uri.startswith(f"s3://{bucket}/"):
            buckets[name] = f"s3://{bucket}/"
            return f"{name}/{uri[len(bucket) + 6:]}"
    return uri


def _workloads(experiment) -> list:
    """The DLIO workloads the experiment's trials run (--workload or `workload:`), each once."""
    return list({(t.workload.source, t.workload.document, t.workload.scale): t.workload
                 for t in experiment.trials if t.workload is not None}.values())


def print_premises(experiment, lab, stats=None) -> None:
    """What the plan's jobs are estimated on, one line each: the rule and the lab (once), then each checkpoint trial's
    and each scenario's question, as `recommend --experiment` states it (the whole premise: its --explain)."""
    from ..core.answer.scenarios import (EXPERIMENT_RULE, checkpoint_premise_of_trial, known_shape, premise_of_trial,
                                         scenarios)
    from . import checkpoints
    from .render import fit, lab_line, premise_line
    lines, defaults = [], set()
    for trial in experiment.trials:
        if trial.checkpoint is not None:
            premise = checkpoint_premise_of_trial(trial, lab, experiment.calibration)
            lines.append(checkpoints.premise_line(premise, f"{trial.name} (checkpoints): "))
    for scenario in scenarios(experiment):
        known = known_shape(scenario.dataset, stats)
        if known is None:
            lines.append(fit(f"{scenario.label}: its size is read from its stats file at Plan (not known here)"))
            continue
        premise = premise_of_trial(scenario.trials[0], known, lab, experiment.calibration)
        defaults |= premise.defaults
        lines.append(premise_line(premise, f"{scenario.label}: "))
    print(lab_line(f"priced: {EXPERIMENT_RULE}", lab, defaults))
    for line in lines:
        print(line)


def cmd_run(args) -> int:
    from ..inputs import user_code
    from ..core.requests import check_every_host_gets_data, check_job_count
    experiment, where = experiment_of(args, repeats=args.repeats)
    check_job_count(experiment, "--repeats" if args.repeats else "repeats")   # before anything is uploaded or started
    check_every_host_gets_data(experiment)  # by the experiment's own file counts; Plan checks the stats files again
    user_code.package(experiment, where.resolve().parent, BUILD_DIR)  # refuse bad code before any AWS call or file read
    lab = lab_provisioning(args)
    check_jobs(experiment, lab=lab)         # the workflow's Plan sizes each job's MaxRuntimeInSeconds again
    print_premises(experiment, lab)         # what each scenario's estimate assumes, as plan says it
    print_ignored(_workloads(experiment))   # the DLIO fields the lab does not use, one line each
    arn, bucket = workflow_of(args)
    from botocore.exceptions import ClientError, NoCredentialsError
    try:
        check_hosts_against_stats_files(experiment, bucket, region_of(args))   # with credentials, before StartExecution
        if any(t.script is not None and t.script.source_dir for t in experiment.trials):
            if not bucket:
                raise ConfigError("stack", "the DataSourceLab stack has no BucketName output to upload the script to: "
                                  "run `make deploy FSX=keep`")
            import boto3
            experiment = user_code.prepare(experiment, where, bucket, BUILD_DIR,
                                           s3_client=boto3.client("s3", region_name=region_of(args)))
        # A readable, unique execution name: it names the results folder, results/<name>/.
        name = f"{experiment.name}-{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}-{uuid.uuid4().hex[:6]}"[:80]
        started = stepfunctions(region_of(args)).start_execution(stateMachineArn=arn, name=name, input=json.dumps(experiment.document))
    except NoCredentialsError:
        raise ConfigError("AWS credentials", "none found: set AWS_PROFILE or keys") from None
    except ClientError as err:
        raise aws_failure(err) from None
    execution = started["executionArn"]
    print(f"started {execution}")
    if args.wait:
        return watch(execution, region_of(args), bucket, poll=args.poll, plain=args.plain)
    print(f"follow it with: dslab status {execution}")
    return 0


def check_hosts_against_stats_files(experiment, bucket: str | None, region: str) -> None:
    """instance_count against each dataset's objects as its stats file counts them (`dslab dataset upload` or `stats
    --write` writes it), read as the workflow's Plan reads it (dslab/workflow/plan.py dataset_stats): S3DataSource
    "Don't choose more ML compute instances for training than available S3 objects". Refused here, before
    StartExecution, rather than by Plan after the execution started. Only datasets of multi-instance trials are read; a
    dataset whose stats file cannot be read is said, and left to Plan, which reads it again."""
    from ..core.requests import check_every_host_gets_data
    clustered = {d.name: d for t in experiment.trials if t.instance_count > 1 for d in t.datasets if d.source == "s3"}
    if not clustered or not bucket:
        return
    import boto3
    from botocore.exceptions import ClientError

    from ..workflow.plan import ExperimentInvalid, dataset_stats
    s3 = boto3.client("s3", region_name=region)
    objects: dict[str, int] = {}
    for name, dataset in sorted(clustered.items()):
        try:
            objects[name] = dataset_stats(s3, bucket, dataset.prefix)["files"]
        except ExperimentInvalid as err:   # no stats file, an empty prefix (an Express-only dataset), not JSON
            print(f"dslab: dataset '{name}': {err}. Its instance_count is checked against its objects in the "
                  "workflow's Plan", file=sys.stderr)
        except ClientError as err:
            print(f"dslab: dataset '{name}': its stats file was not read ({explain_aws(err)}); its "
                  "instance_count is checked against its objects in the workflow's Plan", file=sys.stderr)
    check_every_host_gets_data(experiment, objects)


def describe_progress(execution_arn: str, region: str, bucket: str | None = None,
                      ended: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    """Jobs by state and spend so far: the plan Plan stored lists the execution's jobs. ``ended`` (kept by
    the caller across looks) holds the jobs already seen ended, with their spend: an ended job does not
    change, so it is not described again (a 160-job run would otherwise cost 160 DescribeTrainingJob
    calls a look, ended or not)."""
    import boto3
    from botocore.exceptions import ClientError

    from ..core.facts.aws_errors import training_job_missing
    from ..core.facts.prices import PriceTable
    sfn = stepfunctions(region)
    sagemaker = boto3.client("sagemaker", region_name=region)
    described = sfn.describe_execution(executionArn=execution_arn)
    name = described.get("name") or execution_arn.rsplit(":", 1)[-1]
    counts: dict[str, int] = {}
    spend = 0.0
    unpriced: set[str] = set()
    prices = PriceTable()
    jobs: list[dict[str, Any]] = []
    concurrency = 1
    states: list[dict[str, str]] = []
    if bucket:
        from ..workflow.common import is_missing
        try:
            plan_document = json.loads(boto3.client("s3", region_name=region).get_object(
                Bucket=bucket, Key=f"results/{name}/plan.json")["Body"].read())
            jobs = plan_document["jobs"]
            concurrency = int((plan_document.get("quotas") or {}).get("concurrency") or 1)
        except ClientError as err:
            if not is_missing(err):
                raise
            jobs = []  # Plan has not written it yet
    for job in jobs:
        if job.get("skip_reason"):
            counts["Skipped"] = counts.get("Skipped", 0) + 1
            continue
        seen = (ended or {}).get(job["name"])
        if seen is None:
            try:
                state = sagemaker.describe_training_job(TrainingJobName=job["name"])
            except ClientError as err:
                if not training_job_missing(err):
                    raise
                counts["Pending"] = counts.get("Pending", 0) + 1   # not created yet
                continue
            instance_type = state["ResourceConfig"]["InstanceType"]
            hourly = prices.instance_hourly(instance_type)
            # One instance's seconds (BillableTimeInSeconds: "Multiply ... by the number of instances"), else its
            # clock since TrainingStartTime while it runs: either way x InstanceCount.
            seconds = state.get("BillableTimeInSeconds")
            start = state.get("TrainingStartTime")
            if seconds is None and hasattr(start, "timestamp"):
                seconds = time.time() - start.timestamp()
            count = int(state["ResourceConfig"].get("InstanceCount") or 1)
            # A job on an instance the price table lacks is not costed at $0: its spend is left out, and said.
            seen = {"name": job["name"], "status": state["TrainingJobStatus"], "phase": state.get("SecondaryStatus", ""),
                    "spend": (hourly or 0.0) * (seconds or 0) * count / 3600,
                    "unpriced": None if hourly is not None else instance_type}
            if ended is not None and seen["status"] in ("Completed", "Failed", "Stopped"):
                ended[job["name"]] = seen
        counts[seen["status"]] = counts.get(seen["status"], 0) + 1
        states.append({k: seen[k] for k in ("name", "status", "phase")})
        spend += seen["spend"]
        if seen.get("unpriced"):
            unpriced.add(seen["unpriced"])
    stop = described.get("stopDate")
    end = stop.timestamp() if hasattr(stop, "timestamp") else time.time()
    elapsed = end - described["startDate"].timestamp() if hasattr(described.get("startDate"), "timestamp") else 0.0
    return {"execution": execution_arn, "status": described["status"], "jobs": counts, "spend_usd": round(spend, 4),
            "unpriced_instance_types": sorted(unpriced),
            "elapsed_seconds": round(elapsed), "results": f"s3://{bucket or '<bucket>'}/results/{name}/results.json",
            "error": described.get("error"), "cause": described.get("cause"),
            "total": len(jobs), "concurrency": concurrency, "job_states": states}


def spend_text(state: dict[str, Any]) -> str:
    """The spend so far, saying which jobs it leaves out (instances the price table does not price)."""
    unpriced = state.get("unpriced_instance_types") or []
    return f"${state['spend_usd']:.2f}" + (f" (not counting the jobs on {', '.join(unpriced)}: not in the price table)"
                                            if unpriced else "")


POLL_SECONDS = 15.0   # between looks at the execution: a DescribeTrainingJob per job not yet seen ended
FAILED_LOOKS = 5      # throttled or unavailable looks in a row before watching gives up (the execution runs on)


def _look(execution_arn: str, region: str, bucket: str | None, ended: dict, poll: float) -> dict[str, Any]:
    """One look at the execution; a throttled or unavailable one (botocore has retried it already) is tried again
    at the next look, FAILED_LOOKS times in a row at most."""
    from botocore.exceptions import ClientError

    from ..core.facts.aws_errors import is_transient
    for failed in range(1, FAILED_LOOKS + 1):
        try:
            return describe_progress(execution_arn, region, bucket, ended)
        except ClientError as err:
            if not is_transient(err):
                raise
            if failed == FAILED_LOOKS:
                raise aws_failure(err, f"{FAILED_LOOKS} looks in a row failed; the execution keeps running, "
                                       f"`dslab status {execution_arn} --wait` follows it again") from None
            print(f"dslab: this look failed ({explain_aws(err)}); looking again in {poll:g} s", file=sys.stderr)
            time.sleep(poll)
    raise AssertionError("unreachable")


def watch(execution_arn: str, region: str, bucket: str | None = None, poll: float | None = None,
          plain: bool = False) -> int:
    """Follow an execution until it ends: jobs done of total, each job's phase, elapsed, time left and the
    spend so far (a live table on a terminal, a line per change otherwise). Ctrl-C stops watching only."""
    from ..core.progress import RunProgress
    from ..progress_view import ProgressView
    ended: dict[str, dict[str, Any]] = {}   # jobs seen ended: not described again
    every = POLL_SECONDS if poll is None else poll
    try:
        state = _look(execution_arn, region, bucket, ended, every)
        progress = RunProgress(state["total"], state["concurrency"], started=time.monotonic() - state["elapsed_seconds"])
        with ProgressView(progress, live=False if plain else None,
                          footer=lambda: f"spend so far {spend_text(state)}") as view:
            while True:
                progress.total = state["total"]
                progress.skipped = state["jobs"].get("Skipped", 0)
                for job in state["job_states"]:
                    view.observe(job["name"], job["status"], job["phase"])
                view.tick()
                if state["status"] != "RUNNING":
                    break
                time.sleep(every)
                state = _look(execution_arn, region, bucket, ended, every)
    except KeyboardInterrupt:
        print(f"\nstopped watching; the execution keeps running. Reattach with: dslab status {execution_arn} --wait")
        return 130
    print(f"{state['status']}: {progress.counts()}, spend {spend_text(state)}; results in {state['results']}"
          + (f" ({state['error']}: {state['cause']})" if state.get("error") else ""))
    return 0 if state["status"] == "SUCCEEDED" else 1


def cmd_status(args) -> int:
    region = region_of(args)
    execution = args.execution
    arn, bucket = workflow_of(args)
    if not execution:
        executions = stepfunctions(region).list_executions(stateMachineArn=arn, maxResults=1)["executions"]
        if not executions:
            raise ConfigError("EXECUTION", "the workflow has no executions yet: start one with dslab run")
        execution = executions[0]["executionArn"]
    if args.wait:
        return watch(execution, region, bucket, poll=args.poll, plain=args.plain)
    state = describe_progress(execution, region, bucket)
    if args.json:
        print_json(state)
    else:
        print(f"{state['status']}: {state['elapsed_seconds']} s, jobs {state['jobs']}, spend {spend_text(state)}; "
              f"results: {state['results']}")
    return 0


def cmd_report(args) -> int:
    from ..report import load_results, results_from_describe_dir, write_report
    chosen = [x for x in (args.execution, args.results, args.describe_json) if x]
    if len(chosen) != 1:
        raise ConfigError("EXECUTION | --results | --describe-json", "give exactly one source of results")
    prices = price_table(args.prices)
    if args.describe_json and args.calibration:
        raise ConfigError("--calibration", "goes with results that hold their experiment (--results, or an EXECUTION): "
                          "DescribeTrainingJob outputs name no premise to estimate")
    if args.results:
        results = load_results(Path(args.results))
    elif args.describe_json:
        results = results_from_describe_dir(Path(args.describe_json), prices)
    else:
        from ..inputs.experiment_file import read_document
        overrides = read_document(Path(args.prices)) if args.prices else None
        results = _results_from_execution(args.execution, region_of(args), prices, overrides)
    from ..inputs.calibration_file import read_calibration
    paths = write_report(results, Path(args.out), read_calibration(args.calibration) if args.calibration else None)
    partial = results.get("partial")
    if partial:
        print(f"partial report: {partial['reason']} at {partial['done']}/{partial['total']} jobs; "
              "it reports the jobs that finished")
    print(f"report written to {args.out}: " + ", ".join(p.name for p in paths.values()))
    return 0


def _results_from_execution(execution: str, region: str, prices, overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    """The execution's results.json; where Collect never wrote one (the execution was stopped, failed before it,
    or still runs), what finished: every planned job whose last attempt ended, marked partial."""
    import boto3
    from botocore.exceptions import ClientError

    from ..workflow.collect import finished_records, results_document
    outputs = outputs_from_cloudformation(region)
    name = execution.rsplit(":", 1)[-1]
    bucket = outputs["BucketName"]
    s3 = boto3.client("s3", region_name=region)

    def read(key: str) -> dict[str, Any] | None:
        try:
            return json.loads(s3.get_object(Bucket=bucket, Key=f"results/{name}/{key}")["Body"].read())
        except ClientError as err:
            if err.response["Error"]["Code"] in ("NoSuchKey", "404"):
                return None
            raise aws_failure(err, f"s3://{bucket}/results/{name}/{key} could not be read") from None

    results = read("results.json")
    if results is not None:
        return results
    plan_document = read("plan.json")
    if plan_document is None:
        raise ConfigError("EXECUTION", f"no results and no plan for {name} in s3://{bucket}/results/{name}/: the "
                          "execution never got past Plan (its history says why), or the name is wrong")
    arn = execution if execution.startswith("arn:") else (
        outputs["StateMachineArn"].replace(":stateMachine:", ":execution:") + f":{name}")
    status = stepfunctions(region).describe_execution(executionArn=arn)["status"]
    records = finished_records(s3, boto3.client("sagemaker", region_name=region), bucket, plan_document, prices)
    results = results_document(plan_document, records, prices, overrides)
    to_run = sum(1 for job in plan_document["jobs"] if not job.get("skip_reason"))
    reason = "the execution is still running" if status == "RUNNING" else f"the execution ended {status}"
    results["partial"] = {"done": len(records), "total": to_run, "reason": reason}
    return results


def _positive_seconds(text: str) -> float:
    import argparse
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 0.1 <= value <= 3600:
        raise argparse.ArgumentTypeError(f"{text} is outside 0.1..3600 seconds")
    return value


def register(sub) -> None:
    p = add_command(sub, "plan", cmd_plan, "Print the exact CreateTrainingJob requests an experiment would run (no AWS call "
                    "with --outputs or --offline).", "dslab plan --experiment experiments/post-12-jobs.yaml --offline")
    p.add_argument("--experiment", help="experiment YAML (or --workload alone)")
    add_instance_flags(p)   # the experiment's instance_type, instance_count and epochs, for every trial
    add_calibration_flag(p)
    add_workload_flags(p)
    p.add_argument("--outputs", help="cdk deploy --outputs-file JSON (else read from CloudFormation)")
    p.add_argument("--offline", action="store_true", help="use the stand-in lab's stack outputs: no AWS account needed")
    p.add_argument("--execution", default="plan-preview", help="execution name used in job names (default plan-preview)")
    p.add_argument("--region")
    p.add_argument("--json", action="store_true")

    p = add_command(sub, "run", cmd_run, "Start the workflow on the deployed lab.",
                    "dslab run --experiment experiments/all-modes-20-jobs.yaml --wait")
    p.add_argument("--experiment", help="experiment YAML (or --workload alone)")
    add_instance_flags(p)   # the experiment's instance_type, instance_count and epochs, for every trial
    add_calibration_flag(p)
    add_workload_flags(p)
    p.add_argument("--repeats", type=whole(1, MAX_REPEATS), help="run every job this many times, whatever the file says "
                   "(MLPerf Storage reports the mean of 5 runs; from 3 the report gives a 95%% interval)")
    p.add_argument("--outputs")
    p.add_argument("--region")
    p.add_argument("--wait", action="store_true", help="live progress until the execution ends (Ctrl-C leaves it running)")
    p.add_argument("--poll", type=_positive_seconds, help=f"with --wait: seconds between looks (default {POLL_SECONDS:g})")
    p.add_argument("--plain", action="store_true", help="with --wait: a line per job change instead of the live table")

    p = add_command(sub, "status", cmd_status, "Show an execution's progress: jobs by state, elapsed, spend so far.",
                    "dslab status arn:aws:states:us-east-1:123456789012:execution:DataSourceLabWorkflow:abc --wait")
    p.add_argument("execution", nargs="?", metavar="EXECUTION")
    p.add_argument("--outputs")
    p.add_argument("--region")
    p.add_argument("--wait", action="store_true")
    p.add_argument("--poll", type=_positive_seconds, help=f"with --wait: seconds between looks (default {POLL_SECONDS:g})")
    p.add_argument("--plain", action="store_true", help="with --wait: a line per job change instead of the live table")
    p.add_argument("--json", action="store_true")

    p = add_command(sub, "report", cmd_report, "Write results.json, results.csv, report.md, report.html and breakdown.png.",
                    "dslab report --results lab-out/results.json --out report-out")
    p.add_argument("execution", nargs="?", metavar="EXECUTION",
                   help="an execution's ARN or name: its results, or what finished of one stopped or failed before "
                        "its results were stored (the report says partial)")
    p.add_argument("--results", help="a results.json file")
    p.add_argument("--describe-json", help="a folder of DescribeTrainingJob JSON files")
    p.add_argument("--out", required=True)
    p.add_argument("--prices", help="YAML file overriding prices")
    add_calibration_flag(p)
    p.add_argument("--region")
