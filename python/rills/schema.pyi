"""Schemas carrying a table's primary key and mode in their metadata."""

from typing import Dict, List, Optional, Sequence, Tuple, Union

import pyarrow as pa

FieldSpec = Union[Tuple[str, pa.DataType], pa.Field]

def schema(
    fields: Union[Sequence[FieldSpec], pa.Schema],
    primary_key: Optional[Union[str, List[str]]] = None,
    mode: Optional[str] = None,
    metadata: Optional[Dict[str, str]] = None,
) -> pa.Schema:
    """Return a schema with b"primary_key"/b"mode" metadata and the z_insert_ts/z_update_ts columns."""

def extract_primary_key(schema_obj: Optional[pa.Schema]) -> Optional[Union[str, List[str]]]:
    """Return the key recorded in the schema: a str, a list for a composite key, or None."""

def extract_mode(schema_obj: Optional[pa.Schema]) -> str:
    """Return the recorded mode: "append" or "snapshot" (default)."""

def estimate_schema_row_size(
    schema_obj: pa.Schema,
    avg_string_length: int = 32,
    avg_list_length: int = 5,
    include_validity_bitmap: bool = True,
) -> float:
    """Return the estimated in-memory bytes of one row."""

def normalize_mode(mode: Optional[str]) -> Optional[str]:
    """Return "snapshot" or "append" for a mode name (alias "upsert")."""
def estimate_datatype_size(
    data_type: pa.DataType, avg_string_length: int = 32, avg_list_length: int = 5
) -> float:
    """Estimated bytes of one value of data_type (the seed's rules)."""
