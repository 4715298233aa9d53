#!/usr/bin/env bash
# Debian packages the project needs, installed when missing and this machine can (root with apt-get); otherwise says
# how. scripts/ensure-system-packages.sh [lab|test]:
# - lab (`make lab`): s3fs-fuse mounts the local lab's S3 for FastFile and FSx jobs; fuse3 provides fusermount;
# - test (`make test`, the default): those, and Chromium, which opens a lab report in a real browser
#   (tests/test_report_page.py, driven by the pinned playwright-core; `make docs` takes the README's picture with it).
set -u
want=${1:-test}
missing=()
if ! command -v s3fs >/dev/null 2>&1 || ! { command -v fusermount3 >/dev/null 2>&1 || command -v fusermount >/dev/null 2>&1; }; then
  missing+=(s3fs fuse3)
fi
if [ "$want" = test ] && [ ! -x /usr/bin/chromium ]; then
  missing+=(chromium)
fi
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  echo "installing ${missing[*]} (the local lab's FUSE mounts; the browser that opens the report) ..."
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null 2>&1 \
    || { apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null; } \
    || echo "warning: could not install ${missing[*]}: the local lab's FastFile and FSx jobs fail without s3fs, and the report's browser test is skipped without chromium"
else
  echo "warning: ${missing[*]} missing; install them (sudo apt-get install ${missing[*]}): the local lab's FastFile and FSx jobs need s3fs, the report's browser test chromium"
fi
exit 0
