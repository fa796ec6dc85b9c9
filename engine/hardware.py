"""What the machine computes fast: bf16 needs hardware units, or it is emulated many times slower than fp32."""
from __future__ import annotations

from pathlib import Path


def cpu_has_bf16_units() -> bool:
    """Whether this CPU's flags (Linux /proc/cpuinfo) show AVX-512-BF16 or AMX-BF16."""
    try:
        flags = Path("/proc/cpuinfo").read_text().split()
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags
