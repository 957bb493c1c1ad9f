"""TextWorld games as an `Env`: text adventures generated offline with the `textworld` package
(`pip install 'ascent[agents]'`, or `pip install textworld`).

A game is described by a `GameSpec` (rooms, objects, quest length, seed) and generated once with
textworld's generator (`textworld.generator.make_game` + `compile_game`, the Python form of `tw-make`),
into `$ASCENT_CACHE/textworld/<hash of the spec and the textworld version>/` (default cache root
`~/.cache/ascent`). Generation is deterministic given the spec, and atomic: the game is built in a
temporary folder next to its final place and renamed into it, so concurrent processes never see half a
game. `SIZES` scales from `tiny` (one room, a one-step quest) to `large` (8 rooms, an 8-step quest).

Action syntax: one command per model turn, inside `<action>...</action>` (the agent loop should stop on
`STOP_STRINGS`); without the tags the first non-empty line is the command. The command must start with
one of the game's verbs (`take`, `open`, `go`, ...; `ALIASES` adds `x`, `i`, `l`, `get` and bare
directions); anything else, an empty turn included, gets an error observation and does not advance the
game (this also keeps interpreter meta-commands such as `restart`, `quit` or `save` away from it).
Reward: the increase of the game's score divided by its maximum score (`reward="score"`, so an episode's
return is its final score fraction, 1 when won), 1 on the winning step only (`reward="win"`), or the
game's own progress (`reward="progress"`, a dense turn-level reward for the multi-turn recipe study, Wang &
Ammanabrolu 2025, arXiv:2510.01132): with L the walkthrough's length and n_t the length of textworld's
shortest remaining plan (`policy_commands`) after turn t, r_t = (n_{t-1} - n_t) / L (n = 0 once won; a lost
game takes back what was gained), so a step toward the goal earns 1/L, a step away -1/L, and an episode's
return is the fraction of the plan done, 1 when won (generated games score only the win, so `score` is as
sparse as `win` on them). The
episode ends when the game is won or lost, or after `max_steps` turns. Every step's info has the
command, known_verb (it reached the game), moves, steps, score, max_score, won and lost; the first
observation's info has the quest's walkthrough. `show_commands` lists the admissible commands after each
observation (an easier game for small models).

>>> parse_command("I should open it.\\n<action>Open  the Chest</action>")
'open the chest'
>>> parse_command("take key\\nthen go north"), parse_command("  "), parse_command("<action>")
('take key', None, None)
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
import threading
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal, Optional, Union

from ascent.envs.base import Env, Observation, StepResult
from ascent.policy.pretrained import default_cache_root

ACTION_OPEN, ACTION_CLOSE = "<action>", "</action>"
STOP_STRINGS = (ACTION_CLOSE,)
"""Stop strings for `AgentConfig.stop_strings`: a model turn ends after its command."""
ALIASES = ("x", "i", "l", "get", "north", "south", "east", "west", "n", "s", "e", "w")
"""Command words accepted besides the game's own verbs (the Inform parser understands them)."""
MAX_COMMAND_CHARS = 120
"""Longer commands are cut (a model rambling on one line)."""
FORMAT_VERSION = 1
"""Part of the cache key: bump when the generation recipe changes."""
INSTALL_HINT = "textworld is not installed: pip install 'ascent[agents]' (or pip install textworld)"
_ACTION = re.compile(re.escape(ACTION_OPEN) + r"(.*?)(?:" + re.escape(ACTION_CLOSE) + r"|$)", re.DOTALL)
_LOCK = threading.RLock()
"""textworld's logic engine and its grammar parser (tatsu) are not thread-safe: every call into textworld
(generation, loading, reset, step) holds this lock. A step takes about a millisecond."""
NO_COMMAND = (
    f"Error: no command found. Reply with one command inside {ACTION_OPEN}...{ACTION_CLOSE}, "
    f"e.g. {ACTION_OPEN}look{ACTION_CLOSE}."
)


