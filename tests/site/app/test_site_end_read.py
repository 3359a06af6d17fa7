"""db.end_read ends a transaction before slow work only where it merely read."""

from __future__ import annotations

import pytest
from sqlalchemy import select, update

from semboard.db import end_read
from semboard.models import User

databases = pytest.mark.parametrize(
    "database_url", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)],
    indirect=True)


@databases
def test_a_read_ends_and_keeps_what_it_loaded(session, make):
    user = make.user()
    session.commit()
    found = session.scalar(select(User).where(User.id == user.id))
    assert session.in_transaction()
    end_read(session)
    assert not session.in_transaction()
    assert found is not None and found.email.endswith("@example.org")
    assert not session.in_transaction()  # reading the loaded row started no new transaction


@databases
def test_a_transaction_that_wrote_is_left_to_its_owner(session, make):
    user = make.user()
    session.commit()
    user.display_name = "Renamed"
    session.flush()  # written, though nothing is pending now
    end_read(session)
    assert session.in_transaction()
    session.rollback()
    assert session.get(User, user.id).display_name != "Renamed"
    session.execute(update(User).where(User.id == user.id).values(display_name="Bulk"))
    end_read(session)
    assert session.in_transaction()
    session.rollback()
    # after it ends, the next transaction that only reads is ended again
    session.scalar(select(User.id))
    end_read(session)
    assert not session.in_transaction()
    user.display_name = "Pending"
    end_read(session)  # an unflushed change: left alone, not committed
    session.rollback()
    assert session.get(User, user.id).display_name != "Pending"
