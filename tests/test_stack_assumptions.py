"""The model reads the stack it prices: every figure an answer assumes about the deployed lab (dslab/core/stack_check.py
lists them) equals what the synthesized templates ask CloudFormation for, in every context combination the lab offers.

The combinations: each stack reads its own context keys (FSx: fsxDeploymentType, fsxThroughputPerTiB, fsxCapacity,
fsxLink; Core: efsPerformance, efsThroughput, efsProvisionedMibps, express, disposableBucket, adoptBucket, region and
azId; the workflow: fsxIdleHours, fsx), so every choice of every stack's keys is synthesized at least once: the 18 FSx
choices (Scratch 2 at 1,200, 2,400 and 4,800 GiB, each link; Persistent 2's four tiers at each capacity), the 30 Core
choices (the five EFS modes CloudFormation accepts x express on/off x a kept, disposable or adopted bucket, in two
Regions) and four idle guards (8 h, off, 1.5 h, the most), dealt together into 30 syntheses (about a second each,
without cdk-nag: test_infrastructure.py checks the nagged synthesis)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dslab.core.errors import ConfigError
from dslab.core.stack_check import Assumption, mismatches, refuse_unpriced, stack_assumptions

from .conftest import REPO, cdk_context
from .test_cloudformation_standin import cfn  # noqa: F401 - the stand-in's fixture

STACKS = ("DataSourceLab-Core", "DataSourceLab-Fsx", "DataSourceLab")

FSX = ([{"fsxDeploymentType": "SCRATCH_2", "fsxThroughputPerTiB": None, "fsxCapacity": c, "fsxLink": link}
        for c in (1200, 2400, 4800) for link in ("dra", "import-path")]
       + [{"fsxDeploymentType": "PERSISTENT_2", "fsxThroughputPerTiB": tier, "fsxCapacity": c, "fsxLink": "dra"}
          for tier in (125, 250, 500, 1000) for c in (1200, 2400, 4800)])
EFS = [{"efsPerformance": "maxIO", "efsThroughput": "bursting", "efsProvisionedMibps": None},
       {"efsPerformance": "maxIO", "efsThroughput": "provisioned", "efsProvisionedMibps": 256},
       {"efsPerformance": "generalPurpose", "efsThroughput": "bursting", "efsProvisionedMibps": None},
       {"efsPerformance": "generalPurpose", "efsThroughput": "provisioned", "efsProvisionedMibps": 3414},
       {"efsPerformance": "generalPurpose", "efsThroughput": "elastic", "efsProvisionedMibps": None}]
BUCKETS = [{"disposableBucket": False, "adoptBucket": False}, {"disposableBucket": True, "adoptBucket": False},
           {"disposableBucket": False, "adoptBucket": True}]
EXPRESS = [{"express": "auto"}, {"express": "false"}]
CORE = [{**efs, **bucket, **express} for efs in EFS for bucket in BUCKETS for express in EXPRESS]
REGIONS = [{"region": "us-east-1", "azId": "use1-az4"}, {"region": "eu-west-1", "azId": "euw1-az1"}]
WORKFLOW = [{"fsxIdleHours": 8, "fsx": "keep"}, {"fsxIdleHours": 0, "fsx": "up"}, {"fsxIdleHours": 1.5, "fsx": "keep"},
            {"fsxIdleHours": 336, "fsx": "up"}]
COMBINATIONS = [{**CORE[i], **FSX[i % len(FSX)], **WORKFLOW[i % len(WORKFLOW)], **REGIONS[i % len(REGIONS)]}
                for i in range(max(len(CORE), len(FSX)))]

# Every pair the check makes, by name: written out, so that a pair that stops being checked fails here.
PREFIXES = ("datasets/", "code/", "output/", "results/", "checkpoints/")
DATA_PAIRS = (["data bucket versioned", "data bucket multipart abort days"]
              + [f"data bucket {p} {what} days" for p in PREFIXES for what in ("expiry", "noncurrent")])
EXPRESS_PAIRS = ["directory bucket versioned", "directory bucket checkpoints/ expiry days",
                 "directory bucket datasets/ expiry days", "directory bucket multipart abort days",
                 "directory bucket lets S3 Lifecycle act"]
LAB_PAIRS = ["FSx deployment type", "FSx capacity GiB", "FSx throughput per TiB (Persistent 2's tier)",
             "EFS throughput mode", "EFS provisioned MiB/s", "EFS performance mode", "the lab's Region (EFS's limits)",
             "idle guard hours"]
GUARD_PAIRS = ["idle guard schedule minutes"]
ALL_PAIRS = DATA_PAIRS + EXPRESS_PAIRS + LAB_PAIRS + GUARD_PAIRS


def synthesize(outdir: Path, **context) -> dict[str, dict]:
    """The three templates of one context combination, as `cdk synth` writes them."""
    import aws_cdk as cdk

    from stacks.app_builder import build_app
    app = build_app(cdk.App(context=cdk_context(**context), outdir=str(outdir)), REPO, nag=False)
    app.synth()
    return {name: json.loads((outdir / f"{name}.template.json").read_text()) for name in STACKS}


def express_on(templates: dict[str, dict]) -> bool:
    return any(r["Type"] == "AWS::S3Express::DirectoryBucket"
               for r in templates["DataSourceLab-Core"]["Resources"].values())


def applies(pair: str, combination: dict, templates: dict[str, dict]) -> bool:
    """Whether the check must make ``pair`` for this combination (worked out from the context, not the check)."""
    if pair in DATA_PAIRS:
        return not combination["adoptBucket"]          # an adopted bucket is not in the template
    if pair in EXPRESS_PAIRS:
        return express_on(templates)
    if pair in GUARD_PAIRS:
        return combination["fsxIdleHours"] > 0         # 0: no guard rule at all
    return True


@pytest.fixture(scope="module")
def synthesized(tmp_path_factory) -> list[tuple[dict, dict[str, dict], list[Assumption]]]:
    out = []
    for i, combination in enumerate(COMBINATIONS):
        templates = synthesize(tmp_path_factory.mktemp(f"cdk.out-{i}"), **combination)
        settings = cdk_context(**combination)
        found = stack_assumptions(*(templates[name] for name in STACKS), settings.get)
        out.append((combination, templates, found))
    return out


def test_the_combinations_take_every_choice_of_every_key():
    """Not a tautology: the combinations above are dealt by index, and an edit that drops a choice fails here."""
    seen: dict[str, set] = {}
    for combination in COMBINATIONS:
        for key, value in combination.items():
            seen.setdefault(key, set()).add(json.dumps(value))
    for group in (FSX, CORE, WORKFLOW, REGIONS):
        for choice in group:
            assert any(choice.items() <= c.items() for c in COMBINATIONS), choice
    assert seen["fsxThroughputPerTiB"] == {"null", "125", "250", "500", "1000"}
    assert seen["efsThroughput"] == {'"bursting"', '"provisioned"', '"elastic"'}
    assert len(COMBINATIONS) == 30


@pytest.mark.parametrize("pair", ALL_PAIRS)
def test_the_models_figure_is_the_templates_in_every_combination(synthesized, pair):
    for combination, templates, found in synthesized:
        named = [a for a in found if a.name == pair]
        assert len(named) == (1 if applies(pair, combination, templates) else 0), (pair, combination)
        for assumption in named:
            assert assumption.holds, f"{assumption.line()} with {combination}"


def test_the_check_makes_no_pair_it_does_not_name(synthesized):
    for combination, _, found in synthesized:
        assert {a.name for a in found} <= set(ALL_PAIRS), combination
        assert mismatches(found) == [], combination


def test_the_figures_read_back_are_the_combinations_own(synthesized):
    """The pairs compare the model with the template; here both are held to the context itself, worked out by hand,
    so that a model and a stack that drifted together (both ignoring a key) fail too."""
    for combination, _, found in synthesized:
        got = {a.name: a.template for a in found}
        assert got["FSx deployment type"] == combination["fsxDeploymentType"]
        assert got["FSx capacity GiB"] == combination["fsxCapacity"]
        assert got["FSx throughput per TiB (Persistent 2's tier)"] == combination["fsxThroughputPerTiB"]
        assert got["EFS throughput mode"] == combination["efsThroughput"]
        assert got["EFS performance mode"] == combination["efsPerformance"]
        provisioned = combination["efsProvisionedMibps"]
        assert got["EFS provisioned MiB/s"] == (None if provisioned is None else float(provisioned))
        assert got["the lab's Region (EFS's limits)"] == combination["region"]
        assert got["idle guard hours"] == float(combination["fsxIdleHours"])
        if not combination["adoptBucket"]:
            # The checkpoint estimate prices 1 day (1.5 on average) of a deleted checkpoint's noncurrent version.
            assert got["data bucket checkpoints/ noncurrent days"] == 1
            assert got["data bucket datasets/ noncurrent days"] == 7


def test_the_cli_reads_the_stack_outputs_as_the_resources_are(synthesized):
    """`dslab estimate`, `recommend` and `size` price the deployed lab from its stack outputs (cli/common.py
    lab_provisioning): each combination's literal outputs give the FSx, EFS and idle guard its resources have."""
    from dslab.cli.common import lab_provisioning
    for combination, templates, found in synthesized:
        outputs = {key: out["Value"] for name in STACKS for key, out in (templates[name].get("Outputs") or {}).items()
                   if isinstance(out.get("Value"), str)}
        lab = lab_provisioning(outputs=outputs)
        got = {a.name: a.template for a in found}
        assert (lab.fsx.deployment_type, lab.fsx.capacity_gib) == (got["FSx deployment type"], got["FSx capacity GiB"])
        tier = got["FSx throughput per TiB (Persistent 2's tier)"]
        assert lab.fsx.mbps_per_tib == (200.0 if tier is None else float(tier)), combination   # Scratch 2: 200 MB/s/TiB
        assert (lab.efs.mode, lab.efs.provisioned_mibps, lab.efs.performance_mode) == (
            got["EFS throughput mode"], got["EFS provisioned MiB/s"], got["EFS performance mode"]), combination
        assert lab.fsx_idle_hours == got["idle guard hours"], combination


