"""What the other worker's first GET of a new version pays in its read path, each part against
the way it was read before, side by side in one process (CPU medians).

    python benchmarks/bench_other_read.py --site-dir /tmp/sites/runs5000 [--repeat 300]

The site is one bench_board_growth.py made (--site-dir DIR keeps it: DIR/runsN). Its board is
read once as a page would; then, on a version read by six uploads' edits (six rows went and
came, as stored.view_of_delta reads it):

- a page's 100 rows ranked together (stored.StoredRows: stored.Ordered.ranks, a search per
  key) against one by one (RankedRows: Ordered.rank, three bisects a key and row);
- the row a version adds parsed from the text its head carries (data["added_rows"]) against
  read by a query of the stored rows;
- the version's query (board_state) on a reader's connection against the ORM's execution.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def _median_ms(run: Callable[[Any], Any], repeat: int,
               setup: Callable[[], Any] = lambda: None) -> float:
    """The median CPU ms of run(what setup made), setup not counted."""
    out = []
    for _ in range(repeat):
        made = setup()
        started = time.process_time()
        run(made)
        out.append((time.process_time() - started) * 1000)
    return statistics.median(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--site-dir", required=True)
    parser.add_argument("--repeat", type=int, default=300)
    args = parser.parse_args()
    from sqlalchemy.orm import Session

    from semboard import create_app
    from semboard.db import app_engine
    from semboard.models import Phase
    from semboard.services.boards import prepared as prepared_boards
    from semboard.services.boards import stored as stored_rows
    from semboard.services.boards.leaderboard import RankedRows

    folder = args.site_dir
    app = create_app({"DATABASE_URL": f"sqlite:///{folder}/bench.sqlite", "SECRET_KEY": "bench",
                      "SEMBOARD_UPLOAD_DIR": folder + "/uploads",
                      "SEMBOARD_INSTANCE_PATH": folder + "/instance",
                      "SEMBOARD_BOARD_JOBS": "rq", "REDIS_URL": "redis://127.0.0.1:1/0"})
    assert app.test_client().get("/tasks/sts2012/leaderboard/eval").status_code == 200
    view = prepared_boards._views.values()[-1]
    edited = view.ordered.edited(view.rows[100:106], view.rows[200:206], view.signs,
                                 len(view.rows))

    def rows() -> stored_rows.StoredRows:
        return stored_rows.StoredRows(view.rows, ordered=edited, signs=view.signs,
                                      groups=view.groups, models=False)

    repeat = args.repeat
    print(f"{len(view.rows)} rows; CPU medians over {repeat}")
    together = _median_ms(lambda found: found[0:100], repeat, rows)
    apart = _median_ms(lambda found: RankedRows.__getitem__(found, slice(0, 100)), repeat, rows)
    print(f"  a page's 100 rows ranked: together {together:.3f} ms, one by one {apart:.3f} ms")
    with app.app_context():
        session = Session(app_engine())
        phase = session.query(Phase).filter_by(slug="eval").one()
        row = view.rows[5]

        def forget() -> None:
            stored_rows._ROWS.discard_where(row.key.__eq__)

        def read(texts: dict[str, str] | None) -> None:
            stored_rows.read_rows(session, phase.id, [row.key], len(view.rows), texts)

        carried = _median_ms(lambda _: read({row.key: row.text}), repeat, forget)
        queried = _median_ms(lambda _: read(None), repeat, forget)
        print(f"  a version's new row: from its head {carried:.3f} ms, by a query {queried:.3f} ms")
        statement = prepared_boards._version_statement()
        params = {"phase_id": phase.id, "task_id": phase.task_id}
        core = _median_ms(lambda _: session.connection().execute(statement, params).one(), repeat)
        orm = _median_ms(lambda _: session.execute(statement, params).one(), repeat)
        print(f"  the version's query: on the connection {core:.3f} ms, through the ORM "
              f"{orm:.3f} ms")
        session.close()
    print(f"  together: {apart + queried + orm - together - carried - core:.2f} ms less a first "
          "page on the other worker")


if __name__ == "__main__":
    main()
