from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from support import SHARED

from kdissect.rocketmq.codes import LANGUAGES, REQUEST_CODES, RESPONSE_CODES, SEND_V2_FIELDS

REPO = Path(__file__).resolve().parents[3]
SPEC = SHARED / "rocketmq-spec"


def test_known_values() -> None:
    assert REQUEST_CODES[310] == "SEND_MESSAGE_V2" and REQUEST_CODES[200050] == "POP_MESSAGE"
    assert RESPONSE_CODES[19] == "PULL_NOT_FOUND" and RESPONSE_CODES[-1006] == "RPC_TIME_OUT"
    assert LANGUAGES[1] == "CPP" and LANGUAGES[13] == "NODE_JS"
    assert SEND_V2_FIELDS["l"] == "maxReconsumeTimes" and len(SEND_V2_FIELDS) == 14


def test_generated_module_is_up_to_date() -> None:
    if not SPEC.is_dir():
        pytest.skip("rocketmq-spec not present")
    spec = importlib.util.spec_from_file_location("gen_rocketmq_tables", REPO / "tools" / "gen_rocketmq_tables.py")
    assert spec is not None and spec.loader is not None
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    current = (REPO / "kdissect" / "rocketmq" / "codes.py").read_text(encoding="utf-8")
    assert gen.generate(SPEC) == current
