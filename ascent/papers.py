"""The papers ascent's pieces cite, one `Paper` record each, in the order docs/references.md lists them.

A piece names its paper at registration (`@ADVANTAGES.register("grpo", paper=papers.GRPO, fidelity="faithful")`);
a paper cited by one piece only may also be written inline there. Papers used outside registered pieces
(a command, a config key, a benchmark) or named to tell methods apart carry that use in `note`.
docs/references.md is generated from these records and the registries (`ascent references --write`).
"""

from __future__ import annotations

from ascent.registry import Paper

CUES = Paper(
    "CuES",
    "Mai et al.",
    2025,
    "CuES: A Curiosity-driven and Environment-grounded Synthesis Framework for Agentic RL",
    "arXiv:2512.01311",
)
A_STAR_PO = Paper(
    "A*-PO",
    "Brantley et al.",
    2025,
    "Accelerating RL for LLM Reasoning with Optimal Advantage Regression",
    "arXiv:2505.20686",
    note="stage 1 (V* from reference samples) in `ascent/algorithms/a_star.py`",
)
RAFT = Paper(
    "RAFT",
    "Dong et al.",
    2023,
    "RAFT: Reward rAnked FineTuning for Generative Foundation Model Alignment",
    "arXiv:2304.06767",
    note="the RFT control, `control.kind=rft` (advantage `rft` with loss `pg`)",
)
RAFT_VS_GRPO = Paper(
    "RAFT vs GRPO",
    "Xiong et al.",
    2025,
    "A Minimalist Approach to LLM Reasoning: from Rejection Sampling to Reinforce",
    "arXiv:2504.11343",
    note="measured against: GRPO vs the RFT control (docs/results.md)",
)
REST_EM = Paper(
    "ReST-EM",
    "Singh et al.",
    2023,
    "Beyond Human Data: Scaling Self-Training for Problem-Solving with Language Models",
    "arXiv:2312.06585",
)
STAR = Paper(
    "STaR",
    "Zelikman et al.",
    2022,
    "STaR: Bootstrapping Reasoning With Reasoning",
    "arXiv:2203.14465",
)
AEM = Paper(
    "AEM",
    "Zhao et al.",
    2026,
    "AEM: Adaptive Entropy Modulation for Multi-Turn Agentic Reinforcement Learning",
    "arXiv:2605.00425",
)
AGRO = Paper(
    "AGRO",
    "Tang et al.",
    2025,
    "RL-finetuning LLMs from on- and off-policy data with a single algorithm (AISTATS 2026)",
    "arXiv:2503.19612",
)
BRADLEY_TERRY = Paper(
    "Bradley–Terry",
    "Bradley & Terry",
    1952,
    "Rank Analysis of Incomplete Block Designs: I. The Method of Paired Comparisons (Biometrika 39(3/4))",
    "none (predates arXiv)",
    note="the reward-model loss −log σ(r_c − r_r − m) (`ascent/rewards/reward_model.py`, `ascent train-rm`)",
)
BALANCED_ONLINE_DIFFICULTY_FILTERING = Paper(
    "Balanced online difficulty filtering",
    "Bae et al.",
    2025,
    "Online Difficulty Filtering for Reasoning Oriented Reinforcement Learning (EACL 2026)",
    "arXiv:2504.03380",
)
CARL = Paper(
    "CARL",
    "Benjamins et al.",
    2023,
    "Contextualize Me -- The Case for Context in Reinforcement Learning (TMLR)",
    "arXiv:2202.04500",
    note=(
        "contextual environments `ascent.classic.contextual.ContextualEnv` (physics context per episode, hidden or "
        "visible)"
    ),
)
CARR = Paper(
    "CaRR",
    "Zhang et al.",
    2026,
    "Chaining the Evidence: Robust Reinforcement Learning for Deep Search Agents with Citation-Aware Rubric Rewards",
    "arXiv:2601.06021",
)
RM_ENSEMBLES = Paper(
    "RM ensembles",
    "Coste, Anwar, Kirk & Krueger",
    2024,
    "Reward Model Ensembles Help Mitigate Overoptimization (ICLR 2024)",
    "arXiv:2310.02743",
)
RM_ENSEMBLES_LIMITS = Paper(
    "RM ensembles, limits",
    "Eisenstein et al.",
    2023,
    "Helping or Herding? Reward Model Ensembles Mitigate but do not Eliminate Reward Hacking (COLM 2024)",
    "arXiv:2312.09244",
    note=(
        "its `median` aggregate; members that share a pretrained trunk err alike, so an ensemble "
        "mitigates but does not remove hacking"
    ),
)
ENTROPY_MECHANISM = Paper(
    "Clip-Cov / KL-Cov",
    "Cui et al.",
    2025,
    "The Entropy Mechanism of Reinforcement Learning for Reasoning Language Models",
    "arXiv:2505.22617",
)
CCC_REWARD = Paper(
    "CCC reward",
    "Du, Song & Li",
    2026,
    "Injecting Distributional Awareness into MLLMs via Reinforcement Learning for Deep Imbalanced Regression",
    "arXiv:2605.01402",
)
CALIBSFT = Paper(
    "CalibSFT",
    "not found",
    None,
    "not found (CalibSFT: calibration SFT before confidence-aware RL with a Brier-score reward)",
    "not found",
)
CONFCLIP = Paper(
    "ConfClip",
    "Zhang et al.",
    2025,
    "ConfClip: Confidence-Weighted and Clipped Reward for Reinforcement Learning in LLMs",
    "arXiv:2509.17730",
)
CO_RL = Paper(
    "Co-RL",
    "not found",
    None,
    (
        "not found (Co-RL: decoupled models trained at once with RL, rewarded by their peers; code "
        "github.com/DrStranded/Co-RL)"
    ),
    "not found",
    note="the cohort as separate runs reloading each other's checkpoints (`peer_consensus(refresh_every=...)`)",
)
COBA_RL = Paper(
    "CoBA-RL",
    "Yao et al.",
    2026,
    "CoBA-RL: Capability-Oriented Budget Allocation for Reinforcement Learning in LLMs",
    "arXiv:2602.03048",
)
DARL = Paper(
    "DARL",
    "Huang et al.",
    2026,
    "DARL: Encouraging Diverse Answers for General Reasoning without Verifiers",
    "arXiv:2601.14700",
)
DAVID_GRPO = Paper(
    "DAVID-GRPO",
    "Han et al.",
    2026,
    "Can David Beat Goliath? On Multi-Hop Reasoning with Resource-Constrained Agents",
    "arXiv:2601.21699",
)
DIFFICULTY_AWARE_STAGED_RL = Paper(
    "Difficulty-aware staged RL",
    "Ji et al.",
    2025,
    (
        "How Difficulty-Aware Staged Reinforcement Learning Enhances LLMs' Reasoning Capabilities: A Preliminary "
        "Experimental Study"
    ),
    "arXiv:2504.00829",
)
DISTIL = Paper(
    "DistIL",
    "Agrawal et al.",
    2026,
    "Reinforcement Learning from Rich Feedback with Distributional DAgger",
    "arXiv:2606.05152",
)
EDGE = Paper(
    "EDGE",
    "not found",
    None,
    "not found (EDGE: Experience-Distillation for Guided Exploration; code github.com/xvolcano02/EDGE)",
    "not found",
)
GKD = Paper(
    "GKD",
    "Agarwal et al.",
    2024,
    "On-Policy Distillation of Language Models: Learning from Self-Generated Mistakes (ICLR 2024)",
    "arXiv:2306.13649",
)
ON_POLICY_DISTILLATION = Paper(
    "On-policy distillation",
    "Lu & Thinking Machines Lab",
    2025,
    "On-Policy Distillation (thinkingmachines.ai blog)",
    "blog post (no arXiv id)",
    note=(
        "`opd(estimator=sampled)`: the per-token reverse KL of the sampled token as a negative advantage; "
        "`benchmarks/opd_vs_grpo.py`"
    ),
)
EAPO_EXPLORATION = Paper(
    "EAPO (Exploration-Aware)",
    "Hua et al.",
    2026,
    "Learning to Explore: Scaling Agentic Reasoning via Exploration-Aware Policy Optimization (ICML 2026)",
    "arXiv:2605.08978",
    note="`algorithm.advantage=explore_group(step_coef=c)` with `agent.turn_rewards=eapo` (`eapo_turn_rewards`)",
)
EAPO_EVIDENCE = Paper(
    "EAPO (Evidence-Augmented)",
    "Guan et al.",
    2026,
    "Evidence-Augmented Policy Optimization with Reward Co-Evolution for Long-Context Reasoning",
    "arXiv:2601.10306",
)
EAPO_EXPERIENCE = Paper(
    "EAPO (Experience-Augmented)",
    "Lu et al.",
    2026,
    "Experience Augmented Policy Optimization for LLM Reasoning",
    "arXiv:2606.30420",
)
FLOWREASONER = Paper(
    "FlowReasoner",
    "Gao, Liu, He, Dou, Du, Deng, Hooi, Lin & Pang",
    2025,
    "FlowReasoner: Reinforcing Query-Level Meta-Agents",
    "arXiv:2504.15257",
    note="`workflow_exec` reward and the `workflow` task (a three-operator workflow DSL executed by a noisy worker)",
)
ECHO_2 = Paper(
    "ECHO-2",
    "Xiao et al.",
    2026,
    "ECHO-2: A Large Scale Distributed Rollout Framework for Cost-efficient Reinforcement Learning",
    "arXiv:2602.02192",
    note="`ascent plan` (`ascent/runtime/plan.py`): the overlap-based capacity model; `ray.broadcast=chain` "
    "(`ascent/runtime/broadcast.py`): the peer-assisted pipelined weight broadcast",
)
ASYNCFLOW = Paper(
    "AsyncFlow",
    "Han et al.",
    2025,
    "AsyncFlow: An Asynchronous Streaming RL Framework for Efficient LLM Post-Training",
    "arXiv:2507.01663",
    note="`ray.handoff=sample` (`ascent/runtime/stream.py`): the streaming data store between rollout workers "
    "and the learner, with per-group hand-off and the staleness bound per group",
)
EXPPO = Paper(
    "ExPPO",
    "not found",
    None,
    "not found (ExPPO: Exploration-Preserving Policy Optimization)",
    "not found",
)
EXIT = Paper(
    "ExIt",
    "Jiang et al.",
    2025,
    "Bootstrapping Task Spaces for Self-Improvement",
    "arXiv:2509.04575",
)
FIRM = Paper(
    "FIRM",
    "Zhao et al.",
    2026,
    "Trust Your Critic: Robust Reward Modeling and Reinforcement Learning for Faithful Image Editing and Generation",
    "arXiv:2603.12247",
)
GOLONGRL = Paper(
    "GoLongRL (TMN-Reweight)",
    "Lv et al.",
    2026,
    "GoLongRL: Capability-Oriented Long Context Reinforcement Learning with Multitask Alignment",
    "arXiv:2605.19577",
)
GUI_LIBRA = Paper(
    "GUI-Libra",
    "Yang et al.",
    2026,
    "GUI-Libra: Training Native GUI Agents to Reason and Act with Action-aware Supervision and Partially Verifiable RL",
    "arXiv:2602.22190",
    note=(
        "action-aware SFT: `warmstart.action_weight` up-weights the imitated `<tool_call>` / `<answer>` tokens in the "
        "warm start's NLL (`ascent/trainer/action_aware.py`); the reasoning / direct-action data mix is the task's"
    ),
)
HYPEREYES = Paper(
    "HyperEyes (TRACE)",
    "Li et al.",
    2026,
    "HyperEyes: Dual-Grained Efficiency-Aware Reinforcement Learning for Parallel Multimodal Search Agents",
    "arXiv:2605.07177",
    note="`benchmarks/compare_trace.yaml`; OPD on failed rollouts only: loss `opd(only_failed=true, rl=true)`",
)
IGPO = Paper(
    "IGPO",
    "Wang et al.",
    2025,
    "Information Gain-based Policy Optimization: A Simple and Effective Approach for Multi-Turn LLM Agents (ICLR 2026)",
    "arXiv:2510.14967",
    note="`agent.turn_rewards=igpo`; the probe `answer_probs` in `ascent/agents/collector.py`",
)
IQL = Paper(
    "IQL",
    "Kostrikov, Nair & Levine",
    2021,
    "Offline Reinforcement Learning with Implicit Q-Learning",
    "arXiv:2110.06169",
    note="the critic of `q_evolve` (expectile regression of V, TD regression of Q)",
)
DEEPSEEK_GRM_SPCT = Paper(
    "DeepSeek-GRM / SPCT",
    "Liu et al.",
    2025,
    "Inference-Time Scaling for Generalist Reward Modeling",
    "arXiv:2504.02495",
)
INSTRUCTGPT = Paper(
    "InstructGPT",
    "Ouyang et al.",
    2022,
    "Training language models to follow instructions with human feedback",
    "arXiv:2203.02155",
    note="reward models from preference pairs (`ascent train-rm`) used as a reward (`reward=rm:PATH`)",
)
INSTRUCTION_FOLLOWING_SELF_SUPERVISED_RL = Paper(
    "Instruction-following self-supervised RL",
    "Ren et al.",
    2025,
    "Instructions are all you need: Self-supervised Reinforcement Learning for Instruction Following",
    "arXiv:2510.14420",
)
ITERRESEARCH = Paper(
    "IterResearch (EAPO, Efficiency-Aware)",
    "Chen et al.",
    2025,
    "IterResearch: Rethinking Long-Horizon Agents via Markovian State Reconstruction",
    "arXiv:2511.07327",
    note=(
        "`agent.context=workspace`: workspace reconstruction (question + the policy's `<report>` + the last action "
        "and observation per round, one training sample per round) and EAPO's adaptive downsampling "
        "(`agent.round_multiple`), `ascent/agents/workspace.py`; reduced: the paper's GSPO-style optimiser and "
        "its report/think prompt format are not built (GRPO on round samples, oracle-written reports)"
    ),
)
LITE_PPO = Paper(
    'Lite PPO ("Tricks or Traps?")',
    "Liu et al.",
    2025,
    "Part I: Tricks or Traps? A Deep Dive into RL for LLM Reasoning",
    "arXiv:2508.08221",
    note="`ascent compare` (`ascent/app/compare.py`); `benchmarks/compare_catalogue.yaml`",
)
MATH_SHEPHERD = Paper(
    "Math-Shepherd",
    "Wang et al.",
    2024,
    "Math-Shepherd: Verify and Reinforce LLMs Step-by-step without Human Annotations",
    "arXiv:2312.08935",
    note="`ascent make-steps` / `ascent train-prm` (Monte Carlo step labels, hard and soft; a process reward model)",
)
LLAMA_2 = Paper(
    "Llama 2 (RM margin)",
    "Touvron et al.",
    2023,
    "Llama 2: Open Foundation and Fine-Tuned Chat Models",
    "arXiv:2307.09288",
    note="the optional per-pair `margin` inside the Bradley–Terry loss (`rm.use_margin`)",
)
DPO = Paper(
    "DPO",
    "Rafailov et al.",
    2023,
    "Direct Preference Optimization: Your Language Model is Secretly a Reward Model",
    "arXiv:2305.18290",
    note="`ascent train-pref`",
)
CDPO = Paper(
    "cDPO",
    "Mitchell",
    2023,
    "A note on DPO with noisy preferences & relationship to IPO (a technical note, ericmitchell.ai/cdpo.pdf)",
    "none (not on arXiv)",
    note="`dpo(label_smoothing=ε)`: conservative DPO for labels flipped with probability ε",
)
ONLINE_ITERATED_RLHF = Paper(
    "Online / iterated RLHF",
    "Bai et al.",
    2022,
    "Training a Helpful and Harmless Assistant with Reinforcement Learning from Human Feedback",
    "arXiv:2204.05862",
)
IPO = Paper(
    "IPO",
    "Azar et al.",
    2023,
    "A General Theoretical Paradigm to Understand Learning from Human Preferences",
    "arXiv:2310.12036",
)
SIMPO = Paper(
    "SimPO",
    "Meng, Xia & Chen",
    2024,
    "SimPO: Simple Preference Optimization with a Reference-Free Reward",
    "arXiv:2405.14734",
)
MAXRL = Paper(
    "MaxRL",
    "Tajwar et al.",
    2026,
    "Maximum Likelihood Reinforcement Learning",
    "arXiv:2602.02710",
)
MR_Q = Paper(
    "MR.Q",
    "Fujimoto, D'Oro, Zhang, Tian & Rabbat",
    2025,
    "Towards General-Purpose Model-Free Reinforcement Learning (ICLR 2025)",
    "arXiv:2501.16142",
)
PREFIXRL = Paper(
    "PrefixRL",
    "Setlur et al.",
    2026,
    "Reuse your FLOPs: Scaling RL on Hard Problems by Conditioning on Very Off-Policy Prefixes",
    "arXiv:2601.18795",
)
REX_RAG = Paper(
    "REX-RAG",
    "Jiang et al.",
    2025,
    "REX-RAG: Reasoning Exploration with Policy Correction in Retrieval-Augmented Generation",
    "arXiv:2508.08149",
)
PSN_RLVR = Paper(
    "PSN-RLVR",
    "Bai et al.",
    2026,
    (
        "Learning to Explore with Parameter-Space Noise: A Deep Dive into Parameter-Space Noise for Reinforcement "
        "Learning with Verifiable Rewards"
    ),
    "arXiv:2602.02555",
    note="truncated importance sampling, `algorithm.tis_cap` (`tis_weight` in `ascent/algorithms/losses.py`)",
)
Q_EVOLVE = Paper(
    "Q-Evolve",
    "Zhang et al.",
    2026,
    "Self-evolving LLM agents with in-distribution Optimization",
    "arXiv:2606.07367",
)
RM_OVER_OPTIMISATION = Paper(
    "RM over-optimisation",
    "Gao, Schulman & Hilton",
    2023,
    "Scaling Laws for Reward Model Overoptimization",
    "arXiv:2210.10760",
    note=(
        "measured against: the proxy `rm:PATH` and the true verifier logged side by side (`reward_weights` 0 on the "
        "verifier), plotted against the KL to the start by `benchmarks/overoptimisation.py` (docs/results.md §4)"
    ),
)
RAPID = Paper(
    "RAPID",
    "Huang et al.",
    2025,
    "RAPID: An Efficient Reinforcement Learning Algorithm for Small Language Models",
    "arXiv:2510.03515",
    note=(
        "importance-weighted off-policy updates, `algorithm.tis_cap`; measured as `grpo_2mb` (its wall-clock claim is "
        "not tested)"
    ),
)
RAPO = Paper(
    "RAPO (Fathom-DeepResearch)",
    "Singh et al.",
    2025,
    "Fathom-DeepResearch: Unlocking Long Horizon Information Retrieval and Synthesis for SLMs",
    "arXiv:2509.24107",
)
REBEL = Paper(
    "REBEL",
    "Gao et al.",
    2024,
    "REBEL: Reinforcement Learning via Regressing Relative Rewards",
    "arXiv:2404.16767",
)
RLANYTHING = Paper(
    "RLAnything",
    "Wang, Xie, Shen, Wang & Yang",
    2026,
    "RLAnything: Forge Environment, Policy, and Reward Model in Completely Dynamic RL System",
    "arXiv:2602.02488",
)
RLVMR = Paper(
    "RLVMR",
    "Zhang et al.",
    2025,
    "RLVMR: Reinforcement Learning with Verifiable Meta-Reasoning Rewards for Robust Long-Horizon Agents",
    "arXiv:2507.22844",
)
SA_MRPO = Paper(
    "SA-MRPO",
    "not found",
    2026,
    (
        "Learn What's Left, Not What's Mastered: Saturation Aware Advantage Reweighting for Multi-Reward Policy "
        "Optimization"
    ),
    "not found",
)
SDRL = Paper(
    "SDRL",
    "not found",
    None,
    "not found (SDRL: Strategy-Diverse Reinforcement Learning, LLMs as optimisation meta-solvers)",
    "not found",
)
DSP = Paper(
    "DSP",
    "Guan et al.",
    2025,
    "Dynamic Speculative Agent Planning (ICLR 2026)",
    "arXiv:2509.01920",
    note="`ascent/agents/speculative_planning.py`, `benchmarks/agent_dsp.py`",
    section="systems",
)
ISP = Paper(
    "ISP",
    "Hua et al.",
    2024,
    "Interactive Speculative Planning: Enhance Agent Efficiency through Co-design of System and User Interface",
    "arXiv:2410.00079",
    section="systems",
)
SEER = Paper(
    "Seer",
    "Qin et al.",
    2025,
    "Seer: Online Context Learning for Fast Synchronous LLM Reinforcement Learning",
    "arXiv:2511.14617",
    note="length-aware request scheduling, `ascent/rollout/scheduling.py`; grouped speculative decoding, "
    "`ascent/rollout/speculative.py`",
)
SPECULATIVE_DECODING = Paper(
    "Speculative decoding",
    "Leviathan et al.",
    2023,
    "Fast Inference from Transformers via Speculative Decoding (ICML 2023)",
    "arXiv:2211.17192",
)
SPECULATIVE_SAMPLING = Paper(
    "Speculative sampling",
    "Chen et al.",
    2023,
    "Accelerating Large Language Model Decoding with Speculative Sampling",
    "arXiv:2302.01318",
)
SUFFIX_DECODING = Paper(
    "SuffixDecoding",
    "Oliaro et al.",
    2024,
    "SuffixDecoding: Extreme Speculative Decoding for Emerging AI Applications",
    "arXiv:2411.04975",
)
SERL = Paper(
    "SERL",
    "Li, Lyu et al.",
    2026,
    "What and When to Distill: Selective Hindsight Distillation for Multi-Turn Agents",
    "arXiv:2605.19447",
)
SG_SRL = Paper(
    "SG-SRL",
    "Su et al.",
    2026,
    "Source-Grounded Semantic Reinforcement Learning for Low-Resource Target-Language Generation",
    "arXiv:2605.29502",
)
SIRL = Paper(
    "SIRL",
    "Chen et al.",
    2025,
    "Solver-Informed RL: Grounding Large Language Models for Authentic Optimization Modeling",
    "arXiv:2505.11792",
)
SOAR = Paper(
    "SOAR",
    "not found",
    None,
    "not found (SOAR: SOurce-Aware Reinforcement learning for search agents)",
    "not found",
    note=(
        "the `search_world` environment; searched again 2026-12-07 with the catalogue's words (Source-Aware "
        "Workflow, E_ext / E_int, Source-Consistent Reward, evidence fabrication): not found, so the pieces are "
        "ascent's reading of the abstract"
    ),
)
HARR = Paper(
    "HARR",
    "Zhang, Qin, Wu, Zhang & Deng",
    2026,
    "Reinforcement Fine-Tuning for History-Aware Dense Retriever in RAG",
    "arXiv:2602.03645",
)
SPA = Paper(
    "SPA",
    "Wang et al.",
    2025,
    "SPA-RL: Reinforcing LLM Agents via Stepwise Progress Attribution",
    "arXiv:2505.20732",
)
SPARK = Paper(
    "Spark",
    "Wu et al.",
    2026,
    "Spark: Strategic Policy-Aware Exploration via Dynamic Branching for Long-Horizon Agentic Learning",
    "arXiv:2601.20209",
)
TTRL = Paper(
    "TTRL",
    "Zuo et al.",
    2025,
    "TTRL: Test-Time Reinforcement Learning",
    "arXiv:2504.16084",
)
TACO = Paper(
    "TACO",
    "Lou et al.",
    2026,
    "When Implausible Tokens Get Reinforced: Tail-Aware Credit Calibration for LLM Reinforcement Learning",
    "arXiv:2607.07976",
)
URPO = Paper(
    "URPO",
    "Lu et al.",
    2025,
    "URPO: A Unified Reward & Policy Optimization Framework for Large Language Models (AAAI 2026)",
    "arXiv:2507.17515",
)
TREEOPSD = Paper(
    "TreeOPSD",
    "not found",
    2026,
    "Tree-Aware Posterior Distillation for Long-Horizon Agentic Reinforcement Learning (arXiv id not found)",
    "not found",
)
TREE_OPO = Paper(
    "Tree-OPO",
    "Huang, Nguyen & Zimmer",
    2025,
    (
        "Tree-OPO: Off-policy Monte Carlo Tree-Guided Advantage Optimization for Multistep Reasoning (v1: staged GRPO "
        "with MCTS-derived trajectories)"
    ),
    "arXiv:2509.09284",
)
RELAX = Paper(
    "ReLaX",
    "Zhang, Chen, Shen, Ye & Wu",
    2025,
    "ReLaX: Reasoning with Latent Exploration for Large Reasoning Models",
    "arXiv:2512.07558",
    note=(
        "DSD by exact DMD (Tu et al. 2014, arXiv:1312.0041) as a bounded advantage bonus in the form of Cheng et al. "
        "2025 (arXiv:2506.14758)"
    ),
)
IIB_LPO = Paper(
    "IIB-LPO",
    "Deng et al.",
    2026,
    "IIB-LPO: Latent Policy Optimization via Iterative Information Bottleneck (ACL 2026)",
    "arXiv:2601.05870",
)
ARLI = Paper(
    "ARLI",
    "not found",
    None,
    (
        "not found (asynchronous RL with intermediate information: under inference latency, the state augmented with "
        "the already-committed actions and a mid-inference observation); the search tools found no paper by this name"
    ),
    "not found",
)
CONSTANT_DELAY_AUGMENTED_STATE = Paper(
    "Constant-delay augmented state",
    "Katsikopoulos & Engelbrecht",
    2003,
    "Markov Decision Processes with Delays and Asynchronous Cost Collection (IEEE Trans. Automatic Control 48(4))",
    "none (IEEE TAC)",
    note="why `arli`'s (observation, committed actions) is Markov (`ascent/classic/latency.py`)",
)
SEEK = Paper(
    "SEEK",
    "Ma, Zhu, Cai, Qi, Chen, Shi & Laber",
    2023,
    "Sequential Knockoffs for Variable Selection in Reinforcement Learning",
    "arXiv:2303.14281",
)
MODEL_X_KNOCKOFFS = Paper(
    "Model-X knockoffs",
    "Candès, Fan, Janson & Lv",
    2018,
    "Panning for Gold: Model-X Knockoffs for High-Dimensional Controlled Variable Selection (JRSS-B 80(3))",
    "arXiv:1610.02351",
    note="`gaussian_knockoffs`, `knockoff_threshold` in `ascent/classic/seek.py`",
)
DERANDOMIZED_KNOCKOFFS = Paper(
    "Derandomized knockoffs",
    "Ren, Wei & Candès",
    2023,
    "Derandomizing Knockoffs (JASA)",
    "arXiv:2012.02717",
    note=(
        "in its spirit (a majority vote over 5 draws of the knockoff filter, not their PFER base procedure): SEEK's "
        "per-response vote (`ascent/classic/seek.py`)"
    ),
)
MD3QN = Paper(
    "MD3QN",
    "Zhang, Chen, Zhao, Xiong, Qin & Liu",
    2021,
    "Distributional Reinforcement Learning for Multi-Dimensional Reward Functions (NeurIPS 2021)",
    "arXiv:2110.13578",
)
RETRIEVAL_AUGMENTED_RL = Paper(
    "Retrieval-augmented RL",
    "Goyal, Friesen, Weber, Banino, Ke et al.",
    2022,
    "Retrieval-Augmented Reinforcement Learning (ICML 2022)",
    "arXiv:2202.08417",
)
SQIRL = Paper(
    "SQIRL",
    "Laidlaw, Russell & Dragan",
    2023,
    "Bridging RL Theory and Practice with the Effective Horizon (NeurIPS 2023)",
    "arXiv:2304.09853",
)
ORCHESTRATED_VALUE_MAPPING = Paper(
    "Orchestrated value mapping",
    "Fatemi & Tavakoli",
    2022,
    "Orchestrated Value Mapping for Reinforcement Learning (ICLR 2022)",
    "arXiv:2203.07171",
)
LOG_Q_LEARNING = Paper(
    "Log Q-learning",
    "van Seijen, Fatemi & Tavakoli",
    2019,
    "Using a Logarithmic Mapping to Enable Lower Discount Factors in Reinforcement Learning (NeurIPS 2019)",
    "arXiv:1906.00572",
    note="the log mapping f(x) = c ln(x + d) of `ovm_dqn` (`ascent/classic/value_mapping.py`)",
)
JITRL = Paper(
    "JitRL",
    "Liu et al.",
    2026,
    "Just-In-Time Reinforcement Learning: Continual Learning in LLM Agents Without Gradient Updates (ICML 2026)",
    "arXiv:2601.18510",
)
MULTI_TURN_RECIPE = Paper(
    "Multi-turn agentic RL recipe (meow-tea-taro)",
    "Wang & Ammanabrolu",
    2025,
    "A Practitioner's Guide to Multi-turn Agentic Reinforcement Learning (code github.com/pearls-lab/meow-tea-taro)",
    "arXiv:2510.01132",
    note=(
        "a design study (environment, reward, policy; TextWorld, ALFWorld, SWE-Gym), no method of its own: its axes "
        "are ascent's `textworld` game sizes, the dense turn reward `data.task=textworld(reward=progress)` with reward "
        "`game_progress`, `algorithm.advantage=grpo|rloo` with `ppo_clip`, and the warm start before RL (SFT:RL "
        "ratio); measured as a table of factors by benchmarks/agent_recipe_study.py (docs/agents.md)"
    ),
)
TEXTWORLD = Paper(
    "TextWorld",
    "Côté et al.",
    2018,
    "TextWorld: A Learning Environment for Text-based Games",
    "arXiv:1806.11532",
    note="the game generator behind `ascent/envs/textworld_env.py` (extra `ascent[agents]`)",
)
SQUAD = Paper(
    "SQuAD F1",
    "Rajpurkar et al.",
    2016,
    "SQuAD: 100,000+ Questions for Machine Comprehension of Text",
    "arXiv:1606.05250",
)
PPO = Paper(
    "PPO",
    "Schulman et al.",
    2017,
    "Proximal Policy Optimization Algorithms",
    "arXiv:1707.06347",
    section="baselines",
)
ENTROPY_REGULARISATION = Paper(
    "Entropy regularisation",
    "Williams & Peng",
    1991,
    "Function Optimization Using Connectionist Reinforcement Learning Algorithms",
    "Connection Science 3(3), 1991 (no arXiv id)",
    section="baselines",
)
GAE = Paper(
    "GAE",
    "Schulman et al.",
    2016,
    "High-Dimensional Continuous Control Using Generalized Advantage Estimation (ICLR 2016)",
    "arXiv:1506.02438",
    note="`gae_recursion`, shared with classic `ppo`",
    section="baselines",
)
DQN = Paper(
    "DQN",
    "Mnih et al.",
    2015,
    "Human-level control through deep reinforcement learning (Nature 518:529)",
    "Nature 518:529, 2015 (no arXiv id; the 2013 workshop version is arXiv:1312.5602)",
    section="baselines",
)
SAC = Paper(
    "SAC",
    "Haarnoja et al.",
    2018,
    "Soft Actor-Critic Algorithms and Applications",
    "arXiv:1812.05905",
    section="baselines",
)
PPO_IMPLEMENTATION_DETAILS = Paper(
    "PPO implementation details",
    "Engstrom et al.",
    2020,
    "Implementation Matters in Deep Policy Gradients: A Case Study on PPO and TRPO (ICLR 2020)",
    "arXiv:2005.12729",
    note="orthogonal init, advantage normalisation, observation/reward normalisation of classic `ppo`",
    section="baselines",
)
STABLE_BASELINES3 = Paper(
    "Stable-Baselines3",
    "Raffin et al.",
    2021,
    "Stable-Baselines3: Reliable Reinforcement Learning Implementations (JMLR 22(268))",
    "JMLR 22(268), 2021 (no arXiv id)",
    note="the conventions the classic algorithms follow (and `benchmarks/classic_vs_sb3.py` compares against)",
    section="baselines",
)
TD3 = Paper(
    "TD3",
    "Fujimoto, van Hoof & Meger",
    2018,
    "Addressing Function Approximation Error in Actor-Critic Methods (ICML 2018)",
    "arXiv:1802.09477",
    note="the critic of classic `td3_bc` (twin critics, target smoothing, delayed actor)",
    section="baselines",
)
D4RL = Paper(
    "D4RL",
    "Fu et al.",
    2020,
    "D4RL: Datasets for Deep Data-Driven Reinforcement Learning",
    "arXiv:2004.07219",
    note="the dataset levels of `ascent collect` (random / medium / medium-replay / expert) and the normalised score",
    section="baselines",
)
GRPO = Paper(
    "GRPO",
    "Shao et al.",
    2024,
    "DeepSeekMath: Pushing the Limits of Mathematical Reasoning in Open Language Models",
    "arXiv:2402.03300",
    section="baselines",
)
DR_GRPO = Paper(
    "Dr. GRPO",
    "Liu et al.",
    2025,
    "Understanding R1-Zero-Like Training: A Critical Perspective",
    "arXiv:2503.20783",
    note="`algorithm.loss_agg=seq-mean-token-sum-norm` (its length-bias fix)",
    section="baselines",
)
RLOO = Paper(
    "RLOO",
    "Ahmadian et al.",
    2024,
    "Back to Basics: Revisiting REINFORCE Style Optimization for Learning from Human Feedback in LLMs",
    "arXiv:2402.14740",
    section="baselines",
)
LOOP = Paper(
    "LOOP",
    "Chen, Cusumano-Towner, Huval, Petrenko, Hamburger, Koltun & Krähenbühl",
    2025,
    "Reinforcement Learning for Long-Horizon Interactive LLM Agents",
    "arXiv:2502.01600",
    note="LOOP = PPO's per-token clipped loss with leave-one-out advantages and no critic: `algorithm.advantage=rloo` "
    "with loss `ppo_clip`, measured as `rloo`",
    section="baselines",
)
REINFORCE = Paper(
    "REINFORCE",
    "Williams",
    1992,
    "Simple Statistical Gradient-Following Algorithms for Connectionist Reinforcement Learning (Machine Learning 8)",
    "Machine Learning 8:229-256, 1992 (no arXiv id)",
    section="baselines",
)
REINFORCE_PP = Paper(
    "REINFORCE++",
    "Hu",
    2025,
    "REINFORCE++: A Simple and Efficient Approach for Aligning Large Language Models",
    "arXiv:2501.03262",
    section="baselines",
)
DAPO = Paper(
    "DAPO",
    "Yu et al.",
    2025,
    "DAPO: An Open-Source LLM Reinforcement Learning System at Scale",
    "arXiv:2503.14476",
    note="clip-higher, `ppo_clip`'s `algorithm.clip_high`",
    section="baselines",
)
GSPO = Paper(
    "GSPO",
    "Zheng et al.",
    2025,
    "Group Sequence Policy Optimization",
    "arXiv:2507.18071",
    section="baselines",
)
CISPO = Paper(
    "CISPO",
    "MiniMax",
    2025,
    "MiniMax-M1: Scaling Test-Time Compute Efficiently with Lightning Attention",
    "arXiv:2506.13585",
    note="fp32 output layer of the bf16 learner (`train.precision`)",
    section="baselines",
)
TIS = Paper(
    "TIS",
    "Yao et al.",
    2025,
    "Your Efficient RL Framework Secretly Brings You Off-Policy RL Training",
    "blog post (no arXiv id)",
    note="`algorithm.tis_cap` (also set by `rollout.precision=auto` when it picks bf16)",
    section="baselines",
)
LIGER_KERNEL = Paper(
    "Liger Kernel",
    "Hsu et al.",
    2024,
    "Liger Kernel: Efficient Triton Kernels for LLM Training",
    "arXiv:2410.10989",
    note=(
        "fused RMSNorm (`ascent/policy/fused.py`, `train.fused_norm`); native token log-probs without full-vocabulary "
        "temporaries (`ascent/policy/logprob.py`)"
    ),
    section="systems",
)
PYTORCH_DDP = Paper(
    "PyTorch DDP",
    "Li et al.",
    2020,
    "PyTorch Distributed: Experiences on Accelerating Data Parallel Training (VLDB 2020)",
    "arXiv:2006.15704",
    note="`learner.world_size=N`: learner ranks all-reduce gradients (`ascent/trainer/distributed.py`)",
    section="systems",
)
GAIL = Paper(
    "GAIL",
    "Ho & Ermon",
    2016,
    "Generative Adversarial Imitation Learning (NeurIPS 2016)",
    "arXiv:1606.03476",
)

