from __future__ import annotations

import contextlib
import re
import tracemalloc

import pytest

from kdissect.errors import BadValue
from kdissect.rocketmq import ljson
from kdissect.rocketmq.ljson import MAX_DEPTH, looks_like_json, parse


def test_strict_json_with_offsets() -> None:
    node, trailing = parse(b'{"code":105,"remark":"a\\"b"}\n', 8)
    assert trailing == 0
    assert node.plain() == {"code": 105, "remark": 'a"b'}
    code = node.get("code")
    assert code is not None and (code.start, code.end) == (8 + 8, 8 + 11)


def test_fastjson_bare_integer_key() -> None:
    node, _ = parse(b'{"brokerAddrs":{0:"192.169.0.4:10911",1:"10.0.0.2:10911"}}')
    assert node.plain() == {"brokerAddrs": {"0": "192.169.0.4:10911", "1": "10.0.0.2:10911"}}


def test_fastjson_object_key() -> None:
    text = b'{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"t"}:17}}'
    node, _ = parse(text)
    table = node.get("offsetTable")
    assert table is not None
    ((key, _, value),) = table.value
    assert key == '{"brokerName":"b","queueId":0,"topic":"t"}'
    assert value.value == 17


def test_lenient_forms() -> None:
    node, _ = parse(b"{a:'x\\u0001y', b:[1,2.5,-3,true,null,], c:NaN,,}")
    assert node.plain() == {"a": "x\x01y", "b": [1, 2.5, -3, True, None], "c": "NaN"}


def test_surrogate_pair_and_lone_half() -> None:
    node, _ = parse(b'["\\ud83d\\ude00", "\\ud83d"]')
    assert node.plain() == ["\U0001F600", "\ufffd"]


def test_duplicate_key_last_wins() -> None:
    node, _ = parse(b'{"k":1,"k":2}')
    assert node.get("k").value == 2  # type: ignore[union-attr]


def test_trailing_bytes_are_counted() -> None:
    _, trailing = parse(b'{"a":1} xyz')
    assert trailing == 3


@pytest.mark.parametrize("bad", [b"", b"{", b'{"a"', b'{"a":}', b'["x', b"{\x01:1}", b"#"])
def test_bad_input_raises_badvalue(bad: bytes) -> None:
    with pytest.raises(BadValue):
        parse(bad)


def test_depth_is_limited() -> None:
    with pytest.raises(BadValue, match="nesting"):
        parse(b"[" * (MAX_DEPTH + 5) + b"]" * (MAX_DEPTH + 5))


def test_looks_like_json() -> None:
    assert looks_like_json(b'  {"a":1}')
    assert looks_like_json(b"[1]")
    assert not looks_like_json(b"Hello")
    assert not looks_like_json(b"   ")


def test_an_integer_longer_than_a_long_is_a_float() -> None:
    digits = "9" * 5000
    node, _ = parse(f'{{"a":{digits},"b":-{digits},"c":{"9" * 4300},"d":-{"9" * 19},"e":{"1" * 20}}}'.encode())
    plain = node.plain()
    assert plain["a"] == float("inf") and plain["b"] == float("-inf") and plain["c"] == float("inf")
    assert plain["d"] == -int("9" * 19) and plain["e"] == float("1" * 20)


def test_a_number_key_is_its_text() -> None:
    node, _ = parse(b'{0:"a",' + b"9" * 30 + b':"b",1.50:"c"}')
    assert list(node.plain()) == ["0", "9" * 30, "1.50"]


@pytest.mark.parametrize("text", [b'"' + b"\\q" * 100_000 + b'"', b"'" + b"\\'" * 100_000,
                                  b'"' + b"\\\\" * 100_000 + b'"'])
def test_a_string_of_many_escapes_takes_memory_of_its_size(text: bytes) -> None:
    # Strings were matched by a regular expression whose repeated escapes kept a backtracking
    # point each: 8 MB of "\q" took 530 MB while it was matched.
    tracemalloc.start()
    try:
        with contextlib.suppress(BadValue):
            parse(text)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 12 * len(text)


def test_whitespace_is_looked_for_only_where_there_is_some(monkeypatch: pytest.MonkeyPatch) -> None:
    # Every token looked for whitespace with a regular expression, two or three times: about a
    # quarter of the time of a header of many short ext-fields.
    calls: list[int] = []

    class Counting:
        def __init__(self, real: re.Pattern[bytes]) -> None:
            self.real = real

        def match(self, buf: bytes, pos: int = 0) -> re.Match[bytes] | None:
            calls.append(pos)
            return self.real.match(buf, pos)

    monkeypatch.setattr(ljson, "_WS", Counting(ljson._WS))
    text = b'{"code":10,"extFields":{' + b",".join(b'"k%d":"v"' % i for i in range(1000)) + b"}}"
    node, _ = parse(text)
    assert len(node.get("extFields").value) == 1000  # type: ignore[union-attr]
    assert len(calls) < 10
    node, _ = parse(b'{ "a" : [ 1 , 2 ] }')
    assert node.plain() == {"a": [1, 2]}