# ---- a rule changed in the stack is caught --------------------------------------------------------------------

@pytest.mark.parametrize("module, constant, value, expected", [
    # The defect issue 54 found: the stack imported the one-day rule and never used it, so checkpoints/ kept the
    # bucket-wide week while the answers priced a day.
    ("stacks.components.data_bucket", "CHECKPOINT_NONCURRENT_DAYS", 7,
     "data bucket checkpoints/ noncurrent days: the model takes 1, the template has 7"),
    ("stacks.components.express_bucket", "EXPRESS_CHECKPOINT_EXPIRY_DAYS", 3,
     "directory bucket checkpoints/ expiry days: the model takes 7, the template has 3"),
])
def test_a_rule_changed_in_the_stack_alone_fails_the_check(tmp_path, monkeypatch, module, constant, value, expected):
    import importlib
    monkeypatch.setattr(importlib.import_module(module), constant, value)
    templates = synthesize(tmp_path)
    found = mismatches(stack_assumptions(*(templates[name] for name in STACKS), cdk_context().get))
    assert [line.split(" (")[0] for line in found] == [expected]


def test_the_idle_guard_in_the_stack_changes_the_answer(synthesized):
    """The answer's FSx advice says what FSx left standing bills until the lab's idle guard deletes it: the guard's
    hours come from the settings the stack's rule was built from, and a different guard changes the answer."""
    from dslab.core.answer.recommend import recommend
    from dslab.core.facts.compute import compute_rate
    from dslab.core.facts.prices import PriceTable
    from dslab.core.model.provisioning import lab_from_settings
    from dslab.core.shape import DatasetShape
    advice = {}
    for combination, _, found in synthesized:
        hours = next(a.template for a in found if a.name == "idle guard hours")
        if hours in advice or combination["fsxDeploymentType"] != "SCRATCH_2" or combination["fsxCapacity"] != 1200:
            continue
        lab = lab_from_settings(cdk_context(**combination).get, "cdk.json")
        # The source post's scenario C (1.53 M files, 54 GB) is FSx's: it fits the 1,200 GiB file system.
        rec = recommend(DatasetShape(files=1_530_350, bytes=54_000_000_000), rate=compute_rate("v100")[0],
                        prices=PriceTable(), epochs=1, lab=lab)
        assert rec.decision.pick.source == "FSx"
        assert rec.pick.estimate.provisioning.fsx.capacity_gib == 1200
        advice[hours] = next(line for line in rec.advice if line.startswith("FSx bills while it stands"))
    # Scratch 2 at 1,200 GiB: $0.140 per GB-month x 1,200 / 730 h = $0.2301/h. 8 h: $1.84; 8.5 h (one 30-minute look
    # more): $1.96. 1.5 h: $0.35; 2 h: $0.46. Off: $0.23 an hour, without end.
    assert advice[8.0].endswith("deletes it 8 to 8.5 h after the last run (fsxIdleHours=8, checked every 30 min): "
                                "$1.84 to $1.96 more")
    assert advice[1.5].endswith("deletes it 1.5 to 2 h after the last run (fsxIdleHours=1.5, checked every 30 min): "
                                "$0.35 to $0.46 more")
    assert advice[0.0].endswith("the lab's idle guard is off (fsxIdleHours=0): left standing, FSx bills $0.23 an hour")


