"""Display filters in Wireshark's syntax over kdissect's field keys (docs/filters.md).

    pred = compile_filter('kafka.error_code != 0 and kdissect.rtt_ms > 100')
    kept = [m for m in messages if pred(m)]
"""

from __future__ import annotations

from kdissect.filter.errors import FilterError
from kdissect.filter.evaluator import Predicate, compile_field, compile_filter, compile_node
from kdissect.filter.keys import compile_key, find_path
from kdissect.filter.parser import parse
from kdissect.filter.printer import to_text

__all__ = ["FilterError", "Predicate", "compile_field", "compile_filter", "compile_key", "compile_node", "find_path",
           "parse", "to_text"]
