"""PNG plots of the suite's results (matplotlib, Agg backend)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.plotting import plt, save
from bench.suite import fleet_report, slot_scaling
from bench.suite.settings import DRAIN_VARIANTS, PICKUP_VARIANTS, Settings
from bench.suite.stats import med, select

Record = dict[str, Any]


def _bars(path: Path, title: str, labels: list[str], values: list[float], ylabel: str,
          log: bool = False) -> Path:
    fig, ax = plt.subplots(figsize=(8, 4))
    ax.bar(labels, values, color="#4477aa")
    for i, v in enumerate(values):
        ax.annotate(f"{v:,.0f}", (i, v), ha="center", va="bottom", fontsize=8)
    ax.set_title(title)
    ax.set_ylabel(ylabel)
    if log:
        ax.set_yscale("log")
    ax.tick_params(axis="x", labelrotation=20)
    return save(fig, path)


def draw(records: list[Record], settings: Settings, out: Path) -> list[Path]:
    """Write every plot that has data into ``out``; return their paths."""
    out.mkdir(parents=True, exist_ok=True)
    paths: list[Path] = []
    drain = [(v.name, med(select(records, "drain", variant=v.name), "rate"))
             for v in DRAIN_VARIANTS if select(records, "drain", variant=v.name)]
    if drain:
        paths.append(_bars(out / "drain.png", "Drain: median tasks/s", [d[0] for d in drain],
                           [d[1] for d in drain], "tasks/s", log=True))
        enq = [(v.name, med(select(records, "drain", variant=v.name), "enqueue_rate"))
               for v in DRAIN_VARIANTS if v.name not in ("shardq-defaults", "pgqueuer-b100")
               and select(records, "drain", variant=v.name)]
        paths.append(_bars(out / "enqueue_batched.png", "Batched enqueue (1,000/batch): tasks/s",
                           [e[0] for e in enq], [e[1] for e in enq], "tasks/s"))
    if select(records, "pickup"):
        fig, axes = plt.subplots(1, 2, figsize=(10, 4))
        for ax, load in zip(axes, ("idle", "loaded"), strict=True):
            names = [v.name for v in PICKUP_VARIANTS]
            for j, pct in enumerate(("p50_ms", "p95_ms", "p99_ms")):
                vals = [med(select(records, "pickup", load=load, variant=n), pct) for n in names]
                ax.bar([i + 0.27 * (j - 1) for i in range(len(names))], vals, width=0.27,
                       label=pct[:3])
            ax.set_xticks(range(len(names)), names, rotation=15)
            ax.set_yscale("log")
            ax.set_title(f"Pickup latency, {load}")
            ax.set_ylabel("ms")
            ax.legend()
        paths.append(save(fig, out / "pickup.png"))
    backlog = select(records, "backlog")
    if backlog:
        configs = list(dict.fromkeys(r["config"] for r in backlog))
        paths.append(_bars(out / "backlog.png", "Backlog scaling: shardq worker tasks/s",
                           configs, [med(select(records, "backlog", config=c), "rate")
                                     for c in configs], "tasks/s"))
    if select(records, "ablation"):
        fig, ax = plt.subplots(figsize=(7, 4))
        for c in settings.ablation_claimers:
            ax.plot(settings.ablation_buckets,
                    [med(select(records, "ablation", buckets=b, claimers=c), "rate")
                     for b in settings.ablation_buckets], marker="o", label=f"{c} claimers")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("buckets")
        ax.set_ylabel("tasks/s")
        ax.set_title("Sharding ablation: shardq worker drain rate")
        ax.legend()
        paths.append(save(fig, out / "ablation.png"))
    return (paths + fleet_report.draw(records, settings, out)
            + slot_scaling.draw(records, settings, out))
