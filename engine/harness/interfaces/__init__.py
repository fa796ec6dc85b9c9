"""The output interface registry: how a harness asks the model to format its actions."""
from engine.harness.interfaces.base import MISMATCH_KINDS, Call, Interface, ParseError, SchemaError
from engine.harness.interfaces.json_list import JsonInterface
from engine.harness.interfaces.tool_call import ToolCallInterface
from engine.harness.interfaces.xml_calls import XmlInterface
from engine.registry import Registry

INTERFACES: Registry[type[Interface]] = Registry("interface")
for _cls in (JsonInterface, XmlInterface, ToolCallInterface):
    INTERFACES.register(_cls.name)(_cls)


def get_interface(name: str) -> Interface:
    return INTERFACES.get(name)()


__all__ = ["MISMATCH_KINDS", "Call", "Interface", "ParseError", "SchemaError", "INTERFACES", "get_interface"]
