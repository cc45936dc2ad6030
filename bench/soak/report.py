"""The soak's report: per-minute tables, the goals checked per arm, and plots."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from bench.harness import RESULTS_DIR, markdown_table, stamp
from bench.plotting import plt, save

MIB = 2**20
DEAD_GOAL = 20_000
INDEX_GOAL = 10 * MIB
FLAT_WINDOW_MIN = 30
FLAT_GROWTH = 0.05  # a fitted growth over the window of at most 5 % counts as flat
CLAIM_FACTOR = 1.5
Record = dict[str, Any]
PANELS = [  # (key, title, unit scale, label)
    ("index_bytes", "indexes of shardq.tasks", MIB, "MiB"),
    ("table_bytes", "heap of shardq.tasks", MIB, "MiB"),
    ("peak_dead", "dead rows (peak of the minute)", 1000, "thousand"),
    ("claim_p99_ms", "claim p99 (probe, server time)", 1, "ms"),
    ("claim_p99_pages", "claim p99 (probe, pages touched)", 1, "pages"),
    ("pickup_p99_ms", "pickup p99", 1, "ms"),
    ("wal_per_task", "WAL per task", 1, "bytes"),
]


def _wal_per_task(rec: Record) -> float | None:
    wal = rec["statement_wal_bytes"] + rec["autovacuum_wal_bytes"]
    return wal / rec["tasks"] if rec["tasks"] else None


def _slope_growth(values: list[float]) -> float:
    """Growth over the series by a least-squares line, as a fraction of its mean."""
    n = len(values)
    if n < 2:
        return 0.0
    mx, my = (n - 1) / 2, sum(values) / n
    cov = sum((i - mx) * (v - my) for i, v in enumerate(values))
    var = sum((i - mx) ** 2 for i in range(n))
    return (cov / var) * (n - 1) / my if my else 0.0


def _within(records: list[Record], key: str, after_vacuum: float | None, unit: str,
            digits: int) -> tuple[bool, str]:
    """Whether ``key`` stayed within CLAIM_FACTOR x its value right after a vacuum in
    every minute, and what was seen."""
    values = [r[key] for r in records if r[key] is not None]
    limit = CLAIM_FACTOR * after_vacuum if after_vacuum else None
    over = [r["minute"] for r in records
            if limit is not None and r[key] is not None and r[key] > limit]
    nan = float("nan")
    return limit is not None and not over, (
        f"right after a vacuum: {after_vacuum or nan:.{digits}f} {unit} (limit "
        f"{limit or nan:.{digits}f}); minutes {min(values):.{digits}f}..{max(values):.{digits}f}"
        f" {unit}; over in {len(over)} of {len(records)} minutes"
        + (f" ({', '.join(map(str, over[:12]))}{'…' if len(over) > 12 else ''})"
           if over else ""))


def goals(records: list[Record], after_vacuum_ms: float | None,
          after_vacuum_pages: float | None = None) -> list[tuple[str, bool, str]]:
    """Each goal: (goal, met, what was measured).  The pages a claim touches are the same
    check as its time, free of the machine's scheduling noise (none without a vacuum
    to compare with)."""
    peak = max(r["peak_dead"] for r in records)
    window = records[-FLAT_WINDOW_MIN:]
    sizes = [float(r["index_bytes"]) for r in window]
    growth = _slope_growth(sizes)
    out = [
        (f"dead rows never above {DEAD_GOAL:,}", peak <= DEAD_GOAL,
         f"peak {peak:,} (polled every second)"),
        (f"indexes <= {INDEX_GOAL // MIB} MiB and flat over the last {len(window)} minutes",
         max(sizes) <= INDEX_GOAL and abs(growth) <= FLAT_GROWTH,
         f"{min(sizes) / MIB:.1f}..{max(sizes) / MIB:.1f} MiB, fitted growth "
         f"{growth * 100:+.1f} % over the window"),
        (f"claim p99 of every minute within {CLAIM_FACTOR}x its value right after a vacuum",
         *_within(records, "claim_p99_ms", after_vacuum_ms, "ms", 2)),
    ]
    if after_vacuum_pages is not None:
        out.append((f"pages a claim touches, p99 of every minute, within {CLAIM_FACTOR}x "
                    "their p99 right after a vacuum",
                    *_within(records, "claim_p99_pages", after_vacuum_pages, "pages", 0)))
    return out


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _middle(values: list[float], digits: int) -> str:
    """The median minute's value, or "-" when no minute measured it (a quick run's
    minutes may see no pickup)."""
    ordered = sorted(values)
    return f"{ordered[len(ordered) // 2]:.{digits}f}" if ordered else "-"


def summary(result: dict[str, Any]) -> str:
    """Each arm over the last FLAT_WINDOW_MIN minutes (all of a shorter run), side by side."""
    rows = []
    for name, records in result["records"].items():
        window = records[-FLAT_WINDOW_MIN:]
        span = len(window)
        first = records[-span - 1] if len(records) > span else None

        def per_min(key: str, window: list[Record] = window, first: Record | None = first,
                    span: int = span) -> float:
            return float(window[-1][key] - (first[key] if first else 0)) / span

        def vals(key: str, window: list[Record] = window) -> list[float]:
            return [r[key] for r in window if r[key] is not None]

        wal = [w for w in (_wal_per_task(r) for r in window) if w is not None]
        p99 = vals("claim_p99_ms")
        rows.append([
            name, f"{(_mean(vals('table_bytes')) or 0) / MIB:.1f}",
            f"{min(vals('index_bytes')) / MIB:.1f}..{max(vals('index_bytes')) / MIB:.1f}",
            f"{max(vals('peak_dead')):,}", f"{per_min('vacuums'):.1f}",
            f"{per_min('autovacuums'):.2f}",
            _middle(vals('claim_p50_ms'), 2),
            f"{_middle(p99, 2)} / {_middle(p99 and [max(p99)], 2)}",
            f"{_mean(vals('claim_mean_ms')) or 0:.3f}",
            _middle(vals('pickup_p99_ms'), 0),
            f"{_mean(wal):,.0f}" if wal else "",
            f"{_mean([r['tasks'] / r.get('seconds', 60) for r in window]) or 0:,.0f}",
        ])
    return markdown_table(
        ["arm", "heap MiB (mean)", "indexes MiB (min..max)", "peak dead", "vacuums/min",
         "autovacuums/min", "claim p50 ms (median minute)", "claim p99 ms (median / worst "
         "minute)", "claim mean ms (server)", "pickup p99 ms (median minute)", "WAL B/task",
         "tasks/s"], rows)


def _rows(records: list[Record]) -> list[list[object]]:
    def f(v: float | None, digits: int = 2) -> str:
        return "" if v is None else f"{v:.{digits}f}"

    return [[r["minute"], f(r["table_bytes"] / MIB, 1), f(r["index_bytes"] / MIB, 1),
             f"{r['live']:,}", f"{r['dead']:,}", f"{r['peak_dead']:,}",
             r["vacuums"], r["autovacuums"], f(r["claim_p50_ms"]), f(r["claim_p99_ms"]),
             f(r["claim_p99_pages"], 0),
             f(r["claim_mean_ms"], 3), f(r["pickup_p50_ms"], 1), f(r["pickup_p99_ms"], 1),
             f"{r['tasks'] / r.get('seconds', 60):,.0f}", f(_wal_per_task(r), 0)]
            for r in records]


HEADERS = ["min", "heap MiB", "idx MiB", "live", "dead", "peak dead", "vacuums (total)",
           "autovacuums (total)", "claim p50 ms", "claim p99 ms", "claim p99 pages",
           "claim mean ms (server)",
           "pickup p50 ms", "pickup p99 ms", "tasks/s", "WAL B/task"]


def _settings(facts: dict[str, Any]) -> str:
    """The vacuum step's settings the run had."""
    return ", ".join(f"`{name}` {value:,}" if isinstance(value, int) else f"`{name}` {value:g}"
                     for name, value in facts["vacuum_settings"].items())


