"""Any AWS error, answered by the stand-in in the service's own protocol (HOOKS.api_fault).

An injected error is an HTTP response as the service sends it: the status, and the code and message where that
protocol carries them (a JSON ``__type``, an ``x-amzn-ErrorType`` header, query and EC2 XML, S3's ``<Error>``, an
RPC v2 CBOR map). botocore then parses it and applies its retry rules exactly as it does on AWS, and the code that
made the call meets the same ClientError. It works for every client the in-process stand-in answers: the product's,
and the clients moto's Step Functions engine calls services with (a state machine's aws-sdk and optimized tasks).
"""

from __future__ import annotations

import functools
import json
import uuid

from .hooks import HOOKS


@functools.lru_cache(maxsize=None)
def _service_models() -> dict[str, object]:
    """botocore's service models by hyphenized service ID (what a before-send event names)."""
    import botocore.session
    session = botocore.session.get_session()
    found = {}
    for name in ("s3", "sagemaker", "stepfunctions", "cloudformation", "ssm", "fsx", "efs", "datasync", "ec2", "logs",
                 "service-quotas", "lambda", "sts", "iam", "events"):
        model = session.get_service_model(name)
        found[model.service_id.hyphenize()] = model
    return found


def _cbor_text(text: str) -> bytes:
    data = text.encode()
    return _cbor_head(3, len(data)) + data


def _cbor_head(major: int, length: int) -> bytes:
    if length < 24:
        return bytes([major << 5 | length])
    if length < 256:
        return bytes([major << 5 | 24, length])
    return bytes([major << 5 | 25]) + length.to_bytes(2, "big")


def error_body(protocol: str, code: str, message: str, method: str = "POST") -> tuple[dict[str, str], bytes]:
    """(headers, body) of an error response in ``protocol``, as the service sends it."""
    request_id = str(uuid.uuid4())
    if protocol in ("json",):
        return ({"x-amzn-RequestId": request_id, "Content-Type": "application/x-amz-json-1.1"},
                json.dumps({"__type": code, "message": message}).encode())
    if protocol == "rest-json":
        return ({"x-amzn-RequestId": request_id, "x-amzn-ErrorType": code, "Content-Type": "application/json"},
                json.dumps({"message": message}).encode())
    if protocol == "smithy-rpc-v2-cbor":
        body = _cbor_head(5, 2) + _cbor_text("__type") + _cbor_text(code) + _cbor_text("message") + _cbor_text(message)
        return {"x-amzn-RequestId": request_id, "smithy-protocol": "rpc-v2-cbor", "Content-Type": "application/cbor"}, body
    from xml.sax.saxutils import escape
    if protocol == "query":
        return ({"x-amzn-RequestId": request_id, "Content-Type": "text/xml"},
                (f'<ErrorResponse xmlns="https://amazonaws.com/"><Error><Type>Sender</Type><Code>{escape(code)}</Code>'
                 f"<Message>{escape(message)}</Message></Error><RequestId>{request_id}</RequestId></ErrorResponse>").encode())
    if protocol == "ec2":
        return ({"Content-Type": "text/xml"},
                (f"<Response><Errors><Error><Code>{escape(code)}</Code><Message>{escape(message)}</Message></Error>"
                 f"</Errors><RequestID>{request_id}</RequestID></Response>").encode())
    if protocol == "rest-xml":
        if method == "HEAD":   # S3 answers a HEAD request's error with its status alone: no body to carry a code
            return {"x-amz-request-id": request_id}, b""
        return ({"x-amz-request-id": request_id, "Content-Type": "application/xml"},
                (f'<?xml version="1.0" encoding="UTF-8"?><Error><Code>{escape(code)}</Code>'
                 f"<Message>{escape(message)}</Message><RequestId>{request_id}</RequestId></Error>").encode())
    raise ValueError(f"no error format for protocol {protocol}")


def error_answer(service_id: str, code: str, message: str, method: str = "POST") -> tuple[dict[str, str], bytes]:
    """(headers, body) of the error the service sends, for a call made in a function's own interpreter."""
    return error_body(_service_models()[service_id].resolved_protocol, code, message, method)


def error_response(service_id: str, code: str, status: int, message: str, request):
    """The AWSResponse the service would send for this error."""
    from botocore.awsrequest import AWSResponse
    from moto.core.botocore_stubber import MockRawResponse
    model = _service_models()[service_id]
    headers, body = error_body(model.resolved_protocol, code, message, getattr(request, "method", "POST"))
    return AWSResponse(request.url, status, headers, MockRawResponse(body))


def patch_api_faults() -> None:
    from moto.core.botocore_stubber import BotocoreStubber

    original = BotocoreStubber.__call__

    def __call__(self, event_name: str, request, **kwargs):
        if self.enabled and HOOKS.api_fault is not None:
            _, service_id, operation = (event_name.split(".", 2) + ["", ""])[:3]
            answer = HOOKS.api_fault(service_id, operation, request)
            if answer is not None:
                status, code, message = answer
                return error_response(service_id, code, status, message, request)
        return original(self, event_name, request, **kwargs)

    BotocoreStubber.__call__ = __call__
