"""Task graphs: one iteration of anything as a DAG of tasks with durations, dependencies and FIFO resources.

A :class:`TaskGraph` is plain data; :func:`schedule` evaluates it by longest
path (max-plus) for fixed durations, one row or a batch of rows at once;
:func:`simulate` samples random durations and factors (vectorized Monte Carlo).
Both report the makespan and each task's and group's share of the critical
path. See ``docs/dag.md``.

Examples
--------
>>> from queuesgd.dag import Task, TaskGraph, schedule
>>> g = TaskGraph([Task("a", 1.0), Task("b", 2.0), Task("c", 0.5, after=["a", "b"])])
>>> schedule(g).makespan
2.5
"""

from queuesgd.dag.graph import Task, TaskGraph
from queuesgd.dag.maxplus import Schedule, schedule
from queuesgd.dag.montecarlo import Simulation, default_iterations, simulate

__all__ = ["Task", "TaskGraph", "Schedule", "Simulation", "default_iterations", "schedule", "simulate"]
