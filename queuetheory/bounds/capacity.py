"""Deprecated: this module is :mod:`queuetheory.bounds.token_rate` (one release, then gone).

``queuetheory.bounds.capacity`` sat beside :mod:`queuetheory.capacity.bounds` (the bracket of
the simulated boundary); its ``max_rate`` and ``MaxRate`` are now
:func:`~queuetheory.bounds.token_rate.max_token_rate` and
:class:`~queuetheory.bounds.token_rate.MaxTokenRate` (tokens per time unit), apart from
:func:`queuetheory.capacity.max_rate` and :class:`queuetheory.capacity.MaxRate` (requests).
"""

from __future__ import annotations

import warnings

from .token_rate import (  # noqa: F401  (the old module's names)
    LLAMA3_70B,
    MAX_LOADS,
    MaxTokenRate,
    capacity_table,
    llama3_70b_table,
    max_stable_rate,
    max_token_rate,
    min_token_budget,
    smallest_stable_budget,
    token_capacity,
)
from .token_rate import __all__ as _all

warnings.warn("queuetheory.bounds.capacity is deprecated: import queuetheory.bounds.token_rate "
              "(max_rate is max_token_rate, MaxRate is MaxTokenRate there)",
              DeprecationWarning, stacklevel=2)

MaxRate = MaxTokenRate
max_rate = max_token_rate
__all__ = [*_all, "MaxRate", "max_rate"]
