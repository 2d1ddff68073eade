"""The figure style's log ticks stay readable: no two x tick labels overlap, whatever the
span of the axis (many decades, a few, less than one)."""

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from queuetheory.plotting import finish  # noqa: E402


@pytest.mark.parametrize("lo, hi", [(20.0, 2e4), (1.0, 1e6), (3.0, 300.0), (1.5e4, 4e4),
                                    (18.0, 38.0)])
def test_log_tick_labels_do_not_overlap(lo, hi):
    fig, ax = plt.subplots(figsize=(4, 3))
    x = np.geomspace(lo, hi, 50)
    ax.plot(x, x)
    finish(ax, title="t", xlabel="x (ms)", ylabel="y (ms)", logx=True, logy=True)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    boxes = sorted((t.get_window_extent(renderer) for t in ax.get_xticklabels()
                    if t.get_text() and t.get_visible()
                    and lo <= t.get_position()[0] <= hi), key=lambda b: b.x0)
    assert len(boxes) >= 2, "an axis needs at least two labelled values"
    for a, b in zip(boxes, boxes[1:], strict=False):
        assert a.x1 <= b.x0, f"labels overlap on [{lo}, {hi}]"
    plt.close(fig)
