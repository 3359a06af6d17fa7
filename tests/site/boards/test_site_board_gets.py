"""GETs of a run's bars chart and the compare page read the prepared board, never build one."""

from __future__ import annotations

import io

import pytest

from semboard.services.boards import leaderboard
from semboard.services.boards import prepared as prepared_boards

API = "/api/v1"


def _uploaded(client, world, tiny_data, runs=(("a", 1), ("b", 2))) -> list[int]:
    """Runs `run{seed}` uploaded through the API by team `key`'s captain; their ids."""
    ids = []
    for key, seed in runs:
        data = {"name": f"run{seed}", "files": [(io.BytesIO(v), k) for k, v in
                                                tiny_data.run(seed=seed).items()]}
        response = client.post(f"{API}/tasks/tiny/runs", data=data,
                               headers=world["tokens"][key], content_type="multipart/form-data")
        assert response.status_code == 201, response.get_json()
        ids.append(response.get_json()["id"])
    return ids


def test_chart_and_compare_gets_build_no_board(app, client, world, tiny_data, monkeypatch):
    ids = _uploaded(client, world, tiny_data)

    def no_build(*_args, **_kwargs):
        pytest.fail("a GET built a board")

    monkeypatch.setattr(leaderboard, "build_leaderboard", no_build)
    monkeypatch.setattr(prepared_boards, "build_leaderboard", no_build)
    bars = client.get(f"/runs/{ids[0]}/charts/bars.json", headers=world["tokens"]["a"])
    assert bars.status_code == 200 and bars.get_json()
    page = client.get("/tasks/tiny/compare").get_data(as_text=True)
    assert "run1" in page and "run2" in page


def test_board_chart_points_link_each_run_with_one_url_for(app, client, world, tiny_data,
                                                           monkeypatch):
    from semboard.views import boards as board_views

    ids = _uploaded(client, world, tiny_data)
    calls = []
    real = board_views.url_for
    monkeypatch.setattr(board_views, "url_for", lambda *a, **k: calls.append(a) or real(*a, **k))
    spec = client.get("/tasks/tiny/leaderboard/eval/charts/ci.json").get_json()
    links = {p["run_id"]: p["url"] for p in spec["data"]["values"]}
    assert links == {run_id: f"/runs/{run_id}" for run_id in ids}
    assert calls.count(("web.run",)) == 1


def test_a_cold_board_page_builds_no_chart_spec_of_every_run(app, client, world, tiny_data,
                                                             monkeypatch):
    """The page's chart table comes from its page's rows; the specs wait for their own URLs."""
    from semboard.services.boards import charts
    from semboard.views import boards as board_views

    _uploaded(client, world, tiny_data)
    board_views._BOARD_SPECS.clear()
    board_views._PAGES.clear()
    real_ci, real_heatmap = charts.board_ci_chart, charts.board_heatmap
    built = []
    monkeypatch.setattr(charts, "board_ci_chart", lambda *a: built.append("ci") or real_ci(*a))
    monkeypatch.setattr(charts, "board_heatmap", lambda *a: built.append("hm") or real_heatmap(*a))
    page = client.get("/tasks/tiny/leaderboard/eval").get_data(as_text=True)
    assert built == [] and 'id="board-ci"' in page and 'id="board-heatmap"' in page
    spec = client.get("/tasks/tiny/leaderboard/eval/charts/ci.json").get_json()
    assert built == ["ci", "hm"]
    # the page's table lists each point the spec draws, with its group
    table = page.split('id="board-ci"', 1)[1].split("</table>", 1)[0]
    assert table.count("<tr><td><bdi>") == len(spec["data"]["values"]) == 2
    for point in spec["data"]["values"]:
        assert f"<tr><td><bdi>{point['run']}" in table and f"<td>{point['group']}</td>" in table


