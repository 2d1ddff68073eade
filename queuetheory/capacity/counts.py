"""The smallest engine count that meets a test: doubling from a bound, then bisection."""

from __future__ import annotations


def smallest_count(meets, at_least: int, most: int) -> int | None:
    """The smallest count ``K ≥ at_least`` with ``meets(K)``, assuming more engines never
    hurt: ``at_least``, doubled until a count meets, then bisected between the last count
    that missed and the first that met.

    Parameters
    ----------
    meets : callable
        ``K -> bool``, called once per count tried.
    at_least : int
        The first count (fewer are known to miss: a stability bound).
    most : int
        The largest count tried.

    Returns
    -------
    int or None
        The count, ``None`` when none up to ``most`` meets.
    """
    if at_least > most:                             # the bounds rule out every count allowed
        return None
    lo, hi = at_least - 1, at_least                 # lo misses (or is below the bound)
    while not meets(hi):
        if hi >= most:
            return None
        lo, hi = hi, min(2 * hi, int(most))
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if meets(mid):
            hi = mid
        else:
            lo = mid
    return hi
