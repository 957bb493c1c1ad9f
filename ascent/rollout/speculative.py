"""Grouped speculative decoding for the `ascent` engine (`rollout.speculative`), after Seer's adaptive grouped
speculative decoding (Qin et al. 2025, "Seer: Online Context Learning for Fast Synchronous LLM Reinforcement
Learning", arXiv:2511.14617).

The idea. The samples of one GRPO group answer the same prompt and, once the policy has learned something,
repeat each other's phrases. Seer's Distributed Grouped Draft Server keeps, per group, a compressed suffix
tree over the tokens every request of the group has generated so far; each request looks up the suffix of
its own latest context there and takes the continuation the group has seen most often as a draft (no draft
model), which the policy verifies in one forward pass. The draft length adapts to the load: long drafts
when few requests still run (the long tail), short or none when the batch is full and a verification pass
costs as much as the tokens it carries.

What ascent does (`GroupDrafter`, `decode_speculative`):

- Drafting. Per group, a table from n-gram contexts (`min_match`..`ngram` tokens) to the counts of the tokens
  that followed them, over the group's prompt (once) and every sibling's tokens as they are sampled
  (`GroupDrafter.extend`). A sequence's draft (`GroupDrafter.propose`) follows the longest context of its
  own history that the table holds, taking the most frequent continuation (ties: the lower token id), and
  keeps extending while the product of the continuations' shares stays >= `min_score` (SuffixDecoding's
  path score, Oliaro et al. 2024, arXiv:2411.04975, which Seer's drafts are scored with), up to `tokens`.
- Adaptive length. A step drafts at most `budget` tokens over the whole batch: each of the A live sequences
  gets min(`tokens`, `budget` // A). A full batch (A > budget) decodes one token per sequence as without
  speculation; the long tail gets long drafts. Once the call has verified `warmup` drafted tokens, a group
  drafts only while its estimated acceptance rate (its counts shrunk towards the call's) is >= `min_accept`.
- Verification. A sequence feeds its last token and its draft d_1..d_k in one forward (each at its own cache
  column, seeing its own cache and the earlier drafted tokens); the logits at offset j give the policy's
  distribution p_j for position t+j. The engine draws y_j from p_j (temperature, top-k, top-p applied as
  without speculation, `sample_tokens`) with the pre-drawn uniform of (sequence, position t+j), accepts d_j
  while y_j == d_j, and emits y_0..y_m, where m is the first mismatch (or k: all accepted, y_k the bonus
  token). For a deterministic draft this IS the standard speculative-sampling rule (Leviathan et al. 2023,
  arXiv:2211.17192; Chen et al. 2023, arXiv:2302.01318): the draft is accepted with probability p(d_j), and
  on rejection the token is y_j given y_j != d_j, i.e. a draw from p with d_j removed and renormalised. So
  the output distribution is exactly the policy's, and more: with the same uniforms every emitted token is
  the one the engine without speculation draws (greedy included), up to the float rounding of a
  multi-token forward against the one-token step (~1e-6 in the logits; a token can differ only where two
  logits tie to that precision).
- The verify forward. On a CPU at one intra-op thread (each decode shard), the N fed tokens of a step go
  through the native decode step as N rows of a one-token step over their sequences' cache rows
  (`verify_native`, `ascent_decode_step_rows` in decode_step.c): the weights are read once for all N, the
  per-op dispatch of a torch forward is gone, and each token's products are those of the plain step, so a
  step that verifies few sequences' drafts costs about what a plain step over as many rows costs (the
  weights, not the rows, bound a small step). Elsewhere `verify_forward` runs it in torch ops.
- KV cache. The verification writes keys and values at the columns of all k+1 fed tokens; the columns past
  the last accepted one are marked invalid (`key_valid`) and overwritten by the next step, so rejected
  positions never reach attention.

Where it departs from Seer: an n-gram table per group in the engine's process instead of a compressed suffix
tree in a distributed draft server (one process holds all of a shard's groups; the lookups are the same
longest-suffix matches); one draft path per sequence, not Seer's multi-path (tree) drafts (the verify
forward takes a linear chain per row); the draft length adapts to the live batch through a token budget
rather than Seer's profiled table of draft length per concurrency; continuous batching (a cap on active
sequences) is not combined with it (`rollout.max_active_sequences` must be 0).
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from ascent import papers
from ascent.registry import Registry
from ascent.rollout.decoder import STEP_ERRORS, Decoder, prefill_prompts, rotate_half
from ascent.rollout.engine import left_pad
from ascent.rollout.sampling import sample_tokens
from ascent.rollout.types import Generation, SamplingSettings

DRAFTERS: Registry = Registry("speculative drafter")


@dataclass(frozen=True)
class GroupDraftParams:
    """Seer-style grouped drafting: drafts from the n-grams of the sequence's group (prompt and siblings)."""

    tokens: int = 4
    """Most drafted tokens per sequence and step (k)."""
    ngram: int = 4
    """Longest context (tokens) matched against the group's table."""
    min_match: int = 2
    """Shortest context matched: a shorter one proposes nothing."""
    min_score: float = 0.3
    """Stop extending a draft once the product of its tokens' empirical shares (count of the continuation /
    count of the context in the group) falls below this."""
    budget: int = 64
    """Most drafted tokens per decode step over the whole batch (0: no limit); A live sequences draft
    min(tokens, budget // A) each, so a full batch decodes plainly and the long tail drafts long."""
    min_accept: float = 0.3
    """Once the call has verified `warmup` drafted tokens, a group drafts only while its estimated acceptance
    rate is at least this: its own accepted / drafted counts shrunk towards the call's rate (`prior` tokens'
    worth). Drafts the policy keeps rejecting only cost verification."""
    warmup: int = 16
    """Drafted tokens the call verifies before `min_accept` can stop a group."""
    prior: float = 8.0
    """Weight, in drafted tokens, of the call's acceptance rate in a group's estimate: a group with few
    verified drafts is judged mostly by the call's."""

    def __post_init__(self) -> None:
        if self.tokens < 1:
            raise ValueError(f"tokens must be >= 1, got {self.tokens}")
        if not 1 <= self.min_match <= self.ngram:
            raise ValueError(f"need 1 <= min_match <= ngram, got min_match={self.min_match}, ngram={self.ngram}")
        if not 0.0 <= self.min_score <= 1.0:
            raise ValueError(f"min_score must be in [0, 1], got {self.min_score}")
        if self.budget < 0:
            raise ValueError(f"budget must be >= 0 (0: no limit), got {self.budget}")
        if not 0.0 <= self.min_accept <= 1.0 or self.warmup < 0 or self.prior < 0:
            raise ValueError(
                f"need 0 <= min_accept <= 1, warmup >= 0, prior >= 0; "
                f"got {self.min_accept}, {self.warmup}, {self.prior}"
            )


