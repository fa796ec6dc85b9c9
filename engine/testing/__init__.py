"""Fixtures for tests and benchmarks, built from the real engine: a scripted backend, a random tiny
checkpoint, and synthetic archives of any size. Nothing in the engine imports this package."""
