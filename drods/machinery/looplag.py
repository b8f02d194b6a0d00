"""How late the process's event loop runs what is due (``drods_event_loop_lag_seconds``).

Everything in a process — API answers, watch deliveries, every controller — shares one event loop:
a callback that holds it delays all the others. A timer due every ``interval`` seconds is observed
late by the time the loop spent elsewhere; that lateness is the queueing each step of the pipeline
pays, which a per-controller reconcile time does not show.
"""

from __future__ import annotations

import asyncio

from prometheus_client import CollectorRegistry, Histogram

BUCKETS = (.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10)


class LoopLag:
    def __init__(self, registry: CollectorRegistry, interval: float = 0.1) -> None:
        self.interval = interval
        self.lag = Histogram("drods_event_loop_lag_seconds",
                             "How late the event loop ran a timer due every 0.1 s", registry=registry, buckets=BUCKETS)

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            due = loop.time() + self.interval
            await asyncio.sleep(self.interval)
            self.lag.observe(max(0.0, loop.time() - due))
