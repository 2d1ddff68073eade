"""Schedulers, one module per family, all on the one :class:`Policy` contract."""

from .base import ORDERS, Policy, fit_memory, ordered, take_decodes, take_prefills
from .classic import KFCFS, FasterTransformer, Orca, Sarathi, StaticPriority, VLLMVanilla

__all__ = [
    "Policy", "ORDERS", "ordered", "take_decodes", "take_prefills", "fit_memory",
    "Sarathi", "Orca", "VLLMVanilla", "FasterTransformer", "KFCFS", "StaticPriority",
]

from .wait import WAIT, FCFSRestart, NestedWAIT  # noqa: E402

__all__ += ["WAIT", "NestedWAIT", "FCFSRestart"]
