"""The board serial kept by database triggers moves exactly when the runs a board shows change.

The reference is the fold the version used before (issue 32): a line per current scored run (id,
newest score, late and fix flags, team flags and name), read here with plain SQL. For a sequence
of the services' real writes (ORM, core updates, bulk inserts, deletes) the serial, and with it
the board version, must change exactly when the fold does, on SQLite and PostgreSQL.
"""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from alembic import command
from sqlalchemy import delete, insert, select, text, update

from semboard.cli.core import alembic_config
from semboard.db import make_engine
from semboard.jobs import boards as board_jobs
from semboard.models import (
    BOARD_TRIGGERS,
    Base,
    BoardChange,
    PreparedBoard,
    Run,
    RunScoreRecord,
)
from semboard.services.boards import prepared as prepared_boards
from semboard.services.data import gold
from semboard.services.people import grants
from semboard.services.runs import audit, submissions

POSTGRES = pytest.param("postgres", marks=pytest.mark.postgres)

FOLD = text("""
SELECT r.id, s.score_id, r.is_late, r.is_fix, t.is_baseline, t.is_organiser_team, t.name
FROM run r JOIN team t ON t.id = r.team_id
JOIN (SELECT run_id, max(id) AS score_id FROM run_score GROUP BY run_id) s ON s.run_id = r.id
WHERE r.phase_id = :phase AND r.is_current AND r.status = 'scored' ORDER BY r.id
""")


def _fold(session, phase) -> tuple:
    """The board's run list as the old version folded it (the reference)."""
    return tuple(tuple(int(v) if isinstance(v, bool) else v for v in line)
                 for line in session.execute(FOLD, {"phase": phase.id}))


class Watch:
    """Each committed step: did the fold change, did the serial (and the version) change?"""

    def __init__(self, session, phase) -> None:
        self.session, self.phase = session, phase
        self.seen = self._now()
        self.steps: list[tuple[str, bool, bool]] = []

    def _now(self) -> tuple:
        self.session.expire_all()
        state = prepared_boards.board_state(self.session, self.phase)
        return _fold(self.session, self.phase), state.serial, state.version

    def step(self, name: str, *, fold_moves: bool) -> None:
        self.session.commit()
        now = self._now()
        fold_changed, serial_changed = now[0] != self.seen[0], now[1] != self.seen[1]
        assert fold_changed is fold_moves, f"{name}: the reference fold did not do as expected"
        assert serial_changed is fold_changed, (
            f"{name}: fold changed {fold_changed}, board serial changed {serial_changed}")
        if fold_changed:  # (the version also names gold, groups and settings)
            assert now[2] != self.seen[2], f"{name}: the version"
        self.seen = now


