"""The authorisation walk (issue 40): every route of the url_map, every method, as each kind of
actor (a visitor, a user on no team, a team's member and its captain, a member of another team,
the task's organiser, an organiser of another task, a site admin, a worker token and a revoked
one), with CSRF tokens that pass. It fails on a 5xx, on a private text in any answer (test
inputs, gold, hidden scores, a hidden run, invite codes, drafts, tokens) to an actor who may not
read it, and on any change to the database by a request the actor was not allowed to make.

The routes' table is checked against the url_map both ways: a route added without a row here
fails `test_the_walk_covers_every_route`, so the next door is walked by construction.
tests/site/app/test_site_routes.py keeps the exact status of each route for two actors.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import inspect, select
from sqlalchemy.orm import Session

from evaluation import parse_task
from semboard.models import ApiToken, ModelSubmission, ModelUpload, NotificationChannel
from semboard.services.data import gold, inputs, parts
from semboard.services.models import worker_tokens
from semboard.services.people import accounts, questions
from semboard.services.runs import submissions
from semboard.services.tasks import announcements, participation, tasks, terms
from tests.site.conftest import NOW, TINY_TOML
from tests.site.tasks.test_site_terms import terms_toml

# who may change something by a route's method; GETs: nobody (a GET never writes)
NOBODY: frozenset[str] = frozenset()
USERS = frozenset({"loner", "member", "captain", "other", "organiser", "organiser2", "admin"})
ANYONE = USERS | {"anonymous", "worker", "revoked"}
TEAM_A = frozenset({"member", "captain", "organiser", "admin"})
CAPTAIN_A = frozenset({"captain", "organiser", "admin"})
OWNER = frozenset({"captain"})  # captain A's own token and upload
ORGANISERS = frozenset({"organiser", "admin"})
ADMIN = frozenset({"admin"})
WORKER = frozenset({"worker"})
ACTORS = ("anonymous", "loner", "member", "captain", "other", "organiser", "organiser2",
          "admin", "worker", "revoked")
# rows a refused request may still write: log-in sessions, throttles' counts, the last use of a
# token or a worker, and mail already sent (bookkeeping, not a change of the site's content)
BOOKKEEPING_TABLES = {"login_session", "rate_limit_event", "notification_sent"}
BOOKKEEPING_COLUMNS = {("api_token", "last_used_at"), ("worker_token", "last_seen_at"),
                       ("user_account", "last_login_at")}


@dataclass(frozen=True)
class Door:
    """A route's method in the walk: the address (with the world's ids), who may change
    something through it, and what is sent (form fields, JSON, or a raw body)."""
    method: str
    rule: str
    path: str
    writers: frozenset[str] = NOBODY
    form: dict[str, Any] = field(default_factory=dict)
    json: Any = None
    raw: bytes | None = None
    headers: dict[str, str] = field(default_factory=dict)


def G(rule: str, path: str | None = None) -> Door:
    """A GET door."""
    return Door("GET", rule, path or rule)


def W(method: str, rule: str, path: str | None, writers: frozenset[str],
      **body: Any) -> Door:
    """A write door."""
    return Door(method, rule, path or rule, writers, **body)


T = "/tasks/<task_name>"
A = "/api/v1"
AT = f"{A}/tasks/<task_name>"
DOORS: list[Door] = [
    G("/"), G("/tasks"), G(T, "/tasks/tiny"), G("/login"), G("/register"),
    G("/forgot-password"), G("/healthz"), G("/api/docs"), G(f"{A}/openapi.json"),
    G("/profile"), G("/profile/account"),
    G("/reset-password/<token>", "/reset-password/not-a-token"),
    G("/verify-email/<token>", "/verify-email/not-a-token"),
    # the task's pages and data
    G(f"{T}/terms", "/tasks/tiny/terms"),
    G(f"{T}/announcements", "/tasks/tiny/announcements"),
    G(f"{T}/announcements.atom", "/tasks/tiny/announcements.atom"),
    G(f"{T}/phases/<phase_slug>/inputs/<dataset>", "/tasks/tiny/phases/eval/inputs/alpha"),
    G(f"{T}/gold/<dataset>", "/tasks/tiny/gold/alpha"),
    G(f"{T}/leaderboard", "/tasks/tiny/leaderboard"),
    G(f"{T}/leaderboard.csv", "/tasks/tiny/leaderboard.csv"),
    G(f"{T}/leaderboard.json", "/tasks/tiny/leaderboard.json"),
    G(f"{T}/leaderboard/<phase_slug>", "/tasks/tiny/leaderboard/post"),
    G(f"{T}/leaderboard/<phase_slug>.csv", "/tasks/tiny/leaderboard/post.csv"),
    G(f"{T}/leaderboard/<phase_slug>.json", "/tasks/tiny/leaderboard/post.json"),
    G(f"{T}/leaderboard/<phase_slug>/charts/<name>.json",
      "/tasks/tiny/leaderboard/post/charts/ci.json"),
    G(f"{T}/compare", "/tasks/tiny/compare?a={run}&b={hidden_run}"),
    G(f"{T}/submit", "/tasks/tiny/submit"), G(f"{T}/submit-model", "/tasks/tiny/submit-model"),
    # runs, their items, charts and exports: a published run and a hidden one
    G("/runs/<int:run_id>", "/runs/{hidden_run}"),
    G("/runs/<int:run_id>/items", "/runs/{run}/items"),
    G("/runs/<int:run_id>/items.csv", "/runs/{run}/items.csv"),
    G("/runs/<int:run_id>/charts/<name>.json", "/runs/{run}/charts/scatter.json"),
    G("/runs/<int:run_id>/exports/<kind>", "/runs/{hidden_run}/exports/mteb"),
    G("/runs/<int:run_id>/description", "/runs/{hidden_run}/description"),
    G("/teams/<int:team_id>", "/teams/{team_a}"),
    G("/models/<int:model_id>/archive", "/models/{model}/archive"),
    G("/model-uploads/<int:upload_id>", "/model-uploads/{upload}"),
    # organisers' and admins' pages
    G("/admin"), G("/admin/queue"), G("/admin/queue/workers"), G("/organise/load"),
    G(f"{T}/organise", "/tasks/tiny/organise"),
    G(f"{T}/organise/log", "/tasks/tiny/organise/log"),
    G(f"{T}/organise/runs", "/tasks/tiny/organise/runs"),
    G(f"{T}/organise/phases/new", "/tasks/tiny/organise/phases/new"),
    G(f"{T}/organise/phases/<phase_slug>", "/tasks/tiny/organise/phases/eval"),
    G(f"{T}/organise/closing", "/tasks/tiny/organise/closing"),
    G(f"{T}/organise/tables/<table>.<fmt>", "/tasks/tiny/organise/tables/runs.csv"),
    G(f"{T}/organise/bundle.zip", "/tasks/tiny/organise/bundle.zip"),
    G(f"{T}/organise/participation", "/tasks/tiny/organise/participation"),
    G(f"{T}/organise/acceptances.csv", "/tasks/tiny/organise/acceptances.csv"),
    G(f"{T}/organise/announcements", "/tasks/tiny/organise/announcements"),
    # the organiser's cockpit and the participants' questions (issue 44)
    G(f"{T}/organise/queue", "/tasks/tiny/organise/queue"),
    G(f"{T}/organise/analytics", "/tasks/tiny/organise/analytics"),
    G(f"{T}/organise/analytics.csv", "/tasks/tiny/organise/analytics.csv"),
    G(f"{T}/organise/analytics.json", "/tasks/tiny/organise/analytics.json"),
    G(f"{T}/organise/channels", "/tasks/tiny/organise/channels"),
    G(f"{T}/questions", "/tasks/tiny/questions"),
    G(f"{T}/questions/<int:question_id>", "/tasks/tiny/questions/{private_question}"),
    G("/unsubscribe/<token>", "/unsubscribe/not-a-token"),
    # the API's reads
    G(f"{A}/me"), G(f"{A}/tasks"), G(AT, f"{A}/tasks/tiny"),
    G(f"{AT}/definition", f"{A}/tasks/tiny/definition"),
    G(f"{AT}/terms", f"{A}/tasks/tiny/terms"),
    G(f"{AT}/acceptances", f"{A}/tasks/tiny/acceptances?format=csv"),
    G(f"{AT}/announcements", f"{A}/tasks/tiny/announcements?status=draft"),
    G(f"{AT}/leaderboard", f"{A}/tasks/tiny/leaderboard?phase=post"),
    G(f"{AT}/gold/<dataset>", f"{A}/tasks/tiny/gold/alpha"),
    G(f"{AT}/phases/<phase_slug>/inputs/<dataset>", f"{A}/tasks/tiny/phases/eval/inputs/alpha"),
    G(f"{AT}/phases/<phase_slug>/primary", f"{A}/tasks/tiny/phases/post/primary"),
    G(f"{AT}/phases/<phase_slug>/window", f"{A}/tasks/tiny/phases/eval/window"),
    G(f"{AT}/compare", f"{A}/tasks/tiny/compare?a={{run}}&b={{hidden_run}}"),
    G(f"{AT}/runs", f"{A}/tasks/tiny/runs"), G(f"{AT}/team", f"{A}/tasks/tiny/team"),
    G(f"{AT}/models", f"{A}/tasks/tiny/models"),
    G(f"{AT}/queue", f"{A}/tasks/tiny/queue"),
    G(f"{AT}/analytics", f"{A}/tasks/tiny/analytics?format=csv"),
    G(f"{AT}/channels", f"{A}/tasks/tiny/channels"),
    G(f"{AT}/questions", f"{A}/tasks/tiny/questions"),
    G(f"{AT}/questions/<int:question_id>", f"{A}/tasks/tiny/questions/{{private_question}}"),
    G(f"{A}/runs/<int:run_id>", f"{A}/runs/{{hidden_run}}"),
    G(f"{A}/runs/<int:run_id>/files/<filename>", f"{A}/runs/{{hidden_run}}/files/{{run_file}}"),
    G(f"{A}/runs/<int:run_id>/exports/<kind>", f"{A}/runs/{{hidden_run}}/exports/mteb"),
    G(f"{A}/models/<int:model_id>", f"{A}/models/{{model}}"),
    G(f"{A}/models/<int:model_id>/archive", f"{A}/models/{{model}}/archive"),
    G(f"{A}/tokens"),
    G(f"{A}/worker/me"),
    G(f"{A}/worker/jobs/<int:model_id>/model", f"{A}/worker/jobs/{{model}}/model?attempt=1"),
    G(f"{A}/worker/jobs/<int:model_id>/inputs/<dataset>",
      f"{A}/worker/jobs/{{model}}/inputs/alpha?attempt=1"),
    # writes: accounts (each user's own)
    W("POST", "/register", None, ANYONE),
    W("POST", "/login", None, ANYONE),
    W("POST", "/forgot-password", None, ANYONE, form={"email": "nobody@example.org"}),
    W("POST", "/reset-password/<token>", "/reset-password/not-a-token", ANYONE,
      form={"password": "x" * 12, "confirm": "x" * 12}),
    W("POST", "/verify-email/<token>", "/verify-email/not-a-token", ANYONE),
    W("POST", "/profile/tokens", None, USERS, form={"name": "walk"}),
    W("POST", "/profile/tokens/<int:token_id>/revoke", "/profile/tokens/{token_a}/revoke",
      OWNER),
    W("POST", "/profile/password", None, USERS),
    W("POST", "/profile/email", None, USERS),
    W("POST", "/profile/notifications", None, USERS),
    # the reader's language (issue 43): the footer's chooser (anyone; an account's own setting
    # changes with it) and the profile's setting
    W("POST", "/language", None, USERS, form={"language": "es", "next": "/tasks"}),
    W("POST", "/profile/language", None, USERS, form={"language": "es"}),
    W("POST", "/profile/verify", None, USERS),
    W("POST", "/profile/sessions/end", None, USERS),
    W("POST", "/profile/delete", None, USERS),  # no password: nothing is deleted
    W("POST", f"{A}/tokens", None, USERS, json={"name": "walk"}),
    W("DELETE", f"{A}/tokens/<int:token_id>", f"{A}/tokens/{{token_a}}", OWNER),
    # taking part: teams, terms, windows, announcements' marks, comparisons
    W("POST", f"{T}/teams", "/tasks/tiny/teams", USERS, form={"name": "Walkers"}),
    W("POST", f"{T}/teams/join", "/tasks/tiny/teams/join", USERS,
      form={"invite_code": "{code_a}"}),
    W("POST", "/teams/<int:team_id>/manage/<action>", "/teams/{team_a}/manage/code", CAPTAIN_A),
    W("POST", f"{T}/terms", "/tasks/tiny/terms", USERS),
    W("POST", f"{T}/phases/<phase_slug>/window", "/tasks/tiny/phases/eval/window", USERS),
    W("POST", f"{T}/announcements/read", "/tasks/tiny/announcements/read", USERS),
    W("POST", f"{T}/announcements/mail", "/tasks/tiny/announcements/mail", USERS,
      form={"on": "1"}),
    W("POST", f"{T}/compare", "/tasks/tiny/compare", USERS,
      form={"a": "{run}", "b": "{hidden_run}"}),
    W("POST", f"{AT}/compare", f"{A}/tasks/tiny/compare?a={{run}}&b={{hidden_run}}", USERS),
    W("POST", f"{AT}/team", f"{A}/tasks/tiny/team", USERS, json={"name": "API walkers"}),
    W("POST", f"{AT}/team/join", f"{A}/tasks/tiny/team/join", USERS,
      json={"invite_code": "{code_a}"}),
    W("POST", f"{AT}/team/invite-code", f"{A}/tasks/tiny/team/invite-code", USERS),
    W("POST", f"{AT}/team/captain", f"{A}/tasks/tiny/team/captain", USERS,
      json={"user_id": "{organiser_id}"}),
    W("DELETE", f"{AT}/team/members/<int:user_id>", f"{A}/tasks/tiny/team/members/{{member_id}}",
      CAPTAIN_A),
    W("POST", f"{AT}/terms/accept", f"{A}/tasks/tiny/terms/accept", USERS, json={}),
    W("POST", f"{AT}/phases/<phase_slug>/window", f"{A}/tasks/tiny/phases/eval/window", USERS),
    # questions: anyone logged in asks and replies to a public one; organisers moderate
    W("POST", f"{T}/questions", "/tasks/tiny/questions", USERS,
      form={"title": "Walk?", "body": "Walked.", "visibility": "private"}),
    W("POST", f"{T}/questions/<int:question_id>/replies",
      "/tasks/tiny/questions/{public_question}/replies", USERS, form={"body": "Walked."}),
    W("POST", f"{AT}/questions", f"{A}/tasks/tiny/questions", USERS,
      json={"title": "Walk?", "body": "Walked.", "visibility": "private"}),
    W("POST", f"{AT}/questions/<int:question_id>/replies",
      f"{A}/tasks/tiny/questions/{{public_question}}/replies", USERS, json={"body": "Walked."}),
    W("POST", f"{T}/questions/<int:question_id>/moderate",
      "/tasks/tiny/questions/{private_question}/moderate", ORGANISERS, form={"action": "faq"}),
    W("POST", f"{T}/questions/<int:question_id>/replies/<int:reply_id>/hide",
      "/tasks/tiny/questions/{public_question}/replies/{reply}/hide", ORGANISERS),
    W("POST", f"{AT}/questions/<int:question_id>/moderate",
      f"{A}/tasks/tiny/questions/{{private_question}}/moderate", ORGANISERS,
      json={"action": "lock"}),
    # a link that is no signed token stops nothing, for anyone
    W("POST", "/unsubscribe/<token>", "/unsubscribe/not-a-token", NOBODY),
    # uploads (each to one's own team) and what belongs to team A
    W("POST", f"{T}/submit", "/tasks/tiny/submit", USERS, form={"phase": "post", "name": "w"}),
    W("POST", f"{T}/submit-model", "/tasks/tiny/submit-model", USERS, form={"phase": "eval"}),
    W("POST", f"{T}/submit-model/parts", "/tasks/tiny/submit-model/parts", USERS,
      form={"phase": "eval", "size": "10", "filename": "m.zip"}),
    W("POST", f"{AT}/runs", f"{A}/tasks/tiny/runs", USERS, form={"name": "w", "phase": "post"}),
    W("POST", f"{AT}/models", f"{A}/tasks/tiny/models", USERS),
    W("POST", f"{AT}/model-uploads", f"{A}/tasks/tiny/model-uploads", USERS,
      json={"size": 10, "filename": "m.zip"}),
    W("PUT", "/model-uploads/<int:upload_id>", "/model-uploads/{upload}", OWNER, raw=b"0123",
      headers={"Content-Range": "bytes 0-3/10"}),
    W("POST", "/model-uploads/<int:upload_id>/finish", "/model-uploads/{upload}/finish", OWNER),
    W("PUT", f"{A}/model-uploads/<int:upload_id>", f"{A}/model-uploads/{{upload}}", OWNER,
      raw=b"0123", headers={"Content-Range": "bytes 0-3/10"}),
    W("POST", f"{A}/model-uploads/<int:upload_id>/finish", f"{A}/model-uploads/{{upload}}/finish",
      OWNER),
    W("POST", "/runs/<int:run_id>/description", "/runs/{hidden_run}/description", TEAM_A,
      form={"description": "walked"}),
    W("POST", f"{A}/runs/<int:run_id>/description", f"{A}/runs/{{hidden_run}}/description",
      TEAM_A, json={"description": "walked"}),
    W("PUT", f"{A}/runs/<int:run_id>/description", f"{A}/runs/{{hidden_run}}/description",
      TEAM_A, json={"description": "walked again"}),
    W("POST", f"{T}/phases/<phase_slug>/primary", "/tasks/tiny/phases/post/primary", TEAM_A,
      form={"run_id": "{hidden_run}", "reason": "walk"}),
    W("POST", f"{AT}/phases/<phase_slug>/primary", f"{A}/tasks/tiny/phases/post/primary",
      TEAM_A, json={"run_id": "{hidden_run}", "reason": "walk"}),
    W("PUT", f"{AT}/phases/<phase_slug>/primary", f"{A}/tasks/tiny/phases/post/primary",
      TEAM_A, json={"run_id": "{hidden_run}", "reason": "walk"}),
    W("POST", "/models/<int:model_id>/publish", "/models/{model}/publish", TEAM_A,
      form={"publish": "1"}),
    W("POST", f"{A}/models/<int:model_id>/publish", f"{A}/models/{{model}}/publish", TEAM_A,
      json={"publish": True}),
    # the organisers' doors
    W("POST", f"{T}/organise/data", "/tasks/tiny/organise/data", ORGANISERS,
      form={"kind": "gold", "dataset": "alpha"}),
    W("POST", f"{T}/organise/baselines", "/tasks/tiny/organise/baselines", ORGANISERS,
      form={"phase": "eval", "name": "walk"}),
    W("POST", f"{AT}/baselines", f"{A}/tasks/tiny/baselines", ORGANISERS, form={"phase": "eval"}),
    W("POST", f"{T}/organise/grants", "/tasks/tiny/organise/grants", ORGANISERS,
      form={"team": "{team_b}", "phase": "eval", "reason": "walk",
            "until": "2012-04-20T00:00"}),
    W("POST", f"{T}/organise/phases/new", "/tasks/tiny/organise/phases/new", ORGANISERS,
      form={"slug": "walk", "name": "Walk", "kind": "trial", "opens_at": "2012-04-01T00:00",
            "closes_at": "2012-04-30T00:00", "late_policy": "reject",
            "visibility": "public", "split": "test", "accepts": "runs"}),
    W("POST", f"{T}/organise/phases/<phase_slug>", "/tasks/tiny/organise/phases/post",
      ORGANISERS, form={"name": "Post", "kind": "post-evaluation", "visibility": "public",
                        "opens_at": "2012-04-01T00:00", "closes_at": "2012-05-30T00:00",
                        "late_policy": "reject", "split": "test", "accepts": "runs"}),
    W("POST", f"{T}/organise/phases/<phase_slug>/publish",
      "/tasks/tiny/organise/phases/post/publish", ORGANISERS),
    W("POST", f"{T}/organise/phases/<phase_slug>/ranking",
      "/tasks/tiny/organise/phases/post/ranking", ORGANISERS, form={"ranking": "primary"}),
    W("POST", f"{T}/organise/release-gold", "/tasks/tiny/organise/release-gold", ORGANISERS),
    W("POST", f"{T}/organise/rescore", "/tasks/tiny/organise/rescore", ORGANISERS),
    W("POST", f"{T}/organise/secret", "/tasks/tiny/organise/secret", ORGANISERS),
    W("POST", f"{T}/organise/terms", "/tasks/tiny/organise/terms", ORGANISERS,
      form={"text": "Walked terms."}),
    W("POST", f"{T}/organise/teams/<int:team_id>/approval",
      "/tasks/tiny/organise/teams/{team_b}/approval", ORGANISERS, form={"state": "refused"}),
    W("POST", f"{T}/organise/teams/<int:team_id>/organiser-team",
      "/tasks/tiny/organise/teams/{team_b}/organiser-team", ORGANISERS, form={"value": "1"}),
    W("POST", f"{T}/organise/models/<int:model_id>/rerun",
      "/tasks/tiny/organise/models/{model}/rerun", ORGANISERS, form={"reason": "walk"}),
    W("POST", f"{T}/organise/models/<int:model_id>/cancel",
      "/tasks/tiny/organise/models/{model}/cancel", ORGANISERS, form={"reason": "walk"}),
    W("POST", f"{T}/organise/announcements", "/tasks/tiny/organise/announcements", ORGANISERS,
      form={"title": "Walk", "body": "Walked."}),
    W("POST", f"{T}/organise/announcements/<int:announcement_id>/send",
      "/tasks/tiny/organise/announcements/{announcement}/send", ORGANISERS),
    W("POST", f"{T}/organise/announcements/<int:announcement_id>/delete",
      "/tasks/tiny/organise/announcements/{announcement}/delete", ORGANISERS),
    W("POST", f"{T}/organise/announcements/<int:announcement_id>/edit",
      "/tasks/tiny/organise/announcements/{sent}/edit", ORGANISERS,
      form={"title": "Sent", "body": "Walked again."}),
    W("PUT", f"{AT}/announcements/<int:announcement_id>",
      f"{A}/tasks/tiny/announcements/{{sent}}", ORGANISERS, json={"body": "Walked twice."}),
    W("PATCH", f"{AT}/announcements/<int:announcement_id>",
      f"{A}/tasks/tiny/announcements/{{sent}}", ORGANISERS, json={"body": "Walked thrice."}),
    W("POST", f"{T}/organise/queue/alerts", "/tasks/tiny/organise/queue/alerts", ORGANISERS,
      form={"wait_minutes": "30", "run_minutes": "60"}),
    W("POST", f"{AT}/queue/alerts", f"{A}/tasks/tiny/queue/alerts", ORGANISERS,
      json={"wait_minutes": 45}),
    W("POST", f"{T}/organise/analytics/refresh", "/tasks/tiny/organise/analytics/refresh",
      ORGANISERS),
    W("POST", f"{AT}/analytics/refresh", f"{A}/tasks/tiny/analytics/refresh", ORGANISERS),
    W("POST", f"{T}/organise/channels", "/tasks/tiny/organise/channels", ORGANISERS,
      form={"kind": "mail", "name": "walk", "target": "walk@example.org",
            "events": "run_scored"}),
    W("POST", f"{AT}/channels", f"{A}/tasks/tiny/channels", ORGANISERS,
      json={"kind": "mail", "name": "walk", "target": "walk@example.org",
            "events": ["run_scored"]}),
    W("POST", f"{T}/organise/channels/<int:channel_id>/test",
      "/tasks/tiny/organise/channels/{channel}/test", ORGANISERS),
    W("POST", f"{T}/organise/channels/<int:channel_id>/secret",
      "/tasks/tiny/organise/channels/{channel}/secret", ORGANISERS),
    W("POST", f"{T}/organise/channels/<int:channel_id>/remove",
      "/tasks/tiny/organise/channels/{channel}/remove", ORGANISERS),
    W("DELETE", f"{AT}/channels/<int:channel_id>", f"{A}/tasks/tiny/channels/{{channel}}",
      ORGANISERS),
    W("POST", f"{T}/organise/announcements/<int:announcement_id>/withdraw",
      "/tasks/tiny/organise/announcements/{sent}/withdraw", ORGANISERS, form={"reason": "walk"}),
    W("POST", f"{AT}/announcements/<int:announcement_id>/withdraw",
      f"{A}/tasks/tiny/announcements/{{sent}}/withdraw", ORGANISERS, json={"reason": "walk"}),
    W("POST", f"{T}/organise/closing/move-run", "/tasks/tiny/organise/closing/move-run",
      ORGANISERS, form={"run": "{hidden_run}", "team": "{team_b}", "reason": "walk"}),
    W("POST", f"{T}/organise/closing/merge-teams", "/tasks/tiny/organise/closing/merge-teams",
      ORGANISERS, form={"source": "{team_b}", "target": "{team_a}", "reason": "walk"}),
    W("POST", f"{T}/organise/closing/schedule", "/tasks/tiny/organise/closing/schedule",
      ORGANISERS, form={"phase": "post", "publish_at": "2012-05-01T00:00"}),
    W("POST", f"{AT}/phases", f"{A}/tasks/tiny/phases", ORGANISERS,
      json={"slug": "post", "visibility": "public"}),
    W("POST", f"{AT}/teams/<int:team_id>/approval", f"{A}/tasks/tiny/teams/{{team_b}}/approval",
      ORGANISERS, json={"state": "refused"}),
    W("POST", f"{AT}/announcements", f"{A}/tasks/tiny/announcements", ORGANISERS,
      json={"title": "Walk", "body": "Walked."}),
    W("POST", f"{AT}/announcements/<int:announcement_id>/send",
      f"{A}/tasks/tiny/announcements/{{announcement}}/send", ORGANISERS, json={}),
    W("POST", "/admin/queue/workers", None, ORGANISERS, form={"task": "tiny", "name": "walk"}),
    W("POST", "/admin/queue/workers/<int:token_id>/revoke",
      "/admin/queue/workers/{worker_token_id}/revoke", ORGANISERS),
    # the site admins'
    W("POST", "/admin", None, ADMIN, form={"task": "tiny", "email": "{loner_email}"}),
    W("POST", "/admin/accounts", None, ADMIN, form={"email": "{loner_email}", "active": "0"}),
    W("POST", "/admin/queue/recover", None, ADMIN),
    W("POST", "/admin/tasks/<task_name>/organisers/<int:user_id>/remove",
      "/admin/tasks/tiny/organisers/{organiser_id}/remove", ADMIN),
    W("POST", "/organise/load", None, ADMIN, form={"shipped": "sts2012"}),
    # remote workers: the task's worker token only (and only for a job it holds: none here)
    W("POST", f"{A}/worker/claim", None, WORKER, json={}),
    W("POST", f"{A}/worker/jobs/<int:model_id>/progress", f"{A}/worker/jobs/{{model}}/progress",
      WORKER, json={"attempt": 1}),
    W("POST", f"{A}/worker/jobs/<int:model_id>/result", f"{A}/worker/jobs/{{model}}/result",
      WORKER, json={"attempt": 1}),
    W("POST", f"{A}/worker/jobs/<int:model_id>/failure", f"{A}/worker/jobs/{{model}}/failure",
      WORKER, json={"attempt": 1, "reason": "walk"}),
    W("DELETE", f"{A}/model-uploads/<int:upload_id>", f"{A}/model-uploads/{{upload}}", OWNER),
    G(f"{A}/model-uploads/<int:upload_id>", f"{A}/model-uploads/{{upload}}"),
    # a split test set (issue 42): phase eval splits its items (revealed by the gold's release)
    G(f"{T}/leaderboard/<phase_slug>/final", "/tasks/tiny/leaderboard/eval/final"),
    G(f"{T}/leaderboard/<phase_slug>/boards/<kind>.<fmt>",
      "/tasks/tiny/leaderboard/eval/boards/private.csv"),
    G(f"{T}/leaderboard/<phase_slug>/shakeup.<fmt>", "/tasks/tiny/leaderboard/eval/shakeup.json"),
    G(f"{T}/phases/<phase_slug>/split.tsv", "/tasks/tiny/phases/eval/split.tsv"),
    G(f"{AT}/phases/<phase_slug>/parts", f"{A}/tasks/tiny/phases/eval/parts"),
    G(f"{AT}/phases/<phase_slug>/boards/<kind>", f"{A}/tasks/tiny/phases/eval/boards/whole"),
    G(f"{AT}/phases/<phase_slug>/shakeup", f"{A}/tasks/tiny/phases/eval/shakeup"),
    G(f"{AT}/phases/<phase_slug>/split", f"{A}/tasks/tiny/phases/eval/split"),
    G(f"{AT}/phases/<phase_slug>/finals", f"{A}/tasks/tiny/phases/eval/finals"),
    W("POST", f"{T}/phases/<phase_slug>/finals", "/tasks/tiny/phases/eval/finals", TEAM_A,
      form={"run_id": "{run}"}),
    W("PUT", f"{AT}/phases/<phase_slug>/finals", f"{A}/tasks/tiny/phases/eval/finals", TEAM_A,
      json={"runs": []}),
    W("POST", f"{AT}/phases/<phase_slug>/finals", f"{A}/tasks/tiny/phases/eval/finals", TEAM_A,
      json={"runs": []}),
    W("POST", f"{T}/organise/phases/<phase_slug>/freeze",
      "/tasks/tiny/organise/phases/eval/freeze", ORGANISERS,
      form={"freeze_at": "", "reveal": "close"}),
    W("PUT", f"{AT}/phases/<phase_slug>/freeze", f"{A}/tasks/tiny/phases/eval/freeze",
      ORGANISERS, json={"reveal": "publish"}),
    W("POST", f"{T}/organise/phases/<phase_slug>/shakeup",
      "/tasks/tiny/organise/phases/eval/shakeup", ORGANISERS),
    W("POST", f"{AT}/phases/<phase_slug>/shakeup", f"{A}/tasks/tiny/phases/eval/shakeup",
      ORGANISERS, json={}),
    W("POST", f"{T}/organise/phases/<phase_slug>/parts", "/tasks/tiny/organise/phases/eval/parts",
      ORGANISERS, form={"seed": "5", "again": "1", "reason": "walk"}),
    W("POST", f"{AT}/phases/<phase_slug>/parts", f"{A}/tasks/tiny/phases/eval/parts",
      ORGANISERS, json={"seed": 3, "again": True, "reason": "walk"}),
    # last: leaving the team and logging out end the actor's standing
    W("POST", f"{AT}/team/leave", f"{A}/tasks/tiny/team/leave", USERS),
    W("POST", "/logout", None, ANYONE),
]


# ----------------------------------------------------------------------------- the world


@dataclass
class World:
    """The walked site: ids for the addresses, each actor's credentials and what each may read."""
    ids: dict[str, Any]
    users: dict[str, Any]
    api: dict[str, dict[str, str]]
    secrets: dict[str, set[str]]  # a private text -> the actors who may read it


