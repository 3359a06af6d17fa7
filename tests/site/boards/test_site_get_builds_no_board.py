"""A GET never builds a board: every board and chart route serves the prepared (stored) board.

Boards are stored by the post-commit step of the upload (inline in the tests); then building
a board raises, and every board page, download, chart and the API still answer from storage.
"""

from __future__ import annotations

import io

import pytest

from semboard.services.boards import leaderboard, prepared

API = "/api/v1"


def _post_run(client, headers, files: dict[str, bytes], name: str):
    data = {"name": name,
            "files": [(io.BytesIO(content), filename) for filename, content in files.items()]}
    return client.post(f"{API}/tasks/tiny/runs", data=data, headers=headers,
                       content_type="multipart/form-data")


def test_no_get_builds_a_board(client, world, tiny_data, monkeypatch) -> None:
    runs = [_post_run(client, world["tokens"][who], tiny_data.run(seed=i), f"r{i}").get_json()
            for i, who in enumerate(("a", "b"))]
    prepared._memo.clear()  # served from storage, not from this process's memory of the build

    def refuse(*_args, **_kwargs):
        raise AssertionError("a GET built a board")

    for module in (leaderboard, prepared):  # a build, or a merge: both assemble a board
        monkeypatch.setattr(module, "build_leaderboard", refuse)
        monkeypatch.setattr(module, "assemble_leaderboard", refuse)
        monkeypatch.setattr(module, "merge_leaderboard", refuse)
    client.post("/login", data={"email": world["captains"][0].email, "password": "password123"})
    run_id = runs[0]["id"]
    for url in ("/tasks/tiny/leaderboard", "/tasks/tiny/leaderboard/eval",
                "/tasks/tiny/leaderboard.csv", "/tasks/tiny/leaderboard/eval.json",
                "/tasks/tiny/leaderboard/eval/charts/ci.json",
                "/tasks/tiny/leaderboard/eval/charts/heatmap.json",
                f"/runs/{run_id}", f"/runs/{run_id}/charts/bars.json",
                f"/tasks/tiny/compare?a={runs[0]['id']}&b={runs[1]['id']}"):
        assert client.get(url).status_code == 200, url
    api = client.get(f"{API}/tasks/tiny/leaderboard", headers=world["tokens"]["a"])
    assert api.status_code == 200 and len(api.get_json()["rows"]) == 2


def test_the_guard_sees_a_build(client, world, tiny_data, monkeypatch) -> None:
    """The check has teeth: with no stored board the page must build one, and it is seen."""
    def refuse(*_args, **_kwargs):
        raise AssertionError("a GET built a board")

    monkeypatch.setattr(prepared, "build_leaderboard", refuse)
    monkeypatch.setattr(prepared, "assemble_leaderboard", refuse)
    prepared._memo.clear()
    with pytest.raises(AssertionError, match="a GET built a board"):
        client.get("/tasks/tiny/leaderboard")
