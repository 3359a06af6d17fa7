"""Splits on the site: phases serve and score their split; no oracle; daily limits; windows."""

from __future__ import annotations

import io
import shutil
from datetime import timedelta

import numpy as np
import pytest
from scipy.stats import pearsonr
from sqlalchemy import select

from semboard.errors import Forbidden, InvalidData, RateLimited, RunRejected
from semboard.models import GoldFile, InputFile, Run
from semboard.services.data import gold, inputs
from semboard.services.people import teams, windows
from semboard.services.runs import admission, submissions
from semboard.services.tasks import phases, splits, tasks
from tests.site.conftest import NOW, TINY_TOML

SPLIT_TOML = TINY_TOML.replace('name = "tiny"', 'name = "tinysplit"\ndefault_split = "test"') + """
[[splits]]
name = "train"
gold_public = true
datasets = ["alpha"]
[splits.layout]
input = "train/STS.input.{dataset}.txt"
gold = "train/STS.gs.{dataset}.txt"

[[splits]]
name = "dev"
[splits.layout]
input = "dev/STS.input.{dataset}.txt"
gold = "dev/STS.gs.{dataset}.txt"

[[splits]]
name = "test"
"""
SIZES = {"train": {"alpha": 12}, "dev": {"alpha": 10, "beta": 8}}


@pytest.fixture
def release(tmp_path, tiny_data):
    """The tiny release with train/ and dev/ folders of their own sizes and gold."""
    folder = tmp_path / "release"
    shutil.copytree(tiny_data.folder, folder)
    rng = np.random.default_rng(3)
    golds: dict[str, dict[str, np.ndarray]] = {}
    for split, sizes in SIZES.items():
        (folder / split).mkdir()
        golds[split] = {}
        for name, n in sizes.items():
            (folder / split / f"STS.input.{name}.txt").write_text(
                "".join(f"{split} {name} {i} a\t{split} {name} {i} b\n" for i in range(n)))
            values = np.round(rng.uniform(0, 5, n), 2)
            golds[split][name] = values
            (folder / split / f"STS.gs.{name}.txt").write_text("".join(f"{v}\n" for v in values))
    (folder / "tinysplit.toml").write_text(SPLIT_TOML)
    return folder, golds


@pytest.fixture
def task(session, storage, release):
    """The split task with every split's inputs and gold uploaded."""
    from evaluation import parse_task

    folder, _ = release
    task = tasks.load_task(session, parse_task(SPLIT_TOML), now=NOW)
    for split in ("train", "dev", "test"):
        inputs.load_release_inputs(session, storage, task=task, release_dir=folder, user=None,
                                   now=NOW, split=split)
        gold.load_release_gold(session, storage, task=task, release_dir=folder, user=None,
                               now=NOW, split=split)
    session.commit()
    return task


def _phase(session, task, slug, **values):
    settings = dict(name=slug, kind="evaluation", opens_at=NOW - timedelta(days=1),
                    closes_at=NOW + timedelta(days=10), max_runs=3, visibility="public")
    settings.update(values)
    phase = tasks.add_phase(session, task, slug=slug, now=NOW, **settings)
    session.commit()
    return phase


def _team(session, make, task):
    captain = make.user()
    team = teams.create_team(session, task=task, captain=captain, name="probe", affiliation="",
                             now=NOW)
    session.commit()
    return team, captain


def _probe(sizes: dict[str, int], line: int) -> dict[str, bytes]:
    """The attack run: 5 on one line, 0 on every other."""
    return {f"STS.output.{d}.txt": "".join("5\n" if i == line else "0\n"
                                             for i in range(n)).encode()
            for d, n in sizes.items()}


def test_files_belong_to_splits(session, task):
    rows = session.scalars(select(InputFile).order_by(InputFile.split, InputFile.dataset)).all()
    assert [(r.split, r.dataset, r.n_items) for r in rows] == [
        ("dev", "alpha", 10), ("dev", "beta", 8), ("test", "alpha", 30), ("test", "beta", 20),
        ("train", "alpha", 12)]
    assert {r.split for r in session.scalars(select(GoldFile))} == {"train", "dev", "test"}
    with pytest.raises(InvalidData, match="no split 'nope'"):
        inputs.current_inputs(session, task=task, split="nope")


