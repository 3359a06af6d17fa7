"""Problems found in a run, inputs, gold or task definition."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Issue:
    """One problem, located by file and line where it has a location."""

    file: str | None
    line: int | None
    message: str
    code: str

    def __post_init__(self) -> None:
        # numpy integers (line numbers from array indices) are not JSON: keep plain Python values.
        if self.line is not None:
            object.__setattr__(self, "line", int(self.line))
        for name in ("file", "message", "code"):
            value = getattr(self, name)
            if value is not None and type(value) is not str:
                object.__setattr__(self, name, str(value))

    def __str__(self) -> str:
        if self.file is None:
            return self.message
        if self.line is None:
            return f"{self.file}: {self.message}"
        return f"{self.file}, line {self.line}: {self.message}"

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable form."""
        return {"file": self.file, "line": self.line, "message": self.message, "code": self.code}


# Per file, list this many problems with their lines, then one "... and M more" issue: a gold
# file in the wrong format would otherwise print every one of its lines.
MAX_ISSUES_PER_FILE = 20


def capped(issues: list[Issue], limit: int = MAX_ISSUES_PER_FILE) -> list[Issue]:
    """Per file, the first `limit` issues and then one issue counting the rest."""
    out: list[Issue] = []
    seen: dict[str | None, int] = {}
    for issue in issues:
        n = seen.get(issue.file, 0) + 1
        seen[issue.file] = n
        if n <= limit:
            out.append(issue)
    for file, n in seen.items():
        if n > limit:
            where = f" in {file}" if file else ""
            out.append(Issue(file, None, f"\u2026 and {n - limit} more problem(s){where}",
                             "more"))
    return out


class ValidationError(Exception):
    """Bad content that cannot be used; `.issues` lists the problems (capped per file)."""

    def __init__(self, issues: list[Issue] | Issue | str) -> None:
        if isinstance(issues, str):
            issues = [Issue(None, None, issues, "invalid")]
        elif isinstance(issues, Issue):
            issues = [issues]
        self.total = len(issues)
        self.issues: list[Issue] = capped(list(issues))
        super().__init__("\n".join(str(i) for i in self.issues))


class TaskDefinitionError(Exception):
    """A task definition that cannot be loaded or is inconsistent."""
