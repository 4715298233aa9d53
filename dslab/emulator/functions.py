"""Lambda functions in the stand-in, run the way Lambda runs them: from the code CloudFormation deployed (the asset
the synthesis wrote to ``cdk.out``, which the CDK CLI uploaded and CreateFunction took), each in an execution
environment of its own: a separate interpreter whose import path holds that code, the standard library and the
runtime's boto3, and nothing of the repository or the project's environment. A module the asset lacks, or a package
the runtime lacks (PyYAML, jsonschema, ...), fails here as it fails on AWS (Runtime.ImportModuleError).

Environments stay up between invocations, as Lambda reuses one ("Lambda re-uses the execution environment from a
previous invocation if one is available, or it can create a new execution environment", lambda-runtimes.html):
module-level state persists across warm invocations, and a warm invocation costs milliseconds, not an interpreter's
start. Invocations that overlap get environments of their own. A function's environments end with its stand-in.

What the stand-in cannot copy, and says so: the interpreter is this machine's CPython (``sys.version``), not the
``python3.14`` of the functions' Runtime, with the project's pinned boto3/botocore (requirements.txt) as the
runtime's SDK: Lambda ships one it names per Region only to a function that asks ("The version of the AWS SDK
included in the Python runtime depends on the runtime version and your AWS Region", lambda-python.html).
"""

from __future__ import annotations

import base64
import hashlib
import importlib.metadata
import io
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BOOTSTRAP = Path(__file__).with_name("lambda_bootstrap.py")
RUNTIME = "python3.14"            # the stacks' lambda_.Runtime.PYTHON_3_14 (tests/test_functions_from_assets.py)
RUNTIME_SDK = "boto3"             # what Lambda's Python runtime adds beside the standard library, with its dependencies
CACHE = Path(tempfile.gettempdir()) / f"dslab-lambda-{os.getuid()}"


def sdk_versions() -> dict[str, str]:
    """The runtime's SDK as the stand-in gives it: each distribution of boto3's closure, with its version."""
    return {name: dist.version for name, dist in _sdk_closure().items()}


def _sdk_closure() -> dict[str, importlib.metadata.Distribution]:
    found: dict[str, importlib.metadata.Distribution] = {}
    pending = [RUNTIME_SDK]
    while pending:
        dist = importlib.metadata.distribution(pending.pop())
        name = dist.metadata["Name"].lower()
        if name in found:
            continue
        found[name] = dist
        for requirement in dist.requires or []:
            if "extra ==" in requirement:
                continue
            pending.append(requirement.split(";")[0].split("[")[0].split("<")[0].split(">")[0].split("=")[0]
                           .split("!")[0].split("~")[0].split("(")[0].strip())
    return found


def _top_level(dist: importlib.metadata.Distribution) -> set[str]:
    names = set()
    for path in dist.files or []:
        head = path.parts[0]
        if head.endswith((".dist-info", ".egg-info")) or head in ("..", "__pycache__", "bin"):
            continue
        names.add(head)
    return names


def runtime_dir() -> Path:
    """A folder holding the runtime's packages (links to this environment's boto3, botocore and what they need), and
    nothing else: the import path's last entry in every execution environment. Made once per set of versions."""
    closure = _sdk_closure()
    sources = sorted((name, str(Path(dist.locate_file(top))))
                     for dist in closure.values() for top in _top_level(dist) for name in [top])
    key = hashlib.sha256(json.dumps([sdk_versions(), sources]).encode()).hexdigest()[:12]
    target = CACHE / f"runtime-{RUNTIME_SDK}-{closure[RUNTIME_SDK].version}-{key}"
    if target.is_dir():
        return target
    CACHE.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=CACHE, prefix=".runtime-"))
    for name, source in sources:
        os.symlink(source, staging / name)
    _move_into_place(staging, target)
    return target


def code_dir(code: bytes, root: Path) -> Path:
    """The function's deployment package unzipped (Lambda's /var/task) under ``root``, once per content."""
    target = root / f"code-{hashlib.sha256(code).hexdigest()[:16]}"
    if target.is_dir():
        return target
    staging = Path(tempfile.mkdtemp(dir=root, prefix=".code-"))
    with zipfile.ZipFile(io.BytesIO(code)) as archive:
        archive.extractall(staging)
    _move_into_place(staging, target)
    return target


