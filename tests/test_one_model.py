"""One performance and cost model: `estimate`, `recommend` and `size` give the same figures for the same
cluster and premise (issue: `size` and `recommend` priced 16 x ml.p4d.24xlarge differently, with V100
compute on an A100 instance, another FSx and another File download, and neither said so)."""

from __future__ import annotations

import json
import re
import os
from pathlib import Path

import pytest

from dslab.cli import main
from dslab.core.errors import ConfigError
from dslab.core.shape import DatasetShape
from dslab.core.model.estimate import estimate_mode
from dslab.core.facts.prices import PriceTable
from dslab.core.model.provisioning import Provisioning
from dslab.core.answer.sizing import size

C = ["--files", "1530350", "--bytes", "54GB"]     # the source post's scenario C: 1.5 M JPEGs, 54 GB
A100 = 400 / 0.435


def run_json(capsys, *args) -> dict:
    assert main(list(args)) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("count", [1, 4, 16])
def test_estimate_recommend_and_size_price_the_same_cluster_alike(capsys, count):
    common = [*C, "--instance", "ml.p4d.24xlarge"]
    estimated = run_json(capsys, "estimate", *common, "--instance-count", str(count), "--json")
    recommended = run_json(capsys, "recommend", *common, "--instance-count", str(count), "--json")
    sized = run_json(capsys, "size", *common, "--count", str(count), "--json")
    # One answer: estimate, recommend and size are views of the same object.
    assert estimated == recommended == sized
    # The compute comes from the instance's accelerator everywhere: A100 on ml.p4d.
    premise = sized["question"]["premise"]
    assert "A100" in premise["compute"] and premise["samples_per_second_per_accelerator"] == pytest.approx(A100, abs=0.1)
    for row in (s for s in sized["sources"] if not s["blocker"]):
        # Each row's figures are its estimate's: the job's seconds on one instance's clock, its AU.
        e = row["estimate"]
        assert row["job_seconds"] * count == pytest.approx(e["billable_seconds"], rel=1e-3), row["source"]
        assert row["au_percent"] == pytest.approx(e["au_percent"], abs=0.06), row["source"]


@pytest.mark.parametrize("count", [1, 4, 16])
def test_recommend_experiment_the_reports_aws_answer_and_export_price_that_cluster_as_recommend_does(
        capsys, tmp_path, monkeypatch, count):
    """The same cluster in an experiment file: `recommend --experiment`, the report's estimated AWS answer and
    `dslab export` give the figures `recommend --files --bytes --instance-count` gives, to the cent, per source."""
    from dslab.inputs.experiment_file import load_experiment
    from dslab.report import Answers, aggregate

    from .test_answer import _synthetic_results
    monkeypatch.chdir(tmp_path)   # no cdk-outputs.json here: every command prices the lab as cdk.json deploys it
    path = tmp_path / "c.yaml"
    path.write_text("name: c\ndatasets: [{name: post-c, format: jpg, files: 1530350, bytes: 54000000000}]\n"
                    f"modes: [File, FastFile, FSx, EFS]\ninstance_type: ml.p4d.24xlarge\ninstance_count: {count}\n")
    flags = {r["source"]: r for r in run_json(capsys, "recommend", *C, "--instance", "ml.p4d.24xlarge",
                                               "--instance-count", str(count), "--json")["sources"]}
    (answer,) = run_json(capsys, "recommend", "--experiment", str(path), "--json")["answers"]
    answer = answer["answer"]
    experiment = load_experiment(path)
    (reported,) = Answers(_synthetic_results(experiment), aggregate(_synthetic_results(experiment)["records"])).estimated
    from_file = {r["source"]: r for r in answer["sources"]}
    from_report = {o.source: o for o in reported.decision.ranking}
    assert set(from_file) == set(from_report) == {"File", "FastFile", "FSx", "EFS"}
    for source, row in from_file.items():
        assert row["cost_to_result_usd"] == pytest.approx(flags[source]["cost_to_result_usd"], abs=1e-4), source
        assert row["job_seconds"] == pytest.approx(flags[source]["job_seconds"], rel=1e-6), source
        assert from_report[source].cost_usd == pytest.approx(row["cost_to_result_usd"], abs=1e-4), source
    assert reported.decision.pick.source == answer["pick"]
    # export exports what plan runs: the pick as it runs on the lab as it stands; where the lab differs from what the
    # answer provisions, the code says so and names the command (issue 55: it was refused while plan ran it).
    code = main(["export", "--experiment", str(path), "--offline", "--out", str(tmp_path / "job.py")])
    capsys.readouterr()
    pick = from_file[answer["pick"]]
    exported = (tmp_path / "job.py").read_text()
    assert code == 0 and f"dslab:mode', value='{answer['mode']}'" in exported
    if pick["as_deployed"]["differs"] and pick["commands"]:
        assert "# runs on the lab as it stands" in exported and pick["commands"][0] in exported
        runtime = pick["as_deployed"]["max_runtime_seconds"]
        assert f"max_runtime_in_seconds={runtime})" in exported   # priced and limited as it runs


