"""The OpenAPI 3.1 description of /api/v1, kept in code next to the routes.

tests/site/api/test_site_participant_api.py checks that every /api/v1 route of the app is
described here and validates the real responses of the API against these schemas, so the two
cannot drift apart.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from semboard.web.hardening import MAX_ID

STR = {"type": "string"}
INT = {"type": "integer"}
BOOL = {"type": "boolean"}
TIME = {"type": "string", "format": "date-time"}
NULL_TIME = {"type": ["string", "null"], "format": "date-time"}


def _ref(name: str) -> dict[str, Any]:
    return {"$ref": f"#/components/schemas/{name}"}


def _obj(required: dict[str, Any], optional: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"type": "object", "required": sorted(required),
            "properties": {**required, **(optional or {})}}


SCHEMAS: dict[str, Any] = {
    "Error": _obj({"error": STR}, {"issues": {"type": "array", "items": _ref("Issue")},
                                   "status": INT}),
    "Issue": {"type": "object", "properties": {"file": {"type": ["string", "null"]},
                                               "line": {"type": ["integer", "null"]},
                                               "message": STR}},
    "Phase": _obj({"slug": STR, "name": STR, "kind": STR, "opens_at": TIME, "closes_at": TIME,
                   "open": BOOL, "team_window_hours": {"type": ["integer", "null"]},
                   "max_runs": {"type": ["integer", "null"]}, "late_policy": STR,
                   "visibility": STR, "track": {"type": ["string", "null"]},
                   "results_published": BOOL},
                  {"model_settings": {"type": ["object", "null"]},
                   "score_in_request_pairs": {"type": ["integer", "null"]},
                   "scored_in_request_up_to": INT,
                   # teams formed and terms accepted by then may upload after it (issue 44)
                   "entry_deadline": NULL_TIME, "entry_open": BOOL, "freeze_at": NULL_TIME,
                   "reveal": {"enum": ["close", "publish"]},
                   "parts": {"type": ["object", "null"]}}),
    "Task": _obj({"name": STR, "title": STR, "gold_released": BOOL,
                  "phases": {"type": "array", "items": _ref("Phase")}},
                 {"description": STR,
                  "datasets": {"type": "array", "items": _obj(
                      {"name": STR, "track": {"type": ["string", "null"]}, "required": BOOL,
                       "run_filename": STR,
                       "team_run_filename": {"type": ["string", "null"]},
                       "inputs_available": BOOL})},
                  "aggregate_metrics": {"type": "array", "items": STR},
                  "team": _obj({"name": STR, "deadlines": {"type": "object",
                                                           "additionalProperties": TIME}})}),
    "PrimaryRun": _obj({"phase": STR, "ranking": {"enum": ["every", "primary"]}, "team": STR,
                        "fallback": {"type": ["string", "null"]}, "changeable": BOOL,
                        "closes_at": TIME,
                        "primary": {"oneOf": [{"type": "null"}, _obj(
                            {"run_id": INT, "run": STR, "chosen": BOOL,
                             "chosen_at": NULL_TIME})]}}),
    "FinalRuns": _obj({"phase": STR, "team": STR, "limit": {"type": ["integer", "null"]},
                       "fallback": STR, "changeable": BOOL, "closes_at": TIME, "chosen": BOOL,
                       "settled": BOOL, "finals": {"type": "array", "items": _obj(
                           {"run_id": INT, "run": STR})}}),
    "Parts": _obj({"phase": STR, "rule": {"type": "object"}, "drawn": BOOL,
                   "digest": {"type": ["string", "null"]}, "source": STR,
                   "counts": {"type": ["object", "null"]},
                   "seed": {"type": ["integer", "null"]}, "revealed": BOOL,
                   "freeze_at": NULL_TIME, "reveal": {"enum": ["close", "publish"]}}),
    "Freeze": _obj({"phase": STR, "freeze_at": NULL_TIME,
                    "reveal": {"enum": ["close", "publish"]}}),
    "Shakeup": _obj({"phase": STR, "status": {"enum": ["pending", "done", "stale"]}},
                    {"computed_at": NULL_TIME, "metric": STR, "official": STR,
                     "teams": {"type": "array", "items": _obj(
                         {"team": STR, "runs": INT, "public_rank": INT, "private_rank": INT,
                          "change": INT, "flagged": BOOL},
                         {"public": {"type": "number"}, "private": {"type": "number"},
                          "gap": {"type": "number"},
                          "private_rank_ci": {"type": ["array", "null"]},
                          "null_percentile": {"type": ["number", "null"]},
                          "p_value": {"type": ["number", "null"]},
                          "counted_run": {"type": ["integer", "null"]}, "chose": BOOL})},
                     "kendall_tau": {"type": "object"}, "flagged": INT,
                     "resplits": INT, "resamples": INT, "alpha": {"type": "number"},
                     "chart": {"type": ["object", "null"]}}),
    "Terms": _obj({"task": STR, "accepted": BOOL, "terms_url": STR,
                   "versions": {"type": "array", "items": _ref("TermsVersion")},
                   "scheduled": {"type": "array", "items": _ref("TermsVersion")}},
                  {"license": {"type": ["string", "null"]}, "license_is_spdx": BOOL,
                   "citation": {"type": ["string", "null"]},
                   "terms_document_url": {"type": ["string", "null"]},
                    "mail_statement": STR}),
    # one version as its caller stands with it; covered_until: not accepted, but the text it
    # replaced was and its grace period runs until then (issue 40)
    "TermsVersion": _obj({"phase": {"type": ["string", "null"]}, "digest": STR, "text": STR,
                          "accepted": BOOL, "source": STR, "effective_at": TIME,
                          "grace_until": NULL_TIME, "covered_until": NULL_TIME}),
    "TermsAccepted": _obj({"task": STR, "accepted": {"type": "array", "items": STR},
                           "new": INT}),
    "AcceptanceList": _obj({"task": STR, "summary": {"type": "object"}, "acceptances": {
        "type": "array", "items": _obj({"user": STR, "email": STR,
                                        "team": {"type": ["string", "null"]},
                                        "phase": {"type": ["string", "null"]}, "digest": STR,
                                        "client": {"enum": ["web", "api", "cli"]},
                                        "accepted_at": TIME, "current": BOOL})}}),
    "Approval": _obj({"team": STR, "state": {"enum": ["approved", "refused"]}},
                     {"reason": STR}),
    "Announcement": _obj({"id": INT, "kind": STR, "status": {"enum": ["draft", "sent"]},
                          "title": STR, "body": STR, "phase": {"type": ["string", "null"]},
                          "audience": STR, "created_at": TIME, "sent_at": NULL_TIME},
                         {"unread": BOOL, "critical": BOOL, "edited_at": NULL_TIME,
                          "withdrawn_at": NULL_TIME,
                          "withdraw_reason": {"type": ["string", "null"]},
                          "revisions": {"type": "array", "items": _obj(
                              {"title": STR, "body": STR, "edited_at": TIME})}}),
    "AnnouncementList": _obj({"task": STR, "announcements": {
        "type": "array", "items": _ref("Announcement")}}),
    "TaskList": _obj({"tasks": {"type": "array", "items": _ref("Task")}}),
    # the organiser's cockpit (issue 44)
    "AlertSettings": _obj({"wait_minutes": {"type": ["integer", "null"]},
                           "run_minutes": {"type": ["integer", "null"]},
                           "draft_announcement": BOOL, "mail_organisers": BOOL}),
    "Queue": _obj({"task": STR, "now": TIME, "counts": {"type": "object"},
                   "failed_by_type": _obj({"models": {"type": "object"},
                                           "runs": {"type": "object"}}),
                   "waiting_runs": {"type": "array"}, "queued_models": {"type": "array"},
                   "running_models": {"type": "array"}, "failed_models": {"type": "array"},
                   "error_runs": {"type": "array"}, "workers": {"type": "array"},
                   "watch": _ref("AlertSettings"), "alerts": {"type": "array"}}),
    "Analytics": _obj({"task": STR, "computed_at": TIME, "uploads_by_day": {"type": "array"},
                       "refusals_by_day": {"type": "array"},
                       "refusals_by_reason": {"type": "array"},
                       "active_teams": {"type": "array"}, "best_scores": {"type": "array"},
                       "scoring_times": {"type": "array"}, "model_times": {"type": "array"}},
                      {"elapsed_ms": INT, "computed_for": TIME}),
    "Accepted": _obj({"task": STR, "status": STR}),
    "Channel": _obj({"id": INT, "kind": {"enum": ["webhook", "chat", "mail"]}, "name": STR,
                     "target": STR, "secret": {"type": ["string", "null"]},
                     "events": {"type": "array", "items": STR}, "created_at": TIME,
                     "removed_at": NULL_TIME}),
    "ChannelList": _obj({"task": STR, "channels": {"type": "array", "items": _ref("Channel")},
                         "deliveries": {"type": "array", "items": _obj(
                             {"id": INT, "channel_id": INT, "event": STR,
                              "status": {"enum": ["pending", "sent", "failed"]},
                              "attempts": INT, "created_at": TIME})}}),
    "Question": _obj({"id": INT, "title": STR, "body": STR,
                      "visibility": {"enum": ["public", "private"]}, "published": BOOL,
                      "faq": BOOL, "locked": BOOL, "hidden": BOOL,
                      "asker": {"type": ["string", "null"]}, "created_at": TIME,
                      "updated_at": TIME, "answered_at": NULL_TIME},
                     {"replies": {"type": "array", "items": _obj(
                         {"id": INT, "body": STR, "by_organiser": BOOL, "hidden": BOOL,
                          "author": {"type": ["string", "null"]}, "created_at": TIME})}}),
    "QuestionList": _obj({"task": STR, "questions": {"type": "array",
                                                     "items": _ref("Question")}}),
    "Run": _obj({"id": INT, "task": STR, "phase": STR, "team": STR, "name": STR,
                 "status": {"enum": ["received", "valid", "scored", "error"]}, "current": BOOL,
                 "late": BOOL, "post_deadline_fix": BOOL, "baseline": BOOL,
                 "submitted_at": TIME, "replaced_at": NULL_TIME,
                 "files": {"type": "array", "items": _obj(
                     {"filename": STR, "dataset": {"type": ["string", "null"]}, "sha256": STR,
                      "size": INT})},
                 "issues": {"type": "array"}, "metadata": {"type": "object"}},
                {"metrics": {"type": "object"}, "scores": {"type": "object"},
                 "description": _obj({"text": STR, "answers": {"type": "object"}}),
                 "score_history": {"type": "array"}, "audit": {"type": "array"}}),
    "Comparison": _obj({"status_url": STR}, {"status": STR, "metrics": {"type": "array"}}),
    "Description": _obj({"text": STR, "answers": {"type": "object"}}),
    "RunList": _obj({"task": STR, "team": STR, "runs": {"type": "array", "items": _ref("Run")}}),
    "Leaderboard": _obj({"task": STR, "phase": STR, "rows": {"type": "array", "items": _obj(
        {"run_id": INT, "team": STR, "run": STR, "baseline": BOOL,
         "flags": {"type": "array", "items": STR}, "metrics": {"type": "object"},
         "ranks": {"type": "object"}, "submitted_at": TIME})}},
        {"significance": {"type": ["object", "null"]}, "groups_pending": BOOL,
         # when the groups went out of date (the oldest score they lack); null when current
         "groups_pending_since": {"type": ["string", "null"], "format": "date-time"}}),
    "Team": _obj({"id": INT, "task": STR, "name": STR, "affiliation": STR,
                  "captain_id": {"type": ["integer", "null"]},
                  "members": {"type": "array", "items": _obj(
                      {"user_id": INT, "display_name": STR, "joined_at": TIME,
                       "captain": BOOL})},
                  "max_members": {"type": ["integer", "null"]}, "locked": BOOL},
                 {"invite_code": STR}),
    "LeftTeam": _obj({"left": STR, "team_deleted": BOOL}),
    "Token": _obj({"id": INT, "name": STR, "prefix": STR, "created_at": TIME,
                   "last_used_at": NULL_TIME, "revoked": BOOL}, {"token": STR}),
    "TokenList": _obj({"tokens": {"type": "array", "items": _ref("Token")}}),
    "Window": _obj({"phase": STR, "team": STR, "started_at": TIME, "ends_at": TIME}),
    "Me": _obj({"id": INT, "email": STR, "display_name": STR, "email_verified": BOOL}),
    "Model": _obj({"id": INT, "task": STR, "phase": STR, "team": STR, "name": STR,
                   "status": {"enum": ["queued", "running", "failed", "done"]}, "reason": STR,
                   "queue_position": {"type": ["integer", "null"]}, "uploaded_at": TIME,
                   "started_at": NULL_TIME, "finished_at": NULL_TIME, "attempts": INT,
                   "failure": {"enum": ["refused", "too_slow", "out_of_memory", "worker_lost",
                                        "cancelled", "internal", None]},
                   "heartbeat_at": NULL_TIME, "display_name": STR,
                   "progress": {"type": ["object", "null"]},
                   "run_id": {"type": ["integer", "null"]}, "digest": STR,
                   "archive_sha256": STR, "size": INT, "options": {"type": "object"},
                   "published_at": NULL_TIME, "model": {"type": "object"},
                   "prompt_note": STR,
                   # a queued model no registered worker can run: why it waits (else null)
                   "waiting": {"type": ["string", "null"]},
                   "base_model": {"type": ["string", "null"]},
                   "training_data": {"type": ["object", "null"]}},
                  {"status_url": STR}),
    "WorkerJob": _obj({"model_id": INT, "attempt": INT, "task": STR, "phase": STR,
                       "split": STR, "track": {"type": ["string", "null"]}, "name": STR,
                       "definition": STR, "digest": STR,
                       "archive": _obj({"sha256": STR, "size": INT}),
                       "inputs": {"type": "array", "items": _obj(
                           {"dataset": STR, "filename": STR, "sha256": STR})},
                       "settings": {"type": "object"}, "budget": {"type": "object"},
                       "beat_s": {"type": "number"}, "urls": {"type": "object"}}),
    "WorkerJobState": _obj({"model_id": INT, "attempt": INT,
                            "status": {"enum": ["queued", "running", "failed", "done"]},
                            "run_id": {"type": ["integer", "null"]},
                            "failure": {"type": ["string", "null"]}, "reason": STR}),
    "WorkerBeat": _obj({"owned": BOOL}, {"error": STR}),
    "Worker": _obj({"name": STR, "task": STR, "queue": STR, "prefix": STR}),
    "ModelList": _obj({"task": STR, "team": STR,
                       "models": {"type": "array", "items": _ref("Model")}}),
    "ModelUpload": _obj({"id": INT, "filename": STR, "size": INT, "received": INT,
                         "next_offset": INT, "part_bytes": INT,
                         "sha256": {"type": ["string", "null"]}, "complete": BOOL,
                         "state": {"enum": ["open", "finishing", "finished", "refused",
                                            "cancelled", "expired"]},
                         "model_id": {"type": ["integer", "null"]}, "created_at": TIME,
                         "updated_at": TIME, "expires_at": TIME},
                        {"upload_url": STR, "finish_url": STR, "error": STR}),
}

ERRORS = {
    "400": "Bad request",
    "401": "No token where one is needed, or a token that is unknown or revoked (even on a "
           "public route); the response carries WWW-Authenticate: Bearer",
    "403": "Not allowed now (phase closed, not the captain, teams locked)",
    "404": "No such object, or not yours to see",
    "409": "Clashes with the current state (run limit, already in a team, team full)",
    "413": "The body is larger than the site takes (MAX_CONTENT_LENGTH; a model's own limit)",
    "422": "Invalid data (a control character in any text, an id out of range, a bad field); "
           "`issues` names file, line and problem",
    "429": "Too many requests of this kind; the message says when the limit lifts",
}
# Every operation may answer these: a bad token is refused everywhere, and control characters
# in the path, query or body are refused before any route runs.
ALWAYS = ("401", "422")
ID = {"type": "integer", "minimum": 1, "maximum": MAX_ID}


def _json(schema: str, description: str = "OK") -> dict[str, Any]:
    return {"description": description,
            "content": {"application/json": {"schema": _ref(schema)}}}


def _file(description: str, mimetype: str = "text/plain") -> dict[str, Any]:
    return {"description": description,
            "headers": {"Content-Disposition": {"schema": STR}},
            "content": {mimetype: {"schema": STR}}}


def _params(path: str, query: dict[str, str] | None = None,
            required: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """Path parameters (ids are bounded integers) and query parameters (ids among them)."""
    found = []
    for part in path.split("/"):
        if part.startswith("{"):
            name = part[1:-1]
            kind = ID if name.endswith("_id") else STR
            found.append({"name": name, "in": "path", "required": True, "schema": kind})
    for name, description in (query or {}).items():
        found.append({"name": name, "in": "query", "required": name in required,
                      "schema": ID if name in required else STR, "description": description})
    return found


def _op(path: str, summary: str, ok: dict[str, Any], *, status: str = "200", auth: bool = True,
        query: dict[str, str] | None = None, body: dict[str, Any] | None = None,
        errors: tuple[str, ...] = ("401", "404"),
        required: tuple[str, ...] = ()) -> dict[str, Any]:
    codes = sorted(set(errors) | set(ALWAYS))
    operation: dict[str, Any] = {
        "summary": summary,
        "parameters": _params(path, query, required),
        "responses": {status: ok, **{code: _json("Error", ERRORS[code]) for code in codes}},
    }
    if auth:
        operation["security"] = [{"bearer": []}]
    if body is not None:
        operation["requestBody"] = body
    return operation


def _keyed(operation: dict[str, Any], schema: str) -> dict[str, Any]:
    """An upload that takes an Idempotency-Key: sent again with the same key (a lost answer,
    a gateway timeout) it answers 200 with what the first attempt made, never a second one."""
    operation["parameters"].append({
        "name": "Idempotency-Key", "in": "header", "required": False, "schema": STR,
        "description": "8 to 64 letters, digits or . _ : - (a UUID fits), one per upload; "
                       "the same key with other files is refused (409)"})
    operation["responses"]["200"] = _json(schema, "Sent before with this key: the first "
                                          "attempt's answer, header Idempotent-Replayed: true")
    return operation


def _fields(*, optional: bool = False, **props: Any) -> dict[str, Any]:
    """A JSON or form body with these fields (optional: the route works without any body)."""
    schema = {"type": "object", "properties": props}
    return {"required": not optional, "content": {"application/json": {"schema": schema},
                                          "application/x-www-form-urlencoded": {"schema": schema}}}


def _phase_op(path: str) -> dict[str, Any]:
    """Organisers add (201) or change (200) a phase."""
    operation = _op(path, "Add or change a phase (organisers); refused when it would be an "
                    "oracle on private gold", _json("Phase", "Created"), status="201",
                    body=_fields(slug=STR, name=STR, kind=STR, opens_at=TIME, closes_at=TIME,
                                 split=STR, max_per_day=INT, max_runs=INT, accepts=STR,
                                 team_window_hours=INT, visibility=STR, track=STR,
                                 model_settings={"type": "object"},
                                 score_in_request_pairs={"type": ["integer", "null"]}),
                    errors=("401", "403", "404", "422"))
    operation["responses"]["200"] = _json("Phase", "Changed")
    return operation


def _window_op(path: str) -> dict[str, Any]:
    """A team starts its window (201), or gets the one it started (200)."""
    operation = _op(path, "Start my team's window now (201); it ends team_window_hours later, "
                    "never past the close. One already started comes back as it is (200)",
                    _json("Window", "Started"), status="201",
                    errors=("401", "403", "404", "422"))
    operation["responses"]["200"] = _json("Window", "Already started")
    return operation


def _terms_accept_op(path: str) -> dict[str, Any]:
    """Accepting the terms: 201 when something was new, 200 when all had been accepted."""
    operation = _op(path, "Accept the terms in force (digests: those I read; a changed text is "
                    "refused, 422); client: api or cli", _json("TermsAccepted", "Accepted"),
                    status="201", body=_fields(optional=True, client=STR,
                                               digests={"type": "array", "items": STR}),
                    errors=("401", "403", "404", "422"))
    operation["responses"]["200"] = _json("TermsAccepted", "Already accepted")
    return operation


def _cockpit_paths(t: str) -> dict[str, dict[str, Any]]:
    """The organiser's cockpit, questions, and corrections of sent announcements (issue 44)."""
    q = f"{t}/questions/{{question_id}}"
    a = f"{t}/announcements/{{announcement_id}}"
    organisers = ("401", "403", "404")
    return {
        f"{t}/queue": {"get": _op(
            f"{t}/queue", "The task's queue (organisers): runs waiting for a score, models "
            "queued, running, failed (by class) and slow, with ages and workers; the alert "
            "settings and the alerts raised", _json("Queue"), errors=organisers)},
        f"{t}/queue/alerts": {"post": _op(
            f"{t}/queue/alerts", "Set when a waiting or running job raises an alert "
            "(minutes; null: none) and where alerts go (organisers)", _json("AlertSettings"),
            body=_fields(wait_minutes={"type": ["integer", "null"]},
                         run_minutes={"type": ["integer", "null"]}, draft_announcement=BOOL,
                         mail_organisers=BOOL), errors=("401", "403", "404", "422"))},
        f"{t}/analytics": {"get": _op(
            f"{t}/analytics", "The task's analytics as the last job computed them "
            "(organisers; ?format=csv for one long CSV table; 404 until first computed)",
            _json("Analytics"), query={"format": "csv for CSV"}, errors=organisers)},
        f"{t}/analytics/refresh": {"post": _op(
            f"{t}/analytics/refresh", "Have the analytics computed off the request "
            "(organisers)", _json("Accepted", "Computing"), status="202", errors=organisers)},
        f"{t}/channels": {
            "get": _op(f"{t}/channels", "The task's notification channels (targets masked, "
                       "secrets' last four) and the newest deliveries (organisers)",
                       _json("ChannelList"), errors=organisers),
            "post": _op(f"{t}/channels", "Add a channel: kind webhook (signed JSON), chat "
                        "(Slack/Mattermost {\"text\"}) or mail; a URL must be http(s) on a "
                        "public address. A webhook's signing secret is in the answer, this "
                        "once", _json("Channel", "Added"), status="201",
                        body=_fields(kind=STR, name=STR, target=STR,
                                     events={"type": "array", "items": STR}),
                        errors=("401", "403", "404", "422"))},
        f"{t}/channels/{{channel_id}}": {"delete": _op(
            f"{t}/channels/{{channel_id}}", "Stop a channel (its delivery log stays)",
            _json("Channel"), errors=organisers)},
        f"{t}/questions": {
            "get": _op(f"{t}/questions", "The questions I may read, FAQ first, with their "
                       "replies", _json("QuestionList"), auth=False, errors=("404",)),
            "post": _op(f"{t}/questions", "Ask the organisers (visibility public or private; "
                        "rate-limited)", _json("Question", "Asked"), status="201",
                        body=_fields(title=STR, body=STR, visibility=STR),
                        errors=("401", "403", "404", "422", "429"))},
        q: {"get": _op(q, "A question I may read, with its replies", _json("Question"),
                       auth=False, errors=("404",))},
        f"{q}/replies": {"post": _op(
            f"{q}/replies", "Answer (organisers) or reply (the asker; anyone on a public, "
            "unlocked question)", _json("Question", "Replied"), status="201",
            body=_fields(body=STR), errors=("401", "403", "404", "422", "429"))},
        f"{q}/moderate": {"post": _op(
            f"{q}/moderate", "Organisers: publish, unpublish, faq, unfaq, hide, unhide, lock "
            "or unlock", _json("Question"), body=_fields(action=STR),
            errors=("401", "403", "404", "422"))},
        a: {method: _op(a, "Correct a sent announcement (organisers; the text before is "
                        "kept, readers see it was edited; notify=true mails the correction; "
                        "409 while it lists scores its readers may not see)",
                        _json("Announcement"), body=_fields(title=STR, body=STR, notify=BOOL),
                        errors=("401", "403", "404", "409", "422"))
            for method in ("put", "patch")},
        f"{a}/withdraw": {"post": _op(
            f"{a}/withdraw", "Withdraw a sent announcement (organisers; hidden from its "
            "readers, kept for the organisers)", _json("Announcement"),
            body=_fields(optional=True, reason=STR), errors=("401", "403", "404", "422"))},
    }