class GroupDrafter:
    """The draft tables of one rollout: sequence i belongs to group `groups[i]`, whose prompt is
    `prompts[i]`. Each group's table maps a context (tuple of `min_match`..`ngram` tokens) to
    [counts of the next tokens, total]."""

    def __init__(self, params: GroupDraftParams, groups: list[int], prompts: list[list[int]]) -> None:
        self.p = params
        self.groups = groups
        self.tables: dict[int, dict[tuple[int, ...], list]] = {}
        self.members: dict[int, list[int]] = {}  # group -> its sequences
        self.history: list[list[int]] = []
        self.indexed: list[int] = []  # per sequence: history tokens already counted in its group's table
        self.verified: dict[int, list[int]] = {}  # group -> [accepted, drafted]
        self.total = [0, 0]  # the call's [accepted, drafted]
        for i, (g, prompt) in enumerate(zip(groups, prompts)):
            if g not in self.tables:  # the prompt's n-grams once per group
                self.tables[g], self.verified[g], self.members[g] = {}, [0, 0], []
                for end in range(1, len(prompt)):
                    self._count(self.tables[g], prompt, end)
            self.members[g].append(i)
            self.history.append(list(prompt))
            self.indexed.append(len(prompt))

    def _count(self, table: dict, hist: list[int], at: int) -> None:
        """Count token hist[at] after each of its contexts hist[at - n : at]."""
        token = hist[at]
        for n in range(self.p.min_match, min(self.p.ngram, at) + 1):
            entry = table.setdefault(tuple(hist[at - n : at]), [{}, 0])
            entry[0][token] = entry[0].get(token, 0) + 1
            entry[1] += 1

    def extend(self, i: int, tokens: list[int]) -> None:
        """Sequence i sampled `tokens`: add them to its history (its group's table counts them at the group's
        next `propose`, so a call that never drafts never builds its tables)."""
        self.history[i].extend(tokens)

    def _catch_up(self, g: int) -> None:
        table = self.tables[g]
        for i in self.members[g]:
            hist = self.history[i]
            for at in range(self.indexed[i], len(hist)):
                self._count(table, hist, at)
            self.indexed[i] = len(hist)

    def record(self, i: int, drafted: int, accepted: int) -> None:
        """The policy accepted `accepted` of the `drafted` tokens drafted for sequence i."""
        for v in (self.verified[self.groups[i]], self.total):
            v[0], v[1] = v[0] + accepted, v[1] + drafted

    def acceptance(self, g: int) -> float:
        """Group g's estimated acceptance rate: its counts shrunk towards the call's rate (Laplace-smoothed)."""
        (accepted, drafted), (all_accepted, all_drafted) = self.verified[g], self.total
        call = (all_accepted + 1) / (all_drafted + 2)
        return (accepted + self.p.prior * call) / (drafted + self.p.prior) if drafted + self.p.prior else call

    def open(self, g: int) -> bool:
        """Whether group g still drafts: the call has verified fewer than `warmup` drafted tokens, or the
        group's estimated acceptance rate is at least `min_accept`."""
        return self.total[1] < self.p.warmup or self.acceptance(g) >= self.p.min_accept

    def propose(self, i: int, k: int) -> list[int]:
        """Up to k draft tokens for sequence i, continuing its history (see the module docstring)."""
        if k <= 0 or not self.open(self.groups[i]):
            return []
        self._catch_up(self.groups[i])
        table, ctx, draft, score = self.tables[self.groups[i]], self.history[i], [], 1.0
        p = self.p
        while len(draft) < k:
            full = ctx[-p.ngram :] + draft if len(draft) < p.ngram else draft[-p.ngram :]
            entry = None
            for n in range(min(p.ngram, len(full)), p.min_match - 1, -1):
                entry = table.get(tuple(full[-n:]))
                if entry is not None:
                    break
            if entry is None:
                break
            counts, total = entry
            token, c = min(counts.items(), key=lambda kv: (-kv[1], kv[0]))
            score *= c / total
            if score < p.min_score:
                break
            draft.append(token)
        return draft


