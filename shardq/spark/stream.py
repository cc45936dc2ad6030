"""``write_stream_tasks``: a Structured Streaming sink that makes each row one task, once.

Spark runs the sink's ``foreachBatch`` function once per micro-batch, and again with
the same batch id when the batch did not finish (a failed attempt, or a restart from
the checkpoint after the driver died before committing the batch).  Each batch goes
through the staged write of :func:`shardq.spark.write_tasks`; its merge records the
batch in the ledger ``shardq.spark_ledger`` in the same transaction as its tasks.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from shardq.core.config import ClientConfig, load
from shardq.core.errors import ConfigError
from shardq.spark import complete, frame, merge
from shardq.spark.write import WriteResult, _addresses, _statements, write_frame

# The columns a micro-batch's rows get for their ids: the batch id and the row's
# position in the batch (partition and place in it).
BATCH_COLUMN, ROW_COLUMN = "_shardq_batch", "_shardq_row"

OnBatch = Callable[[int, WriteResult], None]


def stream_id(checkpoint_location: str, namespace: uuid.UUID | None = None) -> uuid.UUID:
    """The identity of a stream: a uuid5 of its checkpoint location (a local path made
    absolute) in ``namespace`` (default :data:`shardq.spark.SPARK_NAMESPACE`)."""
    location = checkpoint_location
    if "://" not in location and not location.startswith("file:"):
        location = os.path.abspath(location)
    return uuid.uuid5(namespace or frame.SPARK_NAMESPACE, f"stream:{location}")


def batch_ledger_id(stream: uuid.UUID, batch_id: int) -> uuid.UUID:
    """The ledger id of micro-batch ``batch_id`` of ``stream``."""
    return uuid.uuid5(stream, f"batch:{batch_id}")


def flow_name(stream: uuid.UUID, batch_id: int) -> str:
    """The name of the flow of micro-batch ``batch_id``'s ``on_complete`` batch."""
    return f"spark stream {stream} batch {batch_id}"


@dataclass
class BatchWriter:
    """The ``foreachBatch`` function of :func:`write_stream_tasks`: ``(df, batch_id)``
    writes the batch's rows as tasks, once, with the batch's ``on_complete`` callback,
    and calls ``on_batch(batch_id, result)``."""

    dsn: str | None
    stream: uuid.UUID
    options: dict[str, Any]
    on_batch: OnBatch | None = None
    natural_ids: bool = False
    on_complete: complete.PerBatch | None = None

    def __call__(self, df: Any, batch_id: int) -> None:
        """Write micro-batch ``batch_id`` (Spark calls this on the driver)."""
        F = frame.functions()
        options = dict(self.options)
        if self.on_complete is not None:
            options.update(on_complete=complete.of_batch(self.on_complete, batch_id),
                           flow_name=flow_name(self.stream, batch_id))
        if self.natural_ids:
            result = write_frame(df, mode="idempotent", **options)
        else:
            rows = df.withColumns({BATCH_COLUMN: F.lit(batch_id).cast("long"),
                                   ROW_COLUMN: F.monotonically_increasing_id()})
            options.update(id_columns=[BATCH_COLUMN, ROW_COLUMN], id_namespace=self.stream)
            if batch_id > 0:
                self._forget(batch_ledger_id(self.stream, batch_id - 1))
            result = write_frame(rows, mode="idempotent", batch=batch_ledger_id(
                self.stream, batch_id), **options)
        if self.on_batch is not None:
            self.on_batch(batch_id, result)

    def _forget(self, ledger_id: uuid.UUID) -> None:
        """Drop the previous batch's ledger id: Spark started this batch, so it committed
        that one and will not run it again (forgotten first, so that a driver dying in
        this batch leaves no id behind that no later batch would forget)."""
        config = load(ClientConfig, {"dsn": self.dsn})
        driver_dsn, _ = _addresses(self.options["url"], self.dsn, self.options["jdbc_options"])
        st = _statements(config, driver_dsn)
        try:
            merge.forget(st, ledger_id)
        finally:
            st.blocking().close()


