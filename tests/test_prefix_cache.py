"""Prefix caching on traces with prefix blocks: the Mooncake traces, the offline LRU replay
and its identities, vLLM's cache in a simulation and the checks on bad input."""

from fractions import Fraction

import numpy as np
import pytest

import queuetheory as qt
from queuetheory.workload import prefix_hit_ratio


def _trace(prompt, output, arrival, blocks, block_size):
    n = len(prompt)
    z = np.zeros(n, np.int64)
    out = np.asarray(output, np.int64)
    b = np.empty(n, dtype=object)
    for i, ids in enumerate(blocks):
        b[i] = np.asarray(ids, np.int64)
    return qt.Trace(np.asarray(arrival, float), np.asarray(prompt, np.int64), out, z, out, out,
                    z, blocks=b, block_size=block_size)


@pytest.fixture(scope="module")
def conversation():
    return qt.data.mooncake_trace("conversation")


def test_mooncake_traces_load_with_their_full_blocks(conversation):
    table = qt.data.mooncake_table("conversation")
    assert len(conversation) == len(table) == 12031
    assert (np.diff(conversation.arrival) >= 0).all() and conversation.arrival[0] == 0
    sizes = np.array([len(b) for b in conversation.blocks])
    assert (sizes == conversation.prompt // 512).all()          # the partial block dropped
    first = np.array([h[0] for h in table["hash_ids"]])
    assert (np.array([len(h) for h in table["hash_ids"]]) == -(-table["input_length"] // 512)).all()
    assert len(set(first)) == 1                                 # every request starts alike
    synthetic = qt.data.mooncake_trace("synthetic", time_unit="ms")
    assert len(synthetic) == 3993 and synthetic.block_size == 512
    with pytest.raises(ValueError, match="name='toolagent'"):
        qt.data.mooncake_trace("toolagent")


def test_unbounded_hit_ratio_is_one_minus_distinct_over_requested(conversation):
    r = prefix_hit_ratio(conversation, details=True)
    flat = np.concatenate(list(conversation.blocks))
    assert Fraction(r.reused, r.requested) == 1 - Fraction(np.unique(flat).size, flat.size)
    assert r.ratio == prefix_hit_ratio(conversation)


def _lru_reference(blocks, capacity):
    """An independent LRU: a list, most recent last."""
    cache, hits = [], 0
    for ids in blocks:
        for k in ids:
            if k in cache:
                cache.remove(k)
                hits += 1
            elif len(cache) == capacity:
                cache.pop(0)
            cache.append(k)
    return hits


@pytest.mark.parametrize("capacity", [1, 3, 7, 40])
def test_bounded_hit_ratio_is_an_lru_cache(capacity):
    rng = np.random.default_rng(capacity)
    blocks = []
    for _ in range(60):                  # prompts from a few shared prefixes
        root = int(rng.integers(0, 4))
        blocks.append([100 * root + j for j in range(int(rng.integers(1, 6)))]
                      + list(rng.integers(1000, 1100, int(rng.integers(0, 4)))))
    tr = _trace([64 * len(b) for b in blocks], [1] * 60, np.arange(60.0), blocks, 64)
    r = prefix_hit_ratio(tr, capacity, details=True)
    assert r.reused == _lru_reference(blocks, capacity)
    assert r.requested == sum(map(len, blocks)) and r.per_request.sum() == r.reused


def test_a_hand_worked_replay_credits_each_request_its_cached_prefix():
    """Blocks of 4 tokens, a cache large enough, requests one after the other:
    0 = [a b c] + 1 token (13 tokens) misses; 1 = [a b d] (12 tokens) reuses a b (8 tokens);
    2 = [a b c] (12 tokens) reuses a b c but must compute its last token: 8 tokens (vLLM caps a
    hit at num_tokens − 1); 3 = [e] (5 tokens) misses; 4 = [a b c] + 3 (15 tokens) reuses a b c
    (12 tokens)."""
    a, b, c, d, e = 1, 2, 3, 4, 5
    tr = _trace([13, 12, 12, 5, 15], [2] * 5, [0, 10, 20, 30, 40],
                [[a, b, c], [a, b, d], [a, b, c], [e], [a, b, c]], 4)
    pol = qt.policies.VLLMV1(4, 64, num_gpu_blocks=100, block_size=4)
    res = qt.simulate(tr, pol, qt.UnitTime())
    assert res.requests["cached"].tolist() == [0, 8, 8, 0, 12]
    m = res.metrics
    assert m["prefix_tokens_saved"] == 28
    assert m["prefix_hit_ratio"] == pytest.approx(28 / 57)
    # the offline ceiling: blocks reused 2 + 3 + 3 of 13 (no cap at num_tokens − 1 there),
    # 32 of the 57 prompt tokens
    offline = prefix_hit_ratio(tr, details=True)
    assert (offline.reused, offline.requested, offline.tokens_saved) == (8, 13, 32)
    assert m["prefix_hit_ratio"] <= offline.token_ratio


def test_the_realised_ratio_stays_under_the_offline_one_on_mooncake(conversation):
    """A cache that never preempts (so every hit is a prompt's first admission): the blocks
    a simulation reuses are at most those an unbounded offline cache reuses, fewer where a
    block was still being prefilled or a hit was capped below the prompt."""
    sub = conversation.until(120.0)
    res = qt.simulate(sub, qt.policies.VLLMV1(64, 2048, num_gpu_blocks=500_000, block_size=16),
                      qt.AffineTokenTime(0.01, 5e-5, 4e-5))
    assert res.metrics["restarts"] == 0
    offline = prefix_hit_ratio(sub, details=True)
    assert 0 < res.metrics["prefix_hit_ratio"] <= offline.token_ratio


def test_prefix_caching_off_changes_no_record():
    from scipy import stats

    wl = qt.Workload([qt.RequestClass(prompt=stats.randint(1, 300), output=stats.randint(1, 50),
                                      rate=2.0)])
    on = qt.simulate(wl, qt.policies.VLLMV1(16, 256, num_gpu_blocks=400, block_size=16,
                                            enable_prefix_caching=True),
                     qt.UnitTime(), n_requests=200, seed=3)
    off = qt.simulate(wl, qt.policies.VLLMV1(16, 256, num_gpu_blocks=400, block_size=16,
                                             enable_prefix_caching=False),
                      qt.UnitTime(), n_requests=200, seed=3)
    assert "prefix_hit_ratio" not in off.metrics
    assert off.requests["cached"].sum() == 0
    # with no prefix blocks, only preempted requests can find their own blocks again
    assert on.requests["cached"].sum() == 0 or on.metrics["restarts"] > 0


def test_bad_prefix_input_is_named():
    with pytest.raises(ValueError, match=r"blocks\[1\]: 3 blocks of 4 tokens is more than"):
        _trace([8, 11], [1, 1], [0, 1], [[1, 2], [1, 2, 3]], 4)
    with pytest.raises(ValueError, match="block_size=None"):
        qt.Trace(np.zeros(1), np.array([8]), np.ones(1, np.int64), np.zeros(1, np.int64),
                 np.ones(1, np.int64), np.ones(1, np.int64), np.zeros(1, np.int64),
                 blocks=np.array([np.array([1])], dtype=object))
    tr = _trace([24], [1], [0], [[7]], 24)
    with pytest.raises(ValueError, match="block_size=16: the trace's prefix blocks are of 24"):
        qt.simulate(tr, qt.policies.VLLMV1(num_gpu_blocks=50), qt.UnitTime())
    with pytest.raises(ValueError, match="needs prefix blocks"):
        prefix_hit_ratio(qt.data.azure_trace("code").head(3))
    with pytest.raises(ValueError, match="capacity"):
        prefix_hit_ratio(tr, 0)


def _conversations(n_conv=12, turns=5, block=16, seed=0):
    """Chat sessions: turn k of a conversation resends its first k + 2 blocks (its history)
    and adds one new block; turns of different conversations interleave."""
    rng = np.random.default_rng(seed)
    rows = []
    for c in range(n_conv):
        t0 = float(rng.uniform(0, 5))
        for k in range(turns):
            ids = [1000 * c + j for j in range(k + 3)]
            rows.append((t0 + 4.0 * k + float(rng.uniform(0, 1)), ids))
    rows.sort(key=lambda r: r[0])
    blocks = [ids for _, ids in rows]
    prompt = [block * len(ids) + 5 for ids in blocks]
    return _trace(prompt, [8] * len(rows), [t for t, _ in rows], blocks, block)


def test_a_cache_aware_router_keeps_conversations_on_their_engine():
    tr = _conversations()
    pol = qt.policies.VLLMV1(16, 256, num_gpu_blocks=2000, block_size=16)
    tm = qt.AffineTokenTime(0.01, 1e-4, 1e-4)
    runs = {r: qt.networks.simulate_fleet(tr, pol, tm, engines=4, router=r)
            for r in qt.networks.FLEET_ROUTERS}
    for res in runs.values():
        m = res.metrics
        assert m["completed"] == len(tr) and m["unfinished"] == 0
        per = res.per_engine()
        assert per["requests"].sum() == len(tr)
        assert per["cached_tokens"].sum() == m["prefix_tokens_saved"] == res.requests.cached.sum()
    # round robin scatters each conversation's turns: fewer of their prefixes are found
    assert runs["cache_aware"].metrics["prefix_hit_ratio"] > \
        runs["round_robin"].metrics["prefix_hit_ratio"]
    # the offline ceiling of one engine holding everything bounds every router
    ceiling = prefix_hit_ratio(tr, details=True).token_ratio
    assert all(r.metrics["prefix_hit_ratio"] <= ceiling for r in runs.values())
    with pytest.raises(ValueError, match="router='jsq'"):
        qt.networks.simulate_fleet(tr, pol, tm, engines=2, router="jsq")
    with pytest.raises(ValueError, match="engines"):
        qt.networks.simulate_fleet(tr, pol, tm, engines=0)


def test_sessions_resend_their_history_in_a_closed_loop():
    from scipy import stats

    sess = qt.workload.Sessions(rate=0.5, turns=stats.randint(2, 6),
                                new_tokens=stats.randint(20, 200),
                                output=stats.randint(20, 300), think=stats.expon(scale=5.0),
                                system=512)
    plan = sess.sample(40, seed=1)
    tr = plan.trace
    for i in np.flatnonzero(plan.next >= 0):
        n = plan.next[i]
        assert plan.session[n] == plan.session[i] and plan.turn[n] == plan.turn[i] + 1
        assert tr.prompt[n] > tr.prompt[i] + tr.output[i]        # history plus new tokens
        assert list(tr.blocks[n][: len(tr.blocks[i])]) == list(tr.blocks[i])
    firsts = [b[:32] for b in tr.blocks[plan.first]]               # the shared system prompt
    assert all(list(b) == list(firsts[0]) for b in firsts)
    res = qt.networks.simulate_fleet(plan, qt.policies.VLLMV1(32, 512, num_gpu_blocks=4000),
                                     qt.AffineTokenTime(0.01, 5e-5, 4e-5), engines=2,
                                     router="round_robin")
    r = res.requests
    assert r["finish"].notna().all()
    later = plan.next[plan.next >= 0]
    earlier = np.flatnonzero(plan.next >= 0)
    assert (r["arrival"].to_numpy()[later] >= r["finish"].to_numpy()[earlier]
            + plan.think[later] - 1e-9).all()
    # an unbounded cache finds each turn's history whatever the order of the sessions
    assert 0 < res.metrics["prefix_hit_ratio"] <= prefix_hit_ratio(tr, details=True).token_ratio
    with pytest.raises(ValueError, match="think"):
        qt.workload.Sessions(rate=1.0, think="soon")


def test_cli_fleet_compares_routers(tmp_path, capsys):
    from queuetheory.cli import main

    assert main(["fleet", "--until", "20", "--engines", "2", "--router", "cache_aware",
                 "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "cache_aware: prefix hit ratio" in out
    import pandas as pd

    table = pd.read_csv(tmp_path / "fleet.csv")
    assert table["router"].tolist() == ["cache_aware"] and table["completed"].iloc[0] > 0
    with pytest.raises(SystemExit, match="--trace"):
        main(["fleet", "--trace", "azure:conv"])


def test_cache_ratio_definitions_refuse_a_bad_block_size():
    with pytest.raises(ValueError, match="block_size=0"):
        qt.workload.cache_ratio_definitions([[1]], [10], [0.0], block_size=0)
