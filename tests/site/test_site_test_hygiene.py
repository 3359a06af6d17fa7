"""What every test gets from tests/conftest.py: nothing a test installs outlives it."""

import signal

from redis import Redis
from rq import Queue, SimpleWorker

from tests.conftest import signal_handlers_kept


def test_rq_s_signal_handlers_do_not_outlive_the_test_that_ran_a_worker(redis_url: str) -> None:
    before = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    connection = Redis.from_url(redis_url)
    worker = SimpleWorker([Queue("hygiene", connection=connection)], connection=connection)
    with signal_handlers_kept():
        worker.work(burst=True)  # installs its handlers for SIGINT and SIGTERM, and keeps them
        assert signal.getsignal(signal.SIGTERM) == worker.request_stop
    assert (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)) == before
