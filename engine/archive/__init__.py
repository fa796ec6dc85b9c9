from engine.archive.store import DEFAULT_PATH, Archive, ArchiveError, insert_rows, is_probe, probe_split

__all__ = ["Archive", "ArchiveError", "DEFAULT_PATH", "insert_rows", "is_probe", "probe_split"]
