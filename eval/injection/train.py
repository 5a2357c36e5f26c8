#!/usr/bin/env python3
"""Trains the `injection-model` deep rule's weights: a logistic regression over hashed word,
word-pair and in-word character features, scored per window of text, the text's score being
its highest window's, at two window sizes. Trained on dev.jsonl only (from build.py); the threshold is picked from
out-of-fold scores on dev, never from held-out or unseen rows.

    target/eval/venv/bin/python eval/injection/train.py [CORPUS_DIR] [OUT_FILE]
        # defaults: target/eval/injection, src/deep/injection_model.bin
    target/eval/venv/bin/python eval/injection/train.py --eval FILE.jsonl   # quick look
    target/eval/venv/bin/python eval/injection/train.py --loso [CORPUS_DIR]  # never-seen estimate
    target/eval/venv/bin/python eval/injection/train.py --loso --sources=K   # trained on K others

The venv needs numpy, scipy and scikit-learn. The features and the file format are read back
by src/deep/model.rs; `features()` below and `Features` there must stay the same function
(tests/fixtures/injection_model_scores.json, written by --fixture, checks that they do).

File format (little endian): b"TGNM", u32 version (2), u32 log2 of the bucket count, u32
window and stride tokens, u32 short window and stride tokens, f32 bias, f32 scale, f32
threshold logit for long windows and for short ones, then one i8 weight per bucket (the
weight is i8 * scale). A text's score is the larger of its best long window's logit less the
long threshold and its best short window's logit less the short one.
"""
import hashlib
import json
import math
import os
import random
import re
import struct
import sys

import numpy as np
from scipy import sparse
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GroupKFold

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))

BITS = 18
WINDOW = 64
STRIDE = 32
CHAR_N = 4
C = 8.0
# The highest benign false-positive rate (out of fold, on dev) the threshold may allow.
TARGET_FPR = 0.02
MIL_ROUNDS = 2
# The same weights also score short windows, with a threshold of their own: an attacker
# chooses what surrounds an instruction, and in a long window ordinary prose around a short
# instruction can outweigh it.
SHORT_WINDOW = 16
SHORT_STRIDE = 8

FNV_OFFSET = 0xCBF29CE484222325
FNV_PRIME = 0x100000001B3
MASK64 = (1 << 64) - 1


def fnv(data: bytes) -> int:
    h = FNV_OFFSET
    for b in data:
        h = ((h ^ b) * FNV_PRIME) & MASK64
    return h


def tokens(text):
    """Maximal runs of alphanumeric characters, lowercased."""
    out, cur = [], []
    for ch in text:
        if ch.isalnum():
            cur.append(ch.lower())
        elif cur:
            out.append("".join(cur))
            cur = []
    if cur:
        out.append("".join(cur))
    return out


def token_features(toks):
    """Per token i: (the features of the token alone: the word and the character n-grams of
    the padded word; the feature of the pair it starts, None for the last token)."""
    mask = (1 << BITS) - 1
    per = []
    for i, t in enumerate(toks):
        own = [fnv(b"w" + t.encode()) & mask]
        cs = list("<" + t + ">")
        for j in range(0, max(1, len(cs) - CHAR_N + 1)):
            own.append(fnv(b"c" + "".join(cs[j:j + CHAR_N]).encode()) & mask)
        pair = fnv(b"b" + t.encode() + b" " + toks[i + 1].encode()) & mask if i + 1 < len(toks) else None
        per.append((own, pair))
    return per


def windows(n, window, stride):
    """(start, end) token ranges: one window for a short text, else `window` tokens every
    `stride`, the last one ending at the text's end."""
    if n <= window:
        return [(0, n)]
    starts = list(range(0, n - window + 1, stride))
    if starts[-1] + window < n:
        starts.append(n - window)
    return [(s, s + window) for s in starts]


def window_rows(text, window=None, stride=None):
    """Each window's feature occurrences (a feature may occur more than once)."""
    per = token_features(tokens(text))
    rows = []
    for s, e in windows(len(per), window or WINDOW, stride or STRIDE):
        feats = []
        for i in range(s, e):
            own, pair = per[i]
            feats.extend(own)
            # The pair a window's last token starts reaches outside the window.
            if pair is not None and i + 1 < e:
                feats.append(pair)
        rows.append(feats)
    return rows or [[]]


