"""Flows: tasks that wait for one another (chains, groups, chords, graphs and batches
with a completion callback).  :mod:`shardq.flows.canvas` composes them,
:mod:`shardq.flows.nodes` lays them out and reads them back; the statements are
:mod:`shardq.ops.graphs`' and :mod:`shardq.loops.resolver`'s."""
