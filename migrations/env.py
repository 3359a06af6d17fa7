"""Alembic environment: the models' metadata and the app's DATABASE_URL."""

from __future__ import annotations

import os

from alembic import context

from semboard.db import make_engine
from semboard.models import Base

config = context.config
target_metadata = Base.metadata


def database_url() -> str:
    """The URL given by semboard's CLI, else alembic.ini, else DATABASE_URL, else the app's."""
    url = config.attributes.get("url") or config.get_main_option("sqlalchemy.url")
    if url:
        return url
    if os.environ.get("DATABASE_URL"):
        return os.environ["DATABASE_URL"]
    from semboard import create_app

    return create_app().config["DATABASE_URL"]


def run_migrations_offline() -> None:
    """Emit SQL without a connection."""
    context.configure(url=database_url(), target_metadata=target_metadata,
                      literal_binds=True, render_as_batch=True)
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    """Migrate through a live connection (batch mode so SQLite can alter tables)."""
    connection = config.attributes.get("connection")
    if connection is not None:
        context.configure(connection=connection, target_metadata=target_metadata,
                          render_as_batch=True)
        with context.begin_transaction():
            context.run_migrations()
        return
    engine = make_engine(database_url())
    with engine.connect() as connection:
        context.configure(connection=connection, target_metadata=target_metadata,
                          render_as_batch=True)
        with context.begin_transaction():
            context.run_migrations()
    engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
