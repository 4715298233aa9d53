"""The stand-in's Lambda Python runtime: one execution environment, run as its own interpreter.

Started by ``functions.FunctionRuntime`` as ``python -I -S lambda_bootstrap.py TASK_ROOT RUNTIME_DIR FD``: isolated
(no PYTHON* variables, no user or site packages, not even this script's folder), so the import path holds the
standard library, the function's code (TASK_ROOT, its deployed asset unzipped) and RUNTIME_DIR (the runtime's own
boto3 and botocore), and nothing else, as on Lambda ("/var/task", then the runtime's packages). It imports the
handler once (the init phase), then serves invocations until its stdin closes, keeping module-level state between
them as a warm Lambda execution environment does.

Standard library only until the handler's module imports what the function needs. The parent and this process
speak JSON lines: invocations arrive on stdin, answers leave on file descriptor FD (stdout and stderr are the
function's log, captured per invocation). While an invocation runs, the process may ask the parent whether the
stand-in answers an AWS call with an injected error (the stand-in's fault hook, for calls made here).
"""

import base64
import importlib
import io
import json
import os
import sys
import threading
import time
import traceback

TASK_ROOT, RUNTIME_DIR = sys.argv[1], sys.argv[2]
sys.path[:0] = [TASK_ROOT, RUNTIME_DIR]
_ANSWERS = os.fdopen(int(sys.argv[3]), "w", buffering=1)
_FAULTS = {"ask": False}
_ASKING = threading.Lock()   # a function's threads (the staging copies) ask one at a time


def _send(message):
    _ANSWERS.write(json.dumps(message) + "\n")
    _ANSWERS.flush()


def _error(err, error_type=None):
    """An error as Lambda's Python runtime formats it for the invoker."""
    frames = traceback.extract_tb(err.__traceback__)
    return {"errorMessage": str(err), "errorType": error_type or type(err).__name__,
            "requestId": "", "stackTrace": [line for line in traceback.format_list(frames)]}


class _Raw:
    def __init__(self, body):
        self.body = body

    def stream(self, **_):
        yield self.body


def _ask_parent(request, event_name=None, **_):
    """before-send: the stand-in's answer for this call if a test injects an error into it, else None."""
    if not _FAULTS["ask"]:
        return None
    _, service_id, operation = (event_name.split(".", 2) + ["", ""])[:3]
    body = request.body if isinstance(request.body, (bytes, bytearray)) else (request.body or "").encode() \
        if isinstance(request.body, str) else b""
    question = {"type": "fault?", "service": service_id, "operation": operation, "method": request.method,
                "url": request.url, "headers": {k: (v.decode() if isinstance(v, bytes) else str(v))
                                                for k, v in request.headers.items()},
                "body": base64.b64encode(body).decode()}
    with _ASKING:
        _send(question)
        answer = json.loads(sys.stdin.readline())["answer"]
    if answer is None:
        return None
    from botocore.awsrequest import AWSResponse
    return AWSResponse(request.url, answer["status"], answer["headers"],
                       _Raw(base64.b64decode(answer["body"])))


def _hook_clients():
    """Every client the function makes passes its requests by _ask_parent first."""
    try:
        import botocore.session
    except ImportError:   # a runtime without botocore: nothing to hook
        return
    create_client = botocore.session.Session.create_client

    def hooked(self, *args, **kwargs):
        client = create_client(self, *args, **kwargs)
        client.meta.events.register_first("before-send", _ask_parent)
        return client

    botocore.session.Session.create_client = hooked


class _Context:
    """The handler's context object (https://docs.aws.amazon.com/lambda/latest/dg/python-context.html)."""

    def __init__(self, request_id, deadline):
        self.function_name = os.environ.get("AWS_LAMBDA_FUNCTION_NAME", "")
        self.function_version = os.environ.get("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
        self.memory_limit_in_mb = os.environ.get("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "128")
        self.invoked_function_arn = os.environ.get("DSLAB_FUNCTION_ARN", "")
        self.aws_request_id = request_id
        self.log_group_name = f"/aws/lambda/{self.function_name}"
        self.log_stream_name = ""
        self._deadline = deadline

    def get_remaining_time_in_millis(self):
        return max(0, int((self._deadline - time.time()) * 1000))


def main():
    handler_name = os.environ["_HANDLER"]
    module_name, _, function_name = handler_name.rpartition(".")
    _hook_clients()
    init_error = None
    init_logs = io.StringIO()
    saved = sys.stdout, sys.stderr
    sys.stdout = sys.stderr = init_logs
    try:
        handler = getattr(importlib.import_module(module_name), function_name)
    except ImportError as err:
        # What Lambda answers when the module (or one it imports) is missing from the asset or the runtime.
        init_error = _error(err, "Runtime.ImportModuleError")
        init_error["errorMessage"] = f"Unable to import module '{module_name}': {err}"
    except AttributeError as err:
        init_error = _error(err, "Runtime.HandlerNotFound")
        init_error["errorMessage"] = f"Handler '{function_name}' missing on module '{module_name}'"
    except Exception as err:  # noqa: BLE001 - any failure of the init phase is the invocation's error
        init_error = _error(err)
    finally:
        sys.stdout, sys.stderr = saved
    logs = init_logs.getvalue()
    for line in sys.stdin:
        request = json.loads(line)
        _FAULTS["ask"] = bool(request.get("faults"))
        if init_error is not None:
            _send({"type": "result", "error": True, "payload": json.dumps(init_error), "logs": logs})
            return   # Lambda discards an environment whose init failed
        captured = io.StringIO()
        sys.stdout = sys.stderr = captured
        try:
            result = handler(request["event"], _Context(request["request_id"], request["deadline"]))
            answer = {"type": "result", "error": False, "payload": json.dumps(result, default=str)}
        except Exception as err:  # noqa: BLE001 - the invoker gets the function's error, as on Lambda
            traceback.print_exc()
            answer = {"type": "result", "error": True, "payload": json.dumps(_error(err))}
        finally:
            sys.stdout, sys.stderr = saved
        _send({**answer, "logs": logs + captured.getvalue()})
        logs = ""


if __name__ == "__main__":
    main()
