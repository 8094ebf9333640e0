#!/usr/bin/env python3
"""Fits the embedded reader's decision (src/generate/embedded/decision.rs) for one embedding model.

Reads outcome dumps of `examples/answers --dump FILE` (one JSON line per question with the
decision's signals) and fits a logistic regression that tells the answerable questions whose
quote holds their key spans (positives: `quoteKeys`, the best candidate's quote whether or not
the decision refused it) from questions the knowledge base does not cover (negatives: near-topic
unanswerable questions and the off-topic blocks, `--offtopic`: another corpus's questions asked
of each replica). An answerable question whose quote misses the answer (retrieval did not find
it, or a question in another language than an English-only model reads) is left out: refusing
it costs the visitor nothing they could use, and counting it as a positive taught the fit that
a question nothing answers looks answerable. Each dump weighs the same in the fit (so that one
large set does not decide it alone), and within a dump the positives and negatives weigh the
same. Then it chooses the two thresholds on the fitted probability:

- `refuse` ("I don't know" below it): the highest that refuses at most MAX_ANSWERABLE_REFUSED
  of the positives of every dump (a visitor prefers the closest passage, cited, to a
  refusal);
- `uncertain` (the closest passage after a lead-in below it): the lowest under which at least
  NEGATIVES_COVERED of the negatives fall (refused or led in, never answered as if sure).

It writes the fit as `data/reader/MODEL.json` reads it and prints, per dump, the shares at the
thresholds. The dumps must come from one retrieval (one model, or BM25 alone); fit on the dev
and calibration sets only, never on a held-out set:

    for s in dev calibration; do
      answers --set $s --embeddings DIR --dump /tmp/$s.jsonl
      answers --set $s --offtopic --embeddings DIR --dump /tmp/$s-off.jsonl
    done
    python3 tests/answers/calibrate.py --model all-minilm-l6-v2 --out data/reader/all-minilm-l6-v2.json \\
      /tmp/dev.jsonl /tmp/dev-off.jsonl /tmp/calibration.jsonl /tmp/calibration-off.jsonl

With `--model bm25` (dumps made without `--embeddings`) it weighs the word signals only.
`data/reader/bm25.json` and `data/reader/multilingual-e5-small.json` are still fits of every
answerable question as a positive over the first seven signals (before `quoteKeys` and the
knowledge base's spread of cosines). Refitted this way, words alone refuse 0.226 of the
calibration set's answerable questions instead of 0.108 (keys 0.640 -> 0.613) for near-topic
refusals of 0.524 instead of 0.214; multilingual-e5-small, chosen for questions in another
language than the documents, refuses 0.56 of the cross-lingual calibration block's (keys 0.60
-> 0.44), whose questions hold none of the documents' words and which has no negatives to fit
on: both kept as they were. Since 2026-12-03 multilingual-e5-small's fit is two: for questions in
the documents' language, fitted this way on those questions only (`--same-language`: dev,
calibration and their off-topic blocks), and, under `otherLanguage` (`--other-language FIT`), the
older fit above for questions in another language than the documents, which the reader uses for
them (`Fit::for_question`):
    python3 tests/answers/calibrate.py --model multilingual-e5-small --same-language \
      --other-language OLD.json --out data/reader/multilingual-e5-small.json \
      /tmp/dev.jsonl /tmp/dev-off.jsonl /tmp/calibration.jsonl /tmp/calibration-off.jsonl
On those dumps: dev near-topic refused 0.385 -> 0.769 and off-topic 0.128 -> 0.481, calibration
near-topic 0.105 -> 0.395 and its off-topic questions in the documents' language 0.878 -> 0.927;
every question in another language decided as before.
`--features a,b,c` weighs other signals than the default ones (to measure a new signal).

`about` (written when the dumps carry `unknownMeaning`, the share of the question's meaning that
rests on its unknown terms: 1 - cos of the question embedded with and without their words): the
largest such value at or above which the reader leads every answer in and under which each
dump's negatives stay refused or led in for NEGATIVES_COVERED of them (or as often as with a
lead-in for every unknown term, when less); unknown terms below it are generic words of the
question, not what it asks about. For all-minilm-l6-v2 (2026-12-03) 0.0385, the weights unchanged
(the same dumps give the same fit). `--keep FIT` keeps a fit's weights and thresholds and chooses
only its `about` from the dumps (`fittedOn` stays, `aboutChosenOn` names the dumps): for
multilingual-e5-small (2026-12-03, its dumps of dev, calibration and the cross-lingual calibration
block, each with its off-topic block) 0.0264. Tried and not kept: `unknownMeaning` weighed in the fit
instead of `unknown` (`--features sentence,passage,chunk,typical,breadth,excess,coverage,title,standing,unknownMeaning`):
off-topic refused 0.564 -> 0.673 on dev and 0.860 -> 0.922, 0.872 -> 0.915, 0.946 -> 0.977 on the
held-out sets, but "I don't know" on answerable questions 0.039 -> 0.101 and 0.050 -> 0.113 on
held-out and held-out 3 (its `refuse` threshold rose from 0.058 to 0.092) and follow-up turns
0.725 -> 0.650.
"""
import argparse
import json
import math

