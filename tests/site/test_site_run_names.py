"""The upload page of a task whose run file names carry the run's name ({run})."""

from __future__ import annotations

from evaluation import parse_task
from semboard.services import tasks
from tests.site.conftest import NOW, TINY_TOML

RUN_TOML = TINY_TOML.replace('filename = "STS.output.{dataset}.txt"',
                             'filename = "STS.output.{run}.{dataset}.txt"')


def test_upload_page_shows_where_the_name_goes(app, client, make):
    assert "{run}" in RUN_TOML
    app.config["SEMBOARD_CLOCK"] = lambda: NOW
    task = make.task()
    tasks.load_task(make.session, parse_task(RUN_TOML), now=NOW)
    make.session.commit()
    make.phase(task)
    _, captain = make.team(task, "A")
    assert client.post("/login", data={"email": captain.email,
                                       "password": "password123"}).status_code == 302
    page = client.get("/tasks/tiny/submit").get_data(as_text=True)
    assert "<code>STS.output.{run}.alpha.txt</code>" in page
    assert 'id="run-name-in-files"' in page