def test_what_size_provisions_is_the_estimate_of_that_provisioning():
    """A sized row is estimate_mode on the provisioning it prints: nothing is modelled twice."""
    shape, prices = DatasetShape(files=1_530_350, bytes=54_000_000_000), PriceTable()
    result = size(shape, instance_type="ml.p4d.24xlarge", count=16, rate=A100, prices=prices)
    fsx = next(s for s in result.sources if s.source == "FSx")
    kind, rest = fsx.provision.split(",", 1)
    capacity = int(rest.split("GiB")[0].replace(",", "").strip())
    from dslab.core.model.provisioning import FsxConfig
    config = (FsxConfig(capacity_gib=capacity) if kind == "SCRATCH_2" else
              FsxConfig.persistent2(int(kind.split()[1]), capacity))
    again = estimate_mode("FSx", shape, instance_type="ml.p4d.24xlarge", instance_count=16, rate=A100, prices=prices,
                          provisioning=Provisioning(fsx=config, s3_prefixes=None))
    assert again.au_percent == pytest.approx(fsx.au_percent)
    assert again.wall_seconds / 3600 == pytest.approx(fsx.hours_per_run)


def test_recommend_names_both_premises_for_a_cluster(capsys):
    assert main(["recommend", *C, "--instance", "ml.p4d.24xlarge", "--instance-count", "16"]) == 0
    out = capsys.readouterr().out.splitlines()
    # Each row as provisioned for 16; where the lab as it stands differs, the row is marked and --explain says how.
    marked = [line for line in out if line.endswith(" *")]
    assert marked and any(line.split()[1] == "FSx" for line in marked)
    assert main(["recommend", *C, "--instance", "ml.p4d.24xlarge", "--instance-count", "16", "--explain"]) == 0
    explained = capsys.readouterr().out
    assert "FSx: PERSISTENT_2 1000 MB/s/TiB, 14,400 GiB" in explained and "as deployed: $" in explained
    assert any(line.startswith("  at 16 x ml.p4d.24xlarge, ") and "as priced: AU" in line for line in explained.splitlines())


def test_an_experiment_without_compute_emulates_its_instances_accelerator_or_is_refused():
    """The compute preset comes from the instance everywhere: an experiment on ml.p4d that names no compute
    emulates A100s (and its recommend/report answers price A100s); one on an instance with no accelerator, or one no
    preset emulates, is refused naming `compute`, as estimate/recommend/size refuse it without --compute-rate (it
    used to emulate a V100 and price it as that instance's)."""
    from dslab.core.answer.scenarios import compute_rate_of
    from dslab.core.experiment import parse_experiment
    base = {"name": "x", "datasets": [{"name": "d", "format": "jpg", "files": 10, "bytes": 1000}], "modes": ["File"]}
    p4d = parse_experiment({**base, "instance_type": "ml.p4d.24xlarge"}).trials[0]
    assert p4d.compute.preset == "a100" and compute_rate_of(p4d) == pytest.approx(A100)
    for instance, has in (("ml.m5.xlarge", "no accelerator"), ("ml.g4dn.xlarge", "T4"), ("ml.trn1.32xlarge", "Trainium")):
        with pytest.raises(ConfigError, match=rf"compute: {instance}: .*{has}") as refused:
            parse_experiment({**base, "instance_type": instance})
        assert "a preset (allowed: v100, a100" in str(refused.value) and "seconds_per_batch" in str(refused.value)
        from dslab.cli import one_line
        assert len(one_line(refused.value)) <= 160, one_line(refused.value)   # one line a terminal shows whole
    # A10G, L4 and L40S have presets from published training throughput (premise.py), said as not MLPerf's own.
    g5 = parse_experiment({**base, "instance_type": "ml.g5.xlarge"}).trials[0]
    assert g5.compute.preset == "a10g" and compute_rate_of(g5) == pytest.approx(241.3, abs=0.1)
    stated = parse_experiment({**base, "instance_type": "ml.m5.xlarge", "compute": {"batch_size": 8, "seconds_per_batch": 0.1}})
    assert stated.trials[0].compute.seconds_per_batch == 0.1
    assert parse_experiment({**base, "instance_type": "ml.p4d.24xlarge", "compute": "v100"}).trials[0].compute.preset == "v100"


