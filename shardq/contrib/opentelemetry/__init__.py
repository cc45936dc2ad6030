"""OpenTelemetry tracing for shardq: ``pip install 'shardq[otel]'``.

:class:`ShardqInstrumentor` is an OpenTelemetry instrumentor, registered under the
``opentelemetry_instrumentor`` entry point: ``opentelemetry-instrument shardq consume
app:app`` traces a worker with no change to its code, and
``ShardqInstrumentor().instrument()`` traces a producer (or a worker started from
Python).  The spans and how they join the producer's trace are described in
:mod:`shardq.contrib.opentelemetry.spans`.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from opentelemetry import trace
from opentelemetry.instrumentation.instrumentor import (  # type: ignore[attr-defined]
    BaseInstrumentor,
)

from shardq import __version__
from shardq.contrib.opentelemetry.spans import OpenTelemetryTracer
from shardq.core import tracing

__all__ = ["ShardqInstrumentor"]

SCHEMA_URL = "https://opentelemetry.io/schemas/1.27.0"


class ShardqInstrumentor(BaseInstrumentor):  # type: ignore[misc]
    """Traces shardq's enqueues, and a worker's claims, handler runs and settles.

    ``instrument(tracer_provider=...)`` uses that provider (the global one by
    default); ``uninstrument()`` stops making spans.  Instrumenting costs nothing
    until then: shardq calls no tracing code while it is not instrumented.
    """

    def instrumentation_dependencies(self) -> Collection[str]:
        """The packages this instruments: shardq itself."""
        return ("shardq >= 0.1",)

    def _instrument(self, **kwargs: Any) -> None:
        provider = kwargs.get("tracer_provider")
        tracer = trace.get_tracer(__name__, __version__, provider, schema_url=SCHEMA_URL)
        tracing.install(OpenTelemetryTracer(tracer, provider))

    def _uninstrument(self, **kwargs: Any) -> None:
        tracing.install(None)
