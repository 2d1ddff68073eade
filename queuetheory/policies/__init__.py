"""Schedulers, one module per family, all on the one :class:`Policy` contract."""

from .base import ORDERS, Policy, fit_memory, ordered, take_decodes, take_prefills
from .classic import KFCFS, FasterTransformer, Orca, Sarathi, StaticPriority, VLLMVanilla
from .kvcache import FCFS, MCSF, AlphaProtection

__all__ = [
    "Policy", "ORDERS", "ordered", "take_decodes", "take_prefills", "fit_memory",
    "Sarathi", "Orca", "VLLMVanilla", "FasterTransformer", "KFCFS", "StaticPriority",
]
__all__ += ["MCSF", "FCFS", "AlphaProtection"]