@DRAFTERS.register(
    "none",
    "no speculation: one token per sequence and decode step (default)",
    paper=None,
    fidelity="ascent",
)
def no_drafter() -> None:
    return None


@DRAFTERS.register(
    "seer_group",
    "Seer's grouped speculative decoding: n-gram drafts from the group's siblings, verified in one forward",
    params=GroupDraftParams,
    paper=(papers.SEER, papers.SUFFIX_DECODING, papers.SPECULATIVE_DECODING, papers.SPECULATIVE_SAMPLING),
    fidelity="reduced",
    departures=(
        "a group stops drafting while its estimated acceptance rate (own counts shrunk towards the call's) is below "
        "min_accept: ascent's addition, so that a high-entropy policy does not pay for verifying drafts it rejects",
        "per-group n-gram tables in the engine's process, not a compressed suffix tree in a distributed draft server"
        " (one CPU process holds a shard's groups; the lookups are the same longest-suffix matches)",
        "one draft chain per sequence, not Seer's multi-path (tree) drafts: the verify forward takes one chain per row",
        "the draft length adapts to the live batch through a per-step token budget, not Seer's profiled table of "
        "draft length per concurrency (no offline profile on a CPU)",
        "not combined with continuous batching (rollout.max_active_sequences must be 0)",
    ),
)
def seer_group(params: GroupDraftParams) -> GroupDraftParams:
    return params


