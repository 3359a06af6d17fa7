"""The house rules of `semboard/` (docs/ARCHITECTURE.md), read from the code's own imports.

Every import counts, the ones inside functions too: no loop among semboard modules; services
never import jobs, views, the API, the CLI or web plumbing; jobs never import views or the API;
nothing imports the package root; an import inside a function says why on its line.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "semboard"

# layer -> what it must never import
FORBIDDEN = {
    # services record events (notify.events) and check targets (notify.targets); sending is
    # the bus's consumers' (mail.delivery, notify.bus/channels/webhooks), off the request
    "semboard.services": ("semboard.jobs", "semboard.views", "semboard.api", "semboard.cli",
                          "semboard.web", "semboard.mail.delivery", "semboard.notify.bus",
                          "semboard.notify.channels", "semboard.notify.webhooks"),
    "semboard.jobs": ("semboard.views", "semboard.api", "semboard.cli", "semboard.web"),
    "semboard.mail": ("semboard.services", "semboard.jobs", "semboard.views", "semboard.api",
                      "semboard.cli"),
    "semboard.notify": ("semboard.services", "semboard.jobs", "semboard.views", "semboard.api",
                        "semboard.cli", "semboard.web"),
    "semboard.web": ("semboard.views", "semboard.api", "semboard.cli", "semboard.jobs"),
    "semboard.views": ("semboard.api", "semboard.cli"),
    "semboard.api": ("semboard.views", "semboard.cli"),
}
TOP_LEVEL_MODULES_MAX = 12
# semboard/services/ by domain, bottom first: a package imports only itself and those before it.
SERVICE_STACK = ("tasks", "people", "data", "runs", "models", "boards", "closing")
# The classes of long-lived threads a process owns and stops itself (not background work).
THREAD_CLASSES = {"semboard.jobs.boards": "GroupsKeeper", "semboard.jobs.schedule": "Ticker",
                  "semboard.serve.follow": "Follower"}


def _module(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _target(name: str, known: set[str]) -> str | None:
    while name:
        if name in known:
            return name
        name = name.rpartition(".")[0]
    return None


def _imports(path: Path, module: str, known: set[str]) -> list[tuple[str, int, bool, str]]:
    """(imported semboard module, line, inside a function, source line) for every import."""
    source = path.read_text(encoding="utf-8")
    lines = source.splitlines()
    tree = ast.parse(source)
    inside = {id(node) for func in ast.walk(tree)
              if isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef)
              for node in ast.walk(func)}
    type_only = {id(node) for guard in ast.walk(tree)
                 if isinstance(guard, ast.If) and "TYPE_CHECKING" in ast.unparse(guard.test)
                 for node in ast.walk(guard)}
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        if id(node) in type_only:
            continue
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            names = [f"{base}.{alias.name}" for alias in node.names]
        for name in names:
            found.append((_target(name, known) or name, node.lineno, id(node) in inside,
                          lines[node.lineno - 1]))
    return found


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    known = set(modules)
    return {m: {t for t, *_ in _imports(p, m, known) if t in known and t != m}
            for m, p in modules.items()}


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def test_no_import_loop_among_semboard_modules() -> None:
    assert _cycles(_graph()) == []


def test_the_cycle_finder_finds_a_loop() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == [["a", "b", "c"]]


def test_layers_import_only_downwards() -> None:
    wrong = [f"{m} imports {t}" for m, targets in _graph().items() for t in targets
             for layer, banned in FORBIDDEN.items()
             if (m == layer or m.startswith(layer + ".")) and t.startswith(banned)]
    assert wrong == []


def test_nothing_imports_the_package_root() -> None:
    assert [m for m, targets in _graph().items() if "semboard" in targets] == []


def test_an_import_inside_a_function_says_why() -> None:
    modules = _modules()
    known = set(modules)
    silent = [f"{p.relative_to(PACKAGE.parent)}:{line}: {text.strip()}"
              for m, p in modules.items() for _t, line, local, text in _imports(p, m, known)
              if local and "#" not in text]
    assert silent == []


def test_the_top_of_the_package_stays_small_and_every_folder_says_what_it_is_for() -> None:
    top = [p.name for p in PACKAGE.glob("*.py")]
    assert len(top) <= TOP_LEVEL_MODULES_MAX, sorted(top)
    for init in PACKAGE.glob("*/__init__.py"):
        doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8")))
        assert doc and "\n" not in doc.strip(), f"{init}: a one-line docstring says its purpose"


def _service_package(module: str) -> str | None:
    parts = module.split(".")
    return parts[2] if len(parts) > 3 and parts[:2] == ["semboard", "services"] else None


def test_services_are_domain_packages_stacked_in_one_direction() -> None:
    packages = {_service_package(m) for m in _modules()} - {None}
    assert packages == set(SERVICE_STACK)
    assert not [m for m in _modules() if m.count(".") == 2 and m.startswith("semboard.services.")
                and m.split(".")[2] not in SERVICE_STACK]  # no module left beside the packages
    upward = [f"{m} imports {t}" for m, targets in _graph().items() for t in targets
              if (a := _service_package(m)) and (b := _service_package(t))
              and SERVICE_STACK.index(b) > SERVICE_STACK.index(a)]
    assert upward == []


def test_config_imports_no_service() -> None:
    """Configuration is read first and by everything: it imports nothing of the site."""
    assert _graph()["semboard.config"] == set()


def _private_names_used_across_modules(files: dict[str, Path]) -> list[str]:
    known = set(files)
    found = []
    for module, path in files.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        aliases: dict[str, str] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("semboard"):
                for alias in node.names:
                    full = f"{node.module}.{alias.name}"
                    if full in known:
                        aliases[alias.asname or alias.name] = full
                    elif alias.name.startswith("_") and not alias.name.startswith("__"):
                        found.append(f"{module}:{node.lineno} imports {full}")
            elif isinstance(node, ast.Import):
                aliases.update({a.asname: a.name for a in node.names
                                if a.asname and a.name in known})
        found += [f"{module}:{node.lineno} uses {aliases[node.value.id]}.{node.attr}"
                  for node in ast.walk(tree)
                  if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                  and node.value.id in aliases and node.attr.startswith("_")
                  and not node.attr.startswith("__")]
    return found


def test_no_private_name_is_used_across_modules() -> None:
    """A `_name` is its module's own: another module needing it means it is public or moves."""
    assert _private_names_used_across_modules(_modules()) == []


