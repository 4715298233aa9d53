#!/usr/bin/env bash
# Installs pinned requirements into a virtual environment: scripts/install-requirements.sh VENV PIP-ARGS...
#
# uv (pinned, installed into the environment by pip) installs them in seconds where pip takes ~30 s, but it
# does not read pip's configuration. So:
# - where pip is told to take packages from somewhere else than PyPI (an `index-url` or `no-index` in its
#   configuration files or PIP_* variables: a company mirror), pip installs them, honouring all of it;
# - otherwise uv does, with pip's configured constraint files (extra indexes and find-links only add
#   places to look; every requirement is pinned and on PyPI);
# - and where uv cannot run or fails, pip does.
set -euo pipefail
if [[ $# -lt 2 || ! -x ${1}/bin/python ]]; then
    echo "usage: $0 VENV PIP-ARGS... (VENV: a virtual environment, made first with python3 -m venv VENV)" >&2
    exit 2
fi
venv=$1; shift
python=$venv/bin/python
pip() { "$python" -m pip install -q --no-compile --disable-pip-version-check "$@"; }

config=$("$python" -m pip config list 2>/dev/null || true)
# Keys read `global.index-url='…'` or `:env:.no-index='1'`; `extra-index-url` does not match.
if grep -qE '^[^=]*\.(index-url|no-index)=' <<<"$config"; then
    echo "install-requirements: pip is configured with an index of its own; pip installs ($venv)" >&2
    pip "$@"
    exit
fi

constraints=()
while IFS= read -r value; do
    for file in $value; do constraints+=(-c "$file"); done
done < <(sed -nE "s/^[^=]*\.constraint='(.*)'$/\1/p" <<<"$config")
if pip uv==0.13.9 && "$venv/bin/uv" pip install -q --python "$python" "${constraints[@]}" "$@"; then
    exit 0
fi
echo "install-requirements: uv could not install; pip installs ($venv)" >&2
pip "$@"
