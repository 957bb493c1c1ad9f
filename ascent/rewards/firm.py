"""FIRM's reward-model part at toy scale (Zhao et al., 2026, arXiv:2603.12247): specialised critics for a text
edit, one for execution (was the instruction carried out?) and one for consistency (was everything else left as
it was?), combined by the "Base-and-Bonus" reward (`reward:base_and_bonus`): Consistency-Modulated Execution,
CME = execution * (alpha + (1 - alpha) * consistency); and FIRM's generation reward, Quality-Modulated Alignment,
QMA = alignment * (alpha + (1 - alpha) * quality) (the authors' reward server: alpha = 0.5), with the base an
instruction-following critic that scores a checklist planned from the instruction item by item (FIRM-Gen's
plan-then-score; `reward:plan_critic`) and the bonus a quality critic that sees the output alone (FIRM's quality
prompt: the least of its sub-scores; `reward:quality_critic`).

FIRM trains 8B vision-language critics (FIRM-Edit-8B, FIRM-Gen-8B) on 370K / 293K curated scores of image edits.
Here an edit is word-level: the row carries `source` (the text to edit) and `instruction` (e.g. "replace river
with stone"); the completion is the edited text. `EditCritic` is a small set network over the aligned word
positions: each position i sees one-hot words (source_i, output_i) and the instruction's words by position; an MLP
scores every position, the scores are averaged and a linear head gives the logit of the criterion. It is trained
(`fit_critic`) by binary cross-entropy on soft scores in [0, 1] from a curated scoring set (the caller's); a
trained critic is a folder (`edit_critic.json`: format, vocabulary, sizes, criterion; `weights.safetensors`)
scored with `reward:edit_critic(path=FOLDER)`. The plan critic is an `EditCritic` whose "instruction" is one
checklist item (`checklist`); the quality critic (`QualityCritic`) is an MLP on the output's one-hot words by
position, so it can see interactions between positions (a repeated word) that the pooled edit critic cannot.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional, Sequence

import torch

from ascent import papers
from ascent.rewards.builtin import REWARDS
from ascent.typed import ConfigError

FORMAT = "ascent-edit-critic"
VERSION = 1
META_FILE = "edit_critic.json"
WEIGHTS_FILE = "weights.safetensors"
UNK = "<unk>"
PAD = "<pad>"


def words(text: str) -> list[str]:
    return text.lower().split()


class EditCritic(torch.nn.Module):
    """score(source, instruction, output) in (0, 1): mean over aligned positions of an MLP on one-hot
    (source_i, output_i, instruction words by position), then a linear head and a sigmoid. Positions past the
    shorter of source and output see PAD on the missing side, so a dropped or added word is visible. The initial
    weights are drawn from `seed` alone."""

    def __init__(
        self, vocab: Sequence[str], max_instruction: int = 4, max_len: int = 16, hidden: int = 64, seed: int = 0
    ) -> None:
        super().__init__()
        self.vocab = [PAD, UNK] + [w for w in vocab if w not in (PAD, UNK)]
        self.index = {w: i for i, w in enumerate(self.vocab)}
        self.max_instruction, self.max_len, self.hidden = max_instruction, max_len, hidden
        v = len(self.vocab)
        with torch.random.fork_rng(devices=[]):  # the initial weights depend on `seed` only, not on the global RNG
            torch.manual_seed(seed)
            self.mlp = torch.nn.Sequential(
                torch.nn.Linear(v * (2 + max_instruction), hidden),
                torch.nn.ReLU(),
                torch.nn.Linear(hidden, hidden),
                torch.nn.ReLU(),
            )
            self.head = torch.nn.Linear(hidden, 1)

    def _ids(self, ws: list[str], n: int) -> list[int]:
        ids = [self.index.get(w, 1) for w in ws[:n]]
        return ids + [0] * (n - len(ids))

    def encode(self, sources: Sequence[str], instructions: Sequence[str], outputs: Sequence[str]) -> torch.Tensor:
        """(N, 2 * max_len + max_instruction) word ids: the source's, the output's (each padded or cut to max_len),
        then the instruction's (padded or cut to max_instruction)."""
        rows = []
        for s, ins, o in zip(sources, instructions, outputs):
            rows.append(self._ids(words(s), self.max_len) + self._ids(words(o), self.max_len))
            rows[-1] += self._ids(words(ins), self.max_instruction)
        return torch.tensor(rows, dtype=torch.long)  # (N, 2 * max_len + max_instruction)

    def logits_of(self, ids: torch.Tensor) -> torch.Tensor:
        """(N,) logits of encoded rows."""
        v, n = len(self.vocab), self.max_len
        src, out, ins = ids[:, :n], ids[:, n : 2 * n], ids[:, 2 * n :]
        one = torch.nn.functional.one_hot
        ins_vec = one(ins, v).float().flatten(1)  # (N, max_instruction * V)
        pos = torch.cat([one(src, v).float(), one(out, v).float(), ins_vec[:, None].expand(-1, n, -1)], -1)
        live = ((src != 0) | (out != 0)).float()  # (N, L) positions where either side has a word
        h = self.mlp(pos)  # (N, L, H)
        pooled = (h * live[..., None]).sum(1) / live.sum(1, keepdim=True).clamp(min=1.0)
        return self.head(pooled).squeeze(-1)

    @torch.no_grad()
    def score(self, sources: Sequence[str], instructions: Sequence[str], outputs: Sequence[str]) -> list[float]:
        return torch.sigmoid(self.logits_of(self.encode(sources, instructions, outputs))).tolist()