# ---- a context the model cannot price is refused before deploy ------------------------------------------------

def test_a_setting_the_price_table_cannot_price_is_refused_naming_its_key(monkeypatch):
    """Every setting the stack accepts is priced today; where they part (here a Persistent 2 tier whose price row the
    table lacks), `dslab deploy-check` refuses the deploy, naming the key, before anything is read or deployed."""
    from dslab.cli.deploy_check import check
    from dslab.core.facts import prices
    table = {k: v for k, v in prices.DEFAULT_TABLE.items() if k != "fsx_persistent2_1000_gb_month"}
    monkeypatch.setattr(prices, "DEFAULT_TABLE", table)
    words = ["fsxDeploymentType=PERSISTENT_2", "fsxThroughputPerTiB=1000", "fsxCapacity=2400"]
    with pytest.raises(ConfigError) as err:
        check("deploy", "up", words, cfn=object())   # refused before CloudFormation is asked anything
    assert err.value.field == "fsxThroughputPerTiB"
    assert str(err.value).startswith("fsxThroughputPerTiB: the model cannot price P2-1000 2,400 GiB: the price table of "
                                     "2026-11-01 has no fsx_persistent2_1000_gb_month row")
    assert refuse_unpriced(cdk_context(**dict(w.split("=") for w in words)).get, prices.PriceTable(
        {**prices.DEFAULT_TABLE, "fsx_persistent2_1000_gb_month": 0.6})).fsx.mbps_per_tib == 1000.0


