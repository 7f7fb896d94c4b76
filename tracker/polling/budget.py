"""The Hub request budget of one process: every Hub request of every job draws from it.

The Hub counts requests in fixed 5-minute windows, in two pools: "api" (model info, listings, trees,
commits) and "resolvers" (file downloads and their HEADs). `[hub] api_requests_per_5min` and
`resolve_requests_per_5min` say how many each window holds (0: no budget); a `RateLimit` header the
Hub sends (`"api";r=REMAINING;t=SECONDS`, with `RateLimit-Policy: ...;q=LIMIT;w=WINDOW`) takes
precedence over our own count. A request that finds its pool empty waits for the window to turn, so a
429 is a bug of the budget, not the normal way to learn it.

When the watch list needs more requests than a window holds, `stretch_factor` makes every interval
longer by the same factor (fair: no watch starves) and the logs say so; `budget_state()` is the state
/healthz can show. With `shared` (storage's BudgetStore.claim), every process on one database draws
from one budget: each claims blocks of a 50th of the window at a time (one UPDATE per block), so the
processes together stay within the limit, leaving at most a block each unused at a window's end.
A failing database makes a process count on its own until it answers again.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import structlog

log = structlog.get_logger(__name__)

WINDOW_S = 300.0
POOLS = ("api", "resolvers")
HEADROOM = 0.9  # plan for 90% of a window: webhooks, reconciles and retries need the rest
BLOCKS = 50  # a shared budget is claimed from the database in blocks of a 50th of the window
# (pool, wanted, limit, window_s) -> (granted, seconds until the shared window turns)
Claim = Callable[[str, int, int, float], tuple[int, float]]


@dataclass(frozen=True)
class HubRateLimit:
    """The Hub's `RateLimit` (remaining, seconds until the window turns) and `RateLimit-Policy` (limit, window)."""

    remaining: int
    reset_s: float
    limit: int | None = None
    window_s: int | None = None


@dataclass
class _Pool:
    limit: int  # requests per window; 0: unlimited
    configured: int = 0  # the settings' limit
    window_s: float = WINDOW_S
    used: int = 0
    window_ends: float | None = None  # monotonic time the current window turns
    from_hub: bool = False  # the last word on this window came from a RateLimit header
    waited_s: float = 0.0
    waits: int = 0
    tokens: int = 0  # requests claimed from the shared budget and not used yet
    tokens_until: float = 0.0  # when the shared window they belong to turns


