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


class ValidationError(Exception):
    """Bad content that cannot be used; `.issues` lists every problem found."""

    def __init__(self, issues: list[Issue] | Issue | str) -> None:
        if isinstance(issues, str):
            issues = [Issue(None, None, issues, "invalid")]
        elif isinstance(issues, Issue):
            issues = [issues]
        self.issues: list[Issue] = list(issues)
        super().__init__("\n".join(str(i) for i in self.issues))


class TaskDefinitionError(Exception):
    """A task definition that cannot be loaded or is inconsistent."""
