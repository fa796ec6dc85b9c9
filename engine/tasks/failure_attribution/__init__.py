"""Multi-agent failure attribution (Who&When, TraceElephant)."""
from engine.tasks.failure_attribution.task import FailureAttributionTask

__all__ = ["FailureAttributionTask"]