def test_every_setting_the_stack_accepts_is_priced():
    for combination in COMBINATIONS:
        lab = refuse_unpriced(cdk_context(**combination).get)
        assert lab.fsx.deployment_type == combination["fsxDeploymentType"]


# ---- the stand-in's CloudFormation deploys the rules as synthesized --------------------------------------------

S3_TYPES = ("AWS::S3::Bucket", "AWS::S3::BucketPolicy", "AWS::S3Express::DirectoryBucket", "AWS::S3Express::BucketPolicy")


def test_the_stand_in_deploys_the_synthesized_bucket_rules_and_the_lifecycle_policy(synthesized, cfn):  # noqa: F811
    """The Core template's buckets, their policies and the directory bucket's lifecycle policy, as synthesized, through
    the stand-in's CloudFormation: S3 then holds the rules the model prices (GetBucketLifecycleConfiguration), the
    directory bucket its checkpoint expiry and the policy that lets S3 Lifecycle act on it."""
    from moto.s3.models import s3_backends

    from .test_cloudformation_standin import deploy
    cfn, client = cfn
    combination, templates, _ = synthesized[0]
    assert combination["express"] == "auto" and not combination["adoptBucket"] and combination["region"] == "us-east-1"
    core = templates["DataSourceLab-Core"]
    body = {"Resources": {lid: r for lid, r in core["Resources"].items() if r["Type"] in S3_TYPES},
            "Outputs": {"Express": {"Value": {"Ref": next(lid for lid, r in core["Resources"].items()
                                                          if r["Type"] == "AWS::S3Express::DirectoryBucket")}}}}
    stack = deploy(cfn, "Buckets", json.dumps(body))
    assert stack["StackStatus"] == "CREATE_COMPLETE", stack
    rules = client("s3").get_bucket_lifecycle_configuration(Bucket="datasourcelab-data-123456789012-us-east-1")["Rules"]
    assert len(rules) == 4
    checkpoints = next(r for r in rules if r["Filter"].get("Prefix") == "checkpoints/")
    assert checkpoints["Expiration"] == {"Days": 7} and checkpoints["NoncurrentVersionExpiration"]["NoncurrentDays"] == 1
    everything = next(r for r in rules if r["Filter"].get("Prefix") == "" and "NoncurrentVersionExpiration" in r)
    assert everything["NoncurrentVersionExpiration"]["NoncurrentDays"] == 7
    assert everything["AbortIncompleteMultipartUpload"] == {"DaysAfterInitiation": 2}
    name = stack["Outputs"][0]["OutputValue"]
    bucket = s3_backends["123456789012"]["global"].get_bucket(name)
    by_id = {rule.id: rule for rule in bucket.rules}
    assert by_id["ExpireLeftCheckpoints"].filter.prefix == "checkpoints/"
    assert int(by_id["ExpireLeftCheckpoints"].expiration_days) == 7
    assert int(by_id["AbortIncompleteMultipartUploads"].aimu_days) == 1
    statement, = json.loads(bucket.policy)["Statement"]
    assert statement["Principal"] == {"Service": "lifecycle.s3.amazonaws.com"}
    assert statement["Condition"] == {"StringEquals": {"s3express:SessionMode": "ReadWrite"}}


