"""Tree-structured evidence sampling (`evidence_tree`): branches keep their root's tokens up to and including the
first evidence-closing tag and resample the rest on-policy; a root without the tag branches from the prompt."""

from __future__ import annotations

import torch

from ascent.data.samplers import Draw
from tests.rollout.test_explorers import N, completion, context, make


def test_branches_share_the_roots_evidence(uniform_policy, tokenizer):
    ctx = context(uniform_policy, tokenizer, max_new_tokens=8)
    explorer = make("evidence_tree", ctx, "root_share=0.5,close='3'")  # "3" plays the closing tag
    batch = explorer.collect(Draw([0, 2, 1, 3]), torch.Generator().manual_seed(5))
    assert batch.group_index.tolist() == [g for g in range(4) for _ in range(N)]
    seen_cut = seen_fresh = False
    for g in range(4):
        roots = [completion(ctx, batch, g * N + j) for j in range(2)]
        for ids, mask, _ in roots:
            assert torch.all(mask == 1)
        for b in range(2):
            root_ids = roots[b % 2][0]
            text = [tokenizer.decode([t]) for t in root_ids]
            c = text.index("3") + 1 if "3" in text else 0
            ids, mask, logprobs = completion(ctx, batch, g * N + 2 + b)
            assert ids[:c] == root_ids[:c]
            assert torch.all(mask[:c] == 0) and torch.all(logprobs[:c] == 0)
            assert torch.all(mask[c:] == 1)
            seen_cut, seen_fresh = seen_cut or c > 0, seen_fresh or c == 0
    assert seen_cut and seen_fresh  # this seed exercises both kinds of root
    m = explorer.metrics()
    assert m["explore/branches"] == 8.0 and 0 < m["explore/evidence_roots"] < 1
