"""A version's whole-board JSON in one piece or in pieces of one size, in one process (issue 45,
stop 56): what each new version's body costs in page faults and CPU while the last versions'
bodies are still held, what sending it costs over a local socket, and what compiling the packed
body's read costs (once per process).

    python benchmarks/bench_body_pieces.py [--bytes 3400000] [--versions 60] [--keep 2]

The body is bytes of the given size; each version a row (700 bytes) longer, as an upload makes
it. One piece: the head, the rows and the tail joined (what Layout made before); pieces:
stored.chunked (what Layout.chunks makes). The figures are the median over the versions after
the first 10 (the allocator's first ones are fresh either way).
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import socket
import statistics
import threading
import time
from collections.abc import Callable
from typing import Any

from sqlalchemy import Integer, String, bindparam, select
from sqlalchemy.dialects import postgresql

from semboard.models import PreparedBoard
from semboard.services.boards import prepared as prepared_boards
from semboard.services.boards import stored


def _faults() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def versions(make: Callable[[int], Any], size: int, count: int, keep: int
             ) -> tuple[float, float]:
    """Median minor page faults and CPU ms of making each version's body, the last `keep`
    held."""
    held: list[Any] = []
    faults, cpu = [], []
    for version in range(count):
        before, started = _faults(), time.process_time()
        body = make(size + 700 * version)
        garbage = [bytes(200_000) for _ in range(3)]  # what else a request allocates and frees
        del garbage
        faults.append(_faults() - before)
        cpu.append((time.process_time() - started) * 1000)
        held.append(body)
        del held[:-keep]
    return statistics.median(faults[10:]), statistics.median(cpu[10:])


def sending(body: bytes, pieces: tuple[bytes, ...], rounds: int = 30) -> tuple[float, float]:
    """Median CPU ms of sending the body in one sendall, and a sendall a piece, to a reader
    on a local socket."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)

    def read() -> None:
        conn, _ = server.accept()
        while conn.recv(1 << 20):
            pass

    threading.Thread(target=read, daemon=True).start()
    out = socket.create_connection(server.getsockname())
    one, each = [], []
    for _ in range(rounds):
        started = time.thread_time()
        out.sendall(body)
        one.append((time.thread_time() - started) * 1000)
        started = time.thread_time()
        for piece in pieces:
            out.sendall(piece)
        each.append((time.thread_time() - started) * 1000)
    out.close()
    return statistics.median(one), statistics.median(each)


def compiling(statement: Any, rounds: int = 20) -> float:
    """Median CPU ms of compiling a statement for PostgreSQL (what a process's first use of it
    pays, the compiler itself warmed: a process's very first compile costs tens of ms more)."""
    dialect = postgresql.psycopg.dialect()  # type: ignore[attr-defined]
    select(PreparedBoard.id).compile(dialect=dialect)  # the compiler's own first use
    spent = []
    for _ in range(rounds):
        started = time.process_time()
        statement.compile(dialect=dialect)
        spent.append((time.process_time() - started) * 1000)
    return statistics.median(spent)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bytes", type=int, default=3_400_000)
    parser.add_argument("--versions", type=int, default=60)
    parser.add_argument("--keep", type=int, default=2)
    parser.add_argument("--piece", type=int, default=stored.BODY_CHUNK,
                        help="the pieces' bytes (default stored.BODY_CHUNK)")
    args = parser.parse_args()
    rows = memoryview(os.urandom(args.bytes + 700 * args.versions))
    head, tail = b'{"task": "sts2012", "rows": [', b"]}"

    def whole(size: int) -> bytes:
        return b"".join([head, rows[:size], tail])

    def pieces(size: int) -> tuple[bytes, ...]:
        return stored.chunked([head, rows[:size], tail], args.piece)

    print(f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
          f"load {os.getloadavg()[0]:.1f}; a {args.bytes:,}-byte body, {args.versions} "
          f"versions, the last {args.keep} held")
    print("| body | page faults a version (median) | CPU a version (median) |")
    print("| --- | ---: | ---: |")
    for name, make in (("one piece (b''.join)", whole),
                       (f"pieces of {args.piece:,} bytes (stored.chunked)", pieces)):
        faults, cpu = versions(make, args.bytes, args.versions, args.keep)
        print(f"| {name} | {faults:.0f} | {cpu:.2f} ms |")
    one, each = sending(whole(args.bytes), pieces(args.bytes))
    print(f"sent over a local socket, CPU (median of 30): one sendall {one:.2f} ms, "
          f"a sendall a piece {each:.2f} ms")
    plain = select(PreparedBoard.json_gzip).where(
        PreparedBoard.phase_id == bindparam("phase_id", type_=Integer),
        PreparedBoard.version == bindparam("version", type_=String))
    print(f"compiling the packed body's read for PostgreSQL, CPU: in pieces (the recursive "
          f"CTE) {compiling(prepared_boards._PACKED_READS['json']):.2f} ms, one value (the "
          f"select before) {compiling(plain):.2f} ms")


if __name__ == "__main__":
    main()
