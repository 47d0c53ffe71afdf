"""Method plugins. Importing the package registers the built-in methods (one module each)."""

from methods import direct, geak, reflexion  # noqa: F401 - registers the built-ins

__all__ = ["direct", "geak", "reflexion"]