# What the `pii` rule redacts before a deep rule reads a text, and the model then leaves out
# (`without_redaction_marks` in src/deep/model.rs): the model learns from what it will see.
PII = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+"
                 r"|\b[A-Z]{2}\d{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,3})?\b"
                 r"|\+?\d[\d ()-]{7,}\d")


def load(path):
    with open(path) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    for r in rows:
        r["text"] = PII.sub(" ", r["text"])
    return rows


def matrix(rowlists):
    """A window's vector: each feature's count over the square root of the window's feature
    occurrences, so its score is the sum of its occurrences' weights over that root, which the
    Rust side computes in one pass without deduplicating."""
    indptr, indices, data = [0], [], []
    for feats in rowlists:
        v = 1.0 / math.sqrt(len(feats)) if feats else 0.0
        indices.extend(feats)
        data.extend([v] * len(feats))
        indptr.append(len(indices))
    m = sparse.csr_matrix((np.array(data, dtype=np.float64), np.array(indices, dtype=np.int64),
                           np.array(indptr, dtype=np.int64)), shape=(len(rowlists), 1 << BITS))
    m.sum_duplicates()
    return m


class Doc:
    def __init__(self, row):
        self.label = 1 if row["label"] == "attack" else 0
        self.group = row["family"]
        self.source = row["source"]
        self.text = row["text"]
        self.rows = window_rows(row["text"])
        self.X = matrix(self.rows)
        self.Xs = matrix(window_rows(row["text"], SHORT_WINDOW, SHORT_STRIDE))


def fit(docs):
    """Multiple-instance training: first every window of an attack is positive; then only the
    best-scoring window of each attack (its carrier's windows are not evidence either way)."""
    pos_pick = [None] * len(docs)
    model = None
    for _ in range(MIL_ROUNDS + 1):
        Xs, ys = [], []
        for i, d in enumerate(docs):
            if d.label == 0:
                Xs.append(d.X)
                ys.extend([0] * d.X.shape[0])
            elif pos_pick[i] is None:
                Xs.append(d.X)
                ys.extend([1] * d.X.shape[0])
            else:
                Xs.append(d.X[pos_pick[i]])
                ys.append(1)
        X = sparse.vstack(Xs).tocsr()
        model = LogisticRegression(C=C, max_iter=2000, class_weight="balanced")
        model.fit(X, np.array(ys))
        for i, d in enumerate(docs):
            if d.label == 1:
                pos_pick[i] = int(np.argmax(d.X @ model.coef_[0]))
    return model.coef_[0].astype(np.float64), float(model.intercept_[0])


def doc_scores(docs, w, b):
    """Per text: (best long window's logit, best short window's logit)."""
    return np.array([[float(np.max(d.X @ w) + b), float(np.max(d.Xs @ w) + b)] for d in docs])


def combined(scores, t, ts):
    return np.maximum(scores[:, 0] - t, scores[:, 1] - ts)


def quantize(w):
    scale = float(np.max(np.abs(w))) / 127.0 or 1.0
    q = np.clip(np.round(w / scale), -127, 127).astype(np.int8)
    return q, scale


def threshold_at(scores, fpr):
    benign = np.sort(scores)
    k = int(math.floor(fpr * len(benign)))
    # The smallest threshold with at most k benign scores at or above it.
    return float(benign[len(benign) - k - 1] + 1e-6) if len(benign) > k else -math.inf


def pick_thresholds(scores, labels):
    """Half the false-positive budget to each scale; the union stays within the budget."""
    b = scores[labels == 0]
    return threshold_at(b[:, 0], TARGET_FPR / 2), threshold_at(b[:, 1], TARGET_FPR / 2)


def report(name, scores, labels, t=0.0):
    a = labels == 1
    flagged = float(np.mean(scores[a] >= t)) if a.any() else float("nan")
    fp = float(np.mean(scores[~a] >= t)) if (~a).any() else float("nan")
    print(f"{name}: {int(a.sum())} attacks {flagged:.1%} flagged, {int((~a).sum())} benign {fp:.2%} flagged")


def save(path, q, scale, b, t, ts):
    with open(path, "wb") as f:
        f.write(b"TGNM")
        f.write(struct.pack("<IIIIII", 2, BITS, WINDOW, STRIDE, SHORT_WINDOW, SHORT_STRIDE))
        f.write(struct.pack("<ffff", b, scale, t, ts))
        f.write(q.tobytes())