def verify_native(
    dec: Decoder,
    tokens: torch.Tensor,
    positions: torch.Tensor,
    rows: torch.Tensor,
    cols: torch.Tensor,
    cache: tuple[torch.Tensor, torch.Tensor],
    valid: torch.Tensor,
) -> torch.Tensor:
    """`verify_forward` through the native decode step in one call (`ascent_decode_step_rows`, decode_step.c):
    the N packed tokens are N rows of a one-token step, token j at cache row rows[j], column cols[j], rope
    position positions[j], attending to the columns where its mask row valid[j] (N, end) bool is set (its
    row's committed cache and its chain up to itself). Each token's products are those of a plain one-token
    step, so a verified token's logits equal the plain step's but for the summation order of the softmax's
    masked tail (~1e-7). Returns the logits (N, V)."""
    keys, values = cache
    n, end = valid.shape
    record = dec.step_model()
    tokens, positions, rows, cols = (x.to(torch.long).contiguous() for x in (tokens, positions, rows, cols))
    valid = valid.contiguous()
    logits = torch.empty((n, dec.lm_head.shape[0]), dtype=torch.float32)
    strides = [(ctypes.c_int64 * 4)(*x.stride()[:4]) for x in (keys, values)]
    if dec._cos is None or int(positions.max()) >= dec._cos.shape[0]:
        dec.rope_table(max(int(positions.max()) + 1, 2 * (end + 1)))
    rc = dec.native.step_rows(
        ctypes.byref(record),
        n,
        tokens.data_ptr(),
        positions.data_ptr(),
        cols.data_ptr(),
        keys.data_ptr(),
        values.data_ptr(),
        strides[0],
        strides[1],
        keys.shape[-2],
        valid.data_ptr(),
        valid.stride(0),
        end,
        logits.data_ptr(),
        rows.data_ptr(),
        keys.shape[1],
    )
    if rc != 0:
        raise RuntimeError(f"native verify step rejected its arguments: {STEP_ERRORS.get(rc, f'code {rc}')}")
    return logits


def native_verify(dec: Decoder) -> bool:
    """Whether `verify_native` applies: the native step runs this decoder's one-token steps (fp32 on a CPU,
    one intra-op thread) and the kernels have the multi-row entry."""
    return (
        dec.native_step
        and torch.get_num_threads() == 1
        and getattr(dec.native, "step_rows", None) is not None
        and dec.compute_dtype == torch.float32
    )


