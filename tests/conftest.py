import numpy as np
import pytest

import queuetheory as qt


@pytest.fixture
def llama():
    """Seed 004's Llama-3-70B batch-time fit (ms)."""
    return qt.PiecewiseLinearTime(c=45.5, a=0.30, b0=64)


def classic_policies(budget=256):
    p = qt.policies
    return [
        p.Sarathi(budget), p.Sarathi(budget, order="sjf_total"), p.Orca(budget),
        p.Orca(budget, chunk=False), p.VLLMVanilla(budget), p.FasterTransformer(budget),
        p.FasterTransformer(budget, mode="request", max_reqs=8),
        p.KFCFS(p.Sarathi(budget, order="sjf_prompt"), budget, budget),
        p.StaticPriority(budget, [1, 0]),
    ]


@pytest.fixture
def rng():
    return np.random.default_rng(12345)