# -- neural combinatorial optimisation (ascent.co, docs/combinatorial.md) ----------------------------------------------

ATTENTION_MODEL = Paper(
    "Attention Model",
    "Kool, van Hoof & Welling",
    2019,
    "Attention, Learn to Solve Routing Problems! (ICLR 2019)",
    "arXiv:1803.08475",
    note="instance distributions of TSP and CVRP (`ascent/co/problems.py`)",
)
POMO = Paper(
    "POMO",
    "Kwon et al.",
    2020,
    "POMO: Policy Optimization with Multiple Optima for Reinforcement Learning (NeurIPS 2020)",
    "arXiv:2010.16011",
    note="multi-start and 8-fold augmented decoding (`ascent/co/decoding.py`)",
)
RL4CO = Paper(
    "RL4CO",
    "Berto et al.",
    2023,
    "RL4CO: an Extensive Reinforcement Learning for Combinatorial Optimization Benchmark",
    "arXiv:2306.17100",
    note="the environments' distributions follow it; benchmarks/co_vs_rl4co.py measures against it",
    section="systems",
)
HGS_CVRP = Paper(
    "HGS-CVRP",
    "Vidal",
    2022,
    "Hybrid Genetic Search for the CVRP: Open-Source Implementation and SWAP* Neighborhood",
    "arXiv:2012.10384",
    note="CVRP reference solutions of the co test sets, through PyVRP (`ascent/co/solvers.py`)",
    section="systems",
)
PYVRP = Paper(
    "PyVRP",
    "Wouda, Lan & Kool",
    2024,
    "PyVRP: a high-performance VRP solver package (INFORMS Journal on Computing)",
    "arXiv:2403.13795",
    note="CVRP reference solver of the co test sets (`ascent/co/solvers.py`)",
    section="systems",
)
LKH3 = Paper(
    "LKH-3",
    "Helsgaun",
    2017,
    "An Extension of the Lin-Kernighan-Helsgaun TSP Solver for Constrained Traveling Salesman and Vehicle "
    "Routing Problems (technical report, Roskilde University)",
    "none (technical report)",
    note="TSP reference solutions of the co test sets, through elkai (`ascent/co/solvers.py`)",
    section="systems",
)

