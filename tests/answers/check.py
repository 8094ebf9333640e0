#!/usr/bin/env python3
"""Mechanical check of tests/answers/questions.json against its corpora.

Usage: check.py [QUESTIONS]  (default tests/answers/questions.json; the held-out
set is tests/answers/heldout/questions.json). Exits non-zero on a failure. Checks
the shape, unique ids and questions, and for every answerable question that each
key span occurs (case-insensitive, whitespace-normalised) in its corpus and that
every part of each expected section ("A › B") is a heading of the corpus
(underlined in .txt files, `#` outside code fences in .md files). A question
with a `phrasing` must say "lexical" or "paraphrase"; in the held-out set (a
file in a directory named `heldout`) every question has one and the split
"heldout".
"""
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
UNDERLINE = re.compile(r"^([*=\-~#^\"+`'])\1{2,}$")
ATX = re.compile(r"^#{1,6} (.+?)\s*$")


def norm(s):
    return " ".join(s.split()).lower()


def load(corpus):
    text, headings = "", set()
    for name in sorted(os.listdir(os.path.join(ROOT, corpus))):
        if name.endswith((".txt", ".md")):
            lines = open(os.path.join(ROOT, corpus, name), encoding="utf-8").read().split("\n")
            text += "\n".join(lines) + "\n"
        if name.endswith(".txt"):
            for a, b in zip(lines, lines[1:]):
                if a.strip() and UNDERLINE.match(b.strip()) and not UNDERLINE.match(a.strip()):
                    headings.add(a.strip())
        elif name.endswith(".md"):
            fenced = False
            for line in lines:
                fenced ^= line.startswith("```")
                m = ATX.match(line)
                if m and not fenced:
                    headings.add(m.group(1))
    return norm(text), headings


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "questions.json")
    data = json.load(open(path, encoding="utf-8"))
    # the held-out set is the file under heldout/: the dev set also has questions with a phrasing
    heldout = os.path.basename(os.path.dirname(os.path.abspath(path))).startswith("heldout")
    corpora = {k: load(v) for k, v in data["corpora"].items()}
    failures, ids, texts = [], set(), set()
    for q in data["questions"]:
        if q["id"] in ids or q["question"] in texts:
            failures.append(f"{q['id']}: duplicate id or question")
        ids.add(q["id"])
        texts.add(q["question"])
        if q["split"] not in ("dev", "heldout") or q["corpus"] not in corpora:
            failures.append(f"{q['id']}: bad split or corpus")
        if q["kind"] not in ("definition", "howto", "comparison", "fact", "unanswerable"):
            failures.append(f"{q['id']}: bad kind")
        if heldout and (q.get("phrasing") not in ("lexical", "paraphrase") or q["split"] != "heldout"):
            failures.append(f"{q['id']}: held-out questions need a phrasing and the split heldout")
        elif "phrasing" in q and q["phrasing"] not in ("lexical", "paraphrase"):
            failures.append(f"{q['id']}: a phrasing is lexical or paraphrase")
        if q["kind"] == "unanswerable":
            continue
        if not q["sections"] or not 1 <= len(q["keys"]) <= 3:
            failures.append(f"{q['id']}: an answerable question needs sections and 1-3 keys")
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
