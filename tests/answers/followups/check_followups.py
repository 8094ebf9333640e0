#!/usr/bin/env python3
"""Mechanical check of tests/answers/followups/conversations.json.

Usage: check_followups.py [CONVERSATIONS]. Exits non-zero on a failure. Checks the
shape (unique ids, 2 or 3 turns, the first turn's role "first", the others
"followup" or "newsubject", a known corpus, an optional ISO "lang"), that every
listed section ("A › B") matches exactly one heading path of its corpus (its
tail), and that every key span (no Markdown markup) occurs, case-insensitive and
whitespace-normalised, in the own text of at least one listed section (the text
between that heading and the next heading of any level). A first or newsubject
turn needs sections and 1-3 keys; a followup turn needs sections and at most 3 keys.
"""
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
from labels import ROOT, check_item, find, load, longest_shared, norm, words  # noqa: E402,F401


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "conversations.json")
    data = json.load(open(path, encoding="utf-8"))
    corpora = {k: load(v) for k, v in data["corpora"].items()}
    failures, ids, turns = [], set(), 0
    for c in data["conversations"]:
        cid = c["id"]
        if cid in ids:
            failures.append(f"{cid}: duplicate id")
        ids.add(cid)
        if c["corpus"] not in corpora:
            failures.append(f"{cid}: unknown corpus")
            continue
        if "lang" in c and not re.fullmatch(r"[a-z]{2}", c["lang"]):
            failures.append(f"{cid}: lang is an ISO 639-1 code")
        if not 2 <= len(c["turns"]) <= 3:
            failures.append(f"{cid}: 2 or 3 turns")
        for i, t in enumerate(c["turns"]):
            turns += 1
            label = f"{cid} turn {i + 1}"
            want = ("first",) if i == 0 else ("followup", "newsubject")
            if t["role"] not in want:
                failures.append(f"{label}: role {t['role']!r}, expected one of {want}")
            low = 1 if t["role"] in ("first", "newsubject") else 0
            if not t["sections"] or not low <= len(t["keys"]) <= 3:
                failures.append(f"{label}: needs sections and {low}-3 keys")
            check_item(label, t, corpora[c["corpus"]], failures, ngram=False)
    print(f"{len(data['conversations'])} conversations, {turns} turns, {len(failures)} failures")
    for f in failures:
        print("FAIL", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
