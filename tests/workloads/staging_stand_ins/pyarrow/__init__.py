"""Stand-in for pyarrow: a table is a list of rows, stored as JSON by pyarrow.parquet."""


class Column:
    """One column's values."""

    def __init__(self, values: list) -> None:
        self.values = values

    def to_pylist(self) -> list:
        """The column's values."""
        return list(self.values)


class Table:
    """Rows of dicts."""

    def __init__(self, rows: list[dict]) -> None:
        self.rows = rows

    @classmethod
    def from_pylist(cls, rows: list[dict]) -> "Table":
        """A table of these rows."""
        return cls(list(rows))

    def column(self, name: str) -> Column:
        """The values of column `name`."""
        return Column([row[name] for row in self.rows])
