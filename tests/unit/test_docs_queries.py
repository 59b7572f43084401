"""docs/spark.md shows the `kdissect spark --report` queries as they are in kdissect/spark/report.py."""

from __future__ import annotations

import pytest
from support import ROOT

from kdissect.spark.report import QUERIES, Query


@pytest.mark.parametrize("query", QUERIES, ids=lambda q: q.title)
def test_the_documented_query_is_the_one_run(query: Query) -> None:
    assert query.sql.strip() in (ROOT / "docs" / "spark.md").read_text(), \
        f"docs/spark.md shows another text of the query {query.title!r}: copy it from kdissect/spark/report.py"