@dataclass(frozen=True)
class GameSpec:
    """A generated game: its world size, quest and seed (the task of a `TextWorldEnv` episode)."""

    nb_rooms: int = 2
    """Rooms of the world map."""
    nb_objects: int = 4
    """Objects in the world (the quest's, then distractors up to this number)."""
    quest_length: int = 2
    """Actions of the winning walkthrough (the quest's length)."""
    seed: int = 0
    """Seed of the map, objects, quest and text."""

    def __post_init__(self) -> None:
        for name in ("nb_rooms", "nb_objects", "quest_length"):
            if getattr(self, name) < 1:
                raise ValueError(f"GameSpec.{name} must be >= 1, got {getattr(self, name)}")


REWARD_KINDS = ("score", "win", "progress")
"""The step rewards `TextWorldEnv` gives (module docstring)."""

SIZES: dict[str, GameSpec] = {
    "tiny": GameSpec(nb_rooms=1, nb_objects=1, quest_length=1),
    "small": GameSpec(nb_rooms=2, nb_objects=4, quest_length=2),
    "medium": GameSpec(nb_rooms=4, nb_objects=8, quest_length=4),
    "large": GameSpec(nb_rooms=8, nb_objects=16, quest_length=8),
}
"""Named scales (generation takes about 1-3 s per game, once; 20 rooms and a 20-step quest take minutes)."""


def game_specs(num: int, size: Union[str, GameSpec] = "small", seed: int = 0) -> list[GameSpec]:
    """`num` games of one size (a `SIZES` name or a spec), seeds seed .. seed + num - 1.

    >>> [s.seed for s in game_specs(3, "tiny", seed=5)], game_specs(1, "large")[0].nb_rooms
    ([5, 6, 7], 8)
    """
    if isinstance(size, str) and size not in SIZES:
        raise ValueError(f"unknown TextWorld size {size!r}; valid: {sorted(SIZES)}")
    base = SIZES[size] if isinstance(size, str) else size
    return [GameSpec(base.nb_rooms, base.nb_objects, base.quest_length, seed + k) for k in range(num)]


def parse_command(text: str) -> Optional[str]:
    """The command of a model turn: the inside of the first `<action>` block (to `</action>` or the end),
    else the whole text; its first non-empty line, lower-cased, whitespace collapsed, outer quotes and a
    final period dropped, cut to MAX_COMMAND_CHARS. None when empty."""
    m = _ACTION.search(text)
    body = m.group(1) if m is not None else text
    line = next((ln for ln in body.splitlines() if ln.strip()), "")
    cmd = " ".join(line.split()).strip("\"'`").rstrip(".").strip().lower()
    return cmd[:MAX_COMMAND_CHARS] or None


def _textworld() -> Any:
    try:
        import textworld
        import textworld.generator  # noqa: F401
    except ImportError as e:
        raise ImportError(f"{INSTALL_HINT} ({e})") from e
    return textworld


