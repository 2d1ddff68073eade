"""The project's exceptions and the argument checks that raise them."""

from __future__ import annotations

import functools
import importlib
import math
import warnings

__all__ = ["QueueTheoryError", "InfeasibleBatchError", "UnstableError", "UnsupportedSettingError",
           "CensoredRunWarning", "check_positive", "check_seed", "check_seeds", "check_between"]


class QueueTheoryError(Exception):
    """Base class of the project's own errors."""


class InfeasibleBatchError(QueueTheoryError):
    """A policy returned a batch that breaks a feasibility rule; never silently repaired.

    Parameters
    ----------
    policy : Policy
        The policy that built the batch (kept as ``self.policy``).
    iteration : int
        The iteration at which it was built (``self.iteration``).
    rule : str
        The feasibility rule broken (``self.rule``), e.g. the token budget or KV memory.
    detail : str
        What was wrong, for the message.
    """

    def __init__(self, policy, iteration: int, rule: str, detail: str):
        self.policy, self.iteration, self.rule = policy, iteration, rule
        super().__init__(f"{policy!r} built an infeasible batch at iteration {iteration}: "
                         f"rule {rule} broken ({detail})")


class UnstableError(QueueTheoryError, ValueError):
    """The offered load is at or above capacity; ``excess`` says by how much.

    Also a ``ValueError``, so ``except ValueError`` catches it.

    Parameters
    ----------
    what : str
        The quantity compared, for the message (e.g. ``"rho"``).
    load : float
        Its value (``self.load``).
    limit : float, default 1.0
        The value it must stay below (``self.limit``); ``self.excess`` is ``load - limit``.
    """

    def __init__(self, what: str, load: float, limit: float = 1.0):
        self.load, self.limit, self.excess = load, limit, load - limit
        super().__init__(f"unstable: {what} = {load:.6g} >= {limit:.6g} "
                         f"(exceeds the limit by {load - limit:.6g})")


class UnsupportedSettingError(QueueTheoryError, ValueError):
    """A policy cannot build feasible batches in the requested setting (KV memory, first-token
    convention); raised by ``simulate`` before it starts, with the policy's reason.

    Also a ``ValueError``.

    Parameters
    ----------
    policy : Policy
        The policy (``self.policy``).
    setting : str
        The setting it cannot run in (``self.setting``), for the message.
    reason : str
        The policy's reason (``self.reason``).
    """

    def __init__(self, policy, setting: str, reason: str):
        self.policy, self.setting, self.reason = policy, setting, reason
        super().__init__(f"{policy!r} cannot run with {setting}: {reason}")


class CensoredRunWarning(UserWarning):
    """A run ended with requests unfinished: its metrics over completed requests leave them
    out. The message says how many and why (the horizon cut the run, the iteration cap, or
    the policy idled with work waiting and nothing left to arrive)."""


class SolverError(QueueTheoryError, RuntimeError):
    """An optimisation solver (HiGHS through cvxpy) failed or returned no optimal solution."""


__all__ += ["SolverError"]


def check_positive(name: str, value, *, allow_zero: bool = False, integer: bool = False):
    """Raise ``ValueError`` naming ``name`` unless ``value`` is a finite positive number (a
    string is not a number here, even one that reads as one).

    Parameters
    ----------
    name : str
        The argument's name, for the message.
    value : object
        The value to check.
    allow_zero : bool, default False
        Accept 0 as well.
    integer : bool, default False
        Accept only integral values (an integral float such as ``4.0`` passes).

    Returns
    -------
    object
        ``value`` itself, unchanged.

    Raises
    ------
    ValueError
        If ``value`` is a string, not a number, not finite, not positive (negative when
        ``allow_zero``) or, with ``integer``, not integral.
    """
    if isinstance(value, str | bytes):
        raise ValueError(f"{name}={value!r}: must be a number, not a string")
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name}={value!r}: must be a number") from None
    ok = math.isfinite(v) and (v >= 0 if allow_zero else v > 0)
    if integer and ok:
        ok = v == int(v)
    if not ok:
        rule = ">= 0" if allow_zero else "> 0"
        kind = "an integer" if integer else "a finite number"
        raise ValueError(f"{name}={value!r}: must be {kind} {rule}")
    return value