@pytest.mark.parametrize("database_url", ["sqlite", POSTGRES], indirect=True)
def test_the_serial_moves_exactly_when_the_shown_runs_do(session, storage, make, world,
                                                         tiny_data, now):
    task, phase = world["task"], world["phase"]
    other_phase = make.phase(task, "other", max_runs=3)
    session.commit()
    (team_a, captain_a), (team_b, captain_b) = zip(world["teams"], world["captains"],
                                                   strict=True)
    watch = Watch(session, phase)
    other = prepared_boards.board_state(session, other_phase).version

    def submit(team, captain, name, seed, minutes=0):
        submissions.submit(session, storage, team=team, phase=phase, user=captain, name=name,
                           files=tiny_data.run(seed=seed, noise=0.5),
                           now=now + timedelta(minutes=minutes))

    submit(team_a, captain_a, "a1", 1)
    watch.step("upload", fold_moves=True)
    submit(team_b, captain_b, "b1", 2)
    watch.step("second team's upload", fold_moves=True)
    submit(team_a, captain_a, "a1", 3, minutes=1)
    watch.step("replacement (same name)", fold_moves=True)
    submit(team_a, captain_a, "a2", 4, minutes=2)
    watch.step("second run", fold_moves=True)
    # rescoring appends score records (new gold first: the gold has its own stamp, no runs)
    corrected = "".join(f"{v}\n" for v in tiny_data.gold["beta"][::-1]).encode()
    gold.upload_gold(session, storage, task=task, dataset="beta", filename="STS.gs.beta.txt",
                     data=corrected, user=None, now=now + timedelta(hours=1))
    watch.step("new gold (not a run change)", fold_moves=False)
    gold.rescore(session, storage, task=task, now=now + timedelta(hours=1))
    watch.step("rescore", fold_moves=True)
    a2 = session.scalars(select(Run).where(Run.name == "a2", Run.is_current)).one()
    a2.is_late = True
    watch.step("marked late", fold_moves=True)
    a2.is_fix = True
    watch.step("marked a fix", fold_moves=True)
    a2.is_current = False
    watch.step("withdrawn", fold_moves=True)
    a2.is_current = True
    watch.step("restored", fold_moves=True)
    a2.status = "error"
    watch.step("taken off (error)", fold_moves=True)
    a2.status = "scored"
    watch.step("back on", fold_moves=True)
    a2.name = "renamed run"  # not in the fold (the version never covered it)
    watch.step("run renamed", fold_moves=False)
    team_a.name = "A renamed"
    watch.step("team renamed", fold_moves=True)
    team_a.last_upload_at = now + timedelta(days=1)
    watch.step("team's other column", fold_moves=False)
    team_b.is_baseline = True
    watch.step("baseline flag", fold_moves=True)
    team_b.is_baseline = False
    watch.step("baseline flag back", fold_moves=True)
    grants.mark_organiser_team(session, team=team_b, by=None, now=now)
    watch.step("organisers' team", fold_moves=True)
    idle, _ = make.team(task, "no runs")
    session.commit()
    watch.step("a new team", fold_moves=False)
    idle.name = "still no runs"
    watch.step("a team without runs renamed", fold_moves=False)
    # core-level updates (audit.py bypasses the ORM's unit of work)
    b1 = session.scalars(select(Run).where(Run.name == "b1")).one()
    audit.move_run(session, run=b1, to_team=idle, by=None, reason="wrong team chosen", now=now)
    watch.step("run moved to another team", fold_moves=True)
    audit.merge_teams(session, source=idle, target=team_a, by=None, reason="one team", now=now)
    watch.step("teams merged", fold_moves=True)
    session.execute(update(Run).where(Run.phase_id == phase.id).values(is_late=True))
    watch.step("bulk update", fold_moves=True)
    session.execute(update(Run).where(Run.phase_id == phase.id).values(is_late=Run.is_late))
    watch.step("bulk update to the same values", fold_moves=False)
    # a pending upload is not on the board; its score is
    pending = session.execute(insert(Run).values(
        task_id=task.id, phase_id=phase.id, team_id=team_b.id, name="pending", slot=None,
        is_current=True, status="received", is_late=False, is_fix=False, issues=[], meta={},
        submitted_at=now, description="", answers={}).returning(Run.id)).scalar_one()
    watch.step("a run received (bulk insert)", fold_moves=False)
    newest = session.scalars(select(RunScoreRecord).order_by(RunScoreRecord.id.desc())).first()
    session.execute(insert(RunScoreRecord).values(
        run_id=pending, gold_digest=newest.gold_digest, scores=newest.scores, flat=newest.flat,
        created_at=now, digest=newest.digest))
    watch.step("a received run's score", fold_moves=False)
    session.execute(update(Run).where(Run.id == pending).values(status="scored"))
    watch.step("it is scored", fold_moves=True)
    session.execute(insert(RunScoreRecord).values(
        run_id=pending, gold_digest=newest.gold_digest, scores=newest.scores, flat=newest.flat,
        created_at=now, digest=newest.digest))
    watch.step("a shown run's new score", fold_moves=True)
    session.execute(delete(RunScoreRecord).where(RunScoreRecord.run_id == pending,
                                                 RunScoreRecord.id == session.scalar(
                                                     select(RunScoreRecord.id)
                                                     .order_by(RunScoreRecord.id.desc()))))
    watch.step("its newest score deleted", fold_moves=True)
    session.execute(update(Run).where(Run.id == pending).values(phase_id=other_phase.id))
    watch.step("moved to another phase", fold_moves=True)
    assert prepared_boards.board_state(session, other_phase).version != other
    other = prepared_boards.board_state(session, other_phase).version
    seeded = session.execute(insert(Run).values(
        task_id=task.id, phase_id=phase.id, team_id=team_b.id, name="seeded", slot=None,
        is_current=True, status="scored", is_late=False, is_fix=False, issues=[], meta={},
        submitted_at=now, description="", answers={}).returning(Run.id)).scalar_one()
    session.execute(insert(RunScoreRecord).values(
        run_id=seeded, gold_digest=newest.gold_digest, scores=newest.scores, flat=newest.flat,
        created_at=now, digest=newest.digest))
    watch.step("a scored run seeded (bulk inserts)", fold_moves=True)
    session.execute(delete(Run).where(Run.id == seeded))  # its score cascades
    watch.step("a run deleted", fold_moves=True)
    assert prepared_boards.board_state(session, other_phase).version == other
    session.execute(delete(Run).where(Run.id == pending))
    watch.step("a run of another phase deleted", fold_moves=False)
    assert prepared_boards.board_state(session, other_phase).version != other
    # the log names the runs (or the team) of each change, under consecutive serials
    serials = session.scalars(select(BoardChange.serial).where(BoardChange.phase_id == phase.id)
                              .order_by(BoardChange.serial)).all()
    assert serials == list(range(1, watch.seen[1] + 1))


def _triggers(url: str) -> set[str]:
    engine = make_engine(url)
    with engine.connect() as conn:
        if engine.dialect.name == "sqlite":
            query = "SELECT name FROM sqlite_master WHERE type = 'trigger'"
        else:
            query = "SELECT DISTINCT trigger_name FROM information_schema.triggers"
        names = set(conn.exec_driver_sql(query).scalars())
    engine.dispose()
    return names


