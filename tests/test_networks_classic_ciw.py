"""The classical exponential Rybko–Stolyar network against an independent simulator (Ciw)."""

import numpy as np
import pytest

from queuetheory.networks import rybko_stolyar_classic, simulate_classic
from queuetheory.stability import path_growth_rate

ciw = pytest.importorskip("ciw")

CLASSES = ["c1", "c2", "c3", "c4"]


def _ciw_network(model):
    """Class 1 at node 1 becomes class 2 at node 2; class 3 at node 2 becomes class 4 at node 1."""
    lam, m = model.lam, model.means
    E = ciw.dists.Exponential
    zero = [[0.0, 0.0], [0.0, 0.0]]

    def change(c, to=None):
        return {d: float(d == (to or c)) for d in CLASSES}

    return ciw.create_network(
        arrival_distributions={"c1": [E(lam), None], "c2": [None, None],
                               "c3": [None, E(lam)], "c4": [None, None]},
        service_distributions={"c1": [E(1 / m[0]), E(1)], "c2": [E(1), E(1 / m[1])],
                               "c3": [E(1), E(1 / m[2])], "c4": [E(1 / m[3]), E(1)]},
        routing={"c1": zero, "c2": [[0.0, 1.0], [0.0, 0.0]], "c3": zero,
                 "c4": [[0.0, 0.0], [1.0, 0.0]]},
        class_change_matrices=[
            {c: change(c, "c2" if c == "c1" else None) for c in CLASSES},
            {c: change(c, "c4" if c == "c3" else None) for c in CLASSES}],
        number_of_servers=[1, 1],
        priority_classes=(dict(zip(CLASSES, model.ranks(), strict=True)), ["resume", "resume"]),
    )


def _ciw_paths(model, horizon, seed):
    """Jump times and per-class counts rebuilt from Ciw's service records."""
    ciw.seed(seed)
    sim = ciw.Simulation(_ciw_network(model))
    sim.simulate_until_max_time(horizon)
    events = []
    for r in sim.get_all_records():
        if r.record_type == "service":
            k = CLASSES.index(r.customer_class)
            events += [(r.arrival_date, k, 1), (r.exit_date, k, -1)]
    for node in sim.nodes[1:-1]:
        events += [(ind.arrival_date, CLASSES.index(ind.customer_class), 1)
                   for ind in node.all_individuals]
    events.sort()
    t = np.array([e[0] for e in events])
    steps = np.zeros((len(events), 4))
    steps[np.arange(len(events)), [e[1] for e in events]] = [e[2] for e in events]
    return t, np.cumsum(steps, axis=0)


@pytest.mark.parametrize("means", [(0.1, 0.6, 0.1, 0.6), (0.1, 0.4, 0.1, 0.4)])
def test_both_simulators_agree_on_each_side_of_the_virtual_station(means):
    model = rybko_stolyar_classic("up", 1.0, means)
    v = model.stability_report().loc["virtual[2+4] < 1", "load"]
    want = "unstable" if v > 1 else "stable"
    ours = simulate_classic(model, 4000, seed=11).growth_rate().verdict
    t, counts = _ciw_paths(model, 4000, seed=11)
    theirs = path_growth_rate(t, counts.sum(axis=1), end=4000, offered=2.0).verdict
    assert ours == theirs == want


def test_mean_queue_lengths_match_ciw_in_a_stable_case():
    """'down' at station loads 0.7: per-class time-average counts over 4 replications each,
    compared within 4 standard errors of the difference."""
    model = rybko_stolyar_classic("down", 1.0, (0.1, 0.6, 0.1, 0.6))
    horizon, warm = 3000.0, 300.0
    ours = np.array([simulate_classic(model, horizon, seed=s).mean_counts(warm)
                     for s in range(4)])
    theirs = []
    for s in range(4):
        t, counts = _ciw_paths(model, horizon, seed=100 + s)
        dt = np.diff(np.clip(np.append(t, horizon), warm, horizon))
        theirs.append((counts * dt[:, None]).sum(axis=0) / (horizon - warm))
    theirs = np.array(theirs)
    diff = ours.mean(axis=0) - theirs.mean(axis=0)
    se = np.sqrt(ours.var(axis=0, ddof=1) / 4 + theirs.var(axis=0, ddof=1) / 4)
    assert np.all(np.abs(diff) < 4 * se + 1e-9), (ours.mean(axis=0), theirs.mean(axis=0), se)
    assert ours.mean(axis=0)[1] > 0.5       # the long classes really queue