STAND_IN_OUTPUTS = Path(__file__).resolve().parents[1] / "dslab" / "local" / "stand-in-outputs.json"


def cdk_outputs(settings: dict, *, fsx_stack: bool = True) -> dict:
    """What `cdk deploy --outputs-file` writes ({stack: {output: value}}, as the CDK CLI wrote it for the stand-in's
    account, dslab/local/stand-in-outputs.json) for a lab deployed with these context settings (the stacks' outputs
    name them: tests/test_fsx_deployment_types.py synthesizes them). ``fsx_stack`` False: `make deploy FSX=keep`
    (cdk deploy DataSourceLab -c fsx=keep: the workflow does not depend on FSx, so the FSx stack is not deployed
    and not written)."""
    from dslab.cli.common import LAB_OUTPUT_SETTINGS
    written = json.loads(STAND_IN_OUTPUTS.read_text())
    output_of = {key: name for name, key in LAB_OUTPUT_SETTINGS.items()}
    written["DataSourceLab-Fsx"].update({output_of[k]: str(v) for k, v in settings.items() if k.startswith("fsx")})
    written["DataSourceLab-Core"].update({output_of[k]: str(v) for k, v in settings.items() if k in output_of
                                          and k.startswith("efs")})
    if "efsPerformance" in settings:
        written["DataSourceLab-Core"]["EfsPerformanceMode"] = settings["efsPerformance"]
    if not fsx_stack:
        del written["DataSourceLab-Fsx"]
    return written


def _outputs_file(tmp_path, settings: dict, name: str = "cdk-outputs.json", **kwargs) -> str:
    path = tmp_path / name
    path.write_text(json.dumps(cdk_outputs(settings, **kwargs), indent=2))
    return str(path)


@pytest.mark.parametrize("count", [4, 16])
def test_the_lab_size_provisions_once_deployed_is_the_lab_every_command_prices(capsys, tmp_path, monkeypatch, count):
    """`dslab size` prints the deploy command for FSx and EFS; once deployed (its outputs), `size --as-deployed`,
    `estimate` and `recommend` price that lab, say so, and give what `size` promised for it."""
    monkeypatch.chdir(tmp_path)   # no cdk-outputs.json here: the lab as cdk.json would deploy it
    common = [*C, "--instance", "ml.p4d.24xlarge"]
    sized = {s["source"]: s for s in run_json(capsys, "size", *common, "--count", str(count), "--json")["sources"]}
    settings = {}
    for source in ("FSx", "EFS"):
        (command,) = sized[source]["commands"]
        assert command.startswith(f"make deploy FSX={'up' if source == 'FSx' else 'keep'} CONTEXT=\""), command
        settings.update(pair.split("=", 1) for pair in command.split('CONTEXT="')[1].rstrip('"').split())
    outputs = _outputs_file(tmp_path, settings, "deployed.json")
    deployed = run_json(capsys, "size", *common, "--count", str(count), "--outputs", outputs, "--json")
    assert deployed["lab"]["name"] == f"the lab as deployed ({outputs})"
    assert run_json(capsys, "estimate", *common, "--instance-count", str(count), "--outputs", outputs, "--json") == \
        run_json(capsys, "recommend", *common, "--instance-count", str(count), "--outputs", outputs, "--json") == deployed
    by_deployed = {s["source"]: s for s in deployed["sources"]}
    for source in ("FSx", "EFS"):
        # The lab as deployed is what size provisioned: the same AU and dollars, nothing left to provision, and the
        # lab as it stands no longer differs.
        row = by_deployed[source]
        assert row["au_percent"] == pytest.approx(sized[source]["au_percent"], abs=0.06), source
        assert row["cost_to_result_usd"] == pytest.approx(sized[source]["cost_to_result_usd"], abs=0.006), source
        assert row["commands"] == [] and row["unchanged"] == "as deployed: nothing to change"
        assert row["as_deployed"]["differs"] is None
        assert row["as_deployed"]["cost_to_result_usd"] == pytest.approx(row["cost_to_result_usd"], abs=0.006), source
    if count == 16:
        assert deployed["lab"]["fsx_config"] == {"deployment_type": "PERSISTENT_2", "capacity_gib": 14400,
                                                 "mbps_per_tib": 1000.0, "throughput_mbps": 14062.5}
        assert deployed["lab"]["efs_config"]["mode"] == "provisioned"