class RequestBudget:
    """Fixed-window budgets per pool, thread-safe; `clock` and `sleep` are injectable (tests)."""

    def __init__(
        self,
        api_per_5min: int,
        resolve_per_5min: int,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        shared: Claim | None = None,
    ) -> None:
        if api_per_5min < 0 or resolve_per_5min < 0:
            raise ValueError("a request budget cannot be negative (0: no budget)")
        self._pools = {"api": _Pool(api_per_5min, api_per_5min), "resolvers": _Pool(resolve_per_5min, resolve_per_5min)}
        self._clock, self._sleep, self._shared = clock, sleep, shared
        self._shared_failing = False
        self._lock = threading.Lock()
        self._stretch = 1.0
        self._needed_per_5min = 0.0

    def acquire(self, pool: str = "api") -> float:
        """Take one request from `pool`, waiting for the next window when it is spent; the seconds waited."""
        waited = 0.0
        while True:
            with self._lock:
                state = self._pools[pool]
                wait = self._take(pool, state, self._clock())
            if wait is None:
                return waited
            log.warning("hub_budget_waiting", pool=pool, wait_s=round(wait, 1), limit=state.limit)
            self._sleep(wait)
            waited += wait

    def _take(self, pool: str, state: _Pool, now: float) -> float | None:
        """Take one request (None), or say how many seconds to wait before asking again."""
        self._turn(state, now)
        if state.limit == 0 and not state.from_hub:
            return None
        wait = self._take_shared(pool, state, now)
        if wait == 0.0:
            return None
        if wait is None:  # counted here: ours, or the Hub's word
            if state.window_ends is None:
                state.window_ends = now + state.window_s
            if state.used < state.limit:
                state.used += 1
                return None
            wait = max(0.0, state.window_ends - now)
        state.waits += 1
        state.waited_s += wait
        return wait

    def _take_shared(self, pool: str, state: _Pool, now: float) -> float | None:
        """With a shared budget (and no word from the Hub this window): 0.0 when a request was taken from
        the block claimed from the database (claiming the next block when it is spent), the seconds to
        wait when the shared window is spent, None to count locally (no shared budget, or it is failing)."""
        if self._shared is None or state.from_hub:
            return None
        if state.tokens and now < state.tokens_until:
            state.tokens -= 1
            state.used += 1
            return 0.0
        try:
            granted, ends_in_s = self._shared(pool, max(1, state.limit // BLOCKS), state.limit, state.window_s)
        except Exception as err:  # noqa: BLE001 - the database failing must not stop Hub requests: count locally
            if not self._shared_failing:
                log.warning("hub_budget_shared_failed", error=f"{type(err).__name__}: {err}")
            self._shared_failing = True
            return None
        self._shared_failing = False
        state.tokens, state.tokens_until = max(0, granted - 1), now + ends_in_s
        state.window_ends = now + ends_in_s  # what state() shows: the shared window
        if granted:
            state.used += 1
            return 0.0
        return max(ends_in_s, 0.001)

    def observe(self, pool: str, word: HubRateLimit | None) -> None:
        """What a Hub answer's RateLimit headers said (None: nothing): what remains in its window, and when
        it turns, overrides our own count."""
        if word is None:
            return
        remaining, reset_s, limit, window_s = word.remaining, word.reset_s, word.limit, word.window_s
        with self._lock:
            state = self._pools[pool]
            if limit is not None:
                state.limit = limit
            elif state.limit == 0:  # no budget of ours and no policy: what remains is all we know
                state.limit = remaining
            if window_s is not None:
                state.window_s = float(window_s)
            state.used = max(0, state.limit - remaining)
            state.window_ends = self._clock() + reset_s
            state.from_hub = True

    def stretch_factor(self, needed_per_5min: float) -> float:
        """How much longer every interval must be for `needed_per_5min` API requests to fit the budget
        (1.0: they fit). Logged when it changes."""
        with self._lock:
            limit = self._pools["api"].limit
            factor = 1.0 if limit == 0 else max(1.0, needed_per_5min / (limit * HEADROOM))
            changed = not math.isclose(factor, self._stretch, rel_tol=0.01)
            self._stretch, self._needed_per_5min = factor, needed_per_5min
        if changed and factor > 1.0:
            log.warning(
                "hub_budget_stretched",
                factor=round(factor, 2),
                needed_per_5min=round(needed_per_5min),
                budget_per_5min=limit,
            )
        elif changed:
            log.info("hub_budget_fits", needed_per_5min=round(needed_per_5min), budget_per_5min=limit)
        return factor

    def state(self) -> dict[str, Any]:
        """For /healthz: per pool its limit, what is used and left, when the window turns and whose word it
        is; the stretch of the intervals and the need it answers."""
        with self._lock:
            now = self._clock()
            pools = {}
            for name, pool in self._pools.items():
                self._turn(pool, now)
                pools[name] = {
                    "limit_per_window": pool.limit or None,
                    "window_s": pool.window_s,
                    "used": pool.used,
                    "remaining": max(0, pool.limit - pool.used) if pool.limit else None,
                    "resets_in_s": round(max(0.0, pool.window_ends - now), 1) if pool.window_ends else None,
                    "source": "hub" if pool.from_hub else "settings",
                    "waits": pool.waits,
                    "waited_s": round(pool.waited_s, 1),
                }
            return {
                "pools": pools,
                "interval_stretch": round(self._stretch, 3),
                "needed_api_per_5min": round(self._needed_per_5min, 1),
                "stretched": self._stretch > 1.0,
            }

    @staticmethod
    def _turn(pool: _Pool, now: float) -> None:
        """A new window: nothing used, and the settings' limit again until the Hub says otherwise."""
        if pool.window_ends is not None and now >= pool.window_ends:
            pool.used, pool.window_ends = 0, None
            if pool.from_hub:
                pool.limit, pool.window_s, pool.from_hub = pool.configured, WINDOW_S, False


def pool_of(path: str) -> str:
    """The Hub pool a request path counts against."""
    return "resolvers" if "/resolve/" in path else "api"


_PROCESS: list[RequestBudget] = []


def set_process_budget(budget: RequestBudget | None) -> None:
    """The budget `budget_state` reports (the daemon sets it when it installs one on the Hub client)."""
    _PROCESS.clear()
    if budget is not None:
        _PROCESS.append(budget)


def budget_state() -> dict[str, Any] | None:
    """The process budget's state for /healthz; None when no budget is installed."""
    return _PROCESS[0].state() if _PROCESS else None
