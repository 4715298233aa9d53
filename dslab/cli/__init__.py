"""``dslab``: the operator's command line. Every command has help with an example (``dslab CMD -h``).

One module per command group (datasets, jobs, runs, advice, size, prices, export, fsx, express, efs, doctor, local), each
with its ``register``; what they share is in ``common``. Bad input exits with code 2 and one line naming
the field and the fix; nothing is started or written.
"""

from __future__ import annotations

import argparse
import os
import sys

from ..aws.validation import RequestInvalid
from ..core.errors import ConfigError
from . import prices
from . import advice, calibrate, datasets, deploy_check, doctor, efs, export, express, fsx, jobs, local, runs, size
from .common import EXIT_BAD_INPUT, Parser, UserError, explain_aws, find_client_error

# In the order `dslab -h` lists them.
GROUPS = (datasets, jobs, runs, advice, calibrate, size, prices, export, fsx, express, efs, doctor, deploy_check, local)


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="dslab", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="DataSourceLab: which data source should a SageMaker training job read from, and what will it cost?\n\n"
                    "examples:\n  dslab local --out lab-out\n  dslab estimate --files 30607 --bytes 1.1GB\n"
                    "  dslab dataset generate --out data/caltech --images 2000")
    sub = parser.add_subparsers(dest="command", required=True)
    for group in GROUPS:
        group.register(sub)
    return parser


def _aws_error(err: Exception) -> str | None:
    from botocore.exceptions import (
        ClientError,
        EndpointConnectionError,
        NoCredentialsError,
        NoRegionError,
    )
    if isinstance(err, NoCredentialsError):
        return "no AWS credentials: set AWS_PROFILE (or keys), or run the lab offline with `dslab local`"
    if isinstance(err, NoRegionError):
        return "no AWS region: pass --region or set AWS_REGION"
    if isinstance(err, EndpointConnectionError):
        return f"AWS cannot be reached ({err}); check the network or run the lab offline with `dslab local`"
    if isinstance(err, ClientError) or find_client_error(err) is not None:   # boto3's S3UploadFailedError wraps one
        return explain_aws(err)
    return None


ERROR_WIDTH = 160   # an error is one line a terminal shows whole


def one_line(err: Exception) -> str:
    """The error as the one line the user reads, at most ERROR_WIDTH where it can be: a ConfigError's file is named by
    its path from here (or its name alone), then its list of what is allowed is shortened to what fits ("and 37
    more"), never below three items, and dropped only where the problem names the flag that takes them (its -h lists
    them); the field and the problem are never cut."""
    text = f"dslab: error: {err}"
    if len(text) <= ERROR_WIDTH or not isinstance(err, ConfigError):
        return text
    source = err.source
    if source and os.path.isabs(source):
        relative = os.path.relpath(source)
        source = relative if not relative.startswith("..") else os.path.basename(source)
    err = ConfigError(err.field, err.problem, err.allowed, source)
    text = f"dslab: error: {err}"
    if len(text) <= ERROR_WIDTH or not isinstance(err.allowed, list) or len(err.allowed) <= 3:
        return text
    items = [str(item) for item in err.allowed]
    bare = f"dslab: error: {ConfigError(err.field, err.problem, None, err.source)}"
    for shown in range(len(items) - 1, 3, -1):
        line = f"{bare} (allowed: {', '.join(items[:shown])} and {len(items) - shown} more)"
        if len(line) <= ERROR_WIDTH:
            return line
    if " --" in err.problem:   # the problem names the flag that takes them: its -h lists them all
        return bare
    return f"{bare} (allowed: {', '.join(items[:3])} and {len(items) - 3} more)"


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code = args.handler(args)
        sys.stdout.flush()  # inside the try: a reader that closed the pipe is met here, not at interpreter exit
        return code
    except BrokenPipeError:  # `dslab size ... | head`: the reader has what it wanted (before Exception: it is one)
        import os
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at interpreter exit
        return 0
    except (ConfigError, RequestInvalid, UserError) as err:
        print(one_line(err), file=sys.stderr)
        return EXIT_BAD_INPUT
    except Exception as err:  # AWS errors: one line and the fix, not a traceback
        message = _aws_error(err)
        if message is None:
            raise
        print(f"dslab: error: {message}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("dslab: interrupted", file=sys.stderr)
        return 130
