"""Calibration from a user's own runs (`make bench-recovery`): prints figures, asserts nothing (tests/test_measured.py
does). On AWS runs generated from a truth the tool does not know (tests/synthetic_runs.py: NVMe at 2,000 MB/s, S3
Standard's first byte at 40 ms, written by the workflow's own Collect functions):

  1. each perturbed constant: true, shipped, recovered (`dslab calibrate`);
  2. the error on the runs, each scenario predicted without it, before and after calibration;
  3. the same for the calibration experiment (experiments/calibrate.yaml) run on a truth that also moves Express's first
     byte and File's per-object copy, and what that run costs (`dslab estimate --experiment`);
  4. a checkpoint trial's run where SageMaker's sync moves 16 parts at once (NVMe as above): what it recovers;
  5. writes the generated run to bench-out/recovery/results.json, with the commands that report and calibrate it.
"""

from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path

from dslab.core import measured
from dslab.core.facts.prices import PriceTable
from dslab.core.model.estimate import MODEL
from dslab.inputs.experiment_file import read_document
from tests.synthetic_runs import TRUTH, synthetic_results

PRICES = PriceTable()
OUT = Path("bench-out/recovery")


def recovery(title: str, truth, results: dict) -> None:
    results = json.loads(json.dumps(results, default=str))
    jobs = measured.measured_jobs(results)
    started = time.perf_counter()
    found = measured.calibrate(jobs, PRICES)
    seconds = time.perf_counter() - started
    print(f"\n{title}: {len(jobs)} jobs, calibrated in {seconds:.1f} s")
    print(f"  {'constant':28} {'true':>10} {'shipped':>10} {'recovered':>10}  status")
    for c in found.constants:
        true = getattr(truth, c.name)
        if true != getattr(MODEL, c.name) or c.status == "calibrated" and abs(c.value / c.shipped - 1) > 0.03:
            print(f"  {c.name:28} {true:>10.4g} {c.shipped:>10.4g} {c.value:>10.4g}  {c.status}"
                  + (f" ({(c.value / true - 1):+.1%} of true)" if c.status == "calibrated" else f": {c.why}"))
    checked = measured.out_of_sample(jobs, PRICES)
    if checked:
        d = checked.to_dict()
        b, a = d["shipped"], d["calibrated_without_it"]
        print(f"  each of {len(d['scenarios'])} scenarios predicted without it: mean |error| {b['mean_abs']:.1%} shipped -> "
              f"{a['mean_abs']:.1%} calibrated; range {b['under']:+.1%}..{b['over']:+.1%} -> {a['under']:+.1%}..{a['over']:+.1%}")


def main() -> None:
    run = synthetic_results()
    recovery("Generated run (tests/synthetic_runs.py CALIBRATION_EXPERIMENT)", TRUTH, run)
    truth = replace(TRUTH, express_first_byte=0.009, file_per_object=0.010)
    recovery("experiments/calibrate.yaml on a truth that also moves Express's first byte and File's per-object copy",
             truth, synthetic_results(truth, read_document(Path("experiments/calibrate.yaml")), prefix="cal"))
    import tempfile

    from tests.synthetic_runs import CHECKPOINT_TRUTH, checkpoint_experiment, synthetic_checkpoint_results
    with tempfile.TemporaryDirectory() as folder:
        checkpoints = json.loads(json.dumps(synthetic_checkpoint_results(checkpoint_experiment(folder)), default=str))
    jobs = measured.checkpoint_jobs(checkpoints, PRICES)
    found = measured.calibrate(jobs, PRICES)
    print(f"\nCheckpoint trial (llama3 8B at scale 0.2 on ml.p4d.24xlarge, S3 and Express sync, 2 runs each): "
          f"{len(jobs)} targets")
    print(f"  {'constant':28} {'true':>10} {'shipped':>10} {'recovered':>10}  status")
    for c in found.constants:
        if c.status != "not measured":
            true = getattr(CHECKPOINT_TRUTH, c.name)
            print(f"  {c.name:28} {true:>10.4g} {c.shipped:>10.4g} {c.value:>10.4g}  {c.status} "
                  f"({(c.value / true - 1):+.1%} of true)")
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "results.json").write_text(json.dumps(run, default=str, indent=1))
    print(f"\nwrote {OUT / 'results.json'}; then:\n  .venv/bin/dslab report --results {OUT / 'results.json'} --out {OUT / 'report'}"
          f"\n  .venv/bin/dslab calibrate --results {OUT / 'results.json'} --out {OUT / 'calibration.json'}"
          "\n  .venv/bin/dslab estimate --experiment experiments/calibrate.yaml")


if __name__ == "__main__":
    main()
