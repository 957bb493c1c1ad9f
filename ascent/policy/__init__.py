"""Model + tokenizer backends and teacher-forced log-probs."""

from ascent.policy.model import Policy, build_policy, count_parameters, load_hf, token_logprobs
from ascent.policy.tokenizer import char_tokenizer

__all__ = ["Policy", "build_policy", "char_tokenizer", "count_parameters", "load_hf", "token_logprobs"]
