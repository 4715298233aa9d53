#!/usr/bin/env python3
"""The DataSourceLab CDK app: `cdk deploy DataSourceLab` builds the whole lab in one AZ."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import aws_cdk as cdk

from stacks.app_builder import build_app
from stacks.config import LabConfigError

if __name__ == "__main__":
    try:
        app = build_app(cdk.App(), Path(__file__).resolve().parent, account=os.environ.get("CDK_DEFAULT_ACCOUNT"))
    except LabConfigError as err:
        sys.stderr.write(f"error: {err}\n")
        sys.exit(2)
    app.synth()
