"""A training script that loads its own data from S3 with boto3: the same file runs on SageMaker (as a
DataSourceLab Script job), on EC2 and on EKS. Nothing in it is SageMaker's or DataSourceLab's.

- Where the data is: ``--dataset_uri s3://bucket/prefix/`` (a SageMaker job gets it as a hyperparameter,
  which the framework container passes as that argument).
- Credentials: boto3's default chain (the training job's role on SageMaker, the instance profile or
  pod identity elsewhere). The endpoint: boto3 reads AWS_ENDPOINT_URL when it is set (DataSourceLab's
  local lab sets it to its S3 stand-in), else the region's S3 endpoint, which the VPC's gateway
  endpoint serves from a private subnet.
- Throughput: many GETs at once (S3 serves each object with tens of milliseconds of latency).
"""

import argparse
import hashlib
import json
import os
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import boto3
from botocore.config import Config


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dataset_uri", required=True)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--step_seconds", type=float, default=0.0)
    parser.add_argument("--concurrency", type=int, default=32)
    args = parser.parse_args()

    bucket, _, prefix = args.dataset_uri[len("s3://"):].partition("/")
    s3 = boto3.client("s3", config=Config(max_pool_connections=args.concurrency))
    keys = sorted(o["Key"] for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
                  for o in page.get("Contents", []))
    if not keys:
        raise SystemExit(f"nothing under {args.dataset_uri}")
    # Several instances: each reads its share (SageMaker sets SM_HOSTS/SM_CURRENT_HOST; elsewhere, your launcher).
    hosts = json.loads(os.environ.get("SM_HOSTS", '["algo-1"]'))
    rank = hosts.index(os.environ.get("SM_CURRENT_HOST", hosts[0]))
    keys = keys[rank::len(hosts)]

    def get(key: str) -> bytes:
        return s3.get_object(Bucket=bucket, Key=key)["Body"].read()

    digest, seen = hashlib.sha256(), 0
    with ThreadPoolExecutor(args.concurrency) as pool:
        for epoch in range(args.epochs):
            started = time.perf_counter()
            for i, data in enumerate(pool.map(get, keys)):
                digest.update(data)
                seen += len(data)
                if (i + 1) % args.batch_size == 0:
                    time.sleep(args.step_seconds)  # the accelerator's step
            print(f"epoch={epoch} objects={len(keys)} seconds={time.perf_counter() - started:.3f} "
                  f"loss={1.0 / (epoch + 1):.4f} bytes_seen={seen}", flush=True)
    if rank == 0:  # SageMaker merges every host's model folder into one model.tar.gz: one host writes it
        model_dir = Path(os.environ.get("SM_MODEL_DIR", "model"))
        model_dir.mkdir(parents=True, exist_ok=True)
        (model_dir / "model.json").write_text(json.dumps({"objects": len(keys), "bytes_seen": seen,
                                                          "sha256": digest.hexdigest()}))


if __name__ == "__main__":
    main()
