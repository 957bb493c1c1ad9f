"""`peer_consensus`: majority votes by hand (TTRL without peers), peers' greedy answers as the majority, a peer
run directory reloaded when its latest checkpoint moves, the state round trip, bad specs."""

from __future__ import annotations

import pytest
import torch

from ascent.config.loader import load_config
from ascent.policy.model import build_policy
from ascent.rewards.peers import answer_of, consensus_rewards, majority
from ascent.rewards.runner import RewardRunner, resolve_reward
from ascent.tasks import load_task
from ascent.typed import ConfigError

pytestmark = pytest.mark.usefixtures("one_thread")
TINY = ["model.hidden_size=32", "model.num_layers=2", "model.num_heads=2", "model.num_kv_heads=1"]


@pytest.fixture(scope="module")
def peer_folders(tmp_path_factory):
    """Two tiny scratch models saved as HF folders (different seeds: different answers)."""
    cfg = load_config("default", [*TINY, "model.intermediate_size=64"])
    tokenizer = load_task(cfg.data, 0).tokenizer
    root = tmp_path_factory.mktemp("peers")
    for seed in (0, 1):
        build_policy(cfg.model, tokenizer, seed).save(root / f"m{seed}")
    return root


def test_majority_and_rewards_by_hand():
    assert majority(["3", "5", "5", "3", None]) == ("3", 0.4)  # tie 2-2: the first voted
    rewards, top, share = consensus_rewards(["12", "12", "13", None, "12"], [], True, 0.0)
    assert (rewards, top, share) == ([1.0, 1.0, 0.0, 0.0, 1.0], "12", 0.6)
    assert consensus_rewards(["1", "2", "3", "4"], [], True, 0.5)[0] == [None] * 4  # share 0.25 < 0.5
    rewards, top, share = consensus_rewards(["9", "8"], ["8", "8", "7", "9"], True, 0.0)  # 8: 3 of 6 votes
    assert (rewards, top, share) == ([0.0, 1.0], "8", 0.5)
    assert answer_of("x = 3.50 and 4", "last_number") == "4" and answer_of("   ") is None


def test_ttrl_majority_in_the_runner_reads_no_label():
    runner = RewardRunner(["peer_consensus", "exact_answer"], [1.0, 0.0])
    completions = ["46", "46", "47", "46", "12", "13", "13", "13"]
    prompts = ["12+34="] * 4 + ["5+7="] * 4
    rows = [{"answer": a, "group": g} for a, g in zip(["46"] * 4 + ["12"] * 4, [0] * 4 + [1] * 4)]
    result = runner.score(prompts, completions, rows)
    assert result.components[:, 0].tolist() == [1, 1, 0, 1, 0, 1, 1, 1]  # group 2: the wrong 13 is the majority
    assert result.components[:, 1].tolist() == [1, 1, 0, 1, 1, 0, 0, 0]  # the label says otherwise
    assert result.stats["peer_consensus/majority_share"] == pytest.approx(0.75)


def test_peers_greedy_answers_are_the_majority(peer_folders):
    reward = resolve_reward(f"peer_consensus(peers=[{peer_folders / 'm0'}], k=3, temperature=0, include_self=false)")
    prompts = ["12+34=", "5+7="]
    said = [votes[0] for votes in reward.peer_answers(prompts)]  # greedy: its 3 samples agree
    assert all(len(set(v)) == 1 and len(v) == 3 for v in reward.peer_answers(prompts))
    other = [(s or "") + "9" for s in said]
    out = reward([prompts[0]] * 2 + [prompts[1]] * 2, [said[0] or "", other[0], other[1], said[1] or ""])
    expect = [float(said[0] is not None), 0.0, 0.0, float(said[1] is not None)]
    assert out == expect
    assert reward.metrics()["peer_consensus/majority_share"] == (1.0 if all(said) else pytest.approx(0.5))


def test_a_peer_run_directory_is_reloaded_when_its_checkpoint_moves(peer_folders, tmp_path):
    import shutil

    run = tmp_path / "peer_run"
    (run / "checkpoints").mkdir(parents=True)
    (run / "config.yaml").write_text("name: peer\n")
    shutil.copytree(peer_folders / "m0", run / "checkpoints" / "step_1")
    (run / "checkpoints" / "latest").write_text("step_1")
    spec = f"peer_consensus(peers=[{run}], k=2, refresh_every=1, max_new_tokens=4)"
    reward = resolve_reward(spec)
    reward(["1+1="], ["2"])
    assert reward.reloads == 0
    shutil.copytree(peer_folders / "m1", run / "checkpoints" / "step_2")
    (run / "checkpoints" / "latest").write_text("step_2")
    reward(["1+1="], ["2"])
    assert reward.reloads == 1 and reward.peers[0].folder.name == "step_2"
    w1 = next(reward.peers[0].model.parameters()).clone()
    resumed = resolve_reward(spec.replace("refresh_every=1", "refresh_every=0"))
    (run / "checkpoints" / "latest").write_text("step_1")  # the restored state names the folder it used
    resumed.load_state_dict(reward.state_dict())
    assert resumed.peers[0].folder.name == "step_2" and torch.equal(next(resumed.peers[0].model.parameters()), w1)
    assert resumed.peer_answers(["3+4=", "9+9="]) == reward.peer_answers(["3+4=", "9+9="])  # same generator state


def test_a_cohort_peer_without_a_model_yet_starts_from_start_then_switches(peer_folders, tmp_path):
    """Members of a cohort name each other before either has saved anything: `start` stands in until the peer's
    first checkpoint, which the next refresh loads; without `start` such a peer is a configuration error."""
    import shutil

    run = tmp_path / "member_b"  # not created yet
    spec = f"peer_consensus(peers=[{run}], start={peer_folders / 'm0'}, k=2, refresh_every=1, max_new_tokens=4)"
    reward = resolve_reward(spec)
    assert reward.peers[0].folder == peer_folders / "m0"
    reward(["1+1="], ["2"])
    reward(["1+1="], ["2"])  # refresh: the run directory still has no model, the start stays
    assert reward.reloads == 0
    (run / "checkpoints").mkdir(parents=True)
    (run / "config.yaml").write_text("name: member_b\n")
    shutil.copytree(peer_folders / "m1", run / "checkpoints" / "step_5")
    (run / "checkpoints" / "latest").write_text("step_5")
    reward(["1+1="], ["2"])
    assert reward.reloads == 1 and reward.peers[0].folder == run / "checkpoints" / "step_5"
    with pytest.raises(ConfigError, match="is not a model"):
        resolve_reward(f"peer_consensus(peers=[{tmp_path / 'member_c'}])")


@pytest.mark.parametrize(
    "spec, message",
    [
        ("peer_consensus(include_self=false)", "with no peers"),
        ("peer_consensus(extract=regex)", "extract must be one of"),
        ("peer_consensus(min_share=2)", "min_share must be in"),
        ("peer_consensus(peers=[/nonexistent/peer])", "is not a model"),
    ],
)
def test_bad_specs(spec, message):
    with pytest.raises(ConfigError, match=message):
        resolve_reward(spec)