def write_stream_tasks(stream_df: Any, *, checkpoint_location: str,
                       queue: frame.ColumnLike, payload: frame.ColumnLike | Sequence[str],
                       dsn: str | None = None, url: str | None = None,
                       run_at: frame.ColumnLike | None = None,
                       priority: frame.ColumnLike | int | None = None,
                       key: frame.ColumnLike | None = None,
                       group: frame.ColumnLike | None = None,
                       max_attempts: frame.ColumnLike | int | None = None,
                       batch_size: int | None = None, num_partitions: int | None = None,
                       id_columns: Sequence[str] | None = None,
                       id_namespace: uuid.UUID | None = None,
                       jdbc_options: Mapping[str, str] | None = None,
                       trigger: Mapping[str, Any] | None = None,
                       query_name: str | None = None,
                       on_batch: OnBatch | None = None,
                       on_complete: complete.PerBatch | None = None) -> Any:
    """Start a streaming query that writes each row of ``stream_df`` as one task, exactly
    once, and return its ``StreamingQuery``.

    The task options (``queue``, ``payload``, ``run_at``, ``priority``, ``key``,
    ``group``, ``max_attempts``, ``dsn``/``url``, ``batch_size``, ``num_partitions``,
    ``jdbc_options``) are those of :func:`shardq.spark.write_tasks`.
    ``checkpoint_location`` is the query's checkpoint (required: it is what lets a
    restarted query resume, and what identifies the stream); ``trigger`` the keyword
    of ``DataStreamWriter.trigger`` (``{"processingTime": "1 second"}``,
    ``{"availableNow": True}``; default: Spark's, as soon as the last batch ends);
    ``on_batch(batch_id, WriteResult)`` runs after a batch's tasks are committed, before
    Spark commits the batch to the checkpoint.

    ``on_complete``: each micro-batch's tasks form one batch, whose callback runs once
    every one of them ended, with the batch's counts as its first argument (as in
    :func:`shardq.spark.write_tasks`).  A signature (``fn.s(...)``, the same for every
    micro-batch), or a function of the micro-batch id that returns the batch's
    (``lambda batch_id: done.s(batch_id)``), called on the driver.  The callback is
    written in the merge's transaction, only if the ledger takes the batch: a batch
    Spark runs again gets no second callback.  Its flow is named
    ``spark stream <stream id> batch <batch id>``; ``on_batch``'s result holds its
    ``flow_id`` and ``callback_id``.  With ``id_columns``, a micro-batch all of whose
    rows the ledger held already (run again, or every row seen in earlier batches)
    inserts no task and has no callback.  Such a stream takes no ``key``.

    What identifies a row: without ``id_columns``, the stream (its checkpoint location,
    :func:`stream_id`), the micro-batch id and the row's position in the batch.  The
    batch's rows are merged in one transaction with the batch's ledger id, and only if
    the ledger did not hold it: a batch Spark runs again (the driver died after the
    write, before the checkpoint commit, and the query restarted) inserts nothing, and
    a Spark task retried within a batch has its rows counted once.  The ledger then
    keeps one id per stream: the id of batch n is deleted when batch n + 1 starts
    (Spark starts batch n + 1 only once batch n is committed to the checkpoint).  A
    stream that is moved to another checkpoint location is a new stream.

    With ``id_columns`` (a natural key of the rows), a row is identified by its queue
    and those columns, as in ``write_tasks(mode="idempotent")``: the ledger keeps every
    row's id, so a row seen again in any later batch, or by another job, is skipped
    too; :func:`shardq.spark.prune_ledger` forgets ids after a time you choose.
    """
    frame.functions()  # PySpark is there, or a ConfigError says how to install it
    complete.refuse(on_complete, key, per_batch=True)
    if not checkpoint_location:
        raise ConfigError("write_stream_tasks needs a checkpoint_location")
    if not getattr(stream_df, "isStreaming", False):
        raise ConfigError("write_stream_tasks takes a streaming DataFrame "
                          "(spark.readStream...); use write_tasks for a batch DataFrame")
    _addresses(url, dsn, jdbc_options)  # refuse a missing or unusable address now
    options: dict[str, Any] = dict(
        url=url, dsn=dsn, queue=queue, payload=payload, run_at=run_at, priority=priority,
        key=key, group=group, max_attempts=max_attempts, batch_size=batch_size,
        num_partitions=num_partitions, id_columns=id_columns, id_namespace=id_namespace,
        jdbc_options=jdbc_options)
    writer = BatchWriter(dsn, stream_id(checkpoint_location, id_namespace), options,
                         on_batch, natural_ids=id_columns is not None,
                         on_complete=on_complete)
    stream = stream_df.writeStream.foreachBatch(writer).option(
        "checkpointLocation", checkpoint_location)
    if trigger:
        stream = stream.trigger(**trigger)
    if query_name:
        stream = stream.queryName(query_name)
    return stream.start()
