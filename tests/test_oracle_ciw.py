"""An external oracle for the single-server queue: with ``max_reqs=1`` the engine serves one
request at a time in arrival order, so it is a FIFO single-server queue whose service times
follow from the time model. Ciw, fed the same inter-arrival and service times, must give every
request the same departure time (M/D/1 with fixed lengths, M/G/1 with random output lengths),
up to the rounding of Ciw's summed inter-arrival times.
"""

import numpy as np
import pytest

import queuetheory as qt

ciw = pytest.importorskip("ciw")

TIME = qt.AffineTokenTime(c=16.1e-3, per_prefill=57.8e-6, per_decode=39.5e-6)
BUDGET = 512


def service_time(prompt, output):
    """One prefill iteration (which emits the first token) and ``output − 1`` decodes."""
    first = TIME.count_duration(int(prompt), 0)
    return first + (int(output) - 1) * TIME.count_duration(0, 1)


def ciw_departures(arrival, service):
    gaps = np.diff(arrival, prepend=0.0)
    net = ciw.create_network(arrival_distributions=[ciw.dists.Sequential(gaps.tolist())],
                             service_distributions=[ciw.dists.Sequential(service.tolist())],
                             number_of_servers=[1])
    ciw.seed(0)
    sim = ciw.Simulation(net)
    sim.simulate_until_max_customers(arrival.size, method="Finish")
    records = sorted(sim.get_all_records(), key=lambda r: r.arrival_date)
    return (np.array([r.arrival_date for r in records]),
            np.array([r.exit_date for r in records]))


@pytest.mark.parametrize("model", ["M/D/1", "M/G/1"])
def test_single_server_sample_path_matches_ciw(model):
    rng = np.random.default_rng(5)
    n = 300
    prompt = np.full(n, 512)
    output = np.full(n, 64) if model == "M/D/1" else rng.geometric(1 / 64, n)
    service = np.array([service_time(p, o) for p, o in zip(prompt, output, strict=True)])
    arrival = np.cumsum(rng.exponential(service.mean() / 0.8, n))      # load 0.8
    res = qt.simulate(qt.Workload.from_arrays(arrival, prompt, output),
                      qt.policies.Sarathi(BUDGET, max_reqs=1), TIME, first_token="prefill")
    ours = res.requests
    their_arrival, their_exit = ciw_departures(arrival, service)
    np.testing.assert_allclose(their_arrival, arrival, rtol=0, atol=1e-8)
    np.testing.assert_allclose(ours["finish"].to_numpy(), their_exit, rtol=0, atol=1e-8)
    waited = ours["finish"].to_numpy() - arrival - service
    assert (waited > 1e-3).sum() > n // 4          # the queue does form: a real test of order
