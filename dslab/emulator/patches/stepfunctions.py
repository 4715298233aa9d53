"""Step Functions in the stand-in: the 256 KiB payload limit and history counts, compressed time, S3 bodies
read as text by aws-sdk tasks, a cached JSONPath parser, definitions parsed once, and histories in pages."""

from __future__ import annotations

import contextlib
import functools
import json
import threading
import time
from typing import Any

from .hooks import HOOKS


def patch_json_path_cache() -> None:
    """moto's Step Functions engine builds a JSONPath parser (its yacc tables included) for every path it
    evaluates: a tenth of a long execution's time. The parsed path is the same each time: keep it."""
    from moto.stepfunctions.parser.asl.utils import json_path

    json_path.parse = functools.lru_cache(maxsize=4096)(json_path.parse)


def patch_state_limits() -> None:
    """256 KiB per state input and output, terminal when exceeded; the largest payload is recorded."""
    from moto.stepfunctions.parser import quotas
    from moto.stepfunctions.parser.asl.component.common.error_name.error_equals_decl import (
        ErrorEqualsDecl,
    )
    from moto.stepfunctions.parser.asl.component.common.error_name.states_error_name import (
        StatesErrorName,
    )
    from moto.stepfunctions.parser.asl.component.common.error_name.states_error_name_type import (
        StatesErrorNameType,
    )
    from moto.stepfunctions.parser.asl.component.state import state as state_module
    from moto.stepfunctions.parser.asl.component.state.exec.state_task import (
        state_task_lambda,
    )
    from moto.stepfunctions.parser.asl.component.state.exec.state_task.service import (
        state_task_service,
    )
    from moto.stepfunctions.parser.asl.eval.event.event_manager import EventManager
    from moto.stepfunctions.parser.asl.utils.encoding import to_json_str

    def is_within_size_quota(value: Any) -> bool:
        size = len((value if isinstance(value, str) else to_json_str(value)).encode("utf-8"))
        HOOKS.max_state_bytes = max(HOOKS.max_state_bytes, size)
        return size <= quotas.MAX_STATE_SIZE_UTF8_BYTES

    for module in (quotas, state_module, state_task_lambda, state_task_service):
        module.is_within_size_quota = is_within_size_quota

    # Every state's input too (an ItemSelector or Parameters can build one larger than what came in);
    # raised outside the state's Catch, like the output check.
    original_input = state_module.CommonStateField._eval_state_input

    def _eval_state_input(self, env) -> None:
        original_input(self, env)
        self._verify_size_quota(env=env, value=env.stack[-1])

    state_module.CommonStateField._eval_state_input = _eval_state_input

    # "The States.ALL error type ... cannot catch the States.DataLimitExceeded terminal error or
    # Runtime error types" (https://docs.aws.amazon.com/step-functions/latest/dg/concepts-error-handling.html).
    terminal = [StatesErrorName(typ=StatesErrorNameType.StatesStatesDataLimitExceeded),
                StatesErrorName(typ=StatesErrorNameType.StatesRuntime)]
    original_match = ErrorEqualsDecl._eval_body

    def _eval_body(self, env) -> None:
        error_name = env.stack[-1]
        if error_name in terminal and error_name not in self.error_names:
            env.stack.pop()
            env.stack.append(False)
            return
        original_match(self, env)

    ErrorEqualsDecl._eval_body = _eval_body

    original_add = EventManager.add_event
    # Map iterations add events from their own threads: an unlocked `+= 1` loses some (7,889 counted of 7,895).
    counting = threading.Lock()

    def add_event(self, *args, **kwargs):
        original_add(self, *args, **kwargs)
        with counting:
            HOOKS.history_events[id(self)] = HOOKS.history_events.get(id(self), 0) + 1

    EventManager.add_event = add_event