def _paths() -> dict[str, dict[str, Any]]:
    t = "/tasks/{task_name}"
    upload = {"required": True, "content": {"multipart/form-data": {"schema": {
        "type": "object", "required": ["name", "files"],
        "properties": {"name": STR, "phase": STR, "description": STR,
                       "files": {"type": "array", "items": {"type": "string",
                                                            "format": "binary"}}}}}}}
    reference_upload = {"required": True, "content": {"multipart/form-data": {"schema": {
        "type": "object", "required": ["files"],
        "properties": {"name": STR, "phase": STR, "source": STR,
                       "files": {"type": "array", "items": {"type": "string",
                                                            "format": "binary"}}}}}}}
    model_upload = {"required": True, "content": {"multipart/form-data": {"schema": {
        "type": "object", "required": ["file"],
        "properties": {"file": {"type": "string", "format": "binary"}, "name": STR,
                        "phase": STR, "prompt": STR, "prompt_name": STR, "pooling": STR,
                        "publish": STR, "model_name": STR, "max_seq_length": STR,
                        "batch_tokens": STR, "dtype": STR}}}}}
    part = {"required": True, "content": {"application/octet-stream": {"schema": {
        "type": "string", "format": "binary"}}}}
    u = "/model-uploads/{upload_id}"
    return {
        "/tasks": {"get": _op("/tasks", "Every task with its phases", _json("TaskList"),
                              auth=False, errors=())},
        t: {"get": _op(t, "One task: phases, datasets and (with a token) my team's deadlines",
                       _json("Task"), auth=False, errors=("404",))},
        f"{t}/definition": {"get": _op(f"{t}/definition", "The task definition (TOML)",
                                       _file("TOML text", "application/toml"), auth=False,
                                       errors=("404",))},
        f"{t}/runs": {
            "get": _op(f"{t}/runs", "My team's runs in the task", _json("RunList"),
                       query={"phase": "phase slug", "all": "1 to include replaced runs"}),
            "post": _keyed(_op(f"{t}/runs", "Submit a run (every problem listed on 422)",
                               _json("Run", "Accepted"), status="201", body=upload,
                               errors=("401", "403", "404", "409", "422")), "Run"),
        },
        f"{t}/baselines": {"post": _op(
            f"{t}/baselines", "Add the organisers' own output file(s), as published, as an "
            "unranked baseline row named as the files are (organisers; 202 when queued)",
            _json("Run", "Added"), status="201", body=reference_upload,
            errors=("401", "403", "404", "422"))},
        "/runs/{run_id}": {"get": _op("/runs/{run_id}", "A run I may see (public runs need no "
                                      "token)", _json("Run"), auth=False)},
        f"{t}/models": {"get": _op(
            f"{t}/models", "My team's models in the task, newest first (state, queue position, "
            "run)", _json("ModelList"), errors=("401", "404")), "post": _keyed(_op(
            f"{t}/models", "Submit a model (the model track): a zip of a Hugging Face folder, "
            "checked at once (every problem listed on 422), then run by the site",
            _json("Model", "Checked and queued"), status="202", body=model_upload,
            errors=("401", "403", "404", "409", "422", "429")), "Model")},
        f"{t}/model-uploads": {"post": _op(
            f"{t}/model-uploads", "Start a model upload in parts (resumable; for models of any "
            "size up to the site's limit): refused at once where the model would be",
            _json("ModelUpload", "Started"), status="201",
            body=_fields(size=INT, filename=STR, sha256=STR, name=STR, phase=STR, prompt=STR,
                         prompt_name=STR, pooling=STR, publish=BOOL, model_name=STR,
                         max_seq_length=INT, batch_tokens=INT, dtype=STR),
            errors=("401", "403", "404", "409", "422", "429"))},
        u: {
            "get": _op(u, "How much of my upload arrived (where to resume)",
                       _json("ModelUpload")),
            "put": _op(u, "The next part: its bytes, with Content-Range: bytes START-END/SIZE; "
                       "409 (with next_offset) when START is not where the upload stands",
                       _json("ModelUpload"), body=part,
                       errors=("401", "404", "409", "413", "422")),
            "delete": _op(u, "Cancel my upload and drop its parts",
                          {"description": "Cancelled"}, status="204"),
        },
        f"{u}/finish": {"post": _op(
            f"{u}/finish", "Every part arrived: join, check and queue the model (every problem "
            "listed on 422)", _json("Model", "Checked and queued"), status="202",
            errors=("401", "403", "404", "409", "422", "429"))},
        "/models/{model_id}": {"get": _op("/models/{model_id}",
                                          "A model of my team: state, queue position, run",
                                          _json("Model"))},
        "/models/{model_id}/publish": {"post": _op(
            "/models/{model_id}/publish", "Publish my team's model files with its run "
            "({\"publish\": false} withdraws them)", _json("Model"),
            body=_fields(optional=True, publish=BOOL), errors=("401", "403", "404"))},
        "/models/{model_id}/archive": {"get": _op(
            "/models/{model_id}/archive", "A model's zip, as uploaded: its team and the "
            "organisers; anyone who sees its run once the team published it",
            _file("The zip", "application/zip"), auth=False)},
        "/runs/{run_id}/exports/{kind}": {"get": _op(
            "/runs/{run_id}/exports/{kind}", "A scored model run's results for others' tools: "
            "kind mteb (an MTEB TaskResult), every-eval-ever (an Every Eval Ever record) or "
            "model-index (YAML for a model card)",
            {"description": "The export", "content": {
                "application/json": {"schema": {"type": "object"}},
                "text/yaml": {"schema": STR}}}, auth=False)},
        "/runs/{run_id}/description": {
            method: _op("/runs/{run_id}/description",
                        "Edit my run's system description until its phase closes",
                        _json("Description"),
                        body=_fields(optional=True, description=STR,
                                     **{"<question key>": STR}),
                        errors=("401", "403", "404", "422"))
            for method in ("put", "post")},
        f"{t}/phases": {"post": _phase_op(f"{t}/phases")},
        f"{t}/compare": {
            "get": _op(f"{t}/compare", "Two runs per metric: stored paired tests, else the "
                       "values and the test's status", _json("Comparison"), auth=False,
                       query={"a": "run id", "b": "run id"}, required=("a", "b"),
                       errors=("400", "404", "422")),
            "post": _op(f"{t}/compare", "Ask for the paired tests of a and b (202 with "
                        "status_url; 200 when done); needs an account, limited per hour",
                        _json("Comparison", "Accepted"), status="202",
                        query={"a": "run id", "b": "run id"}, required=("a", "b"),
                        errors=("400", "401", "404", "422", "429")),
        },
        "/runs/{run_id}/files/{filename}": {"get": _op(
            "/runs/{run_id}/files/{filename}", "A file of my team's run, as uploaded",
            _file("The file"))},
        f"{t}/leaderboard": {"get": _op(
            f"{t}/leaderboard", "A phase's leaderboard", _json("Leaderboard"), auth=False,
            query={"phase": "phase slug (default: the latest opened)",
                   "format": "csv for CSV"}, errors=("404",))},
        f"{t}/phases/{{phase_slug}}/inputs/{{dataset}}": {"get": _op(
            f"{t}/phases/{{phase_slug}}/inputs/{{dataset}}",
            "A dataset's inputs (never starts a window: in an open windowed phase 403 until "
            "my team starts its window)", _file("Inputs"),
            errors=("401", "403", "404"))},
        f"{t}/phases/{{phase_slug}}/window": {
            "get": _op(f"{t}/phases/{{phase_slug}}/window",
                       "My team's window in a windowed phase (404 until it starts)",
                       _json("Window"), errors=("401", "403", "404")),
            "post": _window_op(f"{t}/phases/{{phase_slug}}/window"),
        },
        f"{t}/phases/{{phase_slug}}/primary": {
            "get": _op(f"{t}/phases/{{phase_slug}}/primary",
                       "My team's primary run in the phase (where it ranks one run per team; "
                       "without a choice the latest scored run)", _json("PrimaryRun"),
                       errors=("401", "404")),
            **{method: _op(f"{t}/phases/{{phase_slug}}/primary",
                           "Mark a run primary: team members while the phase is open, "
                           "organisers at any time with a reason (audited)",
                           _json("PrimaryRun"), body=_fields(run=INT, reason=STR),
                           errors=("401", "403", "404", "409", "422"))
               for method in ("put", "post")},
        },
        **_reveal_paths(t),
        f"{t}/gold/{{dataset}}": {"get": _op(
            f"{t}/gold/{{dataset}}", "A dataset's gold, once released", _file("Gold"),
            auth=False, errors=("403", "404"))},
        f"{t}/terms": {"get": _op(
            f"{t}/terms", "The terms in force (the task's, each phase's), whether I accepted "
            "each, the data's licence and the citation", _json("Terms"), auth=False,
            errors=("404",))},
        f"{t}/terms/accept": {"post": _terms_accept_op(f"{t}/terms/accept")},
        f"{t}/acceptances": {"get": _op(
            f"{t}/acceptances", "Who accepted which terms version, when, from which client "
            "(organisers; ?format=csv for CSV)", _json("AcceptanceList"),
            query={"format": "csv for CSV"}, errors=("401", "403", "404"))},
        f"{t}/teams/{{team_id}}/approval": {"post": _op(
            f"{t}/teams/{{team_id}}/approval", "Approve or refuse a team (organisers, where "
            "the task asks for approval); its members are mailed the decision and the reason",
            _json("Approval"), body=_fields(state=STR, reason=STR),
            errors=("401", "403", "404", "422"))},
        f"{t}/announcements": {
            "get": _op(f"{t}/announcements", "Announcements I may read (unread marked with a "
                       "token); organisers: ?status=draft for the drafts",
                       _json("AnnouncementList"), auth=False, query={"status": "draft"},
                       errors=("401", "403", "404")),
            "post": _op(f"{t}/announcements", "Post an announcement (organisers; to one "
                        "phase's teams with phase; send=false keeps a draft); mail goes to "
                        "those who opted in, or (critical=true: deadlines, gold corrections, "
                        "rule changes) to every participant", _json("Announcement", "Created"),
                        status="201",
                        body=_fields(title=STR, body=STR, phase=STR, send=BOOL, critical=BOOL),
                        errors=("401", "403", "404", "422")),
        },
        **_cockpit_paths(t),
        f"{t}/announcements/{{announcement_id}}/send": {"post": _op(
            f"{t}/announcements/{{announcement_id}}/send", "Send a draft (organisers; title "
            "and body replace the draft's; 409 while it lists scores its readers may not see)",
            _json("Announcement"), body=_fields(optional=True, title=STR, body=STR),
            errors=("401", "403", "404", "409", "422"))},
        "/me": {"get": _op("/me", "The token's account", _json("Me"), errors=("401",))},
        f"{t}/team": {
            "get": _op(f"{t}/team", "My team", _json("Team")),
            "post": _op(f"{t}/team", "Create a team; I am its captain",
                        _json("Team", "Created"), status="201",
                        body=_fields(name=STR, affiliation=STR),
                        errors=("401", "403", "404", "409", "422")),
        },
        f"{t}/team/join": {"post": _op(f"{t}/team/join", "Join with an invite code",
                                       _json("Team"), body=_fields(invite_code=STR),
                                       errors=("401", "403", "404", "409", "422"))},
        f"{t}/team/leave": {"post": _op(f"{t}/team/leave", "Leave my team", _json("LeftTeam"),
                                        errors=("401", "403", "404", "409"))},
        f"{t}/team/members/{{user_id}}": {"delete": _op(
            f"{t}/team/members/{{user_id}}", "The captain removes a member", _json("Team"),
            errors=("401", "403", "404", "409"))},
        f"{t}/team/invite-code": {"post": _op(f"{t}/team/invite-code",
                                              "The captain replaces the invite code",
                                              _json("Team"), errors=("401", "403", "404"))},
        f"{t}/team/captain": {"post": _op(f"{t}/team/captain",
                                          "The captain hands the captaincy over", _json("Team"),
                                          body=_fields(user_id=ID),
                                          errors=("401", "403", "404", "422"))},
        "/tokens": {
            "get": _op("/tokens", "My API tokens", _json("TokenList"), errors=("401",)),
            "post": _op("/tokens", "A new token (the secret is shown once)",
                        _json("Token", "Created"), status="201",
                        body=_fields(optional=True, name=STR),
                        errors=("401", "422")),
        },
        "/tokens/{token_id}": {"delete": _op("/tokens/{token_id}", "Revoke one of my tokens",
                                             _json("Token"))},
        **_worker_paths(),
        "/openapi.json": {"get": _op("/openapi.json", "This description",
                                     {"description": "OpenAPI 3.1",
                                      "content": {"application/json": {"schema": {
                                          "type": "object"}}}}, auth=False, errors=())},
    }


