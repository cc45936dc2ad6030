"""A live reshard measured (``python -m bench.reshard``): the drain while a reshard 16 → 64
runs (:mod:`bench.reshard.drain`), claim + ack on a resharded schema beside one made with
64 buckets (:mod:`bench.reshard.fleet`), and the producers' lock waits while a large table
is resharded (:mod:`bench.reshard.producers`); the reshard's steps timed by
:mod:`bench.reshard.common`."""