def read(path):
    raw = open(path, "rb").read()
    b, scale, t, ts = struct.unpack("<ffff", raw[28:44])
    q = np.frombuffer(raw[44:], dtype=np.int8).astype(np.float64)
    return q * scale, b, t, ts


def source_folds(docs, keep=None):
    """Leave one attack source out: each fold tests one source's attacks, with a share of the
    benign groups, on a model trained on the other sources. Template-grouped folds let a
    source's other templates teach its style; these do not, so they estimate what a source the
    project has never seen will meet. With `keep`, each fold trains on the attacks of only
    that many of the other sources (drawn at random, the same draw every run): how the
    estimate grows with the number of sources says what more data would buy."""
    sources = sorted({d.source for d in docs if d.label == 1})
    benign_groups = sorted({d.group for d in docs if d.label == 0},
                           key=lambda g: hashlib.sha256(g.encode()).hexdigest())
    fold_of = {g: j % len(sources) for j, g in enumerate(benign_groups)}
    folds = []
    for j, src in enumerate(sources):
        test = [i for i, d in enumerate(docs)
                if (d.source == src if d.label == 1 else fold_of[d.group] == j)]
        held = set(test)
        train = [i for i in range(len(docs)) if i not in held]
        if keep:
            others = [s for s in sources if s != src]
            chosen = set(random.Random(j).sample(others, min(keep, len(others))))
            train = [i for i in train if docs[i].label == 0 or docs[i].source in chosen]
        folds.append((train, test))
    return folds


def report_by_source(docs, scores):
    per = {}
    for d, s in zip(docs, scores):
        hit = per.setdefault((d.label, d.source), [0, 0])
        hit[0] += int(s >= 0)
        hit[1] += 1
    rates = []
    for (label, src), (k, n) in sorted(per.items(), key=lambda kv: (-kv[0][0], kv[0][1])):
        print(f"  {'attack' if label else 'benign'} {src:24} {k}/{n} = {k / n:.1%}")
        if label:
            rates.append(k / n)
    print(f"  mean over attack sources: {sum(rates) / len(rates):.1%}")


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    if "--eval" in sys.argv:
        w, b, t, ts = read(os.path.join(ROOT, "src", "deep", "injection_model.bin"))
        for path in args:
            docs = [Doc(r) for r in load(path)]
            labels = np.array([d.label for d in docs])
            report(os.path.basename(path), combined(doc_scores(docs, w, b), t, ts), labels)
        return
    if "--fixture" in sys.argv:
        w, b, t, ts = read(os.path.join(ROOT, "src", "deep", "injection_model.bin"))
        texts = json.load(open(args[0]))
        out = [{"text": x, "logit": float(combined(doc_scores([Doc({"label": "benign", "family": "", "text": x})],
                                                               w, b), t, ts)[0])} for x in texts]
        json.dump(out, open(args[1], "w"), indent=1, ensure_ascii=False)
        return
    corpus = args[0] if args else os.path.join(ROOT, "target", "eval", "injection")
    out = args[1] if len(args) > 1 else os.path.join(ROOT, "src", "deep", "injection_model.bin")
    docs = [Doc(r) for r in load(os.path.join(corpus, "dev.jsonl"))]
    labels = np.array([d.label for d in docs])
    groups = np.array([d.group for d in docs])
    oof = np.zeros((len(docs), 2))
    loso = "--loso" in sys.argv
    keep = next((int(a.split("=", 1)[1]) for a in sys.argv if a.startswith("--sources=")), None)
    folds = source_folds(docs, keep) if loso else list(GroupKFold(n_splits=5).split(docs, labels, groups))
    for k, (tr, te) in enumerate(folds):
        w, b = fit([docs[i] for i in tr])
        q, scale = quantize(w)
        oof[te] = doc_scores([docs[i] for i in te], q.astype(np.float64) * scale, b)
        print(f"fold {k + 1}/{len(folds)} done", file=sys.stderr)
    t, ts = pick_thresholds(oof, labels)
    report("dev out-of-fold" + (", each attack source left out" if loso else ""), combined(oof, t, ts), labels)
    report_by_source(docs, combined(oof, t, ts))
    if loso:
        return
    report("dev out-of-fold, long windows only", oof[:, 0] - t, labels)
    w, b = fit(docs)
    q, scale = quantize(w)
    save(out, q, scale, b, t, ts)
    print(f"wrote {out}: {os.path.getsize(out)} bytes, bias {b:.3f}, thresholds {t:.3f} {ts:.3f}")


if __name__ == "__main__":
    main()
