"""TAT-R1's claim on a toy translation task: the translation reward alone against the translation reward plus the
term-alignment reward (Li, Zheng, Song & Yang 2025, arXiv:2505.21172).

    python benchmarks/tat_r1_toy.py --seeds 5 --steps 60

The toy language (per seed): 20 common source words and 20 terms, each with one correct target word; every term also
has 3 plausible wrong translations. Sentences are 5-8 words, one or two of them terms; 200 training sentences with
references (the aligner's parallel corpus and the RL prompts) and 200 held-out ones. The policy translates word by
word: a softmax table π(target | source word) over the whole target vocabulary, started from an imperfect "pretrained"
table (common words right with p 0.7, terms with p 0.25, the rest on confusions) — ascent's reduced stand-in for the
paper's LLM. GRPO (group 8, 16 sentences per step, Adam) trains it with either
  - `f1`:         reward = answer_f1 (token F1 against the reference; the paper's COMET stand-in), or
  - `f1+term`:    reward = answer_f1 + term_align(parts=aaw,aao) (IBM Model 1 trained on the training corpus by EM;
                  key words = source words in at most 15% of the corpus's sentences, i.e. the terms),
from the same initial table, the same sentences and the same seed. Measured on the held-out sentences, exactly (no
sampling noise): term accuracy = the mean π(correct | term) over term tokens, common-word accuracy likewise, and the
expected token F1 of 8 sampled translations per sentence. Prints a JSON line per seed and the paired differences
(f1+term) - f1 with 95% t-intervals.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ascent.rewards.runner import resolve_reward  # noqa: E402
from benchmarks.common import load, paired_summary, print_machine  # noqa: E402

COMMON, TERMS, DISTRACTORS = 20, 20, 3


def make_language(seed: int) -> dict:
    """Vocabularies, the correct translations, the pretrained table and the sentences of one seed."""
    rng = random.Random(seed)
    src = [f"c{i}" for i in range(COMMON)] + [f"term{i}" for i in range(TERMS)]
    tgt = [f"w{i}" for i in range(COMMON)] + [f"t{i}" for i in range(TERMS)]
    tgt += [f"t{i}x{k}" for i in range(TERMS) for k in range(DISTRACTORS)]
    correct = {s: i for i, s in enumerate(src)}  # c_i -> w_i, term_t -> t_t (the same index)
    init = torch.full((len(src), len(tgt)), 1e-3)
    for i, s in enumerate(src):
        if i < COMMON:
            init[i, i] = 0.7
            for j in rng.sample([k for k in range(COMMON) if k != i], 3):
                init[i, j] += 0.1
        else:
            t = i - COMMON
            init[i, i] = 0.25
            for k in range(DISTRACTORS):
                init[i, 2 * COMMON + t * DISTRACTORS + k] = 0.25
    logits = (init / init.sum(1, keepdim=True)).log()

    def sentence() -> list[int]:
        n = rng.randint(5, 8)
        words = [rng.randrange(COMMON) for _ in range(n)]
        for pos in rng.sample(range(n), rng.choice((1, 2))):
            words[pos] = COMMON + rng.randrange(TERMS)
        return words

    train, test = [sentence() for _ in range(200)], [sentence() for _ in range(200)]
    return {"src": src, "tgt": tgt, "correct": correct, "logits": logits, "train": train, "test": test}


def text(ids: list[int], vocab: list[str]) -> str:
    return " ".join(vocab[i] for i in ids)


def answer(ids: list[int], vocab: list[str]) -> str:
    """The policy's completion: the translation inside <answer> tags (what answer_f1 and term_align read)."""
    return f"<answer>{text(ids, vocab)}</answer>"


