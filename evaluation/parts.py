"""Public and private parts of one test set: the split stated, scores per part, the shake-up.

A phase may rank on part of its test items while its board shows another part (Kaggle's
`Usage` column): each item is public, private or ignored. The definition states the rule in
`[parts]` (the shares, the gold-score ranges each dataset is stratified by, which part is
official, how many final runs a team chooses); the split itself is drawn from a seed (each
stratum, a dataset's items in one gold-score range, gives each part its share, rounded up or
down at random so the expected share is exact) or read from the organisers' file of
`dataset, id, usage` rows. Its digest and rule go into every score's signature.

Every metric is computed on the public part, the private part and the whole (public and
private: Pearson and ALLnorm are not additive over parts) by scoring against gold whose other
items are left unscored. The shake-up report compares each team's public and private ranks
with what B fresh stratified splits of the same items give the same runs: a rank change beyond
that null is more than split noise (Roelofs et al., 2019).

Pure: numpy (and scipy for Kendall's tau), no site.
"""

from __future__ import annotations

import csv
import hashlib
import io
import math
from collections.abc import Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from evaluation.inputs import DatasetGold
from evaluation.issues import Issue, ValidationError
from evaluation.partsrule import PartsRule
from evaluation.runs import ValidatedRun
from evaluation.scoring import RunScore, score_run

if TYPE_CHECKING:
    from evaluation.taskdef import TaskDefinition

K = TypeVar("K", bound=Hashable)
T = TypeVar("T", bound=Hashable)

PARTS = ("public", "private", "ignored")
# the parts every metric is computed on; "whole" is public and private together
SCORED_PARTS = ("public", "private", "whole")
_CODE = {"public": 0, "private": 1, "ignored": 2}
_NAME = {code: name for name, code in _CODE.items()}
# what a split file's usage column may say, any case (Kaggle writes Public, Private, Ignored)
_USAGE = {"public": 0, "private": 1, "ignored": 2}
# the seed of the re-splits and of the private ranks' bootstrap (evaluation's default)
NULL_SEED = 12345
# re-split rows drawn and scored at once (a bounded set of weight matrices)
RESPLIT_CHUNK = 100
MAX_ISSUES = 20


# ---------------------------------------------------------------- the split


@dataclass(frozen=True, eq=False)
class ItemParts:
    """Each test item's part, per dataset in its gold's order: 0 public, 1 private, 2 ignored."""

    codes: Mapping[str, np.ndarray]
    ids: Mapping[str, tuple[str, ...]]
    rule: str
    digest: str
    seed: int | None = None

    def mask(self, dataset: str, part: str) -> np.ndarray:
        """Which items of a dataset are in the part ("whole": public and private)."""
        codes = self.codes[dataset]
        if part == "whole":
            return codes != _CODE["ignored"]
        return codes == _CODE[part]

    def counts(self) -> dict[str, dict[str, int]]:
        """Items per dataset and part."""
        return {d: {part: int((c == code).sum()) for part, code in _CODE.items()}
                for d, c in self.codes.items()}

    def size(self, part: str) -> int:
        """Items in a part, over every dataset."""
        return sum(int(self.mask(d, part).sum()) for d in self.codes)

    def text(self) -> str:
        """The split as published with the gold: `dataset<TAB>id<TAB>usage`, a header first."""
        return split_text(self.codes, self.ids)

    def signature(self, part: str) -> dict[str, Any]:
        """What a part's scores state of it: the part, the split's digest and rule."""
        return {"part": part, "digest": self.digest[:12], "rule": self.rule,
                "n": self.size(part)}


def split_text(codes: Mapping[str, np.ndarray], ids: Mapping[str, Sequence[str]]) -> str:
    """`dataset<TAB>id<TAB>usage` lines, datasets in name order, items in gold order."""
    lines = ["dataset\tid\tusage\n"]
    for dataset in sorted(codes):
        names = [_NAME[int(c)] for c in codes[dataset]]
        lines += [f"{dataset}\t{i}\t{u}\n" for i, u in zip(ids[dataset], names, strict=True)]
    return "".join(lines)


def _made(codes: dict[str, np.ndarray], ids: Mapping[str, Sequence[str]], rule: str,
          seed: int | None) -> ItemParts:
    frozen = {}
    for dataset, found in codes.items():
        arr = np.asarray(found, dtype=np.uint8).copy()
        arr.setflags(write=False)
        frozen[dataset] = arr
    kept = {d: tuple(str(i) for i in ids[d]) for d in codes}
    digest = hashlib.sha256(split_text(frozen, kept).encode()).hexdigest()
    return ItemParts(frozen, kept, rule, digest, seed)


def strata(scores: np.ndarray, bins: int) -> np.ndarray:
    """Each item's stratum within its dataset: its equal-width gold-score range between the
    dataset's lowest and highest gold score (0..bins-1); -1 for an item without gold."""
    y = np.asarray(scores, dtype=np.float64)
    out = np.full(len(y), -1, dtype=np.int64)
    known = np.isfinite(y)
    if not known.any():
        return out
    lo, hi = float(y[known].min()), float(y[known].max())
    if hi <= lo or bins == 1:
        out[known] = 0
        return out
    found = np.floor((y[known] - lo) / (hi - lo) * bins).astype(np.int64)
    out[known] = np.minimum(found, bins - 1)
    return out


def _assign(labels: np.ndarray, rule: PartsRule, rng: np.random.Generator,
            rows: int) -> np.ndarray:
    """(rows, n) part codes: each stratum's items in a random order give the public part its
    share, then the ignored part its share (each rounded up or down at random, so the expected
    share is exact), the rest private; every row drawn afresh."""
    out = np.full((rows, len(labels)), _CODE["private"], dtype=np.uint8)
    for stratum in np.unique(labels):
        where = np.flatnonzero(labels == stratum)
        m = len(where)
        ranks = rng.random((rows, m)).argsort(axis=1).argsort(axis=1)
        k_public = np.floor(rule.public * m + rng.random(rows)).astype(np.int64)
        k_ignored = np.minimum(np.floor(rule.ignored * m + rng.random(rows)).astype(np.int64),
                               m - k_public)
        codes = np.where(ranks < k_public[:, None], _CODE["public"],
                         np.where(ranks < (k_public + k_ignored)[:, None], _CODE["ignored"],
                                  _CODE["private"]))
        out[:, where] = codes
    return out


def _dataset_rng(seed: int, dataset: str) -> np.random.Generator:
    """Each dataset's own generator: a dataset's items are drawn alike whatever other datasets
    the gold holds (a split extended by a dataset's late gold keeps the others')."""
    return np.random.default_rng([int(seed), *dataset.encode()])


def draw_parts(gold: Mapping[str, DatasetGold], rule: PartsRule, *, seed: int,
               keep: ItemParts | None = None) -> ItemParts:
    """The split drawn from a seed: the same gold, rule and seed give the same split. keep: a
    split drawn before from the same seed, whose datasets (with the same items) stay as drawn."""
    codes = {}
    for dataset in sorted(gold):
        g = gold[dataset]
        if (keep is not None and dataset in keep.codes
                and keep.ids[dataset] == tuple(str(i) for i in g.ids)):
            codes[dataset] = keep.codes[dataset]
            continue
        labels = strata(g.scores, rule.bins)
        codes[dataset] = _assign(labels, rule, _dataset_rng(seed, dataset), 1)[0]
    # the seed is no part of the stated rule: it stays secret until the reveal (signatures
    # state the rule and the split's digest, which the published split then matches)
    return _made(codes, {d: gold[d].ids for d in codes}, rule.statement(), seed)


def covers(parts: ItemParts, gold: Mapping[str, DatasetGold]) -> bool:
    """Whether the split assigns every item of every dataset of the gold."""
    return all(d in parts.codes and parts.ids[d] == tuple(str(i) for i in g.ids)
               for d, g in gold.items())


def fresh_splits(gold: Mapping[str, DatasetGold], rule: PartsRule, count: int, *,
                 seed: int = NULL_SEED, chunk: int = RESPLIT_CHUNK
                 ) -> Iterator[dict[str, np.ndarray]]:
    """`count` fresh splits of the same items by the same rule, `chunk` rows at a time: per
    dataset a (rows, n) array of part codes (the null the shake-up report compares with)."""
    rng = np.random.default_rng(seed)
    labels = {d: strata(gold[d].scores, rule.bins) for d in sorted(gold)}
    done = 0
    while done < count:
        rows = min(chunk, count - done)
        yield {d: _assign(labels[d], rule, rng, rows) for d in sorted(gold)}
        done += rows


