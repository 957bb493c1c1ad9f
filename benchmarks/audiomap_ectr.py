"""AudioMap's event-conditioned temporal reward (ECTR) on a toy: does binding timestamps to event semantics matter?

    python benchmarks/audiomap_ectr.py --seeds 5 --steps 150

Per seed: 32 clips of 10 s, each with two events of distinct sounds (8 sounds) and integer spans (start 0-7 s,
length 1-3 s). A time-aware caption has two slots, "LABEL a-b; LABEL a-b"; the policy is a softmax table per clip
and slot over the label, the start second and the end second (uniform at the start) — ascent's reduced stand-in for
an audio-language model. GRPO (8 clips per update, groups of 8 captions, Adam lr 0.1) trains it with
  - `tiou`: label recall (share of the clip's sounds the caption names) + temporal IoU with the event condition off
            (`temporal_iou(match_f1=0)`: spans matched to events whatever the text), the coarse temporal reward, or
  - `ectr`: label recall + `temporal_iou` (AudioMap's ECTR as ascent reads it: a span counts only for the event whose
            label its clause names),
from the same start, the same clips and the same seed. Measured on the most likely caption of each clip: the
binding accuracy (share of events captioned with their own label on a span of tIoU >= 0.5), the label recall and
the label-agnostic tIoU. Prints a JSON line per seed and the paired differences ectr - tiou with 95% t-intervals.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ascent.rewards.runner import resolve_reward  # noqa: E402
from ascent.rewards.temporal import tiou  # noqa: E402
from benchmarks.common import load, paired_summary, print_machine  # noqa: E402

SOUNDS = ["dog barking", "car passing", "rain falling", "bell ringing", "baby crying", "door slamming", "bird singing"]
SOUNDS.append("water running")
CLIPS, SECONDS = 32, 11  # start/end choices 0..10


def make_clips(seed: int) -> list[list[dict]]:
    rng = random.Random(seed)
    clips = []
    for _ in range(CLIPS):
        labels = rng.sample(SOUNDS, 2)
        events = []
        for label in labels:
            start = rng.randint(0, 7)
            events.append({"label": label, "start": start, "end": start + rng.randint(1, 3)})
        clips.append(events)
    return clips


def caption(label: list[int], start: list[int], end: list[int]) -> str:
    return "; ".join(f"{SOUNDS[lab]} {s}-{e}" for lab, s, e in zip(label, start, end))


def label_recall(completions: list[str], events: list[dict]) -> list[float]:
    return [sum(e["label"] in c for e in events) / len(events) for c in completions]


def train(clips: list[list[dict]], arm: str, steps: int, seed: int) -> torch.Tensor:
    """GRPO on the (clip, slot) tables; returns logits (C, 2, 8 + 11 + 11)."""
    temporal = resolve_reward("temporal_iou" if arm == "ectr" else "temporal_iou(match_f1=0)")
    logits = torch.zeros(CLIPS, 2, len(SOUNDS) + 2 * SECONDS, requires_grad=True)
    opt = torch.optim.Adam([logits], lr=0.1)
    rng, g = random.Random(seed), torch.Generator().manual_seed(seed)
    cuts = (len(SOUNDS), SECONDS, SECONDS)
    for _ in range(steps):
        loss = torch.zeros(())
        for c in rng.sample(range(CLIPS), 8):
            parts = logits[c].split(cuts, dim=-1)  # 3 x (2, n)
            draws = [torch.multinomial(p.detach().softmax(-1), 8, replacement=True, generator=g) for p in parts]
            texts = [caption(*(d[:, i].tolist() for d in draws)) for i in range(8)]  # draws: 3 x (2 slots, 8)
            r = torch.tensor(label_recall(texts, clips[c])) + torch.tensor(
                temporal(["clip"] * 8, texts, events=[clips[c]] * 8)
            )
            adv = (r - r.mean()) / (r.std(unbiased=False) + 1e-6)  # (8,)
            logp = sum(p.log_softmax(-1).gather(1, d).sum(0) for p, d in zip(parts, draws))  # (8,)
            loss = loss - (adv * logp).mean() / 8
        opt.zero_grad()
        loss.backward()
        opt.step()
    return logits.detach()


def evaluate(logits: torch.Tensor, clips: list[list[dict]]) -> dict:
    bound, recall, agnostic = [], [], []
    free = resolve_reward("temporal_iou(match_f1=0)")
    for c, events in enumerate(clips):
        lab, st, en = (p.argmax(-1).tolist() for p in logits[c].split((len(SOUNDS), SECONDS, SECONDS), dim=-1))
        text = caption(lab, st, en)
        for e in events:
            bound.append(
                float(
                    any(
                        SOUNDS[lab[k]] == e["label"] and tiou((e["start"], e["end"]), (st[k], en[k])) >= 0.5
                        for k in range(2)
                    )
                )
            )
        recall += label_recall([text], events)
        agnostic += free(["clip"], [text], events=[events])
    return {
        "binding": round(statistics.mean(bound), 4),
        "label_recall": round(statistics.mean(recall), 4),
        "tiou_any_label": round(statistics.mean(agnostic), 4),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=150, help="GRPO updates of 8 clips x 8 captions")
    args = ap.parse_args()
    torch.set_num_threads(1)
    print_machine()
    rows = []
    for seed in range(args.seeds):
        clips = make_clips(seed)
        row = {"seed": seed, **{arm: evaluate(train(clips, arm, args.steps, seed), clips) for arm in ("tiou", "ectr")}}
        rows.append(row)
        print(json.dumps(row), flush=True)
    summary = paired_summary(rows, ("binding", "label_recall", "tiou_any_label"), arm="ectr", control="tiou")
    print(json.dumps({"summary": summary, "load_at_end": load()}), flush=True)


if __name__ == "__main__":
    main()