def test_oracle_attack_on_hidden_gold_is_refused(session, storage, task, make):
    """A public dev phase on the hidden evaluation's gold would read it line by line."""
    _phase(session, task, "evaluation", visibility="hidden", team_window_hours=120)
    with pytest.raises(InvalidData, match="read that gold through the scores"):
        _phase(session, task, "dev", kind="development", visibility="public")
    session.rollback()
    # In the other order, and by changing a phase later: refused too.
    practice = _phase(session, task, "practice", kind="development", visibility="hidden")
    with pytest.raises(InvalidData, match="read that gold"):
        tasks.update_phase(session, practice, visibility="public")
    session.rollback()
    # On the dev split the same probe reads only dev gold, which is what dev is for.
    dev = _phase(session, task, "dev", kind="development", visibility="public", split="dev")
    assert dev.max_per_day == phases.DEFAULT_MAX_PER_DAY
    team, captain = _team(session, make, task)
    run = submissions.submit(session, storage, team=team, phase=dev, user=captain, name="p",
                             files=_probe(SIZES["dev"], 0), now=NOW)
    gold_alpha = gold.parsed_gold(session, storage, task=task, split="dev")["alpha"]
    z = (gold_alpha.scores[0] - gold_alpha.scores.mean()) / gold_alpha.scores.std()
    leaked = run.current_score.flat["alpha/pearson"] * np.sqrt(len(gold_alpha.scores) - 1)
    assert leaked == pytest.approx(z, abs=1e-6)  # the leak the rule keeps off private gold


def test_no_oracle_rule_leaves_hidden_and_later_phases_alone(session, task):
    _phase(session, task, "evaluation", visibility="hidden")
    _phase(session, task, "internal", visibility="hidden", kind="development")
    # A public post-evaluation board opening after the evaluation closed is no oracle.
    _phase(session, task, "post", kind="post-evaluation", opens_at=NOW + timedelta(days=11),
           closes_at=NOW + timedelta(days=40))
    # Public gold (train) can be shown freely; released gold too.
    _phase(session, task, "practice", kind="trial", split="train")
    gold.release_gold(session, task=task, user=None, now=NOW, split="dev")
    dev = _phase(session, task, "dev", kind="development", split="dev")
    _phase(session, task, "dev-hidden", kind="development", split="dev", visibility="hidden")
    assert dev.max_per_day is None  # released gold: no daily limit needed


def test_daily_limit_counts_replacements_and_names_the_next_time(session, storage, task, make,
                                                                 client):
    dev = _phase(session, task, "dev", kind="development", split="dev", max_per_day=3)
    team, captain = _team(session, make, task)
    for k in range(3):  # the same name: every upload replaces the last, and still counts
        submissions.submit(session, storage, team=team, phase=dev, user=captain, name="same",
                           files=_probe(SIZES["dev"], k), now=NOW + timedelta(hours=k))
    with pytest.raises(RateLimited, match="next upload allowed at 2012-04-03 12:00 UTC"):
        submissions.submit(session, storage, team=team, phase=dev, user=captain, name="same",
                           files=_probe(SIZES["dev"], 3), now=NOW + timedelta(hours=5))
    quota = admission.daily_quota(session, team=team, phase=dev, now=NOW + timedelta(hours=5))
    assert (quota.used, quota.next_allowed_at) == (3, NOW + timedelta(hours=24))
    run = submissions.submit(session, storage, team=team, phase=dev, user=captain, name="same",
                             files=_probe(SIZES["dev"], 3),
                             now=NOW + timedelta(hours=24, seconds=1))
    assert run.status == "scored"
    assert session.query(Run).filter(Run.phase_id == dev.id).count() == 4


