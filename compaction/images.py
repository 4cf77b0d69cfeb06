"""Token cost of image parts without decoding the image.

Rule (documented in README, "Token accounting"): we follow OpenAI's published tile
formula. ``detail: low`` costs 85 tokens. Otherwise the image is scaled to fit in
2048x2048, then so its short side is at most 768; each 512x512 tile costs 170 plus a
base of 85. Dimensions are read from the PNG/GIF/WebP/JPEG header inside a base64 data
URL; when they cannot be read (remote URL, unknown format) we charge 765 tokens, the
cost of a 1024x1024 image.
"""
from __future__ import annotations

import base64
import math
import struct

from .messages import JSONObject

UNKNOWN_IMAGE_TOKENS = 765
LOW_DETAIL_TOKENS = 85


def _decode_head(url: str, nbytes: int) -> bytes | None:
    if not url.startswith("data:"):
        return None
    comma = url.find(",")
    if comma < 0 or ";base64" not in url[:comma]:
        return None
    chunk = url[comma + 1: comma + 1 + (nbytes // 3 + 1) * 4]
    chunk = chunk[: len(chunk) - len(chunk) % 4]
    try:
        return base64.b64decode(chunk, validate=False)
    except (ValueError, TypeError):
        return None


def image_size(url: str) -> tuple[int, int] | None:
    head = _decode_head(url, 64 * 1024)
    if not head or len(head) < 26:
        return None
    if head[:8] == b"\x89PNG\r\n\x1a\n":
        return struct.unpack(">II", head[16:24])
    if head[:6] in (b"GIF87a", b"GIF89a"):
        return struct.unpack("<HH", head[6:10])
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        kind = head[12:16]
        if kind == b"VP8X":
            w = int.from_bytes(head[24:27], "little") + 1
            h = int.from_bytes(head[27:30], "little") + 1
            return w, h
        if kind == b"VP8 " and len(head) >= 30:
            w, h = struct.unpack("<HH", head[26:30])
            return w & 0x3FFF, h & 0x3FFF
        if kind == b"VP8L" and len(head) >= 25:
            b = head[21:25]
            w = 1 + (((b[1] & 0x3F) << 8) | b[0])
            h = 1 + (((b[3] & 0xF) << 10) | (b[2] << 2) | ((b[1] & 0xC0) >> 6))
            return w, h
        return None
    if head[:2] == b"\xff\xd8":
        i = 2
        while i + 9 < len(head):
            if head[i] != 0xFF:
                i += 1
                continue
            marker = head[i + 1]
            if marker in (0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF):
                h, w = struct.unpack(">HH", head[i + 5:i + 9])
                return w, h
            if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:
                i += 2
                continue
            seg = struct.unpack(">H", head[i + 2:i + 4])[0]
            i += 2 + seg
    return None


def image_tokens(part: JSONObject) -> int:
    spec = part.get("image_url")
    url = spec.get("url") if isinstance(spec, dict) else spec
    detail = spec.get("detail", "auto") if isinstance(spec, dict) else "auto"
    if detail == "low":
        return LOW_DETAIL_TOKENS
    size = image_size(url or "")
    if not size or min(size) <= 0:
        return UNKNOWN_IMAGE_TOKENS
    scale = min(1.0, 2048 / max(size))
    w, h = size[0] * scale, size[1] * scale
    scale = min(1.0, 768 / min(w, h))
    w, h = w * scale, h * scale
    tiles = math.ceil(w / 512) * math.ceil(h / 512)
    return LOW_DETAIL_TOKENS + 170 * tiles
