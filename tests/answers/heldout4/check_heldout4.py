#!/usr/bin/env python3
"""Stricter checks of tests/answers/heldout4/questions.json than ../check.py makes.

Usage: check_heldout4.py [QUESTIONS]  (run from the repository root or anywhere).
For every answerable question: each listed section ("A › B") matches exactly one
heading path of its corpus (its tail), and each key span occurs (case-insensitive,
whitespace-normalised) in the own text of at least one listed section (the text
between that heading and the next heading of any level). For every question with
the phrasing "paraphrase": it shares no more than three consecutive words with the
headings and own text of its sections. Unanswerable questions have no sections
and no keys. Optional fields: "generic" (a boolean) and "lang" (an ISO code).
"""
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
from labels import ROOT, check_item, find, load, longest_shared, norm, words  # noqa: E402,F401


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "questions.json")
    data = json.load(open(path, encoding="utf-8"))
    corpora = {k: load(v) for k, v in data["corpora"].items()}
    failures = []
    for q in data["questions"]:
        if "generic" in q and not isinstance(q["generic"], bool):
            failures.append(f"{q['id']}: generic is a boolean")
        if "lang" in q and not re.fullmatch(r"[a-z]{2}", q["lang"]):
            failures.append(f"{q['id']}: lang is an ISO 639-1 code")
        if q["kind"] == "unanswerable":
            if q["sections"] or q["keys"] or q.get("generic"):
                failures.append(f"{q['id']}: unanswerable with sections, keys or generic")
            continue
        if not q["sections"] or not 1 <= len(q["keys"]) <= 3:
            failures.append(f"{q['id']}: needs sections and 1-3 keys")
        check_item(q["id"], q, corpora[q["corpus"]], failures)
    print(f"{len(data['questions'])} questions, {len(failures)} failures")
    for f in failures:
        print("FAIL", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
