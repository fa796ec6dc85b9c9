"""Synthetic archives of any size (500 harnesses x 500 checkpoints x 50,000 evaluations x 5,000,000
turns for the dashboard benchmark), built from the real engine's schema, tasks, judge and configs."""
from engine.testing.synthetic.build import build_synthetic

__all__ = ["build_synthetic"]