MAX_ANSWERABLE_REFUSED = 0.05
NEGATIVES_COVERED = 0.95
BY_MEANING = ["sentence", "passage", "chunk", "typical", "breadth", "excess"]
BY_WORDS = ["coverage", "title", "standing", "unknown"]
# L2 penalty of the weights (not the bias), against a few points deciding a weight
RIDGE = 1e-4
NEWTON_STEPS = 50


def load(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def rows(dumps, features):
    """(x, y, weight, dump index, unknown meaning) of every question that has the features: the
    answerable ones whose quote holds the key spans (`quoteKeys`) as positives, the unanswerable
    ones as negatives; the unknown meaning is `None` for a question without unknown terms."""
    out = []
    for d, lines in enumerate(dumps):
        usable = [q for q in lines if q.get("signals") and all(q["signals"].get(f) is not None for f in features)]
        usable = [q for q in usable if not q["answerable"] or q["quoteKeys"]]
        pos = sum(1 for q in usable if q["answerable"])
        neg = len(usable) - pos
        for q in usable:
            y = 1.0 if q["answerable"] else 0.0
            w = 0.5 / max(1, pos if y else neg)
            meaning = q["signals"].get("unknownMeaning") if q["unknown"] else None
            out.append(([q["signals"][f] for f in features], y, w, d, meaning))
    return out


def solve(a, b):
    """Solves a x = b (Gaussian elimination with partial pivoting)."""
    n = len(b)
    m = [row[:] + [b[i]] for i, row in enumerate(a)]
    for c in range(n):
        p = max(range(c, n), key=lambda r: abs(m[r][c]))
        m[c], m[p] = m[p], m[c]
        for r in range(n):
            if r != c and m[c][c] != 0:
                f = m[r][c] / m[c][c]
                m[r] = [x - f * y for x, y in zip(m[r], m[c])]
    return [m[i][n] / m[i][i] for i in range(n)]


def fit(data, k):
    """Weighted, L2-penalised logistic regression by Newton's method: (bias, weights)."""
    beta = [0.0] * (k + 1)
    total = sum(row[2] for row in data)
    for _ in range(NEWTON_STEPS):
        grad = [0.0] * (k + 1)
        hess = [[0.0] * (k + 1) for _ in range(k + 1)]
        for x, y, w, *_ in data:
            xs = [1.0] + x
            z = sum(b * v for b, v in zip(beta, xs))
            p = 1.0 / (1.0 + math.exp(-max(-30, min(30, z))))
            for i in range(k + 1):
                grad[i] += w / total * (p - y) * xs[i]
                for j in range(k + 1):
                    hess[i][j] += w / total * p * (1 - p) * xs[i] * xs[j]
        for i in range(1, k + 1):
            grad[i] += RIDGE * beta[i]
            hess[i][i] += RIDGE
        step = solve(hess, grad)
        beta = [b - s for b, s in zip(beta, step)]
        if max(abs(s) for s in step) < 1e-6:
            break
    return beta[0], beta[1:]


def probability(bias, weights, x):
    z = bias + sum(w * v for w, v in zip(weights, x))
    return 1.0 / (1.0 + math.exp(-max(-30, min(30, z))))


def about_threshold(scored, uncertain):
    """The largest unknown meaning at or above which the reader leads in any answer, under which
    each dump's negatives stay refused or led in at least as often as NEGATIVES_COVERED (or as
    often as a lead-in for every unknown term gets, when less): the unknown terms below it are
    generic words of the question, not what it asks about. 0 (every unknown term) when no
    negative the fit would answer has unknown terms."""
    negatives = {}
    for p, y, d, meaning in scored:
        if not y:
            negatives.setdefault(d, []).append((p, meaning))

    def covered(negs, about):
        return sum(1 for p, m in negs if p < uncertain or (m is not None and m >= about)) / len(negs)

    floors = {d: min(NEGATIVES_COVERED, covered(negs, 0.0)) for d, negs in negatives.items()}
    candidates = sorted({m for negs in negatives.values() for p, m in negs if m is not None and p >= uncertain})
    about = 0.0
    for c in candidates:
        if all(covered(negs, c) >= floors[d] for d, negs in negatives.items()):
            about = c
    return about


def thresholds(scored, dumps):
    """`refuse` (at most MAX_ANSWERABLE_REFUSED of each dump's positives below it) and
    `uncertain` (at least NEGATIVES_COVERED of the negatives below it) for probabilities
    `scored`."""
    refuse = 1.0
    for d in range(len(dumps)):
        pos = sorted(p for p, y, dd in scored if y and dd == d)
        if pos:
            refuse = min(refuse, pos[int(len(pos) * MAX_ANSWERABLE_REFUSED)])
    neg = sorted(p for p, y, _ in scored if not y)
    uncertain = max(refuse, neg[min(len(neg) - 1, int(len(neg) * NEGATIVES_COVERED))]) if neg else refuse
    return refuse, uncertain


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True, help="catalog id of the embedding model, or bm25")
    ap.add_argument("--out", required=True)
    ap.add_argument("--features", help="comma-separated signals to weigh instead of the default ones")
    ap.add_argument("--keep", help="a fit (data/reader/MODEL.json) whose weights and thresholds are kept: "
                    "only `about` is chosen from the dumps")
    ap.add_argument("--same-language", action="store_true",
                    help="fit on the questions in the documents' language only (`otherLanguage` false)")
    ap.add_argument("--other-language", help="a fit written in as the decision for questions in another "
                    "language than the documents (`otherLanguage`)")
    ap.add_argument("dumps", nargs="+")
    args = ap.parse_args()
    features = BY_WORDS if args.model == "bm25" else BY_MEANING + BY_WORDS
    if args.features:
        features = args.features.split(",")
    dumps = [load(p) for p in args.dumps]
    if args.same_language:
        dumps = [[q for q in d if not q.get("otherLanguage")] for d in dumps]
    kept = None
    if args.keep:
        with open(args.keep) as f:
            kept = json.load(f)
        features = kept["features"]
    data = rows(dumps, features)
    bias, weights = (kept["bias"], kept["weights"]) if kept else fit(data, len(features))
    scored = [(probability(bias, weights, x), y, d) for x, y, _, d, _ in data]
    refuse, uncertain = (kept["refuse"], kept["uncertain"]) if kept else thresholds(scored, dumps)
    about = about_threshold([(p, y, d, row[4]) for (p, y, d), row in zip(scored, data)], uncertain)
    out = {
        "model": args.model,
        "features": features,
        "weights": [round(w, 4) for w, in zip(weights)],
        "bias": round(bias, 4),
        "refuse": round(refuse, 4),
        "uncertain": round(uncertain, 4),
        **({"about": round(about, 4)} if any(row[4] is not None for row in data) else {}),
        "fittedOn": kept["fittedOn"] if kept else [p.rsplit("/", 1)[-1] for p in args.dumps],
        **({"aboutChosenOn": [p.rsplit("/", 1)[-1] for p in args.dumps]} if kept else {}),
        **({"sameLanguageOnly": True} if args.same_language else {}),
    }
    if args.other_language:
        with open(args.other_language) as f:
            out["otherLanguage"] = json.load(f)
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    print(json.dumps(out))
    for d, path in enumerate(args.dumps):
        pos = [p for p, y, dd in scored if y and dd == d]
        neg = [p for p, y, dd in scored if not y and dd == d]
        share = lambda xs, c: sum(1 for x in xs if c(x)) / max(1, len(xs))
        print(f"{path}: positives {len(pos)} refused {share(pos, lambda p: p < refuse):.3f} "
              f"led in {share(pos, lambda p: refuse <= p < uncertain):.3f}; "
              f"negatives {len(neg)} refused {share(neg, lambda p: p < refuse):.3f} "
              f"refused or led in {share(neg, lambda p: p < uncertain):.3f}")


if __name__ == "__main__":
    main()
