"""`flask notify-deadlines`: queue the 'deadline in 24 hours' mails (run it hourly from cron)."""

from __future__ import annotations

import click
from flask.cli import with_appcontext

from semboard.clock import utcnow
from semboard.db import get_session
from semboard.mail.delivery import mail_available
from semboard.services.people import account_links


@click.command("notify-deadlines")
@with_appcontext
def notify_deadlines_cli() -> None:
    """Mail every member whose team deadline is within 24 hours (once per deadline)."""
    if not mail_available():
        raise click.ClickException("SEMBOARD_MAIL_URL is not set: no mail can be sent")
    session = get_session()
    queued = account_links.queue_deadline_reminders(session, now=utcnow())
    session.commit()  # the mails leave after this commit
    click.echo(f"{queued} reminder(s) queued")
