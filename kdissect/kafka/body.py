"""Kafka message bodies: pick the plan for (api key, version, direction), run it, collect facts.

Version policy:
- versions the tables know (including those below Kafka 4's raised floors, which the field
  ranges still describe) decode directly; below the floor a NOTE says the version was removed;
- versions above the newest known decode with the newest one, with an ASSUMPTION diagnostic,
  or stay raw (UNDECODED) when that fails;
- unknown API keys stay raw with an UNDECODED diagnostic.
"""

from __future__ import annotations

from typing import Any

from kdissect import accel
from kdissect.dissect.base import Budget, Options
from kdissect.errors import DecodeError
from kdissect.kafka import hooks
from kdissect.kafka.apis import APIS
from kdissect.kafka.conversation import KafkaConversation
from kdissect.kafka.diagnostics import DIAGNOSTICS
from kdissect.kafka.error_codes import UNSUPPORTED_VERSION, error_name
from kdissect.kafka.headers import API_VERSIONS
from kdissect.kafka.ops import ArrayCap, Ctx
from kdissect.kafka.plan import plan_for
from kdissect.kafka.summary import summarise
from kdissect.kafka.topicids import note
from kdissect.model import ENUM, RAW, Diagnostic, Field, undecoded
from kdissect.text import plural
from kdissect.wire.reader import WireReader


class Body:
    """A decoded body: its fields, a summary fragment and facts for msg.info. (A plain class: a
    dataclass's generated __init__ would run as Python code, not compiled, once a message.)"""

    __slots__ = ("fields", "summary", "info", "diagnostics")

    def __init__(self) -> None:
        self.fields: list[Field] = []
        self.summary = ""
        self.info: dict[str, Any] = {}
        self.diagnostics: list[Diagnostic] = []


V0_BODY = DIAGNOSTICS.key("api_versions_v0_body")
PRODUCE = 0
PRODUCE_LOWEST, PRODUCE_NEWEST = APIS[PRODUCE].lowest, APIS[PRODUCE].newest


def _raw(r: WireReader, name: str = "body") -> Field:
    start = r.pos
    data = r.rest()
    return Field(name, data, start, len(data), None, RAW)


def body_version(api_key: int, version: int, is_request: bool, r: WireReader) -> tuple[int, list[Diagnostic]]:
    """The version to decode with, and what to say about it."""
    api = APIS[api_key]
    name, lo, hi = api.name, api.lowest, api.newest
    if (api_key == API_VERSIONS and not is_request and r.remaining >= 2
            and int.from_bytes(r.buf[r.pos:r.pos + 2], "big", signed=True) == UNSUPPORTED_VERSION):
        # API_VERSIONS_ERROR_V0_BODY: a broker answers an ApiVersions request of a version it
        # does not support with a v0 body, whatever version was asked (KIP-511).
        return 0, [] if version == 0 else [DIAGNOSTICS(
            "api_versions_v0_body",
            f"UNSUPPORTED_VERSION: the broker answers ApiVersions v{version} with a v0 body", r.pos)]
    if version > hi:
        return hi, [DIAGNOSTICS("newer_version",
                                f"{name} v{version} is newer than the newest known (v{hi}): "
                                f"decoded as v{hi}", r.pos)]
    if version < lo:
        return version, [DIAGNOSTICS("removed_version",
                                     f"{name} v{version} was removed in Kafka 4.0 (lowest now v{lo})", r.pos)]
    return version, []


def decode_body(api_key: int, version: int, is_request: bool, r: WireReader, opts: Options,
                state: KafkaConversation | None = None, budget: Budget | None = None) -> Body:
    """Decode the body that follows the header; never raises. `state`: the conversation's (None
    outside one); `budget`: the message's allowance of elements and decompressed bytes (a new
    one when None)."""
    if api_key == PRODUCE and PRODUCE_LOWEST <= version <= PRODUCE_NEWEST:
        return decode_produce(version, is_request, r, opts, state, budget)  # (body_version says nothing)
    out = Body()
    if api_key not in APIS or version < 0:
        out.diagnostics.append(DIAGNOSTICS("unknown_api",
                                           f"unknown API key {api_key} (version {version}): body not decoded", r.pos))
        if r.remaining:
            out.fields.append(_raw(r))
        return out
    use, diags = body_version(api_key, version, is_request, r)
    if diags:
        out.diagnostics += diags
    return _planned(out, api_key, version, use, diags, is_request, r, opts, state, budget)


def decode_produce(version: int, is_request: bool, r: WireReader, opts: Options,
                   state: KafkaConversation | None = None, budget: Budget | None = None) -> Body:
    """decode_body of a Produce body of a version the tables know (the busiest API, one body a
    message when every record is sent on its own): decoded by its plan. Its compiled twin
    (kafka/_produce.pyx) reads the usual requests itself and hands the others to this function."""
    return _planned(Body(), PRODUCE, version, version, [], is_request, r, opts, state, budget)


