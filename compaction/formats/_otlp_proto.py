"""OTLP's protobuf encoding of an ``ExportTraceServiceRequest`` read into the dict its JSON
encoding gives (``resourceSpans`` / ``scopeSpans`` / ``spans``, ids as hex, times as strings),
so one reader serves both encodings. Only the fields a trace import reads are kept; unknown
fields are skipped as the wire format allows. Field numbers from opentelemetry-proto
(``collector/trace/v1/trace_service.proto``, ``trace/v1/trace.proto``,
``common/v1/common.proto``). Written out here so the service needs no protobuf runtime."""
from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import Any


class ProtobufError(ValueError):
    """Bytes that are not a well-formed protobuf message."""


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(data):
            raise ProtobufError("truncated varint")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise ProtobufError("varint longer than 10 bytes")


def _fields(data: bytes) -> Iterator[tuple[int, int, Any]]:
    """(field number, wire type, value): ints for varint and fixed, bytes for length-delimited."""
    pos = 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        value: int | bytes
        if wire == 0:
            value, pos = _varint(data, pos)
        elif wire == 1:
            if pos + 8 > len(data):
                raise ProtobufError("truncated fixed64")
            value = data[pos:pos + 8]
            pos += 8
        elif wire == 2:
            size, pos = _varint(data, pos)
            if pos + size > len(data):
                raise ProtobufError("truncated length-delimited field")
            value = data[pos:pos + size]
            pos += size
        elif wire == 5:
            if pos + 4 > len(data):
                raise ProtobufError("truncated fixed32")
            value = data[pos:pos + 4]
            pos += 4
        else:
            raise ProtobufError(f"unsupported wire type {wire}")
        yield number, wire, value


def _text(value: Any) -> str:
    if not isinstance(value, bytes):
        raise ProtobufError("a string field has the wrong wire type")
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        raise ProtobufError("a string field is not UTF-8") from None


def _u64(value: Any) -> int:
    return int(struct.unpack("<Q", value)[0]) if isinstance(value, bytes) else int(value)


def _any_value(data: bytes) -> dict[str, Any]:
    for number, _wire, value in _fields(data):
        if number == 1:
            return {"stringValue": _text(value)}
        if number == 2:
            return {"boolValue": bool(value)}
        if number == 3:
            signed = value - (1 << 64) if value >= 1 << 63 else value
            return {"intValue": str(signed)}
        if number == 4:
            return {"doubleValue": struct.unpack("<d", value)[0]}
        if number == 5:
            return {"arrayValue": {"values": [_any_value(v) for n, _w, v in _fields(value) if n == 1]}}
        if number == 6:
            return {"kvlistValue": {"values": [_key_value(v) for n, _w, v in _fields(value) if n == 1]}}
        if number == 7:
            return {"bytesValue": bytes(value).hex()}
    return {}


def _key_value(data: bytes) -> dict[str, Any]:
    out: dict[str, Any] = {"key": "", "value": {}}
    for number, _wire, value in _fields(data):
        if number == 1:
            out["key"] = _text(value)
        elif number == 2:
            out["value"] = _any_value(value)
    return out


def _event(data: bytes) -> dict[str, Any]:
    out: dict[str, Any] = {"attributes": []}
    for number, _wire, value in _fields(data):
        if number == 1:
            out["timeUnixNano"] = str(_u64(value))
        elif number == 2:
            out["name"] = _text(value)
        elif number == 3:
            out["attributes"].append(_key_value(value))
    return out


def _span(data: bytes) -> dict[str, Any]:
    out: dict[str, Any] = {"attributes": [], "events": []}
    for number, _wire, value in _fields(data):
        if number == 1:
            out["traceId"] = bytes(value).hex()
        elif number == 2:
            out["spanId"] = bytes(value).hex()
        elif number == 4:
            if value:
                out["parentSpanId"] = bytes(value).hex()
        elif number == 5:
            out["name"] = _text(value)
        elif number == 6:
            out["kind"] = value
        elif number == 7:
            out["startTimeUnixNano"] = str(_u64(value))
        elif number == 8:
            out["endTimeUnixNano"] = str(_u64(value))
        elif number == 9:
            out["attributes"].append(_key_value(value))
        elif number == 10:
            out["droppedAttributesCount"] = value
        elif number == 11:
            out["events"].append(_event(value))
        elif number == 15:
            status: dict[str, Any] = {}
            for n, _w, v in _fields(value):
                if n == 2:
                    status["message"] = _text(v)
                elif n == 3:
                    status["code"] = v
            out["status"] = status
    return out


def _attributes_of(data: bytes) -> list[dict[str, Any]]:
    return [_key_value(v) for n, _w, v in _fields(data) if n == 1]


def decode_export_request(data: bytes) -> dict[str, Any]:
    """An ``ExportTraceServiceRequest`` as OTLP/JSON would spell it."""
    resource_spans = []
    for number, _wire, rs in _fields(data):
        if number != 1:
            continue
        entry: dict[str, Any] = {"resource": {"attributes": []}, "scopeSpans": []}
        for n, _w, v in _fields(rs):
            if n == 1:
                entry["resource"]["attributes"] = _attributes_of(v)
            elif n == 2:
                scope: dict[str, Any] = {"spans": []}
                for n2, _w2, v2 in _fields(v):
                    if n2 == 1:
                        scope["scope"] = {"name": next((_text(x) for k, _t, x in _fields(v2) if k == 1), "")}
                    elif n2 == 2:
                        scope["spans"].append(_span(v2))
                entry["scopeSpans"].append(scope)
        resource_spans.append(entry)
    return {"resourceSpans": resource_spans}
