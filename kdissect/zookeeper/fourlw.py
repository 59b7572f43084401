"""Four-letter admin words on the client port: the client sends four ASCII bytes with no length
prefix (stmk adds an 8-byte trace mask), the server answers plain text and closes."""

from __future__ import annotations

from kdissect.model import HEX, Field, Message

# word -> what it asks for
WORDS: dict[str, str] = {
    "conf": "server configuration",
    "cons": "connections and sessions",
    "crst": "reset connection statistics",
    "dirs": "snapshot and log sizes",
    "dump": "sessions and ephemeral nodes",
    "envi": "server environment",
    "gtmk": "get the trace mask",
    "ruok": "liveness check",
    "stmk": "set the trace mask",
    "srvr": "server details",
    "srst": "reset server statistics",
    "stat": "server and client statistics",
    "wchc": "watches by session",
    "wchp": "watches by path",
    "wchs": "watch summary",
    "mntr": "monitoring variables",
    "isro": "read-only mode check",
    "hash": "digest history",
}
TELNET_CLOSE = b"\xff\xf4\xff\xfd"  # telnet IAC interrupt, also understood by the server
WORD_BYTES = frozenset(w.encode() for w in WORDS) | {TELNET_CLOSE}
PENDING_KEY = "4lw"
MAX_SUMMARY = 60


def is_word(head: bytes) -> bool:
    return bytes(head[:4]) in WORD_BYTES


def word_of(head: bytes) -> str:
    return "telnet-close" if bytes(head[:4]) == TELNET_CLOSE else bytes(head[:4]).decode("ascii")


def looks_like_text(data: bytes) -> bool:
    """Printable ASCII or UTF-8 text (tabs and newlines allowed), at least in the first bytes."""
    head = data[:64]
    if not head:
        return False
    return all(b in (9, 10, 13) or 32 <= b < 127 or b >= 0x80 for b in head)


def dissect_request(msg: Message, data: bytes) -> None:
    word = word_of(data)
    fields = [Field("four_letter_word", word, 0, 4, display=WORDS.get(word))]
    rest = 4
    if word == "stmk" and len(data) >= 12:
        fields.append(Field("trace_mask", int.from_bytes(data[4:12], "big"), 4, 8, hint=HEX))
        rest = 12
    if len(data) > rest:
        fields.append(Field("trailing", data[rest:], rest, len(data) - rest, hint="bytes"))
    msg.fields = fields
    msg.kind = "request"
    msg.summary = f"{word} mask=0x{fields[1].value:x}" if rest == 12 else word
    msg.info.update({"op": word, "corr": PENDING_KEY, "error": None, "error_code": None})


def reply_summary(word: str, text: str) -> str:
    lines = [ln for ln in text.splitlines() if ln.strip()]
    first = lines[0].strip() if lines else "(empty)"
    if len(first) > MAX_SUMMARY:
        first = first[: MAX_SUMMARY - 1] + "…"
    more = f" ({len(lines)} lines)" if len(lines) > 1 else ""
    return f"{word} → {first}{more}"


def dissect_reply(msg: Message, data: bytes, req: Message | None) -> None:
    text = data.decode("utf-8", "replace")
    word = str(req.info.get("op")) if req is not None else "4lw"
    msg.fields = [
        Field("text", text, 0, len(data)),
        Field("lines", text.count("\n") + (0 if text.endswith("\n") or not text else 1)),
    ]
    msg.kind = "response"
    msg.summary = reply_summary(word, text)
    msg.info.update({"op": word, "corr": PENDING_KEY, "error": None, "error_code": None})
    if req is not None:
        msg.peer = req
