"""Prometheus remote-write 1.0 requests: the ``prometheus.WriteRequest`` protobuf, snappy-compressed.

The message schema is Prometheus's own (``prompb/remote.proto`` and ``prompb/types.proto``), declared
here as a protobuf file descriptor and turned into message classes by the protobuf runtime, so
no generated code and no protoc are needed; only the fields a sample writer uses are declared
(WriteRequest.timeseries = 1, TimeSeries.labels = 1 / samples = 2, Label.name = 1 / value = 2,
Sample.value = 1 / timestamp = 2 in milliseconds) — protobuf skips the rest on both sides.
The body is snappy *block* format (not framed), as the protocol requires (cramjam).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import cramjam
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

HEADERS = {
    "Content-Type": "application/x-protobuf",
    "Content-Encoding": "snappy",
    "X-Prometheus-Remote-Write-Version": "0.1.0",
    "User-Agent": "drods-history/1",
}

_F = descriptor_pb2.FieldDescriptorProto


def _schema() -> descriptor_pb2.FileDescriptorProto:
    fd = descriptor_pb2.FileDescriptorProto(name="drods/prometheus_remote.proto", package="prometheus",
                                            syntax="proto3")

    def message(name: str, *fields: tuple[str, int, int, int, str]) -> None:
        m = fd.message_type.add(name=name)
        for fname, number, ftype, label, type_name in fields:
            f = m.field.add(name=fname, number=number, type=ftype, label=label)  # type: ignore[arg-type]
            if type_name:
                f.type_name = type_name

    opt, rep = _F.LABEL_OPTIONAL, _F.LABEL_REPEATED
    message("Label", ("name", 1, _F.TYPE_STRING, opt, ""), ("value", 2, _F.TYPE_STRING, opt, ""))
    message("Sample", ("value", 1, _F.TYPE_DOUBLE, opt, ""), ("timestamp", 2, _F.TYPE_INT64, opt, ""))
    message("TimeSeries", ("labels", 1, _F.TYPE_MESSAGE, rep, ".prometheus.Label"),
            ("samples", 2, _F.TYPE_MESSAGE, rep, ".prometheus.Sample"))
    message("WriteRequest", ("timeseries", 1, _F.TYPE_MESSAGE, rep, ".prometheus.TimeSeries"))
    return fd


_pool = descriptor_pool.DescriptorPool()
_pool.Add(_schema())
WriteRequest: Any = message_factory.GetMessageClass(_pool.FindMessageTypeByName("prometheus.WriteRequest"))


@dataclass(frozen=True, slots=True)
class Series:
    """One time series of a request: its labels (``__name__`` included) and ``(ms, value)`` samples
    in increasing time order."""

    labels: Mapping[str, str]
    samples: Sequence[tuple[int, float]]


def encode(series: Iterable[Series]) -> bytes:
    """The compressed body of one remote-write request (labels sorted by name, as required)."""
    req = WriteRequest()
    for s in series:
        ts = req.timeseries.add()
        for name in sorted(s.labels):
            ts.labels.add(name=name, value=s.labels[name])
        for t_ms, v in s.samples:
            ts.samples.add(timestamp=t_ms, value=v)
    return bytes(cramjam.snappy.compress_raw(req.SerializeToString()))


def decode(body: bytes) -> list[Series]:
    """The inverse of `encode` (tests, and a receiver written against the same schema)."""
    req = WriteRequest()
    req.ParseFromString(bytes(cramjam.snappy.decompress_raw(body)))
    return [Series({lb.name: lb.value for lb in ts.labels}, [(s.timestamp, s.value) for s in ts.samples])
            for ts in req.timeseries]