@pytest.mark.parametrize("database_url", ["sqlite", POSTGRES], indirect=True)
def test_a_migrated_database_has_the_models_triggers(database_url: str) -> None:
    """create_all (tests) and migration 0043 make the same triggers; a downgrade drops them."""
    assert _triggers(database_url) == set(BOARD_TRIGGERS)
    engine = make_engine(database_url)
    Base.metadata.drop_all(engine)
    engine.dispose()
    assert _triggers(database_url) == set()
    cfg = alembic_config(database_url)
    command.upgrade(cfg, "head")
    assert _triggers(database_url) == set(BOARD_TRIGGERS)
    command.downgrade(cfg, "0042_phase_request_scoring")
    assert _triggers(database_url) == set()
    command.upgrade(cfg, "head")
    assert _triggers(database_url) == set(BOARD_TRIGGERS)


@pytest.mark.parametrize("database_url", ["sqlite", POSTGRES], indirect=True)
def test_a_stored_board_prunes_the_log_and_a_base_behind_it_is_not_merged(
        session, storage, make, world, tiny_data, now, monkeypatch):
    """Storing a board keeps the newest CHANGES_KEPT changes of the log; a base whose changes
    were pruned is not merged (the log cannot name them all): the stored board is, where it is
    not that far behind, else the board is built; either equals a build."""
    task, phase = world["task"], world["phase"]
    monkeypatch.setattr(prepared_boards, "CHANGES_KEPT", 2)
    prepared_boards._bases.clear()
    old = prepared_boards.warm(session, phase=phase, now=now)
    key = prepared_boards._base_key(session, phase.id)
    for k in range(3):
        team, captain = make.team(task, f"pruned {k}")
        session.commit()
        submissions.submit(session, storage, team=team, phase=phase, user=captain, name="r",
                           files=tiny_data.run(seed=60 + k), now=now)
        session.commit()
        board_jobs.prepare_phase(session, phase)  # merged into this process's newest base
        assert prepared_boards._bases.get(key).merged
    serial = prepared_boards.board_state(session, phase).serial
    assert serial >= 3
    logged = session.scalars(select(BoardChange.serial).where(BoardChange.phase_id == phase.id)
                             .order_by(BoardChange.serial)).all()
    assert logged == [serial - 1, serial]
    # a worker whose board is older than the log: the next change is built, not merged
    prepared_boards._bases.put(key, old)
    team, captain = make.team(task, "pruned 3")
    session.commit()
    submissions.submit(session, storage, team=team, phase=phase, user=captain, name="r",
                       files=tiny_data.run(seed=63), now=now)
    session.commit()
    for stored in (True, False):
        prepared_boards._bases.put(key, old)
        prepared_boards._memo.clear()
        if not stored:  # nothing stored to merge into either
            session.execute(delete(PreparedBoard))
        rebuilt = prepared_boards.update_prepared(session, phase=phase, now=now)
        assert rebuilt.merged == stored
        fresh = prepared_boards._build(session, phase=phase, version=rebuilt.version, now=now)
        assert rebuilt.body("json") == fresh.body("json") and rebuilt.csv_text == fresh.csv_text
        assert len(rebuilt.data["board"]["rows"]) == 4


@pytest.mark.parametrize("database_url", ["sqlite", POSTGRES], indirect=True)
def test_concurrent_writers_take_consecutive_serials(session, storage, world, tiny_data, now,
                                                    database_url):
    """Writers in parallel transactions (first from no counter row): each change takes the next
    serial under the counter row's lock, none lost or taken twice, whatever the commit order."""
    phase = world["phase"]
    team, captain = world["teams"][0], world["captains"][0]
    submissions.submit(session, storage, team=team, phase=phase, user=captain, name="r",
                       files=tiny_data.run(seed=5), now=now)
    session.commit()
    session.execute(delete(BoardChange))
    session.execute(text("DELETE FROM board_counter"))
    session.commit()
    record = session.scalars(select(RunScoreRecord)).one()
    values = {"run_id": record.run_id, "gold_digest": record.gold_digest,
              "scores": record.scores, "flat": record.flat, "created_at": now,
              "digest": record.digest}
    session.commit()  # no read snapshot held meanwhile (SQLite's WAL)
    engine = make_engine(database_url)
    errors: list[BaseException] = []
    start = threading.Barrier(4)

    def write() -> None:
        try:
            start.wait()
            for _ in range(10):
                with engine.begin() as conn:
                    conn.execute(insert(RunScoreRecord).values(**values))
        except BaseException as error:  # reported by the assertion below
            errors.append(error)

    threads = [threading.Thread(target=write) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    engine.dispose()
    assert errors == []
    session.commit()
    assert prepared_boards.board_state(session, phase).serial == 40
    serials = session.scalars(select(BoardChange.serial).where(BoardChange.phase_id == phase.id)
                              .order_by(BoardChange.serial)).all()
    assert serials == list(range(1, 41))
