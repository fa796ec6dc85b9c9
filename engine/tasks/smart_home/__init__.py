from engine.tasks.smart_home.task import SmartHomeTask

__all__ = ["SmartHomeTask"]