def _move_into_place(staging: Path, target: Path) -> None:
    try:
        staging.rename(target)
    except OSError:   # another process made the same folder first: same content
        shutil.rmtree(staging, ignore_errors=True)


@dataclass
class Invocation:
    """What an invocation returns: the payload (JSON text), whether it is the function's error, and its log."""
    payload: str
    error: bool
    logs: str

    @property
    def answer(self) -> Any:
        return json.loads(self.payload)


class _Template:
    """The runtime's template process (lambda_bootstrap.py): the SDK imported once; each execution environment is
    forked from it. One per process and runtime folder; it ends when this process closes its socket."""

    def __init__(self, runtime: Path):
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self.process = subprocess.Popen(
                # -I: no PYTHON* variables, no user site, not this script's folder; -S: no site-packages.
                [sys.executable, "-I", "-S", str(BOOTSTRAP), str(runtime), str(theirs.fileno())],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=None,
                env={"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "en_US.UTF-8"}, pass_fds=(theirs.fileno(),))
        finally:
            theirs.close()
        self.socket, self.replies = ours, ours.makefile("r")
        self.lock = threading.Lock()

    def _ask(self, request: dict[str, Any], fds: list[int] | None = None) -> dict[str, Any]:
        with self.lock:
            socket.send_fds(self.socket, [json.dumps(request).encode()], fds or [])
            line = self.replies.readline()
        if not line:
            raise RuntimeError("the stand-in's Lambda runtime template ended")
        return json.loads(line)

    def spawn(self, task_root: Path, variables: dict[str, str]) -> tuple[int, io.TextIOBase, io.TextIOBase]:
        """A new execution environment: its pid, the pipe its invocations go to, the pipe its answers come from."""
        stdin_read, stdin_write = os.pipe()
        answers_read, answers_write = os.pipe()
        try:
            pid = self._ask({"type": "spawn", "task_root": str(task_root), "env": variables},
                            [stdin_read, answers_write])["pid"]
        finally:
            os.close(stdin_read)
            os.close(answers_write)
        return pid, os.fdopen(stdin_write, "w"), os.fdopen(answers_read, "r")

    def wait(self, pid: int, grace: float) -> int:
        """The environment's exit status, once it has ended (killed after ``grace`` seconds)."""
        return int(self._ask({"type": "wait", "pid": pid, "grace": grace})["status"])

    def alive(self) -> bool:
        return self.process.poll() is None


@dataclass(eq=False)
class _Starting:
    """A prewarmed environment being started (``env`` None until ``ready``, and after if it could not start)."""
    ready: threading.Event = field(default_factory=threading.Event)
    env: "_Environment | None" = None


@dataclass
class _Environment:
    pid: int
    stdin: io.TextIOBase
    answers: io.TextIOBase
    template: _Template
    ended: bool = False           # its answers pipe closed: the environment is gone
    started: float = field(default_factory=time.monotonic)
    invocations: int = 0

    def alive(self) -> bool:
        return not self.ended

    def exit_status(self) -> int:
        self.ended = True
        return self.template.wait(self.pid, grace=5.0)

    def close(self) -> None:
        """Its stdin closed, it ends by itself (killed if it has not within 5 s), as Lambda ends an environment."""
        try:
            self.stdin.close()
        except OSError:
            pass
        if self.template.alive():
            self.template.wait(self.pid, grace=0.0 if self.ended else 5.0)
        self.answers.close()
        self.ended = True


class FunctionRuntime:
    """The stand-in's Lambda service side: execution environments per function, made on demand and kept warm."""

    def __init__(self):
        self._idle: dict[tuple, list[_Environment]] = {}
        self._all: list[_Environment] = []
        self._lock = threading.Lock()
        self._templates: _Template | None = None
        self._code_root: Path | None = None   # the functions' code, unzipped: removed with the stand-in
        self._starting: dict[tuple, list[_Starting]] = {}   # prewarmed environments still starting, by key
        self._starters: list[threading.Thread] = []
        self.cold_starts = 0

    def invoke(self, function, event: Any, environment: dict[str, str], *, fault=None) -> Invocation:
        """Invoke ``function`` (moto's LambdaFunction, as CloudFormation created it) with ``event``; ``environment``
        is what the stand-in adds to the function's own variables (its endpoint, its time scale). ``fault``: the
        stand-in's fault hook (HOOKS.api_fault), asked about every AWS call the function makes."""
        runtime = getattr(function, "run_time", "") or ""
        if not runtime.startswith("python"):
            raise ValueError(f"the stand-in runs Python functions only; {function.function_name} is {runtime}")
        variables = self._variables(function, environment)
        key = (function.function_arn, hashlib.sha256(function.code_bytes).hexdigest(), tuple(sorted(variables.items())))
        env = self._take(key, function, variables)
        try:
            result = self._call(env, function, event, fault)
        except BaseException:
            self._discard(env)
            raise
        if env.alive():
            with self._lock:
                self._idle.setdefault(key, []).append(env)
        else:
            self._discard(env)
        return result

    def prewarm(self, function, environment: dict[str, str]) -> None:
        """Start an execution environment for ``function`` now, ready for its first invocation (as Lambda's
        provisioned concurrency keeps environments initialized): its init phase runs while the caller goes on. The
        caller does not wait for it (the runtime template's first start is ~0.5 s of the lab's set-up otherwise); an
        invocation that comes first waits for it rather than starting another."""
        variables = self._variables(function, environment)
        key = (function.function_arn, hashlib.sha256(function.code_bytes).hexdigest(), tuple(sorted(variables.items())))
        starting = _Starting()

        def start() -> None:
            try:
                env = self._start(function, variables)
            except Exception:  # noqa: BLE001 - the invocation that needs it starts one and meets the error itself
                env = None
            with self._lock:
                starting.env = env
                waiting = self._starting.get(key, [])
                if starting in waiting:   # nobody took it yet: idle, as a finished prewarm is
                    waiting.remove(starting)
                    if env is not None:
                        self._idle.setdefault(key, []).append(env)
            starting.ready.set()

        thread = threading.Thread(target=start, name=f"prewarm-{function.function_name}", daemon=True)
        with self._lock:
            self._starting.setdefault(key, []).append(starting)
            self._starters.append(thread)
        thread.start()

    def start_runtime(self) -> None:
        """Start the runtime's template process now (it imports the SDK, ~0.3 s, while the caller goes on): the first
        environment, prewarmed or invoked, is then forked at once."""
        self._template()

    @staticmethod
    def _variables(function, environment: dict[str, str]) -> dict[str, str]:
        region = getattr(function, "region", None) or "us-east-1"
        # What the Lambda runtime sets in every function's environment (configuration-envvars.html, "Defined
        # runtime environment variables"), the function's own variables, then the stand-in's.
        return {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "en_US.UTF-8", "TZ": ":UTC",
                "_HANDLER": function.handler, "AWS_EXECUTION_ENV": f"AWS_Lambda_{function.run_time}",
                "AWS_LAMBDA_FUNCTION_NAME": function.function_name,
                "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": str(function.memory_size),
                "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST", "AWS_REGION": region, "AWS_DEFAULT_REGION": region,
                "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_SESSION_TOKEN": "testing",
                "DSLAB_FUNCTION_ARN": function.function_arn,
                **{k: str(v) for k, v in (getattr(function, "environment_vars", {}) or {}).items()},
                **{k: str(v) for k, v in environment.items()}}

    def _take(self, key: tuple, function, variables: dict[str, str]) -> _Environment:
        with self._lock:
            idle = self._idle.get(key) or []
            while idle:
                env = idle.pop()
                if env.alive():
                    return env
            waiting = self._starting.get(key) or []
            starting = waiting.pop(0) if waiting else None
        if starting is not None:   # a prewarmed environment still starting: this invocation's
            starting.ready.wait()
            if starting.env is not None and starting.env.alive():
                return starting.env
        return self._start(function, variables)

    def _start(self, function, variables: dict[str, str]) -> _Environment:
        with self._lock:
            if self._code_root is None:
                CACHE.mkdir(parents=True, exist_ok=True)
                self._code_root = Path(tempfile.mkdtemp(dir=CACHE, prefix="code-"))
            root = self._code_root
        task_root = code_dir(function.code_bytes, root)
        variables = {**variables, "LAMBDA_TASK_ROOT": str(task_root), "LAMBDA_RUNTIME_DIR": str(runtime_dir())}
        template = self._template()
        pid, stdin, answers = template.spawn(task_root, variables)
        env = _Environment(pid, stdin, answers, template)
        with self._lock:
            self._all.append(env)
            self.cold_starts += 1
        return env

    def _template(self) -> _Template:
        with self._lock:
            if self._templates is None or not self._templates.alive():
                self._templates = _Template(runtime_dir())
            return self._templates

    @staticmethod
    def _call(env: _Environment, function, event: Any, fault) -> Invocation:
        if isinstance(event, (str, bytes)):
            event = json.loads(event or "{}")
        request = {"type": "invoke", "event": event if event is not None else {}, "request_id": str(uuid.uuid4()),
                   "deadline": time.time() + float(function.timeout or 3), "faults": fault is not None}
        try:
            env.stdin.write(json.dumps(request) + "\n")
            env.stdin.flush()
        except OSError:
            pass   # the environment is gone: its answer below says so
        while True:
            line = env.answers.readline()
            if not line:
                code = env.exit_status()
                return Invocation(json.dumps({"errorType": "Runtime.ExitError",
                                              "errorMessage": f"Runtime exited with error: exit status {code}"}),
                                  True, "")
            message = json.loads(line)
            if message["type"] == "fault?":
                env.stdin.write(json.dumps({"answer": _fault_answer(fault, message, function.handler)}) + "\n")
                env.stdin.flush()
                continue
            env.invocations += 1
            return Invocation(message["payload"], bool(message["error"]), message.get("logs", ""))

    def _discard(self, env: _Environment) -> None:
        env.close()
        with self._lock:
            if env in self._all:
                self._all.remove(env)

    def close(self) -> None:
        """End every execution environment (the stand-in, and its functions, are gone)."""
        with self._lock:
            starters, self._starters = list(self._starters), []
        for thread in starters:   # prewarms still starting end first: none starts after the close
            thread.join(timeout=60)
        with self._lock:
            environments, self._all, self._idle, self._starting = list(self._all), [], {}, {}
            root, self._code_root = self._code_root, None
        for env in environments:
            env.close()
        if root is not None:
            shutil.rmtree(root, ignore_errors=True)

    def environments(self) -> int:
        with self._lock:
            return len(self._all)


@dataclass
class _Request:
    """The request a function's client was about to send, as the fault hook sees it, with the handler of the function
    that sends it (a test's way to fault one function's calls: its frames are in another interpreter)."""
    method: str
    url: str
    headers: dict[str, str]
    body: bytes
    function: str = ""


def _fault_answer(fault, message: dict[str, Any], handler: str) -> dict[str, Any] | None:
    """The stand-in's answer to a function's call, if it injects an error there: ``fault`` gives (status, headers,
    body) in the service's protocol (patches.services.function_fault), or None to let the call through."""
    if fault is None:
        return None
    request = _Request(message["method"], message["url"], message["headers"], base64.b64decode(message["body"]), handler)
    answer = fault(message["service"], message["operation"], request)
    if answer is None:
        return None
    status, headers, body = answer
    return {"status": status, "headers": headers, "body": base64.b64encode(body).decode()}


_SERVER_LOCK = threading.Lock()
_SERVER: dict[str, Any] = {}


def function_endpoint() -> str:
    """Where an in-process stand-in's functions reach it: a loopback server over the same backends, started once
    per process (a lab with its own server gives its functions that one instead)."""
    with _SERVER_LOCK:
        if "url" not in _SERVER:
            from moto.server import ThreadedMotoServer
            server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
            server.start()
            host, port = server.get_host_and_port()
            _SERVER.update(server=server, url=f"http://{host}:{port}")
        return _SERVER["url"]


RUNTIME_SERVICE = FunctionRuntime()
