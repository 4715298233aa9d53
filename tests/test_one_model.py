"""One performance and cost model: `estimate`, `recommend` and `size` give the same figures for the same
cluster and premise (issue: `size` and `recommend` priced 16 x ml.p4d.24xlarge differently, with V100
compute on an A100 instance, another FSx and another File download, and neither said so)."""

from __future__ import annotations

import json

import pytest

from dslab.cli import main
from dslab.core.estimate import DatasetShape, estimate_mode
from dslab.core.prices import PriceTable
from dslab.core.provisioning import Provisioning
from dslab.core.sizing import size

C = ["--files", "1530350", "--bytes", "54GB"]     # the source post's scenario C: 1.5 M JPEGs, 54 GB
A100 = 400 / 0.435


def run_json(capsys, *args) -> dict:
    assert main(list(args)) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("count", [1, 4, 16])
def test_estimate_recommend_and_size_price_the_same_cluster_alike(capsys, count):
    common = [*C, "--instance", "ml.p4d.24xlarge"]
    estimated = run_json(capsys, "estimate", *common, "--instance-count", str(count), "--json")["estimates"]
    recommended = run_json(capsys, "recommend", *common, "--instance-count", str(count), "--json")
    sized = run_json(capsys, "size", *common, "--count", str(count), "--json")
    # The compute comes from the instance's accelerator everywhere: A100 on ml.p4d.
    assert "A100" in estimated[0]["assumptions"][0]
    assert sized["samples_per_second_per_accelerator"] == pytest.approx(A100, abs=0.1)
    by_estimate = {(e.get("source") or e["mode"]): e for e in estimated}
    by_rank = {r["source"]: r for r in recommended["ranking"]}
    by_size = {s["source"]: s for s in sized["sources"]}
    assert set(by_size) <= set(by_rank) == set(by_estimate)
    for source, row in by_size.items():
        # The lab as deployed: what recommend ranks and estimate prints, per run (set-up included).
        assert row["as_deployed"]["usd_per_run"] == pytest.approx(by_rank[source]["cost_to_result_usd"], abs=0.006), source
        assert by_rank[source]["cost_to_result_usd"] == pytest.approx(by_estimate[source]["cost_to_result_usd"], abs=1e-3), source
        assert by_rank[source]["job_seconds"] * count == pytest.approx(by_estimate[source]["billable_seconds"], rel=1e-3), source
        assert row["as_deployed"]["au_percent"] == pytest.approx(by_estimate[source]["au_percent"], abs=0.06), source


def test_what_size_provisions_is_the_estimate_of_that_provisioning():
    """A sized row is estimate_mode on the provisioning it prints: nothing is modelled twice."""
    shape, prices = DatasetShape(files=1_530_350, bytes=54_000_000_000), PriceTable()
    result = size(shape, instance_type="ml.p4d.24xlarge", count=16, rate=A100, prices=prices)
    fsx = next(s for s in result.sources if s.source == "FSx")
    kind, rest = fsx.provision.split(",", 1)
    capacity = int(rest.split("GiB")[0].replace(",", "").strip())
    from dslab.core.provisioning import FsxConfig
    config = (FsxConfig(capacity_gib=capacity) if kind == "SCRATCH_2" else
              FsxConfig.persistent2(int(kind.split()[1]), capacity))
    again = estimate_mode("FSx", shape, instance_type="ml.p4d.24xlarge", instance_count=16, rate=A100, prices=prices,
                          provisioning=Provisioning(fsx=config, s3_prefixes=None))
    assert again.au_percent == pytest.approx(fsx.au_percent)
    assert again.wall_seconds / 3600 == pytest.approx(fsx.hours_per_run)


def test_recommend_names_both_premises_for_a_cluster(capsys):
    assert main(["recommend", *C, "--instance", "ml.p4d.24xlarge", "--instance-count", "16"]) == 0
    out = capsys.readouterr().out
    line = next(l for l in out.splitlines() if "as the lab is deployed" in l)
    assert "provisioned for 16:" in line and "AU" in line and "per run" in line


def test_an_experiment_without_compute_emulates_its_instances_accelerator():
    """The compute preset comes from the instance everywhere: an experiment on ml.p4d that names no compute
    emulates A100s (and its recommend/report answers price A100s), one on a CPU instance a V100."""
    from dslab.core.answers import compute_rate_of
    from dslab.core.experiment import parse_experiment
    base = {"name": "x", "datasets": [{"name": "d", "format": "jpg", "files": 10, "bytes": 1000}], "modes": ["File"]}
    p4d = parse_experiment({**base, "instance_type": "ml.p4d.24xlarge"}).trials[0]
    assert p4d.compute.preset == "a100" and compute_rate_of(p4d) == pytest.approx(A100)
    assert parse_experiment({**base, "instance_type": "ml.m5.xlarge"}).trials[0].compute.preset == "v100"
    assert parse_experiment({**base, "instance_type": "ml.p4d.24xlarge", "compute": "v100"}).trials[0].compute.preset == "v100"


