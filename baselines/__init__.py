"""Reference baseline systems that read a task's inputs and write runs in its own format."""

from baselines.base import BaselineSystem
from baselines.runner import BaselineRun, run_system
from baselines.systems import SYSTEM_NAMES, get_system, system_class

__all__ = ["SYSTEM_NAMES", "BaselineRun", "BaselineSystem", "get_system", "run_system",
           "system_class"]
