"""Feasible by construction: every shipped policy, under both first-token conventions, with
and without a KV-memory limit, either runs a small random workload to the end — no
InfeasibleBatchError, no hang — or refuses the setting before it starts, saying why."""

import time
import warnings

import numpy as np
import pytest

import queuetheory as qt
from queuetheory.errors import UnsupportedSettingError

P = qt.policies
TM = qt.LinearMemoryTime(0.1, 0.01)


POLICIES = {
    "Sarathi": lambda: P.Sarathi(64),
    "Orca": lambda: P.Orca(64),
    "Orca whole": lambda: P.Orca(64, chunk=False),
    "VLLMVanilla": lambda: P.VLLMVanilla(64),
    "FasterTransformer": lambda: P.FasterTransformer(64),
    "FasterTransformer request": lambda: P.FasterTransformer(64, mode="request", max_reqs=4),
    "StaticPriority": lambda: P.StaticPriority(64, [1, 0]),
    "KFCFS": lambda: P.KFCFS(P.Sarathi(64), 64, 64),
    "MCSF": lambda: P.MCSF(),
    "FCFS": lambda: P.FCFS(),
    "AlphaProtection": lambda: P.AlphaProtection(0.2),
    "AMax": lambda: P.AMax(),
    "AMin": lambda: P.AMin(),
    "AMin dynamic": lambda: P.AMin(evict_key="dynamic"),
    "ARandom": lambda: P.ARandom(),
    "HSF": lambda: P.HSF(),
    "AEll": lambda: P.AEll(),
    "AdaptiveRobust": lambda: P.AdaptiveRobust(),
    "RAD": lambda: P.RAD((8, 8, 8)),
    "CycleScheduler": lambda: P.CycleScheduler((8, 8, 8)),
    "RequestLevel": lambda: P.RequestLevel(4),
    "PrefillOnly": lambda: P.PrefillOnly(),
    "DecodeOnly": lambda: P.DecodeOnly(),
    "SLAI": lambda: P.SLAI(64),
    "WAIT": lambda: P.WAIT((2, 2)),
    "NestedWAIT soft": lambda: P.NestedWAIT((4, 12), (2, 1)),
    "NestedWAIT gate": lambda: P.NestedWAIT((4, 12), (2, 1), overflow="gate"),
    "FCFSRestart": lambda: P.FCFSRestart(),
}


# Policies that may leave work by design (and say so with a CensoredRunWarning):
# α-protection's loop (Jaillet et al.'s benchmark, declared and then idle); a prefill node,
# which hands its requests over after the prompt.
STRANDS = {"AlphaProtection", "PrefillOnly"}


def _workload(seed):
    rng = np.random.default_rng(seed)
    n = 40
    arrival = np.sort(rng.uniform(0, 20, n))
    prompt = rng.integers(1, 30, n)
    output = rng.integers(1, 12, n)
    cls = rng.integers(0, 2, n)
    out = qt.Workload.from_arrays(arrival, prompt, output, cls, lo=np.maximum(1, output - 2),
                                  hi=output + 2)
    return out, int((prompt + output).max())


@pytest.mark.parametrize("first_token", ["prefill", "decode"])
@pytest.mark.parametrize("memory", [None, "tight"])
@pytest.mark.parametrize("name", list(POLICIES))
def test_every_policy_runs_feasibly_or_refuses(name, memory, first_token):
    for seed in range(2):
        wl, peak = _workload(seed)
        mem = None if memory is None else peak + 8
        policy = POLICIES[name]()
        start = time.perf_counter()
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", qt.CensoredRunWarning)
                res = qt.simulate(wl, policy, TM, memory=mem, first_token=first_token,
                                  max_iterations=20_000)
        except UnsupportedSettingError as e:
            assert f"memory={mem}" in str(e) and first_token in str(e)
            return
        assert time.perf_counter() - start < 10
        m = res.metrics
        if mem is not None:
            assert m["peak_memory"] <= mem
        assert m["iterations"] < 20_000, f"{name} did not finish: {m['unfinished']} left"
        if name not in STRANDS:
            assert m["unfinished"] == 0, f"{name} stranded {m['unfinished']} requests"


def test_the_issues_examples():
    """A_max under first_token="decode" (two one-token jobs, M = 2) no longer overflows; a
    policy refuses at start with a message that names the setting and why."""
    wl = qt.Workload.from_arrays([0, 0], [1, 1], [1, 1])
    res = qt.simulate(wl, P.AMax(), qt.UnitTime(), memory=2, first_token="decode")
    assert res.metrics["completed"] == 2 and res.metrics["peak_memory"] <= 2
    with pytest.raises(UnsupportedSettingError, match=r"memory=None.*needs a KV capacity"):
        qt.simulate(wl, P.AMax(), qt.UnitTime())
    with pytest.raises(UnsupportedSettingError, match="overflow='gate'"):
        qt.simulate(wl, P.NestedWAIT((1, 2), (1, 1)), qt.UnitTime(), memory=10)
