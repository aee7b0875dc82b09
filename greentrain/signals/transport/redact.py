"""Masking secrets in any text that could reach an exception, a log line or a metric label.

A server may echo what we sent it: the raw token, its URL-encoded form, the
base64 ``user:password`` of a ``Basic`` header, or a whole ``Authorization:``
line inside an error body. ``Redactor`` masks every one of those forms, and
any fragment of six or more characters of them, so text cut short elsewhere
(a truncated echo) cannot leave half a secret behind. Mask first, truncate
after: ``redact(text, limit=...)`` does both in that order.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Iterable
from urllib.parse import quote, quote_plus

__all__ = ["Redactor", "FRAGMENT_CHARS", "MASK", "encodings_of"]

MASK = "***"
FRAGMENT_CHARS = 6
"""Shortest run of a secret's characters (any encoding) that is masked wherever it appears."""

# A credential-bearing header or field echoed in a body: mask its whole value, whatever the secret.
_HEADER_VALUE = re.compile(
    r"(?i)(\b(?:proxy-)?authorization|\bauth[-_]?token|\bx-api-key|\bapi[-_]?key|\baccess[-_]?token|\btoken"
    r"|\bpassword|\bpasswd|\bsecret)"
    r"([\"']?\s*[:=]\s*[\"']?)(?:(?:basic|bearer|token)\s+)?[^\s\"',;&}\]]+"
)
_SCHEME_VALUE = re.compile(r"(?i)\b(basic|bearer)\s+[A-Za-z0-9+/=._~-]{6,}")


def _b64_forms(text: str) -> list[str]:
    """Base64 of ``text`` at the three byte alignments (a secret inside 'user:secret' lands on any)."""
    raw = text.encode("utf-8")
    forms = []
    for pad in range(3):
        encoded = base64.b64encode(b"\0" * pad + raw).decode("ascii")
        # Drop the characters that encode the padding bytes or the partial last group.
        start = (pad * 4 + 2) // 3
        end = len(encoded) - 4 if len(encoded) > 4 else len(encoded)
        forms.append(encoded[start:end].rstrip("="))
    for variant in list(forms):
        forms.append(variant.replace("+", "-").replace("/", "_"))  # URL-safe alphabet
    return [f for f in forms if f]


def encodings_of(secret: str, partners: Iterable[str] = ()) -> list[str]:
    """Every form of ``secret`` worth masking: raw, URL-encoded, base64 (also of ``partner:secret``)."""
    exact = base64.b64encode(secret.encode("utf-8")).decode("ascii")
    forms = {secret, quote(secret, safe=""), quote_plus(secret), quote(secret), exact, exact.rstrip("=")}
    forms.update(_b64_forms(secret))
    for partner in partners:
        pair = f"{partner}:{secret}"
        forms.add(base64.b64encode(pair.encode("utf-8")).decode("ascii"))
        forms.add(quote(base64.b64encode(pair.encode("utf-8")).decode("ascii"), safe=""))
    return sorted((f for f in forms if f), key=len, reverse=True)


class Redactor:
    """Masks registered secrets in all their encodings; add secrets as they become known."""

    def __init__(self) -> None:
        self._grams: set[str] = set()
        self._short: set[str] = set()
        self._lengths: set[int] = set()

    def add(self, secret: str | None, *, partners: Iterable[str] = ()) -> None:
        """Register ``secret`` (ignored when empty). ``partners``: users it is paired with in Basic auth."""
        if not secret:
            return
        for form in encodings_of(secret, partners):
            if len(form) < FRAGMENT_CHARS:
                if len(form) >= 4:
                    self._short.add(form)
                continue
            for i in range(len(form) - FRAGMENT_CHARS + 1):
                self._grams.add(form[i : i + FRAGMENT_CHARS])

    def __bool__(self) -> bool:
        return bool(self._grams or self._short)

    def redact(self, text: str, *, limit: int | None = None) -> str:
        """``text`` with secrets and echoed credential headers masked, then cut to ``limit`` characters."""
        text = _SCHEME_VALUE.sub(lambda m: f"{m.group(1)} {MASK}", text)
        text = _HEADER_VALUE.sub(lambda m: f"{m.group(1)}{m.group(2)}{MASK}", text)
        if self._grams or self._short:
            text = self._mask_fragments(text)
        if limit is not None and len(text) > limit:
            text = text[:limit] + "..."
        return text

    def _mask_fragments(self, text: str) -> str:
        covered = bytearray(len(text))
        n = FRAGMENT_CHARS
        for i in range(len(text) - n + 1):
            if text[i : i + n] in self._grams:
                covered[i : i + n] = b"\1" * n
        for short in self._short:
            start = text.find(short)
            while start != -1:
                covered[start : start + len(short)] = b"\1" * len(short)
                start = text.find(short, start + 1)
        if not any(covered):
            return text
        out, i = [], 0
        while i < len(text):
            if covered[i]:
                while i < len(text) and covered[i]:
                    i += 1
                out.append(MASK)
            else:
                out.append(text[i])
                i += 1
        return "".join(out)
