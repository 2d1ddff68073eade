"""What the searches share: the settings a policy refuses, the token budget, and a bar of
probes."""

from __future__ import annotations

from ..engine.server import as_server
from ..errors import check_positive


def _checked_settings(who: str, policy, time_model, token_budget, memory, first_token):
    """The settings of a capacity question — a :class:`~queuetheory.engine.Server` given as
    ``time_model``, or a time model and the loose settings (``first_token=None``:
    ``"prefill"``) — validated once and refused, before any bound or probe, where ``policy``
    cannot run (:meth:`~queuetheory.engine.Server.check`): ``(time_model, token_budget,
    memory, first_token)``."""
    server = as_server(time_model, token_budget=token_budget, memory=memory,
                       first_token=first_token)
    server.check(policy, where=f"qt.capacity.{who}")
    return server.time_model, server.token_budget, server.memory, server.first_token


def _budget_of(policy, token_budget):
    b = token_budget if token_budget is not None else getattr(policy, "token_budget", None)
    if b is None:
        raise ValueError(f"token_budget=None: {policy!r} has no token_budget of its own; "
                         "give token_budget")
    return int(check_positive("token_budget", b, integer=True))


class _ProbeBar:
    """A tqdm bar of a search's probes (``on``), each shown with its rate and outcome;
    nothing when off."""

    def __init__(self, on: bool, desc: str):
        self.bar = None
        if on:
            from tqdm.auto import tqdm

            self.bar = tqdm(desc=desc, unit="probe")

    def update(self, rate: float, outcome: str, seconds: float) -> None:
        if self.bar is not None:
            self.bar.set_postfix_str(f"rate {rate:.4g}: {outcome} ({seconds:.1f} s)",
                                     refresh=False)
            self.bar.update()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