def unwrapped(out: str) -> str:
    """--explain's lines as one text: its sentences wrap at 160 columns, each further line two spaces in (issue 55)."""
    return re.sub(r"\n {2,}", " ", out)


def test_estimate_and_recommend_say_which_lab_they_price(capsys, tmp_path, monkeypatch):
    """Without outputs, the lab as cdk.json would deploy it; with them, as deployed. Each answer names its premise."""
    monkeypatch.chdir(tmp_path)
    for command in ("estimate", "recommend"):
        assert main([command, *C]) == 0
        assert "where the lab cdk.json deploys" in unwrapped(capsys.readouterr().out)
        assert main([command, *C, "--explain"]) == 0
        assert "priced on the lab as cdk.json would deploy it: FSx Scratch 2, 1,200 GiB" in unwrapped(capsys.readouterr().out)
    outputs = _outputs_file(tmp_path, {"fsxDeploymentType": "PERSISTENT_2", "fsxThroughputPerTiB": 250, "fsxCapacity": 2400,
                                       "efsThroughput": "provisioned", "efsProvisionedMibps": 128}, "lab.json")
    assert main(["recommend", *C, "--outputs", outputs, "--explain"]) == 0
    out = unwrapped(capsys.readouterr().out)
    assert f"priced on the lab as deployed ({outputs}): FSx Persistent 2 250 MB/s/TiB, 2,400 GiB" in out
    assert "EFS Provisioned 128 MiB/s" in out
    # A deployed lab the FSx API would refuse cannot be read as one: the field is named, exit 2.
    bad = _outputs_file(tmp_path, {"fsxDeploymentType": "PERSISTENT_2", "fsxThroughputPerTiB": 300, "fsxCapacity": 2400},
                        "bad.json")
    assert main(["size", *C, "--outputs", bad]) == 2
    assert "fsxThroughputPerTiB" in capsys.readouterr().err


P2_16 = {"fsxDeploymentType": "PERSISTENT_2", "fsxThroughputPerTiB": 1000, "fsxCapacity": 14400,
         "efsThroughput": "provisioned", "efsProvisionedMibps": 1499}   # what size provisions for 16 (README)


def test_the_cdk_outputs_json_make_deploy_wrote_here_is_the_lab_priced(capsys, tmp_path, monkeypatch):
    """`make deploy` writes cdk-outputs.json in the project folder: size, estimate and recommend run there without
    --outputs price that lab and name the file; size --json says where FSx and EFS came from."""
    monkeypatch.chdir(tmp_path)
    _outputs_file(tmp_path, P2_16)
    said = "the lab as deployed (cdk-outputs.json): FSx Persistent 2 1000 MB/s/TiB, 14,400 GiB (14,062 MB/s); EFS Provisioned 1,499 MiB/s, in us-east-1"
    for argv in (["estimate", *C], ["recommend", *C], ["size", *C, "--as-deployed"]):
        assert main([*argv, "--explain"]) == 0
        assert f"priced on {said}" in unwrapped(capsys.readouterr().out), argv
    assert main(["size", *C, "--count", "16"]) == 0
    assert "where the lab as deployed (cdk-outputs.json)" in unwrapped(capsys.readouterr().out)
    lab = run_json(capsys, "size", *C, "--count", "16", "--json")["lab"]
    assert (lab["fsx_source"], lab["efs_source"]) == ("cdk-outputs.json", "cdk-outputs.json")
    # The deploy settings beyond cdk.json's, which a later deploy must repeat to keep the lab as it stands.
    assert lab["keep_settings"] == {"fsxDeploymentType": "PERSISTENT_2", "fsxCapacity": "14400",
                                    "fsxThroughputPerTiB": "1000", "efsThroughput": "provisioned",
                                    "efsProvisionedMibps": "1499"}
    # --outputs names another file: that one, not the one here.
    other = _outputs_file(tmp_path, {"efsThroughput": "bursting"}, "other.json")
    assert main(["estimate", *C, "--outputs", other, "--explain"]) == 0
    assert f"priced on the lab as deployed ({other}): FSx Scratch 2, 1,200 GiB" in unwrapped(capsys.readouterr().out)