class QualityCritic(EditCritic):
    """score(output) in (0, 1), prompt-free (FIRM's quality critic judges the image alone): an MLP on the
    output's one-hot words by position, flattened, so any interaction between positions is visible. `encode`
    and `score` keep the edit critic's signature and ignore the source and the instruction."""

    def __init__(self, vocab: Sequence[str], max_len: int = 16, hidden: int = 64, seed: int = 0) -> None:
        torch.nn.Module.__init__(self)
        self.vocab = [PAD, UNK] + [w for w in vocab if w not in (PAD, UNK)]
        self.index = {w: i for i, w in enumerate(self.vocab)}
        self.max_instruction, self.max_len, self.hidden = 0, max_len, hidden
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            self.mlp = torch.nn.Sequential(
                torch.nn.Linear(len(self.vocab) * max_len, hidden),
                torch.nn.ReLU(),
                torch.nn.Linear(hidden, hidden),
                torch.nn.ReLU(),
            )
            self.head = torch.nn.Linear(hidden, 1)

    def encode(self, sources: Sequence[str], instructions: Sequence[str], outputs: Sequence[str]) -> torch.Tensor:
        """(N, max_len) word ids of the outputs (padded or cut)."""
        return torch.tensor([self._ids(words(o), self.max_len) for o in outputs], dtype=torch.long)

    def logits_of(self, ids: torch.Tensor) -> torch.Tensor:
        x = torch.nn.functional.one_hot(ids, len(self.vocab)).float().flatten(1)  # (N, max_len * V)
        return self.head(self.mlp(x)).squeeze(-1)


def checklist(instruction: str) -> list[str]:
    """FIRM-Gen's plan step at toy scale: the instruction expanded into the items a faithful output must meet,
    each scored on its own. "replace A with B" -> ["has B where A", "no A"] (B written at A's positions; A gone);
    any other instruction is one item, itself.

    >>> checklist("replace river with stone"), checklist("make it blue")
    (['has stone where river', 'no river'], ['make it blue'])
    """
    w = words(instruction)
    if len(w) == 4 and w[0] == "replace" and w[2] == "with":
        return [f"has {w[3]} where {w[1]}", f"no {w[1]}"]
    return [instruction]


PLAN_WORDS = ("has", "where", "no")
"""The checklist's own words: a plan critic's vocabulary needs them (`checklist`)."""