def test_window_cannot_be_sidestepped_through_another_phase(session, storage, task, make):
    evaluation = _phase(session, task, "evaluation", visibility="hidden", team_window_hours=120)
    side = _phase(session, task, "dev", kind="development", visibility="hidden")
    team, captain = _team(session, make, task)
    with pytest.raises(Forbidden, match="only through phase evaluation"):
        inputs.download_inputs(session, storage, phase=side, dataset="alpha", user=captain,
                               now=NOW)
    session.rollback()
    assert windows.team_window(session, team=team, phase=evaluation) is None
    # The practice split is served by its own phase; the evaluation serves its inputs once the
    # team has started its window there (the download itself starts nothing).
    practice = _phase(session, task, "practice", kind="trial", split="train")
    _, data = inputs.download_inputs(session, storage, phase=practice, dataset="alpha",
                                        user=captain, now=NOW)
    assert data.decode().startswith("train alpha 0")
    assert windows.team_window(session, team=team, phase=evaluation) is None
    with pytest.raises(Forbidden, match="has not started"):
        inputs.download_inputs(session, storage, phase=evaluation, dataset="alpha",
                               user=captain, now=NOW)
    assert windows.team_window(session, team=team, phase=evaluation) is None
    windows.start_team_window(session, phase=evaluation, user=captain, now=NOW)
    session.commit()
    inputs.download_inputs(session, storage, phase=evaluation, dataset="alpha", user=captain,
                           now=NOW)
    window = windows.team_window(session, team=team, phase=evaluation)
    assert (window.started_at, window.ends_at) == (NOW, NOW + timedelta(hours=120))
    status = admission.team_phase_status(session, team=team, phases=[evaluation], now=NOW)
    assert status["evaluation"]["window_started_at"] == NOW.isoformat()
    assert status["evaluation"]["window_ends_at"] == (NOW + timedelta(hours=120)).isoformat()


def test_phase_validates_and_scores_against_its_split(session, storage, task, make, tiny_data,
                                                      release):
    _, golds = release
    practice = _phase(session, task, "practice", kind="trial", split="train")
    team, captain = _team(session, make, task)
    with pytest.raises(RunRejected):  # test-sized files: wrong line count for train
        submissions.submit(session, storage, team=team, phase=practice, user=captain,
                           name="wrong", files={"STS.output.alpha.txt":
                                                tiny_data.run(seed=1)["STS.output.alpha.txt"]},
                           now=NOW)
    rng = np.random.default_rng(5)
    pred = np.clip(golds["train"]["alpha"] + rng.normal(0, 1, 12), 0, 5)
    run = submissions.submit(session, storage, team=team, phase=practice, user=captain,
                             name="ok", now=NOW, files={"STS.output.alpha.txt": "".join(
                                 f"{v:.3f}\n" for v in pred).encode()})
    assert run.status == "scored"
    expected = pearsonr(golds["train"]["alpha"], np.round(pred, 3))[0]
    assert run.current_score.flat["alpha/pearson"] == pytest.approx(expected, abs=1e-9)
    assert set(run.current_score.scores["datasets"]) == {"alpha"}


def test_public_gold_from_the_start_and_release_per_split(session, storage, task, app, client):
    assert client.get("/api/v1/tasks/tinysplit/gold/alpha?split=train").status_code == 200
    assert client.get("/api/v1/tasks/tinysplit/gold/alpha?split=dev").status_code == 403
    assert client.get("/api/v1/tasks/tinysplit/gold/alpha").status_code == 403
    runner = app.test_cli_runner()
    out = runner.invoke(args=["gold", "release", "tinysplit", "--split", "dev"])
    assert out.exit_code == 0, out.output
    assert client.get("/api/v1/tasks/tinysplit/gold/alpha?split=dev").status_code == 200
    assert client.get("/api/v1/tasks/tinysplit/gold/alpha").status_code == 403
    info = client.get("/api/v1/tasks/tinysplit").get_json()["splits"]
    assert info["train"]["gold_public"] and info["dev"]["gold_public"]
    assert not info["test"]["gold_public"] and info["test"]["default"]


