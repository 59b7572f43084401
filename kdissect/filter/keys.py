"""The field-key namespace shared by display filters and `export --format fields`.

- `<protocol>` (a name `kdissect protocols` lists): the message is of that protocol.
- `<protocol>.<path>`: the dotted path in the message's field tree, exactly as in the JSON export
  (`message_dict(m)["fields"]`). Arrays are transparent: `kafka.topics.name` is every topic
  name. `<path>_name` is the symbolic name of an ENUM/FLAGS field (the JSON `_name` sibling),
  `<path>_text` the text of a byte string that is printable UTF-8 (the JSON `_text` sibling);
  `<path>.value` is the value of a field that also has sub-fields.
- `<protocol>.<key>` when the message has no field at that path: `msg.info[key]` (op, error,
  topic, path, ...).
- `kdissect.<key>`: protocol-independent facts (KDISSECT below), and `kdissect.info.<key>`.
- Wireshark spellings of a few of them: ALIASES.

A key compiles once into a function Message -> list[Field] (synthetic Fields for values that
do not live in the tree); nothing here builds message_dict.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from kdissect.filter.errors import SHOWN_TEXT, FilterError
from kdissect.model import ARRAY, ENUM, FLAGS, RAW, STRUCT, TIME_MS, Field, Message
from kdissect.render.jsonout import printable
from kdissect.text import cut

Nodes = Callable[[Message], list[Field]]
PRESENT = object()  # the value of a struct or array: it exists, it has no scalar value
_DISPLAYED = (ENUM, FLAGS, TIME_MS)


def _host(addr: str) -> str:
    return addr.rpartition(":")[0].strip("[]")


def _port(addr: str) -> int | None:
    p = addr.rpartition(":")[2]
    return int(p) if p.isdigit() else None


def _rtt_ms(m: Message) -> float | None:
    if m.match is None or m.match.rtt is None:
        return None
    return round(m.match.rtt * 1000.0, 3)  # as the JSON export's match.rtt_ms


# kdissect.<key>: (getter, description). A getter returns a value, a list, or None (absent).
KDISSECT: dict[str, tuple[Callable[[Message], Any], str]] = {
    "frame": (lambda m: m.frame, "first frame of the message"),
    "frames": (lambda m: list(m.frames), "every frame that carried the message"),
    "number": (lambda m: m.number, "position of the message in the output"),
    "ts": (lambda m: m.ts, "capture time of the first frame (seconds since the epoch)"),
    "stream": (lambda m: m.stream, "TCP conversation index (as in `conversations`)"),
    "src": (lambda m: m.src, "sender address:port"),
    "dst": (lambda m: m.dst, "receiver address:port"),
    "srchost": (lambda m: _host(m.src), "sender address"),
    "dsthost": (lambda m: _host(m.dst), "receiver address"),
    "srcport": (lambda m: _port(m.src), "sender port"),
    "dstport": (lambda m: _port(m.dst), "receiver port"),
    "addr": (lambda m: [_host(m.src), _host(m.dst)], "either address"),
    "port": (lambda m: [_port(m.src), _port(m.dst)], "either port"),
    "protocol": (lambda m: m.protocol, "protocol name"),
    "kind": (lambda m: m.kind, "request, response, event, ..."),
    "to_server": (lambda m: m.to_server, "true when the client sent the message"),
    "summary": (lambda m: m.summary, "the one-line summary"),
    "length": (lambda m: len(m.data), "message size in bytes, length prefix included"),
    "rtt_ms": (_rtt_ms, "response time in ms (on both the request and its response)"),
    "match_frame": (lambda m: m.match.frame if m.match else None, "frame of the matching request/response"),
    "op": (lambda m: m.info.get("op"), "operation name (API, opcode, command, request code)"),
    "op_code": (lambda m: m.info.get("op_code"), "operation number"),
    "version": (lambda m: m.info.get("version"), "operation version, where the protocol has one"),
    "corr": (lambda m: m.info.get("corr"), "correlation key (correlation id, xid, request id, opaque)"),
    "error": (lambda m: m.info.get("error"), "error name of a failed response"),
    "error_code": (lambda m: m.info.get("error_code"), "error code of a response (0: success)"),
    "severity": (lambda m: m.worst.value if m.worst else None, "worst diagnostic severity"),
    "diag": (lambda m: [d.key for d in m.diagnostics], "diagnostic keys"),
    "diag.key": (lambda m: [d.key for d in m.diagnostics], "diagnostic keys"),
    "diag.severity": (lambda m: [d.severity.value for d in m.diagnostics], "diagnostic severities"),
    "diag.group": (lambda m: [d.group.value for d in m.diagnostics], "diagnostic groups"),
    "diag.message": (lambda m: [d.message for d in m.diagnostics], "diagnostic texts"),
    "capture": (lambda m: m.capture, "capture file name"),
}

ALIASES = {
    "frame.number": "kdissect.frame", "tcp.stream": "kdissect.stream", "tcp.port": "kdissect.port",
    "tcp.srcport": "kdissect.srcport", "tcp.dstport": "kdissect.dstport", "ip.addr": "kdissect.addr",
    "ip.src": "kdissect.srchost", "ip.dst": "kdissect.dsthost", "ipv6.addr": "kdissect.addr",
    "ipv6.src": "kdissect.srchost", "ipv6.dst": "kdissect.dsthost", "frame.len": "kdissect.length",
}


def known_protocols() -> tuple[str, ...]:
    from kdissect import protocols

    return tuple(protocols.names())


def compile_key(name: str, expr: str = "", pos: int = 0, protocols: Iterable[str] | None = None) -> Nodes:
    """The node finder for a key; FilterError when the key cannot exist."""
    name = ALIASES.get(name, name)
    proto, _, path = name.partition(".")
    if proto == "kdissect":
        return _kdissect(path, name, expr, pos)
    if proto not in (protocols if protocols is not None else known_protocols()):
        raise FilterError(f"unknown protocol or field {cut(name, SHOWN_TEXT)!r}", expr or name, pos)
    if not path:
        return lambda m: [_present(proto)] if m.protocol == proto else []
    alias = protocol_alias(proto, name)
    if alias is not None:
        return _alias(proto, alias[0], alias[1], expr, pos)
    return _tree(proto, tuple(path.split(".")))


def protocol_alias(proto: str, name: str) -> tuple[str, tuple[str, ...]] | None:
    """A protocol's alias (Wireshark's name): (kind, targets), or None."""
    from kdissect.filter import names

    voc = names.vocabularies((proto,)).get(proto)
    return voc.aliases.get(name) if voc is not None else None


def _alias(proto: str, kind: str, targets: tuple[str, ...], expr: str, pos: int) -> Nodes:
    """Every field of an alias's targets, in the order they are named; `kind` ("request",
    "response") restricts it to those messages."""
    finders: list[Nodes] = []
    paths: list[tuple[str, ...]] = []
    for t in targets:
        if t.startswith("info:"):
            finders.append(_info_finder(t[5:]))
        elif t.startswith("kdissect."):
            finders.append(_kdissect(t[9:], t, expr, pos))
        else:
            paths.append(tuple(t.split(".")))
    if paths:
        trie = _trie(paths)
        finders.append(lambda m: find_paths(m.fields, trie))

    def find(m: Message) -> list[Field]:
        if m.protocol != proto or (kind and m.kind != kind):
            return []
        if len(finders) == 1:
            return finders[0](m)
        return [f for get in finders for f in get(m)]

    return find


def _info_finder(key: str) -> Nodes:
    return lambda m: info_nodes(m.info, key)


Trie = dict[str, tuple[bool, "Trie"]]


def _trie(paths: Iterable[tuple[str, ...]]) -> Trie:
    root: Trie = {}
    for parts in paths:
        level = root
        for i, part in enumerate(parts):
            end, below_ = level.get(part, (False, {}))
            level[part] = (end or i == len(parts) - 1, below_)
            level = below_
    return root


def find_paths(fields: list[Field], trie: Trie) -> list[Field]:
    """Every field at any of several dotted paths (a trie of their parts), arrays transparent,
    in tree order: one walk, whatever the number of paths."""
    out: list[Field] = []
    for f in fields:
        hit = trie.get(f.name)
        if hit is None:
            continue
        end, sub = hit
        if end:
            out.append(f)
        if sub:
            out.extend(find_paths(below(f), sub))
    return out


def _present(name: str) -> Field:
    return Field(name, PRESENT, hint=STRUCT)


def _kdissect(path: str, name: str, expr: str, pos: int) -> Nodes:
    if path.startswith("info.") and len(path) > 5:
        key = path[5:]
        return lambda m: info_nodes(m.info, key)
    if path in ("op_code", "error_code"):
        return lambda m: info_nodes(m.info, path)
    entry = KDISSECT.get(path)
    if entry is None:
        raise FilterError(f"unknown field {cut(name, SHOWN_TEXT)!r}", expr or name, pos)
    get = entry[0]
    last = path.rpartition(".")[2]
    return lambda m: _wrap(last, get(m))


def _wrap(name: str, value: Any) -> list[Field]:
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return [Field(name, v) for v in value if v is not None]
    return [Field(name, value)]


def _tree(proto: str, parts: tuple[str, ...]) -> Nodes:
    info_key = parts[0] if len(parts) == 1 else None

    def find(m: Message) -> list[Field]:
        if m.protocol != proto:
            return []
        found = find_path(m.fields, parts)
        if not found and info_key is not None:
            return info_nodes(m.info, info_key)
        return found

    return find


def info_nodes(info: dict[str, Any], key: str) -> list[Field]:
    """An info value as fields; "<x>_code" takes info["<x>"] as its name (error_code: error,
    op_code: op), so `kafka.error_code == NOT_LEADER_OR_FOLLOWER` works from info too."""
    nodes = _wrap(key, info.get(key))
    name = info.get(key[:-5]) if key.endswith("_code") else None
    if isinstance(name, str):
        for f in nodes:
            f.hint, f.display = ENUM, name
    return nodes


def find_path(fields: list[Field], parts: tuple[str, ...]) -> list[Field]:
    """Every field at a dotted path below `fields`, arrays transparent."""
    level: list[Field] = fields
    parents: list[Field] = []
    matched: list[Field] = []
    last = len(parts) - 1
    for i, part in enumerate(parts):
        matched = [f for f in level if f.name == part]
        if not matched:
            matched = _special(level, parents, part)
            if not matched:
                return []
        if i < last:
            parents = matched
            level = [c for f in matched for c in below(f)]
    return matched


def below(f: Field) -> list[Field]:
    """The fields one level below f: a struct's members, an array's elements' members."""
    if f.hint != ARRAY:
        return f.children or []
    out: list[Field] = []
    for e in f.children or ():
        if e.hint == ARRAY:
            out.extend(below(e))
        elif e.children:
            out.extend(e.children)
    return out


