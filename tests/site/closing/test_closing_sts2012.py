"""End to end: STS 2012 hosted, runs with descriptions, a run reassigned, a gold file
corrected, Tables 1-3 and the bundle exported, and their contents checked."""

from __future__ import annotations

import csv
import io
import json
import shutil
import zipfile
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

DATASETS = ["MSRpar", "MSRvid", "SMTeuroparl", "surprise.OnWN", "surprise.SMTnews"]
T0 = datetime(2012, 4, 1, tzinfo=UTC)


class Clock:
    """The site's notion of now, moved by the test."""

    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now


def _run(test_dir, seed: int, noise: float, confidence: str = "varied") -> dict[str, bytes]:
    """Gold plus seeded noise; the confidence column varies, is constant, or is absent."""
    rng = np.random.default_rng(seed)
    files = {}
    for name in DATASETS:
        gold = np.loadtxt(test_dir / f"STS.gs.{name}.txt")
        values = np.clip(gold + rng.normal(0, noise, len(gold)), 0, 5)
        if confidence == "varied":
            text = "".join(f"{v:.4f}\t{rng.integers(1, 101)}\n" for v in values)
        elif confidence == "uniform":
            text = "".join(f"{v:.4f}\t100\n" for v in values)
        else:
            text = "".join(f"{v:.4f}\n" for v in values)
        files[f"STS.output.{name}.txt"] = text.encode()
    return files


def _form(name: str, files: dict[str, bytes], **fields) -> dict:
    data: dict = {"name": name, "files": [(io.BytesIO(d), fn) for fn, d in files.items()]}
    data.update(fields)
    return data


