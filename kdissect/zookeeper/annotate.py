"""Display annotations for decoded jute fields, as a table keyed by (record, field).

Enums get their symbolic name, ACL permissions their flag names, times an ISO date; zxids,
session ids and masks show in hex, timeouts and TTLs in ms; passwords, auth data and SASL tokens
are redacted unless asked for.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timezone

from kdissect.model import DURATION_MS, ENUM, FLAGS, HEX, SECRET, TIME_MS, Field
from kdissect.text import plural
from kdissect.zookeeper.codes_table import ENUMS, ERRORS, OPCODES

Annotator = Callable[[Field, bool], None]

PERM_BITS = tuple((v, n) for v, n in sorted(ENUMS["Perms"].items()) if v & (v - 1) == 0)
ALL_PERMS = 31


def error_name(code: int) -> str:
    e = ERRORS.get(code)
    return e[1] if e else f"error {code}"


def opcode_name(code: int) -> str:
    o = OPCODES.get(code)
    return o[0] if o else f"opcode {code}"


def perms_text(perms: int) -> str:
    if perms == ALL_PERMS:
        return "ALL"
    names = [n for v, n in PERM_BITS if perms & v]
    extra = perms & ~ALL_PERMS
    if extra:
        names.append(hex(extra))
    return "|".join(names) if names else "none"


def _enum(table: dict[int, str]) -> Annotator:
    def ann(f: Field, show_secrets: bool) -> None:
        f.hint = ENUM
        f.display = table.get(f.value, f"unknown ({f.value})") if isinstance(f.value, int) else None

    return ann


def _call(fn: Callable[[int], str], hint: str = ENUM) -> Annotator:
    def ann(f: Field, show_secrets: bool) -> None:
        if isinstance(f.value, int):
            f.hint = hint
            f.display = fn(f.value)

    return ann


def _perms(f: Field, show_secrets: bool) -> None:
    if isinstance(f.value, int):
        f.hint = FLAGS
        f.display = perms_text(f.value)


def _time(f: Field, show_secrets: bool) -> None:
    v = f.value
    if isinstance(v, int) and 0 < v < 253402300800000:
        f.hint = TIME_MS
        dt = datetime.fromtimestamp(v / 1000.0, tz=timezone.utc)
        f.display = dt.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _hint(hint: str) -> Annotator:
    def ann(f: Field, show_secrets: bool) -> None:
        if isinstance(f.value, int):
            f.hint = hint

    return ann


_hex = _hint(HEX)
_ms = _hint(DURATION_MS)


def _secret(f: Field, show_secrets: bool) -> None:
    v = f.value
    if show_secrets or not isinstance(v, bytes) or not any(v):
        return
    f.value = f"<redacted {plural(len(v), 'byte')}>"
    f.hint = SECRET
    f.offset, f.length = f.offset + f.length - len(v), len(v)  # the bytes after the length prefix


_ERR = _call(error_name)
_OP = _call(opcode_name)

ANNOTATIONS: dict[tuple[str, str], Annotator] = {
    ("Stat", "ctime"): _time,
    ("Stat", "mtime"): _time,
    ("Stat", "czxid"): _hex,
    ("Stat", "mzxid"): _hex,
    ("Stat", "pzxid"): _hex,
    ("Stat", "ephemeral_owner"): _hex,
    ("StatPersisted", "ctime"): _time,
    ("StatPersisted", "mtime"): _time,
    ("StatPersisted", "czxid"): _hex,
    ("StatPersisted", "mzxid"): _hex,
    ("StatPersisted", "pzxid"): _hex,
    ("StatPersisted", "ephemeral_owner"): _hex,
    ("ACL", "perms"): _perms,
    ("CreateRequest", "flags"): _enum(ENUMS["CreateMode"]),
    ("CreateTTLRequest", "flags"): _enum(ENUMS["CreateMode"]),
    ("AddWatchRequest", "mode"): _enum(ENUMS["AddWatchMode"]),
    ("WatcherEvent", "type"): _enum(ENUMS["EventType"]),
    ("WatcherEvent", "state"): _enum(ENUMS["KeeperState"]),
    ("CheckWatchesRequest", "type"): _enum(ENUMS["WatcherType"]),
    ("RemoveWatchesRequest", "type"): _enum(ENUMS["WatcherType"]),
    ("ErrorResponse", "err"): _ERR,
    ("ReplyHeader", "err"): _ERR,
    ("ReplyHeader", "zxid"): _hex,
    ("RequestHeader", "type"): _OP,
    ("MultiHeader", "type"): _OP,
    ("MultiHeader", "err"): _ERR,
    ("ConnectRequest", "last_zxid_seen"): _hex,
    ("ConnectRequest", "session_id"): _hex,
    ("ConnectResponse", "session_id"): _hex,
    ("ConnectRequest", "time_out"): _ms,
    ("ConnectResponse", "time_out"): _ms,
    ("CreateTTLRequest", "ttl"): _ms,
    ("ReconfigRequest", "cur_config_id"): _hex,
    ("SetWatches", "relative_zxid"): _hex,
    ("SetWatches2", "relative_zxid"): _hex,
    ("ConnectRequest", "passwd"): _secret,
    ("ConnectResponse", "passwd"): _secret,
    ("AuthPacket", "auth"): _secret,
    ("GetSASLRequest", "token"): _secret,
    ("SetSASLRequest", "token"): _secret,
    ("SetSASLResponse", "token"): _secret,
}


def for_field(record: str, name: str) -> Annotator | None:
    return ANNOTATIONS.get((record, name))