def test_outputs_without_the_fsx_stack_leave_fsx_unknown_never_down(capsys, tmp_path, monkeypatch):
    """`make deploy FSX=keep` deploys the workflow and Core only: its cdk-outputs.json has no FSx stack, whether FSx
    is up or down. FSx is then unknown from the file (priced as cdk.json would deploy it, or as the
    cdk-outputs-fsx.json of `make fsx-up` says), never said to be down; EFS is as the file says."""
    from dslab.cli.common import lab_provisioning
    monkeypatch.chdir(tmp_path)
    main_file = Path(_outputs_file(tmp_path, {"efsThroughput": "elastic", "efsPerformance": "generalPurpose"},
                                   fsx_stack=False))
    assert "DataSourceLab-Fsx" not in json.loads(main_file.read_text())
    assert main(["estimate", *C, "--explain"]) == 0
    out = unwrapped(capsys.readouterr().out)
    assert ("priced on the lab as deployed (cdk-outputs.json; FSx unknown from it, no FSx stack in it: as cdk.json "
            "would deploy it): FSx Scratch 2, 1,200 GiB (234 MB/s); EFS Elastic (General Purpose)") in out
    assert "down" not in out.split("priced on")[1].split("\n")[0]
    lab = run_json(capsys, "size", *C, "--json")["lab"]
    assert (lab["fsx_source"], lab["efs_source"]) == ("cdk.json", "cdk-outputs.json")
    # `make fsx-up` wrote cdk-outputs-fsx.json ({"DataSourceLab-Fsx": {...}}): FSx as it says.
    fsx_only = {"DataSourceLab-Fsx": cdk_outputs({"fsxDeploymentType": "PERSISTENT_2", "fsxThroughputPerTiB": 250,
                                                   "fsxCapacity": 2400})["DataSourceLab-Fsx"]}
    fsx_file = tmp_path / "cdk-outputs-fsx.json"
    fsx_file.write_text(json.dumps(fsx_only, indent=2))
    assert main(["recommend", *C, "--explain"]) == 0
    assert ("priced on the lab as deployed (cdk-outputs.json; FSx as cdk-outputs-fsx.json says (`make fsx-up`)): "
            "FSx Persistent 2 250 MB/s/TiB, 2,400 GiB") in unwrapped(capsys.readouterr().out)
    # Both files name FSx: the newer says how it stands (a deploy with FSX=up after fsx-up rewrites cdk-outputs.json).
    _outputs_file(tmp_path, P2_16)
    os.utime(fsx_file, (1_000_000, 1_000_000))
    assert main(["estimate", *C, "--explain"]) == 0
    assert "priced on the lab as deployed (cdk-outputs.json): FSx Persistent 2 1000 MB/s/TiB" in unwrapped(capsys.readouterr().out)
    os.utime(main_file, (900_000, 900_000))
    assert main(["estimate", *C, "--explain"]) == 0
    assert "FSx as cdk-outputs-fsx.json says" in unwrapped(capsys.readouterr().out)
    # CloudFormation (what `dslab fsx status` reads) is another matter: no FSx stack there is FSx down.
    flat = {k: v for stack in cdk_outputs({}, fsx_stack=False).values() for k, v in stack.items()}
    assert "FSx is down, no FSx stack" in lab_provisioning(outputs=flat, where="CloudFormation").name
    assert "down" not in lab_provisioning(outputs=flat, where="saved.json").name
