"""FuturePeak's profile (sort and suffix sums) equals the definition, checkpoint by checkpoint."""

import numpy as np
import pytest

from queuetheory.rounds import FuturePeak


@pytest.mark.parametrize("seed", range(6))
def test_profile_equals_the_sum_over_the_jobs_alive(seed):
    rng = np.random.default_rng(seed)
    n, t = int(rng.integers(0, 40)), int(rng.integers(0, 50))
    m0 = rng.integers(1, 500, n)
    last = t + rng.integers(0, 12, n)                  # ties between jobs are common
    peak = FuturePeak(10**6, t, m0, last)
    taus = np.unique(last)
    np.testing.assert_array_equal(peak.taus, taus)
    for j, tau in enumerate(taus):
        alive = last >= tau
        assert peak.count[j] == alive.sum()
        assert peak.load[j] == (m0[alive] + tau - t).sum()
    assert peak.peak() == max([0] + [(m0[last >= u] + u - t).sum() for u in taus])
    e = t + 7
    later = FuturePeak(10**6, t, np.append(m0, 30), np.append(last, e))
    peak.add(30, e)                                    # incremental admission, same profile
    np.testing.assert_array_equal(peak.taus, later.taus)
    np.testing.assert_array_equal(peak.load, later.load)
    np.testing.assert_array_equal(peak.count, later.count)