def patch_time() -> None:
    from moto.stepfunctions.parser.asl.component.common.retry import retrier_decl
    from moto.stepfunctions.parser.asl.component.state.wait.wait_function.wait_function import (
        WaitFunction,
    )

    def _wait_interval(self, env, wait_seconds) -> None:
        if wait_seconds > 0:
            env.program_state_event.wait(wait_seconds * HOOKS.time_scale)

    WaitFunction._wait_interval = _wait_interval

    class _ScaledTime:
        def __getattr__(self, name):
            return getattr(time, name)

        @staticmethod
        def sleep(seconds: float) -> None:
            time.sleep(seconds * HOOKS.time_scale)

    retrier_decl.time = _ScaledTime()

    class _SyncPollClock(_ScaledTime):
        @staticmethod
        def sleep(seconds: float) -> None:
            time.sleep(max(0.1, seconds * HOOKS.time_scale))

    # The .sync integrations look at their job every 0.5 s (moto's constant), a delay each job pays after
    # it ends: on the stand-in's clock, but never more often than ten times a second.
    from moto.stepfunctions.parser.asl.component.state.exec.state_task.service import (
        state_task_service_callback,
    )
    state_task_service_callback.time = _SyncPollClock()
    # botocore's retry back-off (a throttled, 503 or 500 answer: the client sleeps, then asks again) on the
    # same clock, so a test of "the bucket wakes after N 503s" does not wait real seconds per retry.
    import botocore.endpoint
    botocore.endpoint.time = _ScaledTime()


def patch_stop_execution() -> None:
    """An execution stopped with StopExecution ends ABORTED ("Stops an execution", StopExecution; ExecutionStatus
    ABORTED, its history's ExecutionAborted event, "Contains details about an abort of an execution":
    https://docs.aws.amazon.com/step-functions/latest/apireference/API_ExecutionAbortedEventDetails.html).
    moto let a Map iteration that was still running when it stopped overwrite the stop with an error, and
    the execution ended FAILED (States.Runtime)."""
    from moto.stepfunctions.parser.asl.eval.environment import Environment
    from moto.stepfunctions.parser.asl.eval.program_state import ProgramStopped

    original = Environment.set_error

    def set_error(self, error) -> None:
        if isinstance(self._program_state, ProgramStopped):
            return   # stopped stays stopped: what ends afterwards is part of the abort
        original(self, error)

    Environment.set_error = set_error


def patch_nested_error_names() -> None:
    """A Map iteration or Parallel branch that fails makes its state fail with the same Error and Cause (AWS Step
    Functions Developer Guide, "Map state": "If any iteration fails, the entire Map state fails"; the Error names
    AWS defines begin with "States."). moto wrapped the iteration's error name as a custom one, which refuses
    the "States." prefix: an iteration that failed with States.Runtime or States.TaskFailed ended the execution
    with "Custom Error Names MUST NOT begin with the prefix 'States.'" in place of its own cause. A "States." name
    is rebuilt as the name AWS defines, every other as moto built it."""
    from moto.stepfunctions.parser.asl.component.common.error_name.custom_error_name import CustomErrorName
    from moto.stepfunctions.parser.asl.component.common.error_name.states_error_name import StatesErrorName
    from moto.stepfunctions.parser.asl.component.state.exec.state_map.iteration import iteration_worker
    from moto.stepfunctions.parser.asl.component.state.exec.state_parallel import branches_decl

    def error_name(error_name: str):
        if isinstance(error_name, str) and error_name.startswith("States."):
            with contextlib.suppress(ValueError):
                return StatesErrorName.from_name(error_name)
        return CustomErrorName(error_name=error_name)

    iteration_worker.CustomErrorName = error_name
    branches_decl.CustomErrorName = error_name


def patch_aws_sdk_streams() -> None:
    from botocore.response import StreamingBody
    from moto.stepfunctions.parser.asl.component.state.exec.state_task.service.state_task_service_aws_sdk import (
        StateTaskServiceAwsSdk,
    )

    original = StateTaskServiceAwsSdk._eval_service_task

    def _eval_service_task(self, env, resource_runtime_part, normalised_parameters, state_credentials):
        original(self, env, resource_runtime_part, normalised_parameters, state_credentials)
        response = env.stack[-1]
        if isinstance(response, dict):
            for key, value in list(response.items()):
                if isinstance(value, StreamingBody):
                    response[key] = value.read().decode("utf-8", errors="replace")
                elif hasattr(value, "isoformat"):
                    response[key] = value.isoformat()

    StateTaskServiceAwsSdk._eval_service_task = _eval_service_task