def read_parts(data: bytes, ids: Mapping[str, Sequence[str]], *, filename: str,
               rule: PartsRule) -> ItemParts:
    """The organisers' split file: a header naming `dataset` (optional for a task of one
    dataset), `id` and `usage` (public, private or ignored, any case), comma- or TAB-separated;
    every item of every dataset exactly once. ValidationError lists the problems by line."""
    issues: list[Issue] = []
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise ValidationError(Issue(filename, None, "not UTF-8 text", "encoding")) from None
    first = text.split("\n", 1)[0]
    delimiter = "\t" if "\t" in first else ","
    rows = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)
    header = [h.strip().lower() for h in next(rows, [])]
    usage_col = next((header.index(n) for n in ("usage", "part") if n in header), None)
    if "id" not in header or usage_col is None:
        raise ValidationError(Issue(filename, 1, "the header must name the columns dataset, id "
                                    "and usage (found: " + ", ".join(header) + ")", "header"))
    id_col = header.index("id")
    ds_col = header.index("dataset") if "dataset" in header else None
    if ds_col is None and len(ids) != 1:
        raise ValidationError(Issue(filename, 1, "the header must name a dataset column: the "
                                    f"task has {len(ids)} datasets", "header"))
    position = {d: {str(k): j for j, k in enumerate(found)} for d, found in ids.items()}
    codes = {d: np.full(len(found), 255, dtype=np.uint8) for d, found in ids.items()}
    only = next(iter(ids)) if ds_col is None else None

    def problem(line: int, message: str, code: str) -> None:
        if len(issues) < MAX_ISSUES:
            issues.append(Issue(filename, line, message, code))
        elif len(issues) == MAX_ISSUES:
            issues.append(Issue(filename, None, "… and more problems", code))

    for line, row in enumerate(rows, start=2):
        if not row or not any(cell.strip() for cell in row):
            continue
        needed = max(id_col, usage_col, ds_col or 0)
        if len(row) <= needed:
            problem(line, f"expected {needed + 1} columns, found {len(row)}", "column-count")
            continue
        dataset = only if ds_col is None else row[ds_col].strip()
        item = row[id_col].strip()
        usage = _USAGE.get(row[usage_col].strip().lower())
        if dataset not in position:
            problem(line, f"unknown dataset {dataset!r}", "unknown-dataset")
        elif item not in position[dataset]:
            problem(line, f"{dataset} has no item {item!r}", "unknown-id")
        elif usage is None:
            problem(line, f"usage {row[usage_col].strip()!r} is not public, private or "
                          "ignored", "bad-usage")
        elif codes[dataset][position[dataset][item]] != 255:
            problem(line, f"{dataset} item {item!r} is given twice", "duplicate-id")
        else:
            codes[dataset][position[dataset][item]] = usage
    for dataset, found in codes.items():
        missing = int((found == 255).sum())
        if missing:
            problem(0, f"{missing} item(s) of {dataset} have no usage (every item is public, "
                       "private or ignored)", "missing-id")
    if not issues and not any((c == _CODE["private"]).any() for c in codes.values()):
        problem(0, "no item is private: the private part would be empty", "no-private")
    if issues:
        raise ValidationError(issues)
    return _made(codes, ids, rule.statement(), None)


# ---------------------------------------------------------------- scores per part


def part_gold(gold: Mapping[str, DatasetGold], parts: ItemParts,
              part: str) -> dict[str, DatasetGold]:
    """The gold with every item outside the part left unscored (its digest names the part)."""
    out = {}
    for dataset, g in gold.items():
        if dataset not in parts.codes:
            raise ValueError(f"the split has no dataset {dataset}")
        if tuple(str(i) for i in g.ids) != parts.ids[dataset]:
            raise ValueError(f"the split's items of {dataset} are not the gold's")
        keep = parts.mask(dataset, part)
        digest = hashlib.sha256(f"{g.digest}|{parts.digest}|{part}".encode()).hexdigest()
        out[dataset] = replace(
            g, scores=np.where(keep, g.scores, np.nan), digest=digest,
            annotators=tuple(np.where(keep, a, np.nan) for a in g.annotators))
    return out


