"""Drives Sluice with psycopg 3 (extended protocol with parameters, server-side prepared
statements, transactions as psycopg issues them). Exits non-zero on the first mismatch.

Usage: python3 psycopg_client.py "<libpq connection string>"
"""
import sys
from decimal import Decimal

import psycopg

with psycopg.connect(sys.argv[1]) as conn:
    cur = conn.cursor()
    cur.execute("CREATE TABLE py_items (id int PRIMARY KEY, name text, amount numeric(10,2))")
    cur.execute("INSERT INTO py_items VALUES (%s, %s, %s)", (1, "a", Decimal("1.50")))
    # executemany prepares the statement server-side after a few uses.
    cur.executemany(
        "INSERT INTO py_items VALUES (%s, %s, %s)",
        [(i, f"n{i}", Decimal(i) / 4) for i in range(2, 12)],
    )
    conn.commit()
    cur.execute("SELECT id, name, amount FROM py_items WHERE id >= %s ORDER BY id LIMIT 2", (10,))
    rows = cur.fetchall()
    assert rows == [(10, "n10", Decimal("2.50")), (11, "n11", Decimal("2.75"))], rows
    cur.execute("SELECT count(*) FROM py_items")
    assert cur.fetchone() == (11,)
    try:
        cur.execute("INSERT INTO py_items VALUES (%s, %s, %s)", (1, "dup", 0))
        raise AssertionError("duplicate key accepted")
    except psycopg.errors.UniqueViolation as e:
        assert e.sqlstate == "23505", e.sqlstate
    conn.rollback()
    cur.execute("UPDATE py_items SET name = %s WHERE id = %s", (None, 3))
    assert cur.rowcount == 1, cur.rowcount
    cur.execute("DELETE FROM py_items WHERE amount < %s", (Decimal("1"),))
    assert cur.rowcount == 2, cur.rowcount  # ids 2 and 3: 0.50 and 0.75
    conn.commit()
    cur.execute("SELECT name FROM py_items WHERE id = 3")
    assert cur.fetchone() is None  # id 3 was deleted
    cur.execute("SELECT count(*), sum(amount) FROM py_items")
    assert cur.fetchone() == (9, Decimal("16.50")), "count/sum after delete"
    # A named (server-side) cursor: DECLARE, then FETCH FORWARD in pieces, then CLOSE.
    with conn.cursor(name="py_named") as named:
        named.itersize = 4
        named.execute("SELECT id, name FROM py_items WHERE id > %s ORDER BY id", (0,))
        first = named.fetchone()
        assert first == (1, "a"), first
        assert named.fetchmany(3) == [(4, "n4"), (5, "n5"), (6, "n6")]
        rest = named.fetchall()
        assert [r[0] for r in rest] == [7, 8, 9, 10, 11], rest
    conn.commit()
    # jsonb parameters (psycopg sends them in binary), stored and queried with the operators.
    from psycopg.types.json import Jsonb
    cur.execute("CREATE TABLE py_docs (id int PRIMARY KEY, d jsonb)")
    cur.execute("INSERT INTO py_docs VALUES (%s, %s)", (1, Jsonb({"kind": "b", "n": [1, 2]})))
    cur.execute("INSERT INTO py_docs VALUES (%s, %s)", (2, Jsonb({"kind": "a"})))
    cur.execute("SELECT id, d->>'kind', d->'n' FROM py_docs WHERE d @> %s", (Jsonb({"kind": "b"}),))
    assert cur.fetchall() == [(1, "b", [1, 2])], "jsonb query: -> gives jsonb, ->> text"
    # A jsonb column is described as jsonb: psycopg hands back the parsed value.
    cur.execute("SELECT d FROM py_docs WHERE id = %s", (1,))
    assert cur.fetchone()[0] == {"n": [1, 2], "kind": "b"}
    cur.execute("SELECT d FROM py_docs WHERE id = %s", (1,), binary=True)
    assert cur.fetchone()[0] == {"n": [1, 2], "kind": "b"}, "binary jsonb"
    cur.execute("DROP TABLE py_docs")
    conn.commit()
    cur.execute("DROP TABLE py_items")
    conn.commit()
    # timestamptz, timestamp and date parameters, in text (psycopg's default) and binary.
    from datetime import date, datetime, timedelta, timezone
    cur.execute("CREATE TABLE py_times (id int PRIMARY KEY, tz timestamptz, ts timestamp, d date)")
    at = datetime(2024, 5, 19, 10, 34, 56, 123456, tzinfo=timezone(timedelta(hours=2)))
    naive = datetime(1850, 1, 2, 3, 4, 5, 6)
    cur.execute("INSERT INTO py_times VALUES (%s, %s, %s, %s)", (1, at, naive, date(2500, 12, 31)))
    cur.execute("INSERT INTO py_times VALUES (%s, %s, %s, %s)", (2, at, naive, date(1, 1, 1)),
                binary=True)
    conn.commit()
    for binary in (False, True):
        cur.execute("SELECT id, tz, ts, d FROM py_times WHERE tz = %s ORDER BY id", (at,),
                    binary=binary)
        rows = cur.fetchall()
        assert [r[0] for r in rows] == [1, 2], rows
        for row in rows:
            assert row[1] == at and row[1].utcoffset() == timedelta(0), row  # the same instant, in UTC
            assert row[2] == naive, row
        assert rows[0][3] == date(2500, 12, 31) and rows[1][3] == date(1, 1, 1), rows
    cur.execute("DROP TABLE py_times")
    conn.commit()
print("psycopg: ok")