@pytest.mark.slow
def test_sts2012_closing_workflow(app, client, shared_data, tmp_path):
    test_dir = shared_data / "sts2012" / "test"
    clock = Clock()
    app.config["SEMBOARD_CLOCK"] = clock
    runner = app.test_cli_runner()

    def cli(*args: str, ok: bool = True) -> str:
        result = runner.invoke(args=list(args))
        assert (result.exit_code == 0) == ok, result.output
        return result.output

    cli("user", "create", "org@sts.org", "--password", "organiser-pw")
    cli("task", "load", "sts2012", "--inputs", str(test_dir))
    cli("task", "organiser", "sts2012", "org@sts.org")
    cli("task", "phase", "sts2012", "evaluation", "--kind", "evaluation",
        "--opens", T0.isoformat(), "--closes", (T0 + timedelta(days=10)).isoformat(),
        "--max-runs", "3", "--visibility", "hidden")
    cli("gold", "upload", "sts2012", str(test_dir))
    tokens = {}
    for team in ("ntnu", "ukp", "sranjans"):
        cli("user", "create", f"{team}@example.org", "--password", f"{team}-password")
        with app.app_context():
            from semboard.db import get_session
            from semboard.services.people import accounts, teams
            from semboard.services.tasks import tasks

            session = get_session()
            teams.create_team(session, task=tasks.get_task(session, "sts2012"),
                              captain=accounts.user_by_email(session, f"{team}@example.org"),
                              name=team, affiliation="", now=T0)
            session.commit()
        tokens[team] = {"Authorization": "Bearer " + cli("token", "create",
                                                         f"{team}@example.org").strip()}

    def submit(team: str, name: str, files: dict[str, bytes], **fields):
        return client.post("/api/v1/tasks/sts2012/runs", data=_form(name, files, **fields),
                           headers=tokens[team], content_type="multipart/form-data")

    clock.now = T0 + timedelta(days=1)
    # A description with an option the definition does not know: nothing is stored.
    bad = submit("ntnu", "run1", _run(test_dir, 1, 0.6), resources=["WordNet", "BabelNet"])
    assert bad.status_code == 422 and "BabelNet" in json.dumps(bad.get_json())
    uploaded = {}
    plan = [  # team, run, noise, confidence, description fields
        ("ntnu", "run1", 0.6, "varied", {"description": "Regression over lexical features.",
                                         "resources": ["WordNet", "Wikipedia"],
                                         "tools": ["lemmatizer", "machine learning"],
                                         "paper": "https://aclanthology.org/S12-1060"}),
        ("ntnu", "run2", 0.9, "uniform", {"resources": ["WordNet"], "tools": ["SMT"]}),
        ("ukp", "run1", 0.5, "none", {"description": "Text similarity measures.",
                                      "resources": ["Wikipedia", "stop words"],
                                      "tools": ["string similarity", "machine learning"]}),
        # uploaded by the wrong account: this is ntnu's third run
        ("sranjans", "run3", 1.2, "varied", {"resources": ["WordNet"]}),
    ]
    ids = {}
    for team, name, noise, confidence, fields in plan:
        files = _run(test_dir, len(ids) + 10, noise, confidence)
        response = submit(team, name, files, **fields)
        assert response.status_code == 201, response.get_json()
        body = response.get_json()
        ids[(team, name)] = body["id"]
        uploaded[body["id"]] = files
    described = client.get(f"/api/v1/runs/{ids[('ntnu', 'run1')]}", headers=tokens["ntnu"])
    assert described.get_json()["description"] == {
        "text": "Regression over lexical features.",
        "answers": {"resources": ["Wikipedia", "WordNet"],
                    "tools": ["lemmatizer", "machine learning"],
                    "paper": "https://aclanthology.org/S12-1060"}}
    # The team edits a description before the phase closes; afterwards it is frozen.
    edit = client.put(f"/api/v1/runs/{ids[('ntnu', 'run2')]}/description",
                      json={"description": "Cosine baseline plus SMT.", "resources": ["WordNet"],
                            "tools": ["SMT", "alignment"]}, headers=tokens["ntnu"])
    assert edit.status_code == 200, edit.get_json()
    cli("baselines", "run", "sts2012", "--system", "tokencos", "--phase", "evaluation",
        "--no-queue")

    # The organiser gives the misfiled run to ntnu, with a reason (slots checked, audited).
    wrong = ids[("sranjans", "run3")]
    out = cli("audit", "move-run", str(wrong), "ukp", "--reason", "no", ok=True)
    assert "moved from sranjans to ukp" in out
    cli("audit", "move-run", str(wrong), "sranjans", "--reason", "undo")
    assert "--reason" in cli("audit", "move-run", str(wrong), "ntnu", ok=False)
    out = cli("audit", "move-run", str(wrong), "ntnu", "--reason",
              "uploaded by a member of ntnu from the wrong account")
    assert "moved from sranjans to ntnu" in out
    assert "ntnu already has a run called 'run1'" in cli(
        "audit", "move-run", str(ids[("ukp", "run1")]), "ntnu", "--reason", "x", ok=False)
    log = cli("audit", "list", "sts2012")
    assert log.splitlines()[0].endswith(
        "(reason: uploaded by a member of ntnu from the wrong account)")

    clock.now = T0 + timedelta(days=10, hours=1)
    frozen = client.put(f"/api/v1/runs/{ids[('ntnu', 'run2')]}/description",
                        json={"description": "late"}, headers=tokens["ntnu"])
    assert frozen.status_code == 403 and "frozen" in frozen.get_json()["error"]

    # Publication and release on schedule (the tick is what the web workers run each minute).
    cli("schedule", "set", "sts2012", "evaluation", "--publish-at", "2012-04-12T00:00",
        "--release-gold-at", "2012-04-12T00:00")
    assert "published sts2012/evaluation" in cli("schedule", "tick")

    # A gold correction: 40 MSRpar scores were wrong; every run is rescored.
    corrected = tmp_path / "corrected"
    shutil.copytree(test_dir, corrected)
    msrpar = corrected / "STS.gs.MSRpar.txt"
    lines = msrpar.read_text().splitlines()
    for i in range(40):
        lines[i] = f"{5 - float(lines[i]):.3f}"
    msrpar.write_text("\n".join(lines) + "\n")
    assert "5 run(s) scored against the new gold" in cli("gold", "upload", "sts2012",
                                                         str(corrected))
    diff = json.loads(cli("gold", "diff", "sts2012", "--json"))
    assert len(diff) == 5
    ntnu1 = next(d for d in diff if d["run_id"] == ids[("ntnu", "run1")])
    assert ntnu1["metrics"]["MSRpar/pearson"]["before"] != ntnu1["metrics"]["MSRpar/pearson"][
        "after"]
    assert ntnu1["metrics"]["MSRvid/pearson"]["before"] == ntnu1["metrics"]["MSRvid/pearson"][
        "after"]
    assert set(ntnu1["ranks"]["ALL"]) == {"before", "after"}
    history = client.get(f"/api/v1/runs/{ids[('ntnu', 'run1')]}").get_json()["score_history"]
    assert len(history) == 2
    assert history[1]["metrics"]["ALL"] == ntnu1["metrics"]["ALL"]["after"]

    # Table 1 with the baseline ranked among the runs, as the paper printed it.
    table1 = list(csv.DictReader(io.StringIO(cli(
        "results", "export", "sts2012", "--phase", "evaluation", "--table", "runs",
        "--rank-baselines", "--format", "csv"))))
    assert [r["run"] for r in table1 if r["baseline"]] == ["Baselines-tokencos"]
    ranks = sorted(int(r["rank ALL"]) for r in table1)
    assert ranks == [1, 2, 3, 4, 5]
    assert {r["run"] for r in table1} == {"ntnu-run1", "ntnu-run2", "ntnu-run3", "ukp-run1",
                                          "Baselines-tokencos"}
    unranked = list(csv.DictReader(io.StringIO(cli(
        "results", "export", "sts2012", "--phase", "evaluation", "--table", "runs"))))
    assert [r["rank ALL"] for r in unranked if r["baseline"]] == [""]
    latex = cli("results", "export", "sts2012", "--table", "runs", "--rank-baselines",
                "--format", "latex")
    assert "Baselines-tokencos" in latex and r"\begin{tabular}" in latex
    print("\nTable 1 baseline row (--rank-baselines):",
          next(r for r in table1 if r["baseline"]))

    # Table 3: tools and resources, with totals.
    table3 = list(csv.reader(io.StringIO(cli("results", "export", "sts2012", "--table",
                                             "resources", "--format", "csv"))))
    header, totals = table3[0], table3[-1]
    assert len(header) == 1 + 9 + 17
    assert totals[header.index("resources: WordNet")] == "3"
    assert totals[header.index("resources: Wikipedia")] == "2"
    assert totals[header.index("tools: SMT")] == "1"
    assert totals[header.index("tools: alignment")] == "1"
    assert [r[0] for r in table3[1:-1]] == ["ntnu-run1", "ntnu-run2", "ukp-run1", "ntnu-run3"]

    # Table 2: only runs with a non-uniform confidence column.
    table2 = json.loads(cli("results", "export", "sts2012", "--table", "confidence",
                            "--format", "json"))
    assert [r["run"] for r in table2["rows"]] == ["ntnu-run1", "ntnu-run3"]
    assert all(r["MSRpar pearson"] != r["MSRpar weighted_pearson"] for r in table2["rows"])

    # The bundle: every run under its (current) team, descriptions, scores, boards, gold.
    target = tmp_path / "bundle.zip"
    cli("results", "bundle", "sts2012", "-o", str(target))
    archive = zipfile.ZipFile(target)
    names = set(archive.namelist())
    for path in ("README.txt", "boards/evaluation.csv", "boards/evaluation.json",
                 "boards/evaluation.tex", "gold/STS.gs.MSRpar.txt"):
        assert path in names, path
    assert archive.read("gold/STS.gs.MSRpar.txt") == msrpar.read_bytes()  # the corrected gold
    for run_id, files in uploaded.items():
        folder = {ids[k]: f"runs/evaluation/{k[0]}/{k[1]}" for k in ids}[run_id]
        folder = folder.replace("sranjans", "ntnu")
        for filename, data in files.items():
            assert archive.read(f"{folder}/{filename}") == data
        scores = json.loads(archive.read(f"{folder}/scores.json"))
        assert len(scores["scores"]) == 2 and scores["scores"][1]["scores"]["signature"]
    assert json.loads(archive.read("runs/evaluation/ukp/run1/description.json"))["text"] == (
        "Text similarity measures.")
    assert "runs/evaluation/Baselines/tokencos/scores.json" in names
    assert not [n for n in names if "/sranjans/" in n]

    # The organiser's pages: the closing page, the same downloads, the run page's diff.
    response = client.post("/login", data={"email": "org@sts.org", "password": "organiser-pw"})
    assert response.status_code == 302
    page = client.get("/tasks/sts2012/organise/closing").get_data(as_text=True)
    assert "uploaded by a member of ntnu from the wrong account" in page
    assert "published on schedule" in page
    download = client.get("/tasks/sts2012/organise/tables/runs.csv?phase=evaluation"
                          "&rank_baselines=1")
    assert download.status_code == 200
    assert list(csv.DictReader(io.StringIO(download.get_data(as_text=True)))) == table1
    streamed = client.get("/tasks/sts2012/organise/bundle.zip")
    assert streamed.is_streamed
    assert set(zipfile.ZipFile(io.BytesIO(streamed.get_data())).namelist()) == names
    streamed.close()
    run_page = client.get(f"/runs/{wrong}").get_data(as_text=True)
    assert "Changed by the last gold correction" in run_page
    assert "moved from sranjans to ntnu" in run_page
    assert "Frozen: the phase has closed." in run_page
