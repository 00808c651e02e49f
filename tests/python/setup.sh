#!/bin/sh
# Installs what the Python tests need into the python3 on PATH, the interpreter ctest runs them with: the
# packages in requirements.txt and the tpserve client from this checkout (client/python, rebuilt each time so
# the tests see the current code and schemas). Idempotent.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
pip="python3 -m pip install -q --disable-pip-version-check --root-user-action=ignore"
$pip -r "$here/requirements.txt"
$pip "$here/../../client/python"
