"""The CLI never shows a traceback: every help runs, the README's and the documentation's offline commands run as
written, every
numeric flag refuses 0, negative, huge and non-numeric values in one line, every instance is priced or
refused, and the instance table's sustained network is AWS's baseline (issues 26 and 27)."""

from __future__ import annotations

import argparse
import csv
import json
import re
import shlex
from pathlib import Path

import pytest

from dslab.cli import build_parser, main
from dslab.core.errors import ConfigError
from dslab.core.facts.compute import preset_of
from dslab.core.facts.instances import INSTANCES
from dslab.core.facts.prices import PriceTable, job_cost

from .conftest import REPO, documented_pages


class _Ran:
    def __init__(self, code: int, out: str, err: str):
        self.code, self.out, self.err = code, out, err

    def one_line_error(self, *words: str) -> bool:
        """Exit 2 and one stderr line naming ``words`` (no traceback, no usage block)."""
        line = self.err.strip()
        return self.code == 2 and line.count("\n") == 0 and line.startswith("dslab") and all(w in line for w in words)


def run(capsys, *argv: str) -> _Ran:
    """`dslab ARGV` in this process. An exception escaping main is what a user sees as a traceback: it fails."""
    try:
        code = main([str(a) for a in argv])
    except SystemExit as exit_:   # argparse: -h, and arguments it refuses
        code = exit_.code
    except Exception as err:  # noqa: BLE001 - the point of the test
        pytest.fail(f"dslab {shlex.join(map(str, argv))} ended in a traceback: {type(err).__name__}: {err}")
    captured = capsys.readouterr()
    return _Ran(code, captured.out, captured.err)


def commands(parser: argparse.ArgumentParser | None = None, words: tuple[str, ...] = ()):
    """Every command of the parser tree, as (words, its parser): (), ("dataset",), ("dataset", "generate"), ..."""
    parser = parser or build_parser()
    yield words, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                yield from commands(child, (*words, name))


# ---- every help runs -------------------------------------------------------------------------------

def test_every_commands_help_runs(capsys):
    """`dslab -h` crashed on the "%" of "AU >= 90%" in size's help; every help is built from the parser itself."""
    walked = list(commands())
    assert {w for w, _ in walked} >= {(), ("size",), ("dataset", "generate"), ("fsx",)}
    for words, _ in walked:
        ran = run(capsys, *words, "-h")
        assert ran.code == 0 and ran.out.startswith("usage: dslab"), (words, ran.err)
    assert "AU >= 90%" in " ".join(run(capsys, "-h").out.split())


# ---- the README's and the pages' commands, as written ---------------------------------------------

# Every command of README.md's and docs/'s code blocks and command tables is run below or skipped here, with why (the
# table's rows are syntax with placeholders, skipped by PLACEHOLDER; prose mentions are not commands).
SKIPPED = {
    "dataset generate --out data/jpg-1x": "writes 30,607 JPEGs (~1.1 GB); here a 40-image data/jpg-1x stands in",
    "doctor": "asks EC2 and FSx in your account (tests/test_doctor.py, against the stand-in)",
    "doctor --experiment experiments/post-12-jobs.yaml --az-id use1-az2": "asks EC2 and FSx in your account",
    "express status": "lists the Express bucket in your account",
    "express empty --yes": "deletes objects in your account",
    "express empty --dataset caltech-jpg-50x --yes": "deletes objects in your account",
    "export --experiment experiments/post-12-jobs.yaml --outputs cdk-outputs.json": "reads cdk-outputs.json, "
        "which `make deploy` writes (the same export runs with --offline in tests/test_answer.py)",
    "fsx up": "deploys the FSx stack in your account",
    "fsx down": "deletes the FSx stack in your account",
    "status": "describes the workflow's last execution in your account",
    "express empty": "deletes objects in your account",
    "efs empty": "runs the lab's DataSync emptying task in your account",
    "job run-local": "the table names the command; it runs a request on a folder stand-in (tests/test_training.py)",
    "local --workload dslab/contracts/dlio/cosmoflow_a100.yaml --scale 0.0002 --out cosmo-out": "runs the local lab "
        "(~90 s); tests/test_dlio.py runs a published workload at a smaller scale",
    "dataset generate --workload dslab/contracts/dlio/cosmoflow_a100.yaml --scale 0.0002 --out data/cosmoflow": "writes "
        "105 files of 2.8 MB (~300 MB); tests/test_dlio.py generates every format smaller",
    # Named in the README's prose:
    "local --out lab-out": "what `make lab` runs (tests/test_local_lab.py runs the lab end to end and checks make lab's command)",
    "local --experiment examples/own-script/experiment.yaml --out own-out": "runs the local lab; "
        "tests/test_own_script.py runs the example in it",
    "local --experiment examples/own-ingestion/experiment.yaml --out ingest-out": "runs the local lab; "
        "tests/test_own_script.py runs the example in it",
    "run --experiment experiments/all-modes-20-jobs.yaml --wait": "starts the workflow in your account",
}


def offline(argv: list[str]) -> bool:
    """Whether a command runs without AWS: only these are ever run here (anything else must be in SKIPPED)."""
    if argv[0] in ("estimate", "recommend", "size", "prices"):
        return True
    if argv[0] == "dataset":
        return argv[1] in ("generate", "pack", "replicate", "import") or (argv[1] == "stats" and "s3://" not in argv[2])
    return (argv[0] in ("plan", "export") and "--offline" in argv) or (argv[0] == "report" and "--results" in argv)
