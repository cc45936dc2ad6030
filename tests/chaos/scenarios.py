"""The chaos scenarios: enqueue, run real daemons, apply one fault, drain, count.

Each scenario returns its :class:`~tests.chaos.harness.Figures` with the issue's
invariants checked (0 lost, 0 stuck, 0 ids on two rows, the queue drained, only the
expected dead, and duplicates only of tasks that ran and were not acked when a
process died) plus its own (a daemon stops on one SIGTERM, progress resumes, ...).
Timeouts bound every wait; a daemon that will not stop is killed and said so.
"""

from __future__ import annotations

import re
import signal
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from tests.chaos import app
from tests.chaos.harness import Daemon, Figures, Stage, pid_alive, wait_until

GRACE_S = 5.0  # the daemons' --shutdown-grace-s (harness.DAEMON_DEFAULTS)
STOP_SLACK_S = 10.0  # a stop may take the grace, plus starting up the exit
DRAIN_S = 60.0

CLAIM = rb"UPDATE shardq\.tasks AS t SET\s+status = 'locked'"
HEARTBEAT = rb"exec_time = greatest\("
ACK = rb"DELETE FROM shardq\.tasks"
COMMIT = rb"^\s*COMMIT\b"
INSERT = rb"INSERT INTO shardq\.tasks"

LOG_SIGNS = {"lease lost": r"lease lost", "outcome writes failed": r"outcome\(s\) failed",
             "steps failed": r"step failed", "tracebacks": r"Traceback"}


def stop_all(stage: Stage, f: Figures) -> None:
    """One SIGTERM to every daemon still running; kill -9 (and say so) those that hang."""
    running = [d for d in stage.daemons if d.alive()]
    for d in running:
        d.signal(signal.SIGTERM)
    for d in running:
        if d.wait(GRACE_S + STOP_SLACK_S) is None:
            f.notes.append(stage.hung(d, "on SIGTERM after the drain"))


def log_signs(stage: Stage, f: Figures) -> None:
    """Count telling lines in the daemons' output into the notes."""
    text = "".join(d.output() for d in stage.daemons)
    seen = {name: len(re.findall(p, text)) for name, p in LOG_SIGNS.items()}
    shown = ", ".join(f"{n} {name}" for name, n in seen.items() if n)
    if shown:
        f.notes.append(f"daemon logs: {shown}")


def finish(stage: Stage, name: str, fault: str, drain_s: float = DRAIN_S, *,
           before: Callable[[Figures], None] | None = None) -> Figures:
    """Wait for the drain, stop the daemons, count, and check the invariants."""
    started = time.monotonic()
    drained = stage.drain(drain_s)
    probe = Figures(name, fault)
    stop_all(stage, probe)
    f = stage.figures(name, fault)
    f.notes += probe.notes
    if not drained:
        f.notes.append(f"not drained within {drain_s:.0f} s")
    else:
        f.notes.append(f"drained in {time.monotonic() - started:.0f} s of waiting")
    if before:
        before(f)
    log_signs(stage, f)
    withheld = [t.decode(errors="replace").split("\n")[0][:40] for t in stage.proxy.withheld]
    if withheld:
        f.notes.append(f"replies withheld: {len(withheld)} ({'; '.join(withheld)})")
    f.check()
    return f


# -- lost replies ---------------------------------------------------------------------


def enqueue_lost_reply(stage: Stage) -> Figures:
    """enqueue_many's COMMIT and one enqueue's INSERT run, their replies are lost."""
    client = stage.client(via_proxy=True)
    stage.proxy.withhold_reply(COMMIT, times=1)
    stage.enqueue(200, client=client)
    stage.proxy.withhold_reply(INSERT, times=1)
    payload = stage.payloads(1)[0]
    client.enqueue(app.QUEUE, payload)
    stage.enqueued.add(payload["n"])
    stage.sample()
    stage.daemon(via_proxy=False)
    return finish(stage, "enqueue_lost_reply",
                  "reply to enqueue_many's COMMIT (200 tasks) and to one enqueue's INSERT lost",
                  drain_s=30)


def claim_lost_reply(stage: Stage) -> Figures:
    """A claim runs and commits; its reply is lost.  Its batch shows up as tasks whose
    first run is at attempt 2: held, unrun, until the lease (5 s) ran out."""
    stage.enqueue(400, 0.01)
    stage.proxy.withhold_reply(CLAIM, times=1)
    stage.daemon()
    return finish(stage, "claim_lost_reply", "reply to one claim (batch 20) lost")


