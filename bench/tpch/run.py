#!/usr/bin/env python3
"""Builds the TPC-H-shaped views of views.sql in Sluice, over CDC copies of a Postgres database
filled by gen.sql, one view at a time: the seconds each CREATE MATERIALIZED VIEW took, the
peak RSS of the Sluice process meanwhile, and whether the view equals the same view built by
that Postgres (create them there first: psql -f views.sql, with \\timing for its times).

Usage: bench/tpch/run.py [view ...]   (env: SLUICE_BIN, PGPORT (5499), PGDATABASE (tpch),
PERF=1 to record a perf profile of each view into perf.<view>.data, ORDER=none (or a FIXED(..))
to build with that backfill_order instead of the automatic one, SETTINGS='SET x = y; ..' run
before each CREATE in its session)"""
import os, re, subprocess, sys, threading, time, signal
HERE = os.path.dirname(os.path.abspath(__file__))
BIN = os.environ.get('SLUICE_BIN', '/var/tmp/sluice-target/release/sluice')
PGPORT = os.environ.get('PGPORT', '5499'); PGDB = os.environ.get('PGDATABASE', 'tpch')
PORT = '4600'; DD = os.path.join(os.environ.get('TMPDIR', '/tmp'), 'sluice-tpch')
PG = ['psql', '-h', '127.0.0.1', '-p', PGPORT, '-U', 'postgres', '-d', PGDB, '-Atq', '-v', 'ON_ERROR_STOP=1']
SL = ['psql', '-h', '127.0.0.1', '-p', PORT, '-U', 'root', '-d', 'dev', '-Atq', '-v', 'ON_ERROR_STOP=1']
only = sys.argv[1:]
def sql(cmd, q, check=True):
    r = subprocess.run(cmd + ['-c', q], capture_output=True, text=True)
    if check and r.returncode != 0: raise SystemExit(f'failed: {q[:100]}: {r.stderr}')
    return r
subprocess.run(['rm', '-rf', DD])
log = open(DD + '.log', 'w')
proc = subprocess.Popen([BIN, '--listen', '127.0.0.1:' + PORT, '--http', 'off', '--data-dir', DD], stdout=log, stderr=log)
peak = [0]
def sample():
    while proc.poll() is None:
        try:
            for line in open(f'/proc/{proc.pid}/status'):
                if line.startswith('VmRSS'): peak[0] = max(peak[0], int(line.split()[1]) // 1024)
        except Exception: pass
        time.sleep(0.1)
threading.Thread(target=sample, daemon=True).start()
for _ in range(100):
    if sql(SL, 'select 1', check=False).returncode == 0: break
    time.sleep(0.2)
sql(PG, "select pg_drop_replication_slot(slot_name) from pg_replication_slots where database = '" + PGDB + "'")
sql(SL, "CREATE SOURCE pg WITH (connector='postgres-cdc', hostname='127.0.0.1', port='" + PGPORT + "', username='postgres', password='', database.name='" + PGDB + "')")
t0 = time.time()
for t in ['region', 'nation', 'supplier', 'customer', 'part', 'partsupp', 'orders', 'lineitem']:
    sql(SL, f"CREATE TABLE {t} (*) FROM pg TABLE 'public.{t}'")
print(f'tables: {time.time() - t0:.1f}s, peak {peak[0]} MB', flush=True)
views = [l for l in open(os.path.join(HERE, 'views.sql')) if l.strip() and not l.startswith('--')]
for v in views:
    name = re.search(r'VIEW (\w+)', v).group(1)
    if only and name not in only: continue
    peak[0] = 0
    if os.environ.get('PERF'):
        perf = subprocess.Popen(['perf', 'record', '-F', '299', '--call-graph', 'dwarf,16384', '-p', str(proc.pid), '-o', f'perf.{name}.data'], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(1)
    if os.environ.get('ORDER'):
        order = os.environ['ORDER']
        order = order if order.upper().startswith('FIXED') else f"'{order}'"
        v = v.replace(f'VIEW {name} AS', f'VIEW {name} WITH (backfill_order = {order}) AS', 1)
    v = os.environ.get('SETTINGS', '') + v
    t0 = time.time()
    r = sql(SL, v, check=False)
    dt = time.time() - t0
    if os.environ.get('PERF'):
        perf.send_signal(signal.SIGINT); perf.wait()
    if r.returncode != 0:
        print(f'{name}: refused/failed in {dt:.2f}s: {r.stderr.strip()[:200]}', flush=True); continue
    a = sql(SL, f'select * from {name}').stdout.splitlines(); b = sql(PG, f'select * from {name}').stdout.splitlines()
    same = sorted(a) == sorted(b)
    print(f'{name}: {dt:.2f}s peak {peak[0]} MB rows {len(a)} {"equal" if same else "DIFFERENT (pg %d rows)" % len(b)}', flush=True)
    if not same:
        sa, sb = set(a), set(b)
        print('   only sluice:', sorted(sa - sb)[:3], '\n   only pg:', sorted(sb - sa)[:3])
    if os.environ.get('KEEP') is None: sql(SL, f'DROP MATERIALIZED VIEW {name}')
proc.send_signal(signal.SIGTERM); proc.wait()
