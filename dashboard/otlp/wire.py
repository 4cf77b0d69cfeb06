"""OTLP/HTTP's encodings: a request body (protobuf or JSON, maybe gzip) read into the JSON
form ``compaction.formats.otlp`` reads, and the answers written in the request's encoding:
``ExportTraceServiceResponse`` (with ``partial_success`` when spans were refused) and, for
a request refused whole, ``google.rpc.Status``."""
from __future__ import annotations

import json
import zlib
from typing import Any

from compaction import jsontext
from compaction.formats._otlp_proto import ProtobufError, decode_export_request

PROTOBUF = "application/x-protobuf"
JSON = "application/json"


class BadBody(ValueError):
    """A body that cannot be read; the text says why (the answer is a 400)."""


def _inflate(body: bytes, limit: int) -> bytes:
    """gzip without trusting its size: at most ``limit`` bytes come out."""
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        out = inflater.decompress(body, limit + 1)
    except zlib.error as exc:
        raise BadBody(f"the body is not valid gzip ({exc})") from None
    if len(out) > limit or inflater.unconsumed_tail:
        raise BadBody(f"the body inflates to more than {limit:,} bytes (API_MAX_REQUEST_BYTES)")
    if not inflater.eof:
        raise BadBody("the gzip body is cut off")
    return out


def read_request(body: bytes, content_type: str, encoding: str, limit: int) -> dict[str, Any]:
    """The export request as a dict of OTLP's JSON form."""
    if encoding == "gzip":
        body = _inflate(body, limit)
    elif encoding not in ("", "identity"):
        raise BadBody(f"Content-Encoding {encoding!r} is not served (gzip or none)")
    if content_type == PROTOBUF:
        try:
            return decode_export_request(body)
        except ProtobufError as exc:
            raise BadBody(f"the body is not an ExportTraceServiceRequest: {exc}") from None
    try:
        data = jsontext.loads(body.decode("utf-8"))
    except UnicodeDecodeError:
        raise BadBody("the JSON body is not UTF-8") from None
    except (ValueError, jsontext.TooDeep) as exc:
        raise BadBody(f"the body is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise BadBody("the body must be a JSON object (an ExportTraceServiceRequest)")
    spans = data.get("resourceSpans", data.get("resource_spans"))
    if spans is not None and not isinstance(spans, list):
        raise BadBody("resourceSpans must be a list")
    return data


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def export_response(content_type: str, rejected: int, message: str) -> bytes:
    """ExportTraceServiceResponse; ``partial_success`` only when spans were refused."""
    if content_type == PROTOBUF:
        if not rejected:
            return b""
        partial = _varint(1 << 3) + _varint(rejected) + _field(2, message.encode())
        return _field(1, partial)
    if not rejected:
        return b"{}"
    return json.dumps({"partialSuccess": {"rejectedSpans": str(rejected), "errorMessage": message}}).encode()


def status(content_type: str, code: int, message: str) -> bytes:
    """google.rpc.Status (code 3: INVALID_ARGUMENT, 16: UNAUTHENTICATED)."""
    if content_type == PROTOBUF:
        return _varint(1 << 3) + _varint(code) + _field(2, message.encode())
    return json.dumps({"code": code, "message": message}).encode()