def check_seed(value, name: str = "seed") -> int:
    """A random seed: an integer ``>= 0`` (what ``numpy.random.default_rng`` accepts), or a
    ``ValueError`` naming ``name``.

    Parameters
    ----------
    value : int
        The seed (a numpy integer too; not a bool).
    name : str, default "seed"
        The argument's name, for the message.

    Returns
    -------
    int
        The seed as a Python ``int``.

    Raises
    ------
    ValueError
        If ``value`` is not an integer ``>= 0``.
    """
    import numpy as np

    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 0:
        raise ValueError(f"{name}={value!r}: must be an integer >= 0")
    return int(value)


def check_seeds(seeds, name: str = "seeds") -> tuple[int, ...]:
    """A non-empty sequence of distinct seeds (a single integer is one seed), each
    :func:`check_seed`.

    Parameters
    ----------
    seeds : int or iterable of int
        The seeds, or one seed.
    name : str, default "seeds"
        The argument's name, for the message.

    Returns
    -------
    tuple of int
        The seeds, in the order given.

    Raises
    ------
    ValueError
        If ``seeds`` is not iterable, is empty, holds a seed that is not an integer ``>= 0``,
        or holds a seed twice (one run would count as two independent replications).
    """
    import numpy as np

    if isinstance(seeds, int | np.integer) and not isinstance(seeds, bool):
        seeds = (seeds,)
    try:
        out = tuple(seeds)
    except TypeError:
        raise ValueError(f"{name}={seeds!r}: must be a sequence of integers >= 0") from None
    if not out:
        raise ValueError(f"{name}={seeds!r}: need at least one seed")
    checked = tuple(check_seed(s, name) for s in out)
    if len(set(checked)) < len(checked):
        raise ValueError(f"{name}={seeds!r}: a seed given twice would count one run as two "
                         "independent replications; give distinct seeds")
    return checked


def check_between(name: str, value, low: float, high: float, *, low_closed: bool = False,
                  high_closed: bool = False) -> float:
    """``value`` as a float inside the interval from ``low`` to ``high`` (ends open unless
    closed), or a ``ValueError`` naming ``name``, its value and the interval.

    Parameters
    ----------
    name : str
        The argument's name, for the message.
    value : float
        The value to check (not a bool or a string).
    low, high : float
        The interval's ends.
    low_closed, high_closed : bool, default False
        Whether the interval includes ``low`` / ``high``.

    Returns
    -------
    float
        ``value`` as a float.

    Raises
    ------
    ValueError
        If ``value`` is not a number inside the interval.
    """
    try:
        v = float(value)
    except (TypeError, ValueError):
        v = math.nan
    if isinstance(value, bool) or isinstance(value, str):
        v = math.nan
    above = v >= low if low_closed else v > low
    below = v <= high if high_closed else v < high
    if not (above and below):
        interval = f"{'[' if low_closed else '('}{low:g}, {high:g}{']' if high_closed else ')'}"
        raise ValueError(f"{name}={value!r}: must be a number in {interval}")
    return v


def renamed_keywords(**old_to_new):
    """Decorator: keywords renamed to the package's one vocabulary keep working for one
    release, with a :class:`DeprecationWarning` that names the new keyword.

    The one deprecation of a keyword in the package: a renamed keyword (``b=`` for
    ``token_budget=``) and a renamed keyword whose values are renamed too
    (``convention="ip"|"eq1"`` for ``first_token="prefill"|"decode"``).

    Parameters
    ----------
    **old_to_new
        Old keyword name -> new keyword name (``b="token_budget"``), or -> ``(new name,
        {old value: new value})`` when the values are renamed too (``convention=
        ("first_token", {"ip": "prefill", "eq1": "decode"})``); a value not in that mapping
        is refused.

    Returns
    -------
    callable
        The decorator.

    Raises
    ------
    TypeError
        From the decorated function, when a call gives both the old and the new keyword.
    ValueError
        From the decorated function, when an old keyword's value has no new one.
    """
    renames = {old: new if isinstance(new, tuple) else (new, None)
               for old, new in old_to_new.items()}

    def decorate(func):
        """The function, also taking the old keywords.

        Parameters
        ----------
        func : callable
            A function (or a class's ``__init__``) with the new keywords.

        Returns
        -------
        callable
            ``func``, also taking the old keywords, each with a ``DeprecationWarning``.
        """
        called = func.__qualname__.removesuffix(".__init__")

        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            for old, (new, values) in renames.items():
                if old in kwargs:
                    kwargs[new] = _renamed(called, old, new, values, kwargs)
            return func(*args, **kwargs)
        return wrapper
    return decorate


