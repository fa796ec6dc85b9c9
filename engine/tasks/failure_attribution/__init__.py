"""Multi-agent failure attribution (Who&When, TraceElephant)."""