def heartbeat_lost_reply(stage: Stage) -> Figures:
    """A heartbeat (extend_many) commits; its reply is lost while handlers run."""
    stage.enqueue(24, 2.0)
    daemon = stage.daemon(lease_s="6", batch="4")
    wait_until(lambda: stage.held() > 0, 60)
    stage.proxy.withhold_reply(HEARTBEAT, times=1)
    f = finish(stage, "heartbeat_lost_reply",
               "reply to one heartbeat lost (lease 6 s, 2 s handlers)")
    if daemon.alive():
        f.notes.append("daemon still running")
    return f


def ack_lost_reply(stage: Stage) -> Figures:
    """An ack batch is deleted; its reply is lost."""
    stage.enqueue(300, 0.01)
    stage.daemon()
    wait_until(lambda: stage.runs() >= 20, 120)
    stage.proxy.withhold_reply(ACK, times=1)
    return finish(stage, "ack_lost_reply", "reply to one ack batch lost")


# -- connections and the server -------------------------------------------------------


def cut_connections(stage: Stage) -> Figures:
    """Every connection is cut, three times a second apart, while tasks run."""
    stage.enqueue(600, 0.01)
    stage.daemon()
    wait_until(lambda: stage.runs() >= 50, 120)
    for _ in range(3):
        stage.proxy.cut_all()
        time.sleep(1)
    return finish(stage, "cut_all", "every connection cut, 3 times 1 s apart")


def pg_restart(mode: str) -> Callable[[Stage], Figures]:
    def scenario(stage: Stage) -> Figures:
        stage.enqueue(300, 0.2)  # 0.2 s handlers: some finish while the server is away
        stage.daemon(concurrency="8")
        wait_until(lambda: stage.runs() >= 40, 120)
        stage.pg.restart(mode)  # type: ignore[arg-type]
        return finish(stage, f"pg_restart_{mode}", f"pg_ctl restart -m {mode} while tasks run")
    scenario.__doc__ = f"PostgreSQL restarts (-m {mode}) under a running daemon."
    return scenario


def pg_outage(stage: Stage) -> Figures:
    """PostgreSQL is down for 30 s while tasks run (1 s handlers finish during it)."""
    stage.enqueue(200, 1.0)
    stage.daemon(concurrency="8", batch="10")
    wait_until(lambda: stage.runs() >= 24, 120)
    stage.pg.outage(30, "fast")
    return finish(stage, "pg_outage_30s", "PostgreSQL stopped (-m fast) for 30 s", drain_s=120)


def blackhole(stage: Stage) -> Figures:
    """The network forwards nothing for 20 s (a partition shorter than the lease), then heals."""
    stage.enqueue(400, 0.05)
    stage.daemon(lease_s="30")
    wait_until(lambda: stage.runs() >= 50, 120)
    stage.proxy.blackhole(True)
    time.sleep(20)
    stage.proxy.blackhole(False)
    return finish(stage, "blackhole_20s",
                  "proxy forwards nothing for 20 s, then heals (lease 30 s)",
                  drain_s=90)


def _recorder(notes: list[str], violations: list[str], allowed: set[int],
              reclaim: set[int]) -> Callable[[Figures], None]:
    """What a SIGTERM scenario adds to its figures: its notes and violations, and the
    duplicates and late first runs its kill (if any) explains."""
    def add(f: Figures) -> None:
        f.notes += notes
        f.violations += violations
        f.allowed_duplicates |= allowed
        f.allowed_reclaimed |= reclaim
    return add


def _sigterm(stage: Stage, daemon: Daemon, f_notes: list[str], violations: list[str],
             allowed: set[int], reclaim: set[int]) -> None:
    """One SIGTERM: the daemon must exit within its grace; if it hangs, kill -9 it."""
    started = time.monotonic()
    daemon.signal(signal.SIGTERM)
    code = daemon.wait(GRACE_S + STOP_SLACK_S)
    took = time.monotonic() - started
    if code is None:
        violations.append(f"one SIGTERM did not stop the daemon within {GRACE_S + STOP_SLACK_S:.0f}"
                          f" s (grace {GRACE_S:.0f} s)")
        unacked = stage.unacked_by([daemon.pid])
        allowed |= unacked
        f_notes.append(stage.hung(daemon, "on SIGTERM"))
        f_notes.append(f"{len(unacked)} tasks ran and were unacked when it was killed")
        reclaim |= stage.locked_numbers()
    else:
        f_notes.append(f"SIGTERM: exit {code} after {took:.1f} s")
        allowed |= stage.unacked_by([daemon.pid])  # exited with outcomes unwritten