def _reveal_paths(t: str) -> dict[str, dict[str, Any]]:
    """A phase with a split test set or a frozen board (issue 42): private figures answer 403
    before the reveal (organisers aside)."""
    p = f"{t}/phases/{{phase_slug}}"
    formats = {"format": "json (default), csv or latex"}
    board = {"description": "The board (JSON is the leaderboard's shape)",
             "content": {"application/json": {"schema": _ref("Leaderboard")},
                         "text/csv": {"schema": STR}, "text/x-tex": {"schema": STR}},
             "headers": {"Content-Disposition": {"schema": STR}}}
    report = {"description": "The shake-up report",
              "content": {"application/json": {"schema": _ref("Shakeup")},
                          "text/csv": {"schema": STR}, "text/x-tex": {"schema": STR}},
              "headers": {"Content-Disposition": {"schema": STR}}}
    pending = _op(f"{p}/shakeup", "The shake-up report: per team public and private rank, the "
                  "change, the private rank's 95% CI, the change's percentile in the null of "
                  "fresh splits; Kendall's tau (at the reveal; organisers before)", report,
                  auth=False, query=formats, errors=("403", "404"))
    pending["responses"]["202"] = _json("Shakeup", "Being computed off the request")
    ask = _op(f"{p}/shakeup", "Organisers: compute the shake-up report now (202)",
              _json("Shakeup", "Queued"), status="202", errors=("401", "403", "404"))
    split_op = _op(f"{p}/parts", "Organisers: draw the split (seed, else a secret one) or "
                   "give it as a file (multipart `file`: dataset, id, usage); every run is "
                   "rescored", _json("Parts"),
                   body={"required": False, "content": {
                       "application/json": {"schema": {"type": "object", "properties": {
                           "seed": INT, "again": BOOL, "reason": STR}}},
                       "multipart/form-data": {"schema": {"type": "object", "properties": {
                           "file": {"type": "string", "format": "binary"}, "again": STR,
                           "reason": STR}}}}},
                   errors=("401", "403", "404", "409", "422"))
    return {
        f"{p}/parts": {"get": _op(f"{p}/parts", "The phase's split as stated (rule, counts, "
                                  "digest; the seed once revealed)", _json("Parts"),
                                  auth=False, errors=("404",)),
                       "post": split_op},
        f"{p}/boards/{{kind}}": {"get": _op(
            f"{p}/boards/{{kind}}", "The frozen, live, private or whole board (private and "
            "whole at the reveal, organisers before; live unless frozen for the caller)",
            board, auth=False, query=formats, errors=("403", "404"))},
        f"{p}/shakeup": {"get": pending, "post": ask},
        f"{p}/split": {"get": _op(f"{p}/split", "The split (dataset, id, usage), published "
                                  "with the gold at the reveal",
                                  _file("The split", "text/tab-separated-values"), auth=False,
                                  errors=("403", "404"))},
        f"{p}/finals": {
            "get": _op(f"{p}/finals", "My team's final runs (without a choice the best public "
                       "ones)", _json("FinalRuns"), errors=("401", "404")),
            **{method: _op(f"{p}/finals", "Choose my team's final runs (at most the phase's "
                           "limit) while the phase is open; organisers at any time with a team "
                           "and a reason (audited)", _json("FinalRuns"),
                           body=_fields(runs={"type": "array", "items": INT}, team=STR,
                                        reason=STR),
                           errors=("401", "403", "404", "409", "422"))
               for method in ("put", "post")},
        },
        f"{p}/freeze": {"put": _op(f"{p}/freeze", "Organisers: when the board freezes and "
                                   "when hidden figures are revealed", _json("Freeze"),
                                   body=_fields(freeze_at=NULL_TIME, reveal=STR),
                                   errors=("401", "403", "404", "422"))},
    }


