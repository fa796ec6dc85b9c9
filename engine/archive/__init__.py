from engine.archive.store import DEFAULT_PATH, Archive, ArchiveError, insert_rows

__all__ = ["Archive", "ArchiveError", "DEFAULT_PATH", "insert_rows"]