def half_open_sigterm(stage: Stage) -> Figures:
    """Every connection goes half-open; one SIGTERM must still stop the daemon in time."""
    stage.enqueue(400, 0.05)
    daemon = stage.daemon()
    wait_until(lambda: stage.runs() >= 50, 120)
    stage.proxy.half_open(True)
    time.sleep(3)
    notes: list[str] = []
    violations: list[str] = []
    allowed: set[int] = set()
    reclaim: set[int] = set()
    _sigterm(stage, daemon, notes, violations, allowed, reclaim)
    stage.proxy.half_open(False)
    stage.daemon(via_proxy=False)

    add = _recorder(notes, violations, allowed, reclaim)
    return finish(stage, "half_open_sigterm", "all connections half-open, then one SIGTERM",
                  before=add)


def half_open_resume(stage: Stage) -> Figures:
    """Connections go half-open for 10 s; new tasks must run within 60 s, then SIGTERM."""
    stage.enqueue(300, 0.05)
    daemon = stage.daemon()
    wait_until(lambda: stage.runs() >= 50, 120)
    stage.proxy.half_open(True)
    started = time.monotonic()
    # Enqueued after the freeze, so none can sit in a buffer, and an hour ahead in line,
    # so a daemon that works again takes them first.
    late = stage.enqueue(50, priority=3600)
    time.sleep(10)
    stage.proxy.half_open(False)
    notes: list[str] = []
    violations: list[str] = []
    allowed: set[int] = set()
    reclaim: set[int] = set()

    def resumed() -> bool:  # a late task ran and was acked
        ran = {int(r[0]) for r in stage.log_query(
            "SELECT n FROM chaos_runs WHERE outcome = 'ok' AND n = ANY(%s)", (late,))}
        left = {int(r[0]) for r in stage.query(
            "SELECT (payload->>'n')::int FROM shardq.tasks WHERE (payload->>'n')::int = ANY(%s)",
            (late,))}
        return bool(ran - left)

    if wait_until(resumed, max(0.0, 60 - (time.monotonic() - started)), step_s=0.5):
        notes.append(f"resumed {time.monotonic() - started:.0f} s after the fault began")
    else:
        violations.append("no task enqueued after the fault ran and was acked within 60 s")
    _sigterm(stage, daemon, notes, violations, allowed, reclaim)
    stage.daemon(via_proxy=False)

    add = _recorder(notes, violations, allowed, reclaim)
    return finish(stage, "half_open_resume", "all connections half-open for 10 s", before=add)


# -- processes ------------------------------------------------------------------------


def kill_worker(stage: Stage) -> Figures:
    """kill -9 of a running ``shardq consume``; a new one takes over."""
    stage.enqueue(400, 0.05)
    victim = stage.daemon(concurrency="8", batch="50")
    wait_until(lambda: stage.runs() >= 100, 120)
    victim.kill()
    held, unacked, locked = stage.held(), stage.unacked_by([victim.pid]), stage.locked_numbers()
    stage.daemon()

    def add(f: Figures) -> None:
        f.allowed_duplicates = unacked
        f.allowed_reclaimed = locked
        f.notes.insert(0, f"kill -9 with {held} tasks held: {f.duplicates} duplicates "
                          f"(at most {len(unacked)}: ran and unacked at the kill)")
    return finish(stage, "kill9_worker", "kill -9 of shardq consume", before=add)


