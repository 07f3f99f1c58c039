"""A catch-up looks its trace index up by key: the rows of some keys, read from parts sorted by key without
reading the parts whole (store/keyed.py)."""

from __future__ import annotations

import random

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from rollscope.store.keyed import Keyed


def write(path, keys: list[str], *, sort: bool, rows_per_group: int = 2048) -> None:
    """A part as a derivation writes one (DuckDB's row groups hold at least 2,048 rows)."""
    con = duckdb.connect()
    con.register("written", pa.table({"key": keys, "n": list(range(len(keys)))}))
    order = "ORDER BY key" if sort else ""
    con.execute(f"COPY (SELECT * FROM written {order}) TO '{path}' (ROW_GROUP_SIZE {rows_per_group})")


def pairs(tables: list[pa.Table], wanted) -> list[tuple]:
    """The (key, n) rows of ``tables`` whose key is wanted, sorted."""
    if not tables:
        return []
    whole = pa.concat_tables(tables)
    found = whole.filter(pc.is_in(whole["key"], value_set=pa.array(sorted(set(wanted)))))
    return sorted(zip(found["key"].to_pylist(), found["n"].to_pylist(), strict=True))


def expected(paths, wanted) -> list[tuple]:
    """Every row of the parts holding a wanted key, read whole."""
    return pairs([pq.read_table(p) for p in paths], wanted)


def looked_up(index: Keyed, wanted) -> list[tuple]:
    """The rows ``Keyed.read`` gives, filtered to the wanted keys as a catch-up filters them."""
    return pairs(index.read(wanted), wanted)


def test_the_rows_of_some_keys_are_every_row_holding_them_sorted_or_not(tmp_path):
    rng = random.Random(3)
    keys = [f"r{rng.getrandbits(40):x}" for _ in range(12_000)]
    keys += rng.sample(keys, 900)  # a key in several rows, of one part and of both
    sorted_part, unsorted_part = tmp_path / "sorted.parquet", tmp_path / "unsorted.parquet"
    write(sorted_part, keys[:9000], sort=True)
    write(unsorted_part, keys[9000:], sort=False)
    index = Keyed([sorted_part, unsorted_part], "key")
    for wanted in (rng.sample(keys, 1), rng.sample(keys, 40) + ["absent", "zzz", ""], rng.sample(keys, 900)):
        assert looked_up(index, wanted) == expected([sorted_part, unsorted_part], set(wanted))
    assert index.read([]) == [] and index.read([None]) == []
    assert index.read(["absent", "zzz"]) == []  # outside every group's range: nothing read


def test_a_lookup_in_a_sorted_part_reads_the_groups_of_its_keys_not_the_part(tmp_path):
    """What keeps a catch-up's cost off the run's length: 3 keys in a part of 40 row groups read at most two
    groups each (a key may straddle a group boundary), however long the part."""
    rng = random.Random(4)
    keys = [f"{rng.getrandbits(64):016x}" for _ in range(81_920)]
    part = tmp_path / "index.parquet"
    write(part, keys, sort=True)
    index = Keyed([part], "key")
    wanted = sorted(rng.sample(keys, 3))

    assert pq.read_metadata(part).num_row_groups == 40
    assert 1 <= len(index.groups(part, wanted)) <= 6
    assert looked_up(index, wanted) == expected([part], set(wanted))
