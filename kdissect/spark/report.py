"""`kdissect spark --report`: Spark SQL summaries over the `messages`, `transactions` and
`records` views. The queries are data (docs/spark.md shows the same text); `run` returns plain
rows and the command renders them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Query:
    title: str
    sql: str


PER_API = Query("Per protocol and API", """
WITH m AS (
  SELECT protocol, op, count(*) AS messages, count_if(kind = 'request') AS requests,
         sum(size(diagnostics)) AS diagnostics
  FROM messages GROUP BY protocol, op
), t AS (
  SELECT protocol, op, count(*) AS transactions,
         avg(IF(error IS NOT NULL, 1.0, 0.0)) AS error_rate,
         percentile_approx(rtt_ms, 0.5) AS p50,
         percentile_approx(rtt_ms, 0.99) AS p99
  FROM transactions WHERE status = 'answered' GROUP BY protocol, op
)
SELECT m.protocol, m.op, m.messages, m.requests, coalesce(t.transactions, 0) AS transactions,
       round(100 * t.error_rate, 2) AS error_pct, round(t.p50, 3) AS p50_ms,
       round(t.p99, 3) AS p99_ms, m.diagnostics
FROM m LEFT JOIN t ON m.protocol = t.protocol AND m.op <=> t.op
ORDER BY m.messages DESC, m.protocol, m.op
LIMIT 40
""")

TOP_TOPICS = Query("Top topics by bytes", """
SELECT protocol, topic, count(*) AS records,
       sum(value_size) AS value_bytes,
       sum(IF(kind = 'request', value_size, 0)) AS produced_bytes,
       sum(IF(kind <> 'request', value_size, 0)) AS consumed_bytes,
       count(DISTINCT partition) AS partitions
FROM records
GROUP BY protocol, topic
ORDER BY value_bytes DESC NULLS LAST, records DESC
LIMIT 20
""")

TOP_CLIENTS = Query("Top clients", """
SELECT protocol, regexp_extract(client, '^(.*):[0-9]+$', 1) AS client_host,
       count(*) AS requests, count(DISTINCT client) AS connections,
       round(100 * avg(IF(error IS NOT NULL, 1.0, 0.0)), 2) AS error_pct,
       round(percentile_approx(rtt_ms, 0.99), 3) AS p99_ms,
       sum(request_length + coalesce(response_length, 0)) AS bytes
FROM transactions WHERE status <> 'no-request'
GROUP BY 1, 2
ORDER BY requests DESC
LIMIT 20
""")

QUERIES = (PER_API, TOP_TOPICS, TOP_CLIENTS)


@dataclass(frozen=True, slots=True)
class Table:
    title: str
    columns: list[str]
    rows: list[tuple[Any, ...]]


def run(spark: Any, queries: tuple[Query, ...] = QUERIES) -> list[Table]:
    """Run the queries against the session's `messages`, `transactions`, `records` views."""
    out: list[Table] = []
    for q in queries:
        df = spark.sql(q.sql)
        out.append(Table(q.title, list(df.columns), [tuple(r) for r in df.collect()]))
    return out
