"""The stepper shared by every scheduler of every paper."""

from .batch import Batch, check_batch
from .core import Engine
from .server import Server, as_server
from .simulate import Result, simulate
from .state import RequestTable, State

__all__ = ["Batch", "check_batch", "Engine", "Result", "simulate", "RequestTable", "State",
           "Server", "as_server"]