class _ParsedDefinitions:
    """The unevaluated programs of the last few definitions parsed (or restored with a saved deployment)."""

    def __init__(self, size: int = 8):
        self.size, self.lock = size, threading.Lock()
        self.programs: dict[str, Any] = {}

    def get(self, definition: str) -> Any:
        with self.lock:
            program = self.programs.pop(definition, None)
            if program is not None:
                self.programs[definition] = program   # the most recent last
            return program

    def put(self, definition: str, program: Any) -> None:
        with self.lock:
            self.programs.pop(definition, None)
            self.programs[definition] = program
            while len(self.programs) > self.size:
                del self.programs[next(iter(self.programs))]


_PARSED = _ParsedDefinitions()


def saved_programs(definitions: list[str]) -> dict[str, bytes]:
    """The parsed programs of ``definitions`` (those this process has), each pickled on its own, for a saved
    deployment (snapshot.py): a restored stand-in's first execution then does not parse its definition again (ANTLR
    in pure Python: ~0.3 s of CPU for the lab's, on the execution's critical path). A program that does not pickle
    is left out (that execution parses, as before)."""
    import pickle
    out = {}
    for definition in definitions:
        program = _PARSED.get(definition)
        if program is None:
            continue
        try:
            out[definition] = pickle.dumps(program, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception:  # noqa: BLE001 - any pickling failure: parsed again when executed
            continue
    return out


def restore_programs(saved: dict[str, bytes]) -> int:
    """Put back what ``saved_programs`` saved (a program that does not load is parsed again when executed)."""
    import pickle
    restored = 0
    for definition, data in (saved or {}).items():
        try:
            program = pickle.loads(data)
        except Exception:  # noqa: BLE001 - another version's classes, say: parsed when executed
            continue
        _PARSED.put(definition, program)
        restored += 1
    return restored


def patch_definition_parsing() -> None:
    """moto parses a state machine's definition (ANTLR in pure Python, 0.2-0.5 s for the lab's) to validate it
    when the machine is created, throws the result away, and parses it again for every execution. Here a
    definition is parsed once per process: the program its parse built, never evaluated, is kept (the last
    few definitions), a text seen before is valid without a second parse, and every execution evaluates a copy
    of its own (a program carries its evaluation's state; a deep copy of an unevaluated one is what a parse
    would build, in ~1/20 of the time). The lab's definition is the same text in every lab of a process
    (generated names are drawn per stand-in: cloudformation/providers/base.py, NameSource)."""
    import copy

    from moto.stepfunctions.parser import models
    from moto.stepfunctions.parser.asl.parse.asl_parser import AmazonStateLanguageParser
    from moto.stepfunctions.parser.backend import execution_worker

    original_validate = models.StepFunctionsParserBackend._validate_definition

    def parsed(definition: str):
        """The unevaluated program of ``definition``, parsed the first time (raising as moto's parser does)."""
        program = _PARSED.get(definition)
        if program is None:
            program = AmazonStateLanguageParser.parse(definition)[0]
            _PARSED.put(definition, program)
        return program

    def _validate_definition(definition: str):
        try:
            parsed(definition)
        except Exception:
            original_validate(definition=definition)   # raises InvalidDefinition, worded as moto words it
            raise

    models.StepFunctionsParserBackend._validate_definition = staticmethod(_validate_definition)

    def _get_evaluation_entrypoint(self):
        return copy.deepcopy(parsed(self._evaluation_details.state_machine_details.definition))

    execution_worker.ExecutionWorker._get_evaluation_entrypoint = _get_evaluation_entrypoint


def patch_execution_history_pages() -> None:
    """GetExecutionHistory in pages, as Step Functions serves it. botocore's model of the API (the AWS API
    reference): maxResults is "The maximum number of results that are returned per call. You can use nextToken
    to obtain further pages of results. The default is 100 and the maximum allowed page size is 1000. A value of
    0 uses the default." (its PageSize shape: min 0, max 1000); "If nextToken is returned, there are more results
    available. ... Make the call again using the returned token to retrieve the next page. Keep all other
    arguments unchanged. ... Using an expired pagination token will return an HTTP 400 InvalidToken error.";
    reverseOrder "Lists events in descending order of their timeStamp". moto answers every event at once,
    whatever maxResults says, so a caller that reads one page could never be caught missing the rest; it also
    deep-copies the whole history for each call (seconds of CPU for the ~8,000 events of the lab's largest run):
    here only the page is copied."""
    import base64
    import copy

    from moto.core.responses import ActionResult
    from moto.stepfunctions.exceptions import InvalidToken, ValidationException
    from moto.stepfunctions.responses import StepFunctionResponse

    original = StepFunctionResponse.get_execution_history

    def get_execution_history(self):
        arn = self._get_param("executionArn")
        execution = self.stepfunction_backend.describe_execution(arn)
        worker = getattr(execution, "exec_worker", None)
        if worker is None:   # moto's own backend (no interpreter): as moto answers
            return original(self)
        size = self._get_param("maxResults") or 100
        if not 0 <= size <= 1000:
            bound = "less than or equal to 1000" if size > 1000 else "greater than or equal to 0"
            raise ValidationException(f"1 validation error detected: Value '{size}' at 'maxResults' failed to satisfy "
                                      f"constraint: Member must have value {bound}")
        reverse = bool(self._get_param("reverseOrder"))
        manager = worker.env.event_manager if worker.env is not None else None
        with manager._mutex if manager is not None else contextlib.nullcontext():
            events = manager._history_event_list if manager is not None else []   # not started yet: none
            # The token names the last event served, not a position: a running execution's history grows at its
            # end, so a position counted from the newest event (reverseOrder) would shift between calls and
            # serve events twice. Event ids count from 1 in the order events are added: event id i is events[i-1].
            last = _history_token(self._get_param("nextToken"), arn, reverse, len(events))
            if reverse:
                end = len(events) if last is None else last - 1
                page = events[max(0, end - size):end][::-1]
                more = end - size > 0
            else:
                begin = 0 if last is None else last
                page = events[begin:begin + size]
                more = begin + size < len(events)
            page = copy.deepcopy(page)
        result: dict[str, Any] = {"events": page}
        if more:
            result["nextToken"] = base64.urlsafe_b64encode(json.dumps([arn, reverse, page[-1]["id"]]).encode()).decode()
        return ActionResult(result)

    def _history_token(token: str | None, arn: str, reverse: bool, count: int) -> int | None:
        """The id of the last event a previous page served, or None for the first page. "Using an expired
        pagination token will return an HTTP 400 InvalidToken error": so does a token of another execution or
        of the other order ("Keep all other arguments unchanged"), and anything that is not a token."""
        if not token:
            return None
        try:
            token_arn, token_reverse, last = json.loads(base64.urlsafe_b64decode(token.encode()))
        except Exception:  # noqa: BLE001 - not a token at all
            last = token_arn = token_reverse = None
        if (token_arn != arn or token_reverse is not reverse or type(last) is not int or not 1 <= last <= count):
            raise InvalidToken("the token is not one of this execution's listing with these arguments")
        return last

    StepFunctionResponse.get_execution_history = get_execution_history


# AWS Step Functions Developer Guide, "Learning to use AWS service SDK integrations in Step Functions"
# (https://docs.aws.amazon.com/step-functions/latest/dg/supported-services-awssdk.html): "If an AWS SDK integration
# encounters an error, the resulting Error field will be composed of the service name and the error name, separated by
# a period character: ServiceName.ErrorName. Both the service name and error name are in Pascal case." and, for S3,
# "refer to it as S3.BucketAlreadyExistsException". moto names the service as the Resource writes it ("s3",
# "datasync"), so a Retry or Catch naming "S3.…" or "DataSync.…" never matched in the stand-in. The Pascal names of
# the services the lab's state machine calls through aws-sdk tasks (botocore's serviceId for both):
SDK_ERROR_SERVICE_NAMES = {"s3": "S3", "datasync": "DataSync"}


def patch_sdk_error_names() -> None:
    from moto.stepfunctions.parser.asl.component.state.exec.state_task.service import state_task_service_aws_sdk
    state_task_service_aws_sdk._SERVICE_ERROR_NAMES.update(SDK_ERROR_SERVICE_NAMES)