@pytest.fixture
def world(app, session, storage, make, tiny_data, now) -> World:
    """The tiny task with terms (the task's and eval's), team approval, a published board
    ("eval", team A's run; its test items split into public and private parts) and a board
    only organisers see ("post", team A's hidden run), the gold released; teams A (captain,
    member) and B, a user on no team, organisers of this task and of another, an admin, a
    worker token and a revoked one."""
    app.config["SEMBOARD_CLOCK"] = lambda: now + timedelta(days=2)
    app.config["WTF_CSRF_ENABLED"] = True
    app.config["PROPAGATE_EXCEPTIONS"] = False  # a failure answers 500: reported with its door
    app.config["SEMBOARD_MODEL_JOBS"] = "remote"
    toml = terms_toml(phase_terms="Runs stay private.", participation_table="approval = true")
    toml += '[parts]\nphases = ["eval"]\npublic = 0.5\nresplits = 20\nresamples = 20\n'
    task = tasks.load_task(session, parse_task(toml), now=NOW)
    inputs.load_release_inputs(session, storage, task=task, release_dir=tiny_data.folder,
                               user=None, now=NOW)
    gold.load_release_gold(session, storage, task=task, release_dir=tiny_data.folder,
                           user=None, now=NOW)
    other = tasks.load_task(session, parse_task(TINY_TOML.replace('name = "tiny"',
                                                                  'name = "other"')), now=NOW)
    session.commit()
    eval_phase = make.phase(task, "eval", closes_at=NOW + timedelta(days=1))
    team_a, captain = make.team(task, "Alpha", members=2)
    member = next(m.user for m in team_a.members if m.user_id != captain.id)
    team_b, other_captain = make.team(task, "Beta")
    loner = make.user()
    organiser, organiser2, admin = make.user(), make.user(), make.user(admin=True)
    tasks.add_organiser(session, task=task, user=organiser, now=NOW)
    tasks.add_organiser(session, task=other, user=organiser2, now=NOW)
    for team in (team_a, team_b):
        participation.decide(session, team=team, state="approved", user=None, now=NOW)
    for user in (captain, member, other_captain, loner):
        terms.accept(session, task=task, user=user, client="web", now=NOW)
    # a split of a fixed seed: a secret one could make a public part's figure equal the hidden
    # run's by chance (4 digits of a tiny set), and the walk would see a leak that is not one
    parts.draw(session, storage, phase=eval_phase, seed=7, user=None, now=NOW,
               gold=gold.parsed_gold(session, storage, task=task, split=eval_phase.split))
    session.commit()
    run = submissions.submit(session, storage, team=team_a, phase=eval_phase, user=captain,
                             name="public-run", files=tiny_data.run(seed=1), now=NOW)
    released = NOW + timedelta(days=1, hours=1)
    gold.release_gold(session, task=task, user=None, now=released)
    session.commit()
    # after the release (no oracle then): a board only the organisers see
    post = make.phase(task, "post", kind="post-evaluation", visibility="organisers",
                      opens_at=released, closes_at=NOW + timedelta(days=30))
    hidden = submissions.submit(session, storage, team=team_a, phase=post, user=captain,
                                name="hidden-post-run", files=tiny_data.run(seed=2),
                                now=released + timedelta(hours=1))
    model = ModelSubmission(task_id=task.id, phase_id=eval_phase.id, team_id=team_a.id,
                            user_id=captain.id, name="private-model", uploaded_at=NOW,
                            storage_key="models/tiny/none.zip", archive_sha256="0" * 64, size=1,
                            digest="1" * 64, options={}, status="failed",
                            description={"architecture": "bert", "n_parameters": 4_000,
                                         "pooling": "mean", "model_name": "tiny-bert"})
    session.add(model)
    storage.put(model.storage_key, b"PK\x05\x06" + b"\0" * 18)  # an empty zip: its archive
    upload = ModelUpload(task_id=task.id, team_id=team_a.id, user_id=captain.id,
                         filename="m.zip", size=10, received=0, sha256=None, parts=[],
                         options={"phase_id": eval_phase.id, "name": "m"}, created_at=NOW,
                         updated_at=NOW)
    session.add(upload)
    draft = announcements.draft(session, task=task, kind="deadline", title="Draft",
                                body="private-draft-text", now=NOW)
    sent = announcements.send_draft(
        session, user=None, now=NOW, announcement=announcements.draft(
            session, task=task, kind="deadline", title="Sent", body="Walked.", now=NOW))
    public_q = questions.ask(session, task=task, user=captain, title="Public?",
                             body="A public question.", visibility="public", now=NOW)
    answer = questions.reply(session, question=public_q, user=organiser, body="An answer.",
                             now=NOW)
    private_q = questions.ask(session, task=task, user=member, title="Private?",
                              body="private-question-text", visibility="private", now=NOW)
    channel = NotificationChannel(task_id=task.id, kind="mail", name="organisers",
                                  target="private-list@example.org", events=["run_scored"],
                                  created_at=NOW)
    session.add(channel)
    worker_row, worker = worker_tokens.issue(session, task=task, name="gpu", by=None, now=NOW)
    revoked_row, revoked = worker_tokens.issue(session, task=task, name="old", by=None, now=NOW)
    session.flush()
    worker_tokens.revoke(session, token_id=revoked_row.id, by=None, now=NOW)
    users = {"loner": loner, "member": member, "captain": captain, "other": other_captain,
             "organiser": organiser, "organiser2": organiser2, "admin": admin}
    tokens = {name: accounts.create_api_token(session, user=user, name="walk", now=NOW)
              for name, user in users.items()}
    spare = accounts.create_api_token(session, user=captain, name="spare", now=NOW)
    session.commit()
    hidden_scores = {f"{v:.6f}"[:6] for k, v in hidden.current_score.flat.items()
                     if k == "ALL" and v is not None}
    public_scores = {f"{v:.6f}"[:6] for v in run.current_score.flat.values() if v is not None}
    assert hidden_scores and not hidden_scores & public_scores
    participants = {"member", "captain", "other", "organiser", "admin"}
    secrets: dict[str, set[str]] = {
        TEXT: participants, GOLD_LINES(tiny_data): participants,
        "hidden-post-run": TEAM_A, team_a.invite_code: CAPTAIN_A,
        team_b.invite_code: {"other", "organiser", "admin"},
        "private-draft-text": set(ORGANISERS), worker: set(), revoked: set(),
        "private-question-text": {"member", "organiser", "admin"},
        "private-list@example.org": set(ORGANISERS),
        **{value: set(ORGANISERS) for value in hidden_scores},
        **{token: {name} for name, token in tokens.items()}, spare: set(),
    }
    api = {name: {"Authorization": f"Bearer {token}"} for name, token in tokens.items()}
    api |= {"anonymous": {}, "worker": {"Authorization": f"Bearer {worker}"},
            "revoked": {"Authorization": f"Bearer {revoked}"}}
    ids = {"run": run.id, "hidden_run": hidden.id, "team_a": team_a.id, "team_b": team_b.id,
           "model": model.id, "upload": upload.id, "announcement": draft.id,
           "organiser_id": organiser.id, "member_id": member.id, "code_a": team_a.invite_code,
           "token_a": session.scalar(select(ApiToken.id).where(ApiToken.user_id == captain.id,
                                                               ApiToken.name == "spare")),
           "worker_token_id": worker_row.id, "loner_email": loner.email,
           "run_file": hidden.files[0].filename, "sent": sent.id,
           "public_question": public_q.id, "private_question": private_q.id,
           "reply": answer.id, "channel": channel.id}
    return World(ids, users, api, secrets)