def _worker_paths() -> dict[str, dict[str, Any]]:
    """The worker API: remote model workers with a worker token (sbw_..., one task's model
    queue; a participant's token is refused with a 401)."""
    w, j = "/worker", "/worker/jobs/{model_id}"
    attempt = {"attempt": "the attempt the worker claimed"}
    held = ("401", "403", "404")
    claim = _op(f"{w}/claim", "Claim the next model of the token's task queue that the "
                "worker can run (its declared capabilities): its job (definition, inputs, "
                "model, settings, budget, where to post)",
                _json("WorkerJob", "Claimed"), errors=("401",),
                body=_fields(optional=True, capabilities=_obj(
                    {}, {"device": {"enum": ["cpu", "cuda"]},
                         "dtypes": {"type": "array", "items": STR},
                         "memory_bytes": INT, "gpu_memory_bytes": {"type": ["integer", "null"]},
                         "max_seq_length": INT, "gpu": {"type": ["string", "null"]}})))
    claim["responses"]["204"] = {"description": "Nothing this worker can run waits"}
    conflict = _json("WorkerBeat", "Not this worker's job any more: stop encoding")
    beat = _op(f"{j}/progress", "Heartbeat and progress of a held job",
               _json("WorkerBeat"), body=_fields(attempt=INT, progress={"type": "object"}),
               errors=("401", "404"))
    beat["responses"]["409"] = conflict
    run = {"required": True, "content": {"multipart/form-data": {"schema": {
        "type": "object", "required": ["attempt", "files"],
        "properties": {"attempt": INT, "metadata": STR,
                       "files": {"type": "array", "items": {"type": "string",
                                                            "format": "binary"}}}}}}}
    return {
        f"{w}/me": {"get": _op(f"{w}/me", "The worker token and the queue it serves",
                               _json("Worker"), errors=("401",))},
        f"{w}/claim": {"post": claim},
        f"{j}/model": {"get": _op(f"{j}/model", "The held job's model zip",
                                  _file("The zip", "application/zip"), query=attempt,
                                  errors=held)},
        f"{j}/inputs/{{dataset}}": {"get": _op(
            f"{j}/inputs/{{dataset}}", "One input file of the held job", _file("Inputs"),
            query=attempt, errors=held)},
        f"{j}/progress": {"post": beat},
        f"{j}/result": {"post": _op(
            f"{j}/result", "The held job's run and its facts, submitted as the site's own "
            "jobs' runs are (a repeated post answers as the first did)",
            _json("WorkerJobState"), body=run, errors=(*held, "409", "413"))},
        f"{j}/failure": {"post": _op(
            f"{j}/failure", "The held job failed on the worker (kind, reason)",
            _json("WorkerJobState"), body=_fields(attempt=INT, kind=STR, reason=STR),
            errors=(*held, "409"))},
    }


@cache
def spec() -> dict[str, Any]:
    """The OpenAPI document (built once)."""
    return {
        "openapi": "3.1.0",
        "info": {"title": "semboard API", "version": "1",
                 "description": "Tasks, runs, leaderboards, teams and tokens. Authenticate with "
                                "'Authorization: Bearer <token>' (tokens: profile page)."},
        "servers": [{"url": "/api/v1"}],
        "paths": _paths(),
        "components": {
            "schemas": SCHEMAS,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
    }
