# DataSourceLab. `make lab` runs the lab offline; `make test` runs every check. Both set up first what they need:
# the lab its environment and FUSE (lab-setup); the tests also checkov's environment and Chromium (setup).
SHELL := /bin/bash
PY := .venv/bin/python
CDK := node_modules/.bin/cdk
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20
export JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION := 1

.PHONY: setup lab-setup lab test docs synth lint deploy deploy-again destroy doctor fsx-up fsx-down bench-reader bench-calibration bench-recovery bench-lab bench-scaling bench-docs bench-answer bench-mutation clean

setup: .venv/.installed .venv-scan/.installed node_modules/.installed
	@scripts/ensure-system-packages.sh test

# What the lab needs, and nothing more: its environment, the CDK CLI, s3fs and fuse3 (not checkov's .venv-scan,
# not Chromium: only `make test` uses them).
lab-setup: .venv/.installed node_modules/.installed
	@scripts/ensure-system-packages.sh lab

# Bytecode: every installed module is compiled once here, on every core, but aws-cdk-lib's bindings (176 MB of
# sources for ~300 services, of which the lab's stacks import a few dozen): those are compiled by importing the
# stacks once. Python then caches what else it imports by itself, also where the machine sets
# PYTHONDONTWRITEBYTECODE (these machines do): without a cache every process compiles what it imports again
# (aws-cdk-lib's bindings ~2.5 s of each synthesis, moto, numpy, checkov and the SageMaker SDK in every test
# process and training script); importing everything lazily instead cost a fresh `make test` ~2 min of CPU, its
# first processes compiling the same modules side by side. The caches stay in the environments and the project's
# __pycache__ folders (git-ignored; the lab's code packaging leaves them out).
unexport PYTHONDONTWRITEBYTECODE
COMPILE = $(1)/bin/python -m compileall -q -j 0 -x /site-packages/aws_cdk/ \
	$$($(1)/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])') > /dev/null || true   # a package's stray uncompilable file is its business

# uv (pinned) installs the pinned requirements: downloads side by side, wheels unpacked from its cache (~5 s for
# .venv where pip took ~30 s, ~2 s for .venv-scan where it took ~25 s). pip installs them where uv cannot run or
# where pip is configured with an index of its own, which uv would not read (the script says why).
INSTALL = scripts/install-requirements.sh $(1) $(2)

.venv/.installed: requirements.txt requirements-dev.txt pyproject.toml
	test -x $(PY) || python3 -m venv .venv
	$(call INSTALL,.venv,-r requirements-dev.txt -e .)
	$(call COMPILE,.venv)
	$(PY) -c 'import stacks.app_builder'
	touch $@

# checkov (tests/test_scanners.py) gets its own venv: it pins boto3==1.35.49, networkx<2.7 and
# packaging<24, which conflict with requirements.txt (boto3 1.44.5) and cfn-lint (networkx 3).
.venv-scan/.installed: requirements-scan.txt
	test -x .venv-scan/bin/python || python3 -m venv .venv-scan
	$(call INSTALL,.venv-scan,-r requirements-scan.txt)
	$(call COMPILE,.venv-scan)
	touch $@

node_modules/.installed: package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	touch $@

# The environments install side by side (make -j3).
SETUP = @$(MAKE) --no-print-directory -j3 setup
LAB_SETUP = @$(MAKE) --no-print-directory -j2 lab-setup

# The main job: the whole lab offline on the embedded AWS stand-in (experiments/local.yaml).
lab:
	$(LAB_SETUP)
	.venv/bin/dslab local --out lab-out

# Three pytest-xdist workers on two cores: with two, a fifth of the cores' time went idle while tests waited
# (emulated compute, the stand-in's polls); the third fills it (tests/conftest.py says who runs what).
test:
	$(SETUP)
	$(PY) -m pytest -q -n 3 --no-loadscope-reorder --durations=15

synth: setup
	$(CDK) synth --quiet --all

