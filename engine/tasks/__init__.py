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


def benchmark_task(name: str) -> type[Task]:
    """The task that owns a benchmark's official scorer, by task name or benchmark name (homebench)."""
    _load_builtin()
    for task in map(TASKS.get, TASKS.names()):
        if name in (task.name, task.benchmark):
            return task
    return TASKS.get(name)  # unknown: an InputError that lists the known tasks


def benchmark_names() -> list[str]:
    _load_builtin()
    return sorted(TASKS.get(n).benchmark for n in TASKS.names())


def _load_builtin() -> None:
    # importing registers; kept lazy so `engine.tasks` stays cheap to import
    import engine.tasks.failure_attribution  # noqa: F401
    import engine.tasks.rbac_sql  # noqa: F401
    import engine.tasks.smart_home  # noqa: F401


__all__ = ["TASKS", "Task", "Item", "Environment", "StepResult", "get_task", "task_class", "task_names", "benchmark_task",
           "benchmark_names"]