TEXT = "alpha sentence 3 one."  # a test input's text (tests/site/conftest.py)


def GOLD_LINES(tiny_data) -> str:
    """The gold file's first lines, as a download would hold them."""
    return "".join(f"{v}\n" for v in tiny_data.gold["alpha"][:4])


# ----------------------------------------------------------------------------- the walk


class Snapshots:
    """Each table's content (bookkeeping left out) as a digest of its rows, read on a raw
    connection of its own; on SQLite only when the database changed since the last reading
    (PRAGMA data_version), so a GET costs one query."""

    def __init__(self, session: Session) -> None:
        bind = session.get_bind()
        self.sqlite = bind.dialect.name == "sqlite"
        self.queries = []
        for table in sorted(inspect(bind).get_table_names()):
            if table in BOOKKEEPING_TABLES or table == "alembic_version":
                continue
            columns = [c["name"] for c in inspect(bind).get_columns(table)
                       if (table, c["name"]) not in BOOKKEEPING_COLUMNS]
            self.queries.append((table, f"SELECT {', '.join(columns)} FROM {table} ORDER BY 1"))
        self.connection = bind.raw_connection()  # type: ignore[union-attr]
        self.version: Any = None
        self.last: dict[str, str] = {}

    def take(self) -> dict[str, str]:
        """The tables' digests now."""
        cursor = self.connection.cursor()
        if self.sqlite:
            cursor.execute("PRAGMA data_version")
            version = cursor.fetchone()[0]
            if version == self.version:
                return self.last
            self.version = version
        found = {}
        for table, query in self.queries:
            cursor.execute(query)
            found[table] = hashlib.sha256(repr(cursor.fetchall()).encode()).hexdigest()
        self.connection.rollback()
        self.last = found
        return found

    def close(self) -> None:
        """Give the connection back."""
        self.connection.close()


