# DataSourceLab. `make lab` runs the lab offline; `make test` runs every check. Both set up first.
SHELL := /bin/bash
PY := .venv/bin/python
CDK := node_modules/.bin/cdk
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20
export JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION := 1

.PHONY: setup lab test synth lint deploy destroy fsx-up fsx-down fsx-status bench-reader clean

setup: .venv/.installed node_modules/.installed

.venv/.installed: requirements.txt requirements-dev.txt pyproject.toml
	test -x $(PY) || python3 -m venv .venv
	$(PY) -m pip install -q --disable-pip-version-check -r requirements-dev.txt
	$(PY) -m pip install -q --disable-pip-version-check --no-deps -e .
	touch $@

node_modules/.installed: package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	touch $@

# Until the embedded local lab lands, `make lab` synthesizes and validates every stack.
lab: lint
	@echo "make lab: synthesized DataSourceLab-Core, DataSourceLab-Fsx and DataSourceLab into cdk.out/;"
	@echo "  cdk-nag AwsSolutions: no unacknowledged findings (synthesis fails otherwise);"
	@echo "  cfn-lint: no errors or warnings (see .cfnlintrc.yaml for the two CDK-inherent ones ignored)."

test: setup
	$(PY) -m pytest -q

synth: setup
	$(CDK) synth --quiet --all

lint: synth
	.venv/bin/cfn-lint --config-file .cfnlintrc.yaml cdk.out/*.template.json

deploy: setup
	$(CDK) deploy DataSourceLab --outputs-file cdk-outputs.json

destroy: setup
	$(CDK) destroy --all

fsx-down: setup
	$(CDK) destroy DataSourceLab-Fsx --exclusively --force

fsx-up: setup
	$(CDK) deploy DataSourceLab-Fsx --exclusively --outputs-file cdk-outputs-fsx.json

bench-reader: setup
	$(PY) -m benchmarks.bench_reader

clean:
	rm -rf cdk.out build lab-out .pytest_cache
