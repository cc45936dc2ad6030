"""The flow page: a flow's state, its progress and its tasks, and the form that cancels it.

A flow is read with :func:`shardq.ops.graphs.get`: its row, its tasks counted by state
and its first :data:`~shardq.web.reads.FLOW_ROWS` tasks, in the order they were
enqueued.  The page refreshes its figures in place (``/fragments/flows/{id}``), as a
queue's page does.
"""

from __future__ import annotations

from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from shardq.flows.nodes import Flow
from shardq.web import actions, reads
from shardq.web.context import context
from shardq.web.pages import back, checked, render

GONE = "no such flow: it ended longer ago than its keep_result_s, or never existed"


def read(request: Request, rows: int) -> Flow:
    """The flow the path names, with up to ``rows`` of its tasks (404 when unknown)."""
    st = context(request).st
    flow = reads.flow(st, request.path_params["id"], rows)
    if flow is None:
        raise HTTPException(404, GONE)
    return flow


def flow_page(request: Request) -> Response:
    """One flow: kind, name, state, progress, times, and its tasks."""
    flow = read(request, reads.FLOW_ROWS)
    return render(request, "flow.html", {"flow": flow, "progress": reads.progress(flow),
                                         "rows": reads.FLOW_ROWS})


def flow_figures(request: Request) -> Response:
    """One flow's state, counts and progress (the page refreshes them in place)."""
    flow = read(request, 0)
    return render(request, "_flow_figures.html", {"flow": flow,
                                                  "progress": reads.progress(flow)})


async def cancel_flow_action(request: Request) -> Response:
    """Cancel every task of the flow that has not finished, then show the flow."""
    who, _ = await checked(request, "cancel_flow")
    flow_id = request.path_params["id"]
    done = await run_in_threadpool(actions.cancel_flow, context(request).st, who, flow_id)
    if done is None:
        raise HTTPException(404, GONE)
    return back(request, "flow", done, id=flow_id)


READS = [
    Route("/flows/{id}", flow_page, name="flow"),
    Route("/fragments/flows/{id}", flow_figures, name="flow_figures"),
]
ACTIONS = [
    Route("/actions/flows/{id}/cancel", cancel_flow_action, methods=["POST"],
          name="cancel_flow_action"),
]