CSRF = re.compile(r'<input[^>]*name="csrf_token"[^>]*value="([^"]+)"'
                  r'|<input[^>]*value="([^"]+)"[^>]*name="csrf_token"')


def _csrf(client) -> str:
    """A token the client's session passes with (any page's log-out form, else the log-in's)."""
    found = CSRF.search(client.get("/").get_data(as_text=True)) or CSRF.search(
        client.get("/login").get_data(as_text=True))
    assert found, "no CSRF token on the page"
    return found.group(1) or found.group(2)


def _fill(value: Any, ids: dict[str, Any]) -> Any:
    if isinstance(value, str):
        return value.format(**ids)
    if isinstance(value, dict):
        return {k: _fill(v, ids) for k, v in value.items()}
    return value


def walk(app, session: Session, world: World, actor: str) -> list[str]:
    """Every door as the actor; the problems found."""
    client = app.test_client()
    user = world.users.get(actor)
    if user is not None:
        answer = client.post("/login", data={"email": user.email, "password": "password123",
                                             "csrf_token": _csrf(client)})
        assert answer.status_code == 302, f"{actor} could not log in"
    api_headers = world.api[actor]
    session.rollback()
    snapshots = Snapshots(session)
    try:
        return _walk(client, snapshots, world, actor, api_headers)
    finally:
        snapshots.close()


