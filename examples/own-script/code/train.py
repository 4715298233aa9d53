"""A training script that knows nothing of DataSourceLab: only SageMaker's training contract.

It reads its channel from SM_CHANNEL_TRAIN (a folder in File, FastFile, FSx and EFS; in Pipe mode
the stream <SM_CHANNEL_TRAIN>_<epoch>, as SM_INPUT_DATA_CONFIG says), takes its hyperparameters as
command-line arguments and writes its model to SM_MODEL_DIR (on several instances, the first host
only). The "model" hashes every byte it reads and sleeps step_seconds per batch, standing in for the
accelerator.
"""

import argparse
import hashlib
import json
import os
import time
from pathlib import Path


def first_host() -> bool:
    """Whether this host writes the model: on several instances SageMaker merges every host's SM_MODEL_DIR into one
    model.tar.gz, and "If multiple containers in a single training job write to this directory they should ensure no
    file/directory names clash", so only the first host of SM_HOSTS writes it (one instance: always)."""
    hosts = json.loads(os.environ.get("SM_HOSTS") or "[]")
    return not hosts or os.environ.get("SM_CURRENT_HOST") == hosts[0]


def batches_from_folder(root: str, batch_size: int):
    batch = []
    for path in sorted(Path(root).rglob("*")):
        if path.is_file():
            batch.append(path.read_bytes())
            if len(batch) == batch_size:
                yield batch
                batch = []
    if batch:
        yield batch


def batches_from_pipe(fifo: str, chunk_bytes: int = 1 << 20):
    with open(fifo, "rb") as stream:
        while True:
            data = stream.read(chunk_bytes)
            if not data:
                return
            yield [data]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--step_seconds", type=float, default=0.0)
    args = parser.parse_args()  # strict: an argument this script does not define stops the job

    channel = os.environ["SM_CHANNEL_TRAIN"]
    mode = json.loads(os.environ["SM_INPUT_DATA_CONFIG"])["train"]["TrainingInputMode"]
    digest, seen = hashlib.sha256(), 0
    for epoch in range(args.epochs):
        source = batches_from_pipe(f"{channel}_{epoch}") if mode == "Pipe" else batches_from_folder(channel, args.batch_size)
        for batch in source:
            for item in batch:
                digest.update(item)
                seen += len(item)
            time.sleep(args.step_seconds)
        print(f"epoch={epoch} loss={1.0 / (epoch + 1):.4f} bytes_seen={seen}", flush=True)
    if first_host():
        model_dir = Path(os.environ["SM_MODEL_DIR"])
        model_dir.mkdir(parents=True, exist_ok=True)
        (model_dir / "model.json").write_text(json.dumps({"bytes_seen": seen, "sha256": digest.hexdigest()}))


if __name__ == "__main__":
    main()
