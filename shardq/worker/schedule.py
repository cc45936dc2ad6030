"""Claim schedules: the order in which a claimer visits its (queue, bucket) targets, and
when.

Each claimer starts at its own offset so that claimers spread over the buckets, and
*owns* the slice of targets from its offset up to the next claimer's.  A claim that
filled its limit makes its target due again at once: more may be waiting.  A plain
claim that found fewer drained its range, since every row it passed over (SKIP LOCKED)
was taken by a concurrent claim, which comes back itself if it was full.  With
notifications heard, such a target cools down as an empty one does (new work there is
announced); without them it is due again at once, as nothing would say so.  At a
moderate rate this halves the claims: each task used to cost the claim that took it
and an empty one after it.  (A turn of a flow-controlled queue reads one group's
range, so a short one says nothing of the bucket: it is due again at once.)  An empty
target cools down for a while, at most ``poll_max_s`` for an owned target
and ``poll_max_s`` times the number of claimers for the others, so that every target
is still looked at about once per ``poll_max_s`` by the worker as a whole while idle
polling costs one claim per target, not one per claimer.

How long the cool-down is depends on whether the worker hears enqueue notifications.
When it does, new work is announced (a hint sends one claimer to its bucket), so an
empty target cools down for the whole cap at once: polling is only the safety net for
missed notes and for scheduled tasks coming due.  When it does not, the cool-down
starts short and doubles on each empty visit.  When every target is cooling down the
claimer sleeps until the first is due again, or until it is woken.

Notifications are coalesced.  A claimer given a hint within a few ``coalesce_s`` of
the one before (notes that follow one another) waits ``coalesce_s`` from the first for
more (the worker hands further notes to the claimer gathering them), then
claims every hinted bucket of that queue in one statement (``claim_buckets``): at a
moderate rate tasks arrive in ones, each in a bucket of its own, and a claim per task
was most of a worker's and the server's work.  The wait is added to the pickup of the
first task of a burst only.  Polls are gathered the same way: a poll takes with it
the queue's other buckets whose poll is nearly due, so an idle worker's polls come to
about one statement per claimer and ``poll_max_s``, not one per bucket.
"""

from __future__ import annotations

import time
from collections.abc import Callable

FIRST_COOLDOWN_S = 0.01
QUIET_HINTS = 5
"""A hint that comes more than this many ``coalesce_s`` after the one before is claimed
at once, not gathered with those that may follow."""


