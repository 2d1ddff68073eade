"""Moved: the future-peak check is :class:`queuetheory.rounds.FuturePeak` (the round model,
below both the schedulers and the bounds). This module warns until the next release."""

import warnings

from ..rounds import FuturePeak

__all__ = ["FuturePeak"]

warnings.warn("queuetheory.policies.memory_check moved to queuetheory.rounds; the old module "
              "goes in the next release", DeprecationWarning, stacklevel=2)