def fit_critic(
    critic: EditCritic,
    sources: Sequence[str],
    instructions: Sequence[str],
    outputs: Sequence[str],
    targets: Sequence[float],
    epochs: int = 400,
    lr: float = 0.01,
    seed: int = 0,
) -> float:
    """Full-batch Adam on the binary cross-entropy against soft targets in [0, 1]; the final training loss."""
    torch.manual_seed(seed)
    x = critic.encode(sources, instructions, outputs)
    y = torch.tensor(list(targets), dtype=torch.float32).clamp(0.0, 1.0)
    opt = torch.optim.Adam(critic.parameters(), lr=lr)
    loss = torch.zeros(())
    for _ in range(epochs):
        loss = torch.nn.functional.binary_cross_entropy_with_logits(critic.logits_of(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return float(loss.detach())


def save_critic(critic: EditCritic, folder: str | Path, criterion: str, summary: Optional[dict] = None) -> Path:
    from safetensors.torch import save_file

    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    save_file({k: v.contiguous() for k, v in critic.state_dict().items()}, str(out / WEIGHTS_FILE))
    meta = {"format": FORMAT, "version": VERSION, "criterion": criterion, "vocab": critic.vocab[2:]}
    meta |= {"max_instruction": critic.max_instruction, "max_len": critic.max_len, "hidden": critic.hidden}
    meta |= {"arch": "quality" if isinstance(critic, QualityCritic) else "edit"}
    (out / META_FILE).write_text(json.dumps(meta | {"summary": summary or {}}, indent=1))
    return out


def load_critic(folder: str | Path) -> tuple[EditCritic, dict[str, Any]]:
    """(critic, edit_critic.json) of a folder written by `save_critic`; ConfigError when it is not one."""
    from safetensors.torch import load_file

    path = Path(folder)
    try:
        meta = json.loads((path / META_FILE).read_text())
    except (OSError, ValueError):
        raise ConfigError(f"{str(path)!r} is not an edit critic (no readable {META_FILE})") from None
    if meta.get("format") != FORMAT or meta.get("version") != VERSION:
        raise ConfigError(f"{str(path)!r}: {META_FILE} is not an {FORMAT} v{VERSION} manifest")
    if meta.get("arch", "edit") == "quality":
        critic = QualityCritic(meta["vocab"], meta["max_len"], meta["hidden"])
    else:
        critic = EditCritic(meta["vocab"], meta["max_instruction"], meta["max_len"], meta["hidden"])
    try:
        critic.load_state_dict(load_file(str(path / WEIGHTS_FILE)))
    except (OSError, RuntimeError) as err:
        raise ConfigError(f"edit critic {str(path)!r} is damaged: {str(err).splitlines()[0]}") from None
    return critic.eval(), meta


@REWARDS.register(
    "edit_critic",
    paper=papers.FIRM,
    fidelity="reduced",
    departures=(
        "word-level text edits stand in for image edits: a small set network over aligned word positions, not "
        "FIRM-Edit-8B; the curated scoring set is the caller's (the benchmark scores edits with the true metrics)",
        "one critic per criterion (execution, consistency) instead of one model emitting both scores",
    ),
)
class EditCriticReward:
    """A trained FIRM-style edit critic's score of each completion as the edit of the row's `source` under its
    `instruction` (Zhao et al., 2026, arXiv:2603.12247); use two of them in `base_and_bonus` for CME
    (base: the execution critic, bonus: the consistency critic). A row without source or instruction: None."""

    def __init__(self, path: str) -> None:
        self.path = str(path)
        self.critic, self.meta = load_critic(path)
        self.__name__ = f"edit_critic:{self.meta.get('criterion', '?')}:{self.path}"

    def scores(self, sources: list[str], instructions: list[str], outputs: list[str]) -> list[float]:
        return self.critic.score(sources, instructions, outputs)

    def __call__(
        self,
        prompts: list[str],
        completions: list[str],
        source: Optional[list[Any]] = None,
        instruction: Optional[list[Any]] = None,
        **_: Any,
    ) -> list[Optional[float]]:
        n = len(completions)
        src = list(source) if source is not None else [None] * n
        ins = list(instruction) if instruction is not None else [None] * n
        keep = [i for i in range(n) if src[i] is not None and ins[i] is not None]
        scores = self.scores([src[i] for i in keep], [ins[i] for i in keep], [completions[i] for i in keep])
        out: list[Optional[float]] = [None] * n
        for i, s in zip(keep, scores):
            out[i] = s
        return out


@REWARDS.register(
    "plan_critic",
    paper=papers.FIRM,
    fidelity="reduced",
    departures=(
        "FIRM-Gen-8B's plan-then-score at toy scale: the checklist comes from a rule on the toy's instruction "
        "grammar (`checklist`), not an LLM, and one small edit critic scores every item (the instruction slot "
        "holds the item); alignment is the mean item score, not a 1-5 rating",
        "word-level text outputs of the edit toy stand in for generated images",
    ),
)
class PlanCriticReward(EditCriticReward):
    """Instruction-following alignment, FIRM-Gen's plan-then-score (Zhao et al., 2026, arXiv:2603.12247): the
    row's `instruction` is planned into checklist items (`checklist`), a trained critic scores the output against
    each item, and the reward is the mean item score. QMA's base in `base_and_bonus`."""

    def scores(self, sources: list[str], instructions: list[str], outputs: list[str]) -> list[float]:
        plans = [checklist(i) for i in instructions]
        flat = [(s, item, o) for s, plan, o in zip(sources, plans, outputs) for item in plan]
        got = self.critic.score([f[0] for f in flat], [f[1] for f in flat], [f[2] for f in flat]) if flat else []
        out, k = [], 0
        for plan in plans:
            out.append(sum(got[k : k + len(plan)]) / len(plan))
            k += len(plan)
        return out


@REWARDS.register(
    "quality_critic",
    paper=papers.FIRM,
    fidelity="reduced",
    departures=(
        "a small MLP on the output's words (`QualityCritic`), trained on the caller's curated scores of the toy's "
        "quality (the least of its sub-scores, as FIRM takes the least of aesthetics / quality / structure), not "
        "an 8B judge of images",
    ),
)
class QualityCriticReward(EditCriticReward):
    """A trained quality critic's prompt-free score of each completion (Zhao et al., 2026, arXiv:2603.12247);
    QMA's bonus in `base_and_bonus`. Rows need no fields."""

    def __call__(self, prompts: list[str], completions: list[str], **_: Any) -> list[Optional[float]]:
        return list(self.critic.score([""] * len(completions), [""] * len(completions), completions))