def spec_key(spec: GameSpec) -> str:
    """Cache folder name of a spec: a hash of its fields, the textworld version and FORMAT_VERSION."""
    tw = _textworld()
    payload = json.dumps({**asdict(spec), "textworld": tw.__version__, "format": FORMAT_VERSION}, sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


def make_game(spec: GameSpec, cache_dir: Optional[Union[str, Path]] = None) -> Path:
    """Path of the compiled game (`game.z8`, with `game.json` beside it) for `spec`, generated on first use.

    cache_dir: the folder holding one sub-folder per game (default `$ASCENT_CACHE/textworld`).
    """
    tw = _textworld()
    root = Path(cache_dir) if cache_dir is not None else default_cache_root() / "textworld"
    final = root / spec_key(spec)
    with _LOCK:
        if not ((final / "game.z8").is_file() and (final / "game.json").is_file()):
            _generate(tw, spec, root, final)
    return final / "game.z8"


def _generate(tw: Any, spec: GameSpec, root: Path, final: Path) -> None:
    """Build the game in a temporary folder under `root`, then rename it to `final` (atomic)."""
    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}-", dir=root))
    try:
        opts = tw.GameOptions()
        opts.seeds = spec.seed
        opts.nb_rooms, opts.nb_objects, opts.quest_length = spec.nb_rooms, spec.nb_objects, spec.quest_length
        opts.path = str(tmp / "game.z8")
        game = tw.generator.make_game(opts)
        tw.generator.compile_game(game, opts)
        (tmp / "spec.json").write_text(json.dumps({**asdict(spec), "textworld": tw.__version__}, indent=1))
        try:
            os.rename(tmp, final)
        except OSError:
            if not (final / "game.z8").is_file():  # not a concurrent winner: a real failure
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def clean_feedback(text: str) -> str:
    """A game message without the interpreter's prompt / status line and end-of-game menu.

    >>> clean_feedback("\\nYou take the key.\\n\\n\\n\\n>     -= Attic =-0/1")
    'You take the key.'
    """
    text = text.split("\n>")[0]
    text = re.sub(r"Would you like to RESTART.*", "", text, flags=re.DOTALL)
    return re.sub(r"\n{3,}", "\n\n", text).strip()


