"""Role-aware text-to-SQL (Spider-AC)."""
