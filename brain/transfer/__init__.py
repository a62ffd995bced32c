"""Import and export of a space's brain, one package.

- ``serializers``: an import item's wire shape (``ImportItemSerializer``, the API's and the schema's;
  ``RestoreItemSerializer``, the operator's) and the dump rows' cleaners.
- ``services``: storing a batch of thoughts, the deferred links, query-log rows and suggestions.
- ``dumps``: checking a whole file before its first batch (``dump_plan``).
- ``export``: Colony's own export (``space_export_rows``).
- ``readers``: the file formats ``manage.py brain import`` reads (Colony, Mem0, the seed brain).
- ``apis``: ``POST /api/v1/thoughts/import``; ``cli``: ``manage.py brain import`` / ``export``.
"""

from brain.transfer.dumps import DumpInvalid, dump_plan
from brain.transfer.export import EXPORT_FORMAT, space_export_rows
from brain.transfer.serializers import ImportItemSerializer, RestoreItemSerializer, item_clean
from brain.transfer.services import (
    ImportConflict,
    ImportInvalid,
    ImportMode,
    ImportTooLarge,
    querylogs_import,
    suggestions_import,
    thoughts_import,
    thoughts_import_links,
)

__all__ = [
    "EXPORT_FORMAT",
    "DumpInvalid",
    "ImportConflict",
    "ImportInvalid",
    "ImportItemSerializer",
    "ImportMode",
    "ImportTooLarge",
    "RestoreItemSerializer",
    "dump_plan",
    "item_clean",
    "querylogs_import",
    "space_export_rows",
    "suggestions_import",
    "thoughts_import",
    "thoughts_import_links",
]
