"""Exceptions of rills that carry more than a builtin type.

query_sql() (and everything else that runs SQL on live tables) raises a
SQLError when DuckDB refuses a query. SQLError is a ValueError, so existing
`except ValueError` code keeps working; its `error_type` attribute is DuckDB's
name of the error class, and the common classes have their own subclass:

    try:
        engine.query_sql("SELECT * FROM missing")
    except rills.CatalogError:      # e.error_type == "Catalog"
        ...
    except rills.ParserError:       # e.error_type == "Parser"
        ...

| subclass | error_type | typical cause |
|---|---|---|
| CatalogError | "Catalog" | unknown table, view or function |
| ParserError | "Parser" | SQL syntax error |
| BinderError | "Binder" | unknown column, type mismatch in an expression |
| ConversionError | "Conversion" | a value that cannot be cast |
| InvalidInputError | "Invalid Input" | bad arguments to a function |
| OutOfRangeError | "Out of Range" | overflow, out-of-range values |
| InterruptError | "Interrupt" | the query was interrupted |

Other DuckDB classes raise SQLError itself with their `error_type`.
"""

from __future__ import annotations

from typing import Dict, Type

__all__ = [
    "DDLError", "SQLError", "CatalogError", "ParserError", "BinderError", "ConversionError",
    "InvalidInputError", "OutOfRangeError", "InterruptError",
]


class DDLError(ValueError):
    """A CREATE / DROP / SHOW statement was refused (RillEngine.execute_ddl).

    `sqlstate` is the PostgreSQL code a psql client would see: 42601 syntax
    or unknown / missing option, 22023 a bad value, 42704 a missing object,
    42710 a name that exists, 2BP01 a DROP others depend on.
    """

    sqlstate: str = ""

    def __init__(self, message: str, sqlstate: str = "") -> None:
        super().__init__(message)
        self.sqlstate = sqlstate


class SQLError(ValueError):
    """DuckDB refused a query. `error_type`: DuckDB's error class ("Catalog", "Parser", "Binder", ...)."""

    error_type: str = ""

    def __init__(self, message: str, error_type: str = "") -> None:
        super().__init__(message)
        if error_type:
            self.error_type = error_type


class CatalogError(SQLError):
    """Unknown table, view, schema or function (DuckDB "Catalog" error)."""

    error_type = "Catalog"


class ParserError(SQLError):
    """The SQL text does not parse (DuckDB "Parser" error)."""

    error_type = "Parser"


class BinderError(SQLError):
    """Unknown column or an expression of the wrong type (DuckDB "Binder" error)."""

    error_type = "Binder"


class ConversionError(SQLError):
    """A value could not be converted to the requested type (DuckDB "Conversion" error)."""

    error_type = "Conversion"


class InvalidInputError(SQLError):
    """A function got input it cannot handle (DuckDB "Invalid Input" error)."""

    error_type = "Invalid Input"


class OutOfRangeError(SQLError):
    """A value is out of range, e.g. an integer overflow (DuckDB "Out of Range" error)."""

    error_type = "Out of Range"


class InterruptError(SQLError):
    """The query was interrupted (DuckDB "Interrupt" error)."""

    error_type = "Interrupt"


_BY_TYPE: Dict[str, Type[SQLError]] = {
    cls.error_type: cls
    for cls in (CatalogError, ParserError, BinderError, ConversionError, InvalidInputError,
                OutOfRangeError, InterruptError)
}


def _sql_error(message: str, error_type: str) -> SQLError:
    """The exception for a refused query (called by the C++ status mapping)."""
    cls = _BY_TYPE.get(error_type, SQLError)
    return cls(message, error_type)