def test_a_board_chart_draws_its_page_s_runs_once_per_version(app, client, world, tiny_data,
                                                              monkeypatch):
    """A chart of every run cost each web worker 43-94 ms at each new version of a 5,000-run
    board (benchmarks/bench_deployed.py): its points are its page's rows, made once per
    version, page and language. Counted, not timed."""
    from semboard.services.boards import charts
    from semboard.views import boards as board_views

    ids = _uploaded(client, world, tiny_data)
    monkeypatch.setattr(board_views, "PER_PAGE", 1)
    board_views._BOARD_SPECS.clear()
    drawn: list[int] = []
    real = charts.board_ci_point
    monkeypatch.setattr(charts, "board_ci_point",
                        lambda row, *a: drawn.append(row.run_id) or real(row, *a))
    url = "/tasks/tiny/leaderboard/eval/charts/ci.json"
    first = client.get(url).get_json()["data"]["values"]
    second = client.get(f"{url}?page=2").get_json()["data"]["values"]
    assert len(drawn) == 2 and sorted(drawn) == sorted(ids)  # a point per page's row
    assert [p["run_id"] for p in first + second] == drawn
    client.get(url)
    client.get(f"{url}?page=2")
    heat = client.get(url.replace("ci.json", "heatmap.json")).get_json()["data"]["values"]
    assert len(drawn) == 2  # kept for the version
    assert {c["run"] for c in heat} == {first[0]["run"]}


def test_a_run_s_bars_chart_reads_its_board_once_per_version(app, client, world, tiny_data,
                                                             monkeypatch):
    """A run page's bars chart scanned every row of the board once per dataset, twice, at each
    GET (33-82 ms at 5,000 runs): its references (the best values, the baselines, the rows'
    places) are made once per board version. Counted, not timed."""
    from semboard.services.boards import charts

    ids = _uploaded(client, world, tiny_data)
    made: list[int] = []
    real = leaderboard.bar_references
    monkeypatch.setattr(leaderboard, "bar_references", lambda board, before=None: made.append(
        len(board.rows)) or real(board, before))
    scanned: list[str] = []
    real_bars = charts.run_bars
    monkeypatch.setattr(charts, "run_bars", lambda row, board, *a: scanned.append(
        "board" if len(a) < 4 or a[3] is None else "baselines") or real_bars(row, board, *a))
    specs = {}
    for run_id, key in zip(ids, ("a", "b"), strict=True):
        for _ in range(2):
            answer = client.get(f"/runs/{run_id}/charts/bars.json", headers=world["tokens"][key])
            assert answer.status_code == 200
            specs[run_id] = answer.get_json()
    assert made == [2]  # once for the version, for both runs' four GETs
    assert scanned == ["baselines"] * 4  # the baselines given, not found among every row
    best = {m["column"]: m["score"] for spec in specs.values() for layer in spec["layer"]
            if layer["name"] == "references" for m in layer["data"]["values"]
            if m["who"] == "board's best"}
    board = client.get("/tasks/tiny/leaderboard/eval.json").get_json()
    checked = [column["label"] for column in board["columns"] if column["label"] in best]
    assert checked and all(best[column["label"]] == max(
        r["metrics"][column["key"]] for r in board["rows"] if not r["baseline"])
        for column in board["columns"] if column["label"] in best)
    edited = leaderboard.bar_references_made["edited"]
    _uploaded(client, world, tiny_data, (("a", 3),))
    client.get(f"/runs/{ids[1]}/charts/bars.json", headers=world["tokens"]["b"])
    assert made == [2, 3]  # a new version: made again,
    assert leaderboard.bar_references_made["edited"] == edited + 1  # from the version before


def test_the_compare_page_offers_the_board_s_first_runs_and_the_chosen_ones(
        app, client, world, tiny_data, monkeypatch):
    """A select of every run cost each GET of the compare page 50 ms at 5,000 runs: it offers
    the board's first runs and the two chosen ones, and says how many the board lists."""
    import re

    from semboard.views import charts as chart_views

    ids = _uploaded(client, world, tiny_data, (("a", 1), ("b", 2), ("a", 3)))
    board = client.get("/tasks/tiny/leaderboard/eval.json").get_json()["rows"]
    order = [row["run_id"] for row in board]
    assert sorted(order) == sorted(ids)

    def offered(query: str) -> list[int]:
        page = client.get(f"/tasks/tiny/compare{query}").get_data(as_text=True)
        select = page.split('<select name="a">', 1)[1].split("</select>", 1)[0]
        return [int(v) for v in re.findall(r'<option value="(\d+)"', select)]

    assert offered("") == order  # a board within COMPARE_CHOICES: every run
    monkeypatch.setattr(chart_views, "COMPARE_CHOICES", 1)
    assert offered("") == order[:1]
    assert offered(f"?a={order[2]}&b={order[0]}") == [order[0], order[2]]
    assert offered(f"?a={order[1]}&b={order[2]}") == [order[0], order[1], order[2]]
    page = client.get(f"/tasks/tiny/compare?a={order[2]}").get_data(as_text=True)
    assert "(3 runs in all)" in page and f'<option value="{order[2]}" selected>' in page
