"""Shared fixtures of the Ray runtime tests: each test module starts its own local Ray instance (2 CPUs,
no dashboard) and shuts it down after its last test."""

from __future__ import annotations

import pytest
import ray


@pytest.fixture(scope="module")
def ray_cluster():
    ray.init(num_cpus=2, include_dashboard=False)
    yield
    ray.shutdown()