POPPY = Paper(
    "Poppy",
    "Grinsztajn et al.",
    2022,
    "Winner Takes It All: Training Performant RL Populations for Combinatorial Optimization (NeurIPS 2023)",
    "arXiv:2210.03475",
    note="co policy `population` and co loss `poppy` (`ascent/co/population.py`, `ascent/co/losses.py`)",
)
COMPASS = Paper(
    "COMPASS",
    "Chalumeau et al.",
    2023,
    "Combinatorial Optimization with Policy Adaptation using Latent Space Search (NeurIPS 2023)",
    "arXiv:2311.13569",
    note="co policy `compass`, co loss `compass`, CMA-ES latent search `ascent.co.compass.latent_search`",
)
PO_CO = Paper(
    "PO-CO",
    "Pan et al.",
    2025,
    "Preference Optimization for Combinatorial Optimization Problems (ICML 2025)",
    "arXiv:2505.08735",
    note="co loss `preference` (`ascent/co/preference.py`)",
)
CMA_ES = Paper(
    "CMA-ES",
    "Hansen & Ostermeier",
    2001,
    "Completely Derandomized Self-Adaptation in Evolution Strategies (Evolutionary Computation 9(2)); "
    "tutorial: Hansen 2016, arXiv:1604.00772",
    "arXiv:1604.00772",
    note="the latent search of COMPASS, through the `cma` package (`ascent/co/compass.py`)",
    section="systems",
)

