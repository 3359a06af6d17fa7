"""The one thread registry: wait_for_threads waits for every background thread, those a thread
starts meanwhile too, and never meets one that is registered but not started."""

from __future__ import annotations

import threading
import time

from semboard.jobs import queue as job_queue


def test_threads_started_by_a_waited_thread_are_waited_for_too() -> None:
    done: list[str] = []

    def child() -> None:
        time.sleep(0.3)
        done.append("child")

    def parent() -> None:
        time.sleep(0.1)  # wait_for_threads has taken its first look by now
        job_queue.start_thread(child, name="semboard-test-child")
        done.append("parent")

    job_queue.start_thread(parent, name="semboard-test-parent")
    job_queue.wait_for_threads(30)
    assert done == ["parent", "child"]


def test_a_thread_is_never_seen_registered_before_it_starts() -> None:
    seen: list[str] = []
    stop = threading.Event()

    def look() -> None:  # another thread joins the registry while threads start
        while not stop.is_set():
            try:
                job_queue.wait_for_threads(0.01)
            except RuntimeError as err:  # "cannot join thread before it is started"
                seen.append(str(err))

    watcher = threading.Thread(target=look, daemon=True)
    watcher.start()
    for i in range(300):
        job_queue.start_thread(lambda: None, name=f"semboard-test-{i}")
    stop.set()
    watcher.join(30)
    job_queue.wait_for_threads(30)
    assert seen == []


def test_once_a_thread_runs_ast_parse_takes_turns() -> None:
    """Two threads never build ASTs at once (CPython 3.11 shares the AST constructor's
    recursion count between threads): a parse waits while another holds the turn."""
    import ast

    job_queue.start_thread(lambda: None, name="test-ast-turns")
    job_queue.wait_for_threads(10)
    parsed = threading.Event()

    def parse() -> None:
        ast.literal_eval("{'descr': '<f8', 'shape': (3,)}")  # as np.load reads a header
        parsed.set()

    with job_queue.AST_TURNS:
        other = threading.Thread(target=parse)
        other.start()
        assert not parsed.wait(0.5)  # waits for its turn
    assert parsed.wait(10)
    other.join()


def test_a_forked_child_parses_while_a_parent_thread_held_the_turn() -> None:
    """A child forked while another thread held the AST turn gets a free one (rq forks its
    scheduler from a worker whose threads may be parsing)."""
    import ast
    import os
    import signal

    job_queue.ast_in_turns()
    with job_queue.AST_TURNS:
        pid = os.fork()
        if pid == 0:  # the child: parse, then leave at once
            ast.parse("x = 1")
            os._exit(0)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            assert os.waitstatus_to_exitcode(status) == 0
            return
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    raise AssertionError("the forked child waited for a turn no thread of it held")
