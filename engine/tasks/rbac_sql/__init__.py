"""Role-aware text-to-SQL (Spider-AC): answer a question with SQL the role may run, or refuse."""
from engine.tasks.rbac_sql.task import RbacSqlTask

__all__ = ["RbacSqlTask"]