# In-context and meta-RL rows of issue 39 built by ascent/incontext/subtask_graph.py, icpi.py and lamer.py.
MSGI = Paper(
    "MSGI",
    "Sohn, Woo, Choi & Lee",
    2020,
    "Meta Reinforcement Learning with Autonomous Inference of Subtask Dependencies (ICLR 2020)",
    "arXiv:2001.00248",
)
MTSGI = Paper(
    "MTSGI",
    "Sohn et al.",
    2022,
    "Fast Inference and Transfer of Compositional Task Structures for Few-shot Task Generalization (UAI 2022)",
    "arXiv:2205.12648",
)
ICPI = Paper(
    "ICPI",
    "Brooks, Walls, Lewis & Singh",
    2022,
    "In-Context Policy Iteration / Large Language Models Can Implement Policy Iteration (NeurIPS 2023)",
    "arXiv:2210.03821",
)
LAMER = Paper(
    "LaMer",
    "Jiang, Jiang, Teney, Moor & Brbić",
    2025,
    "Meta-RL Induces Exploration in Language Agents",
    "arXiv:2512.16848",
)
SEQUOIA = Paper(
    "SEQUOIA",
    "Xu, Wilder, Khalil & Tambe",
    2025,
    "Reinforcement learning with combinatorial actions for coupled restless bandits (ICLR 2025)",
    "arXiv:2503.01919",
)

