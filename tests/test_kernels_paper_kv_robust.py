"""The bulk rule ``future_peak_admission`` changes nothing.

MC-SF and its FCFS variant (Jaillet et al.) and A_max, A_min, H-SF, A_random (Chen, Ye,
Zhou) run once with ``fast_path=False`` (the policy decides every iteration) and once through
the rule, on many small random traces, in each paper's round model (``UnitTime``, integer
arrival rounds, Jaillet et al.'s conventions ``"ip"``/``"eq1"`` as ``first_token``; Chen et
al.'s paper instances through ``paper_trace``) and in seconds (an affine time model, Poisson
arrivals). Request stamps, the batch log, the TBT histogram, every metric and the policy's
random generator afterwards must be identical: the rule draws the policy's random numbers.
"""

import importlib

import numpy as np
import pytest
from test_fast_path import ANCHOR_TIME, _same_run

import queuetheory as qt
from queuetheory.errors import QueueTheoryError
from queuetheory.policies import HSF, MCSF, AMax, AMin, ARandom
from queuetheory.policies.kvcache import FCFS
from queuetheory.policies.robust_experiments import paper_trace
from queuetheory.rounds import CONVENTIONS
from queuetheory.workload import Trace

fpa = importlib.import_module("queuetheory.engine.kernels.future_peak_admission")   # the module


def _same(trace, make_policy, time_model, **kw):
    """``_same_run`` that also compares the policies' generators after the two runs, and
    what Chen et al.'s schedulers keep per request (the permutation keys σ, A_min's õ)."""
    made = []

    def make():
        made.append(make_policy())
        return made[-1]

    res, n_slow, n_fast = _same_run(trace, make, time_model, **kw)
    slow, fast = made
    assert slow.rng.bit_generator.state == fast.rng.bit_generator.state
    if hasattr(slow, "_ranked"):
        assert slow._ranked == fast._ranked
        np.testing.assert_array_equal(slow._rank[: slow._ranked], fast._rank[: fast._ranked])
    if isinstance(slow, AMin):          # õ > 0 for every request the policy has seen
        np.testing.assert_array_equal(np.trim_zeros(slow._lb, "b"), np.trim_zeros(fast._lb, "b"))
    return res, n_slow, n_fast


@pytest.fixture(params=["block", "jumps"])
def draws(request, monkeypatch):
    """The rule's fresh uniforms drawn as a block, or read by jumps at every tie-break (the
    threshold ``_JUMP`` at 1; at least one jump must be made)."""
    jumped = []
    if request.param == "jumps":
        class Counted(fpa._Jumps):
            def draws(self, state, pos):
                jumped.append(pos.size)
                return super().draws(state, pos)

        monkeypatch.setattr(fpa, "_JUMP", 1)
        monkeypatch.setattr(fpa, "_Jumps", Counted)
    yield request.param
    assert (request.param == "jumps") == bool(jumped)


def test_jumps_read_the_draws_of_the_block():
    """The draws read by jumps are numpy's PCG64 uniforms at those places, bit for bit, from
    any state, at the first and last place of blocks up to 70,000 long; the tables grow."""
    for seed in range(12):
        rng = np.random.default_rng(seed)
        rng.random(int(rng.integers(0, 5000)))
        state = rng.bit_generator.state["state"]
        jumps = fpa._Jumps(state["inc"])
        for width in (1, 7, 3000, 70_000):
            pos = np.unique(np.random.default_rng(seed).integers(0, width, 400))
            pos[0], pos[-1] = 0, width - 1
            state = rng.bit_generator.state["state"]["state"]
            ref = rng.random(width)[pos]
            np.testing.assert_array_equal(jumps.draws(state, pos) * 2.0 ** -53, ref)
        assert jumps.tables[0].size >= 70_000


