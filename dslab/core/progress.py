"""A run's progress: how many jobs are done, each job's phase, the time elapsed and an estimate of the
time left, from the job states a watcher observes (DescribeTrainingJob's status and secondary status).

Plain data and arithmetic, no I/O: `dslab local` and `dslab run --wait` feed it, and the CLI shows it
(dslab/cli/progress.py: a live table on a terminal, a line per change otherwise)."""

from __future__ import annotations

from dataclasses import dataclass

ENDED = ("Completed", "Failed", "Stopped")
RUNNING = "InProgress"


@dataclass
class JobProgress:
    name: str
    status: str = "Pending"    # TrainingJobStatus once the job exists
    phase: str = ""            # SecondaryStatus: Starting, Downloading, Training, Uploading, ...
    started: float | None = None
    ended: float | None = None

    @property
    def state(self) -> str:
        return f"{self.status}/{self.phase}" if self.phase else self.status

    def seconds(self, now: float) -> float | None:
        if self.started is None:
            return None
        return (self.ended if self.ended is not None else now) - self.started


class RunProgress:
    """The jobs of one run as observed so far; ``total`` is the run's job count (the experiment's
    expansion), ``concurrency`` how many run side by side (its max_concurrency)."""

    def __init__(self, total: int, concurrency: int = 1, started: float = 0.0):
        self.total, self.concurrency, self.started = total, max(1, concurrency), started
        self.jobs: dict[str, JobProgress] = {}
        self.skipped = 0
        self.kept = 0   # finished by an earlier attempt (a resumed `dslab local`): not run again

    def observe(self, name: str, status: str, phase: str | None, now: float) -> bool:
        """Record a job's state; True when it changed."""
        job = self.jobs.setdefault(name, JobProgress(name))
        phase = phase or ""
        if (job.status, job.phase) == (status, phase):
            return False
        if job.started is None:
            job.started = now
        if status in ENDED and job.ended is None:
            job.ended = now
        job.status, job.phase = status, phase
        return True

    @property
    def to_run(self) -> int:
        return max(self.total - self.skipped - self.kept, 0)

    @property
    def done(self) -> int:
        return sum(1 for j in self.jobs.values() if j.status in ENDED)

    @property
    def failed(self) -> int:
        return sum(1 for j in self.jobs.values() if j.status in ENDED and j.status != "Completed")

    @property
    def running(self) -> int:
        return sum(1 for j in self.jobs.values() if j.status == RUNNING)

    def eta(self, now: float) -> float | None:
        """Seconds left: the jobs still to run at the mean duration of those that ended, ``concurrency``
        at a time, the running ones less what they have had. None until a job has ended, and once all have."""
        finished = [j.seconds(now) for j in self.jobs.values() if j.status in ENDED and j.started is not None]
        if not finished:
            return None
        mean = sum(finished) / len(finished)
        running = [j for j in self.jobs.values() if j.status == RUNNING]
        if not running and self.done >= self.to_run:
            return None  # nothing left
        left_running = sum(max(mean - (j.seconds(now) or 0.0), 0.0) for j in running)
        waiting = max(self.to_run - self.done - len(running), 0)
        return (left_running + waiting * mean) / self.concurrency

    def counts(self) -> str:
        text = f"{self.done}/{self.to_run} jobs done"
        if self.failed:
            text += f" ({self.failed} failed)"
        if self.skipped:
            text += f", {self.skipped} skipped"
        if self.kept:
            text += f", {self.kept} kept from the earlier attempt"
        return text

    def summary(self, now: float) -> str:
        eta = self.eta(now)
        return (f"{self.counts()}, {self.running} running; {clock(now - self.started)} elapsed"
                + (f", about {clock(eta)} left" if eta is not None else ""))

    def line(self, name: str, now: float) -> str:
        """One job's change, as a plain line: when, which job, its state, and where the run stands."""
        eta = self.eta(now)
        return (f"  [{now - self.started:6.1f}s] {name}: {self.jobs[name].state} ({self.done}/{self.to_run} done"
                + (f", about {clock(eta)} left" if eta is not None else "") + ")")


def clock(seconds: float) -> str:
    seconds = int(round(max(seconds, 0.0)))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
