#!/usr/bin/env bash
# The local lab emulates FastFile and FSx with s3fs-fuse (Debian packages s3fs, fuse3).
# Installs them when missing and this machine can (root with apt-get); otherwise says how.
set -u
if command -v s3fs >/dev/null 2>&1 && { command -v fusermount3 >/dev/null 2>&1 || command -v fusermount >/dev/null 2>&1; }; then
  exit 0
fi
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  echo "installing s3fs and fuse3 (FUSE mounts for the local lab's FastFile and FSx) ..."
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -qq --no-install-recommends s3fs fuse3 >/dev/null 2>&1 \
    || { apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq --no-install-recommends s3fs fuse3 >/dev/null; } \
    || echo "warning: could not install s3fs/fuse3; the local lab's FastFile and FSx jobs will fail until they are installed"
else
  echo "warning: s3fs-fuse is missing; install it (sudo apt-get install s3fs fuse3) for the local lab's FastFile and FSx jobs"
fi
exit 0
