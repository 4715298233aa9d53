"""Calibration benchmark (`make bench-calibration`): prints figures, asserts nothing (tests/test_calibration.py does).

On Bencher's 12 measured cells (dslab/contracts/bencher-cells.csv; dslab/core/model/calibration.py):
  1. the fitted constants: the fit on all cells, on the nine the hand fit used (A, B, D), the cells each rests on;
  2. the in-sample error of the model as it ships;
  3. leave one scenario out: each scenario predicted by the model fitted on the other three, its out-of-sample
     error per source, and whether the measured value falls inside the interval that fold's evidence gives;
  4. the coverage and the mean width of those intervals, and of the shipped model's intervals on the same cells;
  5. `dslab recommend` on the post's four cells (ml.p3.2xlarge, V100, one epoch): each pick with its range, and
     the sources its range cannot tell apart from it.
"""

from __future__ import annotations

from statistics import mean

from dslab.core.model.calibration import calibration, estimate_range, fit, measured_cells
from dslab.core.model.estimate import MODEL, estimate_mode, mape
from dslab.core.shape import DatasetShape
from dslab.core.facts.compute import compute_rate
from dslab.core.facts.prices import PriceTable
from dslab.core.answer.recommend import recommend

RATE = compute_rate("v100")[0]
POST_CELLS = {"A: 30,607 JPEGs, 1.1 GB": (30_607, 1_100_000_000), "B: 10 TFRecord shards, 1.1 GB": (10, 1_100_000_000),
              "C: 1,530,350 JPEGs, 54 GB": (1_530_350, 54_000_000_000), "D: 500 TFRecord shards, 54 GB": (500, 54_000_000_000)}


def shown(value: float) -> str:
    return f"{value * 1000:.2f} ms" if value < 1 else f"{value:,.1f}"


def main() -> None:
    cells = measured_cells()
    cal = calibration()
    nine = fit([c for c in cells if c.scenario != "C"])
    print("1. fitted constants (estimate.Model; calibration.fit)")
    print(f"   {'constant':22s} {'as shipped':>11s} {'all 12 cells':>13s} {'A, B, D':>11s}  rests on")
    for name, f in cal.fitted.items():
        rests = ", ".join(f.cells) + ("" if f.cross_validated else "  (one cell: not cross-validated; range "
                                      f"{shown(f.low)}-{shown(f.high)})")
        print(f"   {name:22s} {shown(getattr(MODEL, name)):>11s} {shown(f.value):>13s} {shown(nine[name].value):>11s}  {rests}")

    prices = PriceTable()
    pairs = [(estimate_mode(c.mode, c.shape, rate=RATE, prices=prices).billable_seconds, c.total) for c in cells]
    print(f"\n2. in sample (the model as shipped, fitted on these cells): MAPE {mape(pairs):.1f}% over {len(cells)} cells")

    print("\n3. leave one scenario out: fitted on the other three, billable seconds")
    print(f"   {'scenario':8s} {'source':9s} {'measured':>9s} {'predicted':>10s} {'error':>7s} {'interval':>17s} "
          f"{'width':>7s}  inside  not cross-validated in this fold")
    predictions = [p for fold in cal.folds for p in fold.predictions]
    for p in predictions:
        width = (p.high - p.low) / 2 / p.predicted
        print(f"   {p.scenario:8s} {p.mode:9s} {p.measured:9,.0f} {p.predicted:10,.0f} {p.error:+7.1%} "
              f"{p.low:8,.0f}-{p.high:<8,.0f} {width:7.1%}  {'yes' if p.inside else 'NO':6s}  "
              f"{', '.join(p.not_cross_validated) or '-'}")
    for mode in ("File", "FastFile", "FSx"):
        errors = [p.error for p in predictions if p.mode == mode]
        print(f"   {mode:9s} out-of-sample: mean |error| {mean(abs(e) for e in errors):.1%}, from {min(errors):+.1%} "
              f"to {max(errors):+.1%}")
    print(f"   all:      out-of-sample MAPE {mape([(p.predicted, p.measured) for p in predictions]):.1f}%")

    inside = sum(p.inside for p in predictions)
    print(f"\n4. coverage: {inside} of {len(predictions)} measured values inside their left-out interval; mean half-width "
          f"{mean((p.high - p.low) / 2 / p.predicted for p in predictions):.1%} (widest "
          f"{max((p.high - p.low) / 2 / p.predicted for p in predictions):.1%})")
    shipped = []
    for c in cells:
        e = estimate_mode(c.mode, c.shape, rate=RATE, prices=prices)
        r = estimate_range(e, c.shape, rate=RATE, prices=prices)
        shipped.append((c, e, r))
    print("   the shipped model's ranges on the same cells (what `dslab estimate` prints for them):")
    for c, e, r in shipped:
        print(f"   {c.label:12s} {r.billable_low:8,.0f}-{r.billable_high:<8,.0f} {r.billable_low / e.billable_seconds - 1:+6.1%} "
              f"{r.billable_high / e.billable_seconds - 1:+6.1%}  measured {c.total:,.0f} "
              f"{'inside' if r.billable_low <= c.total <= r.billable_high else 'OUTSIDE'}")
    print(f"   mean half-width {mean((r.billable_high - r.billable_low) / 2 / e.billable_seconds for _, e, r in shipped):.1%}; "
          f"widest side {max(max(1 - r.billable_low / e.billable_seconds, r.billable_high / e.billable_seconds - 1) for _, e, r in shipped):.1%}")

    print("\n5. `dslab recommend` on the post's four cells (ml.p3.2xlarge, V100, one epoch), cost to a result per run")
    for label, (files, size) in POST_CELLS.items():
        d = recommend(DatasetShape(files=files, bytes=size), rate=RATE, prices=prices, epochs=1).decision
        low, high = d.pick.cost_interval
        runner = d.runner_up
        print(f"   {label}: pick {d.pick.source} ${d.pick.cost_usd:.2f} (${low:.2f}-${high:.2f}); runner-up "
              f"{runner.source} ${runner.cost_usd:.2f} (${runner.cost_interval[0]:.2f}-${runner.cost_interval[1]:.2f})")
        print(f"      {'undecided' if d.within_error else 'decided'}: "
              + (f"within the model's error of {', '.join(d.within_error)}" if d.within_error else d.noise))


if __name__ == "__main__":
    main()