def _outputs_file(tmp_path, settings: dict) -> str:
    """A `make deploy` outputs file for a lab deployed with these context settings (the stacks' outputs name them:
    tests/test_fsx_deployment_types.py synthesizes them)."""
    from dslab.cli.common import LAB_OUTPUT_SETTINGS
    output_of = {key: name for name, key in LAB_OUTPUT_SETTINGS.items()}
    fsx = {output_of[k]: str(v) for k, v in settings.items() if k.startswith("fsx")}
    core = {output_of[k]: str(v) for k, v in settings.items() if k in output_of and k.startswith("efs")}
    path = tmp_path / "cdk-outputs.json"
    path.write_text(json.dumps({"DataSourceLab-Fsx": fsx, "DataSourceLab-Core": core}))
    return str(path)


@pytest.mark.parametrize("count", [4, 16])
def test_the_lab_size_provisions_once_deployed_is_the_lab_every_command_prices(capsys, tmp_path, count):
    """`dslab size` prints the deploy command for FSx and EFS; once deployed (its outputs), `size --as-deployed`,
    `estimate` and `recommend` price that lab, say so, and give what `size` promised for it."""
    common = [*C, "--instance", "ml.p4d.24xlarge"]
    sized = {s["source"]: s for s in run_json(capsys, "size", *common, "--count", str(count), "--json")["sources"]}
    settings = {}
    for source in ("FSx", "EFS"):
        (command,) = sized[source]["commands"]
        assert command.startswith(f"make deploy FSX={'up' if source == 'FSx' else 'keep'} CONTEXT=\""), command
        settings.update(pair.split("=", 1) for pair in command.split('CONTEXT="')[1].rstrip('"').split())
    outputs = _outputs_file(tmp_path, settings)
    deployed = run_json(capsys, "size", *common, "--count", str(count), "--outputs", outputs, "--as-deployed", "--json")
    assert deployed["premise"] == "the lab as deployed" and "stack outputs" in deployed["lab"]["name"]
    by_deployed = {s["source"]: s for s in deployed["sources"]}
    estimated = {(e.get("source") or e["mode"]): e for e in run_json(
        capsys, "estimate", *common, "--instance-count", str(count), "--outputs", outputs, "--json")["estimates"]}
    recommended = run_json(capsys, "recommend", *common, "--instance-count", str(count), "--outputs", outputs, "--json")
    ranked = {r["source"]: r for r in recommended["ranking"]}
    assert recommended["lab"]["fsx_config"] == deployed["lab"]["fsx_config"]
    for source in ("FSx", "EFS"):
        # The lab as deployed is what size provisioned: the same AU and dollars, and nothing left to provision.
        assert by_deployed[source]["au_percent"] == pytest.approx(sized[source]["au_percent"], abs=0.06), source
        assert by_deployed[source]["usd_per_run"] == pytest.approx(sized[source]["usd_per_run"], abs=0.006), source
        assert by_deployed[source]["commands"] == []
        assert by_deployed[source]["usd_per_run"] == pytest.approx(ranked[source]["cost_to_result_usd"], abs=0.006), source
        assert estimated[source]["au_percent"] == pytest.approx(by_deployed[source]["au_percent"], abs=0.06), source
    if count == 16:
        assert deployed["lab"]["fsx_config"] == {"deployment_type": "PERSISTENT_2", "capacity_gib": 14400,
                                                 "mbps_per_tib": 1000.0, "throughput_mbps": 14062.5}
        assert deployed["lab"]["efs_config"]["mode"] == "elastic"


def test_estimate_and_recommend_say_which_lab_they_price(capsys, tmp_path):
    """Without outputs, the lab as cdk.json builds it; with them, as deployed; FSx down (no FSx outputs): as
    cdk.json would bring it up. Each answer names its premise."""
    for command in ("estimate", "recommend"):
        assert main([command, *C]) == 0
        assert "priced on the lab as deployed (cdk.json's context): FSx Scratch 2, 1,200 GiB" in capsys.readouterr().out
    outputs = _outputs_file(tmp_path, {"fsxDeploymentType": "PERSISTENT_2", "fsxThroughputPerTiB": 250, "fsxCapacity": 2400,
                                       "efsThroughput": "provisioned", "efsProvisionedMibps": 128})
    assert main(["recommend", *C, "--outputs", outputs]) == 0
    out = capsys.readouterr().out
    assert f"the stack outputs in {outputs}" in out and "Persistent 2 250 MB/s/TiB, 2,400 GiB" in out
    assert "EFS Provisioned 128 MiB/s" in out
    down = _outputs_file(tmp_path, {"efsThroughput": "bursting"})
    assert main(["estimate", *C, "--outputs", down]) == 0
    assert "FSx is down: as cdk.json would bring it up" in capsys.readouterr().out
    # A deployed lab the FSx API would refuse cannot be read as one: the field is named, exit 2.
    bad = _outputs_file(tmp_path, {"fsxDeploymentType": "PERSISTENT_2", "fsxThroughputPerTiB": 300, "fsxCapacity": 2400})
    assert main(["size", *C, "--outputs", bad]) == 2
    assert "fsxThroughputPerTiB" in capsys.readouterr().err
