#!/usr/bin/env python3
"""Mechanical check of tests/answers/questions.json against its corpora.

No arguments; exits non-zero on a failure. Checks the shape, unique ids and
questions, and for every answerable question that each key span occurs
(case-insensitive, whitespace-normalised) in its corpus and that every part of
each expected section ("A › B") is a heading of the corpus.
"""
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
UNDERLINE = re.compile(r"^([*=\-~#^\"+`'])\1{2,}$")


def norm(s):
    return " ".join(s.split()).lower()


def load(corpus):
    text, headings = "", set()
    for name in sorted(os.listdir(os.path.join(ROOT, corpus))):
        if name.endswith(".txt"):
            lines = open(os.path.join(ROOT, corpus, name), encoding="utf-8").read().split("\n")
            text += "\n".join(lines) + "\n"
            for a, b in zip(lines, lines[1:]):
                if a.strip() and UNDERLINE.match(b.strip()) and not UNDERLINE.match(a.strip()):
                    headings.add(a.strip())
    return norm(text), headings


def main():
    data = json.load(open(os.path.join(HERE, "questions.json"), encoding="utf-8"))
    corpora = {k: load(v) for k, v in data["corpora"].items()}
    failures, ids, texts = [], set(), set()
    for q in data["questions"]:
        if q["id"] in ids or q["question"] in texts:
            failures.append(f"{q['id']}: duplicate id or question")
        ids.add(q["id"])
        texts.add(q["question"])
        if q["split"] not in ("dev", "heldout") or q["corpus"] not in corpora:
            failures.append(f"{q['id']}: bad split or corpus")
        if q["kind"] == "unanswerable":
            continue
        text, headings = corpora[q["corpus"]]
        for k in q["keys"]:
            if norm(k) not in text:
                failures.append(f"{q['id']}: key span not in corpus: {k!r}")
        for s in q["sections"]:
            for part in s.split(" › "):
                if part not in headings:
                    failures.append(f"{q['id']}: no heading {part!r}")
    answerable = sum(1 for q in data["questions"] if q["kind"] != "unanswerable")
    print(f"{len(data['questions'])} questions, {answerable} answerable, {len(failures)} failures")
    for f in failures:
        print("FAIL", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
