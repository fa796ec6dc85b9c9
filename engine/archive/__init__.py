from engine.archive.store import DEFAULT_PATH, Archive, ArchiveError

__all__ = ["Archive", "ArchiveError", "DEFAULT_PATH"]
