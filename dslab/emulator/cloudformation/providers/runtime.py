"""What the stand-in's CloudFormation runs resources with: the random parts of generated names, drawn per stand-in,
and the loopback listener custom-resource handlers answer to. The environment and every provider import it; it
imports none of them."""

from __future__ import annotations

import collections
import hashlib
import http.server
import json
import string
import threading
import time
from typing import Any


_ALPHABET = string.ascii_uppercase + string.digits


class NameSource:
    """The random parts of the names CloudFormation (and the services it calls) generate, drawn per stand-in:
    the n-th draw for a resource is the same in every stand-in. CloudFormation User Guide, "Name type": "By
    default, AWS CloudFormation generates a unique physical ID to name a resource. For example, CloudFormation
    might name an Amazon S3 bucket with the following physical ID stack123123123123-s3bucket-abcdefghijk1"; and
    "If you don't specify a name, CloudFormation generates a unique physical ID". AWS draws the random part at
    random and nothing may rely on it but its uniqueness (a new draw at each creation); reproducible draws make
    the same templates deploy under the same names, so a state machine whose definition embeds its functions'
    generated names is the same text in every lab of a process, and its parse is reused
    (patches/stepfunctions.py). A resource's draws never depend on the order in which the engine's threads
    create resources."""

    def __init__(self):
        self._draws: collections.Counter[str] = collections.Counter()
        self._lock = threading.Lock()

    def draws(self) -> dict[str, int]:
        """How many draws each key has had (a saved deployment keeps them: snapshot.py)."""
        with self._lock:
            return dict(self._draws)

    def continue_from(self, draws: dict[str, int]) -> None:
        """Go on from a saved deployment's draws: the next resource of a key gets the name it would have had."""
        with self._lock:
            self._draws.update(draws)

    def token(self, key: str, n: int = 12) -> str:
        with self._lock:
            self._draws[key] += 1
            draw = self._draws[key]
        digest = hashlib.sha256(f"{key}#{draw}".encode()).digest()
        return "".join(_ALPHABET[b % len(_ALPHABET)] for b in digest[:n])

    def generated_name(self, stack: str, logical_id: str, limit: int = 64, lower: bool = False) -> str:
        """CloudFormation's generated physical names: "<stack>-<logical ID>-<random>", trimmed to the limit."""
        suffix = f"-{self.token(f'{stack}/{logical_id}')}"
        head = f"{stack}-{logical_id}"[: limit - len(suffix)]
        name = head + suffix
        return name.lower() if lower else name



class ResponseListener:
    """Where custom-resource handlers send their answer (CloudFormation's pre-signed ResponseURL): a
    loopback HTTP server that takes the PUT, as S3 would."""

    def __init__(self):
        self.answers: dict[str, dict[str, Any]] = {}
        self.arrived = threading.Condition()
        listener = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_PUT(self):  # noqa: N802 - http.server's naming
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                token = self.path.rsplit("/", 1)[-1]
                with listener.arrived:
                    listener.answers[token] = json.loads(body or b"{}")
                    listener.arrived.notify_all()
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        # A short poll: close() (shutdown) waits up to one interval, and every stand-in closes one of these.
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True,
                                       name="cfn-response")
        self.thread.start()

    def url(self, token: str) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/cfn-response/{token}"

    def take(self, token: str, timeout: float) -> dict[str, Any] | None:
        deadline = time.monotonic() + timeout
        with self.arrived:
            while token not in self.answers:
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self.arrived.wait(left)
            return self.answers.pop(token)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
