"""SageMaker training quotas: refuse an experiment the account cannot run, before any job starts.

Service Quotas names SageMaker's per-instance-type training quotas "ml.p3.2xlarge for training job
usage" (and "... for spot training job usage"); GPU types are 0 in many accounts. A job that
asks for more gets ResourceLimitExceeded, and retrying that can never succeed, so Plan checks first
(service code ``sagemaker``; ListServiceQuotas cannot filter by name, so the caller lists them all).
Pure logic: the caller supplies the quotas it read.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .errors import ConfigError
from .experiment import Experiment

SERVICE_CODE = "sagemaker"
ALL_TRAINING_INSTANCES = "Number of instances across all training jobs"


def training_quota_name(instance_type: str, spot: bool) -> str:
    return f"{instance_type} for {'spot ' if spot else ''}training job usage"


@dataclass(frozen=True)
class Quota:
    name: str
    code: str
    value: float


@dataclass
class QuotaDecision:
    concurrency: int                       # lanes the account can run side by side
    notes: list[str] = field(default_factory=list)
    checked: dict[str, float] = field(default_factory=dict)


def _increase(quota: Quota, region: str, wanted: int) -> str:
    return (f"request more in the Service Quotas console, or `aws service-quotas request-service-quota-increase "
            f"--region {region} --service-code {SERVICE_CODE} --quota-code {quota.code} --desired-value {wanted}`")


def check_training_quotas(experiment: Experiment, quotas: dict[str, Quota], region: str) -> QuotaDecision:
    """Raise ConfigError if a job can never start; otherwise the concurrency the quotas allow."""
    needs: dict[str, int] = {}
    for trial in experiment.trials:
        name = training_quota_name(trial.instance_type, trial.spot)
        needs[name] = max(needs.get(name, 0), trial.instance_count)
    decision = QuotaDecision(concurrency=experiment.max_concurrency)
    for name, count in sorted(needs.items()):
        quota = quotas.get(name)
        if quota is None:
            decision.notes.append(f"quota '{name}' is not listed by Service Quotas; not checked")
            continue
        decision.checked[name] = quota.value
        if quota.value < count:
            raise ConfigError(
                "instance_type",
                f"the account's SageMaker quota '{name}' ({quota.code}) is {quota.value:g} in {region}, "
                f"and a job of this experiment needs {count} instance(s): it could never start",
                f"another instance_type, or {_increase(quota, region, count * experiment.max_concurrency)}")
        fits = int(quota.value // count)
        if fits < decision.concurrency:
            decision.notes.append(f"max_concurrency lowered from {decision.concurrency} to {fits}: "
                                  f"quota '{name}' is {quota.value:g} and each job needs {count}")
            decision.concurrency = fits
    overall = quotas.get(ALL_TRAINING_INSTANCES)
    if overall is not None and needs:
        largest = max(needs.values())
        decision.checked[ALL_TRAINING_INSTANCES] = overall.value
        if overall.value < largest:
            raise ConfigError("instance_count",
                              f"the account's quota '{ALL_TRAINING_INSTANCES}' ({overall.code}) is {overall.value:g} "
                              f"in {region}, and a job needs {largest}", _increase(overall, region, largest))
        fits = int(overall.value // largest)
        if fits < decision.concurrency:
            decision.notes.append(f"max_concurrency lowered from {decision.concurrency} to {fits}: "
                                  f"quota '{ALL_TRAINING_INSTANCES}' is {overall.value:g}")
            decision.concurrency = fits
    return decision
