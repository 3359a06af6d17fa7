"""Accounts, tokens, rate limits, teams, phases and windows (services)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import event, func, select

from semboard import config
from semboard.errors import (
    AlreadyInTeam,
    AuthenticationFailed,
    Forbidden,
    InvalidData,
    NameTaken,
    NotFound,
    PhaseNotOpen,
    RateLimited,
)
from semboard.models import Base, TeamWindow, User
from semboard.services.data import inputs
from semboard.services.people import accounts, ratelimit, team_rules, teams, windows
from semboard.services.tasks import tasks


def test_register_hashes_with_argon2_and_authenticates(session, now) -> None:
    user = accounts.register_user(session, email=" Ada@Example.org ", password="correct horse",
                                  display_name="Ada", now=now)
    session.commit()
    assert user.email == "ada@example.org"
    assert user.password_hash.startswith("$argon2id$")
    assert "correct horse" not in user.password_hash
    assert accounts.authenticate(session, email="ADA@example.org", password="correct horse",
                                 now=now) is user
    with pytest.raises(AuthenticationFailed):
        accounts.authenticate(session, email="ada@example.org", password="wrong", now=now)
    with pytest.raises(AuthenticationFailed):
        accounts.authenticate(session, email="nobody@example.org", password="x" * 9, now=now)


def test_register_refuses_duplicates_and_short_passwords(session, now) -> None:
    accounts.register_user(session, email="a@b.org", password="12345678", display_name="", now=now)
    with pytest.raises(NameTaken):
        accounts.register_user(session, email="A@B.org", password="12345678", display_name="",
                               now=now)
    with pytest.raises(InvalidData):
        accounts.register_user(session, email="c@b.org", password="short", display_name="",
                               now=now)
    with pytest.raises(InvalidData):
        accounts.register_user(session, email="not-an-email", password="12345678",
                               display_name="", now=now)


def test_login_failures_slow_guessing_down_across_sessions(session_factory, make, now) -> None:
    make.user("victim@example.org")
    free = config.DEFAULT_LIMITS.login_free_failures
    for attempt in range(free):
        # A fresh session each time, as another gunicorn worker would have.
        with session_factory() as other, pytest.raises(AuthenticationFailed):
            accounts.authenticate(other, email="victim@example.org", password=f"guess{attempt}",
                                  now=now)
    # The failures past the free ones each double the wait: 1 s after the fifth, ...
    with session_factory() as other, pytest.raises(RateLimited, match="1 seconds"):
        accounts.authenticate(other, email="victim@example.org", password="password123",
                              now=now + timedelta(milliseconds=100))
    with session_factory() as other:
        user = accounts.authenticate(other, email="victim@example.org", password="password123",
                                     now=now + timedelta(seconds=2))
        assert user.email == "victim@example.org"


def test_ratelimit_hit_counts_within_window(session, now) -> None:
    per = timedelta(minutes=10)
    assert all(ratelimit.hit(session, key="k", limit=3, per=per, now=now) for _ in range(3))
    assert not ratelimit.hit(session, key="k", limit=3, per=per, now=now)
    assert ratelimit.hit(session, key="other", limit=3, per=per, now=now)
    assert ratelimit.hit(session, key="k", limit=3, per=per, now=now + per + timedelta(seconds=1))


def test_api_tokens_store_only_a_hash_and_can_be_revoked(session, make, now) -> None:
    user = make.user()
    token = accounts.create_api_token(session, user=user, name="laptop", now=now)
    session.commit()
    (row,) = accounts.list_api_tokens(session, user=user)
    assert token not in (row.token_hash, row.prefix) and len(token) > 40
    assert row.last_used_at is None
    assert accounts.user_for_token(session, token) is user
    assert row.last_used_at is None  # asked without a time (a GET): nothing written
    assert accounts.user_for_token(session, token, now=now) is user
    session.commit()
    session.refresh(row)
    assert row.last_used_at == now
    assert accounts.user_for_token(session, token + "x") is None
    user.is_active_account = False
    session.flush()
    assert accounts.user_for_token(session, token) is None  # a deactivated account's token
    user.is_active_account = True
    session.flush()
    assert accounts.user_for_token(session, "garbage") is None
    accounts.revoke_api_token(session, user=user, token_id=row.id, now=now)
    assert accounts.user_for_token(session, token) is None
    with pytest.raises(NotFound):
        accounts.revoke_api_token(session, user=make.user(), token_id=row.id, now=now)


def test_a_tokens_user_is_found_in_one_statement(session, make, now) -> None:
    """Every API request asks who its token is: the token and its user in one statement (a
    lazy load of the user was a second round trip on each one)."""
    user = make.user()
    token = accounts.create_api_token(session, user=user, name="cli", now=now)
    session.commit()
    session.expunge_all()  # a request's session: nothing of the user held
    statements: list[str] = []
    engine = session.get_bind()

    def note(conn, cursor, statement, *args) -> None:
        statements.append(statement)

    event.listen(engine, "before_cursor_execute", note)
    try:
        found = accounts.user_for_token(session, token)
        assert found is not None and found.id == user.id and found.is_active_account
    finally:
        event.remove(engine, "before_cursor_execute", note)
    assert [s for s in statements if s.lstrip().upper().startswith("SELECT")] == statements[-1:]


def test_teams_invite_codes_and_one_team_per_task(session, make, now) -> None:
    task = make.task(with_inputs=False)
    team, captain = make.team(task, "Alpha")
    assert teams.team_for_user(session, task=task, user=captain) is team
    member = make.user()
    assert teams.join_team(session, task=task, user=member, invite_code=team.invite_code,
                           now=now) is team
    with pytest.raises(AlreadyInTeam):
        teams.create_team(session, task=task, captain=member, name="Beta", affiliation="",
                          now=now)
    with pytest.raises(AlreadyInTeam):
        teams.join_team(session, task=task, user=captain, invite_code=team.invite_code, now=now)
    with pytest.raises(NotFound):
        teams.join_team(session, task=task, user=make.user(), invite_code="nope", now=now)
    with pytest.raises(NameTaken):
        teams.create_team(session, task=task, captain=make.user(), name="Alpha",
                          affiliation="", now=now)
    with pytest.raises(NameTaken):
        teams.create_team(session, task=task, captain=make.user(), name="baselines",
                          affiliation="", now=now)
    baseline = teams.baseline_team(session, task=task, now=now)
    assert baseline.is_baseline and teams.baseline_team(session, task=task, now=now) is baseline
    with pytest.raises(NotFound):
        teams.join_team(session, task=task, user=make.user(), invite_code=baseline.invite_code,
                        now=now)


def test_phase_settings_are_checked(session, make, now) -> None:
    task = make.task(with_inputs=False)
    good = dict(name="Eval", kind="evaluation", opens_at=now, closes_at=now + timedelta(days=1),
                now=now)
    for bad in ({"kind": "final"}, {"closes_at": now - timedelta(hours=1)},
                {"late_policy": "maybe"}, {"visibility": "secret"}, {"max_runs": 0},
                {"team_window_hours": -5}, {"track": "nosuchtrack"},
                {"opens_at": now.replace(tzinfo=None)}):
        with pytest.raises(InvalidData):
            tasks.add_phase(session, task, slug="eval", **{**good, **bad})
    phase = tasks.add_phase(session, task, slug="eval", max_runs=3, team_window_hours=120, **good)
    with pytest.raises(NameTaken):
        tasks.add_phase(session, task, slug="eval", **good)
    tasks.update_phase(session, phase, max_runs=5, late_policy="flag")
    assert (phase.max_runs, phase.late_policy) == (5, "flag")
    with pytest.raises(InvalidData):
        tasks.update_phase(session, phase, colour="red")
    assert tasks.current_phases(session, task, now=now + timedelta(hours=1)) == [phase]
    assert tasks.current_phases(session, task, now=now + timedelta(days=2)) == []
    assert tasks.phase_for_submission(session, task, now=now + timedelta(days=2)) is phase
    with pytest.raises(PhaseNotOpen):
        tasks.phase_for_submission(session, task, now=now - timedelta(days=2))


def _table_counts(session) -> dict[str, int]:
    """Rows per table: a read-only call leaves every count as it was."""
    return {t.name: session.scalar(select(func.count()).select_from(t))
            for t in Base.metadata.sorted_tables}


def test_a_download_never_starts_a_window_an_explicit_start_does(
    session, storage, make, now
) -> None:
    task = make.task()
    phase = make.phase(task, opens_at=now - timedelta(hours=1),
                       closes_at=now + timedelta(hours=200), team_window_hours=120)
    team, captain = make.team(task, members=2)
    member = next(m.user for m in team.members if m.user_id != captain.id)
    session.commit()
    assert windows.team_deadline(session, team=team, phase=phase) == phase.closes_at
    before = _table_counts(session)
    with pytest.raises(Forbidden, match=r"120-hour window in phase .* has not started: start it "
                                        r"on the task page .*--start-window.*120 h later"):
        inputs.download_inputs(session, storage, phase=phase, dataset="alpha", user=member,
                               now=now)
    assert not session.new and not session.dirty, "a download writes nothing"
    assert _table_counts(session) == before
    assert session.scalar(select(func.count()).select_from(TeamWindow)) == 0
    # The explicit start: 120 h from now (the close is later).
    started_team, window, started = windows.start_team_window(session, phase=phase, user=member,
                                                             now=now)
    session.commit()
    assert (started_team, started) == (team, True)
    assert (window.started_at, window.started_by_id) == (now, member.id)
    assert windows.team_deadline(session, team=team, phase=phase) == now + timedelta(hours=120)
    before = _table_counts(session)
    name, data = inputs.download_inputs(session, storage, phase=phase, dataset="alpha",
                                        user=member, now=now)
    assert name == "STS.input.alpha.txt" and data.startswith(b"alpha sentence 0")
    assert _table_counts(session) == before and not session.new and not session.dirty
    # A teammate's later start returns the window unchanged.
    _, again, started = windows.start_team_window(session, phase=phase, user=captain,
                                                 now=now + timedelta(hours=5))
    assert (again.id, again.started_at, again.started_by_id, started) == (
        window.id, now, member.id, False)
    # A window started late never runs past the close.
    late_team, late_captain = make.team(task)
    _, late, _ = windows.start_team_window(session, phase=phase, user=late_captain,
                                          now=now + timedelta(hours=150))
    assert late.ends_at == phase.closes_at
    assert windows.team_deadline(session, team=late_team, phase=phase) == phase.closes_at


def test_who_may_start_a_window_and_when(session, storage, make, now) -> None:
    task = make.task()
    phase = make.phase(task, "eval", opens_at=now - timedelta(hours=1),
                       closes_at=now + timedelta(hours=200), team_window_hours=24)
    plain = make.phase(task, "plain", opens_at=now - timedelta(hours=1),
                       closes_at=now + timedelta(hours=200))
    _team, captain = make.team(task)
    outsider = make.user()
    organiser = make.user()
    tasks.add_organiser(session, task=task, user=organiser, now=now)
    session.commit()
    with pytest.raises(Forbidden, match="join or create a team"):
        windows.start_team_window(session, phase=phase, user=outsider, now=now)
    with pytest.raises(Forbidden, match="join or create a team"):
        windows.start_team_window(session, phase=phase, user=None, now=now)
    with pytest.raises(InvalidData, match="no per-team windows"):
        windows.start_team_window(session, phase=plain, user=captain, now=now)
    with pytest.raises(PhaseNotOpen, match="opens at"):
        windows.start_team_window(session, phase=phase, user=captain,
                                 now=now - timedelta(hours=2))
    with pytest.raises(PhaseNotOpen, match="closed at"):
        windows.start_team_window(session, phase=phase, user=captain,
                                 now=now + timedelta(hours=200))
    assert session.scalar(select(func.count()).select_from(TeamWindow)) == 0
    # Organisers download freely; a closed phase serves every team.
    assert inputs.download_inputs(session, storage, phase=phase, dataset="alpha",
                                  user=organiser, now=now)[1].startswith(b"alpha")
    assert inputs.download_inputs(session, storage, phase=phase, dataset="alpha",
                                  user=captain, now=now + timedelta(hours=200))[1]
    assert session.scalar(select(func.count()).select_from(TeamWindow)) == 0


def test_inputs_need_a_team_and_an_open_phase(session, storage, make, now) -> None:
    task = make.task()
    phase = make.phase(task, opens_at=now + timedelta(days=1), closes_at=now + timedelta(days=2))
    with pytest.raises(Forbidden):
        inputs.download_inputs(session, storage, phase=phase, dataset="alpha",
                               user=make.user(), now=now)
    with pytest.raises(Forbidden):
        inputs.download_inputs(session, storage, phase=phase, dataset="alpha", user=None,
                               now=now)
    _, captain = make.team(task)
    with pytest.raises(PhaseNotOpen):
        inputs.download_inputs(session, storage, phase=phase, dataset="alpha", user=captain,
                               now=now)
    with pytest.raises(NotFound):
        inputs.download_inputs(session, storage, phase=phase, dataset="gamma", user=captain,
                               now=now)


def test_bad_inputs_are_refused_with_file_and_line(session, storage, make, now) -> None:
    task = make.task(with_inputs=False)
    with pytest.raises(InvalidData) as caught:
        inputs.upload_inputs(session, storage, task=task, dataset="alpha", filename="in.txt",
                             data=b"one\ttwo\nonly one column\n", user=None, now=now)
    assert caught.value.issues and caught.value.issues[0].line == 2
    row = inputs.upload_inputs(session, storage, task=task, dataset="alpha", filename="in.txt",
                               data=b"a\tb\n", user=None, now=now)
    again = inputs.upload_inputs(session, storage, task=task, dataset="alpha",
                                 filename="in.txt", data=b"a\tb\n", user=None, now=now)
    assert again is row and row.version == 1
    newer = inputs.upload_inputs(session, storage, task=task, dataset="alpha",
                                 filename="in.txt", data=b"a\tb\nc\td\n", user=None, now=now)
    assert newer.version == 2 and newer.n_items == 2
    assert inputs.current_inputs(session, task=task)["alpha"] is newer


def test_text_longer_than_its_column_is_refused_before_the_database(session, make, now) -> None:
    task, user = make.task(with_inputs=False), make.user()
    later = now + timedelta(days=1)
    with pytest.raises(InvalidData, match="a phase name has at most 120 characters"):
        tasks.add_phase(session, task, slug="p", name="x" * 121, kind="evaluation",
                        opens_at=now, closes_at=later, now=now)
    with pytest.raises(InvalidData, match="a display name has at most 120"):
        accounts.register_user(session, email="long@example.org", password="12345678",
                               display_name="x" * 121, now=now)
    with pytest.raises(InvalidData, match="a token name has at most 120"):
        accounts.create_api_token(session, user=user, name="t" * 121, now=now)
    with pytest.raises(InvalidData, match="an affiliation has at most 255"):
        teams.create_team(session, task=task, captain=user, name="T", affiliation="a" * 256,
                          now=now)
    phase = tasks.add_phase(session, task, slug="p", name="x" * 120, kind="evaluation",
                            opens_at=now, closes_at=later, now=now)
    assert phase.name == "x" * 120


def test_models_store_utc_aware_times(session, make, now) -> None:
    user = make.user()
    session.expire_all()
    loaded = session.get(User, user.id)
    assert loaded.created_at == now and loaded.created_at.tzinfo is not None
    loaded.created_at = now.replace(tzinfo=None)
    with pytest.raises(Exception, match="naive datetime"):
        session.flush()


def test_team_limits_are_read_once_per_definition_text(make, monkeypatch):
    task = make.task(with_inputs=False)
    calls: list[str] = []
    real = team_rules.tomllib.loads
    monkeypatch.setattr(team_rules.tomllib, "loads", lambda text: calls.append(text) or real(text))
    team_rules._LIMITS.clear()
    assert [team_rules.limits(task).max_members for _ in range(3)] == [None] * 3
    assert len(calls) == 1  # not once per call
    task.definition_text += "\n[teams]\nmax_members = 2\n"
    assert team_rules.limits(task).max_members == 2 and len(calls) == 2  # a new text is read
