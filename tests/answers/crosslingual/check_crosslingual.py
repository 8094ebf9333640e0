#!/usr/bin/env python3
"""Mechanical check of tests/answers/crosslingual/questions.json.

Usage: check_crosslingual.py [QUESTIONS]. Exits non-zero on a failure. Every
question is answerable and has an ISO 639-1 "lang" that differs from its corpus's
language (CORPUS_LANG below); every listed section ("A › B") matches exactly one
heading path of its corpus (its tail); every key span (verbatim in the corpus's
language, no Markdown markup) occurs, case-insensitive and whitespace-normalised,
in the own text of at least one listed section (the text between that heading and
the next heading of any level). ../check.py also reads this file.
"""
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
from labels import ROOT, check_item, find, load, longest_shared, norm, words  # noqa: E402,F401
CORPUS_LANG = {"debian-fr": "fr", "atelier-lumiere": "fr", "hotel-bergblick": "de", "huerta-viva": "es"}



def main():
    path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "questions.json")
    data = json.load(open(path, encoding="utf-8"))
    corpora = {k: load(v) for k, v in data["corpora"].items()}
    failures, ids = [], set()
    for q in data["questions"]:
        if q["id"] in ids:
            failures.append(f"{q['id']}: duplicate id")
        ids.add(q["id"])
        if not re.fullmatch(r"[a-z]{2}", q.get("lang", "")):
            failures.append(f"{q['id']}: needs an ISO 639-1 lang")
        elif q["lang"] == CORPUS_LANG.get(q["corpus"], "en"):
            failures.append(f"{q['id']}: asked in its corpus's own language")
        if q["kind"] == "unanswerable" or not q["sections"] or not 1 <= len(q["keys"]) <= 3:
            failures.append(f"{q['id']}: every question is answerable, with sections and 1-3 keys")
            continue
        check_item(q["id"], q, corpora[q["corpus"]], failures, ngram=False)
    print(f"{len(data['questions'])} questions, {len(failures)} failures")
    for f in failures:
        print("FAIL", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