PLACEHOLDER = re.compile(r"[<…|()]|(?:^|\s)[A-Z][A-Z_-]*(?=\s|$)")   # <bucket>, …, a|b, F, N, EXECUTION


# Prose names a flag of a command (`dslab recommend --portable-script`) without the rest of its arguments: a mention,
# not a command to run as written.
FRAGMENTS = {
    "recommend --portable-script": "names the flag; the README's recommend examples give the dataset",
    "recommend --instance-count 16": "names the flag; the cluster walk-through's commands give the dataset",
    "local --plain": "names the flag (a line per change instead of the live table)",
    "dataset generate --workload": "names the flag; the DLIO section's command gives the workload file",
    "recommend --experiment": "names the flag; the README's recommend --experiment examples give the file",
    "efs empty --dataset": "names the flag (and deletes in your account)",
}


def readme_commands() -> list[str]:
    """`dslab ...` in the code lines, tables' cells and prose of README.md and every written page of docs/ (a command
    with flags; a bare `dslab size` is a name), optional [groups] dropped, each once."""
    readme = "\n".join(documented_pages().values())
    found = re.findall(r"(?m)^\s*(?:\.venv/bin/)?dslab (.+?)\s*(?:\\|#.*|>.*)?$", readme)
    for row in re.findall(r"(?m)^\|.*$", readme):
        found += re.findall(r"`(?:\.venv/bin/)?dslab ([^`]+)`", row)
    found += [text for text in re.findall(r"`(?:\.venv/bin/)?dslab ([^`|]+)`", readme) if re.search(r"\s-", text)]
    out = []
    for text in found:
        text = re.sub(r"\s*\[[^\[\]]*(?:\[[^\[\]]*\][^\[\]]*)*\]", "", text).strip()
        if text not in out:
            out.append(text)
    return out


