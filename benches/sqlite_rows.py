#!/usr/bin/env python3
"""The reference of the durable-write benchmark (benches/table.sh): SQLite in WAL mode with
synchronous=FULL, one row per transaction (each commit is on disk before the next), from
WRITERS threads, each with its own connection, for SECONDS. Prints rows per second.

    python3 benches/sqlite_rows.py --dir DIR --writers 64 --seconds 8
"""
import argparse
import os
import sqlite3
import threading
import time

p = argparse.ArgumentParser()
p.add_argument("--dir", required=True)
p.add_argument("--writers", type=int, default=1)
p.add_argument("--seconds", type=float, default=8)
args = p.parse_args()
path = os.path.join(args.dir, "bench.sqlite")


def connect():
    db = sqlite3.connect(path, timeout=60, isolation_level=None, check_same_thread=False)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=FULL")
    return db


connect().execute("CREATE TABLE IF NOT EXISTS history (id INTEGER PRIMARY KEY, replica BLOB, content TEXT, created_at INTEGER)")
until = time.monotonic() + args.seconds
counts = [0] * args.writers


def writer(i):
    db = connect()
    while time.monotonic() < until:
        db.execute("BEGIN IMMEDIATE")
        db.execute("INSERT INTO history (replica, content, created_at) VALUES (?, ?, ?)",
                   (b"r" * 16, "a durable history item", time.time_ns()))
        db.execute("COMMIT")
        counts[i] += 1


start = time.monotonic()
threads = [threading.Thread(target=writer, args=(i,)) for i in range(args.writers)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(int(sum(counts) / (time.monotonic() - start)))
os.remove(path)