def score_part(task: TaskDefinition, run: ValidatedRun, gold: Mapping[str, DatasetGold],
               parts: ItemParts, part: str, **options: Any) -> RunScore:
    """The run scored on one part: every metric, its CI and signature, on that part's items."""
    score = score_run(task, run, part_gold(gold, parts, part), **options)
    for dataset, ds in score.datasets.items():
        inside = parts.mask(dataset, part)
        # items outside the part are not this score's, not "unscored" ones
        ds.unscored_pairs = max(0, int((~np.isfinite(gold[dataset].scores) & inside).sum())
                                - ds.excluded_pairs)
    mark = f"|part:{part}@{parts.digest[:8]}"
    for _, value in score.metric_values():
        value.signature += mark
    score.signature["parts"] = parts.signature(part)
    return score


def score_parts(task: TaskDefinition, run: ValidatedRun, gold: Mapping[str, DatasetGold],
                parts: ItemParts, **options: Any) -> dict[str, RunScore]:
    """The run scored on the public part, the private part and the whole."""
    return {part: score_part(task, run, gold, parts, part, **options) for part in SCORED_PARTS}


# ---------------------------------------------------------------- the shake-up report


def part_resamples(gold: Mapping[str, DatasetGold], parts: ItemParts, part: str, count: int,
                   *, seed: int = NULL_SEED, chunk: int = RESPLIT_CHUNK
                   ) -> Iterator[tuple[int, dict[str, np.ndarray]]]:
    """Bootstrap resamples of one part's items as counts over each dataset's gold pairs (0
    outside the part): each dataset's part drawn with replacement, as many draws as it has
    items, `chunk` resamples at a time; every run scored on them is resampled alike."""
    rng = np.random.default_rng(seed)
    inside = {d: np.flatnonzero(parts.mask(d, part)) for d in sorted(gold)}
    done = 0
    while done < count:
        rows = min(chunk, count - done)
        out = {}
        for d, where in inside.items():
            n = len(gold[d])
            drawn = where[rng.integers(0, len(where), size=(rows, len(where)))] if len(where) \
                else np.zeros((rows, 0), dtype=np.int64)
            flat = (np.arange(rows)[:, None] * n + drawn).ravel()
            out[d] = np.bincount(flat, minlength=rows * n).reshape(rows, n).astype(np.float64)
        yield rows, out
        done += rows


def official_metric(task: TaskDefinition) -> str:
    """The metric the boards rank on first (the definition's primary where it ranks)."""
    from evaluation.ranking import ranking_keys  # on use: the scorer's start needs no ranking

    keys = ranking_keys(task)
    return task.primary_metric if task.primary_metric in keys else keys[0]


def ranks_of(values: np.ndarray) -> np.ndarray:
    """Competition ranks (1 = best, ties share the better rank) along the last axis; higher
    values are better."""
    v = np.atleast_2d(np.asarray(values, dtype=np.float64))
    out = np.empty(v.shape, dtype=np.int64)
    for i, row in enumerate(v):
        ascending = np.sort(row)
        out[i] = len(row) - np.searchsorted(ascending, row, side="right") + 1
    return out.reshape(np.shape(values))


def kendall_tau(a: Sequence[float], b: Sequence[float]) -> dict[str, float | None]:
    """Kendall's tau-b between two rankings, with its two-sided p-value from the normal
    approximation corrected for ties (scipy's "asymptotic" method); None where undefined.
    Pairs are counted in blocks (teams, not items: thousands at most)."""
    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    n = len(x)
    if n < 2:
        return {"tau": None, "p_value": None}
    concordance = 0.0
    for start in range(0, n, 512):  # each block against every later item
        block = slice(start, min(n, start + 512))
        sx = np.sign(x[block, None] - x[None, :])
        sy = np.sign(y[block, None] - y[None, :])
        later = np.arange(n)[None, :] > np.arange(n)[block, None]
        concordance += float((sx * sy * later).sum())

    def tied(values: np.ndarray) -> np.ndarray:
        return np.unique(values, return_counts=True)[1].astype(np.float64)

    t, u = tied(x), tied(y)
    pairs = n * (n - 1) / 2
    ties_x, ties_y = float((t * (t - 1) / 2).sum()), float((u * (u - 1) / 2).sum())
    denominator = math.sqrt((pairs - ties_x) * (pairs - ties_y))
    if denominator == 0:
        return {"tau": None, "p_value": None}
    tau = concordance / denominator
    var = ((n * (n - 1) * (2 * n + 5) - float((t * (t - 1) * (2 * t + 5)).sum())
            - float((u * (u - 1) * (2 * u + 5)).sum())) / 18
           + float((t * (t - 1)).sum()) * float((u * (u - 1)).sum()) / (2 * n * (n - 1))
           + (float((t * (t - 1) * (t - 2)).sum()) * float((u * (u - 1) * (u - 2)).sum())
              / (9 * n * (n - 1) * (n - 2)) if n > 2 else 0.0))
    p = math.erfc(abs(concordance) / math.sqrt(2 * var)) if var > 0 else None
    return {"tau": max(-1.0, min(1.0, tau)), "p_value": p}


