"""What the running emulator sets and the patches read."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Callable

JobExecutor = Callable[[dict, Callable[[dict], None]], dict]


class ServiceRefusal(Exception):
    """An error a stand-in rule answers with, as the service would: its documented error code and a message."""

    def __init__(self, code: str, message: str):
        super().__init__(f"{code}: {message}")
        self.code, self.message = code, message


@dataclass
class Hooks:
    """Set by the running emulator; read by the patches."""
    job_executor: JobExecutor | None = None   # (request, on_update) -> final DescribeTrainingJob fields
    # (task_arn, includes, the execution's OverrideOptions) runs a DataSync task execution; raises on failure
    stager: Callable[[str, str, dict], None] | None = None
    # file system ID -> its metered size per storage class (DescribeFileSystems' SizeInBytes), or None
    efs_size: Callable[[str], dict | None] | None = None
    on_stack_delete: Callable[[str], None] | None = None
    time_scale: float = 1.0
    threads: list[threading.Thread] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    # (request) -> (error code, message) to refuse a CreateTrainingJob call, or None
    create_fault: Callable[[dict], tuple[str, str] | None] | None = None
    # quota name -> value (SageMaker training quotas the stand-in answers and enforces)
    quotas: dict[str, float] = field(default_factory=dict)
    # quota name -> applied value of FSx for Lustre's storage quotas (GiB), where a test sets one below the default
    fsx_quotas: dict[str, float] = field(default_factory=dict)
    # () -> (associations, tasks) of the FSx file system, for the DescribeDataRepository* calls
    fsx_repository: Callable[[], tuple[list[dict], list[dict]]] | None = None
    # stack name -> (seconds until the deletion ends, failure reason or None)
    stack_deletion: Callable[[str], tuple[float, str | None]] | None = None
    max_state_bytes: int = 0
    history_events: dict[int, int] = field(default_factory=dict)  # per execution (event manager)
    # added to every function's own environment (the template's): the stand-in's endpoint, test knobs
    function_env: dict[str, str] = field(default_factory=dict)
    # (method, bucket, key or None) -> (HTTP status, error code, message) to answer an S3 request with, or None:
    # e.g. a directory bucket idle for 90 days answering 503 while it wakes up
    s3_fault: Callable[[str, str, str | None], tuple[int, str, str] | None] | None = None
    # (method, bucket, key or None, query) for every S3 request the stand-in answers (tests count them)
    s3_observer: Callable[[str, str, str | None, dict], None] | None = None
    datasync_seconds: float = 0.0    # how long (stand-in seconds) a DataSync task execution transfers
    # (CreateDataRepositoryTask parameters) -> the new task, for the emulated FSx's associations; raises
    # ServiceRefusal for what FSx refuses
    fsx_create_task: Callable[[dict], dict] | None = None
    # (service ID as botocore hyphenizes it, e.g. "s3" or "sfn"; operation name; the prepared request) -> (HTTP status,
    # error code, message) to answer that request with, in the service's own protocol (patches/faults.py), or None: any
    # AWS error of any call, injected where the stand-in answers, so that botocore parses and retries it as on AWS
    api_fault: Callable[[str, str, object], tuple[int, str, str] | None] | None = None
    # training job name -> set when its executor has given the job its final fields (the .sync task's wake-up)
    job_ended: dict[str, threading.Event] = field(default_factory=dict)


HOOKS = Hooks()