def _walk(client, snapshots: Snapshots, world: World, actor: str,
          api_headers: dict[str, str]) -> list[str]:
    problems = []
    for door in DOORS:
        path = door.path.format(**world.ids)
        is_api = path.startswith("/api/")
        headers = dict(api_headers) if is_api else {}
        headers.update(door.headers)
        kwargs: dict[str, Any] = {"headers": headers}
        if door.method != "GET":
            token = None if is_api else _csrf(client)
            if door.json is not None:
                kwargs["json"] = _fill(door.json, world.ids)
                if token:
                    headers["X-CSRFToken"] = token
            elif door.raw is not None:
                kwargs["data"] = door.raw
                if token:
                    headers["X-CSRFToken"] = token
            else:
                form = _fill(door.form, world.ids)
                if token:
                    form["csrf_token"] = token
                kwargs["data"] = form
        before = snapshots.take()
        response = client.open(path, method=door.method, **kwargs)
        after = snapshots.take()
        body = (response.get_data().decode("utf-8", "replace")
                + response.headers.get("Location", ""))
        where = f"{actor} {door.method} {path}"
        if response.status_code >= 500:
            problems.append(f"{where}: {response.status_code}")
        leaked = [s for s, readers in world.secrets.items() if actor not in readers and s in body]
        if leaked:
            problems.append(f"{where} ({response.status_code}) shows {leaked}")
        changed = sorted(t for t in after if after[t] != before.get(t))
        if changed and actor not in door.writers:
            problems.append(f"{where} ({response.status_code}) changed {changed}")
    return problems


