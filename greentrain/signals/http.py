"""The one HTTP client all live providers share (httpx), with faults made typed.

Every way a request can go wrong — timeout, DNS or connection failure, 5xx,
429, 401/403, a truncated or non-JSON body — comes out as a ``SignalError``
subclass with a message that names the provider and path but never a secret:
registered secrets are redacted from any text that could reach a log.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from email.utils import parsedate_to_datetime
from typing import Any

import httpx

from greentrain.errors import AuthError, RateLimitedError, SignalError

__all__ = ["JSONClient", "retry_after_s", "redact"]

_USER_AGENT = "greentrain (carbon-aware training; https://github.com/greentrain)"


def redact(text: str, secrets: list[str]) -> str:
    """``text`` with every non-trivial secret replaced by '***'."""
    for secret in secrets:
        if secret and len(secret) >= 4:
            text = text.replace(secret, "***")
    return text


def retry_after_s(value: str | None, now_s: float | None = None) -> float | None:
    """Seconds from a ``Retry-After`` header (delta-seconds or HTTP-date); None if absent/invalid."""
    if not value:
        return None
    text = value.strip()
    try:
        return max(0.0, float(text))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - (time.time() if now_s is None else now_s))


def _error_text(response: httpx.Response) -> str:
    """A short description from an error body (its 'message'/'error' field), if any."""
    try:
        body = response.json()
    except ValueError:
        return ""
    if isinstance(body, Mapping):
        for key in ("message", "error", "detail"):
            value = body.get(key)
            if isinstance(value, Mapping):
                value = value.get("message")
            if isinstance(value, str):
                return value[:200]
    return ""


class JSONClient:
    """GET JSON from ``api_base`` with timeouts; raise typed SignalErrors."""

    def __init__(
        self,
        provider: str,
        api_base: str,
        *,
        timeout_s: float = 10.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        if not api_base.startswith(("http://", "https://")):
            from greentrain.errors import ConfigError

            raise ConfigError(f"api_base: {api_base!r} must start with http:// or https://")
        self.provider = provider
        self.api_base = api_base.rstrip("/")
        self.secrets: list[str] = []
        self._client = httpx.Client(
            timeout=httpx.Timeout(timeout_s),
            headers={"User-Agent": _USER_AGENT, "Accept": "application/json"},
            transport=transport,
            follow_redirects=False,
            trust_env=True,
        )

    def get(
        self,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
        auth: httpx.Auth | tuple[str, str] | None = None,
    ) -> Any:
        """Decoded JSON of GET ``api_base/path``; typed SignalError on any fault."""
        where = f"{self.provider} {path}"
        try:
            url = f"{self.api_base}/{path.lstrip('/')}"
            response = self._client.get(url, params=params, headers=headers, auth=auth)
        except httpx.TimeoutException:
            raise SignalError(f"{where}: timed out") from None
        except httpx.ConnectError as e:
            raise SignalError(f"{where}: cannot connect ({self._safe(str(e))[:120]})") from None
        except httpx.HTTPError as e:
            raise SignalError(f"{where}: request failed ({type(e).__name__})") from None
        self._raise_for_status(response, where)
        try:
            return json.loads(response.content)
        except (ValueError, UnicodeDecodeError):
            raise SignalError(f"{where}: body is not valid JSON (truncated or an error page?)") from None

    def _raise_for_status(self, response: httpx.Response, where: str) -> None:
        status = response.status_code
        if status < 400:
            return
        detail = self._safe(_error_text(response))
        suffix = f": {detail}" if detail else ""
        if status in (401, 403):
            raise AuthError(f"{where}: HTTP {status}, credentials rejected or not authorised{suffix}")
        if status == 429:
            wait_s = retry_after_s(response.headers.get("Retry-After"))
            raise RateLimitedError(f"{where}: HTTP 429 rate limited{suffix}", retry_after_s=wait_s)
        raise SignalError(f"{where}: HTTP {status}{suffix}")

    def _safe(self, text: str) -> str:
        return redact(text, self.secrets)

    def close(self) -> None:
        """Close the connection pool."""
        self._client.close()
