"""What libpq's ``host`` and ``port`` settings say, as a URL writes them.

libpq takes a list of hosts (``host=db1,db2``) with a port each, or one port for all
(``port=5432``): a failover pair, whose DSN asks for the node that takes writes.  A URL
writes the same list in its authority (``db1:5432,db2:5432``).  Django's settings and
Spark's JDBC URLs are made from the former, so both pair them here.
"""

from __future__ import annotations


def authority(hosts: str, ports: str) -> str:
    """``host:port`` pairs, comma-separated, for a URL's authority: each of libpq's
    ``hosts`` with its port (a single port, or none, stands for every host; an IPv6
    address is bracketed)."""
    names, numbers = hosts.split(","), ports.split(",")
    if len(numbers) != len(names):
        numbers = numbers[:1] * len(names)
    return ",".join((f"[{h}]" if ":" in h else h) + (f":{p}" if p else "")
                    for h, p in zip(names, numbers, strict=True))