def test_cli_and_api_refuse_an_oracle_phase(session, task, app, client, make):
    runner = app.test_cli_runner()
    common = ["--opens", "2012-04-01", "--closes", "2012-04-20"]
    ok = runner.invoke(args=["task", "phase", "tinysplit", "evaluation", "--kind", "evaluation",
                             "--visibility", "hidden", *common])
    assert ok.exit_code == 0, ok.output
    bad = runner.invoke(args=["task", "phase", "tinysplit", "dev", "--kind", "development",
                              "--visibility", "public", *common])
    assert bad.exit_code != 0 and "read that gold" in bad.output
    good = runner.invoke(args=["task", "phase", "tinysplit", "dev", "--kind", "development",
                               "--visibility", "public", "--split", "dev", "--max-per-day", "4",
                               *common])
    assert good.exit_code == 0, good.output
    organiser = make.user(admin=True)
    from semboard.services.people import accounts

    token = accounts.create_api_token(session, user=organiser, name="t", now=NOW)
    session.commit()
    headers = {"Authorization": f"Bearer {token}"}
    refused = client.post("/api/v1/tasks/tinysplit/phases", headers=headers, json={
        "slug": "dev2", "kind": "development", "opens_at": "2012-04-01T00:00",
        "closes_at": "2012-04-20T00:00", "visibility": "public"})
    assert refused.status_code == 422 and "read that gold" in refused.get_json()["error"]
    made = client.post("/api/v1/tasks/tinysplit/phases", headers=headers, json={
        "slug": "dev2", "kind": "development", "opens_at": "2012-04-01T00:00",
        "closes_at": "2012-04-20T00:00", "visibility": "public", "split": "dev"})
    assert made.status_code == 201, made.get_json()
    assert made.get_json()["split"] == "dev" and made.get_json()["max_per_day"] == 5
    phases = {p["slug"]: p for p in client.get("/api/v1/tasks/tinysplit").get_json()["phases"]}
    assert (phases["dev"]["split"], phases["dev"]["max_per_day"]) == ("dev", 4)
    assert phases["evaluation"]["split"] == "test"



def test_organiser_pages_take_the_split(session, task, client, make):
    admin = make.user("admin@example.org", admin=True)
    assert admin.is_admin
    login = client.post("/login", data={"email": "admin@example.org", "password": "password123"})
    assert login.status_code == 302
    _phase(session, task, "evaluation", visibility="hidden")
    page = client.get("/tasks/tinysplit/organise").get_data(as_text=True)
    assert "Release dev gold" in page and "Release train gold" not in page
    assert 'name="data-split"' in page
    form = {"slug": "dev", "name": "Dev", "kind": "development",
            "opens_at": "2012-04-01T00:00", "closes_at": "2012-04-20T00:00", "max_runs": "3",
            "late_policy": "reject", "visibility": "public", "track": "", "split": "test"}
    refused = client.post("/tasks/tinysplit/organise/phases/new", data=form)
    assert refused.status_code == 422
    assert "read that gold through the scores" in refused.get_data(as_text=True)
    saved = client.post("/tasks/tinysplit/organise/phases/new", data={**form, "split": "dev"})
    assert saved.status_code == 302
    session.rollback()
    dev = tasks.get_phase(session, task, "dev")
    assert (dev.split, dev.max_per_day) == ("dev", phases.DEFAULT_MAX_PER_DAY)
    edit = client.get("/tasks/tinysplit/organise/phases/dev").get_data(as_text=True)
    assert '<option selected value="dev">' in edit or 'value="dev" selected' in edit
    upload = client.post("/tasks/tinysplit/organise/data", content_type="multipart/form-data",
                         data={"data-kind": "inputs", "data-dataset": "alpha",
                               "data-split": "train",
                               "data-file": (io.BytesIO(b"x\ty\n" * 12), "STS.input.alpha.txt")})
    assert upload.status_code == 302
    session.rollback()
    assert inputs.current_inputs(session, task=task, split="train")["alpha"].version == 2
    released = client.post("/tasks/tinysplit/organise/release-gold", data={"split": "dev"})
    assert released.status_code == 302
    session.rollback()
    assert splits.release_row(session, task=task, split="dev") is not None
    assert splits.release_row(session, task=task, split="test") is None
    assert task.gold_released_at is None


