"""What the held-out sets' checkers share (heldout4/, followups/, crosslingual/): a corpus's
heading paths and their own text, a section's lookup, the longest run of words a question
shares with a text, and the checks of one labelled question.
"""
import os
import re

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
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
