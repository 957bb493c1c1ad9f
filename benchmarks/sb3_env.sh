#!/usr/bin/env bash
# Builds .venv-sb3: Stable-Baselines3 in its own virtualenv, for benchmarks/classic_vs_sb3.py only.
# SB3 is never a dependency of ascent; ascent's .venv does not see this one.
#   bash benchmarks/sb3_env.sh            # creates .venv-sb3 beside .venv (idempotent)
#   SB3_VENV=/tmp/sb3 bash benchmarks/sb3_env.sh
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${SB3_VENV:-.venv-sb3}"
PY="${PY:-python3}"
STAMP="$VENV/.sb3-installed"
if [ -f "$STAMP" ]; then
  echo "$VENV ready ($(cat "$STAMP"))"
  exit 0
fi
test -x "$VENV/bin/python" || "$PY" -m venv "$VENV"
PIP="$VENV/bin/python -m pip"
$PIP install -q --upgrade pip
# The same torch as ascent's .venv (the CPU wheel), so the comparison measures the libraries, not torch builds.
$PIP install -q torch==2.13.0
$PIP install -q stable-baselines3 "gymnasium[mujoco]>=1.0"
"$VENV/bin/python" - <<'PY' | tee "$STAMP"
import gymnasium, mujoco, stable_baselines3, torch
print(f"torch {torch.__version__}, stable-baselines3 {stable_baselines3.__version__}, "
      f"gymnasium {gymnasium.__version__}, mujoco {mujoco.__version__}")
PY
