#!/usr/bin/env python3
"""Calibrates the embedded reader's two thresholds (generate::embedded::reader::Weights).

Reads the outcome dumps of `examples/answers --dump FILE` (one JSON line per question with the
reader's confidence) of the dev set and of its off-topic block (`--offtopic`: each corpus's
questions asked of the other corpus's replica, the natural negatives), both answered with
thresholds that never refuse (`--weights M,C,R,H,-9,-9,-9,-9`), and chooses:

- `refuse` ("I don't know" below it): the highest confidence that refuses at most
  MAX_ANSWERABLE_REFUSED of the answerable questions; a visitor prefers the closest passage,
  cited, to a refusal;
- `uncertain` (the closest passage after a lead-in below it): the lowest confidence under which
  at least OFFTOPIC_COVERED of the off-topic questions fall (refused or led in, never answered
  as if sure).

It prints the shares at each, and the off-topic and near-topic unanswerable questions refused.

    python3 tests/answers/calibrate.py /tmp/dev.jsonl /tmp/dev-offtopic.jsonl
"""
import json
import sys

MAX_ANSWERABLE_REFUSED = 0.05
OFFTOPIC_COVERED = 0.97


def load(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def share(xs, cond):
    return sum(1 for x in xs if cond(x)) / max(1, len(xs))


def main():
    dev, off = load(sys.argv[1]), load(sys.argv[2])
    answerable = sorted(q["confidence"] for q in dev if q["answerable"] and q["confidence"] is not None)
    near = [q["confidence"] for q in dev if not q["answerable"] and q["confidence"] is not None]
    offtopic = sorted(q["confidence"] for q in off if q["confidence"] is not None)
    refuse = answerable[int(len(answerable) * MAX_ANSWERABLE_REFUSED)]
    uncertain = max(refuse, offtopic[min(len(offtopic) - 1, int(len(offtopic) * OFFTOPIC_COVERED))])
    below = lambda t: (lambda c: c < t)
    print(f"refuse {refuse:.3f}: answerable refused {share(answerable, below(refuse)):.3f}, "
          f"off-topic refused {share(offtopic, below(refuse)):.3f}, "
          f"near-topic unanswerable refused {share(near, below(refuse)):.3f}")
    print(f"uncertain {uncertain:.3f}: answerable led in {share(answerable, lambda c: refuse <= c < uncertain):.3f}, "
          f"off-topic refused or led in {share(offtopic, below(uncertain)):.3f}, "
          f"near-topic unanswerable refused or led in {share(near, below(uncertain)):.3f}")


if __name__ == "__main__":
    main()
