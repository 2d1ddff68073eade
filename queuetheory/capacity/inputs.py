"""What the searches share: the settings a policy refuses, the token budget, and a bar of
probes."""

from __future__ import annotations

from ..engine.simulate import budget_refusal
from ..errors import UnsupportedSettingError, check_positive


def _refuse_unsupported(who: str, policy, memory, first_token, token_budget=None) -> None:
    """Refuse, before any bound or probe, a setting ``policy`` says it cannot run
    (:meth:`~queuetheory.policies.Policy.supports`, and a token budget a round-model policy
    cannot keep: :func:`~queuetheory.engine.simulate.budget_refusal`)."""
    reason = budget_refusal(policy, token_budget, memory)
    if reason:
        raise UnsupportedSettingError(
            policy, f"token_budget={token_budget} in qt.capacity.{who}", reason)
    supports = getattr(policy, "supports", None)
    reason = supports(memory=memory, first_token=first_token) if supports else None
    if reason:
        raise UnsupportedSettingError(
            policy, f"memory={memory}, first_token={first_token!r} in qt.capacity.{who}",
            reason)


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