def evaluate(logits: torch.Tensor, lang: dict, seed: int) -> dict:
    """Held-out term and common-word accuracy (exact) and the expected token F1 of sampled translations."""
    probs = logits.softmax(-1)
    terms = [probs[w, lang["correct"][lang["src"][w]]] for s in lang["test"] for w in s if w >= COMMON]
    common = [probs[w, lang["correct"][lang["src"][w]]] for s in lang["test"] for w in s if w < COMMON]
    f1 = resolve_reward("answer_f1")
    g = torch.Generator().manual_seed(50_000 + seed)
    scores = []
    for s in lang["test"]:
        draws = torch.multinomial(probs[s], 8, replacement=True, generator=g).T  # (8, len)
        ref = text([lang["correct"][lang["src"][w]] for w in s], lang["tgt"])
        scores += f1([""] * 8, [answer(d.tolist(), lang["tgt"]) for d in draws], answer=[ref] * 8)
    return {
        "term_acc": round(float(torch.stack(terms).mean()), 4),
        "common_acc": round(float(torch.stack(common).mean()), 4),
        "f1": round(statistics.mean(scores), 4),
    }


def train(lang: dict, rewards: list, steps: int, seed: int, lr: float) -> torch.Tensor:
    """GRPO on the word-level table with the summed `rewards`; returns the trained logits."""
    logits = lang["logits"].clone().requires_grad_(True)
    opt = torch.optim.Adam([logits], lr=lr)
    rng, g = random.Random(seed), torch.Generator().manual_seed(seed)
    for _ in range(steps):
        batch = rng.sample(lang["train"], 16)
        loss = torch.zeros(())
        for s in batch:
            probs = logits.detach()[s].softmax(-1)  # (len, V)
            draws = torch.multinomial(probs, 8, replacement=True, generator=g).T  # (8, len)
            ref = text([lang["correct"][lang["src"][w]] for w in s], lang["tgt"])
            outs = [answer(d.tolist(), lang["tgt"]) for d in draws]
            fields = {"answer": [ref] * 8, "source": [text(s, lang["src"])] * 8}
            r = torch.tensor([sum(v) for v in zip(*(fn([""] * 8, outs, **fields) for fn in rewards))])
            adv = (r - r.mean()) / (r.std(unbiased=False) + 1e-6)  # (8,)
            logp = logits[s].log_softmax(-1).gather(1, draws.T).sum(0) / len(s)  # (8,) per-token mean
            loss = loss - (adv * logp).mean() / len(batch)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return logits.detach()


def run_seed(seed: int, steps: int, lr: float) -> dict:
    lang = make_language(seed)
    with tempfile.TemporaryDirectory() as tmp:
        corpus = Path(tmp) / "parallel.jsonl"
        rows = [
            {"source": text(s, lang["src"]), "answer": text([lang["correct"][lang["src"][w]] for w in s], lang["tgt"])}
            for s in lang["train"]
        ]
        corpus.write_text("".join(json.dumps(r) + "\n" for r in rows))
        f1 = resolve_reward("answer_f1")
        term = resolve_reward(f"term_align(corpus={corpus}, key_df=0.15)")
        out = {"seed": seed, "init": evaluate(lang["logits"], lang, seed)}
        out["f1"] = evaluate(train(lang, [f1], steps, seed, lr), lang, seed)
        out["f1+term"] = evaluate(train(lang, [f1, term], steps, seed, lr), lang, seed)
    return out


def summary(rows: list[dict]) -> dict:
    keys = ("term_acc", "common_acc", "f1")
    return paired_summary(rows, keys, arm="f1+term", control="f1", shown=("init", "f1", "f1+term"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=60, help="GRPO updates of 16 sentences x 8 samples")
    ap.add_argument("--lr", type=float, default=0.05)
    args = ap.parse_args()
    torch.set_num_threads(1)
    print_machine()
    rows = []
    for seed in range(args.seeds):
        rows.append(run_seed(seed, args.steps, args.lr))
        print(json.dumps(rows[-1]), flush=True)
    print(json.dumps({"summary": summary(rows), "load_at_end": load()}), flush=True)


if __name__ == "__main__":
    main()
