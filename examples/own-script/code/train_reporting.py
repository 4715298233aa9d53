"""The same script, reporting its data pipeline through dslab_report (three added lines).

dslab adds dslab_report.py (standard library only) to the packaged source_dir, so the import works
in the training container; `meter.epoch` times the wait for each batch and the step between them.
"""

import argparse
import json
import os
import time
from pathlib import Path

from dslab_report import Meter
from train import batches_from_folder, batches_from_pipe, first_host


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--step_seconds", type=float, default=0.0)
    args = parser.parse_args()

    channel = os.environ["SM_CHANNEL_TRAIN"]
    mode = json.loads(os.environ["SM_INPUT_DATA_CONFIG"])["train"]["TrainingInputMode"]
    meter = Meter()
    for epoch in range(args.epochs):
        source = batches_from_pipe(f"{channel}_{epoch}") if mode == "Pipe" else batches_from_folder(channel, args.batch_size)
        for batch in meter.epoch(source, samples=len, nbytes=lambda b: sum(len(item) for item in b)):
            time.sleep(args.step_seconds)  # the training step
    summary = meter.finish()   # each host's own metrics-<host>.json on several instances
    if first_host():           # the model once: SageMaker merges every host's SM_MODEL_DIR into one archive
        model_dir = Path(os.environ["SM_MODEL_DIR"])
        model_dir.mkdir(parents=True, exist_ok=True)
        (model_dir / "model.json").write_text(json.dumps({"samples": summary["samples"]}))


if __name__ == "__main__":
    main()