def test_the_stand_in_refuses_what_a_directory_bucket_cannot_have(cfn):  # noqa: F811
    """AWS::S3Express::DirectoryBucket's rules have no noncurrent action (no versioning) and need an expiry or an abort
    (aws-properties-s3express-directorybucket-rule.html): CloudFormation's schema refuses the rest, and so does the
    stand-in, before the bucket is made."""
    from .test_cloudformation_standin import deploy, reasons
    cfn, _ = cfn

    def bucket(rule: dict) -> str:
        return json.dumps({"Resources": {"D": {"Type": "AWS::S3Express::DirectoryBucket", "Properties": {
            "LocationName": "use1-az4", "DataRedundancy": "SingleAvailabilityZone",
            "LifecycleConfiguration": {"Rules": [rule]}}}}})
    noncurrent = deploy(cfn, "Versions", bucket({"Status": "Enabled", "Prefix": "checkpoints/",
                                                 "NoncurrentVersionExpiration": {"NoncurrentDays": 1}}))
    assert noncurrent["StackStatus"] == "ROLLBACK_COMPLETE"
    assert "extraneous key [NoncurrentVersionExpiration] is not permitted" in reasons(cfn, "Versions")
    idle = deploy(cfn, "Idle", bucket({"Status": "Enabled", "Prefix": "checkpoints/"}))
    assert idle["StackStatus"] == "ROLLBACK_COMPLETE"
    assert "[AbortIncompleteMultipartUpload or ExpirationInDays] not found" in reasons(cfn, "Idle")


def test_the_docs_and_dslab_prices_say_the_figures_the_stack_is_built_from():
    """docs/checkpoints.md and `dslab prices` say the lifecycle the pairs above hold the templates to."""
    from dslab.cli.prices import VERSIONS_SAID
    from dslab.core.facts.storage import (CHECKPOINT_EXPIRY_DAYS, CHECKPOINT_NONCURRENT_DAYS,
                                          EXPRESS_CHECKPOINT_EXPIRY_DAYS)
    # The page's words for the figures: 7 days is "a week", 1 day "a day", 1 + 0.5 (midnight rounding) "1.5 days".
    assert (CHECKPOINT_EXPIRY_DAYS, EXPRESS_CHECKPOINT_EXPIRY_DAYS, CHECKPOINT_NONCURRENT_DAYS) == (7, 7, 1)
    page = " ".join((REPO / "docs" / "checkpoints.md").read_text().split())
    assert "expire after a week in the data bucket and in the directory bucket" in page
    assert "stays a noncurrent version for a day more" in page and "(1.5 days on average" in page
    assert "a version expires 1 day after the sync deletes it (1.5 days on average" in VERSIONS_SAID
    assert "expire after 7 days in the data bucket and 7 in the directory bucket" in VERSIONS_SAID
