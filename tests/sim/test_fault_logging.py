"""A fault cancels a sim's requests in flight on purpose: uvicorn's error log keeps real errors only."""

from __future__ import annotations

import asyncio
import logging
import sys

from starlette.requests import ClientDisconnect

from drods.sim.faults import _CANCELLED_BY_FAULT


def _record(exc: BaseException) -> logging.LogRecord:
    try:
        raise exc
    except BaseException:  # noqa: BLE001 - the record carries it
        info = sys.exc_info()
    return logging.LogRecord("uvicorn.error", logging.ERROR, __file__, 1, "Exception in ASGI application", None, info)


def test_a_request_cancelled_by_a_fault_is_not_logged_as_an_error_and_a_real_error_is() -> None:
    """`sim fault down` printed five CancelledError tracebacks as "Exception in ASGI application"."""
    assert not _CANCELLED_BY_FAULT.filter(_record(asyncio.CancelledError()))
    assert not _CANCELLED_BY_FAULT.filter(_record(ClientDisconnect()))  # a partition's cut client
    assert _CANCELLED_BY_FAULT.filter(_record(ValueError("a handler's own bug")))
    plain = logging.LogRecord("uvicorn.error", logging.INFO, __file__, 1, "Started server process", None, None)
    assert _CANCELLED_BY_FAULT.filter(plain)