def verify_forward(
    dec: Decoder,
    tokens: torch.Tensor,
    positions: torch.Tensor,
    rows: torch.Tensor,
    offsets: torch.Tensor,
    cols: torch.Tensor,
    cache: tuple[torch.Tensor, torch.Tensor],
    mask: torch.Tensor,
) -> torch.Tensor:
    """The logits (N, V) of N packed tokens: token j is the offsets[j]-th of its row's chain, goes to cache row
    rows[j], column cols[j], at rope position positions[j]. `mask` (A, 1, T, end) bool: what query slot t of
    cache row b (b < A) attends to (its row's committed cache and the earlier tokens of its own chain).

    The projections run on the N packed tokens (through the native step's packed-weight kernel on one CPU
    thread, else `F.linear`); the keys and values of all tokens are written to the cache first, then the
    queries, scattered into an (A, T, heads, d) block, attend over rows 0..A-1 of the cache in place (two batched
    matmuls per layer, the query heads of a GQA group sharing their key/value head)."""
    keys, values = cache
    n, (a, _, t, end) = tokens.shape[0], mask.shape
    x = F.embedding(tokens, dec.embed)  # (N, H)
    top = int(positions.max())
    if dec._cos is None or top >= dec._cos.shape[0]:
        dec.rope_table(max(top + 1, 2 * (end + 1)))
    cos, sin = dec._cos[positions][:, None], dec._sin[positions][:, None]  # (N, 1, d)
    nq, nkv, d = dec.heads, dec.kv_heads, dec.head_dim
    packed = dec.native_step and torch.get_num_threads() == 1 and dec.compute_dtype == torch.float32
    if packed:
        dec.step_model()  # packs the weights once per decoder (`dec.packed`)

    def linear(h: torch.Tensor, name: str, i: int, bias: torch.Tensor | None = None) -> torch.Tensor:
        if packed:
            w = dec.packed[name] if name == "lm_head" else dec.packed[name][i]
            rows_out = dec.lm_head.shape[0] if name == "lm_head" else getattr(dec.layers[i], name).shape[0]
            return dec.native.linear(h, w, rows_out, bias)
        return F.linear(h, dec.lm_head if name == "lm_head" else getattr(dec.layers[i], name), bias)

    q_pad = torch.zeros((a, t, nq, d), dtype=dec.dtype, device=tokens.device)
    g = nq // nkv  # query heads per key/value head (grouped-query attention)
    add_mask = torch.zeros(mask.shape, dtype=dec.dtype, device=mask.device).masked_fill_(~mask, float("-inf"))
    add_mask = add_mask.view(a, 1, 1, t, end)
    for i, w in enumerate(dec.layers):
        qkv = linear(dec.rms(x, w.ln_in), "qkv", i, w.qkv_bias).to(dec.dtype).view(n, nq + 2 * nkv, d)
        qk, v = qkv[:, : nq + nkv], qkv[:, nq + nkv :]
        q, k = (qk * cos + rotate_half(qk) * sin).split([nq, nkv], dim=1)  # (N, nq, d), (N, nkv, d)
        keys[i, rows, :, cols] = k
        values[i, rows, :, cols] = v
        q_pad[rows, offsets] = q
        qg = q_pad.view(a, t, nkv, g, d).permute(0, 2, 3, 1, 4).reshape(a, nkv, g * t, d)
        scores = torch.matmul(qg, keys[i, :a, :, :end].transpose(-1, -2)).mul_(d**-0.5)  # (A, nkv, g T, end)
        scores = scores.view(a, nkv, g, t, end).add_(add_mask)
        att = torch.matmul(torch.softmax(scores.view(a, nkv, g * t, end), -1), values[i, :a, :, :end])
        att = att.view(a, nkv, g, t, d).permute(0, 3, 1, 2, 4)[rows, offsets].reshape(n, nq * d)  # (N, nq d)
        x = x + linear(att.to(dec.compute_dtype), "o", i)
        gate, up = linear(dec.rms(x, w.ln_post), "gate_up", i).chunk(2, dim=-1)
        x = x + linear((F.silu(gate) * up).contiguous(), "down", i)
    return linear(F.rms_norm(x, dec.norm.shape, dec.norm, dec.eps), "lm_head", 0)


