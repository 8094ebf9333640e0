#!/usr/bin/env python3
"""Mechanical check of tests/retrieval/questions.json against the corpus.

No arguments. Exits non-zero on any failure and prints a summary.

Checks, for every question:
  * the JSON loads and has the expected shape; ids are unique; question text
    is unique and non-empty; 1-3 relevant passages; doc exists in the corpus;
  * the whitespace-normalised passage (runs of whitespace -> one space,
    stripped) is 40-160 characters long;
  * it occurs exactly once in the whitespace-normalised text of its document,
    and in no other document of the corpus;
  * in the original text it stays within one paragraph: it spans no blank
    line and no heading underline (a line made only of * = - # characters);
  * it does not touch an indented block: every original line it covers is
    indented by fewer than 3 spaces (code examples, literal blocks and
    notes/footnote bodies in this corpus are indented by 3+ spaces; bullet
    continuation lines by 2).
Also checks every corpus file has at least one question (index.txt included)
and at least two for every file except index.txt.
"""
import json
import os
import re
import sys
from collections import Counter

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
QFILE = os.path.join(HERE, "questions.json")

MIN_LEN, MAX_LEN = 40, 160
MAX_INDENT = 2  # lines indented by more than this are treated as code/literal
UNDERLINE = re.compile(r"^\s*([*=\-#])\1{2,}\s*$")


def normalise_with_map(text):
    """Collapse whitespace runs to one space; return (norm, idx) where
    idx[k] is the offset in `text` of normalised character k."""
    out, idx = [], []
    in_ws = False
    for i, ch in enumerate(text):
        if ch.isspace():
            if not in_ws and out:
                out.append(" ")
                idx.append(i)
            in_ws = True
        else:
            out.append(ch)
            idx.append(i)
            in_ws = False
    while out and out[-1] == " ":
        out.pop()
        idx.pop()
    return "".join(out), idx


def norm(s):
    return " ".join(s.split())


def main():
    failures = []

    def fail(msg):
        failures.append(msg)

    try:
        with open(QFILE, encoding="utf-8") as f:
            data = json.load(f)
    except Exception as e:  # noqa: BLE001
        print(f"FAIL: cannot load {QFILE}: {e}")
        return 1

    corpus_rel = data.get("corpus")
    if not isinstance(corpus_rel, str):
        print("FAIL: top-level 'corpus' missing")
        return 1
    corpus_dir = os.path.join(ROOT, corpus_rel)
    docs = {}
    for name in sorted(os.listdir(corpus_dir)):
        if name.endswith(".txt"):
            with open(os.path.join(corpus_dir, name), encoding="utf-8") as f:
                raw = f.read()
            n, idx = normalise_with_map(raw)
            docs[name] = (raw, n, idx)

    questions = data.get("questions")
    if not isinstance(questions, list) or not questions:
        print("FAIL: 'questions' missing or empty")
        return 1

    ids = Counter(q.get("id") for q in questions)
    for qid, c in ids.items():
        if not qid or c > 1:
            fail(f"id {qid!r} is missing or used {c} times")
    texts = Counter(norm(q.get("question", "")).lower() for q in questions)
    for t, c in texts.items():
        if not t or c > 1:
            fail(f"question text {t!r} is empty or used {c} times")

    per_doc = Counter()
    n_passages = 0
    for q in questions:
        qid = q.get("id")
        if set(q) != {"id", "question", "relevant"}:
            fail(f"{qid}: unexpected keys {sorted(q)}")
        rel = q.get("relevant")
        if not isinstance(rel, list) or not 1 <= len(rel) <= 3:
            fail(f"{qid}: needs 1-3 relevant passages")
            continue
        docs_of_q = set()
        for r in rel:
            n_passages += 1
            doc, passage = r.get("doc"), r.get("passage")
            if set(r) != {"doc", "passage"}:
                fail(f"{qid}: unexpected passage keys {sorted(r)}")
            if doc not in docs:
                fail(f"{qid}: unknown doc {doc!r}")
                continue
            docs_of_q.add(doc)
            p = norm(passage or "")
            if not MIN_LEN <= len(p) <= MAX_LEN:
                fail(f"{qid}: passage length {len(p)} outside {MIN_LEN}-{MAX_LEN}: {p!r}")
            raw, n, idx = docs[doc]
            count = n.count(p)
            if count != 1:
                fail(f"{qid}: passage found {count} times in {doc}: {p!r}")
                continue
            for other, (_, on, _) in docs.items():
                if other != doc and p in on:
                    fail(f"{qid}: passage also occurs in {other}: {p!r}")
            start = n.find(p)
            a, b = idx[start], idx[start + len(p) - 1] + 1
            span = raw[a:b]
            if re.search(r"\n[ \t]*\n", span):
                fail(f"{qid}: passage spans a blank line in {doc}: {p!r}")
            line_start = raw.rfind("\n", 0, a) + 1
            line_end = raw.find("\n", b)
            line_end = len(raw) if line_end == -1 else line_end
            for line in raw[line_start:line_end].split("\n"):
                if UNDERLINE.match(line):
                    fail(f"{qid}: passage crosses a heading in {doc}: {p!r}")
                indent = len(line) - len(line.lstrip(" "))
                if line.strip() and indent > MAX_INDENT:
                    fail(f"{qid}: passage touches a line indented {indent} spaces "
                         f"(code/literal block) in {doc}: {p!r}")
        for d in docs_of_q:
            per_doc[d] += 1

    for d in docs:
        need = 1 if d == "index.txt" else 2
        if per_doc[d] < need:
            fail(f"{d}: only {per_doc[d]} question(s) point at it (need {need})")

    print(f"questions: {len(questions)}  passages: {n_passages}  corpus files: {len(docs)}")
    print("questions per file (a question counts once for each file it cites):")
    for d in sorted(docs):
        print(f"  {d:20s} {per_doc[d]:3d}")
    if failures:
        print(f"FAILED: {len(failures)} problem(s)")
        for m in failures:
            print("  - " + m)
        return 1
    print("OK: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
