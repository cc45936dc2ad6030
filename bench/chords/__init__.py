"""Chords measured: their drain beside plain tasks', the fan-in latency, and the cost of
enqueueing one (``python -m bench.chords``; the suite's ``chords`` scenario)."""
