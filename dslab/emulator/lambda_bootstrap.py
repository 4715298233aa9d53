"""The stand-in's Lambda Python runtime: execution environments, each an interpreter of its own.

``python -I -S lambda_bootstrap.py RUNTIME_DIR CONTROL_FD`` is the runtime's template process (functions.py starts one
per process): isolated (no PYTHON* variables, no user or site packages, not even this script's folder), it imports the
runtime's SDK from RUNTIME_DIR (boto3 and botocore, and their service models parsed once), then forks an execution
environment whenever the parent asks, handing it the function's code folder (TASK_ROOT, its deployed asset unzipped),
its environment variables and its two pipes. The environment's import path is TASK_ROOT, RUNTIME_DIR and the standard
library, nothing else, as on Lambda ("/var/task", then the runtime's packages); it imports the handler's module there,
under the function's own environment (the init phase), then serves invocations until its stdin closes, keeping
module-level state between them as a warm Lambda execution environment does. Forking from a template that has
imported the SDK is the stand-in's way to a cold start in milliseconds; what the function's own code does at init
still happens in the environment, under its variables.

Standard library only until the SDK is imported. The parent and an environment speak JSON lines: invocations arrive
on stdin, answers leave on the answers pipe (stdout and stderr are the function's log, captured per invocation).
While an invocation runs, the environment may ask the parent whether the stand-in answers an AWS call with an
injected error (the stand-in's fault hook, for calls made here).
"""

import base64
import importlib
import io
import json
import os
import signal
import socket
import sys
import threading
import time
import traceback

_ANSWERS = None
_FAULTS = {"ask": False}
_ASKING = threading.Lock()   # a function's threads (the staging copies) ask one at a time
# The SDK's service models the workflow's functions read, parsed once in the template (what a client loads first).
_PRELOADED = ("s3", "ssm", "fsx", "sagemaker", "service-quotas", "cloudformation", "stepfunctions", "sts")


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


def _preload_sdk() -> None:
    """Import the SDK and parse its service models into boto3's default session, whose clients the functions make.
    Nothing here reads the environment: credentials, region and endpoint are resolved when a function makes a client."""
    import boto3
    import botocore.session  # noqa: F401
    boto3.setup_default_session()
    botocore_session = boto3.DEFAULT_SESSION._session
    loader = botocore_session.get_component("data_loader")
    for data in ("endpoints", "partitions", "_retry", "sdk-default-configuration"):
        try:
            loader.load_data(data)
        except Exception:  # noqa: BLE001 - an SDK without that file: it is loaded on first use instead
            pass
    for service in _PRELOADED:
        botocore_session.get_service_model(service)
        for kind in ("endpoint-rule-set-1", "paginators-1"):
            try:
                loader.load_service_model(service, kind)
            except Exception:  # noqa: BLE001 - not every service ships every file
                pass


def _environment(task_root: str, variables: dict, stdin_fd: int, answers_fd: int) -> None:
    """In a forked child: become the function's execution environment, then serve it (never returns)."""
    global _ANSWERS
    code = 0
    try:
        os.dup2(stdin_fd, 0)
        os.close(stdin_fd)
        sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False), encoding="utf-8")
        _ANSWERS = os.fdopen(answers_fd, "w", buffering=1)
        os.environ.clear()
        os.environ.update(variables)
        os.chdir(task_root)
        sys.path.insert(0, task_root)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        main()
    except SystemExit as stop:
        code = stop.code if isinstance(stop.code, int) else 1
    except BaseException:  # noqa: BLE001 - the runtime itself failed: said on stderr, exit 1
        traceback.print_exc()
        code = 1
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def _template(control_fd: int) -> None:
    """Fork an execution environment per request on the control socket; report how environments end."""
    control = socket.socket(fileno=control_fd)
    _preload_sdk()
    while True:
        try:
            message, fds, _, _ = socket.recv_fds(control, 1 << 20, 2)
        except OSError:
            return
        if not message:
            return   # the parent is gone
        request = json.loads(message.decode())
        if request["type"] == "spawn":
            stdin_fd, answers_fd = fds
            pid = os.fork()
            if pid == 0:
                control.close()
                _environment(request["task_root"], request["env"], stdin_fd, answers_fd)
            os.close(stdin_fd)
            os.close(answers_fd)
            control.sendall(json.dumps({"pid": pid}).encode() + b"\n")
        elif request["type"] == "wait":
            # The environment has ended, or is to end within ``grace`` seconds (its stdin closed), else is killed.
            pid, deadline = request["pid"], time.monotonic() + float(request.get("grace", 5.0))
            status = None
            while status is None:
                try:
                    done, raw = os.waitpid(pid, os.WNOHANG)
                except ChildProcessError:
                    status = -1
                    break
                if done:
                    status = os.waitstatus_to_exitcode(raw)
                elif time.monotonic() > deadline:
                    os.kill(pid, signal.SIGKILL)
                    deadline = float("inf")
                else:
                    time.sleep(0.005)
            control.sendall(json.dumps({"status": status}).encode() + b"\n")


if __name__ == "__main__":
    sys.path[:0] = [sys.argv[1]]   # the runtime's SDK
    _template(int(sys.argv[2]))