def test_the_walk_covers_every_route(app):
    walked = {(d.method, d.rule) for d in DOORS}
    routes = {(method, rule.rule) for rule in app.url_map.iter_rules()
              if rule.endpoint != "static"
              for method in (rule.methods or set()) - {"HEAD", "OPTIONS"}}
    assert not routes - walked, f"routes without a row in DOORS: {sorted(routes - walked)}"
    assert not walked - routes, f"rows of DOORS naming no route: {sorted(walked - routes)}"


@pytest.mark.parametrize("actor", ACTORS)
def test_walk_every_route_as(app, session, world, actor):
    problems = walk(app, session, world, actor)
    assert not problems, "\n".join(problems)


def test_the_walk_sees_a_leak_a_500_and_an_unauthorised_change(app, session, world,
                                                               monkeypatch):
    """The walk's own check: with everyone taken for an organiser and the announcements
    failing, a user on no team is reported on each count."""
    from semboard.services.tasks import access, roles

    for module in (access, roles):
        monkeypatch.setattr(module, "is_organiser", lambda *a, **k: True)
        monkeypatch.setattr(module, "can_manage_task", lambda *a, **k: True)
        monkeypatch.setattr(module, "require_organiser", lambda *a, **k: None)

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("broken on purpose")

    monkeypatch.setattr(announcements, "visible", broken)
    problems = "\n".join(walk(app, session, world, "loner"))
    assert f"loner GET /runs/{world.ids['run']}/items.csv (200) shows ['{TEXT}'" in problems
    assert "loner POST /tasks/tiny/organise/secret (302) changed ['task_secret']" in problems
    assert "loner GET /tasks/tiny/announcements: 500" in problems
