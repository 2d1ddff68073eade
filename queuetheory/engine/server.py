"""One engine's settings as one value: :class:`Server`.

A scheduler runs on a server: a batch-time model, a per-batch token budget, a KV memory, a
first-token convention and a preemption rule. The questions of the toolkit — a run
(:func:`~queuetheory.simulate`), a stability verdict (:func:`~queuetheory.stability`), a
capacity answer (:mod:`queuetheory.capacity`), a fleet (:mod:`queuetheory.networks`) —
take the same five settings; a :class:`Server` holds them, validated once, the way scipy's
frozen distributions hold their parameters. Every function that takes a ``time_model``
takes a :class:`Server` in its place; the loose keywords (``token_budget``, ``memory``,
``first_token``) keep working, and giving a setting both ways is refused unless the two
agree.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ..errors import UnsupportedSettingError, check_positive
from ..timing import TimeModel
from .conventions import check_first_token, check_preemption

__all__ = ["Server", "as_server", "server_settings", "token_budget_for"]


@dataclass(frozen=True)
class Server:
    """One LLM engine's settings: what a scheduler runs on.

    Parameters
    ----------
    time_model : TimeModel
        The batch-time model (seconds, milliseconds or rounds: its unit is the run's).
    token_budget : int, optional
        The per-batch token limit ``b`` of Li, Dai, Peng (2.5b); ``None``: the policy's own.
    memory : int, optional
        The KV-cache capacity ``M`` in tokens; ``None``: unlimited.
    first_token : {"prefill", "decode"}
        Which iteration emits a request's first output token
        (:mod:`~queuetheory.engine.conventions`): the real engines' ``"prefill"`` (default)
        or Li, Dai, Peng's ``"decode"``.
    preemption : {"recompute", "restart"}, optional
        What the engine does with a request a batch evicts; ``None``: the policy's own. A
        policy built with another rule is refused (:meth:`refusal`): the preemption is a
        setting of the engine the policy must be built for.

    Raises
    ------
    ValueError
        For a ``time_model`` that is not a :class:`~queuetheory.timing.TimeModel`, a budget
        or memory that is not a positive integer, or an unknown convention or preemption.

    Examples
    --------
    >>> import queuetheory as qt
    >>> server = qt.Server(qt.UnitTime(), token_budget=512, memory=20_000)
    >>> server.replace(memory=None).memory is None
    True
    """

    time_model: TimeModel
    token_budget: int | None = None
    memory: int | None = None
    first_token: str = "prefill"
    preemption: str | None = None

    def __post_init__(self):
        if not isinstance(self.time_model, TimeModel):
            raise ValueError(f"time_model={self.time_model!r}: must be a queuetheory TimeModel")
        for name in ("token_budget", "memory"):
            value = getattr(self, name)
            if value is not None:
                check_positive(name, value, integer=True)
                object.__setattr__(self, name, int(value))
        check_first_token(self.first_token)
        if self.preemption is not None:
            check_preemption(self.preemption)

    def replace(self, **changes) -> Server:
        """This server with some settings changed (validated again).

        Parameters
        ----------
        **changes
            New values of the fields (``time_model``, ``token_budget``, ``memory``,
            ``first_token``, ``preemption``).

        Returns
        -------
        Server
            The changed server.

        Raises
        ------
        ValueError
            For an invalid new value.
        TypeError
            For a name that is not a field.
        """
        return dataclasses.replace(self, **changes)

    def budget_for(self, policy) -> int | None:
        """The engine's per-batch token budget for ``policy``: the server's, else the
        policy's own (``None``: none).

        Parameters
        ----------
        policy : Policy
            The scheduler.

        Returns
        -------
        int or None
            The budget ``b``.
        """
        return token_budget_for(policy, self.token_budget)

    def refusal(self, policy) -> str | None:
        """Why ``policy`` cannot run on this server, or ``None`` when it can.

        A round-model policy (no token budget of its own) refuses a budget below the memory
        (``Policy.no_token_budget``); a policy refuses a memory or convention it cannot keep
        feasible (:meth:`~queuetheory.policies.Policy.supports`); a preemption rule other
        than the policy's own is refused.

        Parameters
        ----------
        policy : Policy
            The scheduler.

        Returns
        -------
        str or None
            The setting refused and the reason, or ``None``.
        """
        refused = self._refused(policy)
        return None if refused is None else f"{refused[0]}: {refused[1]}"

    def check(self, policy, where: str | None = None) -> None:
        """Refuse ``policy`` on this server before anything runs (see :meth:`refusal`).

        Parameters
        ----------
        policy : Policy
            The scheduler.
        where : str, optional
            The function asking, named in the error (e.g. ``"qt.capacity.max_rate"``).

        Raises
        ------
        UnsupportedSettingError
            When :meth:`refusal` gives a reason.
        """
        refused = self._refused(policy)
        if refused is not None:
            setting, why = refused
            raise UnsupportedSettingError(
                policy, setting if where is None else f"{setting} in {where}", why)

    def _refused(self, policy) -> tuple[str, str] | None:
        reason = getattr(policy, "no_token_budget", None)
        if reason and self.token_budget is not None and not (
                self.memory is not None and self.token_budget >= self.memory):
            return f"token_budget={self.token_budget}", reason
        supports = getattr(policy, "supports", None)
        reason = supports(memory=self.memory, first_token=self.first_token) if supports else None
        if reason:
            return f"memory={self.memory}, first_token={self.first_token!r}", reason
        own = getattr(policy, "preemption", None)
        if self.preemption is not None and own is not None and own != self.preemption:
            return (f"preemption={self.preemption!r}",
                    f"the policy preempts by {own!r}; build it with "
                    f"preemption={self.preemption!r}")
        return None


def as_server(time_model, *, token_budget=None, memory=None, first_token=None,
              preemption=None) -> Server:
    """The :class:`Server` a function was given: ``time_model`` itself when it is one, else
    one built from it and the loose settings.

    Parameters
    ----------
    time_model : TimeModel or Server
        The batch-time model, or a whole server.
    token_budget, memory, first_token, preemption : optional
        The loose settings (``None``: not given; ``first_token`` then ``"prefill"``).

    Returns
    -------
    Server
        The validated settings.

    Raises
    ------
    ValueError
        For an invalid setting, or a loose setting that contradicts the server's.
    """
    loose = {"token_budget": token_budget, "memory": memory, "first_token": first_token,
             "preemption": preemption}
    if isinstance(time_model, Server):
        for name, value in loose.items():
            if value is not None and value != getattr(time_model, name):
                raise ValueError(f"{name}={value!r}: the Server given has {name}="
                                 f"{getattr(time_model, name)!r}; give each setting once")
        return time_model
    if first_token is None:
        loose["first_token"] = "prefill"
    return Server(time_model, **loose)


def server_settings(time_model, token_budget=None, memory=None, first_token=None) -> tuple:
    """``(time_model, token_budget, memory, first_token)``: a :class:`Server`'s settings when
    ``time_model`` is one (a loose setting given as well must agree), else the loose
    settings as given (``None``: not given).

    For functions whose own defaults differ from a :class:`Server`'s (a setting left
    ``None`` means something of its own there).

    Parameters
    ----------
    time_model : TimeModel or Server
        The batch-time model, or a whole server.
    token_budget, memory, first_token : optional
        The loose settings.

    Returns
    -------
    tuple
        The batch-time model and the three settings.

    Raises
    ------
    ValueError
        For a loose setting that contradicts the server's.
    """
    if isinstance(time_model, Server):
        s = as_server(time_model, token_budget=token_budget, memory=memory,
                      first_token=first_token)
        return s.time_model, s.token_budget, s.memory, s.first_token
    return time_model, token_budget, memory, first_token


def token_budget_for(policy, token_budget=None, *, required: bool = False) -> int | None:
    """The per-batch token budget an engine runs ``policy`` with: ``token_budget``, else the
    policy's own (the one copy of that rule: :meth:`Server.budget_for` and the capacity
    searches ask it).

    Parameters
    ----------
    policy : Policy
        The scheduler.
    token_budget : int, optional
        The server's budget; ``None``: the policy's own.
    required : bool, default False
        Refuse a missing budget, and check the budget is a positive integer.

    Returns
    -------
    int or None
        The budget ``b`` (``None``: none, where not ``required``).

    Raises
    ------
    ValueError
        Where ``required``, if neither gives a budget or it is not a positive integer.
    """
    b = token_budget if token_budget is not None else getattr(policy, "token_budget", None)
    if not required:
        return b
    if b is None:
        raise ValueError(f"token_budget=None: {policy!r} has no token_budget of its own; "
                         "give token_budget")
    return int(check_positive("token_budget", b, integer=True))