def _renamed(called, old, new, values, kwargs):
    """The value of the old keyword ``old`` (popped from ``kwargs``) under its new name,
    after the ``DeprecationWarning``."""
    if new in kwargs:
        raise TypeError(f"{called}() got {old}= and {new}=; give {new}= only")
    value = kwargs.pop(old)
    use = f"{new}="
    if values is not None:
        if value not in values:
            raise ValueError(f"{old}={value!r}: must be one of {tuple(values)} (deprecated: "
                             f"use {new}=)")
        value = values[value]
        use = f'{new}="{value}"'
    warnings.warn(f"{called}({old}=...) is deprecated and goes in the next release: use "
                  f"{use}", DeprecationWarning, stacklevel=3)
    return value


__all__ += ["renamed_keywords"]


class renamed_attribute:
    """A class attribute renamed to the package's one vocabulary: reading or setting the old
    name keeps working for one release, with a :class:`DeprecationWarning` that names the new
    one (``budget = renamed_attribute("token_budget")`` in the class body).

    Parameters
    ----------
    new : str
        The attribute's new name.
    """

    def __init__(self, new: str):
        self.new = new

    def __set_name__(self, owner, name):
        self.old = f"{owner.__name__}.{name}"

    def _warn(self):
        warnings.warn(f"{self.old} is deprecated and goes in the next release: use "
                      f"{self.old.rsplit('.', 1)[0]}.{self.new}", DeprecationWarning,
                      stacklevel=3)

    def __get__(self, obj, owner=None):
        if obj is None:
            return self
        self._warn()
        return getattr(obj, self.new)

    def __set__(self, obj, value):
        self._warn()
        setattr(obj, self.new, value)


__all__ += ["renamed_attribute"]


def moved_names(module: str, moved: dict, *, submodules=()):
    """A module ``__getattr__``: public names that moved keep working at their old path for
    one release, with a :class:`DeprecationWarning` that names the new one.

    The one deprecation of a moved name in the package (``__getattr__ =
    moved_names(__name__, {...})`` at the end of the old module). The warning reads
    ``"{module}.{name} is deprecated and goes in the next release: use {new} ({hint})"`` and
    is attributed to the line that reads the old name.

    Parameters
    ----------
    module : str
        The old module's dotted name (its ``__name__``), for the messages.
    moved : dict
        Old name -> ``(get, new)`` or ``(get, new, hint)``: ``get`` a function of no arguments
        that returns the object, called at each read (where the object lives above the old
        module's layer, a function of the old module does that import, so that it stays
        visible to ``tests/test_layers.py`` and listed there); ``new`` what to use instead (a
        dotted name, or a call); ``hint`` a remark for the message (``""`` for none).
    submodules : iterable of str, default ()
        Submodules of the old module (a package) that a read imports, with no warning here:
        a submodule that moved warns when it is imported.

    Returns
    -------
    callable
        ``__getattr__(name)``: the object an old name stands for, after the warning.

    Raises
    ------
    AttributeError
        From ``__getattr__``, for a name that is neither the module's nor a moved one.
    """
    submodules = frozenset(submodules)

    def __getattr__(name):
        """The object the old name ``name`` stands for, after a ``DeprecationWarning``."""
        if name in submodules:
            return importlib.import_module(f"{module}.{name}")
        if name not in moved:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        get, new, *hint = moved[name]
        remark = f" ({hint[0]})" if hint and hint[0] else ""
        warnings.warn(f"{module}.{name} is deprecated and goes in the next release: use "
                      f"{new}{remark}", DeprecationWarning, stacklevel=2)
        return get()
    return __getattr__


__all__ += ["moved_names"]