# Applications (issue 42; docs/applications.md)
CAUSAL_ROUTER = Paper(
    "CausalRouter",
    "Tsiourvas, Sun & Perakis",
    2025,
    "Causal LLM routing: end-to-end regret minimization from observational data",
    "arXiv:2505.16037",
)
INFORMED_RL = Paper(
    "Informed RL",
    "Bogdoll, Qin, Nekolla, Abouelazm, Joseph & Zöllner",
    2024,
    "Informed Reinforcement Learning for Situation-Aware Traffic Rule Exceptions (ICRA 2024)",
    "arXiv:2402.04168",
)
DR_RL = Paper(
    "DR-RL",
    "Erden",
    2025,
    "Dynamic Rank Reinforcement Learning for Adaptive Low-Rank Multi-Head Self Attention in Large Language Models",
    "arXiv:2512.15973",
)
PIBR = Paper(
    "PIBR",
    "Lin, Zhu, Li, Li, Qiao, Poupart, Zha & Wang",
    2025,
    "Policy-Conditioned Policies for Multi-Agent Task Solving (programmatic iterated best response)",
    "arXiv:2512.21024",
)
CSRO = Paper(
    "CSRO",
    "Hennes, Li, Schultz & Lanctot",
    2026,
    "Code-Space Response Oracles: Generating Interpretable Multi-Agent Policies with Large Language Models",
    "arXiv:2603.10098",
)
PSRO = Paper(
    "PSRO",
    "Lanctot, Zambaldi, Gruslys, Lazaridou, Tuyls, Pérolat, Silver & Graepel",
    2017,
    "A Unified Game-Theoretic Approach to Multiagent Reinforcement Learning",
    "arXiv:1711.00832",
    note="the population, meta-game and best-response loop of CSRO (`ascent/applications/code_psro.py`)",
)

