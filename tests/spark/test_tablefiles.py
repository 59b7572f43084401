"""The tables the tasks write themselves (no Spark): read back as Spark reads a partitioned
table, they hold exactly the rows of the single-process decoding, and a task run again writes
its files over its first attempt's."""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

import pytest
from support import CAPTURES

pa = pytest.importorskip("pyarrow")

import pyarrow.dataset as ds  # noqa: E402

from kdissect.pipeline import dissect_file  # noqa: E402
from kdissect.protocols import DissectorRegistry  # noqa: E402
from kdissect.spark import rows  # noqa: E402
from kdissect.spark.schema import LAYERS as TABLES  # noqa: E402
from kdissect.spark.schema import PARTITION_COLUMNS, combined_columns, layer_columns  # noqa: E402
from kdissect.spark.sqltypes import arrow_schema  # noqa: E402
from kdissect.spark.tablefiles import TableFiles  # noqa: E402
from kdissect.spark.values import utc_date  # noqa: E402
from kdissect.spark.worker import batches  # noqa: E402

INPUTS = [CAPTURES / "kafka" / "mock_ck_transactions.pcap", CAPTURES / "kafka" / "expert_healthy.pcap",
          *sorted((CAPTURES / "pulsar").glob("*.pcap")), *sorted((CAPTURES / "zookeeper").glob("*.pcap"))[:2]]


def _messages() -> list[Any]:
    out = []
    for path in INPUTS:
        for m in dissect_file(str(path), DissectorRegistry()):
            m.capture = str(path)
            out.append(m)
    return out


def expected(msgs: list[Any]) -> dict[str, list[dict[str, Any]]]:
    want: dict[str, list[dict[str, Any]]] = {"messages": [], "transactions": [], "records": []}
    for m in msgs:
        want["messages"].append(rows.message_row(m))
        t = rows.transaction_row(m)
        if t is not None:
            want["transactions"].append(t)
        want["records"] += rows.record_rows(m)
    return want


def read_back(root: Path, table: str) -> list[dict[str, Any]]:
    """A table as Spark reads it: the files' columns and the partition columns of their folders."""
    schema = arrow_schema(layer_columns(table))
    part = pa.schema([schema.field(n) for n in PARTITION_COLUMNS])
    data = ds.dataset(str(root / table), format="parquet", partitioning=ds.partitioning(part, flavor="hive"),
                      exclude_invalid_files=True)
    return data.to_table().select(schema.names).to_pylist()


def _canon(row: dict[str, Any], table: str) -> str:
    """A row as text, its values as the Arrow table gives them (timestamps as datetimes, maps as
    (key, value) lists)."""
    typed = pa.Table.from_pylist([row], schema=arrow_schema(layer_columns(table))).to_pylist()[0]
    return repr(sorted(typed.items()))


def test_the_tables_hold_the_rows_of_the_single_process(tmp_path: Path) -> None:
    msgs = _messages()
    want = expected(msgs)
    files = TableFiles(str(tmp_path), "unit-00000")
    for b in batches((rows.combined_values(m) for m in msgs), combined_columns()):
        files.add(b)
    files.close()
    assert files.counts == {k: len(v) for k, v in want.items()}
    assert all(files.counts.values())
    for table in TABLES:
        assert sorted(_canon(r, table) for r in read_back(tmp_path, table)) == \
            sorted(_canon(r, table) for r in want[table]), table
    protocols = {p.name.split("=")[1] for p in (tmp_path / "messages").iterdir()}
    assert protocols == {"kafka", "pulsar", "zookeeper"}
    for folder in (tmp_path / "messages").glob("protocol=*/date=*"):
        datetime.date.fromisoformat(folder.name.split("=")[1])
        assert [f.name for f in folder.iterdir()] == ["part-unit-00000.snappy.parquet"]


def test_a_task_run_again_writes_over_its_first_attempt(tmp_path: Path) -> None:
    msgs = _messages()
    combined = list(batches((rows.combined_values(m) for m in msgs), combined_columns()))
    first = TableFiles(str(tmp_path), "groups-00001")
    first.add(combined[0])  # an attempt that failed part-way
    first.close()
    again = TableFiles(str(tmp_path), "groups-00001")
    for b in combined:
        again.add(b)
    again.close()
    assert len(read_back(tmp_path, "messages")) == len(msgs)


def test_batches_of_one_partition_each_give_the_same_tables(tmp_path: Path) -> None:
    """Batches whose rows share one protocol and date are written without masks; together they
    hold what the mixed batches hold."""
    msgs = _messages()
    want = expected(msgs)
    files = TableFiles(str(tmp_path), "unit-00000")
    by_partition: dict[tuple[str, Any], list[Any]] = {}
    for m in msgs:
        by_partition.setdefault((m.protocol, utc_date(m.ts)), []).append(m)
    assert len(by_partition) > 1
    for group in by_partition.values():
        for b in batches((rows.combined_values(m) for m in group), combined_columns()):
            assert len(b.column("protocol").unique()) == len(b.column("date").unique()) == 1
            files.add(b)
    files.close()
    for table in TABLES:
        assert sorted(_canon(r, table) for r in read_back(tmp_path, table)) == \
            sorted(_canon(r, table) for r in want[table]), table
