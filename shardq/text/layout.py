"""The layout in use and a reshard's progress, for people: one line shared by ``shardq
reshard --status``, ``shardq stats`` and the dashboard, so they read the same."""

from __future__ import annotations

from shardq.ops.reshard import IndexBuild, ReshardStatus

SHOWN_WORKERS = 5  # names a waiting switch lists before "and N more"


def line(status: ReshardStatus) -> str:
    """``64 buckets``, and during a reshard its phase and what it waits for."""
    kind = "" if status.expression else ", as created"
    head = f"{status.bucket_count} buckets (generation {status.generation}{kind})"
    if status.phase == "build":
        built = "; ".join(_build(b) for b in status.building)
        return (f"{head}; reshard to {status.target} buckets: building its indexes"
                + (f" ({built})" if built else ""))
    if status.phase == "switch":
        waiting = status.waiting_for
        names = ", ".join(waiting[:SHOWN_WORKERS])
        more = f" and {len(waiting) - SHOWN_WORKERS} more" if len(waiting) > SHOWN_WORKERS else ""
        return (f"{head}; reshard from {status.retired_count} buckets: switched "
                f"{status.phase_s:.0f} s ago"
                + (f", waiting for {len(waiting)} workers ({names}{more})" if waiting else ""))
    if status.phase == "retire":
        return f"{head}; reshard from {status.retired_count} buckets: dropping the old layout"
    return head


def _build(build: IndexBuild) -> str:
    share = (f" {100 * build.blocks_done / build.blocks_total:.0f}% of blocks"
             if build.blocks_total else "")
    return f"{build.index or 'an index'}: {build.phase}{share}"