def _special(level: list[Field], parents: list[Field], part: str) -> list[Field]:
    if part.endswith("_name"):
        base = part[:-5]
        return [Field(part, f.display) for f in level
                if f.name == base and f.display is not None and f.hint in (ENUM, FLAGS)]
    if part.endswith("_text"):
        return _texts(level, part)
    if part == "value":
        return [Field(part, p.value) for p in parents if p.children and p.hint not in (STRUCT, ARRAY)]
    return []


def _texts(level: list[Field], part: str) -> list[Field]:
    """`<path>_text`: the text of a byte string that is printable UTF-8 (the JSON `_text`
    sibling)."""
    base = part[:-5]
    out = []
    for f in level:
        v = f.value
        if f.name == base and isinstance(v, (bytes, bytearray, memoryview)) and f.hint != RAW and not f.children:
            text = printable(bytes(v))
            if text is not None:
                out.append(Field(part, text))
    return out


def atoms(nodes: list[Field]) -> list[tuple[Any, str | None]]:
    """(value, display) pairs to compare: array elements flattened, PRESENT for structs."""
    out: list[tuple[Any, str | None]] = []
    for f in nodes:
        hint = f.hint
        if hint == ARRAY:
            out.extend(atoms(f.children) if f.children else [(PRESENT, None)])
        elif hint == STRUCT:
            out.append((PRESENT, None))
        else:
            out.append((f.value, f.display if hint in _DISPLAYED else None))
    return out
