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
ROOT = os.path.normpath(os.path.join(HERE, "..", "..", ".."))
ATX = re.compile(r"^(#{1,6}) (.+?)\s*$")


def norm(s):
    return " ".join(s.split()).lower()


def words(s):
    return re.findall(r"\w+", s.lower())


def load(corpus):
    """[(heading path, own text)] of the Markdown files of a corpus directory."""
    out = []
    d = os.path.join(ROOT, corpus)
    for name in sorted(os.listdir(d)):
        if not name.endswith(".md"):
            continue
        stack, cur, fenced = [], None, False
        for line in open(os.path.join(d, name), encoding="utf-8").read().split("\n"):
            if line.startswith("```"):
                fenced = not fenced
            m = None if fenced else ATX.match(line)
            if m:
                level = len(m.group(1))
                stack = [s for s in stack if s[0] < level] + [(level, m.group(2))]
                cur = [tuple(t for _, t in stack), []]
                out.append(cur)
            elif cur is not None:
                cur[1].append(line)
    return [(p, "\n".join(lines)) for p, lines in out]


def find(sections, name):
    parts = tuple(name.split(" › "))
    return [(p, t) for p, t in sections if p[-len(parts):] == parts]


def longest_shared(a, b):
    a, b = words(a), words(b)
    best = 0
    for i in range(len(a)):
        for j in range(len(b)):
            k = 0
            while i + k < len(a) and j + k < len(b) and a[i + k] == b[j + k]:
                k += 1
            best = max(best, k)
    return best


def check_item(label, q, sections, failures, ngram=True):
    """Checks one question or turn (sections, keys, phrasing) against its corpus."""
    secs, keys = q.get("sections", []), q.get("keys", [])
    matched = []
    for s in secs:
        m = find(sections, s)
        if len(m) != 1:
            failures.append(f"{label}: section {s!r} matches {len(m)} heading paths")
        matched += m
    for k in keys:
        if "**" in k or "`" in k:
            failures.append(f"{label}: key with Markdown markup: {k!r}")
        if not any(norm(k) in norm(t) for _, t in matched):
            failures.append(f"{label}: key {k!r} not in the own text of a listed section")
    if ngram and q.get("phrasing") == "paraphrase" and matched:
        text = "\n".join(p[-1] + "\n" + t for p, t in matched)
        n = longest_shared(q["question"], text)
        if n > 3:
            failures.append(f"{label}: paraphrase shares {n} consecutive words with its sections")


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