def plot(result: dict[str, Any], path: Path) -> Path:
    """One figure: each panel a figure per minute, one line per arm."""
    fig, axes = plt.subplots(2, 4, figsize=(18, 7))
    for ax in axes.flat[len(PANELS):]:
        ax.set_visible(False)
    for ax, (key, title, scale, unit) in zip(axes.flat, PANELS, strict=False):
        for name, records in result["records"].items():
            values = [(_wal_per_task(r) if key == "wal_per_task" else r[key]) for r in records]
            xs = [r["minute"] for r, v in zip(records, values, strict=True) if v is not None]
            ys = [v / scale for v in values if v is not None]
            ax.plot(xs, ys, marker=".", label=name,
                    color="#4477aa" if name == "new" else "#ee6677")
        ax.set_title(title)
        ax.set_xlabel("minute")
        ax.set_ylabel(unit)
        ax.set_ylim(bottom=0)
        ax.legend()
    return save(fig, path)


def write_report(result: dict[str, Any], suffix: str = "") -> str:
    """Write bench/results/soak{suffix}.md and its plot; return the markdown."""
    facts, records = result["facts"], result["records"]
    image = plot(result, RESULTS_DIR / f"soak{suffix}.png")
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(facts["started"]))
    lines = [
        f"# Soak: {facts['minutes']} minutes at {facts['rate']:,.0f} tasks/s, two arms"
        + ("" if facts.get("minute_s", 60) == 60 else
           f" (--quick: 'minutes' of {facts['minute_s']:g} s, numbers meaningless)"), "",
        f"Started {started}; `python -m bench.soak{' --quick' if suffix else ''}`.", "",
        *facts["machine"],
        f"- each arm: its own database on that one server, a producer enqueuing "
        f"{facts['rate']:,.0f} due tasks/s (`enqueue_many` every 50 ms) and "
        f"{facts['delayed'] / facts['delay_s']:.1f} delayed tasks/s {facts['delay_s']:.0f} s "
        f"ahead (~{facts['delayed']:,} standing, seeded at the start), one `shardq consume` "
        "daemon (defaults, 1 janitor), and a claim probe",
        "- **new**: the schema at head (0014's autovacuum settings) and the janitor's vacuum "
        f"step (defaults: {_settings(facts)}); **old**: 0014's autovacuum settings "
        "reset to 0002's, `SHARDQ_VACUUM=0`", "",
        "How each figure is measured:", "",
        "- sizes, live and dead rows: `pg_relation_size`, `pg_indexes_size`, "
        "`pg_stat_user_tables` at the end of each minute; *peak dead*: the largest "
        "`n_dead_tup` the probe saw, polling every second",
        "- claim p50/p99: a sampled probe, not the daemon's own claims: every 100 ms the "
        "daemon's claim statement (limit 10, a random bucket) under `EXPLAIN (ANALYZE, "
        "TIMING OFF)` in a transaction that is rolled back, its server execution time "
        "(~600 a minute; a real claim of the queue's range, dead entries and row locks "
        "included, that takes nothing); *claim mean (server)*: `pg_stat_statements` mean "
        "execution time of the daemon's claim statements in the arm's database that minute",
        "- pickup: handler start minus the time the task became due (enqueue, or "
        "`run_at` for delayed ones), recorded by every handler run",
        "- WAL per task: the arm's WAL, `pg_stat_statements.wal_bytes` of its database "
        "(every statement, the janitor's VACUUM and REINDEX included) plus the WAL its "
        "autovacuum runs logged (`log_autovacuum_min_duration = 0`), over the tasks done "
        "(handler runs); the server-wide total "
        "(`pg_current_wal_lsn` deltas) is given below for comparison", "",
        f"## Summary: the last {min(FLAT_WINDOW_MIN, facts['minutes'])} minutes", "",
        summary(result), "",
        "## Goals", "",
    ]
    for name, recs in records.items():
        rows = [[goal, "met" if ok else "**missed**", seen]
                for goal, ok, seen in goals(recs, facts["after_vacuum_p99_ms"][name],
                                            facts["after_vacuum_p99_pages"][name])]
        lines += [f"### {name}", "", markdown_table(["goal", "", "measured"], rows), ""]
    total_server = sum(facts["server_wal_bytes"])
    per_arm = {name: sum(r["statement_wal_bytes"] + r["autovacuum_wal_bytes"] for r in recs)
               for name, recs in records.items()}
    lines += [
        "## WAL", "",
        f"Server-wide: {total_server / MIB:,.0f} MiB; attributed to the arms: "
        + ", ".join(f"{n} {w / MIB:,.0f} MiB" for n, w in per_arm.items())
        + f"; the rest ({(total_server - sum(per_arm.values())) / MIB:,.0f} MiB) is "
        "checkpoints' and other databases' and background work's.", "",
        f"![per-minute figures]({image.name})", "",
    ]
    for name, recs in records.items():
        lines += [f"## Per minute: {name}", "", markdown_table(HEADERS, _rows(recs)), ""]
    text = "\n".join(lines)
    (RESULTS_DIR / f"soak{suffix}.md").write_text(
        stamp(text, {k: result[k] for k in ("command", "commit") if k in result}),
        encoding="utf-8")
    return text
