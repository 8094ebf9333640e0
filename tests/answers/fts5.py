#!/usr/bin/env python3
"""SQLite FTS5 rankings, the reference `examples/retrieval.rs sections` compares BM25 with.
Standard library only (Python's sqlite3 with FTS5).

Reads {"chunks": [[title, text], ...], "questions": [...], "depth": N} on stdin and writes
to stdout a JSON list holding, per question, the indexes of its best N chunks: the chunks go
into one FTS5 table (columns title and text, tokenizer `porter unicode61`), each question is
the OR of its distinct words as quoted terms, ranked by FTS5's bm25 (`ORDER BY rank`).
"""
import json
import re
import sqlite3
import sys


def main():
    req = json.load(sys.stdin)
    db = sqlite3.connect(":memory:")
    db.execute("CREATE VIRTUAL TABLE c USING fts5(title, text, tokenize='porter unicode61')")
    db.executemany("INSERT INTO c(rowid, title, text) VALUES (?, ?, ?)",
                   [(i, t, x) for i, (t, x) in enumerate(req["chunks"])])
    out = []
    for q in req["questions"]:
        words = dict.fromkeys(re.findall(r"\w+", q.lower()))
        match = " OR ".join(f'"{w}"' for w in words)
        rows = db.execute("SELECT rowid FROM c WHERE c MATCH ? ORDER BY rank LIMIT ?",
                          (match, req["depth"])).fetchall() if match else []
        out.append([r[0] for r in rows])
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