def _teams_best(values: np.ndarray, groups: Sequence[np.ndarray]) -> np.ndarray:
    """(rows, teams): each team's best value over its columns."""
    return np.stack([values[:, cols].max(axis=1) for cols in groups], axis=1)


def _best_finals(public: np.ndarray, official: np.ndarray, runs_of: Sequence[np.ndarray],
                 finals: Sequence[np.ndarray | None], n_final: int) -> np.ndarray:
    """(rows, teams): each team's best official value over its final runs; a team that chose
    none takes its n_final best public runs of the row (the fallback, split by split)."""
    out = np.empty((public.shape[0], len(runs_of)))
    for t, (cols, chosen) in enumerate(zip(runs_of, finals, strict=True)):
        if chosen is not None:
            out[:, t] = official[:, chosen].max(axis=1)
            continue
        order = np.argsort(-public[:, cols], axis=1, kind="stable")[:, :n_final]
        picked = np.take_along_axis(official[:, cols], order, axis=1)
        out[:, t] = picked.max(axis=1)
    return out


@dataclass
class Shakeup:
    """The shake-up report of a phase: per team its public and private standing, the change,
    the private rank's CI, and where the change falls in the null of fresh splits."""

    metric: str
    official: str
    teams: list[dict[str, Any]]
    kendall: dict[str, float | None]
    settings: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON form (what the site stores and serves)."""
        flagged = sum(1 for t in self.teams if t["flagged"])
        return {"metric": self.metric, "official": self.official, "teams": self.teams,
                "kendall_tau": self.kendall, "flagged": flagged, **self.settings}


def shakeup(task: TaskDefinition, runs: Mapping[K, ValidatedRun], team_of: Mapping[K, T],
            finals: Mapping[T, Sequence[K]], chosen: Mapping[T, bool],
            gold: Mapping[str, DatasetGold], parts: ItemParts, rule: PartsRule, *,
            submitted: Mapping[T, int] | None = None, metric: str | None = None,
            resplits: int | None = None, resamples: int | None = None,
            seed: int = NULL_SEED) -> Shakeup:
    """The shake-up report of these runs (every current run of every team) on this split.

    A team's public score is its best run on the public part (its place on the public board);
    its private score is the best of its final runs on the official part. The change is public
    rank minus private rank (positive: it moved up). The private rank's 95% interval comes from
    the paired bootstrap of the official part's items (every run resampled alike). The null:
    the same runs rescored on `resplits` fresh splits by the same rule (a team that chose no
    final runs takes its best public ones of each split, as the fallback did); a change's
    p-value is the share of splits moving the team at least as far, counting the observed one,
    and a change with p <= alpha is flagged. Kendall's tau-b compares the two rankings.
    """
    from evaluation.significance import subset_values  # on use: heavy imports

    metric = metric or official_metric(task)
    sign = -1.0 if task.lower_is_better(metric) else 1.0
    keys = list(runs)
    column = {k: j for j, k in enumerate(keys)}
    teams = list(dict.fromkeys(team_of[k] for k in keys))
    runs_of = [np.array([column[k] for k in keys if team_of[k] == t]) for t in teams]
    final_cols = [np.array([column[k] for k in finals.get(t, ()) if k in column]) for t in teams]
    fixed: list[np.ndarray | None] = [
        cols if chosen.get(t) and len(cols) else None for t, cols in zip(teams, final_cols,
                                                                        strict=True)]
    listed = [runs[k] for k in keys]
    official = rule.official

    def masks(part: str) -> dict[str, np.ndarray]:
        return {d: parts.mask(d, part)[None, :] for d in gold}

    observed_pub = sign * subset_values(task, listed, gold, metric, [(1, masks("public"))])
    observed_off = sign * subset_values(task, listed, gold, metric, [(1, masks(official))])
    # the observed finals are the stored ones (chosen, or the fallback written at the close)
    stated = [cols if len(cols) else None for cols in final_cols]
    team_pub = _teams_best(observed_pub, runs_of)[0]
    team_off = _best_finals(observed_pub, observed_off, runs_of, stated, rule.final_runs)[0]
    pub_rank, off_rank = ranks_of(team_pub), ranks_of(team_off)
    change = pub_rank - off_rank

    # the private rank's interval: the official part's items resampled, every run alike
    boots = rule.resamples if resamples is None else resamples
    interval: list[tuple[int, int] | None] = [None] * len(teams)
    if boots:
        boot = sign * subset_values(task, listed, gold, metric,
                                    part_resamples(gold, parts, official, boots, seed=seed))
        ranked = ranks_of(_best_finals(np.broadcast_to(observed_pub, boot.shape), boot, runs_of,
                                       stated, rule.final_runs))
        lo = np.floor(np.quantile(ranked, 0.025, axis=0)).astype(int)
        hi = np.ceil(np.quantile(ranked, 0.975, axis=0)).astype(int)
        interval = [(int(a), int(b)) for a, b in zip(lo, hi, strict=True)]

    # the null: the same runs on fresh splits of the same items, by the same rule
    count = rule.resplits if resplits is None else resplits
    drawn = list(fresh_splits(gold, rule, count, seed=seed)) if count else []

    def weights(part: str) -> Iterator[tuple[int, dict[str, np.ndarray]]]:
        for codes in drawn:
            rows = next(iter(codes.values())).shape[0]
            yield rows, {d: (c != _CODE["ignored"]) if part == "whole" else (c == _CODE[part])
                         for d, c in codes.items()}

    beyond = np.zeros(len(teams), dtype=np.int64)
    below = np.zeros(len(teams), dtype=np.int64)
    if drawn:
        pub = sign * subset_values(task, listed, gold, metric, weights("public"))
        off = sign * subset_values(task, listed, gold, metric, weights(official))
        moved = (ranks_of(_teams_best(pub, runs_of))
                 - ranks_of(_best_finals(pub, off, runs_of, fixed, rule.final_runs)))
        beyond = (np.abs(moved) >= np.abs(change)[None, :]).sum(axis=0)
        below = (np.abs(moved) < np.abs(change)[None, :]).sum(axis=0)
    p_values = (1 + beyond) / (1 + count) if count else np.full(len(teams), np.nan)
    tau = kendall_tau(pub_rank.tolist(), off_rank.tolist())
    report = []
    for t, team in enumerate(teams):
        best_final = None
        kept = stated[t]
        cols = kept if kept is not None else runs_of[t]
        if len(cols):
            best_final = keys[int(cols[np.argmax(observed_off[0, cols])])]
        ci = interval[t]
        report.append({
            "team": team, "runs": int((submitted or {}).get(team, len(runs_of[t]))),
            "public": float(sign * team_pub[t]), "private": float(sign * team_off[t]),
            "gap": float(sign * (team_pub[t] - team_off[t])),
            "public_rank": int(pub_rank[t]), "private_rank": int(off_rank[t]),
            "change": int(change[t]),
            "private_rank_ci": list(ci) if ci is not None else None,
            "null_percentile": (float(100.0 * below[t] / count) if count else None),
            "p_value": float(p_values[t]) if count else None,
            "flagged": bool(count and p_values[t] <= rule.alpha),
            "counted_run": best_final, "chose": bool(chosen.get(team)),
        })
    report.sort(key=lambda r: (r["private_rank"], r["public_rank"], str(r["team"])))
    return Shakeup(metric, official, report, tau, {
        "resplits": count, "resamples": boots, "seed": seed, "alpha": rule.alpha,
        "rule": parts.rule, "parts_digest": parts.digest, "teams_count": len(teams),
        "runs_count": len(keys), "final_runs": rule.final_runs,
        "test": "rank change against fresh stratified splits (Monte Carlo p, observed split "
                "counted); private rank CI: paired bootstrap percentile 95%"})