# Methods the newer pieces build on, cited in their docstrings and docs (not pieces of their own)
FQL = Paper(
    "FQL",
    "Park, Li & Levine",
    2025,
    "Flow Q-Learning",
    "arXiv:2502.02538",
    note="a one-step policy distilled from a 10-step flow solve; FAN's alternative (`ascent/offline/fan.py`)",
)
MEAN_FLOWS = Paper(
    "MeanFlow",
    "Geng, Deng, Bai, Kolter & He",
    2025,
    "Mean Flows for One-step Generative Modeling",
    "arXiv:2505.13447",
    note="the average-velocity identity MeanFlowQL's policy is trained with (`ascent/offline/meanflow_ql.py`)",
)
MAML = Paper(
    "MAML",
    "Finn, Abbeel & Levine",
    2017,
    "Model-Agnostic Meta-Learning for Fast Adaptation of Deep Networks",
    "arXiv:1703.03400",
    note="the inner/outer loop Meta-RTL's first-order meta-gradient follows (`ascent/incontext/meta_rtl.py`)",
)
ATTENTION_SINKS = Paper(
    "StreamingLLM",
    "Xiao, Tian, Chen, Han & Lewis",
    2023,
    "Efficient Streaming Language Models with Attention Sinks",
    "arXiv:2309.17453",
    note="the sink entries ReLIC's trial transformer learns (`ascent/incontext/relic.py`)",
)
NEUR2SP = Paper(
    "Neur2SP",
    "Dumouchelle, Patel, Khalil & Bodur",
    2022,
    "Neur2SP: Neural Two-Stage Stochastic Programming",
    "arXiv:2205.12006",
    note="the MILP embedding of a ReLU network SEQUOIA reuses (`ascent/co/sequoia.py`)",
)
IMPLICIT_BC = Paper(
    "Implicit BC",
    "Florence et al.",
    2021,
    "Implicit Behavioral Cloning",
    "arXiv:2109.00137",
    note="the derivative-free optimiser BR-RCRL's actions are chosen with (`ascent/offline/br_rcrl.py`)",
)
B_PREF = Paper(
    "B-Pref",
    "Lee, Smith, Dragan & Abbeel",
    2021,
    "B-Pref: Benchmarking Preference-Based Reinforcement Learning",
    "arXiv:2111.03026",
    note="the synthetic-preference protocol (segment returns, flipped labels) of `ascent/offline/preferences.py`",
)
SIMSIAM = Paper(
    "SimSiam",
    "Chen & He",
    2020,
    "Exploring Simple Siamese Representation Learning",
    "arXiv:2011.10566",
    note="the self-predictive loss of REED's dynamics-aware representation (`ascent/offline/reed.py`)",
)
REED_COLL = Paper(
    "REED (CoRL 2023)",
    "Metcalf, Sarabia, Mackraz & Theobald",
    2023,
    "Sample-Efficient Preference-based Reinforcement Learning with Dynamics Aware Rewards",
    "arXiv:2402.17975",
    note="the extended version of REED (arXiv:2211.06527), cited by `ascent/offline/reed.py`",
)
GORL = Paper(
    "GoRL",
    "Zhang, Wan, Chen, Yu, Tsang & An",
    2025,
    "GoRL: An Algorithm-Agnostic Framework for Online Reinforcement Learning with Generative Policies",
    "arXiv:2512.02581",
)
HDPO = Paper(
    "HDPO",
    "Alvo, Russo, Kanoria & Lee",
    2023,
    "Deep reinforcement learning for inventory networks: toward reliable policy optimization (first version: "
    "Neural inventory control in networks via hindsight differentiable policy optimization)",
    "arXiv:2306.11246",
)
PSDRL = Paper(
    "PSDRL",
    "Sasso, Conserva & Rauber",
    2023,
    "Posterior Sampling for Deep Reinforcement Learning (ICML 2023)",
    "arXiv:2305.00477",
)
RPG = Paper(
    "RPG",
    "Huang, Liang, Ling, Li, Gan & Su",
    2023,
    "Reparameterized Policy Learning for Multimodal Trajectory Optimization (ICML 2023)",
    "arXiv:2307.10710",
)
# -- issue 42: reward-design and multimodal reward rows (ascent/rewards/alignment.py, temporal.py, gui_point.py;
#    ascent/generative/) --
TAT_R1 = Paper(
    "TAT-R1",
    "Li, Zheng, Song & Yang",
    2025,
    "TAT-R1: Terminology-Aware Translation with Reinforcement Learning and Word Alignment",
    "arXiv:2505.21172",
)
IBM_MODEL_1 = Paper(
    "IBM Model 1",
    "Brown, Della Pietra, Della Pietra & Mercer",
    1993,
    "The Mathematics of Statistical Machine Translation: Parameter Estimation (Computational Linguistics 19(2))",
    "none (predates arXiv)",
    note="the word aligner of `term_align` (EM on the task's parallel corpus)",
)
AUDIOMAP = Paper(
    "AudioMap",
    "the AudioMap authors (github.com/ryysayhi/AudioMap)",
    2026,
    "AudioMap: Cloze-and-Choice Reinforcement Learning for Time-Aware Dense Audio Captioning",
    "arXiv id not found by this session's search (project: github.com/ryysayhi/AudioMap)",
)
SE_GUI = Paper(
    "SE-GUI",
    "Yuan, Zhang, Li, Cai, Yao, Chen, Wang, Hou, Chen, Jiang & Li",
    2025,
    "Enhancing Visual Grounding for GUI Agents via Self-Evolutionary Reinforcement Learning",
    "arXiv:2505.12370",
)
GUI_G2 = Paper(
    "GUI-G²",
    "Tang, Gu, Lu, Liu, Shen, Meng, Wang, Zhang, Shen, Lu, Xiao & Zhuang",
    2025,
    "GUI-G²: Gaussian Reward Modeling for GUI Grounding",
    "arXiv:2507.15846",
)
RAVEN = Paper(
    "RAVEN / CM-GRPO",
    "Lu, Zuo & Deng",
    2026,
    "RAVEN: Real-time Autoregressive Video Extrapolation with Consistency-model GRPO",
    "arXiv:2605.15190",
)
CONSISTENCY_MODELS = Paper(
    "Consistency Models",
    "Song, Dhariwal, Chen & Sutskever",
    2023,
    "Consistency Models (ICML 2023)",
    "arXiv:2303.01469",
    note="the toy 2-D consistency model and its multistep sampler (`ascent/generative/consistency.py`)",
)
PAMC = Paper(
    "PAMC",
    "Shihab, Akter & Sharma",
    2025,
    "What Fundamental Structure in Reward Functions Enables Efficient Sparse-Reward Learning?",
    "arXiv:2509.03790",
)
P2R = Paper(
    "P2R",
    "Wang, Liu & Jin",
    2023,
    "Is RLHF More Difficult than Standard RL? A Theoretical Perspective (NeurIPS 2023)",
    "arXiv:2306.14111",
)
CONSTRAINED_IRL = Paper(
    "Constrained IRL",
    "Schlaginhaufen & Kamgarpour",
    2023,
    "Identifiability and Generalizability in Constrained Inverse Reinforcement Learning (ICML 2023)",
    "arXiv:2306.00629",
)
WEIGHTED_CONFORMAL = Paper(
    "Weighted conformal",
    "Tibshirani, Barber, Candes & Ramdas",
    2019,
    "Conformal Prediction Under Covariate Shift (NeurIPS 2019)",
    "arXiv:1904.06019",
    note="the weighted split-conformal quantile of `ascent/applications/pamc.py` (`conformal_sets`)",
)
SKIPPER = Paper(
    "Skipper",
    "Zhao, Alver, van Seijen, Laroche, Precup & Bengio",
    2024,
    "Consciousness-Inspired Spatio-Temporal Abstractions for Better Generalization in Reinforcement Learning "
    "(ICLR 2024)",
    "arXiv:2310.00229",
)
ONI = Paper(
    "ONI",
    "Zheng, Henaff, Zhang, Grover & Amos",
    2024,
    "Online Intrinsic Rewards for Decision Making Agents from Large Language Model Feedback",
    "arXiv:2410.23022",
)
ROBUST_SUBTASK = Paper(
    "Robust subtask learning",
    "Jothimurugan, Hsu, Bastani & Alur",
    2023,
    "Robust Subtask Learning for Compositional Generalization",
    "arXiv:2302.02984",
)
COREP = Paper(
    "COREP",
    "Zhang, Li, Yang & Lu",
    2024,
    "Tackling Non-Stationarity in Reinforcement Learning via Causal-Origin Representation (ICML 2024)",
    "arXiv:2306.02747",
)
GAT = Paper(
    "GAT",
    "Veličković, Cucurull, Casanova, Romero, Liò & Bengio",
    2018,
    "Graph Attention Networks (ICLR 2018)",
    "arXiv:1710.10903",
)
VARIBAD = Paper(
    "VariBAD",
    "Zintgraf, Shiarlis, Igl, Schulze, Gal, Hofmann & Whiteson",
    2020,
    "VariBAD: A Very Good Method for Bayes-Adaptive Deep RL via Meta-Learning (ICLR 2020)",
    "arXiv:1910.08348",
)

MLE_AGENT_RL = Paper(
    "MLE-agent RL",
    "Yang, He-Yueya & Liang",
    2025,
    "Reinforcement Learning for Machine Learning Engineering Agents",
    "arXiv:2509.01684",
    note="duration-aware gradient updates (`duration_aware`) and instrumented partial credit (`experiment_world`)",
)
COMPLEMENTARY_RL = Paper(
    "Complementary RL",
    "Muhtar, Liu, Gao, Wang, Xiong, Huang, Yang, Su, Wang, Pan & Zheng",
    2026,
    "Complementary Reinforcement Learning",
    "arXiv:2603.17621",
    note="an experience extractor co-trained with the actor, rewarded by the actor's success with vs without it",
)
