"""One-line summaries a ZooKeeper operator reads at a glance, built from decoded fields by table:
`getData /app/config watch`, `getData → 24 bytes v3`, `NodeDataChanged /app/config`."""

from __future__ import annotations

from collections.abc import Callable

from kdissect.model import Field
from kdissect.text import cut, plural, value_word

Part = Callable[[Field], "str | None"]
MAX_PATHS = 3
# Characters of a path (or any text) a summary shows: a longer one (a path may have megabytes) is
# cut, with "…"; the field and the facts keep it whole.
MAX_TEXT = 1024


def short(text: str) -> str:
    return cut(text, MAX_TEXT)


def _value(f: Field) -> str | None:
    return None if f.value is None else short(value_word(f.value))


def _size(f: Field) -> str | None:
    if isinstance(f.value, bytes):
        return plural(len(f.value), "byte")
    if isinstance(f.value, str) and f.value.startswith("<redacted"):
        return f.value
    return "null data" if f.value is None else None


def _count(one: str, many: str) -> Part:
    def part(f: Field) -> str | None:
        if f.children is None:
            return None
        return plural(len(f.children), one, many)

    return part


def _watch(f: Field) -> str | None:
    return "watch" if f.value is True else None


def _version(f: Field) -> str | None:
    return f"v{f.value}" if isinstance(f.value, int) and f.value != -1 else None


def _nonzero_display(f: Field) -> str | None:
    return f.display if f.value else None


def _display(f: Field) -> str | None:
    return f.display


def _ttl(f: Field) -> str | None:
    return f"ttl={f.value}ms"


def _stat(f: Field) -> str | None:
    v = f.child("version")
    return f"v{v.value}" if v is not None else None


def _total(f: Field) -> str | None:
    return f"{f.value} descendants"


# field name -> how it shows, in summary order
REQUEST_PARTS: tuple[tuple[str, Part], ...] = (
    ("path", _value),
    ("prefix_path", _value),
    ("scheme", _value),
    ("watch", _watch),
    ("data", _size),
    ("token", _size),
    ("flags", _nonzero_display),
    ("mode", _display),
    ("type", _display),
    ("ttl", _ttl),
    ("version", _version),
)
REPLY_PARTS: tuple[tuple[str, Part], ...] = (
    ("path", _value),
    ("data", _size),
    ("token", _size),
    ("children", _count("child", "children")),
    ("ephemerals", _count("ephemeral", "ephemerals")),
    ("acl", _count("ACL", "ACLs")),
    ("client_info", _count("identity", "identities")),
    ("total_number", _total),
    ("stat", _stat),
)
WATCH_LISTS = ("data_watches", "exist_watches", "child_watches", "persistent_watches",
               "persistent_recursive_watches")


def parts(fields: list[Field], table: tuple[tuple[str, Part], ...]) -> list[str]:
    by_name = {f.name: f for f in fields}
    out: list[str] = []
    for name, part in table:
        f = by_name.get(name)
        if f is not None:
            text = part(f)
            if text:
                out.append(text)
    return out


def request(op: str, body: list[Field]) -> str:
    words = [op, *parts(body, REQUEST_PARTS)]
    by_name = {f.name: f for f in body}
    if op == "setACL" and "acl" in by_name:
        words.append(_count("ACL", "ACLs")(by_name["acl"]) or "")
    watches = sum(len(by_name[w].children or ()) for w in WATCH_LISTS if w in by_name)
    if any(w in by_name for w in WATCH_LISTS):
        words.append(f"{watches} watches")
    return " ".join(w for w in words if w)


def reply(op: str, body: list[Field]) -> str:
    if len(body) == 1 and body[0].name == "result_err":
        return f"{op} → {body[0].display or body[0].value}"
    got = parts(body, REPLY_PARTS)
    return f"{op} → {' '.join(got) if got else 'ok'}"


def ops_list(ops: list[tuple[str, str | None]]) -> str:
    """'create /a, setData /a, delete /b +2 more' for a multi's sub-operations."""
    shown = [f"{name} {short(path)}" if path else name for name, path in ops[:MAX_PATHS]]
    more = f" +{len(ops) - MAX_PATHS} more" if len(ops) > MAX_PATHS else ""
    return ", ".join(shown) + more
