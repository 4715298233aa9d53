"""The command line read once, at the edge (issue 55, section 7): `estimate`, `recommend`, `size` and `export` turn their
flags and the files they name into what was asked in one call (cli/asked.py ``ask``, ``ask_export``); the views take
that, and nothing below ``dslab/cli/`` receives argparse's namespace. A namespace that records who reads it holds each
command to that."""

from __future__ import annotations

import argparse
import contextlib
import io
import sys
from pathlib import Path

import pytest

from dslab.cli import asked as asked_module
from dslab.cli import build_parser

REPO = Path(__file__).resolve().parents[1]
CLI = str(REPO / "dslab" / "cli") + "/"
EXAMPLE_WORKLOAD = REPO / "dslab" / "contracts" / "dlio"


class Recording(argparse.Namespace):
    """A namespace that notes each read of a flag: the function that read it, and whether `ask` was running."""

    def __getattribute__(self, name):
        if not name.startswith("_") and name in object.__getattribute__(self, "__dict__"):
            frame = sys._getframe(1)
            inside, caller = False, frame
            readers = (asked_module.ask.__code__, asked_module.ask_export.__code__, asked_module.ask_plan.__code__)
            while caller is not None:
                if caller.f_code in readers:
                    inside = True
                    break
                caller = caller.f_back
            reads = object.__getattribute__(self, "__dict__").setdefault("_reads", [])
            reads.append((frame.f_code.co_filename, frame.f_code.co_name, name, inside))
        return super().__getattribute__(name)


def _workload(name: str) -> str:
    found = sorted(EXAMPLE_WORKLOAD.rglob(f"{name}*.yaml"))
    assert found, f"no {name} workload under {EXAMPLE_WORKLOAD}"
    return str(found[0])


def _cases() -> list[list[str]]:
    dataset = ["--files", "1530350", "--bytes", "54GB", "--instance", "ml.p4d.24xlarge", "--instance-count", "16"]
    checkpoint = ["--workload", _workload("llama3_8b"), "--instance", "ml.p5.48xlarge", "--instance-count", "8"]
    experiment = ["--experiment", str(REPO / "experiments" / "post-12-jobs.yaml")]
    return [
        ["estimate", *dataset], ["estimate", *dataset, "--mode", "Express FastFile", "--json"],
        ["recommend", *dataset, "--explain"], ["size", *dataset, "--as-deployed"],
        ["estimate", *checkpoint], ["recommend", *checkpoint, "--json"], ["size", *checkpoint],
        ["estimate", *experiment], ["recommend", *experiment, "--dataset", "caltech-jpg-1x"],
        ["recommend", "--workload", _workload("unet3d"), "--scale", "0.5", "--instance", "ml.g5.2xlarge"],
        ["export", *experiment, "--offline"], ["export", *experiment, "--offline", "--mode", "FastFile", "--repeat", "0"],
        ["plan", *experiment, "--offline"], ["plan", *experiment, "--offline", "--json", "--epochs", "2"],
    ]


def _run(argv: list[str]) -> tuple[int, list[tuple[str, str, str, bool]], int]:
    calls = []
    args = build_parser().parse_args(argv, namespace=Recording())
    vars(args).pop("_reads", None)   # what argparse itself read while parsing
    handler = vars(args)["handler"]   # main's dispatch (not a flag), taken as main takes it, unrecorded
    module = sys.modules[handler.__module__]
    name = {"export": "ask_export", "plan": "ask_plan"}.get(argv[0], "ask")
    original = getattr(module, name)

    def counted(args):
        calls.append(args)
        return original(args)

    setattr(module, name, counted)
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            code = handler(args)
    finally:
        setattr(module, name, original)
    return code, vars(args).get("_reads", []), len(calls)


@pytest.mark.parametrize("argv", _cases(), ids=lambda argv: " ".join(a if "/" not in a else Path(a).name for a in argv))
def test_each_command_reads_its_flags_in_one_call_to_ask_and_only_inside_cli(argv):
    code, reads, asks = _run(argv)
    assert code in (0, 1)   # 1: an experiment or a checkpoint question without an answer is not a success
    assert asks == 1, f"ask ran {asks} times"
    assert reads, "nothing read the flags"
    outside = [(f, fn, flag) for f, fn, flag, _ in reads if not f.startswith(CLI)]
    assert not outside, f"read below dslab/cli/: {outside}"
    readers = sorted({Path(f).name for f, _, _, _ in reads})
    assert len(readers) <= 3, f"the namespace is read in {readers}"   # asked.py, question.py, common.py
    after = [(Path(f).name, fn, flag) for f, fn, flag, inside in reads if not inside]
    # The handler's own line (cmd_*: args -> ask(args)) hands the namespace on unread; every read is ask's.
    assert not after, f"read outside the one call to ask: {after}"


def test_a_recording_namespace_sees_a_read_outside_ask():
    """The test's own instrument: a read after `ask` returned is seen (the assertion above can fail)."""
    args = build_parser().parse_args(["estimate", "--files", "10", "--bytes", "10MB"], namespace=Recording())
    vars(args).pop("_reads", None)
    assert args.files == 10
    assert vars(args)["_reads"][-1][2:] == ("files", False)


def test_the_views_take_what_was_asked_never_the_namespace():
    """No view of estimate, recommend, size, export and plan has a parameter a namespace could arrive by."""
    import inspect

    from dslab.cli import advice, checkpoints, export, size
    from dslab.cli import runs
    assert list(inspect.signature(runs.show_plan).parameters) == ["asked"]
    for module in (advice, size, checkpoints, export):
        for name, function in inspect.getmembers(module, inspect.isfunction):
            if function.__module__ != module.__name__ or name.startswith("cmd_") or name == "register":
                continue
            assert "args" not in inspect.signature(function).parameters, f"{module.__name__}.{name} takes args"


@pytest.mark.parametrize("argv, field", [
    (["estimate", "--experiment", str(REPO / "experiments" / "post-12-jobs.yaml"), "--workload", "x.yaml"], "--workload"),
    (["recommend", "--experiment", str(REPO / "experiments" / "post-12-jobs.yaml"), "--files", "3"], "--files"),
    (["size", "--files", "1000", "--bytes", "5000"], "--bytes"),
    (["estimate", "--files", "1000", "--bytes", "5GB", "--mode", "EFS", "--storage", "express"], "--storage"),
    (["export", "--experiment", str(REPO / "experiments" / "post-12-jobs.yaml"), "--offline", "--dataset", "nope",
      "--upload"], "--dataset"),
    (["export", "--experiment", str(REPO / "experiments" / "post-12-jobs.yaml"), "--offline", "--trial", "nope"], "--trial"),
], ids=["experiment-with-workload", "experiment-with-files", "five-bytes-a-file", "efs-on-express", "export-unknown-dataset",
        "export-unknown-trial"])
def test_bad_input_is_refused_inside_ask_before_any_view(argv, field, monkeypatch):
    from dslab.core.errors import ConfigError
    views = []
    args = build_parser().parse_args(argv, namespace=Recording())
    vars(args).pop("_reads", None)
    module = sys.modules[vars(args)["handler"].__module__]
    for name in ("show_estimate", "show_recommend", "show_size", "show_export"):
        if hasattr(module, name):
            monkeypatch.setattr(module, name, lambda asked, name=name: views.append(name))
    with pytest.raises(ConfigError) as raised:
        vars(args)["handler"](args)
    assert raised.value.field == field
    assert not views, "a view ran before the refusal"
