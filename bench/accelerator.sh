#!/usr/bin/env bash
# The GPU run (python -m bench.accelerator; its --help explains the stages and options), from
# the repository root on the GPU machine: installs the wheels of .device_wheels/ (made here
# by `python -m bench.device_wheels`, carried there) offline into a folder of their own, puts it
# and the working tree on PYTHONPATH, and runs the module. Arguments pass through, e.g.
#   bash bench/accelerator.sh --out results/bench/gpu
set -euo pipefail
cd "$(dirname "$0")/.."
site="${TMPDIR:-/tmp}/jaxenc-device-site"
shopt -s nullglob
wheels=(.device_wheels/*.whl)
if ((${#wheels[@]})); then
  echo "[accelerator.sh] installing ${#wheels[@]} wheels of .device_wheels into $site (offline)"
  python3 -m pip install -q --no-index --find-links .device_wheels --no-deps --no-compile \
    --upgrade --target "$site" "${wheels[@]}"
  export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
else
  echo "[accelerator.sh] no wheels in .device_wheels: using this environment's packages"
fi
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
exec python3 -m bench.accelerator "$@"
