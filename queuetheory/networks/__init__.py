"""Networks of LLM agents on networkx (Li, Dai, Peng §4), fleets of engines behind a
router replaying a trace (:func:`simulate_fleet`), and disaggregated serving
(:class:`DistServe`)."""

from .builders import fork_join, length_law, parallel, rybko_stolyar, two_type_engine
from .classic import ClassicRybkoStolyar, rybko_stolyar_classic, simulate_classic
from .disaggregated import DistServe
from .fleet import FLEET_ROUTERS, FleetResult, simulate_fleet
from .graph import ROUTERS, Agent, AgentNetwork
from .simulate import NetworkResult, simulate
from .traffic import (
    StabilityReport,
    agent_loads,
    class_rates,
    stability_report,
    traffic,
    virtual_station_loads,
)

__all__: list[str] = []
__all__ += [
    "AgentNetwork", "Agent", "ROUTERS",
    "parallel", "two_type_engine", "fork_join", "rybko_stolyar", "length_law",
    "class_rates", "traffic", "agent_loads", "virtual_station_loads", "stability_report",
    "StabilityReport", "simulate", "NetworkResult",
    "ClassicRybkoStolyar", "rybko_stolyar_classic", "simulate_classic",
    "simulate_fleet", "FleetResult", "FLEET_ROUTERS", "DistServe",
]