def test_the_private_name_finder_finds_one(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("from semboard.x import _hidden\nfrom semboard import y\n"
                                   "y._inner()\n")
    (tmp_path / "y.py").write_text("")
    found = _private_names_used_across_modules({"a": tmp_path / "a.py",
                                                "semboard.y": tmp_path / "y.py"})
    assert found == ["a:1 imports semboard.x._hidden", "a:3 uses semboard.y._inner"]


def test_one_thread_registry() -> None:
    """Background threads start only through jobs.queue.start_thread (dispatch uses it), which
    registers them for wait_for_threads; the only other threads are the listed loops."""
    started, classes = [], []
    for module, path in _modules().items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and ast.unparse(node.func) in (
                    "threading.Thread", "Thread", "threading.Timer", "Timer"):
                started.append(f"{module}:{node.lineno}")
            if isinstance(node, ast.ClassDef) and any(
                    ast.unparse(b) in ("threading.Thread", "Thread") for b in node.bases):
                classes.append((module, node.name))
    assert [s for s in started if not s.startswith("semboard.jobs.queue:")] == []
    assert len([s for s in started if s.startswith("semboard.jobs.queue:")]) == 1
    assert classes == list(THREAD_CLASSES.items())


def test_no_page_or_api_route_builds_a_board() -> None:
    """Pages, the API and their plumbing read prepared boards (services.boards.prepared); only
    the write path (jobs.boards, prepared.store_prepared) and exports build one."""
    builders = [f"{module}:{node.lineno}" for module, path in _modules().items()
                if module.startswith(("semboard.views", "semboard.api", "semboard.web"))
                for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
                if isinstance(node, ast.Name | ast.Attribute)
                and (node.id if isinstance(node, ast.Name) else node.attr) == "build_leaderboard"]
    assert builders == []
