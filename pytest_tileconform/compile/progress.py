"""What a batch of compiles tells the user while it runs: an estimate from the start, a heartbeat
at a steady interval, and an ETA that can be trusted.

The estimate comes from the units' own cost (:class:`UnitEstimate`, from the backend's cost
model), scheduled ``jobs`` at a time as ninja runs them (in the order given: ninja starts ready
edges in the order the build file lists them), each slowed by the contention for the cores
when more compiles run than the cores can keep busy. The ETA shown only moves down: a better
estimate is shown when it is earlier; a later one only when a unit ran past its own estimate,
and the message says which one. A unit past its estimate also teaches the model how fast this
host compiles (the ratio of the time taken to the time estimated), so one slow unit corrects
the ETA of all the others instead of each overrunning in turn.

Everything here is a function of the times it is given (``now``): no clock is read, so a fake
clock tests it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

#: The least a later forecast must add before the ETA shown moves up (with its reason): a few
#: seconds more is not worth a correction, and the next message makes it if it grows.
MOVE_UP_S = 5.0
#: Seconds between heartbeats while compiles run: often enough that a quiet terminal is never
#: mistaken for a hang, seldom enough that a ten-minute build prints a screenful at most.
HEARTBEAT_S = 30.0


@dataclass(frozen=True)
class UnitEstimate:
    """One compile: its label, its critical path in seconds when it runs alone, and its CPU
    seconds (how many cores it keeps busy). 0 seconds: not known."""

    label: str
    path_s: float = 0.0
    cpu_s: float = 0.0


def duration(seconds: float) -> str:
    """``45s``, ``3m05s``, ``1h02m``: minutes and hours are what a long build is read in."""
    seconds = max(0, round(seconds))
    if seconds < 100:
        return f"{seconds}s"
    minutes, secs = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


class BuildProgress:
    """The progress of one batch of compiles, ``jobs`` at a time on ``cores`` cores, started at
    ``started`` (seconds on the caller's clock)."""

    def __init__(
        self,
        units: Sequence[UnitEstimate],
        jobs: int,
        cores: float,
        started: float,
        heartbeat_s: float = HEARTBEAT_S,
    ) -> None:
        self.units = list(units)
        self.jobs = max(1, jobs)
        self.started = started
        self.heartbeat_s = heartbeat_s
        self.modelled = bool(self.units) and all(u.path_s > 0 for u in self.units)
        # one unit's time with the others beside it: the compiles running at once ask for
        # their CPU rate each, and share the cores when that is more than there are
        at_once = min(self.jobs, len(self.units))
        rates = [u.cpu_s / u.path_s if self.modelled else 1.0 for u in self.units[:at_once]]
        slowdown = max(1.0, sum(rates) / max(1.0, cores)) if rates else 1.0
        self._base = [u.path_s * slowdown if self.modelled else 1.0 for u in self.units]
        #: the host's speed against the model: time taken / time estimated (None: not known,
        #: for units without estimates until one is done)
        self._speed: float | None = 1.0 if self.modelled else None
        self._pending = list(range(len(self.units)))
        self._running: dict[int, float] = {}  # unit -> when it started (inferred: see _fill)
        self._taken: dict[int, float] = {}  # unit done -> seconds it took
        self._end: float | None = None  # the end shown, on the caller's clock
        self._last_message = started
        self._fill(started)
        if self._speed is not None:
            self._end = self._forecast(started)

    # -- what happened -----------------------------------------------------------------
    def _fill(self, now: float) -> None:
        """ninja starts the next unit as soon as a job is free."""
        while self._pending and len(self._running) < self.jobs:
            self._running[self._pending.pop(0)] = now

    def _unit_named(self, label: str) -> int | None:
        for index in [*self._running, *self._pending]:
            if self.units[index].label == label:
                return index
        return None

    def finished(self, label: str, now: float) -> str:
        """A unit is done (ninja says so when it ends): ``[k/N] label (elapsed, ETA)``."""
        index = self._unit_named(label)
        ended: int | None = None
        if index is not None:
            started = self._running.pop(index, None)
            if started is None:  # ninja started it before one we thought was running
                self._pending.remove(index)
            else:
                self._taken[index] = now - started
                ended = index
        late = self._late(now, ended)
        self._calibrate(now)
        self._fill(now)
        text = f"[{self._done}/{len(self.units)}] {label} ({duration(now - self.started)} elapsed"
        return self._said(f"{text}{self._eta_text(now, late)})", now)

    def heartbeat_due(self, now: float) -> bool:
        return now - self._last_message >= self.heartbeat_s

    def next_heartbeat(self) -> float:
        """When the next heartbeat is due, on the caller's clock."""
        return self._last_message + self.heartbeat_s

    def heartbeat(self, now: float) -> str:
        """``N compiling, k of M done, elapsed, ETA``: the build is alive, and how far along."""
        late = self._late(now)
        self._calibrate(now)
        text = (
            f"{len(self._running)} compiling, {self._done} of {len(self.units)} done, "
            f"{duration(now - self.started)} elapsed"
        )
        return self._said(text + self._eta_text(now, late), now)

    @property
    def _done(self) -> int:
        return len(self.units) - len(self._pending) - len(self._running)

    def _late(self, now: float, ended: int | None = None) -> str:
        """The unit furthest past its estimate (by the ratio): ``ended``, just done, or one
        still running; "" when none is."""
        candidates = [(ended, self._taken[ended])] if ended is not None else []
        candidates += [(index, now - start) for index, start in self._running.items()]
        worst: tuple[float, int, float, float] | None = None
        for index, taken in candidates:
            estimate = self._estimate(index)
            if estimate is not None and taken > estimate and (worst is None or taken / estimate > worst[0]):
                worst = (taken / estimate, index, taken, estimate)
        if worst is None:
            return ""
        _, index, taken, estimate = worst
        verb = "took" if index == ended else "has run"
        return f"{self.units[index].label} {verb} {duration(taken)} of an estimated {duration(estimate)}"

    def start_message(self) -> str:
        text = f"compiling {len(self.units)} translation unit(s), {self.jobs} at a time"
        if self._end is not None:
            text += f", about {duration(self._end - self.started)} by the cost model"
        return text

    def _said(self, message: str, now: float) -> str:
        self._last_message = now
        return message

    # -- the forecast ------------------------------------------------------------------
    def _estimate(self, index: int) -> float | None:
        """Seconds unit ``index`` is expected to take here, at the speed learned so far."""
        return None if self._speed is None else self._base[index] * self._speed

    def _calibrate(self, now: float) -> None:
        """The host's speed from the units done and those already past their estimate: the
        time they took against the time the model gave them, weighted by their size."""
        taken = dict(self._taken)
        if self._speed is not None:
            for index, start in self._running.items():
                if now - start > self._base[index] * self._speed:
                    taken[index] = now - start  # a lower bound of what it will take
        if taken:
            self._speed = sum(taken.values()) / sum(self._base[i] for i in taken)

    def _forecast(self, now: float) -> float:
        """When the last unit ends: the running ones as estimated (or, past their estimate,
        soon), then the others ``jobs`` at a time as jobs become free."""
        assert self._speed is not None
        free: list[float] = []
        for index, start in self._running.items():
            estimate = self._base[index] * self._speed
            # a unit past its estimate ends some time later; a tenth of its estimate is the
            # least that is honest to promise, and the next heartbeat says if it was not
            free.append(now + max(estimate - (now - start), 0.1 * estimate))
        free += [now] * (self.jobs - len(free))
        for index in self._pending:
            free.sort()
            free[0] += self._base[index] * self._speed
        return max(free) if self._running or self._pending else now

    def _eta_text(self, now: float, late: str) -> str:
        """``, ETA 3m10s`` (nothing when all is done or no estimate exists yet), and why it
        moved up when it did."""
        if not self._running and not self._pending:
            return ""
        if self._speed is None:
            return ""
        end = self._forecast(now)
        if not late and self._end is not None and self._end <= now:
            late = "the compiles run slower than estimated"  # the forecast has run out
        if self._end is None or end <= self._end:
            self._end = end
        elif late and end > self._end + max(MOVE_UP_S, 0.05 * (self._end - now)):
            said, self._end = self._end, end
            return f", ETA {duration(end - now)}, not {duration(said - now)}: {late}"
        return f", ETA {duration(self._end - now)}"
