"""A FastAPI app that hands slow work to shardq and lets clients wait for the answer.

``POST /jobs`` enqueues a ``resize`` task from an async endpoint and answers at once
with the task's id; a worker runs the task; ``GET /jobs/{id}`` tells how it went and
returns what ``resize`` returned, waiting up to ``wait_s`` seconds for it to finish.
Nothing here blocks the event loop: enqueueing and reading results go through
:class:`shardq.AsyncClient`, opened when the app starts and closed when it stops.

Run it from the repository root, against a database with shardq's schema::

    export SHARDQ_DSN=postgresql://user@localhost/app    # `shardq migrate` applied
    uvicorn examples.fastapi_app:api                     # the web app
    shardq consume examples.fastapi_app:tasks            # a worker, in another terminal

    curl -X POST localhost:8000/jobs -H 'content-type: application/json' \\
         -d '{"image_id": 42, "width": 640}'
    curl 'localhost:8000/jobs/<id from the answer above>?wait_s=10'
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated, Any
from uuid import UUID

from fastapi import FastAPI, HTTPException, Query
from pydantic import BaseModel, Field

import shardq

# The tasks, and the settings of the clients that enqueue them.  With no DSN given, the
# App reads SHARDQ_DSN when it first connects.  Requests that wait for a result hold no
# pooled connection (they share the client's one listening connection), so waiting
# requests never make an enqueue wait for the pool.
tasks = shardq.App(pool_max_size=20)


@tasks.task(queue="images", keep_result_s=3600)
def resize(image_id: int, width: int = 320) -> dict[str, int]:
    """Stands in for real work (fetch the image, scale it, store the copy).  Runs in a
    worker; what it returns is kept for an hour (``keep_result_s``) for GET /jobs/{id}."""
    return {"image_id": image_id, "width": width, "height": width * 3 // 4}


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    """Open the app's AsyncClient at startup, close it at shutdown.

    Opening it here rather than on the first request means a wrong DSN or a missing
    schema stops the server from starting, and no request pays for connecting.  The
    client (and its pool) belongs to this event loop, the one that serves the requests.
    """
    await tasks.async_client()
    try:
        yield
    finally:
        await tasks.aclose()


api = FastAPI(title="shardq example: image jobs", lifespan=lifespan)


class Job(BaseModel):
    """What POST /jobs takes: the image to resize and the width wanted."""

    image_id: int
    width: int = Field(320, ge=16, le=4096)


@api.post("/jobs", status_code=202)
async def post_job(job: Job) -> dict[str, str]:
    """Enqueue a resize and answer with its id at once (202 Accepted: the work is later)."""
    # aenqueue checks the arguments against resize's signature, then awaits the INSERT:
    # the event loop serves other requests while the database answers.
    task_id = await resize.aenqueue(job.image_id, width=job.width)
    return {"id": str(task_id)}


@api.get("/jobs/{job_id}")
async def get_job(job_id: UUID,
                  wait_s: Annotated[float, Query(ge=0.0, le=30.0)] = 0.0) -> dict[str, Any]:
    """How the job stands: pending, running, succeeded (with ``value``, what resize
    returned) or failed (with ``error``).  With ``wait_s``, wait up to that long for it
    to finish first (the worker's ack wakes the wait at once).  ``job_id`` is typed
    UUID, so FastAPI answers 422 for an id that is not one before shardq is asked
    (``result()`` of such a string raises ``shardq.InvalidTask``)."""
    client = await tasks.async_client()
    result = await client.result(job_id, wait_s=wait_s)
    if result.status == "unknown":  # never enqueued, or its result has expired
        raise HTTPException(status_code=404, detail=f"no job {job_id}")
    return {"id": str(result.id), "status": result.status, "value": result.value,
            "error": result.error}
