"""The audit trail on the dashboard (admins only): a page, and ``GET /api/audit``.

Both read :func:`shardq.ops.audit.listing`, newest first, filtered by ``actor``,
``action`` and ``queue``, paged back by ``before`` (the last row's time) and bounded
by ``limit`` (100 by default, at most 1,000).  Nothing here changes or deletes a row.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from shardq.ops import audit
from shardq.web import reads
from shardq.web.context import context
from shardq.web.gate import authorised
from shardq.web.pages import render


def filters(request: Request) -> dict[str, Any]:
    """The trail's filters from the query string (400 for a bad one)."""
    q = request.query_params
    try:
        before = datetime.fromisoformat(q["before"]) if q.get("before") else None
        limit = int(q.get("limit", "100"))
    except ValueError as exc:
        raise HTTPException(400, f"before must be an ISO time and limit an integer: "
                                 f"{exc}") from None
    if before is not None and before.tzinfo is None:
        raise HTTPException(400, "before needs a time zone (2026-11-28T12:00:00+00:00)")
    if not 1 <= limit <= audit.LIST_MOST:
        raise HTTPException(400, f"limit must be in [1, {audit.LIST_MOST}], got {limit}")
    return {"actor": q.get("actor") or None, "action": q.get("action") or None,
            "queue": q.get("queue") or None, "before": before, "limit": limit}


async def _rows(request: Request) -> tuple[list[audit.Record], dict[str, Any]]:
    await authorised(request, "audit")
    st, wanted = context(request).st, filters(request)
    return await run_in_threadpool(st.perform, audit.listing(st, **wanted)), wanted


async def get_audit(request: Request) -> JSONResponse:
    """The audit trail, newest first (admins only)."""
    rows, _ = await _rows(request)
    return JSONResponse({"audit": [reads.plain(dataclasses.asdict(r)) for r in rows]})


async def audit_page(request: Request) -> Response:
    """The audit trail's page; its last row's time links further back."""
    rows, wanted = await _rows(request)
    older = (str(request.url.include_query_params(before=rows[-1].at.isoformat()))
             if len(rows) == wanted["limit"] else None)
    return render(request, "audit.html", {"rows": rows, "wanted": wanted, "older": older})


API = [Route("/api/audit", get_audit)]
ROUTES = [*API, Route("/audit", audit_page, name="audit")]