lint: synth
	.venv/bin/cfn-lint --config-file .cfnlintrc.yaml cdk.out/*.template.json

# Every deploy says what FSx (billed per hour) should be: FSX=up (create it, or keep it up),
# FSX=keep (leave it as it is, up or down) or FSX=down (remove it once the rest is deployed).
# Settings for this deploy on top of cdk.json's, e.g. CONTEXT="express=false" or CONTEXT="azId=use1-az6"
# (each word becomes -c key=value; every target that synthesizes takes them, so all see the same lab).
CDK_CONTEXT = $(foreach setting,$(CONTEXT),-c $(setting))
FSX_CHOICE = case "$(FSX)" in up|keep|down) ;; *) echo 'make $@: say what FSx should be: FSX=up (create or keep it; $$0.23/h for 1,200 GiB), FSX=keep (as it is now) or FSX=down (remove it)' >&2; exit 2;; esac
DEPLOY = $(CDK) deploy DataSourceLab -c fsx=$(if $(filter up,$(FSX)),up,keep) $(CDK_CONTEXT)
# FSX=down: the deploy just synthesized the lab (with these settings) into cdk.out, FSx stack included; destroying
# that stack from it spares a second synthesis (~10-15 s).
FSX_DOWN_AFTER = $(if $(filter down,$(FSX)),$(CDK) destroy --app cdk.out DataSourceLab-Fsx --exclusively --force)
# Before anything changes, `dslab deploy-check` compares the settings with the deployed lab and stops (exit 2, naming
# the way through) a deploy that FSx or EFS would refuse and CloudFormation roll back: FSx shrunk in place (FSX=down,
# then up) or grown again within 6 hours of its last increase (or while its storage optimization runs), EFS's
# throughput mode changed or lowered within 24 hours of its last change (it says after when).
# Moving the lab to another zone (azId) replaces its subnet: FSx, if up in the old zone, goes down first
# (`dslab fsx follow-zone`; FSX=up brings it back in the new zone).
deploy: setup
	@$(FSX_CHOICE)
	.venv/bin/dslab deploy-check deploy --fsx $(FSX) $(CDK_CONTEXT)
	.venv/bin/dslab fsx follow-zone $(CDK_CONTEXT)
	$(DEPLOY) --outputs-file cdk-outputs.json
	$(FSX_DOWN_AFTER)

# Asks before deleting (the CDK CLI's prompt); FORCE=yes skips it where no terminal is attached (scripts).
destroy: setup
	$(CDK) destroy --all $(if $(filter yes,$(FORCE)),--force) $(CDK_CONTEXT)

# Come back after `make destroy`: the kept data bucket (fixed name, datasets and results inside) is
# adopted by name instead of created again (-c adoptBucket=true); its kept TLS-only policy stays as is.
# Use it for every later deploy of this lab too (a plain `make deploy` would try to create the bucket).
deploy-again: setup
	@$(FSX_CHOICE)
	.venv/bin/dslab deploy-check deploy-again --fsx $(FSX) $(CDK_CONTEXT)
	.venv/bin/dslab fsx follow-zone $(CDK_CONTEXT)
	$(DEPLOY) -c adoptBucket=true --outputs-file cdk-outputs.json
	$(FSX_DOWN_AFTER)

# With your credentials: does the configured zone (azId) offer the experiment's instance types and FSx?
doctor: setup
	.venv/bin/dslab doctor $(if $(EXPERIMENT),--experiment $(EXPERIMENT),)

fsx-down: setup
	$(CDK) destroy DataSourceLab-Fsx --exclusively --force $(CDK_CONTEXT)

fsx-up: setup
	.venv/bin/dslab deploy-check fsx-up $(CDK_CONTEXT)
	$(CDK) deploy DataSourceLab-Fsx --exclusively --outputs-file cdk-outputs-fsx.json $(CDK_CONTEXT)

bench-reader: setup
	$(PY) -m benchmarks.bench_reader

# The estimate's calibration: out-of-sample error per scenario and source, coverage and width of its ranges.
bench-calibration: setup
	$(PY) -m benchmarks.bench_calibration

# Calibration from a user's own AWS runs, on runs generated from a truth the tool does not know (docs/estimate.md).
bench-recovery: setup
	$(PY) -m benchmarks.bench_recovery

# One answer by every path (tests/test_one_answer.py) for thousands of generated questions, drawn afresh each run
# (make test runs the same 200 every time): what it finds is kept there as an @example.
bench-answer: setup
	HYPOTHESIS_PROFILE=bench $(PY) -m pytest -q -p no:cacheprovider tests/test_one_answer.py

# Mutation testing (benchmarks/mutation.py; mutmut, installed on first use) of two groups, each with its own tests:
# the code that holds the reactions to AWS's errors (GROUP=reactions) and the code that gives the answer
# (GROUP=answer): killed / survived / timed out per module, the survivors' diffs in benchmarks/mutation-survivors.txt
# and mutation-survivors-answer.txt. MODULES=... for some modules, AGAIN=1 for the last run's survivors only,
# SAMPLE=N for N mutants of each module drawn at random (a first measure of a large module; the table says so).
# Not part of make test (tens of minutes a group).
bench-mutation: setup
	$(PY) -m benchmarks.mutation $(if $(AGAIN),--again) $(if $(SAMPLE),--sample $(SAMPLE)) $(if $(GROUP),--group $(GROUP)) $(MODULES)

# The local lab's own speed (benchmarks/bench_lab.py): a first run from an empty cache, then RUNS cached runs of
# EXPERIMENT (default experiments/smoke.yaml), each one's wall and CPU seconds and its split, with min/median/max.
bench-lab:
	$(LAB_SETUP)
	$(PY) -m benchmarks.bench_lab $(if $(EXPERIMENT),--experiment $(EXPERIMENT)) $(if $(RUNS),--runs $(RUNS))

# The local scaling curve: FastFile, FSx, EFS and Script on 1, 2 and 4 instances at once (scaling-out/report.md).
bench-scaling:
	$(LAB_SETUP)
	.venv/bin/dslab local --experiment experiments/scaling.yaml --out scaling-out --plain

# The documentation site (mkdocs.yml) into build/site/, after what is generated: the CLI reference, the model's
# constants, the results record and the pages' estimated tables from the code, and the README's picture, the first
# screen of a lab report in headless Chromium (lab-out's when `make lab` has run, otherwise the lab report kept in
# tests/data).
docs: setup
	$(PY) scripts/cli_reference.py
	$(PY) scripts/model_constants.py
	$(PY) scripts/record_reference.py
	$(PY) scripts/answer_reference.py
	$(PY) -m dslab.core.facts.aws_fields --write
	$(PY) scripts/estimate_tables.py
	$(PY) scripts/report_picture.py
	NO_MKDOCS_2_WARNING=1 .venv/bin/mkdocs build --strict

# The README's and the pages' size, the docs build's time and the report's in headless Chromium (docs/setup.md).
bench-docs: setup
	$(PY) -m benchmarks.bench_docs

clean:
	rm -rf cdk.out build lab-out scaling-out .pytest_cache .lab-cache mutants bench-out
