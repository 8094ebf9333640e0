#!/usr/bin/env python3
"""Check tests/answers/calibration/conversations.json (and, stricter than check.py,
questions.json) against their corpora.

Usage: check_conversations.py [CONVERSATIONS] [--questions QUESTIONS]
  (defaults: conversations.json next to this file; --questions without a value
  checks questions.json next to this file). Exits non-zero on a failure.

Conversations: ids unique, 2-3 turns, the first turn has the role "first" and the
others "followup" or "newsubject"; every turn has a question, 1-3 keys and at least
one section. Both files: every section ("A › B" for a path) ends exactly one heading
path of its corpus (Markdown `#` headings outside code fences; underlined headings in
.txt files, levels in the order the underline styles appear in each file); every key
occurs (case-insensitive, whitespace-normalised) in the own text of a listed section
(the text between that heading and the next heading of any level; a comparison may
list two sections, each holding some of the keys), every listed section holds at
least one key, and no key holds Markdown markup (backticks, **, links). Questions also need "lang" (a language
code), an optional boolean "generic", and no sections or keys when unanswerable.
"""
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", "..", ".."))
UNDERLINE = re.compile(r"^([*=\-~#^\"+`'])\1{2,}$")
ATX = re.compile(r"^(#{1,6}) (.+?)\s*$")
MARKUP = re.compile(r"`|\*\*[^\W\d][^*]*\*\*|\]\(|^#|^\s*[-*] ")  # x**2 is code, **a** bold


def norm(s):
    return " ".join(s.split()).lower()


def sections_of(path):
    """[(heading path tuple, own text)] of one file."""
    lines = open(path, encoding="utf-8").read().split("\n")
    out, stack, body = [], [], None
    if path.endswith(".md"):
        fenced = False
        for line in lines:
            m = None if fenced else ATX.match(line)
            if line.startswith("```"):
                fenced = not fenced
            if m:
                level = len(m.group(1))
                stack = [h for h in stack if h[0] < level] + [(level, m.group(2))]
                body = []
                out.append((tuple(h[1] for h in stack), body))
            elif body is not None:
                body.append(line)
    else:
        styles, i = [], 0
        while i < len(lines):
            a = lines[i].strip()
            b = lines[i + 1].strip() if i + 1 < len(lines) else ""
            if a and UNDERLINE.match(b) and not UNDERLINE.match(a):
                if body and UNDERLINE.match(body[-1].strip() or "x"):
                    body.pop()  # an overline
                if b[0] not in styles:
                    styles.append(b[0])
                level = styles.index(b[0])
                stack = [h for h in stack if h[0] < level] + [(level, a)]
                body = []
                out.append((tuple(h[1] for h in stack), body))
                i += 2
                continue
            if body is not None:
                body.append(lines[i])
            i += 1
    return [(p, norm("\n".join(b))) for p, b in out]


CACHE = {}


def corpus(rel):
    if rel not in CACHE:
        d = os.path.join(ROOT, rel)
        secs = []
        for name in sorted(os.listdir(d)):
            if name.endswith((".md", ".txt")):
                secs += sections_of(os.path.join(d, name))
        CACHE[rel] = secs
    return CACHE[rel]


def check_item(where, rel, sections, keys, failures):
    if not sections or not 1 <= len(keys) <= 3:
        failures.append(f"{where}: needs sections and 1-3 keys")
    secs, texts = corpus(rel), []
    for s in sections:
        want = tuple(s.split(" › "))
        hits = [t for p, t in secs if p[-len(want):] == want]
        if len(hits) != 1:
            failures.append(f"{where}: section {s!r} matches {len(hits)} heading paths")
            continue
        texts.append(hits[0])
        if not any(norm(k) in hits[0] for k in keys):
            failures.append(f"{where}: no key in the own text of {s!r}")
    for k in keys:
        if texts and not any(norm(k) in t for t in texts):
            failures.append(f"{where}: key {k!r} not in the own text of a listed section")
    for k in keys:
        if MARKUP.search(k):
            failures.append(f"{where}: key {k!r} holds Markdown markup")


def check_conversations(path, failures):
    data = json.load(open(path, encoding="utf-8"))
    ids, n_turns, roles = set(), 0, {}
    for c in data["conversations"]:
        if c["id"] in ids:
            failures.append(f"{c['id']}: duplicate id")
        ids.add(c["id"])
        if c["corpus"] not in data["corpora"]:
            failures.append(f"{c['id']}: unknown corpus")
            continue
        if not 2 <= len(c["turns"]) <= 3:
            failures.append(f"{c['id']}: a conversation has 2-3 turns")
        for i, t in enumerate(c["turns"]):
            want = ("first",) if i == 0 else ("followup", "newsubject")
            if t["role"] not in want:
                failures.append(f"{c['id']}[{i}]: role {t['role']!r}, expected {want}")
            roles[t["role"]] = roles.get(t["role"], 0) + 1
            if not t["question"].strip():
                failures.append(f"{c['id']}[{i}]: empty question")
            check_item(f"{c['id']}[{i}]", data["corpora"][c["corpus"]], t["sections"], t["keys"], failures)
            n_turns += 1
    print(f"{len(data['conversations'])} conversations, {n_turns} turns, roles {roles}")


def check_questions(path, failures):
    data = json.load(open(path, encoding="utf-8"))
    n = 0
    for q in data["questions"]:
        if not isinstance(q.get("lang"), str) or not re.fullmatch(r"[a-z]{2}", q["lang"]):
            failures.append(f"{q['id']}: lang")
        if "generic" in q and not isinstance(q["generic"], bool):
            failures.append(f"{q['id']}: generic is a boolean")
        if q["kind"] == "unanswerable":
            if q.get("sections") or q.get("keys"):
                failures.append(f"{q['id']}: unanswerable with sections or keys")
            continue
        check_item(q["id"], data["corpora"][q["corpus"]], q["sections"], q["keys"], failures)
        n += 1
    print(f"{len(data['questions'])} questions, {n} answerable checked against own section text")


def main():
    args = sys.argv[1:]
    qpath = None
    if "--questions" in args:
        i = args.index("--questions")
        qpath = args[i + 1] if i + 1 < len(args) else os.path.join(HERE, "questions.json")
        del args[i:i + 2]
    cpath = args[0] if args else os.path.join(HERE, "conversations.json")
    failures = []
    if os.path.exists(cpath):
        check_conversations(cpath, failures)
    if qpath:
        check_questions(qpath, failures)
    print(f"{len(failures)} failures")
    for f in failures:
        print("FAIL", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