def _random_trace(seed, n, *, rounds=False, slack=0, spread=0):
    """Prompts 1–40, outputs 1–30, arrivals Poisson (or integer rounds); intervals
    ``[o − spread, o + spread]`` clipped at 1; memory ``slack`` above the largest need."""
    rng = np.random.default_rng(seed)
    gaps = rng.exponential(0.5 if rounds else 0.03, n)
    arrival = np.floor(gaps.cumsum()) if rounds else gaps.cumsum()
    prompt = rng.integers(1, 41, n)
    output = rng.integers(1, 31, n)
    lo = np.maximum(1, output - rng.integers(0, spread + 1, n))
    hi = output + rng.integers(0, spread + 1, n)
    z = np.zeros(n, dtype=np.int64)
    trace = Trace(arrival, prompt, output, z, lo, hi, z)
    return trace, int((prompt + hi).max()) + slack


JAILLET = {
    "mcsf": MCSF,
    "fcfs": FCFS,
    "mcsf-cap2": lambda: MCSF(max_starts=2),
    "fcfs-cap1": lambda: FCFS(max_starts=1),
}


@pytest.mark.parametrize("convention", list(CONVENTIONS))
@pytest.mark.parametrize("name", list(JAILLET))
def test_mcsf_in_rounds_same_records(name, convention):
    for seed in range(6):
        trace, memory = _random_trace(seed, 50, rounds=True, slack=60)
        _, n_slow, n_fast = _same(trace, JAILLET[name], qt.UnitTime(), memory=memory,
                                  first_token=CONVENTIONS[convention], seed=seed)
        assert n_fast == 0 < n_slow                 # not one call to schedule


@pytest.mark.parametrize("first_token", ["prefill", "decode"])
def test_mcsf_in_seconds_and_without_memory_limit_same_records(first_token):
    for seed in range(4):
        trace, memory = _random_trace(seed, 60, slack=100)
        for m in (memory, None):
            res, _, n_fast = _same(trace, MCSF, ANCHOR_TIME, memory=m, first_token=first_token,
                                   seed=seed)
            assert n_fast == 0
            assert m is None or res.metrics["peak_memory"] <= m


def test_mcsf_skip_is_left_to_the_engine():
    trace, memory = _random_trace(3, 40, rounds=True, slack=30)
    _, n_slow, n_fast = _same(trace, lambda: MCSF(on_fail="skip"), qt.UnitTime(),
                              memory=memory)
    assert n_fast == n_slow


CHEN = {
    "amax": AMax,
    "amax-random": lambda: AMax(order="random"),
    "amin": AMin,
    "amin-dynamic": lambda: AMin(evict_key="dynamic", bound="generated+1"),
    "hsf": HSF,
    "arandom": ARandom,
}


@pytest.mark.parametrize("name", list(CHEN))
def test_chen_paper_instances_same_records(name):
    # all jobs at t = 0, the paper's round model; equal prompts make many ties
    rng = np.random.default_rng(11)
    for seed in range(8):
        n = int(rng.integers(5, 40))
        output = rng.integers(1, 12, n)
        trace = paper_trace(output, prompt=int(rng.integers(1, 4)),
                            hi=output + rng.integers(0, 3, n))
        memory = int((trace.prompt + trace.hi).max()) + int(rng.integers(0, 40))
        _, _, n_fast = _same(trace, CHEN[name], qt.UnitTime(), memory=memory,
                             first_token="prefill", seed=seed)
        assert n_fast == 0


@pytest.mark.parametrize("first_token", ["prefill", "decode"])
@pytest.mark.parametrize("name", list(CHEN))
def test_chen_online_arrivals_same_records(name, first_token):
    for seed in range(3):
        trace, memory = _random_trace(seed, 60, slack=50, spread=4)
        for time_model in (ANCHOR_TIME, qt.UnitTime()):
            _, _, n_fast = _same(trace, CHEN[name], time_model, memory=memory,
                                 first_token=first_token, seed=seed)
            assert n_fast == 0