def decode_speculative(
    dec: Decoder,
    prompt_ids: list[list[int]],
    n: int,
    s: SamplingSettings,
    u: torch.Tensor | None,
    params: GroupDraftParams,
    compact_fraction: float = 0.25,
) -> tuple[Generation, dict[str, float]]:
    """Decode P prompts x n samples, all at once, with grouped drafts (module docstring); `u` (max_new, P*n)
    the pre-drawn uniforms (None: greedy). Returns the generation and the call's statistics, among them
    `spec_drafted` and `spec_accepted` (draft tokens proposed and accepted), `spec_verify_steps` (steps that
    verified drafts) and `spec_mean_accepted` (accepted tokens per drafted chain)."""
    device = dec.embed.device
    ids, mask = left_pad(prompt_ids, s.pad_id, device)  # (P, L)
    width, total, max_new = ids.shape[1], len(prompt_ids) * n, s.max_new_tokens
    head = width - 1
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    group = torch.arange(total, device=device) // n
    keys, values = cache = dec.new_cache(total, head + max_new)
    if head:
        prompt_kv = prefill_prompts(dec, ids[:, :head], mask[:, :head], positions[:, :head])
        keys[:, :, :, :head] = prompt_kv[0][:, group]
        values[:, :, :, :head] = prompt_kv[1][:, group]
        del prompt_kv
    key_valid = torch.zeros((total, head + max_new), dtype=torch.bool, device=device)
    key_valid[:, :head] = mask[group, :head].bool()
    out_tokens = torch.full((total, max_new), s.pad_id, dtype=torch.long)
    out_lp = torch.zeros((total, max_new))
    lengths, finished = torch.zeros(total, dtype=torch.long), torch.zeros(total, dtype=torch.bool)
    seq = torch.arange(total, device=device)
    step = torch.zeros(total, dtype=torch.long, device=device)
    feed, pos = ids[group, head].clone(), positions[group, head].clone()
    alive = torch.ones(total, dtype=torch.bool, device=device)
    drafter = GroupDrafter(params, group.tolist(), [prompt_ids[g] for g in group.tolist()])
    native = native_verify(dec)
    a, steps, verify_steps, active_sum, drafted, accepted, chains = total, 0, 0, 0, 0, 0, 0
    while True:
        live = alive[:a].nonzero().squeeze(-1).tolist()
        k_max = params.tokens if params.budget == 0 else min(params.tokens, params.budget // len(live))
        step_list, seq_list = step[:a].tolist(), seq[:a].tolist()
        drafts = (
            {b: drafter.propose(seq_list[b], min(k_max, max_new - 1 - step_list[b])) for b in live} if k_max else {}
        )
        drafts = {b: d for b, d in drafts.items() if d}
        steps, active_sum = steps + 1, active_sum + len(live)
        if not drafts:  # a plain one-token step over rows 0..a-1 (dead rows ride along until compaction)
            col = head + step[:a]
            key_valid[torch.arange(a, device=device), col] = True
            end = int(col.max()) + 1
            start = int(col[0]) if bool((col == col[0]).all()) else col  # lockstep: the one-column step
            logits = dec.forward(feed[:a, None], pos[:a, None], cache, start, key_valid[:a, None, None, :end])
            y, lp = sample_tokens(logits, s, u=None if u is None else u[step[:a], seq[:a]])
        else:  # one packed forward: each live row's fed token plus its draft
            verify_steps += 1
            fed = {b: drafts.get(b, []) for b in live}
            rows_of, chain_rows, chain_tok, chain_off = {}, [], [], []
            for b in live:
                rows_of[b] = len(chain_rows)
                chain = [int(feed[b])] + fed[b]
                chain_rows += [b] * len(chain)
                chain_tok += chain
                chain_off += range(len(chain))
            r = torch.tensor(chain_rows, device=device)
            off = torch.tensor(chain_off, device=device)
            cols = head + step[r] + off
            key_valid[r, cols] = True
            t_max = 1 + max(len(d) for d in drafts.values())
            slot_col = (head + step[:a])[:, None] + torch.arange(t_max, device=device)  # (a, T)
            end = min(int(slot_col.max()) + 1, key_valid.shape[1])
            if native:  # one mask row per fed token: its row's committed cache and its chain up to itself
                valid = key_valid[r, :end] & (torch.arange(end, device=device) <= cols[:, None])
                logits = verify_native(dec, torch.tensor(chain_tok), pos[r] + off, r, cols, cache, valid)
            else:
                mask = key_valid[:a, None, :end] & (torch.arange(end, device=device) <= slot_col[:, :, None])
                mask[:, :, 0] |= ~mask.any(-1)  # padding slots of finished rows: never a query with nothing to see
                logits = verify_forward(
                    dec, torch.tensor(chain_tok, device=device), pos[r] + off, r, off, cols, cache, mask[:, None]
                )
            y, lp = sample_tokens(logits, s, u=None if u is None else u[step[r] + off, seq[r]])
        if drafts:  # per row: the accepted prefix of its chain, then its first mismatch or bonus token
            y_list, lp_cpu = y.tolist(), lp.cpu()
            at_seq, at_pos, at_src = [], [], []  # what goes into the outputs: sequence, position, index into y/lp
            go_rows, go_len, ended_rows, eos_seqs = [], [], [], []
            for b in live:
                d, start, t0, i = fed[b], rows_of[b], step_list[b], seq_list[b]
                e, eos = 0, False
                for j in range(len(d) + 1):  # emit y_0.. while the draft is matched (module docstring)
                    tok = y_list[start + j]
                    e += 1
                    if not s.ignore_eos and tok == s.eos_id:
                        eos = True
                        break
                    if j >= len(d) or tok != d[j]:
                        break
                emitted = y_list[start : start + e]
                if d:
                    hits = e - 1 + (e <= len(d) and emitted[-1] == d[e - 1])
                    drafted, accepted, chains = drafted + len(d), accepted + hits, chains + 1
                    drafter.record(i, len(d), hits)
                    if e < len(d) + 1:
                        key_valid[b, head + t0 + e : head + t0 + len(d) + 1] = False  # roll back the rejected columns
                at_seq += [i] * e
                at_pos += range(t0, t0 + e)
                at_src += range(start, start + e)
                drafter.extend(i, emitted)
                if eos or t0 + e >= max_new:
                    ended_rows.append(b)
                    if eos:
                        eos_seqs.append(i)
                else:
                    go_rows.append(b)
                    go_len.append(e)
            src = torch.tensor(at_src)
            at_seq_t = torch.tensor(at_seq)
            out_tokens[at_seq_t, torch.tensor(at_pos)] = y.cpu()[src]
            out_lp[at_seq_t, torch.tensor(at_pos)] = lp_cpu[src]
            lengths.index_add_(0, at_seq_t, torch.ones(len(at_seq), dtype=torch.long))
            finished[eos_seqs] = True
            if ended_rows:  # a dead row keeps its last cache column (in range) until compacted: it never widens `end`
                alive[ended_rows] = False
            if go_rows:
                rows_t = torch.tensor(go_rows, device=device)
                inc = torch.tensor(go_len, device=device)
                last = torch.tensor([rows_of[b] + k - 1 for b, k in zip(go_rows, go_len)], device=device)
                step[rows_t] += inc
                pos[rows_t] += inc
                feed[rows_t] = y[last]
        else:  # one token per live row: the same bookkeeping in tensor ops
            live_t = alive[:a].clone()
            r, t, tok = seq[:a][live_t].cpu(), step[:a][live_t].cpu(), y[live_t]
            out_tokens[r, t], out_lp[r, t] = tok.cpu(), lp[live_t].cpu()
            lengths[r] += 1
            eos = live_t & (y == s.eos_id) if not s.ignore_eos else torch.zeros_like(live_t)
            finished[seq[:a][eos].cpu()] = True
            go = live_t & ~eos & (step[:a] + 1 < max_new)
            alive[:a] = go
            step[:a] += go.long()
            pos[:a] += go.long()
            feed[:a] = torch.where(go, y, feed[:a])
            for i, token in zip(r.tolist(), tok.tolist()):
                drafter.history[i].append(token)
        if not bool(alive[:a].any()):
            break
        if (~alive[:a]).sum() >= compact_fraction * a:
            keep = alive[:a].nonzero().squeeze(-1)
            end = head + int(step[keep].max()) + 1
            keys[:, : len(keep), :, :end] = keys[:, keep, :, :end]
            values[:, : len(keep), :, :end] = values[:, keep, :, :end]
            key_valid[: len(keep)] = key_valid[keep].clone()
            for x in (seq, step, feed, pos, alive):
                x[: len(keep)] = x[keep].clone()
            a = len(keep)
    stats = {
        "decode_steps": float(steps),
        "mean_active": active_sum / max(steps, 1),
        "shards": 1.0,
        "spec_verify_steps": float(verify_steps),
        "spec_drafted": float(drafted),
        "spec_accepted": float(accepted),
        "spec_chains": float(chains),
        "spec_mean_accepted": accepted / max(chains, 1),
    }
    return Generation(out_tokens, out_lp, lengths, finished), stats