class TextWorldEnv(Env):
    """A TextWorld game per episode: `reset(spec)` (a `GameSpec`, or the path of a compiled `.z8` game
    with its `.json` beside it), then one command per `step`. Each instance runs its own interpreter
    (jericho loads a private copy of frotz); calls into textworld are serialised by a module lock, so
    episodes may be reset and stepped from several threads (the agent loop's `astep`)."""

    def __init__(
        self,
        cache_dir: Optional[Union[str, Path]] = None,
        max_steps: Optional[int] = None,
        reward: Literal["score", "win", "progress"] = "score",
        show_commands: bool = False,
    ) -> None:
        if reward not in REWARD_KINDS:
            raise ValueError(f"reward must be one of {', '.join(REWARD_KINDS)}, got {reward!r}")
        if max_steps is not None and max_steps < 1:
            raise ValueError(f"max_steps must be >= 1 or None, got {max_steps}")
        self.cache_dir, self.max_steps, self.reward, self.show_commands = cache_dir, max_steps, reward, show_commands
        self._game: Any = None  # the textworld environment
        self._path: Optional[Path] = None
        self.verbs: frozenset[str] = frozenset()
        self.walkthrough: list[str] = []
        self.max_score, self.score, self.moves, self.steps, self.done = 1, 0, 0, 0, False
        self.remaining = 0
        """`reward="progress"`: the length of the shortest plan left (textworld's `policy_commands`)."""

    def _load(self, path: Path) -> tuple[Any, Any]:
        """(first game state, textworld Game) of `path`, reusing the interpreter when the game is the same."""
        tw = _textworld()
        with _LOCK, warnings.catch_warnings():
            # jericho knows no score/move detection for generated games; textworld's Inform7 wrapper provides both
            warnings.filterwarnings("ignore", message=".*is not fully supported.*")
            if self._game is None or path != self._path:
                self.close()
                infos = tw.EnvInfos(
                    description=True,
                    objective=True,
                    max_score=True,
                    score=True,
                    moves=True,
                    won=True,
                    lost=True,
                    admissible_commands=self.show_commands,
                    policy_commands=self.reward == "progress",
                    extras=["walkthrough"],
                )
                self._game = tw.start(str(path), request_infos=infos)
                self._path = path
            self._game.seed(0)
            return self._game.reset(), tw.Game.load(str(path.with_suffix(".json")))

    def reset(self, task: Union[GameSpec, str, Path]) -> Observation:
        path = make_game(task, self.cache_dir) if isinstance(task, GameSpec) else Path(task)
        state, game = self._load(path)
        self.verbs = frozenset(game.verbs) | frozenset(ALIASES)
        self.walkthrough = list(game.walkthrough or [])
        self.max_score, self.score, self.moves = (
            max(int(state.max_score or 1), 1),
            int(state.score or 0),
            int(state.moves or 0),
        )
        self.steps, self.done, self.remaining = 0, False, len(self.walkthrough)
        text = (
            "You are playing a text adventure. "
            f"Reply with exactly one command per turn inside {ACTION_OPEN}...{ACTION_CLOSE}, "
            f"e.g. {ACTION_OPEN}open box{ACTION_CLOSE}. "
            f"Commands start with a verb: {', '.join(sorted(game.verbs))}.\n\n"
            f"Goal: {state.objective.strip()}\n\n{clean_feedback(state.description)}"
        )
        info = {
            "game": str(path),
            "objective": state.objective,
            "max_score": self.max_score,
            "walkthrough": list(self.walkthrough),
        }
        return Observation(text=self._with_commands(text, state), info=info)

    def step(self, action: str) -> StepResult:
        if self._game is None:
            raise RuntimeError(f"{type(self).__name__}.step called before reset")
        if self.done:
            raise RuntimeError(f"{type(self).__name__}.step called after the episode ended; call reset")
        self.steps += 1
        cmd = parse_command(action)
        if cmd is None or cmd.split()[0] not in self.verbs:
            why = (
                NO_COMMAND
                if cmd is None
                else (
                    f"Error: unknown command {cmd!r}. "
                    f"Start it with one of: {', '.join(sorted(self.verbs - set(ALIASES)))}."
                )
            )
            self.done = self.max_steps is not None and self.steps >= self.max_steps
            return StepResult(why, 0.0, self.done, self._info(cmd, None, known_verb=False))
        with _LOCK:
            state, score, _ = self._game.step(cmd)
        gained = int(score or 0) - self.score
        self.score, self.moves = int(score or 0), int(state.moves or 0)
        won, lost = bool(state.won), bool(state.lost)
        self.done = won or lost or (self.max_steps is not None and self.steps >= self.max_steps)
        reward = self._reward(gained, won, lost, state.get("policy_commands"))
        return StepResult(
            self._with_commands(clean_feedback(state.feedback), state),
            float(reward),
            self.done,
            self._info(cmd, state, known_verb=True),
        )

    def _reward(self, gained: int, won: bool, lost: bool, plan: Optional[list[str]]) -> float:
        """The step's reward (see the module docstring); `plan`: textworld's shortest plan left after the step."""
        if self.reward == "score":
            return gained / self.max_score
        if self.reward == "win":
            return float(won)
        total = max(len(self.walkthrough), 1)
        left = 0 if won else total if lost else self.remaining if plan is None else len(plan)
        reward, self.remaining = (self.remaining - left) / total, left
        return reward

    def progress(self) -> float:
        """The fraction of the plan done, 1 - remaining / walkthrough length (`reward="progress"`)."""
        return 1.0 - self.remaining / max(len(self.walkthrough), 1)

    def _info(self, cmd: Optional[str], state: Any, known_verb: bool) -> dict[str, Any]:
        won, lost = (bool(state.won), bool(state.lost)) if state is not None else (False, False)
        extra = {"progress": self.progress()} if self.reward == "progress" else {}
        return extra | {
            "command": cmd,
            "known_verb": known_verb,
            "moves": self.moves,
            "steps": self.steps,
            "score": self.score,
            "max_score": self.max_score,
            "won": won,
            "lost": lost,
        }

    def _with_commands(self, text: str, state: Any) -> str:
        if not self.show_commands or self.done or not state.get("admissible_commands"):
            return text
        return f"{text}\n\nPossible commands: {', '.join(state['admissible_commands'])}."

    def close(self) -> None:
        """Stop the interpreter (reset starts a new one when needed)."""
        if self._game is not None:
            with _LOCK:
                self._game.close()
            self._game, self._path = None, None