def _planned(out: Body, api_key: int, version: int, use: int, diags: list[Diagnostic], is_request: bool,
             r: WireReader, opts: Options, state: KafkaConversation | None, budget: Budget | None) -> Body:
    """decode_body once the version to decode with (`use`) is chosen: the body's plan run."""
    start = r.pos
    ctx = Ctx(opts, state, use, budget)
    try:
        tree = plan_for(api_key, use, is_request)(r, ctx)
    except ArrayCap as e:
        return _capped(out, api_key, is_request, r, ctx, e)
    except DecodeError as e:
        r.pos = start
        if api_key == API_VERSIONS and not is_request and use != version:
            return _api_versions_error(out, r, version, opts, state)
        assumed = use != version and bool(diags)
        if assumed or e.partial is None:
            return _failed(out, r, e, assumed, api_key in hooks.CREDENTIAL_APIS and not opts.show_secrets)
        return _cut_short(out, api_key, is_request, r, ctx, e)
    if r.remaining and api_key == API_VERSIONS and not is_request and use != version:
        r.pos = start
        return _api_versions_error(out, r, version, opts, state)
    _finish(out, api_key, is_request, r, ctx, tree)
    return out


def _finish(out: Body, api_key: int, is_request: bool, r: WireReader, ctx: Ctx, tree: Field) -> None:
    out.fields = tree.children or []
    if ctx.diags:
        out.diagnostics += ctx.diags
    if r.remaining:
        # TRAILING_BYTES: Kafka's parsers ignore bytes after a complete body; keep them raw.
        out.diagnostics.append(DIAGNOSTICS("trailing_bytes", f"{plural(r.remaining, 'byte')} after the body", r.pos))
        out.fields.append(_raw(r, "trailing"))
    _facts(out, api_key, is_request, ctx)


def _api_versions_error(out: Body, r: WireReader, version: int, opts: Options,
                        state: KafkaConversation | None) -> Body:
    """An UNSUPPORTED_VERSION ApiVersions body that is not v0: try the version asked for, else
    decode the error code (all a client reads before retrying with v0) and keep the rest raw."""
    start = r.pos
    ctx = Ctx(opts, state)
    out.diagnostics = [d for d in out.diagnostics if d.key != V0_BODY]
    try:
        tree = plan_for(API_VERSIONS, min(version, APIS[API_VERSIONS].newest), False)(r, ctx)
    except DecodeError:
        tree = None
    if tree is not None and not r.remaining:
        _finish(out, API_VERSIONS, False, r, ctx, tree)
        return out
    r.pos = start
    ctx = Ctx(opts, state)
    code = r.int16()
    rest = r.pos
    out.fields = [Field("error_code", code, start, 2, None, ENUM, error_name(code)), _raw(r, "api_keys_raw")]
    out.diagnostics.append(DIAGNOSTICS("api_versions_error_body",
                                       f"the UNSUPPORTED_VERSION body follows neither the v0 nor the v{version} "
                                       "layout: only its error code is decoded", rest))
    ctx.errors.append(code)
    _facts(out, API_VERSIONS, False, ctx)
    return out


def _failed(out: Body, r: WireReader, e: DecodeError, assumed: bool, secret: bool) -> Body:
    if assumed:
        out.diagnostics.append(DIAGNOSTICS("newer_version_undecoded",
                                           f"the newer version does not decode as the newest known one: {e}",
                                           e.offset))
    else:
        out.diagnostics.append(DIAGNOSTICS.malformed(e))
    out.fields.append(undecoded("body", r.rest(), r.pos, secret))
    out.summary = "(malformed)" if not assumed else "(undecoded)"
    return out


def _cut_short(out: Body, api_key: int, is_request: bool, r: WireReader, ctx: Ctx, e: DecodeError) -> Body:
    """A body that breaks after some of its fields (cut short, most often): the tree, facts and
    summary decoded up to the break stay, then the MALFORMED diagnostic and the rest raw."""
    out.fields = e.partial.children or []
    out.diagnostics += ctx.diags
    _facts(out, api_key, is_request, ctx)
    out.summary = f"{out.summary} (malformed)".lstrip()
    out.diagnostics.append(DIAGNOSTICS.malformed(e))
    if r.pos <= e.offset < r.end:
        r.pos = e.offset
        secret = api_key in hooks.CREDENTIAL_APIS and not ctx.opts.show_secrets
        out.fields.append(undecoded("undecoded", r.rest(), e.offset, secret))
    return out


def _capped(out: Body, api_key: int, is_request: bool, r: WireReader, ctx: Ctx, e: ArrayCap) -> Body:
    """A body with more array elements than a message may decode: the tree, facts and summary
    up to the limit stay; the rest is not decoded (the kafka.array_cap diagnostic says so)."""
    out.fields = (e.partial.children or []) if e.partial is not None else []
    out.diagnostics += ctx.diags
    _facts(out, api_key, is_request, ctx)
    r.pos = r.end
    return out


def _facts(out: Body, api_key: int, is_request: bool, ctx: Ctx) -> None:
    info = out.info
    note(api_key, is_request, out.fields, ctx)
    topics = ctx.topics
    if topics:
        # Each name once, in order of first mention (most bodies name one topic: no dict then).
        names = [topics[0]] if len(topics) == 1 else list(dict.fromkeys(topics))
        info["topics"] = names
        info["topic"] = names[0]
    if ctx.groups:
        info["group"] = ctx.groups[0]
    summary = summarise(api_key, is_request, out.fields, ctx)
    if not is_request:
        code = ctx.errors[0] if ctx.errors else 0
        info["error_code"] = code
        info["error"] = error_name(code) if code else None
        if code:
            summary = f"{summary} {error_name(code)}".strip()
    out.summary = summary


accel.bind(globals(), "kdissect.kafka._produce", ("decode_produce",))
