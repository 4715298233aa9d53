"""A scripted training-job executor for workflow tests: realistic DescribeTrainingJob outcomes,
decided by the test (fail this job, refuse capacity twice), without running a container."""

from __future__ import annotations

import datetime as dt
import io
import json
import tarfile
from dataclasses import dataclass, field
from typing import Callable

import boto3


def _tar(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


@dataclass
class ScriptedJobs:
    fail: Callable[[dict], str | None] = lambda request: None      # -> failure reason
    capacity_failures: Callable[[dict], bool] = lambda request: False
    requests: list[dict] = field(default_factory=list)
    training_seconds: float = 100.0
    _client: object = None

    def _s3(self):
        """One client for every job: creating a boto3 client costs more than a scripted job."""
        if self._client is None:
            self._client = boto3.client("s3", region_name="us-east-1")
        return self._client

    def __call__(self, request: dict, update) -> dict:
        self.requests.append(request)
        channel = (request.get("InputDataConfig") or [{"InputMode": "Script", "DataSource": {}}])[0]  # Script: none
        mode = channel.get("InputMode", "File")
        start = dt.datetime(2026, 11, 29, 12, 0, 0, tzinfo=dt.timezone.utc)
        at = start

        def phase(status: str, seconds: float, message: str = "") -> dict:
            nonlocal at
            begin, at = at, at + dt.timedelta(seconds=seconds)
            return {"Status": status, "StartTime": begin.isoformat(), "EndTime": at.isoformat(), "StatusMessage": message}

        if self.capacity_failures(request):
            transitions = [phase("Starting", 30)]
            return {"TrainingJobStatus": "Failed", "SecondaryStatus": "Failed", "SecondaryStatusTransitions": transitions,
                    "FailureReason": "CapacityError: Unable to provision requested ML compute capacity. "
                                     "Please retry using a different ML instance type."}
        transitions = [phase("Starting", 60)]
        training_start = at
        downloading = "FileSystemDataSource" not in channel["DataSource"] and mode == "File"
        if downloading:
            transitions.append(phase("Downloading", 40))
        transitions.append(phase("Training", self.training_seconds))
        reason = self.fail(request)
        if reason:
            transitions.append({"Status": "Failed", "StartTime": at.isoformat(), "EndTime": at.isoformat()})
            seconds = int((at - training_start).total_seconds())
            return {"TrainingJobStatus": "Failed", "SecondaryStatus": "Failed", "SecondaryStatusTransitions": transitions,
                    "FailureReason": reason, "TrainingStartTime": training_start.isoformat(),
                    "TrainingEndTime": at.isoformat(), "TrainingTimeInSeconds": seconds,
                    "BillableTimeInSeconds": seconds}   # one instance's, as SageMaker's
        transitions.append(phase("Uploading", 5))
        transitions.append({"Status": "Completed", "StartTime": at.isoformat(), "EndTime": at.isoformat()})
        seconds = int((at - training_start).total_seconds())
        metrics = {"samples_per_second": 320.0, "mb_per_second": 12.5, "au_percent": 97.0,
                   "time_to_first_batch_seconds": 0.8, "epoch_seconds": [self.training_seconds], "samples": 1000,
                   "epochs": 1}
        # As the lab's script writes them: metrics.json on one host, each host its metrics-<host>.json on
        # several (the second host 10 samples/s and 1% AU below the first).
        count = request["ResourceConfig"]["InstanceCount"]
        files = {"metrics.json": metrics} if count == 1 else {
            f"metrics-algo-{i + 1}.json": {**metrics, "samples_per_second": 320.0 - 10 * i, "au_percent": 97.0 - i,
                                           "host": f"algo-{i + 1}"} for i in range(count)}
        output = request["OutputDataConfig"]["S3OutputPath"].rstrip("/")
        bucket, _, prefix = output[5:].partition("/")
        s3 = self._s3()
        s3.put_object(Bucket=bucket, Key=f"{prefix}/{request['TrainingJobName']}/output/output.tar.gz",
                      Body=_tar({name: json.dumps(body).encode() for name, body in files.items()}))
        return {"TrainingJobStatus": "Completed", "SecondaryStatus": "Completed", "SecondaryStatusTransitions": transitions,
                "TrainingStartTime": training_start.isoformat(), "TrainingEndTime": at.isoformat(),
                "TrainingTimeInSeconds": seconds, "BillableTimeInSeconds": seconds,   # one instance's, as SageMaker's
                "FinalMetricDataList": [{"MetricName": "samples_per_second", "Value": 320.0, "Timestamp": at.isoformat()}]}
