#!/usr/bin/env bash
# d3rlpy for benchmarks/offline_vs_d3rlpy.py, installed once into .venv-d3rlpy-site (never a dependency of ascent).
# d3rlpy 2.8.1 pins gymnasium==1.0.0 while ascent's classic extra has gymnasium>=1.0 (1.4 here), so it cannot be an
# extra of ascent without moving everyone's gymnasium; it is installed without its dependencies into a folder of its
# own, with the few it needs that ascent's environment lacks, and put on PYTHONPATH for the d3rlpy runs only
# (d3rlpy then runs on the project's torch and gymnasium; the benchmark passes it arrays and steps the environments
# itself, so no gymnasium API of 1.0 vs 1.4 is involved).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
$PY -m pip install -q --target .venv-d3rlpy-site --no-deps d3rlpy==2.8.1 structlog dataclasses-json marshmallow \
  typing-inspect mypy-extensions gym==0.26.2 gym-notices colorama scikit-learn joblib threadpoolctl
PYTHONPATH=.venv-d3rlpy-site $PY -c "import d3rlpy; print('d3rlpy', d3rlpy.__version__, 'in .venv-d3rlpy-site')"
