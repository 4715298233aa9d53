"""Progress on screen while a run goes (``dslab local``, ``dslab run --wait``, ``dslab status --wait``): a
live table on a terminal (rich), one plain line per change when output goes to a file or a pipe."""

from __future__ import annotations

import sys
import time
from typing import Callable

from .core.progress import RunProgress, clock


class ProgressView:
    """Shows a RunProgress. ``live`` defaults to whether standard output is a terminal; ``footer`` adds a
    line under the table (the spend so far, say)."""

    def __init__(self, progress: RunProgress, *, live: bool | None = None, say: Callable[[str], None] = print,
                 console=None, footer: Callable[[], str] | None = None, clock_now: Callable[[], float] = time.monotonic):
        self.progress, self.say, self.footer, self.now = progress, say, footer, clock_now
        self.live = sys.stdout.isatty() if live is None else live
        self._console, self._live = console, None

    def __enter__(self) -> "ProgressView":
        if self.live:
            from rich.console import Console
            from rich.live import Live
            self._live = Live(self.render(), console=self._console or Console(), refresh_per_second=2)
            self._live.start()
        return self

    def __exit__(self, *exc) -> None:
        if self._live is not None:
            self._live.update(self.render())
            self._live.stop()
            self._live = None

    def observe(self, name: str, status: str, phase: str | None) -> None:
        now = self.now()
        if self.progress.observe(name, status, phase, now):
            if self._live is None:
                self.say(self.progress.line(name, now))
        self.tick()

    def tick(self) -> None:
        if self._live is not None:
            self._live.update(self.render())

    def render(self):
        """The run's summary line, a row per job (state, time in it), and the footer."""
        from rich.console import Group
        from rich.table import Table
        from rich.text import Text
        now = self.now()
        table = Table()
        for column, justify in (("job", "left"), ("phase", "left"), ("time", "right")):
            table.add_column(column, justify=justify)
        for job in self.progress.jobs.values():
            seconds = job.seconds(now)
            table.add_row(job.name, job.state, clock(seconds) if seconds is not None else "-")
        waiting = self.progress.to_run - len(self.progress.jobs)
        if waiting > 0:
            table.add_row(f"({waiting} more)", "not started", "-")
        parts = [Text(self.progress.summary(now)), table]
        if self.footer is not None:
            parts.append(Text(self.footer()))
        return Group(*parts)
