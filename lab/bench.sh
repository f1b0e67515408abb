#!/usr/bin/env bash
# benchmarks/run.py on this project's rented GPU host: provision it from what the checkout carries
# (gpu-env.sh: .whl/ and .carry/, no package index there; the plugin from the checkout, so pytest
# is told its plugins), then run the driver with these arguments. On any other GPU host, install
# the package and run benchmarks/run.py directly.
#
#   lab/bench.sh --routine cold warm --matrix sm90 -k "sm90-bf16-" --name NAME [-- PYTEST_ARGS]
set -uo pipefail
. "$(dirname "$0")/gpu-env.sh"
export PYTEST_ADDOPTS="${PYTEST_ADDOPTS:-} ${plugins[*]}"
exec python3 benchmarks/run.py --out "${OUT:-$PWD/gpu-out}" "$@"