def test_cli_names_an_unknown_split(app, release):
    folder, _ = release
    runner = app.test_cli_runner()
    toml = str(folder / "tinysplit.toml")
    bad = runner.invoke(args=["task", "load", toml, "--split", "nope", "--inputs", str(folder)])
    assert bad.exit_code != 0 and "no split 'nope'" in bad.output
    loaded = runner.invoke(args=["task", "load", toml, "--split", "dev", "--inputs",
                                 str(folder)])
    assert loaded.exit_code == 0 and "alpha: 10 items (v1), split dev" in loaded.output
    bad = runner.invoke(args=["gold", "upload", "tinysplit", str(folder), "--split", "nope"])
    assert bad.exit_code != 0 and "no split 'nope'" in bad.output
    bad = runner.invoke(args=["gold", "release", "tinysplit", "--split", "train"])
    assert bad.exit_code != 0 and "no gold of split train" in bad.output
    bad = runner.invoke(args=["task", "phase", "tinysplit", "p", "--kind", "trial", "--opens",
                              "2012-04-01", "--closes", "2012-04-09", "--split", "nope"])
    assert bad.exit_code != 0 and "no split 'nope'" in bad.output


def test_items_of_a_run_on_another_split_read_that_splits_gold(session, storage, task, make,
                                                                  release, app, client):
    _, golds = release
    practice = _phase(session, task, "practice", kind="trial", split="train")
    team, captain = _team(session, make, task)
    rng = np.random.default_rng(5)
    pred = np.clip(golds["train"]["alpha"] + rng.normal(0, 1, 12), 0, 5)
    run = submissions.submit(session, storage, team=team, phase=practice, user=captain,
                             name="ok", now=NOW, files={"STS.output.alpha.txt": "".join(
                                 f"{v:.3f}\n" for v in pred).encode()})
    session.commit()
    app.config["SEMBOARD_CLOCK"] = lambda: NOW
    assert client.post("/login", data={"email": captain.email,
                                        "password": "password123"}).status_code == 302
    # train gold is public from the start; the default split's (test) is not released
    assert gold.current_gold(session, task=task, split="train") != {}
    page = client.get(f"/runs/{run.id}/items")
    assert page.status_code == 200, page.get_data(as_text=True)[:500]
    csv_text = client.get(f"/runs/{run.id}/items.csv?all=1").get_data(as_text=True)
    rows = [line.split(",") for line in csv_text.strip().splitlines()[1:]]
    assert len(rows) == 12  # train's 12 pairs, not test's
    shown_gold = sorted(float(r[5]) for r in rows)
    assert shown_gold == pytest.approx(sorted(golds["train"]["alpha"]))
    scatter = client.get(f"/runs/{run.id}/charts/scatter.json")
    assert scatter.status_code == 200


def test_a_release_file_linked_outside_the_folder_is_refused(session, storage, tmp_path,
                                                             tiny_data, app):
    """`flask gold upload` never reads a file outside the release folder (a symlink out)."""
    from evaluation import parse_task
    from semboard.errors import InvalidData as Refused

    folder = tmp_path / "release"
    shutil.copytree(tiny_data.folder, folder)
    outside = tmp_path / "outside.txt"
    outside.write_bytes((folder / "STS.gs.alpha.txt").read_bytes())
    (folder / "STS.gs.alpha.txt").unlink()
    (folder / "STS.gs.alpha.txt").symlink_to(outside)
    task = tasks.load_task(session, parse_task(TINY_TOML), now=NOW)
    inputs.load_release_inputs(session, storage, task=task, release_dir=folder, user=None,
                               now=NOW)
    session.commit()
    with pytest.raises(Refused, match="outside the release folder"):
        gold.load_release_gold(session, storage, task=task, release_dir=folder, user=None,
                               now=NOW)
    session.rollback()
    assert gold.current_gold(session, task=task) == {}
    result = app.test_cli_runner().invoke(args=["gold", "upload", "tiny", str(folder)])
    assert result.exit_code != 0 and "outside the release folder" in result.output
