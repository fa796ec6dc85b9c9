"""The task registry. Each vertical has a loader, a generator, an environment and a scorer."""
from engine.registry import Registry
from engine.tasks.base import Environment, Item, StepResult, Task

TASKS: Registry[type[Task]] = Registry("task")


def get_task(name: str, data_dir) -> Task:
    return task_class(name)(data_dir)


def task_names() -> list[str]:
    _load_builtin()
    return TASKS.names()


def task_class(name: str) -> type[Task]:
    _load_builtin()
    return TASKS.get(name)


def _load_builtin() -> None:
    # importing registers; kept lazy so `engine.tasks` stays cheap to import
    import engine.tasks.failure_attribution  # noqa: F401
    import engine.tasks.rbac_sql  # noqa: F401
    import engine.tasks.smart_home  # noqa: F401


__all__ = ["TASKS", "Task", "Item", "Environment", "StepResult", "get_task", "task_class", "task_names"]
