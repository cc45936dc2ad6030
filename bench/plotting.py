"""Matplotlib for the benchmarks' reports: the file-only Agg backend, and saving a figure."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # before pyplot: reports are drawn without a display
import matplotlib.pyplot as plt

__all__ = ["plt", "save"]


def save(fig: Any, path: Path) -> Path:
    """Lay ``fig`` out, write it to ``path`` as a PNG and free it; returns ``path``."""
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
