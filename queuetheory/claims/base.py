"""The ``Claim`` type and the registry behind ``qt.claims``.

A claim is a statement of a paper turned into a computation. Its ``check(quick=True)``
measures, and returns an :class:`Outcome` whose verdict follows from what was measured:

- ``confirmed``: the statement holds as printed, in the scope the claim states;
- ``refuted``: a stated result is false as printed, under the paper's own convention and
  hypotheses; the outcome carries the smallest counterexample the code finds;
- ``erratum``: a misprinted formula or constant whose results stand once corrected; the
  outcome gives the correction;
- ``qualified``: the result holds in a corrected or narrower scope, which is given;
- ``not-reproducible``: what the paper reports cannot be re-derived here (and why).

Every claim states the ``convention`` it is checked under (memory and first-token
convention, and the model: discrete rounds, fluid, M → ∞; the engine's names
``first_token="prefill" | "decode"`` where the engine runs) and its ``scope`` (finite
instances, asymptotic, fluid). ``Claim.expected`` is the verdict the ledger records for the
quick check, ``Claim.expected_full`` the one for the full check (the same unless
``full_differs`` says why); the test suite asserts that the checks still reach them.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = ["Claim", "Outcome", "VERDICTS", "claim", "all", "get", "papers"]

VERDICTS = ("confirmed", "refuted", "erratum", "qualified", "not-reproducible")

PAPERS = {
    "ao2025": "Ao, Luo, Simchi-Levi, Wang — Fluid-guided online scheduling with memory constraints",
    "jaillet2025": "Jaillet, Jiang, Podimata, Zhou — Online scheduling for LLM inference "
                   "with KV cache constraints",
    "bari2025": "Bari, Hegde, de Veciana — Optimal scheduling algorithms for LLM inference",
    "chen2025": "Chen, Ye, Zhou — Adaptively robust LLM inference under prediction uncertainty",
    "li2025": "Li, Dai, Peng — Throughput-optimal scheduling for LLM inference and AI agents",
    "qin2025": "Qin et al. — Mooncake: trading more storage for less computation (the "
               "released traces' prefix reuse)",
}


@dataclass
class Outcome:
    """What a check measured: a verdict, a one-line headline figure and the raw numbers.

    Attributes
    ----------
    verdict : str
        One of :data:`VERDICTS` (``confirmed``, ``refuted``, ``erratum``, ``qualified``,
        ``not-reproducible``).
    figure : str
        The one-line headline figure.
    data : dict
        The raw numbers measured.
    note : str
        What the verdict rests on, a correction or a counterexample, in words.
    seconds : float
        Wall-clock seconds the check took (set by :meth:`Claim.check`; NaN until then).
    plot : callable or None
        Optional ``plot(ax)`` drawing what was measured on a matplotlib Axes, in the style
        of :mod:`queuetheory.plotting` (a title, labelled axes with units, bounds as
        reference lines).

    Raises
    ------
    ValueError
        On construction, if ``verdict`` is not one of :data:`VERDICTS`.
    """

    verdict: str
    figure: str
    data: dict = field(default_factory=dict)
    note: str = ""
    seconds: float = float("nan")
    plot: Callable | None = field(default=None, repr=False)

    def __post_init__(self):
        if self.verdict not in VERDICTS:
            raise ValueError(f"verdict={self.verdict!r}: must be one of {VERDICTS}")


@dataclass(frozen=True)
class Claim:
    """A statement of a paper turned into a computation, as the ledger registers it
    (:func:`claim`); :meth:`check` runs it.

    Attributes
    ----------
    id : str
        ``"<paper>.<name>"``, e.g. ``"li2025.theorem1a"``; the prefix is a key of
        :func:`papers`.
    paper : str
        The paper's key (``"li2025"``, ``"ao2025"``, ...).
    statement : str
        The paper's statement, in words.
    expected : str
        The verdict the ledger records for the quick check (:data:`VERDICTS`).
    run : callable
        ``run(quick) -> Outcome``: the computation.
    convention : str
        Memory and first-token convention and model (discrete rounds, fluid, M → ∞).
    scope : str
        What the verdict covers: finite instances, asymptotic, fluid.
    expected_full : str
        The full check's recorded verdict (``expected`` when they agree).
    full_differs : str
        Why the full verdict differs from the quick one (empty when they agree).
    """

    id: str
    paper: str
    statement: str
    expected: str
    run: Callable[[bool], Outcome] = field(repr=False, compare=False)
    convention: str = ""
    scope: str = ""
    expected_full: str = ""
    full_differs: str = ""

    def check(self, quick: bool = True) -> Outcome:
        """Run the claim's computation and time it.

        Parameters
        ----------
        quick : bool, default True
            The quick check (short runs: ``queuetheory reproduce --quick`` and the test
            suite) or the full one (``queuetheory reproduce``: longer runs, more
            instances or seeds).

        Returns
        -------
        Outcome
            The verdict and what was measured, with ``seconds`` set.
        """
        start = time.perf_counter()
        out = self.run(quick)
        out.seconds = time.perf_counter() - start
        return out

    def expected_for(self, quick: bool) -> str:
        """The verdict the ledger records for the quick or the full check.

        Parameters
        ----------
        quick : bool
            The quick check (``expected``) or the full one (``expected_full``).

        Returns
        -------
        str
            One of :data:`VERDICTS`.
        """
        return self.expected if quick else (self.expected_full or self.expected)


_REGISTRY: dict[str, Claim] = {}


def claim(id: str, statement: str, expected: str, *, convention: str, scope: str,
          expected_full: str | None = None, full_differs: str = ""):
    """Decorator registering ``fn(quick) -> Outcome`` as a claim of the paper ``id`` names.

    ``convention`` and ``scope`` are required (see :class:`Claim`); ``expected_full`` is the
    full check's verdict when it differs from the quick one, and then ``full_differs`` says
    why.

    Parameters
    ----------
    id : str
        ``"<paper>.<name>"``, the paper's key (:func:`papers`) first.
    statement : str
        The paper's statement, in words (whitespace is collapsed).
    expected : str
        The quick check's recorded verdict (:data:`VERDICTS`).
    convention : str
        Memory and first-token convention and model; must not be blank.
    scope : str
        What the verdict covers; must not be blank.
    expected_full : str, optional
        The full check's recorded verdict, when it differs from ``expected``.
    full_differs : str, default ""
        Why the full verdict differs; given exactly when it does.

    Returns
    -------
    callable
        The decorator: it registers ``fn`` and returns it unchanged.

    Raises
    ------
    ValueError
        If the id's paper prefix is unknown, a verdict is not one of :data:`VERDICTS`,
        ``convention`` or ``scope`` is blank, ``full_differs`` is given without a
        differing ``expected_full`` or missing with one, or (when the decorator is applied)
        the id is registered twice.
    """
    paper = id.split(".", 1)[0]
    if paper not in PAPERS:
        raise ValueError(f"claim id {id!r}: paper prefix must be one of {sorted(PAPERS)}")
    for name, v in (("expected", expected), ("expected_full", expected_full or expected)):
        if v not in VERDICTS:
            raise ValueError(f"{name}={v!r}: must be one of {VERDICTS}")
    if not convention.strip() or not scope.strip():
        raise ValueError(f"claim {id!r}: convention and scope must be given")
    full = expected_full or expected
    if (full != expected) != bool(full_differs.strip()):
        raise ValueError(f"claim {id!r}: full_differs must say why exactly when "
                         f"expected_full={full!r} differs from expected={expected!r}")

    def register(fn):
        if id in _REGISTRY:
            raise ValueError(f"claim {id!r} registered twice")
        _REGISTRY[id] = Claim(id, paper, " ".join(statement.split()), expected, fn,
                              " ".join(convention.split()), " ".join(scope.split()), full,
                              " ".join(full_differs.split()))
        return fn

    return register


def all(paper: str | None = None) -> list[Claim]:  # noqa: A001 - the documented public name
    """Every registered claim (of one paper if ``paper`` is given), in registration order.

    Parameters
    ----------
    paper : str, optional
        A paper's key (:func:`papers`); default every paper.

    Returns
    -------
    list of Claim
        The claims, in registration order.

    Raises
    ------
    ValueError
        If ``paper`` is not a known key.
    """
    if paper is not None and paper not in PAPERS:
        raise ValueError(f"paper={paper!r}: must be one of {sorted(PAPERS)}")
    return [c for c in _REGISTRY.values() if paper is None or c.paper == paper]


def get(id: str) -> Claim:
    """The registered claim ``id`` (e.g. ``qt.claims.get("li2025.theorem1a").check()``).

    Parameters
    ----------
    id : str
        The claim's id, ``"<paper>.<name>"``.

    Returns
    -------
    Claim
        The claim.

    Raises
    ------
    KeyError
        If no claim has that id (the message lists the known ones).
    """
    try:
        return _REGISTRY[id]
    except KeyError:
        raise KeyError(f"no claim {id!r}; known: {sorted(_REGISTRY)}") from None


def papers() -> dict[str, str]:
    """The papers of the ledger: key (the claim ids' prefix) -> authors and title.

    Returns
    -------
    dict
        ``{key: "authors — title"}``, a copy.
    """
    return dict(PAPERS)