def kill_supervisor(stage: Stage) -> Figures:
    """kill -9 of a ``--processes 2`` supervisor: its children must stop, not run on."""
    stage.enqueue(400, 0.05)
    supervisor = stage.daemon(processes="2")
    wait_until(lambda: len(supervisor.children()) == 2 and stage.runs() >= 100, 120)
    children = supervisor.children()
    supervisor.proc.kill()
    supervisor.proc.wait(timeout=10)
    killed_at = time.monotonic()
    notes: list[str] = []
    violations: list[str] = []
    bound = GRACE_S + STOP_SLACK_S
    if wait_until(lambda: not any(pid_alive(p) for p in children), bound):
        notes.append(f"orphaned children stopped {time.monotonic() - killed_at:.1f} s "
                     "after the supervisor's kill -9")
        allowed = stage.unacked_by(children)
    else:
        violations.append(f"orphaned children still running {bound:.0f} s after the "
                          "supervisor's kill -9")
        allowed = stage.unacked_by(children)
        notes.append(stage.hung(supervisor, "orphaned"))
    held, locked = stage.held(), stage.locked_numbers()
    stage.daemon()

    def add(f: Figures) -> None:
        f.allowed_duplicates = allowed
        f.allowed_reclaimed = locked
        f.notes[:0] = [*notes, f"{held} tasks held after the children stopped; "
                               f"{len(allowed)} ran and unacked"]
        f.violations += violations
    return finish(stage, "kill9_supervisor", "kill -9 of a --processes 2 supervisor", before=add)


def poison(stage: Stage) -> Figures:
    """A task whose handler calls os._exit(1); the test restarts the daemon each time."""
    payloads = stage.payloads(60, 0.02)
    bad = stage.payloads(1)[0]
    bad["exit"] = True
    payloads.insert(10, bad)
    stage.client().enqueue_many(app.QUEUE, payloads, max_attempts=3)
    stage.enqueued.update(p["n"] for p in payloads)
    def start() -> Daemon:  # one handler slot: only the poison runs when it exits
        return stage.daemon(concurrency="1", batch="10", lease_s="3")

    daemon = start()
    exits: list[int | None] = []
    unacked: set[int] = set()
    # How many dying daemons held each task: its first lease expiry gives its attempt
    # back, so only a task held at two deaths may first run at attempt 2.
    held: Counter[int] = Counter()
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and stage.waiting() > 0 and len(exits) <= 8:
        if not daemon.alive():
            exits.append(daemon.proc.returncode)
            unacked |= stage.unacked_by([daemon.pid])  # it died with these unacked
            held.update(stage.locked_numbers())  # no other daemon runs: all of these were its
            daemon = start()
        time.sleep(0.25)

    def add(f: Figures) -> None:
        f.expected_dead = 1
        f.allowed_duplicates = unacked
        f.allowed_reclaimed = {n for n, deaths in held.items() if deaths > 1}
        status = stage.query("SELECT status FROM shardq.tasks WHERE (payload->>'n')::int = %s",
                             (bad["n"],))
        if status != [("dead",)]:
            f.violations.append(f"the poison task is not dead-lettered: {status}")
        dead_mates = f.dead - (1 if status == [("dead",)] else 0)
        f.notes.insert(0, f"batch-mates: {len(f.reclaimed)} burned attempts (first ran at "
                          f"attempt > 1), {dead_mates} died (max_attempts 3)")
        f.notes.insert(0, f"{len(exits)} daemon exits {exits}; poison ran "
                          f"{stage.runs('exit')} times")
    return finish(stage, "poison_exit", "a handler calls os._exit(1); daemon restarted on exit",
                  before=add)


@dataclass(frozen=True)
class Scenario:
    """A scenario, and whether it is long (``chaos_long``)."""

    name: str
    run: Callable[[Stage], Figures]
    long: bool = False


SCENARIOS = [
    Scenario("enqueue_lost_reply", enqueue_lost_reply),
    Scenario("claim_lost_reply", claim_lost_reply),
    Scenario("heartbeat_lost_reply", heartbeat_lost_reply),
    Scenario("ack_lost_reply", ack_lost_reply),
    Scenario("cut_all", cut_connections),
    Scenario("pg_restart_fast", pg_restart("fast")),
    Scenario("pg_restart_immediate", pg_restart("immediate")),
    Scenario("kill9_worker", kill_worker),
    Scenario("kill9_supervisor", kill_supervisor),
    Scenario("poison_exit", poison),
    Scenario("half_open_sigterm", half_open_sigterm),
    Scenario("half_open_resume", half_open_resume, long=True),
    Scenario("blackhole_20s", blackhole, long=True),
    Scenario("pg_outage_30s", pg_outage, long=True),
]

