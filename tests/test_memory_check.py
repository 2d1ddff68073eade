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


@pytest.mark.parametrize("seed", range(8))
def test_a_book_moved_on_answers_as_a_fresh_profile(seed):
    """A profile kept as a book (jobs added, the clock advanced, jobs that leave early
    removed) answers ``load_at`` and ``fits`` as the profile built afresh from the jobs
    still running, at every round; a job removed that was never added breaks it (the
    check can fail)."""
    rng = np.random.default_rng(seed)
    memory, t = 4000, int(rng.integers(0, 20))
    jobs = {}                                          # id -> (memory less round, last round)
    book = FuturePeak(memory, t)
    for step in range(60):
        for i in range(int(rng.integers(0, 4))):      # admissions at round t
            m, e = int(rng.integers(1, 300)), t + int(rng.integers(0, 15))
            book.add(m, e)
            jobs[(step, i)] = (m - t, e)
        t += int(rng.integers(0, 4))
        book.advance(t)
        for k, (c, e) in list(jobs.items()):
            if e < t:
                del jobs[k]                            # ended: its rounds dropped
            elif rng.random() < 0.1:
                book.remove(c + t, e)                  # leaves before its last round
                del jobs[k]
        c = np.array([v[0] for v in jobs.values()], dtype=np.int64)
        last = np.array([v[1] for v in jobs.values()], dtype=np.int64)
        fresh = FuturePeak(memory, t, c + t, last)
        for e in range(t, t + 16):
            assert book.load_at(e) == fresh.load_at(e)
            for m in (1, 100, 400, 1500):
                assert book.fits(m, e) == fresh.fits(m, e)
    assert t > 20 and book.taus.min(initial=t) >= t
    if jobs:
        c, e = next(iter(jobs.values()))
        book.remove(c + t, e)                           # removed twice: no longer the jobs'
        book.remove(c + t, e)
        assert book.load_at(t) != fresh.load_at(t)


@pytest.mark.parametrize("seed", range(6))
def test_excess_is_the_worst_round_and_the_failure_lasts(seed):
    """``excess`` is the highest total (plus the candidate) over the rounds ``t … e`` less
    ``M``, at the latest such round, so it is at most 0 exactly when ``fits``; a candidate
    that fails fails again, a round later with the same prompt and one more round, for as
    many rounds as A_ℓ's counted stretch promises (``min(excess − 1, round − t)``), on a
    book moved on with nothing else changed."""
    rng = np.random.default_rng(seed)
    memory, t, failed = 3000, int(rng.integers(0, 20)), 0
    book = FuturePeak(memory, t)
    for _ in range(25):
        for _ in range(int(rng.integers(1, 4))):
            book.add(int(rng.integers(1, 300)), t + int(rng.integers(0, 15)))
        t += int(rng.integers(0, 3))
        book.advance(t)
        for m in (1, 50, 200, 900, 2500):
            for e in range(t, t + 20, 3):
                over, at = book.excess(m, e)
                totals = [book.load_at(u) + u + m - t for u in range(t, e + 1)]
                worst = max(totals)
                assert over == worst - memory
                assert at == t + len(totals) - 1 - totals[::-1].index(worst)
                assert (over <= 0) == book.fits(m, e)
                if over <= 0:
                    continue
                failed += 1
                later = FuturePeak(memory, t)
                later.taus, later.load, later.count = book.taus, book.load, book.count
                for j in range(1, min(over - 1, at - t) + 1):
                    later.advance(t + j)
                    assert not later.fits(m, e + j)
    assert failed > 100


@pytest.mark.parametrize("ask", ["fits", "excess"])
def test_a_last_round_before_the_current_one_is_refused(ask):
    """A job cannot end before the profile's current round: ``fits`` and ``excess`` refuse
    it with an error naming ``e`` and ``t``."""
    book = FuturePeak(100, 5, [10, 20], [8, 12])
    with pytest.raises(ValueError, match=r"e=4: .* t=5"):
        getattr(book, ask)(10, 4)
    assert getattr(book, ask)(10, 5) is not None            # the current round is fine
