"""A seeded, resumable sampler over dataset rows: a fresh permutation per epoch, a cursor into it."""

from __future__ import annotations

import random
from typing import Any


class RowSampler:
    """Yields row indices without replacement within an epoch; `state_dict` restores the cursor exactly."""

    def __init__(self, num_rows: int, seed: int) -> None:
        if num_rows <= 0:
            raise ValueError("the dataset is empty: nothing to sample")
        self.num_rows, self.seed = num_rows, seed
        self.epoch, self.position = 0, 0
        self._order = self._permutation(0)

    def _permutation(self, epoch: int) -> list[int]:
        order = list(range(self.num_rows))
        random.Random(self.seed * 1_000_003 + epoch).shuffle(order)
        return order

    def next(self, k: int) -> list[int]:
        """The next k indices (crossing into a new epoch when needed)."""
        out: list[int] = []
        while len(out) < k:
            if self.position == self.num_rows:
                self.epoch, self.position = self.epoch + 1, 0
                self._order = self._permutation(self.epoch)
            take = min(k - len(out), self.num_rows - self.position)
            out.extend(self._order[self.position : self.position + take])
            self.position += take
        return out

    def state_dict(self) -> dict[str, Any]:
        return {"num_rows": self.num_rows, "seed": self.seed, "epoch": self.epoch, "position": self.position}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state["num_rows"] != self.num_rows:
            raise ValueError(
                f"the checkpoint's data has {state['num_rows']} rows, this dataset {self.num_rows}: "
                "resume needs the same data"
            )
        self.seed, self.epoch, self.position = state["seed"], state["epoch"], state["position"]
        self._order = self._permutation(self.epoch)
