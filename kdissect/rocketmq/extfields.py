"""The header's extFields (the custom request/response header) as typed fields.

SendMessageRequestHeaderV2 keys (a..n) are shown under their full names; integer-valued keys
become ints, timestamps get a date, sysFlag its flag names (message flags for sends, pull flags
for pulls) and the properties string its name/value pairs. ACL credentials (the request
signature, an STS security token) are redacted unless show_secrets."""

from __future__ import annotations

import re
from typing import Any

from kdissect.model import DURATION_MS, FLAGS, HEX, SECRET, TIME_MS, Field, duration_hint, struct
from kdissect.rocketmq.codes import SEND_V2_FIELDS
from kdissect.rocketmq.header import ExtEntry, Header
from kdissect.rocketmq.jfields import snake
from kdissect.rocketmq.props import properties_from_text
from kdissect.rocketmq.tables import (
    ALL_SEND_CODES,
    DURATION_MS_EXT_KEYS,
    HEX_EXT_KEYS,
    INT_EXT_KEYS,
    PROPERTIES_EXT_KEYS,
    PULL_CODES,
    PULL_SYSFLAG_BITS,
    SEND_V2_CODES,
    TIME_EXT_KEYS,
    flag_names,
    message_sysflag_names,
)
from kdissect.text import plural

_INT = re.compile(r"-?\d{1,19}")
# ACL ext-fields that prove or carry a credential (AccessKey, the key's name, stays visible).
SECRET_EXT_KEYS = frozenset({"Signature", "SecurityToken"})
# Their names as they appear on the wire: a frame holding one may hold a credential undecoded.
CREDENTIAL_EXT_FIELDS = tuple(sorted(k.encode() for k in SECRET_EXT_KEYS))


def _as_int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    text = value.strip() if isinstance(value, str) else ""
    return int(text) if _INT.fullmatch(text) else None


def _sysflag_display(code: int | None, value: int) -> str | None:
    if code in ALL_SEND_CODES:
        return message_sysflag_names(value)
    if code in PULL_CODES:
        return flag_names(value, PULL_SYSFLAG_BITS)
    return None


def _typed(key: str, e: ExtEntry, name: str, label: str | None, code: int | None,
           show_secrets: bool) -> tuple[Field, Any]:
    value = e.value
    if key in SECRET_EXT_KEYS and not show_secrets and isinstance(value, str) and value:
        return Field(name, f"<redacted {plural(e.value_length, 'byte')}>", e.value_offset, e.value_length, hint=SECRET,
                     label=label), value
    if key in PROPERTIES_EXT_KEYS and isinstance(value, str):
        f, props = properties_from_text(value, name, e.offset, e.length, label)
        return f, props
    n = _as_int(value) if key in INT_EXT_KEYS or key in TIME_EXT_KEYS or key == "sysFlag" else None
    if n is None:
        return Field(name, value, e.offset, e.length, label=label), value
    f = Field(name, n, e.offset, e.length, label=label)
    f.hint, f.display = _int_display(key, name, code, n)
    return f, n


def _int_display(key: str, name: str, code: int | None, n: int) -> tuple[str | None, str | None]:
    """The hint and display of an integer ext-field: a date, flag names, hex, a duration."""
    if key in TIME_EXT_KEYS:
        return TIME_MS, None
    if key == "sysFlag":
        display = _sysflag_display(code, n)
        return (None, None) if display is None else (FLAGS, display)
    if key in HEX_EXT_KEYS:
        return HEX, None
    return DURATION_MS if key in DURATION_MS_EXT_KEYS else duration_hint(name), None


def ext_fields(h: Header, request_code: int | None, is_request: bool,
               show_secrets: bool = False) -> tuple[Field | None, dict[str, Any]]:
    """The ext_fields struct (None when the header has none) and the typed values by full
    (camelCase) key; for `properties` the value is the name -> value dict. Secrets are redacted
    in the struct unless show_secrets; the values keep them (they feed no output)."""
    if not h.ext and h.ext_offset < 0:
        return None, {}
    v2 = is_request and request_code in SEND_V2_CODES
    children: list[Field] = []
    values: dict[str, Any] = {}
    for e in h.ext:
        key = SEND_V2_FIELDS.get(e.key, e.key) if v2 else e.key
        name = snake(key)
        label = f"{key} ({e.key})" if key != e.key else (None if name == key else key)
        f, v = _typed(key, e, name, label, request_code if is_request else None, show_secrets)
        children.append(f)
        values[key] = v
    return struct("ext_fields", children, h.ext_offset, h.ext_length), values
