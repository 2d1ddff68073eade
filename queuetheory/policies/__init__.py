"""Schedulers, one module per family, all on the one :class:`Policy` contract."""

from .base import (
    ORDERS,
    Policy,
    decides_as_shipped,
    fit_memory,
    ordered,
    take_decodes,
    take_prefills,
)
from .classic import KFCFS, FasterTransformer, Orca, Sarathi, StaticPriority, VLLMVanilla
from .kvcache import FCFS, MCSF, AlphaProtection

__all__ = [
    "Policy", "ORDERS", "ordered", "take_decodes", "take_prefills", "fit_memory",
    "decides_as_shipped",
    "Sarathi", "Orca", "VLLMVanilla", "FasterTransformer", "KFCFS", "StaticPriority",
]
from .rad import (  # noqa: E402
    RAD,
    SLAI,
    CycleScheduler,
    DecodeOnly,
    PrefillOnly,
    RequestLevel,
)

__all__ += ["RAD", "CycleScheduler", "RequestLevel", "SLAI", "PrefillOnly", "DecodeOnly"]
from .robust import HSF, AdaptiveRobust, AEll, AMax, AMin, ARandom  # noqa: E402
from .robust_experiments import (  # noqa: E402
    BucketInterval,
    FixedInterval,
    paper_trace,
    run_rounds,
)

__all__ += ["HSF", "AMax", "ARandom", "AMin", "AEll", "AdaptiveRobust",
            "BucketInterval", "FixedInterval", "paper_trace", "run_rounds"]

from .wait import WAIT, FCFSRestart, NestedWAIT  # noqa: E402

__all__ += ["WAIT", "NestedWAIT", "FCFSRestart"]

__all__ += ["MCSF", "FCFS", "AlphaProtection"]

from .vllm import VLLMV1  # noqa: E402

__all__ += ["VLLMV1"]

# the names that moved out of the schedulers (``DistServe``, ``simulate_nodes``,
# ``slo_metrics``, ``slo_capacity``: :data:`queuetheory.policies.rad.MOVED`), each with a
# ``DeprecationWarning`` naming the new one, until the next release
from ..errors import moved_names as _moved_names  # noqa: E402
from .rad import MOVED as _MOVED  # noqa: E402

__getattr__ = _moved_names(__name__, _MOVED)
