"""The ``Claim`` type and the registry behind ``qt.claims``.

A claim is a statement of a paper turned into a computation. Its ``check(quick=True)``
measures, and returns an :class:`Outcome` whose verdict follows from what was measured:
``confirmed``, ``refuted`` (with the counterexample found), ``qualified`` (holds under the
corrected statement, which is given) or ``not-reproducible`` (and why). ``Claim.expected``
is the verdict the ledger records; the test suite asserts that the check still reaches it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = ["Claim", "Outcome", "VERDICTS", "claim", "all", "get", "papers"]

VERDICTS = ("confirmed", "refuted", "qualified", "not-reproducible")

PAPERS = {
    "ao2025": "Ao, Luo, Simchi-Levi, Wang — Fluid-guided online scheduling with memory constraints",
    "jaillet2025": "Jaillet, Jiang, Podimata, Zhou — Online scheduling for LLM inference "
                   "with KV cache constraints",
    "bari2025": "Bari, Hegde, de Veciana — Optimal scheduling algorithms for LLM inference",
    "chen2025": "Chen, Ye, Zhou — Adaptively robust LLM inference under prediction uncertainty",
    "li2025": "Li, Dai, Peng — Throughput-optimal scheduling for LLM inference and AI agents",
}


@dataclass
class Outcome:
    """What a check measured: a verdict, a one-line headline figure and the raw numbers."""

    verdict: str
    figure: str
    data: dict = field(default_factory=dict)
    note: str = ""
    seconds: float = float("nan")
    plot: Callable | None = field(default=None, repr=False)
    """Optional ``plot(ax)`` drawing what was measured on a matplotlib Axes."""

    def __post_init__(self):
        if self.verdict not in VERDICTS:
            raise ValueError(f"verdict={self.verdict!r}: must be one of {VERDICTS}")


@dataclass(frozen=True)
class Claim:
    id: str
    paper: str
    statement: str
    expected: str
    run: Callable[[bool], Outcome] = field(repr=False, compare=False)

    def check(self, quick: bool = True) -> Outcome:
        start = time.perf_counter()
        out = self.run(quick)
        out.seconds = time.perf_counter() - start
        return out


_REGISTRY: dict[str, Claim] = {}


def claim(id: str, statement: str, expected: str):
    """Decorator registering ``fn(quick) -> Outcome`` as a claim of the paper ``id`` names."""
    paper = id.split(".", 1)[0]
    if paper not in PAPERS:
        raise ValueError(f"claim id {id!r}: paper prefix must be one of {sorted(PAPERS)}")
    if expected not in VERDICTS:
        raise ValueError(f"expected={expected!r}: must be one of {VERDICTS}")

    def register(fn):
        if id in _REGISTRY:
            raise ValueError(f"claim {id!r} registered twice")
        _REGISTRY[id] = Claim(id, paper, " ".join(statement.split()), expected, fn)
        return fn

    return register


def all(paper: str | None = None) -> list[Claim]:  # noqa: A001 - the documented public name
    """Every registered claim (of one paper if ``paper`` is given), in registration order."""
    if paper is not None and paper not in PAPERS:
        raise ValueError(f"paper={paper!r}: must be one of {sorted(PAPERS)}")
    return [c for c in _REGISTRY.values() if paper is None or c.paper == paper]


def get(id: str) -> Claim:
    try:
        return _REGISTRY[id]
    except KeyError:
        raise KeyError(f"no claim {id!r}; known: {sorted(_REGISTRY)}") from None


def papers() -> dict[str, str]:
    return dict(PAPERS)
