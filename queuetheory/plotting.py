"""Matplotlib figures shared by the notebooks and the report."""

from __future__ import annotations

__all__ = ["plot_paths"]


def plot_paths(results: dict, ax=None, quantity: str = "unfinished_tokens", *,
               predicted_slope: float | None = None, time_scale: float = 1.0,
               time_label: str = "time"):
    """Plot ``quantity`` of ``Result.paths`` against time for each named result.

    ``predicted_slope`` adds the line ``slope · t`` (Theorem 1(b)'s λ(m_p+m_d) − b/t_b).
    Each value of ``results`` is a :class:`~queuetheory.Result` or its ``paths`` DataFrame.
    """
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(6.4, 4))
    end = 0.0
    for name, r in results.items():
        p = getattr(r, "paths", r)
        ax.plot(p["time"] / time_scale, p[quantity], lw=0.8, label=name)
        end = max(end, float(p["time"].iloc[-1]) if len(p) else 0.0)
    if predicted_slope is not None:
        ax.plot([0, end / time_scale], [0, predicted_slope * end], "k--", lw=1,
                label=f"slope {predicted_slope:.4g}")
    ax.set_xlabel(time_label)
    ax.set_ylabel(quantity.replace("_", " "))
    ax.legend(fontsize=7)
    return ax