def test_the_readmes_and_the_pages_offline_commands_run_as_written(capsys, tmp_path, monkeypatch):
    ran = []
    monkeypatch.chdir(tmp_path)   # the data/... commands write relative to it; experiments/... read from the repo
    (tmp_path / "experiments").symlink_to(REPO / "experiments")
    (tmp_path / "dslab").symlink_to(REPO / "dslab")   # the vendored DLIO workload files, dslab/contracts/dlio/
    assert run(capsys, "dataset", "generate", "--out", "data/jpg-1x", "--images", "40", "--classes", "4").code == 0
    import shutil   # a folder of your own images at ~/my-images, for `dataset import --src ~/my-images`
    shutil.copytree(tmp_path / "data" / "jpg-1x", tmp_path / "home" / "my-images", ignore=shutil.ignore_patterns("*.json"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    for text in readme_commands():
        if text in SKIPPED or text in FRAGMENTS or PLACEHOLDER.search(text):
            continue   # skipped with its reason, a flag named in prose, or syntax with placeholders
        argv = [str(Path(a).expanduser()) if a.startswith("~") else a for a in shlex.split(text)]   # as a shell would
        assert offline(argv), f"documented: `dslab {text}`: runs offline? run it here, or add it to SKIPPED with why"
        result = run(capsys, *argv)
        assert result.code == 0, f"documented: `dslab {text}` -> {result.code}: {result.err}"
        ran.append(text)
    # What ran: the sizing example and the dataset tooling's chain (each as the README writes it).
    assert "size --files 1530350 --bytes 54GB --instance ml.p4d.24xlarge --instance-count 16" in ran
    assert {"dataset pack --src data/jpg-1x --out data/tfr-1x",
            "dataset replicate --src data/tfr-1x --copies 50 --out data/tfr-50x"} <= set(ran), ran
    assert len(list((tmp_path / "data" / "tfr-50x").glob("copy-*"))) == 50
    assert "dataset import --src ~/my-images --out data/mine" in ran and (tmp_path / "data" / "mine").is_dir()
    stale = (set(SKIPPED) | set(FRAGMENTS)) - set(readme_commands())
    assert not stale, f"no longer in the README or the pages, drop from SKIPPED/FRAGMENTS: {stale}"


# ---- every numeric flag, fuzzed ------------------------------------------------------------------

def numeric_options():
    """(command words, option) for every option whose value is a number, found from the parser."""
    for words, parser in commands():
        for action in parser._actions:
            if not action.option_strings or action.type is None:
                continue
            kind = getattr(action.type, "kind", None)
            if kind is None:
                try:
                    kind = type(action.type("1"))
                except Exception:  # noqa: BLE001 - a type that refuses "1" is not a plain number
                    continue
            if kind in (int, float):
                yield words, action.option_strings[-1], kind


HUGE = "1000000000000000"
# Values a flag may legitimately take among the fuzzed ones: a seed may be 0 or huge, a repeat 0.
ALLOWED = {("--seed", "0"), ("--seed", HUGE), ("--repeat", "0")}


def _base(words, tmp_path, jpgs, n):
    """The cheapest other arguments each command needs (the fuzzed option is added to them)."""
    out = str(tmp_path / f"out-{n}")
    return {
        ("dataset", "generate"): ["--out", out, "--images", "2", "--classes", "1"],
        ("dataset", "pack"): ["--src", jpgs, "--out", out],
        ("dataset", "replicate"): ["--src", jpgs, "--out", out],
        ("dataset", "upload"): ["--src", jpgs, "--to", "s3://datasourcelab-data-123456789012-us-east-1/datasets/x/"],
        ("run",): ["--experiment", "experiments/smoke.yaml"],
        ("plan",): ["--workload", "dslab/contracts/dlio/cosmoflow_a100.yaml", "--offline"],
        ("local",): ["--out", out],
        ("status",): [],
        ("efs", "empty"): [],
        ("estimate",): ["--files", "30607", "--bytes", "1.1GB"],
        ("recommend",): ["--files", "30607", "--bytes", "1.1GB"],
        ("size",): ["--files", "30607", "--bytes", "1.1GB"],
        ("export",): ["--experiment", "experiments/post-12-jobs.yaml", "--offline", "--out", out],
    }[words]


def test_every_numeric_flag_refuses_zero_negative_huge_and_non_numbers_in_one_line(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(REPO)
    jpgs = str(tmp_path / "jpg")
    assert run(capsys, "dataset", "generate", "--out", jpgs, "--images", "3", "--classes", "1").code == 0
    options = list(numeric_options())
    assert len(options) >= 25 and (("size",), "--count", int) in options
    assert (("estimate",), "--compute-rate", float) in options and (("status",), "--poll", float) in options
    n = 0
    for words, option, kind in options:
        for value in ("0", "-1", HUGE, "abc", *(("nan", "inf") if kind is float else ())):
            n += 1
            result = run(capsys, *words, *_base(words, tmp_path, jpgs, n), option, value)
            if (option, value) in ALLOWED:
                assert result.code == 0, (words, option, value, result.err)
            else:
                assert result.one_line_error(option), (words, option, value, result.code, result.err)


# ---- every instance priced or refused; one refusal for an accelerator no preset emulates ------------

def test_every_instance_of_the_table_has_a_price():
    """Ten rows (g6 x3, g6e x3, p4de, p5, trn1 x2) had none: their records cost `instance: 0.0`."""
    prices = PriceTable()
    unpriced = [name for name in INSTANCES if not (prices.instance_hourly(name) or 0) > 0]
    assert not unpriced, unpriced


def test_s3_concurrency_asked_is_said_under_the_premise_and_prices_the_script_rows(capsys):
    """--s3-concurrency: the lab's script's GETs in flight, said on its own line where asked (never where not), and the
    Script rows priced at it by estimate, recommend and size alike."""
    question = ["--files", "1530350", "--bytes", "54GB", "--instance", "ml.p4d.24xlarge", "--compute-rate", "262"]
    plain = run(capsys, "estimate", *question)
    asked = run(capsys, "estimate", *question, "--s3-concurrency", "70")
    assert plain.code == asked.code == 0
    assert "script: s3_concurrency" not in plain.out
    assert "script: s3_concurrency 70 (GETs in flight a Script job keeps; default 64)" in asked.out.splitlines()
    script = lambda text: next(line for line in text.splitlines() if re.match(r"\s*\d+\s+Script\s", line))  # noqa: E731
    assert script(plain.out) != script(asked.out)
    answers = [json.loads(run(capsys, command, *question, "--s3-concurrency", "70", "--json").out)
               for command in ("estimate", "recommend", "size")]
    assert answers[0] == answers[1] == answers[2] and answers[0]["question"]["premise"]["s3_concurrency"] == 70


def test_size_prices_every_row_of_its_table_or_refuses_it_as_estimate_and_recommend_do(capsys):
    for name, row in INSTANCES.items():
        result = run(capsys, "size", "--files", "30607", "--bytes", "1.1GB", "--instance", name, "--json")
        if preset_of(row.name) is None:   # no accelerator (m5, c5), or one no preset emulates: the same refusal everywhere
            assert result.one_line_error("--compute-rate"), (name, result.err)
            refusals = {result.err}
            for command in ("estimate", "recommend"):
                refusals.add(run(capsys, command, "--files", "30607", "--bytes", "1.1GB", "--instance", name).err)
            assert len(refusals) == 1, refusals
            result = run(capsys, "size", "--files", "30607", "--bytes", "1.1GB", "--instance", name, "--json",
                         "--compute-rate", "300")
        assert result.code == 0, (name, result.err)
        sized = json.loads(result.out)
        assert all(source["cost_to_result_usd"] > 0 for source in sized["sources"] if not source["blocker"]), name
    # ml.p5.48xlarge is priced at its own row, never $0: every source's hour costs at least that instance-hour (plus
    # what the source adds), and the prices line gives the row's own date and source, not the table's.
    hourly = PriceTable().instance_hourly("ml.p5.48xlarge")
    p5 = run(capsys, "size", "--files", "30607", "--bytes", "1.1GB", "--instance", "ml.p5.48xlarge", "--json")
    assert p5.code == 0 and hourly
    for s in json.loads(p5.out)["sources"]:   # the job's dollars per hour of its clock: at least the instance-hour
        assert s["job_usd"] / (s["job_seconds"] / 3600) >= hourly - 1e-6, s["source"]
    # The answer's last line counts such rows and names `dslab prices`, which gives the row's own date and source.
    p5 = run(capsys, "size", "--files", "30607", "--bytes", "1.1GB", "--instance", "ml.p5.48xlarge")
    footer = p5.out.rstrip().splitlines()[-1]
    assert footer.startswith("prices of ") and "rows from other sources: `dslab prices`" in footer
    listed = run(capsys, "prices")
    row = next(line for line in listed.out.splitlines() if "instance_hourly.ml.p5.48xlarge " in line)
    assert row.startswith("*") and PriceTable().row_date("ml.p5.48xlarge") in row and \
        "public code quoting the AWS Price List API" in row


def test_an_unpriced_instance_is_refused_naming_prices_and_a_record_never_costs_it_zero(capsys, tmp_path):
    """ml.r5.large is a SageMaker training type the table does not price."""
    assert run(capsys, "estimate", "--files", "10", "--bytes", "1GB", "--instance", "ml.r5.large",
               "--compute-rate", "100").one_line_error("--instance", "--prices")
    with pytest.raises(ConfigError, match="--prices"):
        job_cost(PriceTable(), mode="File", instance_type="ml.r5.large", instance_count=1, volume_size_gb=10,
                 billable_seconds=3600, wall_seconds=3600)
    describe = {"TrainingJobName": "j", "TrainingJobStatus": "Completed", "BillableTimeInSeconds": 3600,
                "TrainingTimeInSeconds": 3600, "ResourceConfig": {"InstanceType": "ml.r5.large", "InstanceCount": 1,
                                                                  "VolumeSizeInGB": 10},
                "AlgorithmSpecification": {"TrainingInputMode": "File"}, "SecondaryStatusTransitions": []}
    (tmp_path / "jobs").mkdir()
    (tmp_path / "jobs" / "j.json").write_text(json.dumps(describe))
    refused = run(capsys, "report", "--describe-json", tmp_path / "jobs", "--out", tmp_path / "report")
    assert refused.one_line_error("--prices") and not (tmp_path / "report").exists()
    prices = tmp_path / "prices.yaml"
    prices.write_text("instance_hourly:\n  ml.r5.large: 0.151\n")
    assert run(capsys, "report", "--describe-json", tmp_path / "jobs", "--out", tmp_path / "report",
               "--prices", prices).code == 0
    record = json.loads((tmp_path / "report" / "results.json").read_text())["records"][0]
    assert record["cost_usd"]["instance"] == pytest.approx(0.151)
    # An experiment on it is refused before anything is planned or run (its records would cost $0).
    experiment = tmp_path / "r5.yaml"
    experiment.write_text("name: r5\ninstance_type: ml.r5.large\ndatasets: [caltech-jpg-1x]\nmodes: [File]\n")
    assert run(capsys, "plan", "--experiment", experiment, "--offline").one_line_error("instance_type", "no price")


# ---- sustained network: AWS's baseline, row by row ----------------------------------------------

def test_every_rows_sustained_network_is_the_ec2_baseline_bandwidth():
    """m5.large-4xlarge, c5.xlarge-4xlarge and g4dn.xlarge-4xlarge had their "up to" figure as sustained."""
    path = Path(__file__).parent / "data" / "ec2-baseline-bandwidth.csv"
    text = path.read_text()
    assert "docs.aws.amazon.com/ec2/latest/instancetypes" in text and "2026-11-30" in text   # source and date
    with open(path, newline="") as handle:
        baseline = {r["ec2_type"]: float(r["baseline_gbps"]) for r in csv.DictReader(l for l in handle if not l.startswith("#"))}
    for name, row in INSTANCES.items():
        ec2 = name.removeprefix("ml.")
        assert ec2 in baseline, f"{name}: add its baseline to {path.name}"
        assert row.network_baseline_gbps == baseline[ec2], (name, row.network_baseline_gbps, baseline[ec2])
        assert row.network_baseline_gbps <= row.network_gbps, name
    assert (INSTANCES["ml.m5.large"].network_baseline_gbps, INSTANCES["ml.g4dn.xlarge"].network_baseline_gbps) == (0.75, 5)


def test_every_rows_network_cards_are_ec2s_and_ip_traffic_gets_the_primary_cards_share():
    """DescribeInstanceTypes' NetworkCards, vendored with their source (and checked against moto's copy of AWS's answer
    where it is installed): a type of several cards gives S3, EFS and FSx traffic its primary card's bandwidth, said as
    an assumption wherever an answer uses it; a type of one card, the whole instance's."""
    from dslab.core.facts.instances import NETWORK_CARDS
    path = Path(__file__).parent / "data" / "ec2-network-cards.csv"
    text = path.read_text()
    assert "34d6cad5abbb7b91c97578f3249b39a7e2df1ed5" in text and "describe_instance_types" in text
    with open(path, newline="") as handle:
        rows = {r["ec2_type"]: r for r in csv.DictReader(line for line in handle if not line.startswith("#"))}
    try:
        import gzip
        import moto
        dump = json.loads(gzip.open(Path(moto.__file__).parent / "ec2" / "resources" / "instance_types.json.gz").read())
    except (ImportError, OSError):
        dump = {}
    for name, row in INSTANCES.items():
        ec2 = name.removeprefix("ml.")
        assert ec2 in rows, f"{name}: add its network cards to {path.name}"
        vendored = rows[ec2]
        if ec2 in dump:
            info = dump[ec2]["NetworkInfo"]
            assert (int(vendored["network_cards"]), float(vendored["card0_baseline_gbps"])) == (
                info["MaximumNetworkCards"], info["NetworkCards"][0]["BaselineBandwidthInGbps"]), name
        if not vendored["network_cards"] or int(vendored["network_cards"]) == 1:
            assert ec2 not in NETWORK_CARDS and row.ip_gbps == row.network_baseline_gbps and row.ip_assumption is None
            continue
        cards, card0 = int(vendored["network_cards"]), float(vendored["card0_baseline_gbps"])
        assert NETWORK_CARDS[ec2] == (cards, card0), name
        assert row.ip_gbps == min(card0, row.network_baseline_gbps)
    p5 = INSTANCES["ml.p5.48xlarge"]
    assert (p5.network_gbps, p5.network_cards, p5.ip_gbps) == (3200, 32, 100)
    assert "100 of the 3,200".replace(",", "") in p5.ip_assumption.replace(",", "") and "no SageMaker page" in p5.ip_assumption


def test_every_rows_instance_storage_is_the_ec2_guides():
    """NVMe instance storage is what File mode's share lands on where SageMaker provisions no EBS volume (premise.py):
    each row's figure is the EC2 guide's, vendored with its source; the types it does not list say so."""
    path = Path(__file__).parent / "data" / "ec2-instance-storage.csv"
    text = path.read_text()
    assert "docs.aws.amazon.com/ec2/latest/instancetypes/ac.html" in text and "VolumeSizeInGB" in text
    with open(path, newline="") as handle:
        rows = {r["ec2_type"]: r for r in csv.DictReader(line for line in handle if not line.startswith("#"))}
    for name, row in INSTANCES.items():
        ec2 = name.removeprefix("ml.")
        assert ec2 in rows, f"{name}: add its instance storage to {path.name}"
        assert row.nvme_gb == int(rows[ec2]["total_gb"]), (name, row.nvme_gb, rows[ec2])
        counts = [int(n) * int(size) for n, size in re.findall(r"(\d+) x (\d+) GB", rows[ec2]["layout"])]
        assert sum(counts) == row.nvme_gb, (name, rows[ec2]["layout"])
        if rows[ec2]["status"] == "secondary":   # not on the guide at hand: the row says so
            assert "secondary" in row.source, name


# ---- refused, clearly, before anything is created -----------------------------------------------

@pytest.mark.parametrize("flag, value", [("--samples", "-3"), ("--samples", "0"), ("--files", "0"), ("--bytes", "0"),
                                         ("--bytes", "-5GB"), ("--bytes", "1e400GB")])
def test_a_dataset_of_nothing_is_refused_by_every_command_that_sizes_one(capsys, flag, value):
    """`--samples -3` priced 54 GB at $0.31."""
    for command in ("estimate", "recommend", "size"):
        args = {"--files": "1530350", "--bytes": "54GB", flag: value}
        result = run(capsys, command, *[x for pair in args.items() for x in pair])
        assert result.one_line_error(flag), (command, result.err)


def test_a_size_that_leaves_files_under_100_bytes_is_refused_with_the_per_file_figure(capsys, tmp_path):
    """Issue 55: `--files 1000 --bytes 5000` (5 bytes a file) was priced without a word."""
    for command in ("estimate", "recommend", "size"):
        result = run(capsys, command, "--files", "1000", "--bytes", "5000")
        # 5,000 bytes / 1,000 files = 5 bytes a file; 5 KB a file is the first unit at 100 bytes or more.
        assert result.one_line_error("--bytes", "5 bytes a file", "--files", "5000KB"), (command, result.err)
    # 100,000 bytes / 1,000 files = 100 bytes a file: the floor itself is a dataset.
    assert run(capsys, "estimate", "--files", "1000", "--bytes", "100000", "--json").code == 0
    experiment = tmp_path / "tiny.yaml"
    experiment.write_text("datasets: [{name: d, format: jpg, files: 1000, bytes: 5000}]\n")
    result = run(capsys, "plan", "--experiment", experiment, "--offline")
    assert result.one_line_error("datasets[0].bytes", "5 bytes a file", "datasets[0].files"), result.err


def test_a_missing_dataset_path_names_its_flag(capsys, tmp_path):
    """The error read `PATH: ... does not exist`: `dslab dataset stats PATH`'s name, not the flag given."""
    for command in ("estimate", "recommend", "size"):
        result = run(capsys, command, "--dataset", tmp_path / "nowhere")
        assert result.one_line_error("--dataset:", "does not exist"), (command, result.err)
        assert "PATH" not in result.err


def test_estimate_with_an_experiment_and_a_workload_is_refused_in_one_line(capsys):
    """One of the two was silently dropped: a checkpointing workload's answer without the experiment, or the
    experiment's jobs without the workload."""
    experiment = REPO / "experiments" / "post-12-jobs.yaml"
    for workload in ("llama3_8b.yaml", "unet3d_a100.yaml"):
        path = REPO / "dslab" / "contracts" / "dlio" / workload
        result = run(capsys, "estimate", "--experiment", experiment, "--workload", path)
        assert result.one_line_error("--workload", "--experiment", "workload: PATH") and not result.out, result.err


def test_an_empty_experiment_file_is_refused_and_says_how_to_ask_for_the_default(capsys, tmp_path):
    for text in ("", "# only a comment\n\n"):
        path = tmp_path / "empty.yaml"
        path.write_text(text)
        for argv in (["plan", "--experiment", path, "--offline"],
                     ["local", "--experiment", path, "--out", tmp_path / "out", "--cache", tmp_path / "cache"]):
            result = run(capsys, *argv)
            assert result.one_line_error("--experiment", "empty", "{}"), result.err
    assert not (tmp_path / "out").exists() and not (tmp_path / "cache").exists()
    path.write_text("{}\n")   # the default, asked for
    result = run(capsys, "plan", "--experiment", path, "--offline", "--json")
    assert result.code == 0 and len(json.loads(result.out)["jobs"]) == 22


def test_a_job_past_sagemakers_28_day_limit_is_flagged_and_refused_when_nothing_fits(capsys):
    """CreateTrainingJob's StoppingCondition.MaxRuntimeInSeconds: "The maximum value is 28 days."."""
    from dslab.core.facts.limits import MAX_RUNTIME_SECONDS
    assert MAX_RUNTIME_SECONDS == 28 * 24 * 3600
    shape = ["--files", "1530350", "--bytes", "54GB"]
    fits = json.loads(run(capsys, "estimate", *shape, "--json").out)
    assert not fits["blocked"]
    some = run(capsys, "estimate", *shape, "--epochs", "400", "--json")
    answer = json.loads(some.out)
    flagged = {s["source"]: "28-day" in (s["blocker"] or "") for s in answer["sources"]}
    assert some.code == 0 and any(flagged.values()) and not all(flagged.values()), flagged
    for s in answer["sources"]:   # refused exactly when its range's top outlasts 28 days (one instance's clock)
        e = s["estimate"]
        point = e["downloading"] + e["training"] + e["other"]
        top = max(point, e["range"]["billable_seconds"][1] if e.get("range") else e["billable_seconds"])
        assert flagged[s["source"]] == (top > MAX_RUNTIME_SECONDS), s["source"]
    # Pipe's estimate (25.6 days) is under the limit, its range's top (38.5 days) is not: refused, never capped below it
    assert flagged["Pipe"] and "25.6 days (up to 38.5)" in next(s["blocker"] for s in answer["sources"]
                                                                   if s["source"] == "Pipe")
    assert answer["pick"] not in answer["blocked"]
    text = run(capsys, "estimate", *shape, "--epochs", "400")
    assert "28-day" in text.out and "MaxRuntimeInSeconds" in text.out and max(map(len, text.out.splitlines())) <= 160
    for argv in (["estimate", *shape, "--epochs", "1000"], ["recommend", *shape, "--epochs", "1000"],
                 ["size", *shape, "--instance", "ml.p3.2xlarge", "--epochs", "1000"]):
        result = run(capsys, *argv)
        assert result.one_line_error("28-day", "MaxRuntimeInSeconds", "--epochs"), (argv[0], result.err)


def test_an_experiment_whose_job_outlasts_28_days_is_refused_by_plan_run_recommend_and_export(capsys, tmp_path, monkeypatch):
    """plan and run checked no job's length: 900 epochs of the post's 1.5 M-file set on ml.p3.2xlarge (File ~49
    days) planned with exit 0. Now every command on an experiment refuses it, naming the experiment's key (not
    --epochs, which --experiment does not take), before a request is built or AWS is called; a job past the trial's
    own max_run_seconds (SageMaker would stop it) is said, and still planned."""
    import boto3
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(boto3, "client", lambda *a, **k: pytest.fail("dslab run called AWS"))
    experiment = tmp_path / "long.yaml"
    experiment.write_text("name: long\ndatasets: [{name: big-jpg, format: jpg, files: 1530350, bytes: 54000000000}]\n"
                          "modes: [File, FSx]\ninstance_type: ml.p3.2xlarge\nepochs: 900\n")
    for argv in (["plan", "--experiment", experiment, "--offline"], ["run", "--experiment", experiment],
                 ["recommend", "--experiment", experiment], ["export", "--experiment", experiment, "--offline"]):
        result = run(capsys, *argv)
        last = _Ran(result.code, result.out, result.err.strip().splitlines()[-1])   # export says which lab it read first
        assert last.one_line_error("epochs:", "28-day", "MaxRuntimeInSeconds", "fewer epochs:"), (argv[0], result.err)
        assert "--epochs" not in result.err and not list(tmp_path.glob("build")), argv[0]
    experiment.write_text(experiment.read_text().replace("epochs: 900", "epochs: 20"))
    from dslab.core.facts.limits import MAX_RUNTIME_SECONDS
    # Without max_run_seconds, each request's MaxRuntimeInSeconds comes from its job's estimate (its range's top with
    # a margin): the File job runs for days, past the 6 hours a fixed default gave it.
    planned = run(capsys, "plan", "--experiment", experiment, "--offline", "--json")
    assert planned.code == 0, planned.err
    runtimes = {j["mode"]: j["request"]["StoppingCondition"]["MaxRuntimeInSeconds"] for j in json.loads(planned.out)["jobs"]}
    assert runtimes["File"] > 21_600 and runtimes["File"] <= MAX_RUNTIME_SECONDS
    # A max_run_seconds shorter than the top of a job's estimate is refused, naming the figure it needs.
    short = tmp_path / "short.yaml"
    short.write_text(experiment.read_text() + "max_run_seconds: 21600\n")
    refused = run(capsys, "plan", "--experiment", short, "--offline")
    assert refused.one_line_error("max_run_seconds", "21,600 s is shorter than", "File job", "give at least")
    trials = tmp_path / "trials.yaml"   # a trial's own epochs are named by its place in trials:
    trials.write_text(experiment.read_text() + "trials:\n  - name: short\n    epochs: 1\n  - name: long\n    epochs: 900\n")
    assert run(capsys, "plan", "--experiment", trials, "--offline").one_line_error("trials[1].epochs", "trial long's")


def test_mode_suggests_the_closest_source_and_takes_the_labels_the_tool_prints(capsys):
    shape = ["--files", "30607", "--bytes", "1.1GB"]
    typo = run(capsys, "estimate", *shape, "--mode", "FastFil")
    assert typo.one_line_error("--mode", "did you mean FastFile")
    def rows(result) -> list[str]:   # the sources of the table, by their label
        lines = result.out.splitlines()
        header = next(i for i, line in enumerate(lines) if line.split()[:2] == ["#", "source"])
        shown = []
        for line in lines[header + 1:]:
            if line.startswith(("premise: ", "cost, time: ")) or not line.strip():   # the premise, or the legend
                break
            words = line.split()
            shown.append(" ".join(words[1:3]) if words[1] == "Express" else words[1])
        return shown
    express = run(capsys, "estimate", *shape, "--mode", "Express FastFile")
    assert express.code == 0 and rows(express) == ["Express FastFile"]
    # Every label `dslab estimate` prints is taken back by --mode; the answer stays the whole answer.
    whole = run(capsys, "estimate", *shape)
    for label in rows(whole):
        again = run(capsys, "estimate", *shape, "--mode", label)
        assert again.code == 0 and rows(again) == [label] and again.out.splitlines()[0] == whole.out.splitlines()[0]
    clash = run(capsys, "estimate", *shape, "--mode", "Express FastFile", "--storage", "standard")
    assert clash.one_line_error("--storage")


# ---- every shipped experiment plans, in text as in JSON ------------------------------------------

SHIPPED_EXPERIMENTS = sorted([*(REPO / "experiments").glob("*.yaml"), *(REPO / "examples").glob("*/experiment.yaml")])


@pytest.mark.parametrize("experiment", SHIPPED_EXPERIMENTS, ids=lambda p: str(p.relative_to(REPO)))
def test_every_shipped_experiment_plans_offline_in_text(capsys, experiment, tmp_path, monkeypatch):
    """`dslab plan --offline` (text) ended in KeyError 'InputDataConfig' on a Script job, which has no channel:
    experiments/local.yaml, the lab's own, among them. Each job's line says where it reads from."""
    monkeypatch.chdir(tmp_path)   # a user's code is packaged into build/ under the working directory
    ran = run(capsys, "plan", "--experiment", experiment, "--offline")
    assert ran.code == 0, ran.err
    lines = ran.out.splitlines()
    jobs = [line for line in lines if line.startswith("  dsl-")]
    # Each job in one line of at most 160 columns: the lab's buckets by their role, each named once below (issue 55).
    assert jobs and all(("bucket/" in line or " /" in line or "SKIPPED" in line) for line in jobs), ran.out
    assert max(map(len, lines)) <= 160, ran.out
    for role in ("data bucket", "directory bucket"):
        if any(f"{role}/" in line for line in jobs):
            assert any(line.startswith(f"{role}: s3://") for line in lines), ran.out
    if "Script" in ran.out:
        assert "(the script reads it)" in ran.out


def test_output_piped_into_a_reader_that_stops_early_ends_quietly(tmp_path):
    """`dslab size ... | head -1`: the reader closes the pipe (here before the first line); dslab ends with 0 and no BrokenPipeError traceback."""
    import subprocess
    import sys
    command = (f"{shlex.quote(sys.executable)} -m dslab.cli size --files 1530350 --bytes 54GB --instance ml.p4d.24xlarge "
               "--count 16 | true")   # the reader is gone before dslab writes its first line
    result = subprocess.run(["bash", "-o", "pipefail", "-c", command], capture_output=True, text=True, cwd=REPO,
                            timeout=120)
    assert result.returncode == 0 and "Traceback" not in result.stderr and "BrokenPipe" not in result.stderr, result.stderr


def test_a_prices_file_that_cannot_be_read_is_named_as_prices_and_small_datasets_are_said_in_mb(capsys, tmp_path):
    """A missing --prices file was reported as '--experiment: cannot read ...'; the flowchart said a 40 MB set was
    '0.0 GB'."""
    missing = tmp_path / "nowhere.yaml"
    for argv in (["recommend", "--files", "10", "--bytes", "1GB", "--prices", missing],
                 ["recommend", "--experiment", REPO / "experiments" / "local.yaml", "--prices", missing]):
        assert run(capsys, *argv).one_line_error("--prices: cannot read", str(missing))
    said = run(capsys, "recommend", "--files", "1000", "--bytes", "39.9MB", "--explain")
    assert said.code == 0 and "small dataset (39.9 MB < 75 GB)" in said.out and "0.0 GB" not in said.out


# ---- a table that explains its own order, in 160 columns (issue 55) ----------------------------------------------

TWO_TB = ["--files", "16666667", "--bytes", "2TB", "--instance", "ml.p4d.24xlarge", "--instance-count", "8",
          "--epochs", "10"]
C_ON_16 = ["--files", "1530350", "--bytes", "54GB", "--instance", "ml.p4d.24xlarge", "--instance-count", "16"]


def test_every_view_says_its_order_the_jobs_time_and_the_set_ups_share_within_160_columns(capsys):
    """The rank followed a "weighed" column nothing explained; only `size` showed the job's time; nothing said that
    8.3 h of FSx's 9.3 h is its import; recommend said "to a result" over one column and "to result" over the next."""
    for command in ("estimate", "recommend", "size"):
        for explain in ([], ["--explain"]):
            result = run(capsys, command, *TWO_TB, *explain)
            lines = result.out.splitlines()
            assert result.code == 0 and max(map(len, lines)) <= 160, (command, explain)
        # FSx's import: 16,666,667 objects at 2,000,000 an hour (the post's ~1 h per ~2 M) = 30,000 s = 8.3 h.
        assert lines[0].startswith("answer: FSx, ") and ", 8.3 h of it FSx's import" in lines[0], lines[0]
        header = next(line for line in lines if line.split()[:2] == ["#", "source"]).split()
        assert {"cost", "range", "time", "job"} <= set(header) and "result" not in header, header
        legend = next(line for line in lines if line.startswith("cost, time: to a result (job + set-up); rows by weighed"))
        assert "range's top with no measured cell" in legend and "/ 0.9 if it needs its own" in legend
    # recommend shows the column its rows are ordered by: each row's weighed cost at or above the one before.
    lines = run(capsys, "recommend", *TWO_TB).out.splitlines()
    rows = [line for line in lines if line.split() and line.split()[0].isdigit()]
    # A row's dollars: its cost, its range's two ends, its weighed cost (the fourth).
    weighed = [float(re.findall(r"\$([\d,]+\.\d\d)", row)[3].replace(",", "")) for row in rows]
    assert weighed == sorted(weighed) and len(weighed) == 10, weighed


def test_a_runner_up_cheaper_than_the_pick_is_said_why_in_the_first_line(capsys):
    """54 GB on 16 x p4d read "runner-up EFS, $43.27 (-$8.83)": cheaper than the pick, with no word of why."""
    first = run(capsys, "recommend", *C_ON_16).out.splitlines()[0]
    assert first.startswith("answer: FSx, ") and "; runner-up EFS, " in first and "(-$" in first, first
    assert "weighed higher" in first and len(first) <= 160, first
    # Where the runner-up costs more, nothing is added: the post's cell A, FSx then FastFile (+$0.058).
    first = run(capsys, "recommend", "--files", "30607", "--bytes", "1.1GB").out.splitlines()[0]
    assert "; runner-up FastFile, " in first and "(+$" in first and "weighed" not in first, first


def test_errors_plan_premises_and_explain_lines_fit_160_columns(capsys, tmp_path):
    """An unknown-instance error was one 790-character line; plan's premise 472-806; --explain lines up to 770."""
    for instance in ("ml.p5e.48xlarge", "ml.trn2.48xlarge", "ml.inf2.xlarge", "ml.p4d.24xlarg", "ml.g4dn.12xlarge"):
        for command in ("estimate", "size"):
            result = run(capsys, command, "--files", "10", "--bytes", "1GB", "--instance", instance)
            assert result.one_line_error("--") and len(result.err.strip()) <= 160, (command, instance, result.err)
    for experiment in ("post-12-jobs.yaml", "local.yaml", "calibrate.yaml"):
        ran = run(capsys, "plan", "--experiment", REPO / "experiments" / experiment, "--offline")
        assert ran.code == 0 and max(map(len, ran.out.splitlines())) <= 160, experiment
        assert ran.out.splitlines()[1].startswith("priced: each job as it runs on the lab as it stands: ")
    for argv in (["size", *C_ON_16, "--explain"],
                 ["recommend", "--workload", REPO / "dslab/contracts/dlio/llama3_70b.yaml", "--instance",
                  "ml.p5.48xlarge", "--instance-count", "8", "--explain"]):
        lines = run(capsys, *argv).out.splitlines()
        assert max(map(len, lines)) <= 160 and not any(line.endswith("…") for line in lines), argv[0]


def test_estimate_experiment_marks_what_plan_refuses_and_names_only_what_each_job_measures(capsys, tmp_path):
    """It priced FSx for 2 TB on the lab's 1,200 GiB Scratch 2, a job `plan` refuses, and said an EFS job measures
    "FSx's mount"; now each job is plan's, on the lab as it stands, the rule said (issue 55)."""
    path = tmp_path / "big.yaml"
    path.write_text("name: big\ndatasets: [{name: big-jpg, format: jpg, files: 16666667, bytes: 2TB}]\n"
                    "modes: [File, FastFile, FSx, EFS, Pipe]\ninstance_type: ml.p4d.24xlarge\ninstance_count: 8\n"
                    "epochs: 10\n")
    planned = run(capsys, "plan", "--experiment", path, "--offline")
    assert planned.one_line_error("FSx as the lab stands cannot run it")
    result = run(capsys, "estimate", "--experiment", path, "--outputs", REPO / "dslab/local/stand-in-outputs.json")
    lines = result.out.splitlines()
    assert result.code == 1 and max(map(len, lines)) <= 160, result.out
    fsx = next(line for line in lines if line.split()[2:3] == ["FSx"])
    assert "refused" in fsx and "$" not in fsx, fsx
    said = " ".join(line.strip() for line in lines if not line.split()[0] == "base")
    assert "refused: base big-jpg FSx: trial base's FSx job on big-jpg: FSx as the lab stands cannot run it" in said
    assert "4 of 5 jobs (1 refused)" in said and "priced: each job as it runs on the lab as it stands: " in said
    as_json = json.loads(run(capsys, "estimate", "--experiment", path, "--json").out)
    assert as_json["refused"] == 1 and [j["source"] for j in as_json["jobs"] if "refused" in j] == ["FSx"]
    # Measures: a job names only constants of its own source (or none of any source's, as S3's first byte).
    for line in run(capsys, "estimate", "--experiment", REPO / "experiments/all-modes-20-jobs.yaml").out.splitlines():
        words = line.split()
        if words[:1] == ["base"] and words[2] in ("EFS", "Pipe"):
            assert "FSx's" not in line and "FastFile's" not in line, line
