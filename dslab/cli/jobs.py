"""``dslab job run-local``: one CreateTrainingJob request on this machine (dslab/local/runner.py)."""

from __future__ import annotations

import argparse
from pathlib import Path

from .common import add_command


def cmd_job_run_local(args) -> int:
    from ..local.runner import run_request_file
    outcome = run_request_file(Path(args.request), Path(args.s3_root), Path(args.fs_root) if args.fs_root else None,
                               Path(args.out), code_dir=Path(args.code) if args.code else None)
    d = outcome.describe
    line = f"{d['TrainingJobName']}: {d['TrainingJobStatus']}"
    if d.get("FailureReason"):
        line += f" - {d['FailureReason']}"
    if outcome.metrics:
        m = outcome.metrics
        au = m.get("au_percent")
        line += (f"; {m['samples']} samples, {m['samples_per_second']:.1f} samples/s, {m['mb_per_second']:.1f} MB/s"
                 + (f", AU {au:.1f}%" if au is not None else ""))
    print(line)
    print(f"describe.json, metrics.json and the model artifact are in {args.out}")
    return 0 if d["TrainingJobStatus"] == "Completed" else 1


def register(sub) -> None:
    job = sub.add_parser("job", help="run one CreateTrainingJob request locally", formatter_class=argparse.RawDescriptionHelpFormatter,
                         description="Run one CreateTrainingJob request on this machine.\n\nexample:\n"
                                     "  dslab job run-local --request req.json --s3-root stand-in/s3 --out job-out")
    jsub = job.add_subparsers(dest="job_command", required=True)
    p = add_command(jsub, "run-local", cmd_job_run_local,
                    "Run a CreateTrainingJob request on this machine against a folder stand-in for S3 and file systems.",
                    "dslab job run-local --request req.json --s3-root stand-in/s3 --fs-root stand-in/fs --out job-out")
    p.add_argument("--request", required=True, help="CreateTrainingJob request JSON (as `dslab plan --json` prints)")
    p.add_argument("--s3-root", required=True, help="folder with one sub-folder per bucket")
    p.add_argument("--fs-root", help="folder with one sub-folder per file-system ID (FSx, EFS)")
    p.add_argument("--out", required=True)
    p.add_argument("--code", help="use this folder as the training code instead of sagemaker_submit_directory")