def test_ties_of_fresh_draws_same_records(draws):
    # few distinct lengths and a tight memory: A_min and H-SF stop inside groups of equal
    # keys, where the uniforms they draw at every decision decide who is admitted
    for seed in range(10):
        rng = np.random.default_rng(seed)
        n = 80
        arrival = rng.exponential(0.02, n).cumsum()
        prompt, output = rng.integers(1, 30, n), rng.integers(1, 6, n)
        trace = qt.Workload.from_arrays(arrival, prompt, output)
        memory = int((prompt + output).max()) + 40
        for make in (AMin, HSF):
            _, _, n_fast = _same(trace, make, ANCHOR_TIME, memory=memory, seed=seed)
            assert n_fast == 0


def test_ties_in_a_long_queue_same_records(draws):
    # ids over many blocks of the rule's waiting counts (64 ids each), a queue hundreds long
    rng = np.random.default_rng(5)
    n = 900
    arrival = rng.exponential(0.004, n).cumsum()
    prompt, output = rng.integers(1, 30, n), rng.integers(1, 8, n)
    trace = qt.Workload.from_arrays(arrival, prompt, output)
    res, _, n_fast = _same(trace, HSF, ANCHOR_TIME, memory=int((prompt + output).max()) + 60)
    assert n_fast == 0
    waiting = res.batches["in_system"] - res.batches["decode_requests"]
    assert waiting.max() > 300


AMIN = {
    "static": AMin,
    "dynamic": lambda: AMin(evict_key="dynamic"),
    "dynamic-plus-one": lambda: AMin(evict_key="dynamic", bound="generated+1"),
    "static-plus-one": lambda: AMin(bound="generated+1"),
}


@pytest.mark.parametrize("first_token", ["prefill", "decode"])
@pytest.mark.parametrize("name", list(AMIN))
def test_amin_evictions_same_records(name, first_token, draws):
    # lower bounds below the true lengths: jobs outlive them, memory overflows, A_min evicts
    # (restart) and raises their bounds; every decision still goes through the rule
    restarts = 0
    for seed in range(3):
        trace, memory = _random_trace(seed, 60, slack=20, spread=8)
        for time_model in (ANCHOR_TIME, qt.UnitTime()):
            res, _, n_fast = _same(trace, AMIN[name], time_model, memory=memory,
                                   first_token=first_token, seed=seed)
            assert n_fast == 0
            restarts += res.metrics["restarts"]
    assert restarts > 0


def test_amin_evictions_cut_by_horizon_and_iteration_cap_same_records():
    for seed in range(4):
        trace, memory = _random_trace(seed, 80, slack=10, spread=10)
        for cut in ({"horizon": float(trace.arrival[50])}, {"max_iterations": 91}):
            with pytest.warns(qt.errors.CensoredRunWarning):
                res, _, _ = _same(trace, AMin, ANCHOR_TIME, memory=memory, seed=seed, **cut)


@pytest.mark.parametrize("name", ["mcsf", "amax", "amin"])
def test_horizon_and_iteration_cap_same_records(name):
    make = {"mcsf": MCSF, "amax": AMax, "amin": AMin}[name]
    for seed in range(3):
        trace, memory = _random_trace(seed, 80, slack=40)
        with pytest.warns(qt.errors.CensoredRunWarning):
            _same(trace, make, ANCHOR_TIME, memory=memory, horizon=float(trace.arrival[40]),
                  seed=seed)
        with pytest.warns(qt.errors.CensoredRunWarning):
            _same(trace, make, ANCHOR_TIME, memory=memory, max_iterations=57, seed=seed)


@pytest.mark.parametrize("fast_path", [False, True])
def test_amax_that_cannot_start_raises_alike(fast_path):
    # A_max assumes hi: a lone job whose prompt plus hi exceeds M cannot start
    trace = paper_trace([2, 3, 2], prompt=3, hi=[2, 30, 2])
    with pytest.raises(QueueTheoryError, match="cannot start request 1"):
        qt.simulate(trace, AMax(), qt.UnitTime(), memory=20, first_token="prefill",
                    fast_path=fast_path)
