"""Nothing users or organisers write is rendered raw (issue 40): every template autoescapes, the
Atom feed included, and the site's CSV and LaTeX exports keep team and run names inert."""

from __future__ import annotations

import csv
import io
import xml.etree.ElementTree as ET
from pathlib import Path

from semboard.i18n.catalogues import Words
from semboard.services.boards import analysis
from semboard.services.closing import archive, papertables
from semboard.services.runs import submissions
from semboard.services.tasks import announcements

ATOM = "{http://www.w3.org/2005/Atom}"
TEMPLATES = Path(__file__).resolve().parents[3] / "templates"

TITLE = "Q&A session for scores < 0.5"
BODY = ("Bring questions ]]> & answers. <script>alert('feed')</script> "
        "<b>bold</b> <img src=x onerror=alert(1)> \"quoted\" 'single' &amp; done")


def test_every_template_autoescapes(app):
    """Flask escapes only .html, .htm, .xml, .xhtml and .svg by their names: the site escapes
    every template it has, whatever its extension (an .atom feed among them)."""
    names = sorted(p.relative_to(TEMPLATES).as_posix() for p in TEMPLATES.rglob("*")
                   if p.is_file())
    assert "tasks/announcements.atom" in names
    choose = app.jinja_env.autoescape
    unescaped = [n for n in names if not (choose(n) if callable(choose) else choose)]
    assert unescaped == []
    assert app.jinja_env.from_string("{{ v }}").render(v="<b>") == "&lt;b&gt;"
    static = archive._environment(Words("ar")).autoescape  # the static archive's own
    assert static is True or all(static(n) for n in names)


# a message whose markup is the site's own (a link), with a value someone else wrote
LINKED = """{{ _('<a href="%(url)s">Log in</a> to accept these terms.', url=url) }}"""


def test_a_translated_message_keeps_its_own_markup_and_escapes_its_values(app) -> None:
    """Markup in a msgid is the site's (it went through review, like a template); the values
    filled into it are escaped on the site and in the static archive, in every language."""
    hostile = '"><script>alert(1)</script>'
    for code in ("en", "ar"):
        with app.test_request_context(headers={"Accept-Language": code}):
            page = app.jinja_env.from_string(LINKED).render(url=hostile)
        said = archive._environment(Words(code)).from_string(LINKED).render(url=hostile)
        for out in (page, said):
            assert out.count("<a href=") == 1 and "</a>" in out, (code, out)
            assert "<script>" not in out and "&lt;script&gt;" in out, (code, out)
    assert "سجّل الدخول" in said, said  # the Arabic catalogue answered


def test_the_feed_is_well_formed_xml_whatever_the_organisers_write(app, client, session, make,
                                                                    now):
    app.config["SEMBOARD_CLOCK"] = lambda: now
    task = make.task()
    task.title = "Tiny <i>STS</i> & friends"
    announcements.post(session, task=task, user=None, title=TITLE, body=BODY, now=now)
    session.commit()
    feed = client.get("/tasks/tiny/announcements.atom")
    assert feed.status_code == 200
    root = ET.fromstring(feed.get_data())  # a real XML parser: malformed XML raises here
    assert root.findtext(f"{ATOM}title") == "Tiny <i>STS</i> & friends: announcements"
    (entry,) = root.findall(f"{ATOM}entry")
    assert entry.findtext(f"{ATOM}title") == TITLE
    assert entry.findtext(f"{ATOM}content") == BODY
    tags = {element.tag.rpartition("}")[2] for element in root.iter()}
    assert tags.isdisjoint({"script", "b", "img", "i"}), tags
    # the page shows the same text, escaped
    page = client.get("/tasks/tiny/announcements").get_data(as_text=True)
    assert "<script>alert('feed')</script>" not in page and "&lt;script&gt;" in page


NASTY_TEAM = "=HYPERLINK(\"http://x\") {\\input{x}} ^~%$#_&"


def test_paper_tables_keep_names_inert(app, session, make, now, tiny_data):
    """A team or run name that would start a spreadsheet formula or run LaTeX stays text."""
    task = make.task(with_gold=True)
    phase = make.phase(task, "eval")
    team, captain = make.team(task, "placeholder")
    team.name = NASTY_TEAM  # past the name rules: the export must hold on its own
    session.commit()
    submissions.submit(session, make.storage, team=team, phase=phase, user=captain,
                       name="-run+1", files=tiny_data.run(seed=1), now=now)
    session.commit()
    table = papertables.runs_table(session, task=task, phase=phase, now=now)
    cells = [cell for row in csv.reader(io.StringIO(table.to_csv())) for cell in row]
    named = [c for c in cells if "HYPERLINK" in c or "run+1" in c]
    assert named and all(c.startswith("'") for c in named), named
    latex = table.to_latex()
    assert "\\input{x}" not in latex and "{\\textbackslash{}input\\{x\\}}" not in latex
    assert "\\{\\textbackslash{}input\\{x\\}\\}" in latex
    assert "\\textasciicircum{}\\textasciitilde{}\\%\\$\\#\\_\\&" in latex


def test_per_item_csv_keeps_texts_inert():
    """A pair's text from the task's inputs that starts a formula stays text; numbers stay
    numbers (a negative error included)."""
    rows = [analysis.Item("alpha", "1", None, "=1+2", "@SUM(A1)", 4.0, 3.5, 3.6, -0.4),
            analysis.Item("alpha", "2", "news", "plain", "-dash", None, 1.0, 1.1, None)]
    parsed = list(csv.reader(io.StringIO(analysis.items_csv(rows))))
    assert parsed[1] == ["alpha", "1", "", "'=1+2", "'@SUM(A1)", "4.0", "3.5", "3.6", "-0.4"]
    assert parsed[2] == ["alpha", "2", "news", "plain", "'-dash", "", "1.0", "1.1", ""]
