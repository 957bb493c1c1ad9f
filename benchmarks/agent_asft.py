"""GUI-Libra's action-aware SFT (Yang et al. 2026, arXiv:2602.22190) against plain SFT on a small synthetic
reason-then-act task: does up-weighting the action tokens (`warmstart.action_weight`) make a model that imitates
rationales act correctly sooner?

Each demonstration answers a prompt `key: abc ` with a rationale of `--reason` random filler words (no information)
and then `<answer>abc</answer>` (the key copied). A from-scratch Qwen2 (hidden 64, 2 layers, character tokenizer)
imitates the demonstrations for `--steps` AdamW steps; both arms share the initialisation, the data order and the
learning rate. Held-out accuracy: the share of unseen keys whose greedy completion holds the right `<answer>`.

    python benchmarks/agent_asft.py --seeds 5

Prints one JSON line per seed and arm, then the paired difference (action-aware - plain) with its 95% t-interval.
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import statistics
import string
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import ci95, load, print_machine  # noqa: E402

WORDS = ["we", "look", "at", "the", "key", "then", "think", "about", "it", "so", "now", "next", "step", "and"]


def demo(key: str, rng: random.Random, reason: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(reason)) + f" <answer>{key}</answer>"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--reason", type=int, default=8, help="filler words before the answer")
    ap.add_argument("--weight", type=float, default=4.0, help="action_weight of the action-aware arm")
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--eval", type=int, default=100)
    args = ap.parse_args()
    torch.set_num_threads(1)

    from transformers import Qwen2Config, Qwen2ForCausalLM

    from ascent.policy.model import Policy
    from ascent.policy.tokenizer import char_tokenizer
    from ascent.rollout import make_engine
    from ascent.rollout.types import SamplingSettings
    from ascent.trainer.action_aware import action_weights
    from ascent.trainer.sft import forced_batch, nll_loss

    print_machine()
    tok = char_tokenizer(string.ascii_lowercase + " <>/:")
    eos = tok.eos_token_id
    keys = ["".join(p) for p in itertools.product("abcdefgh", repeat=3)]
    rows: dict[str, list[dict]] = {"plain": [], "action_aware": []}
    for seed in range(args.seeds):
        order = keys[:]
        random.Random(seed).shuffle(order)
        held, train = order[: args.eval], order[args.eval :]
        arms = [("plain", 1.0), ("action_aware", args.weight)]
        for arm, weight in arms if seed % 2 == 0 else arms[::-1]:
            t0 = time.perf_counter()
            torch.manual_seed(seed)
            cfg = Qwen2Config(
                vocab_size=len(tok),
                hidden_size=64,
                intermediate_size=128,
                num_hidden_layers=2,
                num_attention_heads=4,
                num_key_value_heads=2,
                max_position_embeddings=256,
                tie_word_embeddings=True,
                bos_token_id=tok.bos_token_id,
                eos_token_id=eos,
                pad_token_id=tok.pad_token_id,
            )
            policy = Policy(model=Qwen2ForCausalLM(cfg), tokenizer=tok)
            opt = torch.optim.AdamW(policy.model.parameters(), lr=args.lr, weight_decay=0.01)
            data = random.Random(seed + 1)
            for _ in range(args.steps):
                policy.model.train()
                ks = [data.choice(train) for _ in range(args.batch)]
                texts = [f"key: {k} " for k in ks]
                prompts = [tok(t)["input_ids"] for t in texts]
                comps = [tok(demo(k, data, args.reason), add_special_tokens=False)["input_ids"] + [eos] for k in ks]
                batch = forced_batch(texts, prompts, comps, tok)
                nll_loss(policy, batch, args.batch, None if weight == 1.0 else action_weights(batch, tok, weight))
                opt.step()
                opt.zero_grad(set_to_none=True)
            policy.model.eval()
            s = SamplingSettings(args.reason * 6 + 24, eos, tok.pad_token_id, 0.0)
            gen = make_engine("ascent").generate(
                policy.model, [tok(f"key: {k} ")["input_ids"] for k in held], 1, s, None
            )
            right = sum(
                f"<answer>{k}</answer>" in tok.decode(gen.tokens[i, : int(gen.lengths[i])].tolist())
                for i, k in enumerate(held)
            )
            rec = {
                "seed": seed,
                "arm": arm,
                "heldout_accuracy": right / len(held),
                "wall_s": round(time.perf_counter() - t0, 1),
                "load": load(),
            }
            rows[arm].append(rec)
            print(json.dumps(rec), flush=True)
    d = [a["heldout_accuracy"] - b["heldout_accuracy"] for a, b in zip(rows["action_aware"], rows["plain"])]
    summary = {
        "steps": args.steps,
        "reason_words": args.reason,
        "weight": args.weight,
        "plain": [r["heldout_accuracy"] for r in rows["plain"]],
        "action_aware": [r["heldout_accuracy"] for r in rows["action_aware"]],
        "diff_mean": round(statistics.mean(d), 4),
        "diff_sd": round(statistics.stdev(d), 4) if len(d) > 1 else 0.0,
        "diff_ci95": ci95(d),
    }
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