class Schedule:
    """Round-robin order over (queue, bucket) targets with per-target cool-downs.

    ``share`` is how many claimers split the targets; this schedule owns the first
    ``ceil(len(targets) / share)`` of them after rotating by ``offset``.  ``listening``
    says whether new work is announced (see the module's docstring).
    """

    def __init__(self, targets: list[tuple[str, int]], offset: int, poll_max_s: float, *,
                 share: int = 1, listening: bool = False, coalesce_s: float = 0.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        n = len(targets)
        self.targets = targets[offset % n:] + targets[:offset % n]
        self.poll_max_s, self.listening, self.clock = poll_max_s, listening, clock
        self.coalesce_s = coalesce_s
        owned = -(-n // max(1, share))
        self._cap = [poll_max_s if i < owned else poll_max_s * share for i in range(n)]
        self._next = 0
        self._cool_until = [0.0] * n
        self._cooldown = [0.0] * n
        self._hints: list[int] = []
        self._hinted_at = 0.0  # when the first of the pending hints came
        self._last_hint_at = float("-inf")  # when the latest hint came
        self._index = {target: i for i, target in enumerate(self.targets)}
        self._of_queue: dict[str, list[int]] = {}  # each queue's targets, in order
        for i, (q, _) in enumerate(self.targets):
            self._of_queue.setdefault(q, []).append(i)

    def pick(self) -> tuple[int, float]:
        """The index of the next target to claim from, or (-1, seconds until one is due).
        Hinted targets come first, once the first hint is ``coalesce_s`` old."""
        now = self.clock()
        if self._hints:
            gathered = now - self._hinted_at
            if gathered < self.coalesce_s:
                return -1, self.coalesce_s - gathered
            return self._hints.pop(0), 0.0
        n = len(self.targets)
        for step in range(n):
            i = (self._next + step) % n
            if self._cool_until[i] <= now:
                self._next = (i + 1) % n
                return i, 0.0
        return -1, max(0.0, min(self._cool_until) - now)

    def record(self, index: int, claimed: int, wait_s: float | None = None, *,
               drained: bool = False) -> None:
        """Note that a claim on target ``index`` took ``claimed`` tasks; ``wait_s``: the
        queue's rate gave none and gives again in that long (every target of the queue
        cools down as long);
        ``drained``: the claim took all its range held (a plain claim short of its
        limit), which cools the target down like an empty visit when listening."""
        if claimed and not (drained and self.listening):
            self._due(index)
            return
        if wait_s is not None:
            # The rate is the queue's, not the bucket's: every other bucket of the queue
            # would spend from the same (one row that each spend locks) and find it as
            # empty, so the whole queue waits.
            until = self.clock() + wait_s
            for i in self._of_queue[self.targets[index][0]]:
                if self._cool_until[i] < until:
                    self._cooldown[i], self._cool_until[i] = wait_s, until
            return
        cap = self._cap[index]
        doubled = min(cap, max(FIRST_COOLDOWN_S, self._cooldown[index] * 2))
        cooldown = cap if self.listening else doubled
        self._cooldown[index] = cooldown
        self._cool_until[index] = self.clock() + cooldown

    def record_listed(self, indices: list[int], claimed: list[int], *, drained: bool) -> None:
        """Note a claim of several targets (``claim_buckets``) that took ``claimed[k]``
        tasks from ``indices[k]``.  Short of its limit (``drained``) it read every range
        to its end: each is recorded as a claim of its own would be.  At its limit,
        those it reached may hold more and the rest were not read: all are due again."""
        for index, count in zip(indices, claimed, strict=True):
            if drained:
                self.record(index, count, drained=True)
            else:
                self._due(index)

    def _due(self, index: int) -> None:
        self._cooldown[index] = 0.0
        self._cool_until[index] = 0.0

    def reset(self, queue: str | None = None) -> None:
        """Make every target (of ``queue``) due now: there is new work in many buckets."""
        for i in range(len(self.targets)) if queue is None else self._of_queue.get(queue, []):
            self._due(i)

    @property
    def hinted(self) -> bool:
        """Whether a hinted target waits to be picked."""
        return bool(self._hints)

    @property
    def hinted_targets(self) -> list[tuple[str, int]]:
        """The hinted targets waiting to be picked, in the order they will be (a copy)."""
        return [self.targets[i] for i in self._hints]

    def index_of(self, queue: str, bucket: int) -> int:
        """The index of target (``queue``, ``bucket``) in :attr:`targets`."""
        return self._index[(queue, bucket)]

    def cooldown_s(self, index: int) -> float:
        """How long target ``index`` cools down after its last empty visit (0 once a
        claim there found work, or after a reset)."""
        return self._cooldown[index]

    def hint(self, queue: str, bucket: int, *, at_once: bool = False) -> None:
        """New work in one bucket: claim from (``queue``, ``bucket``) next; ``at_once``
        without waiting ``coalesce_s`` for more (with the hints already gathered)."""
        index = self._index.get((queue, bucket))
        now = self.clock()
        # A note after a quiet spell is claimed at once: gathering pays only when notes
        # follow one another (an idle queue's task would wait coalesce_s for nothing).
        alone = now - self._last_hint_at > QUIET_HINTS * self.coalesce_s
        self._last_hint_at = now
        if index is not None and index not in self._hints:
            if not self._hints:
                self._hinted_at = float("-inf") if alone else now
            self._hints.append(index)
        if at_once:
            self._hinted_at = float("-inf")

    def take_with(self, index: int) -> list[int]:
        """The targets to claim together with target ``index``, just picked: the hinted
        ones of its queue (taken out of the hints), and, when ``index`` was picked as a
        poll (it had cooled down), the others of its queue whose poll falls due within
        half that cool-down.  Idle polls so come to one statement for many buckets, not
        one each."""
        queue = self.targets[index][0]
        taken = [i for i in self._hints if self.targets[i][0] == queue]
        if taken:
            self._hints = [i for i in self._hints if self.targets[i][0] != queue]
        cooldown = self._cooldown[index]
        if cooldown > 0:
            horizon = self.clock() + cooldown / 2
            taken += [i for i in self._of_queue[queue] if i != index and i not in taken
                      and self._cooldown[i] > 0 and self._cool_until[i] <= horizon]
        return taken
