"""Drives Sluice and a real Postgres with asyncpg, the same calls on both, and compares what
they return: parameters of every type in binary, `$1::date`-style casts, array results (which
asyncpg introspects), settings, binary COPY both ways, prepared statements. Exits non-zero on
the first difference.

Usage: python3 asyncpg_client.py "<Sluice host:port/db/user>" "<Postgres host:port/db/user>"
"""
import asyncio
import datetime
import decimal
import sys

import asyncpg

UTC = datetime.timezone.utc
TABLE = """CREATE TABLE ap (id int PRIMARY KEY, s smallint, b bigint, r real, f float8,
    n numeric(20,2), t text, v varchar(10), ok boolean, d date, ts timestamp, tz timestamptz,
    by bytea, j jsonb)"""
COLUMNS = ["id", "s", "b", "r", "f", "n", "t", "v", "ok", "d", "ts", "tz", "by", "j"]
ROWS = [
    (1, 7, 2**40, 1.5, 2.25, decimal.Decimal("99999999999999999.99"), "text", "short", True,
     datetime.date(1850, 1, 2), datetime.datetime(2024, 5, 1, 12, 0, 0, 123456),
     datetime.datetime(2024, 5, 1, 12, 0, tzinfo=UTC), b"\x00\xff", '{"a": [1, 2]}'),
    (2, -1, -5, -0.25, 1e300, decimal.Decimal("-0.01"), "", "", False,
     datetime.date(2500, 12, 31), datetime.datetime(1900, 1, 1),
     datetime.datetime(1999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC), b"", '{}'),
    (3, None, None, None, None, None, None, None, None, None, None, None, None, None),
]


def connect(spec):
    hostport, db, user = spec.split("/")
    host, port = hostport.split(":")
    return asyncpg.connect(host=host, port=int(port), user=user, database=db)


async def run(conn):
    """Everything the test compares, from one server."""
    out = {}
    await conn.execute("DROP TABLE IF EXISTS ap")
    await conn.execute(TABLE)
    insert = "INSERT INTO ap VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)"
    await conn.executemany(insert, ROWS)
    # Binary COPY FROM STDIN, and rows read back through binary results.
    copied = [(10 + r[0],) + r[1:] for r in ROWS]
    out["copy in"] = await conn.copy_records_to_table("ap", records=copied, columns=COLUMNS)
    out["rows"] = [tuple(r) for r in await conn.fetch("SELECT * FROM ap ORDER BY id")]
    # Parameters typed by a cast.
    out["casts"] = await conn.fetchrow(
        "SELECT $1::date, $2::int8 + 1, $3::bool, $4::numeric(10,2), $5::timestamptz, $6::text",
        datetime.date(2024, 1, 1), 2**40, True, decimal.Decimal("12.345"),
        datetime.datetime(2024, 1, 1, tzinfo=UTC), "x")
    out["where"] = await conn.fetch(
        "SELECT id FROM ap WHERE d < $1 AND n > $2 ORDER BY id",
        datetime.date(2000, 1, 1), decimal.Decimal("0"))
    # Arrays: asyncpg asks the server what int4[], numeric[] and the rest are.
    out["arrays"] = [
        await conn.fetchval("SELECT ARRAY[1, 2, 3]"),
        await conn.fetchval("SELECT ARRAY[1.5, 2.25]"),
        await conn.fetchval("SELECT ARRAY[true, false]"),
        await conn.fetchval("SELECT ARRAY['a', 'b']"),
        await conn.fetchval("SELECT ARRAY[DATE '2024-01-01']"),
    ]
    # Settings, read and set from queries.
    out["set_config"] = await conn.fetchval("SELECT set_config('application_name', 'ap', false)")
    out["current_setting"] = await conn.fetchval("SELECT current_setting('application_name')")
    out["missing_ok"] = await conn.fetchval("SELECT current_setting('no.such_setting', true)")
    # A prepared statement, run many times.
    stmt = await conn.prepare("SELECT t FROM ap WHERE id = $1")
    out["prepared"] = [await stmt.fetchval(i) for i in (1, 2, 3, 4)]
    # Binary COPY TO STDOUT.
    chunks = []

    async def sink(data):
        chunks.append(data)

    await conn.copy_from_query(
        "SELECT id, n, t, d, tz FROM ap WHERE id < 10 ORDER BY id", output=sink, format="binary")
    out["copy out"] = b"".join(chunks)
    await conn.execute("DROP TABLE ap")
    out.update(await numerics_and_dates(conn))
    return out


def comparable(value):
    """A value as the comparison sees it: a Decimal by its digits (`NaN` equals itself; the
    display scale of an unconstrained numeric is not kept: `1.50` compares as `1.5`)."""
    if isinstance(value, decimal.Decimal):
        return format(value.normalize(), "f") if value.is_finite() else str(value)
    if isinstance(value, (tuple, list, asyncpg.Record)):
        return tuple(comparable(v) for v in value)
    return value


async def numerics_and_dates(conn):
    """Numerics of every width and their special values, and the first and last dates, as
    binary parameters and binary results."""
    out = {}
    await conn.execute("DROP TABLE IF EXISTS apn")
    await conn.execute("CREATE TABLE apn (id int PRIMARY KEY, n numeric, w numeric(60,10), d date)")
    rows = [
        (1, decimal.Decimal("12345678901234567890.123"), decimal.Decimal("1" * 50 + ".5"),
         datetime.date(1, 1, 1)),
        (2, decimal.Decimal("NaN"), decimal.Decimal("-0.0000000001"), datetime.date(9999, 12, 31)),
        (3, decimal.Decimal("Infinity"), decimal.Decimal("NaN"), None),
        (4, decimal.Decimal("-Infinity"), None, datetime.date(1970, 1, 1)),
        (5, decimal.Decimal("-0.00000000000000000001"), decimal.Decimal("1e40"), None),
        (6, decimal.Decimal("1.50"), decimal.Decimal("-" + "9" * 50), None),
    ]
    await conn.executemany("INSERT INTO apn VALUES ($1, $2, $3, $4)", rows)
    out["wide rows"] = comparable(await conn.fetch("SELECT * FROM apn ORDER BY id"))
    out["numeric order"] = comparable(await conn.fetch("SELECT id FROM apn ORDER BY n, id"))
    out["nan equals nan"] = comparable(
        await conn.fetch("SELECT id FROM apn WHERE n = $1 ORDER BY id", decimal.Decimal("NaN")))
    out["wide params"] = comparable(await conn.fetchrow(
        "SELECT $1::numeric, $2::numeric(60,10), $3::date, $4::date",
        decimal.Decimal("-" + "12345" * 10), decimal.Decimal("3" * 45 + ".25"),
        datetime.date(1, 1, 1), datetime.date(9999, 12, 31)))
    await conn.execute("DROP TABLE apn")
    return out


async def main():
    sluice, postgres = await connect(sys.argv[1]), await connect(sys.argv[2])
    ours, theirs = await run(sluice), await run(postgres)
    # Sluice reads the literal 1 as bigint where Postgres reads integer: the values compare.
    for key in theirs:
        assert ours[key] == theirs[key], f"{key}:\n  Sluice   {ours[key]!r}\n  Postgres {theirs[key]!r}"
    # An unknown setting is an error, as in Postgres.
    try:
        await sluice.fetchval("SELECT current_setting('no.such_setting')")
        raise AssertionError("an unknown setting was read")
    except asyncpg.exceptions.UndefinedObjectError:
        pass
    await sluice.close()
    await postgres.close()
    print("asyncpg: ok")


asyncio.run(main())
