"""How precise a figure from repeated runs is: one run has no measured spread; two give their range; from
three, a 95% confidence interval of the mean (Student's t). Plain arithmetic, standard library only.

MLPerf Storage: "A benchmark result is the mean of 5 run results, executed consecutively"
(https://github.com/mlcommons/storage/blob/main/Submission_guidelines.md, Definitions).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Iterable

# Two-sided 95% critical values of Student's t (the upper 0.025 point) by degrees of freedom, as the NIST/SEMATECH
# e-Handbook of Statistical Methods tabulates them ("Upper critical values of Student's t distribution", 0.025
# column); NIST TN 1297, Table B.1, "tp(v) ... that defines an interval -tp(v) to +tp(v) that encompasses the
# fraction p of the distribution", gives the same to two decimals (p = 95: 12.71, 4.30, 3.18, 2.78, 2.57, ...;
# https://www.nist.gov/physical-measurement-laboratory/nist-tn-1297-guidelines-appendix-b-table-b1).
T95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262, 10: 2.228,
       11: 2.201, 12: 2.179, 13: 2.160, 14: 2.145, 15: 2.131, 16: 2.120, 17: 2.110, 18: 2.101, 19: 2.093,
       20: 2.086, 21: 2.080, 22: 2.074, 23: 2.069, 24: 2.064, 25: 2.060, 26: 2.056, 27: 2.052, 28: 2.048,
       29: 2.045, 30: 2.042, 40: 2.021, 60: 2.000, 100: 1.984}
T95_INFINITE = 1.960
# From three runs the mean gets a 95% interval; two runs only show their range (one degree of freedom: t = 12.7).
INTERVAL_FROM = 3


def t95(degrees_of_freedom: int) -> float:
    """The two-sided 95% critical value of t; between the table's rows, linear in 1/df (the usual interpolation)."""
    if degrees_of_freedom < 1:
        raise ValueError("a t interval needs at least two runs")
    if degrees_of_freedom in T95:
        return T95[degrees_of_freedom]
    rows = sorted(T95)
    if degrees_of_freedom > rows[-1]:
        low, t_low, high_inverse, t_high = rows[-1], T95[rows[-1]], 0.0, T95_INFINITE
    else:
        low = max(r for r in rows if r < degrees_of_freedom)
        high = min(r for r in rows if r > degrees_of_freedom)
        t_low, high_inverse, t_high = T95[low], 1 / high, T95[high]
    share = (1 / low - 1 / degrees_of_freedom) / (1 / low - high_inverse)
    return t_low + share * (t_high - t_low)


@dataclass(frozen=True)
class Spread:
    """The runs of one figure: their count, mean, range and (from three runs) the mean's 95% interval."""
    runs: int
    mean: float
    low: float
    high: float
    half_width: float | None = None   # of the 95% confidence interval of the mean

    @property
    def interval(self) -> tuple[float, float] | None:
        """Where the mean lies: its 95% interval from three runs, the runs' range for two, None for one run."""
        if self.runs < 2:
            return None
        if self.half_width is not None:
            return self.mean - self.half_width, self.mean + self.half_width
        return self.low, self.high

    def describe(self, digits: int = 1, unit: str = "") -> str:
        """"n/a (one run)"; "min-max 98.0-102.0"; with three runs or more "min-max ...; 95% CI 100.0 ± 2.5"."""
        if self.runs < 2:
            return "n/a (one run)"
        text = f"min–max {self.low:,.{digits}f}–{self.high:,.{digits}f}{unit}"
        if self.half_width is not None:
            text += f"; 95% CI {self.mean:,.{digits}f} ± {self.half_width:,.{digits}f}{unit}"
        return text


def spread(values: Iterable[float]) -> Spread | None:
    values = [float(v) for v in values]
    if not values:
        return None
    mean = statistics.fmean(values)
    half = None
    if len(values) >= INTERVAL_FROM:
        half = t95(len(values) - 1) * statistics.stdev(values) / math.sqrt(len(values))
    return Spread(len(values), mean, min(values), max(values), half)


__all__ = ["Spread", "spread", "t95", "INTERVAL_FROM"]
